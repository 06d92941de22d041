//! [`MemoryTier`] and [`FaultyTier`] in the router's warm and cold positions
//! ([`WarmBackend`], [`ColdBackend`]): a memory tier with nothing better than its [`Tier`]
//! methods (sequential reads paged through [`Tier::read_batches`], segments stored by appending
//! their batches), and a faulty wrapper whose faults apply to the [`Tier`] methods.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use tier_core::position::{
    ColdBackend, WarmBackend, append_each, append_segment_bytes, holds_records, paged_batches, refuse_gap,
};
use tier_core::{ErrorContext, Offset, OffsetRange, RecordBatch, Tier, TierError, TopicName};

use crate::{FaultyTier, MemoryTier};

/// Reads the sealed segment file at `path` and appends the batches `tier` lacks.
async fn store_by_appending<T: Tier + ?Sized>(
    tier: &T,
    topic: &TopicName,
    path: &Path,
) -> Result<OffsetRange, TierError> {
    let bytes = tokio::fs::read(path).await.map_err(|e| {
        TierError::unavailable(
            ErrorContext::tier(tier.kind()).topic(topic).location(path.display().to_string()),
            "reading a sealed segment to store it",
        )
        .with_source(e)
    })?;
    append_segment_bytes(tier, topic, Bytes::from(bytes), &path.display().to_string()).await
}

#[async_trait]
impl WarmBackend for MemoryTier {
    async fn append_group(
        &self,
        topic: &TopicName,
        batches: Vec<RecordBatch>,
    ) -> (usize, Result<(), TierError>) {
        append_each(self, topic, batches).await
    }

    async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        let range = self.range(topic).await?;
        // Like the warm tier: never drop the newest batch.
        MemoryTier::trim_before(self, topic, offset.min(range.end.saturating_sub(1)));
        Ok(())
    }

    fn batches_from(&self, topic: &TopicName, from: Offset) -> BoxStream<'_, Result<RecordBatch, TierError>> {
        let batches = self.batches(topic);
        stream::iter(batches.into_iter().filter(move |b| b.end_offset() > from).map(Ok)).boxed()
    }

    async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        let range = self.range(topic).await?;
        if range.end > offset {
            return Err(TierError::invalid(
                ErrorContext::tier(self.kind()).topic(topic).offset(offset),
                format!("cannot restart at {offset}: the tier holds {range}"),
            ));
        }
        MemoryTier::trim_before(self, topic, offset);
        Ok(())
    }

    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        self.create_topic(topic);
        Ok(())
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        Ok(self.topics().contains(topic))
    }
}

#[async_trait]
impl ColdBackend for MemoryTier {
    fn record_batches_from(
        self: Arc<Self>,
        topic: &TopicName,
        from: Offset,
        to: Offset,
    ) -> BoxStream<'static, Result<RecordBatch, TierError>> {
        paged_batches(self, topic, from, to)
    }

    async fn store_segment(&self, topic: &TopicName, path: &Path) -> Result<OffsetRange, TierError> {
        store_by_appending(self, topic, path).await
    }

    /// A memory tier holds contiguous batches only.
    async fn record_gap(&self, topic: &TopicName, range: OffsetRange) -> Result<(), TierError> {
        Err(refuse_gap(self.kind(), topic, range))
    }

    /// A memory tier keeps no marker: a topic is recorded once it holds records.
    async fn record_topic(&self, _topic: &TopicName) -> Result<(), TierError> {
        Ok(())
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        holds_records(self, topic).await
    }

    /// A memory tier records no gap: its log continues at its end.
    async fn continuation(&self, topic: &TopicName) -> Result<Offset, TierError> {
        Ok(self.range(topic).await?.end)
    }
}

/// Faults apply to the [`Tier`] methods (a group append is the wrapper's own appends in
/// turn, so each batch meets the faults an append would) and, where targeted
/// ([`Op::Marker`](crate::faults::Op::Marker)), to the topic marker; trimming and replay are
/// forwarded.
#[async_trait]
impl<T: WarmBackend> WarmBackend for FaultyTier<T> {
    async fn append_group(
        &self,
        topic: &TopicName,
        batches: Vec<RecordBatch>,
    ) -> (usize, Result<(), TierError>) {
        append_each(self, topic, batches).await
    }

    async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        self.inner().trim_before(topic, offset).await
    }

    fn batches_from(&self, topic: &TopicName, from: Offset) -> BoxStream<'_, Result<RecordBatch, TierError>> {
        self.inner().batches_from(topic, from)
    }

    async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        self.inner().restart_at(topic, offset).await
    }

    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        if self.held_or_failing(topic, crate::faults::Op::Marker).await {
            return Err(self.injected_error(topic, crate::faults::Op::Marker));
        }
        self.inner().record_topic(topic).await
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        if self.held_or_failing(topic, crate::faults::Op::Marker).await {
            return Err(self.injected_error(topic, crate::faults::Op::Marker));
        }
        self.inner().topic_recorded(topic).await
    }
}

/// Faults apply to the [`Tier`] methods, so reads and stores go through them (built on
/// [`Tier::read_batches`] and [`Tier::append`]); recording a gap is forwarded.
#[async_trait]
impl<T: ColdBackend> ColdBackend for FaultyTier<T> {
    fn record_batches_from(
        self: Arc<Self>,
        topic: &TopicName,
        from: Offset,
        to: Offset,
    ) -> BoxStream<'static, Result<RecordBatch, TierError>> {
        paged_batches(self, topic, from, to)
    }

    async fn store_segment(&self, topic: &TopicName, path: &Path) -> Result<OffsetRange, TierError> {
        store_by_appending(self, topic, path).await
    }

    async fn record_gap(&self, topic: &TopicName, range: OffsetRange) -> Result<(), TierError> {
        self.inner().record_gap(topic, range).await
    }

    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        self.inner().record_topic(topic).await
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        self.inner().topic_recorded(topic).await
    }

    async fn continuation(&self, topic: &TopicName) -> Result<Offset, TierError> {
        self.inner().continuation(topic).await
    }
}
