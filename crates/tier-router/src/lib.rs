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
//! - [`WarmBackend`] and [`ColdBackend`]: what a [`Tier`] needs to take
//!   the warm or cold position, implemented for tierlog's tiers (features `warm`,
//!   `cold`) and tier-testkit's (feature `testkit`).
//!
//! - [`metrics`]: what the router records through the `metrics` facade (appends, reads,
//!   seeks, WAL deletions, export lag; the tier crates record warm's `WAIT`s and cold's
//!   reads and exports) — install any recorder to get them.
//!
//! Features `warm` and `cold` (on by default) link the Valkey and object-store tiers; a
//! build without them links neither `fred` nor `object_store`. The design is described
//! in `docs/router.md`.
//!
//! Everything the API's signatures use is re-exported here — the tier-core types
//! ([`TopicName`], [`Offset`], [`Record`], [`TierError`], [`Tier`], …), the WAL's
//! [`HotConfig`] and, with their features, [`WarmConfig`] and [`ColdConfig`] — so an
//! embedding depends on this crate alone.
//!
//! # Example
//!
//! A store with the WAL alone (add `warm`/`cold` to the [`StoreConfig`] for the other
//! tiers): append, then read from the first offset.
//!
//! ```
//! use futures::StreamExt;
//! use tier_router::{NewRecord, StartPosition, StoreConfig, TieredStore};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), tier_router::TierError> {
//! # let dir = tempfile::tempdir().expect("a temporary directory");
//! # let data_dir = dir.path().join("wal");
//! let store = TieredStore::open(StoreConfig::hot_only(data_dir)).await?;
//! let orders = store.topic("orders").await?;
//! let offsets = orders
//!     .append(vec![NewRecord::new(1_700_000_000_000, "first"), NewRecord::new(1_700_000_000_001, "second")])
//!     .await?; // acknowledged: every enabled write tier holds both
//! assert_eq!((offsets.start, offsets.end), (0, 2));
//!
//! let mut reader = orders.reader(StartPosition::Offset(0)).await?;
//! let first = reader.next().await.expect("the reader runs on into the live tail")?;
//! assert_eq!((first.offset, &first.payload[..]), (0, &b"first"[..]));
//! store.close().await;
//! # Ok(())
//! # }
//! ```

mod backend;
mod background;
mod commit_point;
mod config;
#[cfg(feature = "warm")]
mod lazy_warm;
pub mod metrics;
mod open;
mod reader;
mod recovery;
mod reservation;
mod slice;
mod state;
mod store;
#[cfg(feature = "testkit")]
pub mod testing;
mod tiers;
mod topic;
mod writer;

#[cfg(feature = "testkit")]
pub use backend::PagedCold;
pub use backend::{
    ColdBackend, WarmBackend, append_each, append_segment, append_segment_bytes, holds_records,
    paged_batches, paged_records, rebuilt_warm_batches, refuse_gap,
};
pub use background::ExportedSegment;
pub use config::{BackoffConfig, ConfigError, RouterConfig, StoreConfig, WarmFailurePolicy};
pub use open::StoreBuilder;
pub use reader::{ReadBatch, Source};
pub use recovery::RecoveryReport;
pub use state::{PendingRecovery, pending_recovery};
pub use store::{TieredStore, Wal};
pub use topic::{NewRecord, PendingAppend, TierRanges, Topic};

#[cfg(feature = "cold")]
pub use tier_cold::ColdConfig;
pub use tier_core::{
    BoxError, Capabilities, ErrorContext, ErrorKind, Header, IntoTopicName, Offset, OffsetRange, ReadLimit,
    Record, RecordBatch, RecordBatchBuilder, Report, StartPosition, Tier, TierError, TierExt, TierKind,
    Timestamp, TopicName,
};
pub use tier_hot::{FsyncPolicy, HotConfig, HotTier, SegmentInfo};
#[cfg(feature = "warm")]
pub use tier_warm::WarmConfig;
