//! [`WarmTier`] in the router's warm position ([`WarmBackend`]): its native trimming,
//! replay stream, restart, owner epochs with their claimers, and topic marker.

use std::collections::BTreeMap;
use std::ops::Range;

use async_trait::async_trait;
use futures::stream::BoxStream;
use tier_core::position::{NodeId, WarmBackend};
use tier_core::{Offset, RecordBatch, TierError, TopicName};

use crate::WarmTier;

#[async_trait]
impl WarmBackend for WarmTier {
    async fn append_group(
        &self,
        topic: &TopicName,
        batches: Vec<RecordBatch>,
    ) -> (usize, Result<(), TierError>) {
        WarmTier::append_group(self, topic, batches).await
    }

    async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        WarmTier::trim_before(self, topic, offset).await.map(|_| ())
    }

    fn batches_from(&self, topic: &TopicName, from: Offset) -> BoxStream<'_, Result<RecordBatch, TierError>> {
        self.recovery_stream(topic, from)
    }

    async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        WarmTier::restart_at(self, topic, offset).await.map(|_| ())
    }

    async fn claim_owner(&self, topic: &TopicName, claimer: NodeId) -> Result<Option<u64>, TierError> {
        WarmTier::claim_owner(self, topic, claimer).await.map(Some)
    }

    async fn claimers(
        &self,
        topic: &TopicName,
        epochs: Range<u64>,
    ) -> Result<BTreeMap<u64, NodeId>, TierError> {
        WarmTier::claimers(self, topic, epochs).await
    }

    fn claimed_owner(&self, topic: &TopicName) -> Option<u64> {
        WarmTier::owner_epoch(self, topic)
    }

    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        WarmTier::record_topic(self, topic).await
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        WarmTier::topic_recorded(self, topic).await
    }
}
