//! Custom tiers in the warm and cold positions, built from the helpers tier-router
//! re-exports for a tier with nothing better (the position traits have no default
//! bodies): `append_segment` for `ColdBackend::store_segment` (append the segment's
//! batches), `paged_batches` for `record_batches_from`, `rebuilt_warm_batches` for
//! `WarmBackend::batches_from` (the stored batches, paged through `Tier::read_batches`).
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use tier_core::{
    Offset, OffsetRange, ReadLimit, Record, RecordBatch, StartPosition, Tier, TierError, TierExt, TierKind,
    Timestamp, TopicName,
};
use tier_hot::{FsyncPolicy, HotConfig};
use tier_router::{ColdBackend, NewRecord, Source, TieredStore, WarmBackend};
use tier_testkit::MemoryTier;

fn rec(offset: u64) -> NewRecord {
    NewRecord::new(1000 + offset as i64, format!("r{offset}"))
}

/// A user tier: forwards to a `MemoryTier` and implements only what it must. The flag
/// makes it report no `idempotent_append` (its appends are still `MemoryTier`'s).
#[derive(Debug, Default)]
struct Custom(MemoryTier, bool);

#[async_trait]
impl Tier for Custom {
    fn kind(&self) -> TierKind {
        TierKind::Custom("custom")
    }
    fn capabilities(&self) -> tier_core::Capabilities {
        tier_core::Capabilities::none().with_idempotent_append(!self.1)
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
impl WarmBackend for Custom {
    async fn append_group(
        &self,
        topic: &TopicName,
        batches: Vec<RecordBatch>,
    ) -> (usize, Result<(), TierError>) {
        tier_router::append_each(self, topic, batches).await
    }

    async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        self.0.trim_before(topic, offset);
        Ok(())
    }

    fn batches_from(&self, topic: &TopicName, from: Offset) -> BoxStream<'_, Result<RecordBatch, TierError>> {
        tier_router::rebuilt_warm_batches(self, topic, from)
    }

    async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        self.0.trim_before(topic, offset);
        Ok(())
    }

    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        self.0.create_topic(topic);
        Ok(())
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        Ok(self.0.topics().contains(topic))
    }
}

/// The helpers a custom tier with nothing better uses, built on its `Tier` methods.
#[async_trait]
impl ColdBackend for Custom {
    fn record_batches_from(
        self: Arc<Self>,
        topic: &TopicName,
        from: Offset,
        to: Offset,
    ) -> BoxStream<'static, Result<RecordBatch, TierError>> {
        tier_router::paged_batches(self, topic, from, to)
    }

    async fn store_segment(
        &self,
        topic: &TopicName,
        path: &std::path::Path,
    ) -> Result<OffsetRange, TierError> {
        tier_router::append_segment(self, topic, path).await
    }

    async fn record_gap(&self, topic: &TopicName, range: OffsetRange) -> Result<(), TierError> {
        Err(tier_router::refuse_gap(self.kind(), topic, range))
    }

    async fn record_topic(&self, _topic: &TopicName) -> Result<(), TierError> {
        Ok(())
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        tier_router::holds_records(self, topic).await
    }

    async fn continuation(&self, topic: &TopicName) -> Result<Offset, TierError> {
        Ok(self.range(topic).await?.end)
    }
}

fn hot(dir: &tempfile::TempDir) -> HotConfig {
    HotConfig::new(dir.path().join("hot")).with_fsync(FsyncPolicy::Never)
}

async fn open(
    dir: &tempfile::TempDir,
    warm: &Arc<Custom>,
    cold: &Arc<Custom>,
    topics: &[&str],
) -> TieredStore {
    TieredStore::builder()
        .hot(hot(dir))
        .warm(warm.clone())
        .cold(cold.clone())
        .background(false)
        .topics(topics.iter().map(|t| TopicName::new(t).unwrap()))
        .open()
        .await
        .unwrap()
}

