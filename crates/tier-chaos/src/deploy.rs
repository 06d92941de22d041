//! The four deployments (hot; hot+cold; hot+warm; hot+warm+cold), the real servers they
//! use, and the store configuration a scenario gives its producers and verifier.

use std::{path::Path, time::Duration};

use tier_cold::{BackendConfig, ColdConfig, Secret};
use tier_hot::HotConfig;
use tier_router::{StoreConfig, WarmFailurePolicy};
use tier_testkit::servers::{S3Server, ValkeyPair};
use tier_warm::WarmConfig;

use crate::ChaosError;

/// Which tiers a store enables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deployment {
    /// The WAL alone.
    Hot,
    /// WAL + object storage (moto S3).
    HotCold,
    /// WAL + Valkey.
    HotWarm,
    /// WAL + Valkey + object storage (moto S3).
    HotWarmCold,
}

impl Deployment {
    /// All four.
    pub const ALL: [Deployment; 4] =
        [Deployment::Hot, Deployment::HotCold, Deployment::HotWarm, Deployment::HotWarmCold];

    /// `hot`, `hot+cold`, `hot+warm`, `hot+warm+cold`.
    pub fn label(self) -> &'static str {
        match self {
            Deployment::Hot => "hot",
            Deployment::HotCold => "hot+cold",
            Deployment::HotWarm => "hot+warm",
            Deployment::HotWarmCold => "hot+warm+cold",
        }
    }

    /// Whether warm (Valkey) is enabled.
    pub fn warm(self) -> bool {
        matches!(self, Deployment::HotWarm | Deployment::HotWarmCold)
    }

    /// Whether cold (object storage) is enabled.
    pub fn cold(self) -> bool {
        matches!(self, Deployment::HotCold | Deployment::HotWarmCold)
    }
}

/// The real servers of one chaos run, started by tier-testkit's harness and killed by PID
/// when dropped.
#[derive(Debug)]
pub struct Servers {
    /// Valkey primary + replica.
    pub valkey: ValkeyPair,
    /// moto S3.
    pub s3: S3Server,
}

impl Servers {
    /// Starts a private Valkey pair and a moto server.
    pub async fn start() -> Result<Self, ChaosError> {
        let valkey = ValkeyPair::start().await?;
        let s3 = S3Server::start().await?;
        Ok(Self { valkey, s3 })
    }
}

/// Knobs of the store a scenario runs.
#[derive(Clone, Debug)]
pub struct Profile {
    /// WAL segment size (small: frequent rotation, so kills land during it).
    pub segment_bytes: u64,
    /// Whether WAL retention deletes exported segments at once (only with cold; without
    /// cold the WAL is the only copy and retention is effectively off).
    pub aggressive_retention: bool,
    /// `router.max_cached_closed_segments`.
    pub max_cached_closed_segments: usize,
    /// `router.warm_failure_policy`.
    pub policy: WarmFailurePolicy,
}

impl Default for Profile {
    fn default() -> Self {
        Self {
            segment_bytes: 16 << 10,
            aggressive_retention: true,
            max_cached_closed_segments: 3,
            policy: WarmFailurePolicy::Fail,
        }
    }
}

/// The configuration of a store under `dir` (WAL in `dir/hot`, checkpoints in
/// `dir/router`) for `deployment`. `tag` (lowercase letters, digits, `-`) names the S3
/// bucket (created here) and the Valkey key prefix, so runs never share data.
pub async fn store_config(
    deployment: Deployment,
    dir: &Path,
    servers: &Servers,
    tag: &str,
    profile: &Profile,
) -> Result<StoreConfig, ChaosError> {
    let mut hot = HotConfig::new(dir.join("hot"));
    hot.segment_bytes = profile.segment_bytes;
    hot.segment_age = Duration::from_millis(300);
    hot.index_interval_bytes = 512;
    hot.cache_bytes = 256 << 10;
    if profile.aggressive_retention && deployment.cold() {
        hot.retention_time = Duration::from_millis(1);
        hot.retention_bytes = 0;
    }
    let mut config = StoreConfig::default().with_hot(hot);
    config.router.warm_failure_policy = profile.policy;
    config.router.max_cached_closed_segments = profile.max_cached_closed_segments;
    config.router.export_sweep_interval = Duration::from_millis(50);
    config.router.retention_interval = Duration::from_millis(40);
    config.router.warm_retry_interval = Duration::from_millis(50);
    config.router.export_retry.initial = Duration::from_millis(20);
    config.router.export_retry.max = Duration::from_millis(500);
    config.router.read_batch_records = 500;
    if deployment.warm() {
        let mut warm = WarmConfig::standalone(servers.valkey.primary_url());
        warm.key_prefix = format!("chaos-{tag}:");
        warm.wait_replicas = 1;
        warm.wait_timeout = Duration::from_millis(200);
        // Outages last well under a second here: fail fast, reconnect fast.
        warm.command_timeout = Duration::from_millis(500);
        warm.connect_timeout = Duration::from_millis(500);
        warm.reconnect.max_backoff = Duration::from_millis(200);
        config.warm = Some(warm);
    }
    if deployment.cold() {
        let bucket = format!("chaos-{tag}");
        servers.s3.create_bucket(&bucket).await?;
        let settings = servers.s3.settings();
        let mut cold = ColdConfig::new(BackendConfig::S3 {
            bucket,
            region: settings.region.clone(),
            endpoint: Some(settings.endpoint.clone()),
            access_key_id: Some(settings.access_key_id.clone()),
            secret_access_key: Some(Secret::new(settings.secret_access_key.clone())),
            allow_http: true,
            encryption: None,
        });
        cold.retry.max_retries = 3;
        cold.retry.retry_timeout = Duration::from_secs(5);
        config.cold = Some(cold);
    }
    Ok(config)
}

/// Writes `config` as TOML to `path` (what `chaos-producer --config` reads).
pub fn write_config(config: &StoreConfig, path: &Path) -> Result<(), ChaosError> {
    let text = toml::to_string(config)
        .map_err(|e| ChaosError::Other(format!("serialising the store config: {e}")))?;
    std::fs::write(path, text).map_err(|e| ChaosError::io(format!("writing {}", path.display()), e))
}
