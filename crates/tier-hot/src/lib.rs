//! tierlog's hot tier: the local write-ahead log.
//!
//! The hot tier is the source of truth for every write and serves every read it still
//! holds. [`HotTier`] implements [`tier_core::Tier`] for any number of topics:
//!
//! - **Layout** ([`layout`]): `<data_dir>/<topic>/<base_offset:020>.seg`, one file per
//!   segment in the format of [`tier_core::segment`]; the last file is the active
//!   segment, the others are sealed and read through mmap.
//! - **Appends** go through one writer task per topic that group-commits: concurrent
//!   appends share one vectored write and one fsync ([`FsyncPolicy`]). Records become
//!   visible to readers and subscribers only once that durability step is done.
//! - **Rotation** by size, by age (also on an idle topic) and on demand
//!   ([`HotTier::rotate`]); each sealed segment is announced as a [`SegmentEvent`].
//! - **Cache and live tail**: recent batches stay in memory; [`HotTier::subscribe`]
//!   yields every committed record from an offset, catching up from cache or disk.
//! - **Retention** ([`HotTier::run_retention`]) by age and size, asking a predicate
//!   before each deletion.
//! - **Recovery** on [`HotTier::open`]: torn tails truncated (or refused), offsets
//!   continued exactly.
//!
//! The design, every setting and its default are described in `docs/hot.md`.

mod cache;
mod config;
pub mod layout;
mod mmap;
mod read;
mod recovery;
mod retention;
mod segment;
mod tail;
mod tier;
mod topic;
mod writer;

pub use config::{FsyncPolicy, HotConfig, RecoveryPolicy};
pub use segment::{SegmentEvent, SegmentInfo};
pub use tail::Subscription;
pub use tier::HotTier;
pub use topic::WriteStats;