#[tokio::test]
async fn custom_tiers_work_in_both_positions_through_the_helpers() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(Custom::default());
    let cold = Arc::new(Custom::default());
    let store = open(&dir, &warm, &cold, &[]).await;
    let topic = store.topic("custom").await.unwrap();
    for base in (0..3000).step_by(100) {
        topic.append((base..base + 100).map(rec).collect()).await.unwrap();
    }
    let exported = store.export_now("custom").await.unwrap();
    assert_eq!(exported.len(), 1);
    assert_eq!(exported[0].range, OffsetRange::new(0, 3000));
    // The default store_segment appended the segment's batches, as written.
    let name = topic.name().clone();
    assert_eq!(cold.0.batches(&name).len(), 30);
    for base in (3000..3500).step_by(100) {
        topic.append((base..base + 100).map(rec).collect()).await.unwrap();
    }
    store.wal().rotate(&name).await.unwrap();
    store.run_retention_now(SystemTime::now() + Duration::from_secs(100 * 3600)).await.unwrap();
    assert_eq!(topic.ranges().await.unwrap().hot, OffsetRange::new(3000, 3500));
    // warm holds everything, so it serves [0, 3000) ahead of cold.
    warm.trim_before(&name, 2000).await.unwrap();
    let mut stream = topic.reader_with_source(StartPosition::Earliest).await.unwrap();
    let mut sources = Vec::new();
    for offset in 0..3500u64 {
        let (source, record) = stream.next().await.unwrap().unwrap();
        assert_eq!(record.offset, offset);
        assert_eq!(record.payload, rec(offset).payload);
        if sources.last() != Some(&source) {
            sources.push(source);
        }
    }
    assert_eq!(sources, vec![Source::Cold, Source::Warm, Source::Hot]);
    store.close().await;

    // Lost WAL: the helper-built batches_from replays warm's records beyond cold's end.
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();
    let store = open(&dir, &warm, &cold, &["custom"]).await;
    let report = store.recover_topic("custom").await.unwrap();
    assert_eq!(report.replayed, Some(OffsetRange::new(3000, 3500)));
    assert!(report.lost.is_empty());
    assert_eq!(report.next_offset, 3500);
    let topic = store.topic("custom").await.unwrap();
    let hot_records = store.wal().read(&name, 3000, 3500, ReadLimit::unbounded()).await.unwrap();
    let warm_records = warm.read(&name, 3000, 3500, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(hot_records, warm_records);
    assert_eq!(topic.append(vec![rec(3500)]).await.unwrap(), OffsetRange::new(3500, 3501));
    store.close().await;
}

