//! Configuration of a [`TieredStore`](crate::TieredStore), loadable from TOML.
//!
//! Every table and field has a default (an empty document is a hot-only store under
//! `./data/hot`); unknown fields are rejected. Durations are humantime strings
//! (`"30s"`, `"100ms"`). [`StoreConfig::validate`] names the offending field.
//! The reference, with defaults, is in `docs/router.md`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tier_hot::HotConfig;

/// Everything a [`TieredStore`](crate::TieredStore) is built from.
///
/// Non-exhaustive, so that code building one compiles whatever features are on (the
/// `warm` and `cold` fields exist only with their features): start from
/// [`StoreConfig::default`] or [`StoreConfig::hot_only`] and set fields or chain the
/// `with_*` methods.
///
/// ```
/// use tier_router::{RouterConfig, StoreConfig, WarmFailurePolicy};
///
/// let mut router = RouterConfig::default();
/// router.warm_failure_policy = WarmFailurePolicy::Degrade;
/// let config = StoreConfig::hot_only("/var/lib/tierlog/hot").with_router(router);
/// assert!(config.validate().is_ok());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct StoreConfig {
    /// The WAL (always on).
    pub hot: HotConfig,
    /// The warm tier; `None` (no `[warm]` table) disables it.
    #[cfg(feature = "warm")]
    pub warm: Option<tier_warm::WarmConfig>,
    /// The cold tier; `None` (no `[cold]` table) disables it.
    #[cfg(feature = "cold")]
    pub cold: Option<tier_cold::ColdConfig>,
    /// How the tiers are composed.
    pub router: RouterConfig,
}

/// What an append does when the warm tier does not confirm it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarmFailurePolicy {
    /// The producer gets `Unavailable`; nothing is readable until warm confirms (see
    /// `docs/router.md`, "Failure policies").
    #[default]
    Fail,
    /// The producer is acknowledged once the WAL holds the batch; warm is back-filled
    /// in order when it returns.
    Degrade,
}

/// Exponential backoff of a retried background operation.
///
/// Non-exhaustive: outside this crate, start from [`BackoffConfig::default`] (or the
/// [`RouterConfig::export_retry`] of a configuration) and set the fields you need.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct BackoffConfig {
    /// First delay. Default 100 ms.
    #[serde(with = "humantime_serde")]
    pub initial: Duration,
    /// Largest delay (each retry doubles the previous one up to this). Default 30 s.
    #[serde(with = "humantime_serde")]
    pub max: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self { initial: Duration::from_millis(100), max: Duration::from_secs(30) }
    }
}

impl BackoffConfig {
    /// The delay before retry number `attempt` (0-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }
}

/// Settings of the router itself.
///
/// Non-exhaustive, so that a new setting is not a breaking change: outside this crate,
/// start from [`RouterConfig::default`] and set the fields you need.
///
/// ```
/// use std::time::Duration;
/// use tier_router::{RouterConfig, WarmFailurePolicy};
///
/// let mut router = RouterConfig::default();
/// router.warm_failure_policy = WarmFailurePolicy::Degrade;
/// router.export_retry.max = Duration::from_secs(10);
/// router.state_dir = Some("/var/lib/tierlog/router".into());
/// assert!(router.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct RouterConfig {
    /// What an append does when warm fails. Default [`WarmFailurePolicy::Fail`].
    pub warm_failure_policy: WarmFailurePolicy,
    /// Closed WAL segments whose records warm keeps (it is trimmed below the base offset
    /// of the N-th newest sealed segment, never beyond what cold holds). Default 5.
    pub max_cached_closed_segments: usize,
    /// Backoff of failed segment exports.
    pub export_retry: BackoffConfig,
    /// How often the exporter sweeps for sealed segments cold does not hold yet (besides
    /// reacting to each sealed segment at once). Default 30 s.
    #[serde(with = "humantime_serde")]
    pub export_sweep_interval: Duration,
    /// How often WAL retention and warm trimming run. Default 60 s.
    #[serde(with = "humantime_serde")]
    pub retention_interval: Duration,
    /// How often a topic whose warm tier is behind (policy `degrade`, or a pending
    /// batch under `fail`) retries the warm writes. Default 1 s.
    #[serde(with = "humantime_serde")]
    pub warm_retry_interval: Duration,
    /// Most encoded bytes of one group commit (a single larger batch is a group of its
    /// own). Default 1 MiB.
    pub max_group_bytes: usize,
    /// Under `degrade`, the encoded bytes of acknowledged batches warm does not hold yet
    /// kept in memory for the back-fill; beyond it appends fail with `Unavailable`.
    /// Default 256 MiB.
    pub max_unreplicated_bytes: usize,
    /// Records per read a reader makes from one tier. Default 1000.
    pub read_batch_records: usize,
    /// Bytes per read a reader makes from one tier. Default 4 MiB.
    pub read_batch_bytes: usize,
    /// Directory of the router's per-topic state files — checkpoints (the last committed
    /// end offset, so that a lost WAL's unexported range can be reported), offset
    /// reservations, fences — kept apart from the WAL's directory so that losing either
    /// leaves the other. Default (`None`): a `router` directory beside the hot data
    /// directory ([`RouterConfig::state_dir_for`]).
    ///
    /// It belongs to one store: the open store holds its lock (`<state_dir>/.router.lock`),
    /// and `<state_dir>/owner` names the data directory of the store that wrote it. A
    /// store refuses (`Fenced`) a state directory another store holds or owns — two stores
    /// whose data directories share a parent share the default, and each needs this set.
    pub state_dir: Option<PathBuf>,
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            warm_failure_policy: WarmFailurePolicy::Fail,
            max_cached_closed_segments: 5,
            export_retry: BackoffConfig::default(),
            export_sweep_interval: Duration::from_secs(30),
            retention_interval: Duration::from_secs(60),
            warm_retry_interval: Duration::from_secs(1),
            max_group_bytes: 1 << 20,
            max_unreplicated_bytes: 256 << 20,
            read_batch_records: 1000,
            read_batch_bytes: 4 << 20,
            state_dir: None,
        }
    }
}

