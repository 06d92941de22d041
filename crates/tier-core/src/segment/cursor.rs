//! Walking the batches of a region of segment bytes, checking offset continuity.

use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::invalid;
use crate::batch::{BATCH_PREFIX_LEN, BatchPrefix, DecodeError};
use crate::{Offset, RecordBatch};

/// Iterator over the batches of a region of a segment, each with its absolute byte
/// position. Every batch is decoded (CRC and records checked) and must start where the
/// previous one ended; the region must end on a batch boundary at the expected offset.
/// After the first error the iterator ends.
#[derive(Clone, Debug)]
pub struct SegmentBatches {
    data: Bytes,
    base: u64,
    pos: usize,
    expected: Option<Offset>,
    floor: Offset,
    end_offset: Option<Offset>,
    done: bool,
    /// The last batch checked through this memo's owner, with its absolute position.
    memo: Option<LastBatch>,
}

/// The most recently checked batch of a segment held in memory, shared by the cursors
/// of one [`SealedSegment`](super::SealedSegment): a reader whose previous read ended
/// inside a batch starts the next one in that batch, and finds it here instead of
/// checking its CRC and records again. Only batches that passed every check are kept,
/// and the segment's bytes never change, so what it hands out is what a decode would.
#[derive(Clone, Debug, Default)]
pub(crate) struct LastBatch(Arc<Mutex<Option<(u64, RecordBatch)>>>);

impl LastBatch {
    fn get(&self, position: u64) -> Option<RecordBatch> {
        let memo = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        memo.as_ref().filter(|(p, _)| *p == position).map(|(_, b)| b.clone())
    }

    fn set(&self, position: u64, batch: &RecordBatch) {
        let mut memo = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *memo = Some((position, batch.clone()));
    }
}

impl SegmentBatches {
    /// Batches of `data`, which starts at byte `base` of the segment. The first batch
    /// must start at `first_offset` when given, else at `floor` or later; the last
    /// must end at `end_offset` when given.
    pub(crate) fn new(
        data: Bytes,
        base: u64,
        first_offset: Option<Offset>,
        floor: Offset,
        end_offset: Option<Offset>,
    ) -> Self {
        Self { data, base, pos: 0, expected: first_offset, floor, end_offset, done: false, memo: None }
    }

    /// The same cursor, looking up and remembering checked batches in `memo`.
    pub(crate) fn with_memo(mut self, memo: &LastBatch) -> Self {
        self.memo = Some(memo.clone());
        self
    }

    /// Absolute byte position of the next batch.
    pub fn next_position(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Steps over the batches that end at or before `offset` reading only their fixed
    /// fields (length, base offset, record count): no CRC is computed and no record is
    /// parsed, since none of their records is wanted. It stops at the first batch that
    /// holds `offset` or later, and also at anything that does not look like a batch
    /// continuing the previous one (too short, a length beyond the data, an unexpected
    /// base offset): the next [`next`](Iterator::next) then decodes from there and
    /// reports the error, if any. Every batch the iterator yields afterwards is still
    /// fully checked (CRC, records, continuity from the skipped batches' offsets), so a
    /// damaged skipped batch either ends the walk with an error or goes unread.
    pub fn skip_to(&mut self, offset: Offset) {
        if self.done {
            return;
        }
        while let Some(rest) = self.data.get(self.pos..) {
            let Ok(prefix) = BatchPrefix::parse(rest) else { return };
            let Some(count) = rest.get(BATCH_PREFIX_LEN..BATCH_PREFIX_LEN + 4) else { return };
            let count = u32::from_le_bytes([count[0], count[1], count[2], count[3]]);
            let continues = match self.expected {
                Some(want) => prefix.base_offset == want,
                None => prefix.base_offset >= self.floor,
            };
            let Some(end) = prefix.base_offset.checked_add(u64::from(count)) else { return };
            if !continues || count == 0 || prefix.encoded_len > rest.len() || end > offset {
                return;
            }
            if self.end_offset.is_some_and(|e| end > e) {
                return;
            }
            self.pos += prefix.encoded_len;
            self.expected = Some(end);
        }
    }

    fn step(&mut self) -> Result<Option<(u64, RecordBatch)>, DecodeError> {
        let at = self.next_position();
        if self.pos == self.data.len() {
            return match (self.expected, self.end_offset) {
                (Some(got), Some(want)) if got != want => {
                    Err(invalid(at, format!("data ends at offset {got} but should end at {want}")))
                }
                _ => Ok(None),
            };
        }
        let remembered = self.memo.as_ref().and_then(|m| m.get(at));
        let batch = match remembered {
            Some(batch) => batch,
            None => {
                let batch = RecordBatch::decode(&self.data.slice(self.pos..)).map_err(|e| e.shifted(at))?;
                if let Some(memo) = &self.memo {
                    memo.set(at, &batch);
                }
                batch
            }
        };
        match self.expected {
            Some(want) if batch.base_offset() != want => {
                return Err(invalid(
                    at,
                    format!("batch starts at offset {} but offset {want} was expected", batch.base_offset()),
                ));
            }
            None if batch.base_offset() < self.floor => {
                return Err(invalid(
                    at,
                    format!(
                        "batch starts at offset {}, before the segment's {}",
                        batch.base_offset(),
                        self.floor
                    ),
                ));
            }
            _ => {}
        }
        if let Some(end) = self.end_offset
            && batch.end_offset() > end
        {
            return Err(invalid(
                at,
                format!("batch ends at offset {} past the data's end {end}", batch.end_offset()),
            ));
        }
        self.pos += batch.encoded_len();
        self.expected = Some(batch.end_offset());
        Ok(Some((at, batch)))
    }
}

impl Iterator for SegmentBatches {
    type Item = Result<(u64, RecordBatch), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(item)) => Some(Ok(item)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl std::iter::FusedIterator for SegmentBatches {}
