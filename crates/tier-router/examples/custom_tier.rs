//! Plugging a custom tier into the warm position and proving it with tier-testkit: a
//! small in-process tier written here (per topic, the appended batches in a `BTreeMap`
//! keyed by base offset, behind a `parking_lot::Mutex`), checked by the conformance
//! suite, then used by a `TieredStore` as its warm tier: records the WAL's retention
//! deleted are read from it, and a lost WAL is replayed from it.
//!
//! `cargo run -p tier-router --example custom_tier [DIR]` (a temporary directory by
//! default): the WAL in `DIR/hot`, the router's state in `DIR/router`. A real tier
//! keeps its batches somewhere that outlives the process; the methods stay the same.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::{self, BoxStream};
use parking_lot::Mutex;
use tier_core::{
    ErrorContext, Offset, OffsetRange, RecordBatch, StartPosition, Tier, TierError, TierKind, Timestamp,
    TopicName,
};
use tier_hot::HotConfig;
use tier_router::{NewRecord, Source, TieredStore, WarmBackend};
use tier_testkit::{SuiteConfig, run_all};

const KIND: TierKind = TierKind::Custom("batch-map");

/// One topic: the batches held, by base offset, and the end of the log (which stays
/// when trimming removes every batch).
#[derive(Debug, Default)]
struct Log {
    batches: BTreeMap<Offset, RecordBatch>,
    end: Offset,
}

impl Log {
    fn range(&self) -> OffsetRange {
        let start = self.batches.first_key_value().map_or(self.end, |(base, _)| *base);
        OffsetRange::new(start, self.end)
    }

    /// The base offset of the batch holding `offset` (or `offset` itself if none does).
    fn base_of(&self, offset: Offset) -> Offset {
        self.batches.range(..=offset).next_back().map_or(offset, |(base, _)| *base)
    }

    /// The batches holding `from..to` (`from` held or at the end), at most `max_bytes` of
    /// them but at least one.
    fn batches(&self, from: Offset, to: Offset, max_bytes: usize) -> Vec<RecordBatch> {
        let (mut out, mut bytes) = (Vec::new(), 0usize);
        if from >= to {
            return out;
        }
        for batch in self.batches.range(self.base_of(from)..).map(|(_, b)| b) {
            bytes = bytes.saturating_add(batch.encoded_len());
            if batch.end_offset() <= from
                || batch.base_offset() >= to
                || (bytes > max_bytes && !out.is_empty())
            {
                break;
            }
            out.push(batch.clone());
        }
        out
    }

    /// The first record at or after `timestamp`: where the running maximum reaches it.
    fn first_at(&self, timestamp: Timestamp) -> Option<Offset> {
        let batch = self.batches.values().find(|b| b.max_timestamp() >= timestamp)?;
        batch.records().find(|r| r.timestamp >= timestamp).map(|r| r.offset)
    }
}

/// The custom tier: every topic's [`Log`] behind one lock.
#[derive(Debug, Default)]
struct BatchMap {
    topics: Mutex<HashMap<TopicName, Log>>,
}

fn ctx(topic: &TopicName, offset: Offset) -> ErrorContext {
    ErrorContext::tier(KIND).topic(topic).offset(offset)
}

#[async_trait]
impl Tier for BatchMap {
    fn kind(&self) -> TierKind {
        KIND
    }
    fn capabilities(&self) -> tier_core::Capabilities {
        tier_core::Capabilities::none().with_idempotent_append(true)
    }

    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        Ok(self.topics.lock().get(topic).map(Log::range).unwrap_or_default())
    }

    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        let mut topics = self.topics.lock();
        let log = topics.entry(topic.clone()).or_default();
        let (base, held) = (batch.base_offset(), log.range());
        if base == held.end || (held.is_empty() && base > held.end) {
            log.end = batch.end_offset();
            log.batches.insert(base, batch);
            Ok(())
        } else if held.contains(base) {
            // A retry of a batch held is fine; anything else at a held offset is a conflict.
            match log.batches.get(&log.base_of(base)) {
                Some(same) if *same == batch => Ok(()),
                _ => Err(TierError::fenced(ctx(topic, base), format!("offset {base} holds another batch"))),
            }
        } else {
            Err(TierError::invalid(ctx(topic, base), format!("base offset {base} does not continue {held}")))
        }
    }

    async fn read_batches(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, TierError> {
        let (topics, none) = (self.topics.lock(), Log::default());
        let log = topics.get(topic).unwrap_or(&none);
        let held = log.range();
        if from < held.start || from > held.end {
            return Err(TierError::trimmed(ctx(topic, from), from, held));
        }
        Ok(log.batches(from, to, max_bytes))
    }

    async fn offset_for_timestamp(
        &self,
        topic: &TopicName,
        timestamp: Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        Ok(self.topics.lock().get(topic).and_then(|log| log.first_at(timestamp)))
    }
}

#[async_trait]
impl WarmBackend for BatchMap {
    async fn append_group(
        &self,
        topic: &TopicName,
        batches: Vec<RecordBatch>,
    ) -> (usize, Result<(), TierError>) {
        // Nothing better than one append after the other.
        tier_router::append_each(self, topic, batches).await
    }

