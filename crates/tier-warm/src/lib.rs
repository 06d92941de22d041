//! tierlog's warm tier: record batches in Valkey/Redis Streams, acknowledged by
//! replicas before the producer is.
//!
//! The warm tier makes a write durable off the local disk (`XADD` then `WAIT` for
//! `wait_replicas` replicas) and is what a new node replays when its WAL is lost
//! ([`WarmTier::recovery_stream`]).
//!
//! # Stream layout
//!
//! - One stream per topic, key `<key_prefix><topic>` (default prefix `tierlog:`); in
//!   cluster mode `<key_prefix>{<topic>}`, whose hash tag keeps a topic's keys in one slot.
//! - One entry per [`RecordBatch`](tier_core::RecordBatch), with ID
//!   `<base_offset>-1` (sequence 1 because Valkey refuses the ID `0-0`) and a single
//!   field `b` holding the batch's full encoding, CRC included.
//! - Entries are contiguous: each batch starts where the previous one ended. Readers
//!   check this and report a gap as corruption.
//!
//! `docs/warm.md` describes the append/`WAIT` semantics, idempotency, trimming and the
//! configuration in full.

mod client;
pub mod config;
mod entry;
mod pager;
mod position;
mod read;
mod replicas;
mod tier;
mod tls;

pub use config::{
    ACL_COMMANDS, DEFAULT_KEY_PREFIX, Mode, ReconnectConfig, Secret, WarmConfig, acl_setuser_line,
};
pub use replicas::{ReplicaCheck, WithoutReplicas};
pub use tier::WarmTier;
