//! tierlog's cold tier: sealed segments as objects in object storage (S3, GCS, Azure or a
//! local directory, through the `object_store` crate), read in place with ranged
//! requests guided by each segment's footer index.
//!
//! - [`layout`]: object names `<prefix>/<topic>/<base:020>-<last:020>.seg`, and beside
//!   each segment a zero-byte time marker `<base:020>-<last:020>.ts-<min>-<max>` carrying
//!   its timestamp bounds; the listing of a topic's folder is its manifest.
//! - [`ColdTier::export_segment`]: idempotent upload of a sealed WAL segment file
//!   (conditional PUT, or a streamed multipart upload for large segments).
//! - Reads: [`Tier::read_batches`](tier_core::Tier::read_batches) for bounded reads (and
//!   [`TierExt::read`](tier_core::TierExt::read) over it for records),
//!   [`ColdTier::stream`] for long sequential reads with read-ahead; segment metadata
//!   (trailer + index) is cached in a bounded LRU and recently fetched data intervals in
//!   a byte-bounded one, so a seek by offset or timestamp (lookup then read) costs two
//!   requests cold and one with the index cached.
//! - [`ColdTier::record_gap`]: offsets declared lost upstream, as zero-byte gap
//!   markers, so the log may continue after them and reads name them.
//! - Successor pointers (`<at:020>.next`, see [`Layout::pointer_key`]): the object
//!   continuing the log at each offset, read with GETs, so a listing that lags writes
//!   (an eventually consistent LIST) still yields the whole manifest.
//! - [`ColdTier::record_topic`]: a zero-byte topic marker, durable evidence that a topic
//!   exists while cold holds no segment of it (a lost data directory must not restart it
//!   at 0).
//! - [`ColdTier::expire_before`]: optional time-based expiry of whole segments.
//! - [`ColdConfig`]: backend, buffers, multipart and retry settings;
//!   [`ColdTier::connect`] opens after a quick reachability probe.
//! - [`metrics`]: what the tier records through the `metrics` facade (read requests,
//!   exports, the bytes seeks fetch).
//! - `testing` (feature `testing`): `CountingStore` and `FaultyStore` wrappers.
//!
//! The design, including crash behaviour and the bucket lifecycle rule to set, is in
//! `docs/cold.md`.

mod cache;
mod cold;
mod config;
mod error;
mod expire;
mod export;
mod gap;
pub mod layout;
mod listing;
pub mod metrics;
mod pointer;
mod position;
mod probe;
mod read;
mod stats;
mod stream;
#[cfg(feature = "testing")]
pub mod testing;
mod tier;
mod topic_marker;

pub use cold::ColdTier;
pub use config::{BackendConfig, ColdConfig, MIN_PART_SIZE, RetrySettings, S3Encryption, Secret};
pub use export::ExportOutcome;
pub use layout::Layout;
pub use probe::PROBE_TIMEOUT;
pub use stats::ColdStats;
