//! A warm backend that connects on first use: what [`TieredStore::open`](crate::TieredStore::open)
//! uses under `router.warm_failure_policy = "degrade"` when Valkey is unreachable at
//! startup, so the store opens degraded instead of failing. Every call first makes sure
//! a connection exists (one attempt of at most `warm.connect_timeout` per call while the
//! server is down, answering `Unavailable`); once connected, calls go to the
//! [`WarmTier`] unchanged.

use std::collections::BTreeMap;
use std::ops::Range;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use tier_core::position::NodeId;
use tier_core::{
    ErrorContext, Offset, OffsetRange, RecordBatch, Tier, TierError, TierKind, Timestamp, TopicName,
};
use tier_warm::{WarmConfig, WarmTier};
use tokio::sync::OnceCell;
use tracing::info;

use crate::backend::WarmBackend;

/// A [`WarmTier`] connected on first successful use.
#[derive(Debug)]
pub(crate) struct LazyWarm {
    config: WarmConfig,
    tier: OnceCell<WarmTier>,
}

impl LazyWarm {
    /// A backend that will connect with `config` when first used.
    pub(crate) fn new(config: WarmConfig) -> Self {
        Self { config, tier: OnceCell::new() }
    }

    async fn tier(&self) -> Result<&WarmTier, TierError> {
        self.tier
            .get_or_try_init(|| async {
                let tier = WarmTier::connect(self.config.clone()).await.map_err(|e| {
                    TierError::unavailable(
                        ErrorContext::tier(TierKind::Warm),
                        "the warm tier has not been reachable since the store opened",
                    )
                    .with_source(e)
                })?;
                info!("connected to the warm tier");
                Ok(tier)
            })
            .await
    }
}

#[async_trait]
impl Tier for LazyWarm {
    fn kind(&self) -> TierKind {
        TierKind::Warm
    }

    fn capabilities(&self) -> tier_core::Capabilities {
        tier_warm::WarmTier::CAPABILITIES
    }

    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        self.tier().await?.range(topic).await
    }

    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        self.tier().await?.append(topic, batch).await
    }

    async fn read_batches(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, TierError> {
        self.tier().await?.read_batches(topic, from, to, max_bytes).await
    }

    async fn offset_for_timestamp(
        &self,
        topic: &TopicName,
        timestamp: Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        self.tier().await?.offset_for_timestamp(topic, timestamp).await
    }
}

#[async_trait]
impl WarmBackend for LazyWarm {
    async fn append_group(
        &self,
        topic: &TopicName,
        batches: Vec<RecordBatch>,
    ) -> (usize, Result<(), TierError>) {
        match self.tier().await {
            Ok(tier) => WarmBackend::append_group(tier, topic, batches).await,
            Err(e) => (0, Err(e)),
        }
    }

    async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        WarmBackend::trim_before(self.tier().await?, topic, offset).await
    }

    async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        WarmBackend::restart_at(self.tier().await?, topic, offset).await
    }

    async fn claim_owner(&self, topic: &TopicName, claimer: NodeId) -> Result<Option<u64>, TierError> {
        WarmBackend::claim_owner(self.tier().await?, topic, claimer).await
    }

    async fn claimers(
        &self,
        topic: &TopicName,
        epochs: Range<u64>,
    ) -> Result<BTreeMap<u64, NodeId>, TierError> {
        WarmBackend::claimers(self.tier().await?, topic, epochs).await
    }

    fn claimed_owner(&self, topic: &TopicName) -> Option<u64> {
        self.tier.get().and_then(|tier| tier.owner_epoch(topic))
    }

    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        WarmBackend::record_topic(self.tier().await?, topic).await
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        WarmBackend::topic_recorded(self.tier().await?, topic).await
    }

    fn batches_from(&self, topic: &TopicName, from: Offset) -> BoxStream<'_, Result<RecordBatch, TierError>> {
        let topic = topic.clone();
        stream::once(async move {
            let tier = self.tier().await?;
            Ok::<_, TierError>(WarmBackend::batches_from(tier, &topic, from))
        })
        .try_flatten()
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tier_testkit::conformance::{run_all, warm_backend};
    use tier_testkit::{SuiteConfig, servers::SharedValkey};

    use super::*;

    /// A warm backend connected on first use passes the warm tier's suites on a real
    /// Valkey (the wrapper forwards every method once connected).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lazy_warm_passes_the_conformance_suites() {
        let valkey = SharedValkey::get().await.expect("a Valkey server");
        let mut config = WarmConfig::standalone(valkey.primary_url());
        config.key_prefix = format!("{}lazy-", valkey.key_prefix());
        config.wait_timeout = Duration::from_millis(500);
        let tier = LazyWarm::new(config);
        run_all(&tier, &SuiteConfig::new("lazy-")).await;
        warm_backend(&tier, &SuiteConfig::new("lazy-pos-")).await;
    }
}
