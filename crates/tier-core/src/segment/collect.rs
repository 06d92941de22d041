//! Turning decoded batches into the answer of a read or a timestamp lookup.

use super::invalid;
use crate::batch::DecodeError;
use crate::{Offset, ReadLimit, Record, RecordBatch, Timestamp};

/// What a reader pushes the batches it decodes into, in offset order: a
/// [`RecordCollector`] (records, for [`TierExt::read`](crate::TierExt::read)) or a
/// [`BatchCollector`] (the verified batches themselves). Readers ask
/// [`next_offset`](Self::next_offset) where to resume and stop once
/// [`is_full`](Self::is_full).
pub trait BatchSink {
    /// The offset the next wanted record has.
    fn next_offset(&self) -> Offset;

    /// True once nothing further is wanted.
    fn is_full(&self) -> bool;

    /// Takes what is wanted of `batch`, the next batch in offset order.
    fn push_batch(&mut self, batch: &RecordBatch);
}

/// Gathers the records `from..to` of successive batches under a [`ReadLimit`], with the
/// semantics of [`TierExt::read`](crate::TierExt::read) (invariant 6). Every tier that reads
/// batches uses this, so the limit rules live in one place.
#[derive(Debug)]
pub struct RecordCollector {
    from: Offset,
    to: Offset,
    limit: ReadLimit,
    bytes: usize,
    out: Vec<Record>,
    full: bool,
}

impl RecordCollector {
    /// A collector for `from..to` under `limit`.
    pub fn new(from: Offset, to: Offset, limit: ReadLimit) -> Self {
        let full = from >= to || limit.max_records == 0;
        Self { from, to, limit, bytes: 0, out: Vec::new(), full }
    }

    /// The records gathered.
    pub fn into_records(self) -> Vec<Record> {
        self.out
    }

    /// The record bytes the limit still allows.
    pub(crate) fn bytes_left(&self) -> usize {
        self.limit.max_bytes.saturating_sub(self.bytes)
    }
}

impl BatchSink for RecordCollector {
    fn is_full(&self) -> bool {
        self.full
    }

    /// Takes the wanted records of `batch`.
    fn push_batch(&mut self, batch: &RecordBatch) {
        let next = self.next_offset();
        if self.full || batch.end_offset() <= next {
            return;
        }
        // Records before the wanted one are stepped over without being built; room for
        // the rest of the batch's wanted records (bounded by the batch and the limit) is
        // made once.
        let skip = next.saturating_sub(batch.base_offset());
        let wanted = batch.end_offset().min(self.to).saturating_sub(next.max(batch.base_offset()));
        let room = self.limit.max_records.saturating_sub(self.out.len());
        self.out.reserve(usize::try_from(wanted).unwrap_or(usize::MAX).min(room));
        let mut records = batch.records();
        records.skip_records(skip);
        for r in records {
            if r.offset >= self.to {
                self.full = true;
                return;
            }
            let size = r.size();
            if !self.out.is_empty() && self.bytes.saturating_add(size) > self.limit.max_bytes {
                self.full = true;
                return;
            }
            self.bytes = self.bytes.saturating_add(size);
            self.out.push(r);
            if self.out.len() >= self.limit.max_records
                || self.out.last().is_some_and(|r| r.offset.saturating_add(1) >= self.to)
            {
                self.full = true;
                return;
            }
        }
    }

    fn next_offset(&self) -> Offset {
        self.out.last().map_or(self.from, |r| r.offset.saturating_add(1))
    }
}

/// Gathers whole verified batches holding `from..to`, up to `max_bytes` of encoded
/// batches (but at least one batch when any is available): the answer of a batch-level
/// read, which hands out what the tier stores instead of building a [`Record`] per
/// record. The first batch may start before `from` and the last may end after `to`
/// (batches are never split); [`RecordBatch::records_from`] steps over the records
/// before `from`.
#[derive(Debug)]
pub struct BatchCollector {
    next: Offset,
    to: Offset,
    max_bytes: usize,
    bytes: usize,
    out: Vec<RecordBatch>,
    full: bool,
}

impl BatchCollector {
    /// A collector for the batches holding `from..to`, at most `max_bytes` of them.
    pub fn new(from: Offset, to: Offset, max_bytes: usize) -> Self {
        Self { next: from, to, max_bytes, bytes: 0, out: Vec::new(), full: from >= to }
    }

    /// The batches gathered, in offset order.
    pub fn into_batches(self) -> Vec<RecordBatch> {
        self.out
    }
}

impl BatchSink for BatchCollector {
    fn next_offset(&self) -> Offset {
        self.next
    }

    fn is_full(&self) -> bool {
        self.full
    }

    fn push_batch(&mut self, batch: &RecordBatch) {
        if self.full || batch.end_offset() <= self.next {
            return;
        }
        if batch.base_offset() >= self.to
            || (!self.out.is_empty() && self.bytes.saturating_add(batch.encoded_len()) > self.max_bytes)
        {
            self.full = true;
            return;
        }
        self.bytes = self.bytes.saturating_add(batch.encoded_len());
        self.next = batch.end_offset();
        self.out.push(batch.clone());
        self.full = self.next >= self.to;
    }
}

/// The first offset whose running maximum timestamp is `>= t` among `batches` (in
/// offset order), the running maximum before the first batch being `max_before`
/// (invariant 7 of [`Tier`](crate::Tier)). A batch whose maximum stays below `t` is
/// skipped without building its records. Every tier that scans batches for a timestamp
/// uses this.
pub fn first_offset_reaching<E>(
    batches: impl Iterator<Item = Result<RecordBatch, E>>,
    t: Timestamp,
    max_before: Timestamp,
) -> Result<Option<Offset>, E> {
    let mut running = max_before;
    for batch in batches {
        let batch = batch?;
        if running.max(batch.max_timestamp()) < t {
            running = running.max(batch.max_timestamp());
            continue;
        }
        for r in batch.records() {
            running = running.max(r.timestamp);
            if running >= t {
                return Ok(Some(r.offset));
            }
        }
    }
    Ok(None)
}

/// [`first_offset_reaching`] over positioned batches, as the segment cursors yield them.
pub(crate) fn scan_for_timestamp(
    batches: impl Iterator<Item = Result<(u64, RecordBatch), DecodeError>>,
    t: Timestamp,
    max_before: Timestamp,
) -> Result<Option<Offset>, DecodeError> {
    first_offset_reaching(batches.map(|item| item.map(|(_, batch)| batch)), t, max_before)
}

/// [`scan_for_timestamp`] over an index interval the index says holds the answer: not
/// finding it there means the index and the data disagree.
pub(crate) fn scan_interval_for_timestamp(
    batches: impl Iterator<Item = Result<(u64, RecordBatch), DecodeError>>,
    t: Timestamp,
    max_before: Timestamp,
    interval_start: u64,
) -> Result<Offset, DecodeError> {
    scan_for_timestamp(batches, t, max_before)?.ok_or_else(|| {
        invalid(
            interval_start,
            format!("the index says timestamp {t} is reached in the interval at byte {interval_start}, but no record there reaches it"),
        )
    })
}
