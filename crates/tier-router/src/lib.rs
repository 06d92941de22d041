//! tierlog's router: any enabled subset of tiers — the WAL always, warm (Valkey) and cold
//! (object storage) when configured — as one log per topic.
//!
//! - [`TieredStore`]: opens the tiers from a [`StoreConfig`] or from parts
//!   ([`TieredStore::builder`]), recovers topics ([`RecoveryReport`]), runs the
//!   background exporter, deleter and warm trimmer, and closes gracefully.
//! - [`Topic`]: appends (one writer task per topic group-commits to the WAL and warm and
//!   acknowledges only when every enabled write tier confirmed), stitched readers across
//!   cold → warm → WAL → live tail ([`Source`] says which served a record), the tiers'
//!   ranges and the commit point; [`Topic::batch_reader`] reads the same log as verified
//!   batches ([`ReadBatch`]).
//! - [`WarmBackend`] and [`ColdBackend`]: what a [`Tier`](tier_core::Tier) needs to take
//!   the warm or cold position, implemented for tierlog's tiers (features `warm`,
//!   `cold`) and tier-testkit's (feature `testkit`).
//!
//! Features `warm` and `cold` (on by default) link the Valkey and object-store tiers; a
//! build without them links neither `fred` nor `object_store`. The design is described
//! in `docs/router.md`.

mod backend;
mod background;
mod batch_reader;
mod config;
#[cfg(feature = "warm")]
mod lazy_warm;
mod reader;
mod recovery;
mod slice;
mod state;
mod store;
mod topic;
mod writer;

#[cfg(feature = "testkit")]
pub use backend::PagedCold;
pub use backend::{
    ColdBackend, WarmBackend, append_segment, holds_records, paged_records, rebuilt_batches,
    rebuilt_warm_batches, refuse_gap,
};
pub use background::ExportedSegment;
pub use batch_reader::ReadBatch;
pub use config::{BackoffConfig, ConfigError, RouterConfig, StoreConfig, WarmFailurePolicy};
pub use reader::Source;
pub use recovery::RecoveryReport;
pub use store::{StoreBuilder, TieredStore};
pub use topic::{NewRecord, TierRanges, Topic};
