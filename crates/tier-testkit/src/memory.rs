//! [`MemoryTier`]: an in-memory [`Tier`], the reference implementation of the contract
//! and the router's fast test double.

use std::collections::HashMap;

use async_trait::async_trait;
use parking_lot::RwLock;
use tier_core::segment::{BatchCollector, BatchSink};
use tier_core::{
    ErrorContext, Offset, OffsetRange, RecordBatch, Tier, TierError, TierKind, Timestamp, TopicName,
};

/// One topic's log: whole batches, contiguous, `start..end`.
#[derive(Debug, Default)]
struct TopicLog {
    batches: Vec<RecordBatch>,
    start: Offset,
    end: Offset,
}

impl TopicLog {
    fn range(&self) -> OffsetRange {
        OffsetRange::new(self.start, self.end)
    }

    /// Index of the batch holding `offset`, which must lie in `start..end`.
    fn batch_index(&self, offset: Offset) -> usize {
        self.batches.partition_point(|b| b.end_offset() <= offset)
    }
}

/// An in-memory tier: per topic, a vector of encoded [`RecordBatch`]es behind a lock.
///
/// Honours every invariant of the [`Tier`] contract, including idempotent re-append of
/// an identical batch (it has `idempotent_append`) and [`TierError::Fenced`] for a
/// different batch at a held offset. [`trim_before`](Self::trim_before) drops old
/// batches, so it can stand in for a warm or cold tier whose start has moved.
#[derive(Debug, Default)]
pub struct MemoryTier {
    topics: RwLock<HashMap<TopicName, TopicLog>>,
}

impl MemoryTier {
    /// An empty tier.
    pub fn new() -> Self {
        Self::default()
    }

    /// Drops every batch of `topic` that lies wholly below `offset` (a batch holding
    /// `offset` stays) and returns the range held afterwards. The end never moves; when
    /// every batch goes, the range is empty at the old end.
    pub fn trim_before(&self, topic: &TopicName, offset: Offset) -> OffsetRange {
        let mut topics = self.topics.write();
        let Some(log) = topics.get_mut(topic) else {
            return OffsetRange::default();
        };
        let keep_from = log.batches.partition_point(|b| b.end_offset() <= offset);
        log.batches.drain(..keep_from);
        log.start = log.batches.first().map_or(log.end, RecordBatch::base_offset);
        log.range()
    }

    /// Drops every batch of `topic` that ends past `offset`, as a failover to a replica
    /// behind takes the writes the replica never got: the end moves back to the end of
    /// the last batch kept (to the start when none is). Returns the range held afterwards.
    pub fn lose_after(&self, topic: &TopicName, offset: Offset) -> OffsetRange {
        let mut topics = self.topics.write();
        let Some(log) = topics.get_mut(topic) else {
            return OffsetRange::default();
        };
        let keep = log.batches.partition_point(|b| b.end_offset() <= offset);
        log.batches.truncate(keep);
        log.end = log.batches.last().map_or(log.start, RecordBatch::end_offset);
        log.range()
    }

    /// Makes `topic` known (listed by [`topics`](Self::topics)) while it holds nothing.
    pub fn create_topic(&self, topic: &TopicName) {
        self.topics.write().entry(topic.clone()).or_default();
    }

    /// The topics that were ever appended to or [created](Self::create_topic).
    pub fn topics(&self) -> Vec<TopicName> {
        let mut names: Vec<_> = self.topics.read().keys().cloned().collect();
        names.sort();
        names
    }

    /// The batches `topic` holds now, in order (clones share the bytes).
    pub fn batches(&self, topic: &TopicName) -> Vec<RecordBatch> {
        self.topics.read().get(topic).map(|log| log.batches.clone()).unwrap_or_default()
    }

    fn ctx(topic: &TopicName) -> ErrorContext {
        ErrorContext::tier(TierKind::Memory).topic(topic)
    }
}

#[async_trait]
impl Tier for MemoryTier {
    fn kind(&self) -> TierKind {
        TierKind::Memory
    }

    fn capabilities(&self) -> tier_core::Capabilities {
        tier_core::Capabilities::none().with_idempotent_append(true)
    }

    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        Ok(self.topics.read().get(topic).map(TopicLog::range).unwrap_or_default())
    }

    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        let mut topics = self.topics.write();
        let log = topics.entry(topic.clone()).or_default();
        let base = batch.base_offset();
        let ctx = || Self::ctx(topic).offset(base);
        if base == log.end || (log.start == log.end && base > log.end) {
            if log.start == log.end {
                log.start = base;
            }
            log.end = batch.end_offset();
            log.batches.push(batch);
            return Ok(());
        }
        if log.range().contains(base) {
            let held = &log.batches[log.batch_index(base)];
            if *held == batch {
                return Ok(());
            }
            return Err(TierError::fenced(
                ctx(),
                format!(
                    "a different batch already holds offset {base} (held batch {:?}, offered {:?})",
                    held.offset_range(),
                    batch.offset_range()
                ),
            ));
        }
        Err(TierError::invalid(
            ctx(),
            format!("batch base offset {base} does not continue the held range {}", log.range()),
        ))
    }

    async fn read_batches(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, TierError> {
        let topics = self.topics.read();
        let range = topics.get(topic).map(TopicLog::range).unwrap_or_default();
        if from < range.start || from > range.end {
            return Err(TierError::trimmed(Self::ctx(topic).offset(from), from, range));
        }
        let mut collector = BatchCollector::new(from, to.min(range.end), max_bytes);
        if let Some(log) = topics.get(topic) {
            for batch in log.batches.iter().skip(log.batch_index(from)) {
                if collector.is_full() {
                    break;
                }
                collector.push_batch(batch);
            }
        }
        Ok(collector.into_batches())
    }

    async fn offset_for_timestamp(
        &self,
        topic: &TopicName,
        timestamp: Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        let topics = self.topics.read();
        let Some(log) = topics.get(topic) else {
            return Ok(None);
        };
        let mut running = Timestamp::MIN;
        for batch in &log.batches {
            if running.max(batch.max_timestamp()) < timestamp {
                running = running.max(batch.max_timestamp());
                continue;
            }
            for record in batch.records() {
                running = running.max(record.timestamp);
                if running >= timestamp {
                    return Ok(Some(record.offset));
                }
            }
        }
        Ok(None)
    }
}
