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
//! - **Recovery** on [`HotTier::open`]: torn tails truncated (or refused), torn points
//!   between segments (a seal a power cut left short) recorded as gaps, offsets
//!   continued exactly; a topic that cannot be recovered is kept aside as damaged
//!   ([`HotTier::damaged`]) while the others open.
//!
//! The design, every setting and its default are described in `docs/hot.md`.
//!
//! Feature `fault-injection` (test-only, off by default) adds `tier_hot::faults`, which makes
//! WAL writes and fsyncs fail on demand.

/// A fault-injection hook (see the `faults` module): an `io::Result<()>` that is `Err` when a test
/// armed `point` for the data directory holding `path`. Without the feature
/// `fault-injection` it is `Ok(())` and evaluates nothing.
///
/// `fault!(Write, path, file, slices)` is the short-write hook of the WAL data write;
/// `fault!(Fsync, path, file, durable)` the hook of the active segment's fsync, which a
/// test may arm to lose the pages written since `durable` (`faults::fail_fsync_losing_pages`).
macro_rules! fault {
    (Write, $path:expr, $file:expr, $slices:expr) => {{
        #[cfg(feature = "fault-injection")]
        let hook = crate::faults::torn_write($path, $file, $slices);
        #[cfg(not(feature = "fault-injection"))]
        let hook = ::std::io::Result::Ok(());
        hook
    }};
    (Fsync, $path:expr, $file:expr, $durable:expr) => {{
        #[cfg(feature = "fault-injection")]
        let hook = crate::faults::check_fsync($path, $file, $durable);
        #[cfg(not(feature = "fault-injection"))]
        let hook = ::std::io::Result::Ok(());
        hook
    }};
    ($point:ident, $path:expr) => {{
        #[cfg(feature = "fault-injection")]
        let hook = crate::faults::check(crate::faults::FaultPoint::$point, $path);
        #[cfg(not(feature = "fault-injection"))]
        let hook = ::std::io::Result::Ok(());
        hook
    }};
}

/// The durability hook after a successful fsync of segment file `$path` through `$file`
/// (see `faults::track_durability`). Without the feature `fault-injection` it is nothing.
macro_rules! synced {
    ($path:expr, $file:expr) => {{
        #[cfg(feature = "fault-injection")]
        crate::faults::synced($path, $file);
    }};
}

/// Whether the repaired behaviour `faults::Revert::$behaviour` is put back for the data
/// directory holding `$path` (for the simulation's proof that it finds the bug class;
/// see `faults::revert`). Without the feature, `false`.
macro_rules! reverted {
    ($path:expr, $behaviour:ident) => {{
        #[cfg(feature = "fault-injection")]
        let reverted = crate::faults::reverted($path, crate::faults::Revert::$behaviour);
        #[cfg(not(feature = "fault-injection"))]
        let reverted = {
            let _ = $path;
            false
        };
        reverted
    }};
}

/// The durability hook after a seal's fsync of the next segment `$path`: its header is
/// durable (see `faults::synced_header`). Without the feature it is nothing.
macro_rules! synced_header {
    ($path:expr) => {{
        #[cfg(feature = "fault-injection")]
        crate::faults::synced_header($path);
    }};
}

/// The hook after recovery dropped segment file `$path`'s pages from the page cache: the
/// bytes a failed fsync lost read back as zeros from now on (see
/// `faults::fail_fsync_losing_pages`). An `io::Result<()>`; without the feature `Ok(())`.
macro_rules! page_cache_dropped {
    ($path:expr) => {{
        #[cfg(feature = "fault-injection")]
        let hook = crate::faults::page_cache_dropped($path);
        #[cfg(not(feature = "fault-injection"))]
        let hook = ::std::io::Result::Ok(());
        hook
    }};
}

/// The hook after segment file `$path` was cut back to `$len` bytes: pages beyond are gone,
/// with whatever a failed fsync lost there. Without the feature it is nothing.
macro_rules! cut_to {
    ($path:expr, $len:expr) => {{
        #[cfg(feature = "fault-injection")]
        crate::faults::cut_to($path, $len);
    }};
}

mod cache;
mod config;
mod damaged;
#[cfg(feature = "fault-injection")]
pub mod faults;
pub mod layout;
mod marker;
mod mmap;
mod page_cache;
mod read;
mod rebuilt;
mod recovery;
mod retention;
mod segment;
mod tail;
mod tier;
mod topic;
mod writer;

pub use config::{FsyncPolicy, HotConfig, RecoveryPolicy};
pub use rebuilt::Rebuilt;
pub use segment::{SegmentEvent, SegmentInfo};
pub use tail::Subscription;
pub use tier::{HotTier, lock_data_dir};
pub use topic::WriteStats;
