//! Configuration of the hot tier, loadable from TOML by the router and the CLI.
//!
//! Every field has a default, so an empty table is a valid configuration. Durations are
//! humantime strings (`"10m"`, `"24h"`, `"200ms"`); sizes are plain byte counts. The
//! settings are described in `docs/hot.md`.

use std::{path::PathBuf, time::Duration};

use serde::{Deserialize, Serialize};
use tier_core::clock::SharedClock;
use tier_core::segment::DEFAULT_INDEX_INTERVAL_BYTES;

/// Settings of a [`HotTier`](crate::HotTier).
///
/// Non-exhaustive, so that a new setting is not a breaking change: outside this crate,
/// start from [`HotConfig::new`] (or [`HotConfig::default`]) and set the fields you need.
///
/// ```
/// use std::time::Duration;
/// use tier_hot::{FsyncPolicy, HotConfig};
///
/// let mut config = HotConfig::new("/var/lib/tierlog/hot").with_fsync(FsyncPolicy::Never);
/// config.segment_bytes = 16 << 20;
/// config.retention_time = Duration::from_secs(3600);
/// assert_eq!(config.cache_bytes, HotConfig::default().cache_bytes);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct HotConfig {
    /// Directory holding one sub-directory per topic. Default `./data/hot`.
    pub data_dir: PathBuf,
    /// When appends are fsynced. Default [`FsyncPolicy::Always`].
    pub fsync: FsyncPolicy,
    /// A segment is rotated before a batch would take its data past this many bytes
    /// (a segment holding a single larger batch is allowed). Default 64 MiB.
    pub segment_bytes: u64,
    /// A segment holding records is rotated once it is this old, even when no write
    /// arrives. Default 10 minutes.
    #[serde(with = "humantime_serde")]
    pub segment_age: Duration,
    /// Distance between two entries of a segment's sparse index. Default 64 KiB.
    pub index_interval_bytes: u32,
    /// Bytes of recent batches kept in memory *per topic* for reads and the live tail.
    /// Default 64 MiB.
    pub cache_bytes: u64,
    /// Batches buffered per topic for live-tail subscribers; a subscriber further
    /// behind continues from the cache or disk. Default 1024.
    pub live_tail_batches: usize,
    /// Sealed segments sealed longer ago than this may be deleted. Default 24 hours.
    #[serde(with = "humantime_serde")]
    pub retention_time: Duration,
    /// Oldest sealed segments may be deleted while a topic's segments take more than
    /// this many bytes. Default 10 GiB.
    pub retention_bytes: u64,
    /// What opening does with invalid bytes at the end of a topic's active segment.
    /// Default [`RecoveryPolicy::TruncateTornTail`].
    pub recovery: RecoveryPolicy,
    /// The wall clock segment creation and seal times are read from (a segment's
    /// `created_at`, [`SegmentInfo::sealed_at`](crate::SegmentInfo::sealed_at)). Not a
    /// setting: never serialised, and a loaded configuration has the default, the
    /// system clock. Tests and the simulation inject a
    /// [`ManualClock`](tier_core::clock::ManualClock); what a clock going backwards does
    /// is in [`tier_core::clock`].
    #[serde(skip)]
    pub clock: SharedClock,
}

impl Default for HotConfig {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("./data/hot"),
            fsync: FsyncPolicy::Always,
            segment_bytes: 64 << 20,
            segment_age: Duration::from_secs(10 * 60),
            index_interval_bytes: DEFAULT_INDEX_INTERVAL_BYTES,
            cache_bytes: 64 << 20,
            live_tail_batches: 1024,
            retention_time: Duration::from_secs(24 * 3600),
            retention_bytes: 10 << 30,
            recovery: RecoveryPolicy::TruncateTornTail,
            clock: SharedClock::default(),
        }
    }
}

impl HotConfig {
    /// The defaults with `data_dir` set.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self { data_dir: data_dir.into(), ..Self::default() }
    }

    /// The same configuration with the fsync policy `fsync`.
    #[must_use]
    pub fn with_fsync(mut self, fsync: FsyncPolicy) -> Self {
        self.fsync = fsync;
        self
    }
}

/// When the WAL is fsynced.
///
/// Written in TOML as `"always"`, `"never"` or `{ interval = "100ms" }`. Non-exhaustive: a
/// `match` outside this crate needs a wildcard arm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum FsyncPolicy {
    /// Every append is fsynced before it is acknowledged; concurrent appends to a topic
    /// share one fsync (group commit).
    #[default]
    Always,
    /// A timer fsyncs each topic's active segment this often; appends are acknowledged
    /// once written to the file.
    Interval(#[serde(with = "humantime_serde")] Duration),
    /// Never fsync appends (the OS writes back when it likes). Sealed segments and
    /// directory changes are still fsynced.
    Never,
}

/// What opening the tier does with invalid bytes after the last valid batch of a
/// topic's active segment (a torn write from a crash). Non-exhaustive: a `match` outside
/// this crate needs a wildcard arm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RecoveryPolicy {
    /// Truncate the file after its last valid batch and continue from there.
    #[default]
    TruncateTornTail,
    /// Fail to open, naming the file and the byte position of the invalid bytes.
    Refuse,
}

impl From<RecoveryPolicy> for tier_core::segment::RecoveryPolicy {
    fn from(p: RecoveryPolicy) -> Self {
        match p {
            RecoveryPolicy::TruncateTornTail => tier_core::segment::RecoveryPolicy::TruncateTornTail,
            RecoveryPolicy::Refuse => tier_core::segment::RecoveryPolicy::Refuse,
        }
    }
}
