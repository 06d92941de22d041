//! The position conformance suites catch broken warm and cold backends (and pass the
//! correct ones: `memory.rs`).

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use futures::{FutureExt, StreamExt, stream::BoxStream};
use tier_core::position::{ColdBackend, WarmBackend};
use tier_core::{Offset, OffsetRange, RecordBatch, Tier, TierError, TierKind, Timestamp, TopicName};
use tier_testkit::{MemoryTier, SuiteConfig, conformance};

/// A memory tier whose position methods are broken one way each.
#[derive(Debug)]
struct Broken(Arc<MemoryTier>);

#[async_trait]
impl Tier for Broken {
    fn kind(&self) -> TierKind {
        self.0.kind()
    }

    fn capabilities(&self) -> tier_core::Capabilities {
        tier_core::Capabilities::none().with_idempotent_append(true)
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
        t: Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        self.0.offset_for_timestamp(topic, t).await
    }
}

#[async_trait]
impl WarmBackend for Broken {
    async fn append_group(
        &self,
        topic: &TopicName,
        batches: Vec<RecordBatch>,
    ) -> (usize, Result<(), TierError>) {
        tier_core::position::append_each(self, topic, batches).await
    }
    async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        WarmBackend::trim_before(self.0.as_ref(), topic, offset).await
    }
    /// Broken: skips the batch holding `from` when it starts before it.
    fn batches_from(&self, topic: &TopicName, from: Offset) -> BoxStream<'_, Result<RecordBatch, TierError>> {
        self.0
            .batches_from(topic, from)
            .filter(move |b| futures::future::ready(b.as_ref().map_or(true, |b| b.base_offset() >= from)))
            .boxed()
    }
    async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        WarmBackend::restart_at(self.0.as_ref(), topic, offset).await
    }
    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        WarmBackend::record_topic(self.0.as_ref(), topic).await
    }
    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        WarmBackend::topic_recorded(self.0.as_ref(), topic).await
    }
}

#[async_trait]
impl ColdBackend for Broken {
    fn record_batches_from(
        self: Arc<Self>,
        topic: &TopicName,
        from: Offset,
        to: Offset,
    ) -> BoxStream<'static, Result<RecordBatch, TierError>> {
        Arc::clone(&self.0).record_batches_from(topic, from, to)
    }
    async fn store_segment(&self, topic: &TopicName, path: &Path) -> Result<OffsetRange, TierError> {
        self.0.store_segment(topic, path).await
    }
    async fn record_gap(&self, topic: &TopicName, range: OffsetRange) -> Result<(), TierError> {
        self.0.record_gap(topic, range).await
    }
    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        ColdBackend::record_topic(self.0.as_ref(), topic).await
    }
    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        ColdBackend::topic_recorded(self.0.as_ref(), topic).await
    }
    /// Broken: continues at the start of what the tier holds.
    async fn continuation(&self, topic: &TopicName) -> Result<Offset, TierError> {
        Ok(self.0.range(topic).await?.start)
    }
}

fn panic_message(e: Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

#[tokio::test]
async fn the_warm_suite_rejects_batches_from_that_skip_the_batch_holding_from() {
    let tier = Broken(Arc::new(MemoryTier::new()));
    let outcome = AssertUnwindSafe(conformance::warm_backend(&tier, &SuiteConfig::new("broken-warm-")))
        .catch_unwind()
        .await;
    let msg = panic_message(outcome.expect_err("the suite fails"));
    assert!(msg.starts_with("conformance check warm_batches_from (WarmBackend::batches_from)"), "{msg}");
}

#[tokio::test]
async fn the_cold_suite_rejects_a_continuation_below_the_end() {
    let tier = Arc::new(Broken(Arc::new(MemoryTier::new())));
    let dir = tempfile::tempdir().expect("tempdir");
    let outcome =
        AssertUnwindSafe(conformance::cold_backend(tier, dir.path(), &SuiteConfig::new("broken-cold-")))
            .catch_unwind()
            .await;
    let msg = panic_message(outcome.expect_err("the suite fails"));
    assert!(
        msg.starts_with("conformance check cold_gap_and_continuation (ColdBackend::continuation)"),
        "{msg}"
    );
}
