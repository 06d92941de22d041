//! Walking the batches of a region of segment bytes, checking offset continuity.

use bytes::Bytes;

use super::invalid;
use crate::batch::DecodeError;
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
        Self { data, base, pos: 0, expected: first_offset, floor, end_offset, done: false }
    }

    /// Absolute byte position of the next batch.
    pub fn next_position(&self) -> u64 {
        self.base + self.pos as u64
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
        let batch = RecordBatch::decode(&self.data.slice(self.pos..)).map_err(|e| e.shifted(at))?;
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
