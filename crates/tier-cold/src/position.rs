//! [`ColdTier`] in the router's cold position ([`ColdBackend`]): batches streamed with
//! read-ahead, segments uploaded byte for byte, gap and topic markers.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use tier_core::position::ColdBackend;
use tier_core::{Offset, OffsetRange, RecordBatch, TierError, TopicName};

use crate::ColdTier;

#[async_trait]
impl ColdBackend for ColdTier {
    /// [`ColdTier::stream_batches_owned`]: the batches as stored, ranged GETs
    /// of `read_buffer` bytes with `read_ahead` in flight.
    fn record_batches_from(
        self: Arc<Self>,
        topic: &TopicName,
        from: Offset,
        to: Offset,
    ) -> BoxStream<'static, Result<RecordBatch, TierError>> {
        let topic = topic.clone();
        stream::once(async move { self.stream_batches_owned(&topic, from, to).await }).try_flatten().boxed()
    }

    /// Uploads the file byte for byte ([`ColdTier::export_segment`]).
    async fn store_segment(&self, topic: &TopicName, path: &Path) -> Result<OffsetRange, TierError> {
        let outcome = self.export_segment(topic, path).await?;
        Ok(match outcome {
            crate::ExportOutcome::Uploaded { range, .. }
            | crate::ExportOutcome::AlreadyPresent { range, .. } => range,
        })
    }

    /// Writes a gap marker ([`ColdTier::record_gap`]).
    async fn record_gap(&self, topic: &TopicName, range: OffsetRange) -> Result<(), TierError> {
        ColdTier::record_gap(self, topic, range).await
    }

    /// Writes the topic marker ([`ColdTier::record_topic`]).
    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        ColdTier::record_topic(self, topic).await
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        ColdTier::topic_recorded(self, topic).await
    }

    /// [`ColdTier::continuation`]: past the recorded gaps after the last segment.
    async fn continuation(&self, topic: &TopicName) -> Result<Offset, TierError> {
        ColdTier::continuation(self, topic).await
    }
}
