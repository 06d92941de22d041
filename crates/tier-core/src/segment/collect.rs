//! Turning decoded batches into the answer of a read or a timestamp lookup.

use super::invalid;
use crate::batch::DecodeError;
use crate::{Offset, ReadLimit, Record, RecordBatch, Timestamp};

/// Gathers the records `from..to` of successive batches under a [`ReadLimit`], with the
/// semantics of [`Tier::read`](crate::Tier::read) (invariant 6). Every tier that reads
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

    /// True once no further record is wanted.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// Takes the wanted records of `batch`.
    pub fn push_batch(&mut self, batch: &RecordBatch) {
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
                || self.out.last().is_some_and(|r| r.offset + 1 >= self.to)
            {
                self.full = true;
                return;
            }
        }
    }

    /// The offset the next wanted record has.
    pub fn next_offset(&self) -> Offset {
        self.out.last().map_or(self.from, |r| r.offset + 1)
    }

    /// The records gathered.
    pub fn into_records(self) -> Vec<Record> {
        self.out
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