    async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        if let Some(log) = self.topics.lock().get_mut(topic) {
            // Whole batches below `offset`, never the newest.
            while log.batches.len() > 1
                && log.batches.first_key_value().is_some_and(|(_, b)| b.end_offset() <= offset)
            {
                log.batches.pop_first();
            }
        }
        Ok(())
    }

    fn batches_from(&self, topic: &TopicName, from: Offset) -> BoxStream<'_, Result<RecordBatch, TierError>> {
        // The batches as appended (clones share their bytes), from the one holding `from`.
        let topics = self.topics.lock();
        let batches: Vec<RecordBatch> = topics
            .get(topic)
            .map(|log| log.batches.range(log.base_of(from)..).map(|(_, b)| b.clone()).collect())
            .unwrap_or_default();
        stream::iter(batches.into_iter().map(Ok)).boxed()
    }

    async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        let mut topics = self.topics.lock();
        let log = topics.entry(topic.clone()).or_default();
        if log.end > offset {
            return Err(TierError::invalid(ctx(topic, offset), format!("the tier holds up to {}", log.end)));
        }
        log.batches.clear();
        log.end = offset;
        Ok(())
    }

    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        self.topics.lock().entry(topic.clone()).or_default();
        Ok(())
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        Ok(self.topics.lock().contains_key(topic))
    }
}

async fn open(
    dir: &std::path::Path,
    warm: &Arc<BatchMap>,
    topics: &[TopicName],
) -> Result<TieredStore, TierError> {
    // Small WAL segments, so that retention has sealed segments to delete.
    let mut hot = HotConfig::new(dir.join("hot"));
    hot.segment_bytes = 16 << 10;
    TieredStore::builder().hot(hot).warm(warm.clone()).topics(topics.iter().cloned()).open().await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The conformance suite checks the `Tier` contract; it panics, naming the check and
    // the invariant, on the first violation.
    run_all(&BatchMap::default(), &SuiteConfig::new("conformance-")).await;
    println!("the {KIND} tier passed tier-testkit's conformance suite");

    let temp = tempfile::tempdir()?;
    let dir = std::env::args().nth(1).map_or_else(|| temp.path().to_owned(), Into::into);
    let warm = Arc::new(BatchMap::default());
    let events = TopicName::new("events")?;
    let store = open(&dir, &warm, &[]).await?;
    let topic = store.topic(events.as_str()).await?;
    let t0 = 1_700_000_000_000;
    let payload = |n: u64| format!("event {n:>4} {}", "·".repeat(40));
    for base in (0..1000u64).step_by(50) {
        let records = (base..base + 50).map(|n| NewRecord::new(t0 + n as i64, payload(n))).collect();
        topic.append(records).await?;
    }
    // Two days later the WAL's retention (24 hours) deletes its sealed segments: warm
    // holds every acknowledged batch, so nothing is kept for it.
    let deleted = store.run_retention_now(store.clock().now() + Duration::from_secs(48 * 3600)).await?;
    let ranges = topic.ranges().await?;
    println!(
        "retention deleted {} WAL segments: the WAL holds {}, warm holds {}",
        deleted.len(),
        ranges.hot,
        ranges.warm.unwrap_or_default()
    );
    assert!(ranges.hot.start > 0 && ranges.warm == Some(OffsetRange::new(0, 1000)));

    // Read everything back: what the WAL no longer holds comes from the custom tier.
    let mut reader = topic.reader_with_source(StartPosition::Earliest).await?;
    let mut served: Vec<(Source, OffsetRange)> = Vec::new();
    while let Some(item) = reader.next().await {
        let (source, record) = item?;
        assert_eq!(record.payload, payload(record.offset), "offset {}", record.offset);
        match served.last_mut() {
            Some((s, range)) if *s == source => range.end = record.offset + 1,
            _ => served.push((source, OffsetRange::new(record.offset, record.offset + 1))),
        }
        if record.offset == 999 {
            break;
        }
    }
    for (source, range) in &served {
        println!("offsets {range} read from {source:?}");
    }
    assert_eq!(served.first().map(|(s, r)| (*s, r.start)), Some((Source::Warm, 0)));
    drop(reader);
    drop(topic);
    store.close().await;

    // The disk holding the WAL is lost: recovery replays the custom tier's batches into
    // a fresh WAL, and the topic goes on where it ended.
    std::fs::remove_dir_all(dir.join("hot"))?;
    let store = open(&dir, &warm, std::slice::from_ref(&events)).await?;
    for report in store.recovery_reports().await {
        println!(
            "after losing the WAL, {}: replayed {:?} from warm, next offset {}, clean: {}",
            report.topic,
            report.replayed,
            report.next_offset,
            report.is_clean()
        );
        assert!(report.is_clean() && report.next_offset == 1000);
    }
    let topic = store.topic(events.as_str()).await?;
    let next = topic.append(vec![NewRecord::new(t0 + 1000, payload(1000))]).await?;
    println!("the next append got offsets {next}");
    assert_eq!(next, OffsetRange::new(1000, 1001));
    drop(topic);
    store.close().await;
    Ok(())
}
