//! [`Metered`]: a wrapper around the warm or cold tier that records metrics for every
//! call the router makes (reads per tier, warm WAIT outcomes, exports), since the tier
//! crates emit none themselves. Every method forwards to the wrapped tier unchanged (the
//! position traits have no default bodies, so a forgotten one does not compile).

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use metrics::counter;
use tier_core::{
    Offset, OffsetRange, ReadLimit, Record, RecordBatch, Tier, TierError, TierKind, Timestamp, TopicName,
};
use tier_router::{ColdBackend, WarmBackend};

use crate::metrics::{EXPORT_BYTES, EXPORT_ERRORS, EXPORT_SEGMENTS, TIER_READS, WARM_WAIT};

/// A tier whose calls are counted (see the module docs).
#[derive(Debug)]
pub(crate) struct Metered<T>(pub(crate) Arc<T>);

fn tier_label(kind: TierKind) -> &'static str {
    match kind {
        TierKind::Hot => "hot",
        TierKind::Warm => "warm",
        TierKind::Cold => "cold",
        _ => "other",
    }
}

#[async_trait]
impl<T: Tier> Tier for Metered<T> {
    fn kind(&self) -> TierKind {
        self.0.kind()
    }

    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        self.0.range(topic).await
    }

    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        let result = self.0.append(topic, batch).await;
        if self.kind() == TierKind::Warm {
            let outcome = if result.is_ok() { "ok" } else { "failed" };
            counter!(WARM_WAIT, "outcome" => outcome).increment(1);
        }
        result
    }

    async fn read(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        limit: ReadLimit,
    ) -> Result<Vec<Record>, TierError> {
        counter!(TIER_READS, "tier" => tier_label(self.kind())).increment(1);
        self.0.read(topic, from, to, limit).await
    }

    async fn offset_for_timestamp(
        &self,
        topic: &TopicName,
        timestamp: Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        self.0.offset_for_timestamp(topic, timestamp).await
    }
}

#[async_trait]
impl<T: WarmBackend> WarmBackend for Metered<T> {
    async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        self.0.trim_before(topic, offset).await
    }

    fn batches_from(&self, topic: &TopicName, from: Offset) -> BoxStream<'_, Result<RecordBatch, TierError>> {
        self.0.batches_from(topic, from)
    }

    async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        self.0.restart_at(topic, offset).await
    }

    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        self.0.record_topic(topic).await
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        self.0.topic_recorded(topic).await
    }
}

/// Counts a sequential cold read (one read request to the tier, however many ranged GETs
/// its read-ahead makes).
fn counted<I>(stream: BoxStream<'static, I>) -> BoxStream<'static, I> {
    counter!(TIER_READS, "tier" => "cold").increment(1);
    stream
}

#[async_trait]
impl<T: ColdBackend> ColdBackend for Metered<T> {
    fn record_batches_from(
        self: Arc<Self>,
        topic: &TopicName,
        from: Offset,
        to: Offset,
    ) -> BoxStream<'static, Result<RecordBatch, TierError>> {
        counted(Arc::clone(&self.0).record_batches_from(topic, from, to))
    }

    async fn record_gap(&self, topic: &TopicName, range: OffsetRange) -> Result<(), TierError> {
        self.0.record_gap(topic, range).await
    }

    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        self.0.record_topic(topic).await
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        self.0.topic_recorded(topic).await
    }

    async fn continuation(&self, topic: &TopicName) -> Result<Offset, TierError> {
        self.0.continuation(topic).await
    }

    async fn store_segment(&self, topic: &TopicName, path: &Path) -> Result<OffsetRange, TierError> {
        let bytes = tokio::fs::metadata(path).await.map(|m| m.len()).unwrap_or(0);
        match self.0.store_segment(topic, path).await {
            Ok(range) => {
                counter!(EXPORT_SEGMENTS).increment(1);
                counter!(EXPORT_BYTES).increment(bytes);
                Ok(range)
            }
            Err(e) => {
                counter!(EXPORT_ERRORS).increment(1);
                Err(e)
            }
        }
    }
}
