//! Opening the store a configuration describes, with metered warm and cold tiers and a
//! quick reachability probe of the cold tier (so an unreachable S3 is one clear error,
//! not minutes of retries).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use futures::TryStreamExt;
use object_store::ObjectStore;
use tier_cold::{BackendConfig, ColdConfig, ColdTier};
use tier_core::TopicName;
use tier_router::{StoreConfig, TieredStore};
use tier_warm::WarmTier;

use crate::metered::Metered;

/// Longest wait for the cold tier to answer the probe.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// An open store and the tiers the CLI inspects directly.
#[derive(Debug)]
pub(crate) struct Opened {
    /// The store.
    pub(crate) store: TieredStore,
    /// The cold tier, when enabled (for its request statistics).
    pub(crate) cold: Option<Arc<Metered<ColdTier>>>,
}

/// Validates topic names given on the command line.
pub(crate) fn topic_name(name: &str) -> anyhow::Result<TopicName> {
    TopicName::new(name).map_err(|e| crate::exit::usage(e.to_string()))
}

/// Opens the store: connects warm, probes and opens cold, opens the WAL and recovers
/// every topic it holds and `topics`. `background` runs the exporter, deleter and
/// trimmer.
pub(crate) async fn open(
    config: &StoreConfig,
    topics: Vec<TopicName>,
    background: bool,
) -> anyhow::Result<Opened> {
    let mut builder = TieredStore::builder()
        .hot(config.hot.clone())
        .router(config.router.clone())
        .topics(topics)
        .background(background);
    if let Some(warm) = &config.warm {
        let tier = WarmTier::connect(warm.clone()).await.context("warm tier unreachable")?;
        builder = builder.warm(Arc::new(Metered(Arc::new(tier))));
    }
    let mut cold_handle = None;
    if let Some(cold) = &config.cold {
        let tier = open_cold(cold).await?;
        let tier = Arc::new(Metered(Arc::new(tier)));
        cold_handle = Some(Arc::clone(&tier));
        builder = builder.cold(tier);
    }
    let store = builder.open().await.context("opening the store")?;
    Ok(Opened { store, cold: cold_handle })
}

/// Opens the cold tier after checking it answers a listing (without retries).
pub(crate) async fn open_cold(config: &ColdConfig) -> anyhow::Result<ColdTier> {
    let mut probe = config.clone();
    probe.retry.max_retries = 0;
    let store = probe.build_store().context("cold tier")?;
    let prefix = tier_cold::Layout::new(&config.prefix).prefix().clone();
    let listing = async {
        let mut entries = store.list(Some(&prefix));
        entries.try_next().await
    };
    match tokio::time::timeout(PROBE_TIMEOUT, listing).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            return Err(anyhow::Error::new(e).context(format!("cold tier {} unreachable", describe(config))));
        }
        Err(_) => {
            return Err(anyhow!("cold tier {} did not answer within {PROBE_TIMEOUT:?}", describe(config)));
        }
    }
    ColdTier::open(config.clone()).context("cold tier")
}

/// A short description of where the cold tier lives (no secrets).
pub(crate) fn describe(config: &ColdConfig) -> String {
    match &config.backend {
        BackendConfig::Local { path } => format!("(directory {})", path.display()),
        BackendConfig::S3 { bucket, endpoint, .. } => match endpoint {
            Some(e) => format!("(S3 bucket {bucket} at {e})"),
            None => format!("(S3 bucket {bucket})"),
        },
        _ => "(object store)".to_owned(),
    }
}

/// Closes the store (flushing the writers and checkpointing).
pub(crate) async fn close(opened: Opened) {
    opened.store.close().await;
}

/// The cold tier's bytes fetched so far (0 when cold is disabled).
pub(crate) fn cold_get_bytes(cold: Option<&Arc<Metered<ColdTier>>>) -> u64 {
    cold.map_or(0, |c| c.0.stats().get_bytes)
}
