//! Opening a cold tier after checking that its store answers: an unreachable S3 is one
//! clear error within [`PROBE_TIMEOUT`], not minutes of retries at the first request.

use std::time::Duration;

use futures::TryStreamExt;
use tier_core::{ErrorContext, TierError, TierKind};

use crate::config::BackendConfig;
use crate::{ColdConfig, ColdTier, Layout};

/// Longest wait for the store to answer [`ColdTier::connect`]'s probe.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

impl ColdConfig {
    /// Where the tier lives, for messages: `directory /x`, `S3 bucket b at http://…`,
    /// `GCS bucket b`, `Azure container c at http://…` (no credential).
    pub fn location(&self) -> String {
        match &self.backend {
            BackendConfig::Local { path } => format!("directory {}", path.display()),
            BackendConfig::S3 { bucket, endpoint, .. } => match endpoint {
                Some(e) => format!("S3 bucket {bucket} at {e}"),
                None => format!("S3 bucket {bucket}"),
            },
            #[cfg(feature = "gcp")]
            BackendConfig::Gcs { bucket, base_url, .. } => match base_url {
                Some(u) => format!("GCS bucket {bucket} at {u}"),
                None => format!("GCS bucket {bucket}"),
            },
            #[cfg(feature = "azure")]
            BackendConfig::Azure { account, container, endpoint, .. } => match endpoint {
                Some(e) => format!("Azure container {container} at {e}"),
                None => format!("Azure container {container} of account {account}"),
            },
        }
    }
}

impl ColdTier {
    /// [`open`](Self::open), after checking that the store answers one listing of the
    /// tier's prefix — without retries, within [`PROBE_TIMEOUT`] — so that an unreachable
    /// or misconfigured store (a wrong endpoint, refused credentials, a missing bucket)
    /// is one clear error at once. What `TieredStore::open` (tier-router) uses.
    ///
    /// Errors: `Unavailable` naming the store's [`location`](ColdConfig::location) when
    /// the listing fails (with its error as the source) or does not answer in time;
    /// those of [`open`](Self::open).
    pub async fn connect(config: ColdConfig) -> Result<Self, TierError> {
        let mut probe = config.clone();
        probe.retry.max_retries = 0;
        let store = probe.build_store()?;
        let prefix = Layout::new(&config.prefix).prefix().clone();
        let listing = async { store.list(Some(&prefix)).try_next().await };
        let ctx = || ErrorContext::tier(TierKind::Cold).location(config.location());
        match tokio::time::timeout(PROBE_TIMEOUT, listing).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err(TierError::unavailable(
                    ctx(),
                    format!("cold tier ({}) unreachable", config.location()),
                )
                .with_source(e));
            }
            Err(_) => {
                return Err(TierError::unavailable(
                    ctx(),
                    format!("cold tier ({}) did not answer within {PROBE_TIMEOUT:?}", config.location()),
                ));
            }
        }
        Self::open(config)
    }
}