/// The batch reader over custom tiers: cold's batches paged through `read_batches` by
/// `paged_batches` for `ColdBackend::record_batches_from` and warm's by
/// `rebuilt_warm_batches`, the batches as stored (the writer's batches of 100 records),
/// the first holding the offset asked: the records are the record reader's, each item
/// starts where the previous batch ended.
#[tokio::test]
async fn the_batch_reader_reads_custom_tiers_through_the_helpers() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(Custom::default());
    let cold = Arc::new(Custom::default());
    let store = open(&dir, &warm, &cold, &[]).await;
    let topic = store.topic("custom").await.unwrap();
    let name = topic.name().clone();
    for base in (0..3000).step_by(100) {
        topic.append((base..base + 100).map(rec).collect()).await.unwrap();
    }
    store.export_now("custom").await.unwrap();
    for base in (3000..3500).step_by(100) {
        topic.append((base..base + 100).map(rec).collect()).await.unwrap();
    }
    store.wal().rotate(&name).await.unwrap();
    store.run_retention_now(SystemTime::now() + Duration::from_secs(100 * 3600)).await.unwrap();
    warm.trim_before(&name, 2000).await.unwrap();
    let r = OffsetRange::new;

    let hundreds = |from: u64, to: u64| (from..to).step_by(100).map(|b| r(b, b + 100)).collect::<Vec<_>>();
    let cold_batches = |from, to| {
        let batches = Arc::clone(&cold).record_batches_from(&name, from, to);
        batches.map(|b| b.unwrap().offset_range()).collect::<Vec<_>>()
    };
    // The default hands out cold's batches as stored, from the one holding the offset asked.
    assert_eq!(cold_batches(150, u64::MAX).await, hundreds(100, 3000));
    // Given an end, it reads no batch starting at or past it.
    assert_eq!(cold_batches(150, 2000).await, hundreds(100, 2000));
    assert_eq!(cold_batches(150, 1950).await, hundreds(100, 2000), "the batch holding 1949 ends past 1950");

    let mut batches = topic.batch_reader(StartPosition::Offset(150)).await.unwrap();
    let mut items = Vec::new();
    let mut next = 150;
    while next < 3500 {
        let item = batches.next().await.unwrap().unwrap();
        assert_eq!(item.from, next);
        next = item.batch.end_offset();
        items.push((item.source, item.batch.offset_range(), item.from));
    }
    // Cold's batches stop at warm's start (2000), the end of cold's slice; warm's
    // [2000, 3000) ends where the WAL takes over. The first batch starts before 150.
    let mut want = vec![(Source::Cold, r(100, 200), 150)];
    for (source, from, to) in
        [(Source::Cold, 200, 2000), (Source::Warm, 2000, 3000), (Source::Hot, 3000, 3500)]
    {
        want.extend(hundreds(from, to).into_iter().map(|b| (source, b, b.start)));
    }
    assert_eq!(items, want);
    let mut batches = topic.batch_reader(StartPosition::Offset(150)).await.unwrap();
    let mut got = Vec::new();
    while got.len() < 3350 {
        let item = batches.next().await.unwrap().unwrap();
        got.extend(item.records());
    }
    let mut records = topic.reader(StartPosition::Offset(150)).await.unwrap();
    for (i, record) in got.iter().enumerate() {
        assert_eq!(record, &records.next().await.unwrap().unwrap(), "record {i} from 150");
    }
    store.close().await;
}

#[tokio::test]
async fn a_custom_cold_tier_refuses_to_record_a_gap_with_refuse_gap() {
    let cold = Custom::default();
    let name = TopicName::new("custom").unwrap();
    let record = Record {
        offset: 0,
        timestamp: 1000,
        key: None,
        headers: vec![],
        payload: bytes::Bytes::from_static(b"r0"),
    };
    cold.append(&name, RecordBatch::from_records(0, &[record]).unwrap()).await.unwrap();
    let err = cold.record_gap(&name, OffsetRange::new(1, 5)).await.unwrap_err();
    assert_eq!(err.kind(), tier_core::ErrorKind::InvalidInput, "{err}");
    let text = err.to_string();
    assert!(text.contains("custom") && text.contains("[1, 5)") && text.contains("cannot record"), "{text}");
    assert_eq!(cold.range(&name).await.unwrap(), OffsetRange::new(0, 1), "nothing changed");
}

/// The warm position needs idempotent appends (the writer re-sends a batch whose
/// confirmation it lost): a warm tier whose capabilities lack it is refused at open,
/// naming the capability, before anything is written; in the cold position it is fine.
#[tokio::test]
async fn a_warm_tier_without_idempotent_appends_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let refused = TieredStore::builder()
        .hot(hot(&dir))
        .warm(Arc::new(Custom(MemoryTier::new(), true)))
        .background(false)
        .open()
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), tier_core::ErrorKind::InvalidInput);
    assert!(refused.to_string().contains("idempotent_append"), "{refused}");
    assert!(!dir.path().join("hot").exists(), "nothing was written");
    let store = TieredStore::builder()
        .hot(hot(&dir))
        .cold(Arc::new(Custom(MemoryTier::new(), true)))
        .background(false)
        .open()
        .await
        .unwrap();
    store.close().await;
}
