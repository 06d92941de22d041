//! The in-memory cache of a topic's most recent committed batches.
//!
//! It holds a contiguous suffix of the log, as the very `RecordBatch`es that were
//! appended (shared bytes, no copy), bounded by a byte budget: pushing a batch evicts the
//! oldest ones until they fit. Reads and live-tail catch-ups starting at or after
//! [`BatchCache::start`] are answered without touching disk.
//!
//! The charge is what a cached batch keeps alive. Every batch here owns its bytes
//! exactly ([`RecordBatch::owns_buffer`]: built batches do, and `HotTier::append`
//! compacts a decoded one, which would otherwise hold the whole buffer it was decoded
//! from), so that is its encoding plus [`BATCH_OVERHEAD`]: its slot in the queue, the
//! shared buffer's header and the allocator's rounding. A cache of many tiny batches
//! thus stays within its budget in real memory too.

use std::collections::VecDeque;

use tier_core::{Offset, RecordBatch};

/// Bytes charged per cached batch beyond its encoding: the `RecordBatch` handle's slot
/// in the queue, twice (the queue grows by doubling and never shrinks, so up to half its
/// slots are spare), the shared `Bytes` header (allocated at the first clone) and the
/// allocator's rounding and chunk headers of both allocations.
pub(crate) const BATCH_OVERHEAD: u64 = 2 * std::mem::size_of::<RecordBatch>() as u64 + 64;

/// What a cached batch costs against the budget.
fn cost(batch: &RecordBatch) -> u64 {
    batch.encoded_len() as u64 + BATCH_OVERHEAD
}

/// A byte-bounded suffix of a topic's committed batches.
#[derive(Debug)]
pub(crate) struct BatchCache {
    batches: VecDeque<RecordBatch>,
    bytes: u64,
    budget: u64,
}

impl BatchCache {
    pub(crate) fn new(budget: u64) -> Self {
        Self { batches: VecDeque::new(), bytes: 0, budget }
    }

    /// Adds the batch just committed (it continues the cached suffix) and evicts the
    /// oldest batches beyond the budget. A batch larger than the budget empties the cache.
    pub(crate) fn push(&mut self, batch: RecordBatch) {
        debug_assert!(batch.owns_buffer(), "a cached batch owns its bytes (HotTier::append compacts)");
        if self.batches.back().is_some_and(|b| b.end_offset() != batch.base_offset()) {
            self.clear();
        }
        self.bytes += cost(&batch);
        self.batches.push_back(batch);
        while self.bytes > self.budget {
            match self.batches.pop_front() {
                Some(b) => self.bytes -= cost(&b),
                None => break,
            }
        }
    }

    /// Drops everything.
    pub(crate) fn clear(&mut self) {
        self.batches.clear();
        self.bytes = 0;
    }

    /// Drops batches that end at or before `offset` (retention moved the start).
    pub(crate) fn trim_before(&mut self, offset: Offset) {
        while self.batches.front().is_some_and(|b| b.end_offset() <= offset) {
            if let Some(b) = self.batches.pop_front() {
                self.bytes -= cost(&b);
            }
        }
    }

    /// First cached offset, `None` when empty.
    pub(crate) fn start(&self) -> Option<Offset> {
        self.batches.front().map(RecordBatch::base_offset)
    }

    /// True when the cache holds `offset` or starts at or before it.
    pub(crate) fn covers(&self, offset: Offset) -> bool {
        self.start().is_some_and(|s| s <= offset)
    }

    /// The cached batches holding offsets `from..to`, in order (cheap clones).
    pub(crate) fn batches_between(&self, from: Offset, to: Offset) -> Vec<RecordBatch> {
        let first = self.batches.partition_point(|b| b.end_offset() <= from);
        self.batches.range(first..).take_while(|b| b.base_offset() < to).cloned().collect()
    }

    /// The cached batch starting exactly at `base`, if any.
    pub(crate) fn batch_at(&self, base: Offset) -> Option<RecordBatch> {
        let i = self.batches.partition_point(|b| b.base_offset() < base);
        self.batches.get(i).filter(|b| b.base_offset() == base).cloned()
    }

    /// Bytes charged (encodings plus per-batch overhead).
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use tier_core::Record;

    use super::*;

    fn batch(base: Offset, n: usize) -> RecordBatch {
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                offset: base + i as u64,
                timestamp: 0,
                key: None,
                headers: vec![],
                payload: Bytes::from(vec![1u8; 100]),
            })
            .collect();
        RecordBatch::from_records(base, &records).unwrap()
    }

    #[test]
    fn evicts_oldest_beyond_budget_and_stays_contiguous() {
        let one = batch(0, 1).encoded_len() as u64 + BATCH_OVERHEAD;
        let mut cache = BatchCache::new(one * 3);
        for base in 0..5 {
            cache.push(batch(base, 1));
        }
        assert_eq!(cache.start(), Some(2));
        assert_eq!(cache.bytes(), one * 3);
        assert!(cache.covers(3) && !cache.covers(1));
        let got: Vec<Offset> = cache.batches_between(3, 10).iter().map(RecordBatch::base_offset).collect();
        assert_eq!(got, vec![3, 4]);
        assert_eq!(cache.batch_at(4).map(|b| b.base_offset()), Some(4));
        assert!(cache.batch_at(7).is_none());
        cache.trim_before(4);
        assert_eq!(cache.start(), Some(4));
        cache.push(batch(9, 1));
        assert_eq!(cache.start(), Some(9), "a non-contiguous push restarts the cache");
    }

    #[test]
    fn a_batch_larger_than_the_budget_is_not_kept() {
        let mut cache = BatchCache::new(10);
        cache.push(batch(0, 3));
        assert_eq!(cache.start(), None);
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn tiny_batches_are_charged_their_handles_too() {
        // 1000 single-record batches of ~110 encoded bytes: counting encodings alone
        // would keep all of them in a 110 KB budget; with the per-batch charge it keeps
        // about half, and what it keeps fits the budget including the overhead.
        let encoded = batch(0, 1).encoded_len() as u64;
        let budget = encoded * 1000;
        let mut cache = BatchCache::new(budget);
        for base in 0..1000 {
            cache.push(batch(base, 1));
        }
        let kept = 1000 - cache.start().unwrap();
        assert_eq!(kept * (encoded + BATCH_OVERHEAD), cache.bytes());
        assert!(cache.bytes() <= budget);
        assert!(kept < 1000 && kept >= budget / (encoded + BATCH_OVERHEAD), "kept {kept}");
    }
}
