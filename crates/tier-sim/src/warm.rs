//! The warm stand-in: an in-process model of a Valkey primary with one replica, with
//! the faults the simulation injects.
//!
//! Appends land on the primary. Normally the replica confirms at once (`WAIT` is met)
//! and the append is `Ok`. Faults:
//!
//! - **WAIT short**: the append lands on the primary but the replica does not confirm;
//!   the caller gets `Unavailable` (tier-warm's answer when `WAIT` falls short). The
//!   replica stays behind until an append is confirmed again (it then catches up on
//!   everything, as real replication does).
//! - **Entry loss**: failover to the lagging replica — every primary entry beyond what
//!   the replica holds vanishes, and so does a topic marker the replica never confirmed.
//! - **Outage**: every call is `Unavailable`.
//!
//! The contract is tier-warm's: an identical re-append of a held batch is `Ok` (and, when
//! the replica answers, confirms it), a different batch at a held offset is `Fenced`,
//! `trim_before` never drops the newest batch, and `batches_from` returns the batches as
//! appended.
//!
//! For the model, the stand-in also remembers every batch it ever *confirmed* (an `Ok`
//! answer): under `warm_failure_policy = "fail"` only those may be served as committed.
//! And every batch the primary ever *took*: under `degrade` a batch the WAL refused while
//! warm took it may be committed from warm by recovery.

use std::collections::BTreeMap;

use async_trait::async_trait;
use futures::stream::{self, BoxStream, StreamExt};
use parking_lot::Mutex;
use tier_core::segment::{BatchCollector, BatchSink};
use tier_core::{
    ErrorContext, Offset, OffsetRange, RecordBatch, Tier, TierError, TierKind, Timestamp, TopicName,
};
use tier_router::WarmBackend;

#[derive(Debug, Default)]
struct TopicLog {
    batches: Vec<RecordBatch>,
    start: Offset,
    end: Offset,
    /// The end of what the replica holds (`<= end`).
    replica_end: Offset,
}

impl TopicLog {
    fn range(&self) -> OffsetRange {
        OffsetRange::new(self.start, self.end)
    }

    fn batch_index(&self, offset: Offset) -> usize {
        self.batches.partition_point(|b| b.end_offset() <= offset)
    }
}

#[derive(Debug, Default)]
struct State {
    topics: BTreeMap<TopicName, TopicLog>,
    outage: bool,
    wait_short: bool,
    /// Offset → (payload, timestamp) of every record of a batch this tier confirmed.
    confirmed: BTreeMap<Offset, (bytes::Bytes, Timestamp)>,
    /// Offset → payload of every record of a batch the primary ever took (confirmed or
    /// not).
    landed: BTreeMap<Offset, bytes::Bytes>,
    /// Topic markers on the primary, each with whether the replica holds it.
    markers: BTreeMap<TopicName, bool>,
    calls: u64,
}

/// The warm stand-in (see the module docs). Shared by the simulation (which injects the
/// faults and inspects it) and the store (which uses it as its warm backend).
#[derive(Debug, Default)]
pub struct SimWarm {
    state: Mutex<State>,
}

fn ctx(topic: &TopicName) -> ErrorContext {
    ErrorContext::tier(TierKind::Warm).topic(topic)
}

impl SimWarm {
    /// An empty primary and replica, no fault.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts or ends an outage.
    pub fn set_outage(&self, on: bool) {
        self.state.lock().outage = on;
    }

    /// Starts or ends the replica's silence (`WAIT` falls short).
    pub fn set_wait_short(&self, on: bool) {
        self.state.lock().wait_short = on;
    }

    /// True while an outage or a short `WAIT` lasts.
    pub fn faulty(&self) -> bool {
        let s = self.state.lock();
        s.outage || s.wait_short
    }

