//! The warm and cold positions ([`WarmBackend`], [`ColdBackend`], defined in
//! [`tier_core::position`] with the helpers a custom tier builds them from), and what
//! the router adds: [`append_segment`], which reads a sealed segment file for
//! [`append_segment_bytes`], and [`PagedCold`] (feature `testkit`), a cold backend in the
//! shape of a custom tier with nothing better.

use std::path::Path;
#[cfg(feature = "testkit")]
use std::sync::Arc;

#[cfg(feature = "testkit")]
use async_trait::async_trait;
use bytes::Bytes;
#[cfg(feature = "testkit")]
use futures::stream::BoxStream;
pub use tier_core::position::{
    ColdBackend, WarmBackend, append_each, append_segment_bytes, holds_records, paged_batches, paged_records,
    rebuilt_warm_batches, refuse_gap,
};
use tier_core::{ErrorContext, OffsetRange, Tier, TierError, TopicName};
#[cfg(feature = "testkit")]
use tier_core::{Offset, RecordBatch};

/// [`ColdBackend::store_segment`] for a tier with nothing better: reads the file and
/// hands it to [`append_segment_bytes`], which checks it and appends each batch `tier`
/// does not hold yet with [`Tier::append`].
pub async fn append_segment<T: Tier + ?Sized>(
    tier: &T,
    topic: &TopicName,
    path: &Path,
) -> Result<OffsetRange, TierError> {
    let ctx = || ErrorContext::tier(tier.kind()).topic(topic).location(path.display().to_string());
    let owned = path.to_owned();
    let bytes = tier_core::blocking::spawn(move || std::fs::read(owned))
        .await
        .map_err(|e| TierError::internal(ctx(), "the segment read task failed").with_source(e))?
        .map_err(|e| TierError::unavailable(ctx(), "reading a sealed segment to store it").with_source(e))?;
    append_segment_bytes(tier, topic, Bytes::from(bytes), &path.display().to_string()).await
}

/// A cold backend in the shape of a custom tier with nothing better: its sequential reads
/// are built on its [`Tier`] methods with [`paged_batches`] (over [`Tier::read_batches`]);
/// every other method is forwarded to the tier it wraps. For testing the router's read
/// path over such a tier with a real one underneath (tier-router's tests, the simulation).
#[cfg(feature = "testkit")]
#[derive(Debug)]
pub struct PagedCold<T: ?Sized>(pub Arc<T>);

#[cfg(feature = "testkit")]
#[async_trait]
impl<T: ColdBackend + ?Sized> Tier for PagedCold<T> {
    fn kind(&self) -> tier_core::TierKind {
        self.0.kind()
    }
    fn capabilities(&self) -> tier_core::Capabilities {
        self.0.capabilities()
    }
    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        self.0.range(topic).await
    }
    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        self.0.append(topic, batch).await
    }
    async fn read_batches(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, TierError> {
        self.0.read_batches(topic, from, to, max_bytes).await
    }
    async fn offset_for_timestamp(
        &self,
        topic: &TopicName,
        timestamp: tier_core::Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        self.0.offset_for_timestamp(topic, timestamp).await
    }
}

#[cfg(feature = "testkit")]
#[async_trait]
impl<T: ColdBackend + ?Sized> ColdBackend for PagedCold<T> {
    fn record_batches_from(
        self: Arc<Self>,
        topic: &TopicName,
        from: Offset,
        to: Offset,
    ) -> BoxStream<'static, Result<RecordBatch, TierError>> {
        paged_batches(self, topic, from, to)
    }

    async fn store_segment(&self, topic: &TopicName, path: &Path) -> Result<OffsetRange, TierError> {
        self.0.store_segment(topic, path).await
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
}