/// A configuration value that cannot work, naming the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field} {message}")]
pub struct ConfigError {
    /// Dotted path of the field, e.g. `router.max_cached_closed_segments`.
    pub field: String,
    /// What is wrong, e.g. `must be >= 1`.
    pub message: String,
}

impl ConfigError {
    fn new(field: &str, message: impl Into<String>) -> Self {
        Self { field: field.to_owned(), message: message.into() }
    }
}

impl RouterConfig {
    /// The state directory of a store whose WAL is in `data_dir`: [`state_dir`](Self::state_dir)
    /// when set, else `router` beside `data_dir` (`<parent of data_dir>/router`; `router`
    /// for a data directory without a parent). A function of the configuration alone, so
    /// that tools reading a store's files without opening it find the same directory.
    pub fn state_dir_for(&self, data_dir: &Path) -> PathBuf {
        self.state_dir.clone().unwrap_or_else(|| {
            data_dir.parent().map_or_else(|| PathBuf::from("router"), |parent| parent.join("router"))
        })
    }

    /// Checks every field; the error names the first bad one (`router.<field>`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_cached_closed_segments < 1 {
            return Err(ConfigError::new("router.max_cached_closed_segments", "must be >= 1"));
        }
        for (field, value) in [
            ("router.export_sweep_interval", self.export_sweep_interval),
            ("router.retention_interval", self.retention_interval),
            ("router.warm_retry_interval", self.warm_retry_interval),
            ("router.export_retry.initial", self.export_retry.initial),
        ] {
            if value.is_zero() {
                return Err(ConfigError::new(field, "must be > 0"));
            }
        }
        if self.export_retry.max < self.export_retry.initial {
            return Err(ConfigError::new(
                "router.export_retry.max",
                "must be >= router.export_retry.initial",
            ));
        }
        if self.max_group_bytes == 0 || self.max_group_bytes > tier_core::batch::MAX_BATCH_LEN {
            return Err(ConfigError::new(
                "router.max_group_bytes",
                format!("must be between 1 and {}", tier_core::batch::MAX_BATCH_LEN),
            ));
        }
        if self.read_batch_records == 0 {
            return Err(ConfigError::new("router.read_batch_records", "must be >= 1"));
        }
        if self.read_batch_bytes == 0 {
            return Err(ConfigError::new("router.read_batch_bytes", "must be >= 1"));
        }
        Ok(())
    }
}

impl StoreConfig {
    /// A hot-only configuration with the WAL under `data_dir`, other settings default.
    pub fn hot_only(data_dir: impl Into<PathBuf>) -> Self {
        Self { hot: HotConfig::new(data_dir), ..Self::default() }
    }

    /// The router's state directory: `router.state_dir`, else `router` beside
    /// `hot.data_dir` ([`RouterConfig::state_dir_for`]).
    pub fn state_dir(&self) -> PathBuf {
        self.router.state_dir_for(&self.hot.data_dir)
    }

    /// The same configuration with the WAL settings `hot`.
    #[must_use]
    pub fn with_hot(mut self, hot: HotConfig) -> Self {
        self.hot = hot;
        self
    }

    /// The same configuration with the warm tier `warm` (feature `warm`).
    #[cfg(feature = "warm")]
    #[must_use]
    pub fn with_warm(mut self, warm: tier_warm::WarmConfig) -> Self {
        self.warm = Some(warm);
        self
    }

    /// The same configuration with the cold tier `cold` (feature `cold`).
    #[cfg(feature = "cold")]
    #[must_use]
    pub fn with_cold(mut self, cold: tier_cold::ColdConfig) -> Self {
        self.cold = Some(cold);
        self
    }

    /// The same configuration with the router settings `router`.
    #[must_use]
    pub fn with_router(mut self, router: RouterConfig) -> Self {
        self.router = router;
        self
    }

    /// Checks the router settings and the tiers' own checks; the error names the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.hot.segment_bytes == 0 {
            return Err(ConfigError::new("hot.segment_bytes", "must be > 0"));
        }
        #[cfg(feature = "cold")]
        if let Some(cold) = &self.cold {
            cold.validate().map_err(|e| ConfigError::new("cold", format!("is invalid: {e}")))?;
        }
        self.router.validate()
    }
}