    /// Fails over to the replica: the primary's entries beyond the replica's end vanish.
    /// Returns the offsets that vanished.
    pub fn fail_over(&self) -> Vec<OffsetRange> {
        let mut s = self.state.lock();
        let mut lost = Vec::new();
        for log in s.topics.values_mut() {
            if log.replica_end >= log.end {
                continue;
            }
            lost.push(OffsetRange::new(log.replica_end.max(log.start), log.end));
            log.batches.retain(|b| b.end_offset() <= log.replica_end);
            // A batch straddling the replica's end cannot exist: the replica holds whole
            // entries. The end goes back to the replica's.
            log.end = log.batches.last().map_or(log.replica_end.min(log.end), RecordBatch::end_offset);
            if log.batches.is_empty() {
                // An empty stream: like a Valkey stream whose entries are all gone.
                log.start = log.end;
            }
            log.replica_end = log.end;
        }
        s.markers.retain(|_, on_replica| *on_replica);
        lost
    }

    /// The record the primary holds at `offset` of `topic` now (payload and timestamp).
    pub fn holds(&self, topic: &TopicName, offset: Offset) -> Option<(bytes::Bytes, Timestamp)> {
        let s = self.state.lock();
        let log = s.topics.get(topic)?;
        if !log.range().contains(offset) {
            return None;
        }
        let batch = log.batches.get(log.batch_index(offset))?;
        batch.records().find(|r| r.offset == offset).map(|r| (r.payload, r.timestamp))
    }

    /// What the tier confirmed at `offset` (payload and timestamp), ever.
    pub fn confirmed(&self, offset: Offset) -> Option<(bytes::Bytes, Timestamp)> {
        self.state.lock().confirmed.get(&offset).cloned()
    }

    /// What the primary took at `offset` (payload), ever, confirmed or not.
    pub fn landed(&self, offset: Offset) -> Option<bytes::Bytes> {
        self.state.lock().landed.get(&offset).cloned()
    }

    /// Calls answered so far.
    pub fn calls(&self) -> u64 {
        self.state.lock().calls
    }

    fn enter(&self, topic: &TopicName) -> Result<parking_lot::MutexGuard<'_, State>, TierError> {
        let mut s = self.state.lock();
        s.calls += 1;
        if s.outage {
            return Err(TierError::unavailable(
                ctx(topic),
                "simulated warm outage: the primary does not answer",
            ));
        }
        Ok(s)
    }
}

/// Records `batch`'s records as confirmed, each payload a copy of its own: a batch the
/// router sends warm may be read from a WAL segment file that the simulation later damages
/// in place, and the model would see what warm confirmed change under it.
fn confirm(s: &mut State, batch: &RecordBatch) {
    for r in batch.records() {
        s.confirmed.insert(r.offset, (bytes::Bytes::copy_from_slice(&r.payload), r.timestamp));
    }
}

#[async_trait]
impl Tier for SimWarm {
    fn kind(&self) -> TierKind {
        TierKind::Warm
    }

    fn capabilities(&self) -> tier_core::Capabilities {
        tier_core::Capabilities::none().with_idempotent_append(true)
    }

    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        let s = self.enter(topic)?;
        Ok(s.topics.get(topic).map(TopicLog::range).unwrap_or_default())
    }

    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        let mut guard = self.enter(topic)?;
        let s = &mut *guard;
        let wait_short = s.wait_short;
        let base = batch.base_offset();
        let log = s.topics.entry(topic.clone()).or_default();
        if base == log.end || (log.start == log.end && base > log.end) {
            if log.start == log.end {
                log.start = base;
                if log.batches.is_empty() {
                    log.replica_end = log.replica_end.max(base);
                }
            }
            log.end = batch.end_offset();
            log.batches.push(owned_copy(&batch));
            for r in batch.records() {
                s.landed.insert(r.offset, bytes::Bytes::copy_from_slice(&r.payload));
            }
        } else if log.range().contains(base) {
            let held = &log.batches[log.batch_index(base)];
            if *held != batch {
                return Err(TierError::fenced(
                    ctx(topic).offset(base),
                    format!(
                        "a different batch already holds offset {base} (held {:?}, offered {:?})",
                        held.offset_range(),
                        batch.offset_range()
                    ),
                ));
            }
        } else {
            return Err(TierError::invalid(
                ctx(topic).offset(base),
                format!("batch base offset {base} does not continue the held range {}", log.range()),
            ));
        }
        if wait_short {
            return Err(TierError::unavailable(
                ctx(topic).offset(base),
                "simulated WAIT short: the entry is on the primary, the replica did not confirm it",
            ));
        }
        // The replica confirms, catching up on everything the primary holds up to here:
        // a met `WAIT` confirms every earlier write too, so earlier batches the replica
        // had not confirmed count as confirmed now.
        let upto = batch.end_offset().max(log.replica_end).min(log.end);
        log.replica_end = upto;
        let caught_up: Vec<RecordBatch> =
            log.batches.iter().filter(|b| b.end_offset() <= upto).cloned().collect();
        for b in &caught_up {
            confirm(s, b);
        }
        // The met `WAIT` confirms the markers written before it too.
        s.markers.values_mut().for_each(|on_replica| *on_replica = true);
        confirm(s, &batch);
        Ok(())
    }

    async fn read_batches(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, TierError> {
        let s = self.enter(topic)?;
        let range = s.topics.get(topic).map(TopicLog::range).unwrap_or_default();
        if from < range.start || from > range.end {
            return Err(TierError::trimmed(ctx(topic).offset(from), from, range));
        }
        let mut collector = BatchCollector::new(from, to.min(range.end), max_bytes);
        if let Some(log) = s.topics.get(topic) {
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
        let s = self.enter(topic)?;
        let Some(log) = s.topics.get(topic) else { return Ok(None) };
        let mut running = Timestamp::MIN;
        for batch in &log.batches {
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

#[async_trait]
impl WarmBackend for SimWarm {
    /// Each batch as [`Tier::append`] (so with its faults): the real tier's script adds
    /// the same batches and stops where an append would be refused.
    async fn append_group(
        &self,
        topic: &TopicName,
        batches: Vec<RecordBatch>,
    ) -> (usize, Result<(), TierError>) {
        tier_core::position::append_each(self, topic, batches).await
    }

    async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        let mut s = self.enter(topic)?;
        let Some(log) = s.topics.get_mut(topic) else { return Ok(()) };
        // Never the newest batch: the stream keeps remembering where the log ends.
        let keep_from = log
            .batches
            .partition_point(|b| b.end_offset() <= offset)
            .min(log.batches.len().saturating_sub(1));
        log.batches.drain(..keep_from);
        log.start = log.batches.first().map_or(log.end, RecordBatch::base_offset);
        Ok(())
    }

    async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        let mut s = self.enter(topic)?;
        let Some(log) = s.topics.get_mut(topic) else { return Ok(()) };
        if log.end > offset {
            return Err(TierError::invalid(
                ctx(topic).offset(offset),
                format!("cannot restart at {offset}: the tier holds {}", log.range()),
            ));
        }
        // Like `XTRIM MINID <offset>-1`: every entry goes, the stream stays.
        log.batches.clear();
        log.start = log.end;
        Ok(())
    }

    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        let mut s = self.enter(topic)?;
        let wait_short = s.wait_short;
        let on_replica = s.markers.entry(topic.clone()).or_insert(false);
        if wait_short {
            return Err(TierError::unavailable(
                ctx(topic),
                "simulated WAIT short: the topic marker is on the primary, the replica did not confirm it",
            ));
        }
        *on_replica = true;
        Ok(())
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        Ok(self.enter(topic)?.markers.contains_key(topic))
    }

    fn batches_from(&self, topic: &TopicName, from: Offset) -> BoxStream<'_, Result<RecordBatch, TierError>> {
        let batches = match self.enter(topic) {
            Ok(s) => Ok(s
                .topics
                .get(topic)
                .map(|log| log.batches.iter().filter(|b| b.end_offset() > from).cloned().collect::<Vec<_>>())
                .unwrap_or_default()),
            Err(e) => Err(e),
        };
        match batches {
            Ok(b) => stream::iter(b.into_iter().map(Ok)).boxed(),
            Err(e) => stream::once(async move { Err(e) }).boxed(),
        }
    }
}

/// `batch` in memory of its own, as a real warm tier holds what it was sent: a batch read
/// from the WAL may share the bytes of a mapped segment file, which the simulation later
/// damages or cuts back in place.
fn owned_copy(batch: &RecordBatch) -> RecordBatch {
    RecordBatch::decode(&batch.to_bytes()).expect("a batch re-decodes from its own encoding")
}
