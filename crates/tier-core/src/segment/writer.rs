//! Building segments: the pure bookkeeping ([`SegmentWriterState`]) and a streaming
//! writer on top of it ([`SegmentWriter`]).

use std::io::Write;

use super::{INDEX_ENTRY_LEN, IndexEntry, SegmentHeader, SegmentIndex, TRAILER_LEN, Trailer};
use crate::{ErrorContext, Offset, OffsetRange, RecordBatch, TierError, Timestamp};

/// What a segment writer must remember to seal: the sparse index being built and the
/// segment's statistics. Pure: it does no I/O, so the hot tier can do its own writes
/// (vectored, fsynced, rotated) and call [`note_batch`](Self::note_batch) for each batch,
/// and recovery can rebuild it from a WAL file ([`scan_unsealed`](super::scan_unsealed)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentWriterState {
    header_len: u64,
    base_offset: Offset,
    index_interval_bytes: u32,
    entries: Vec<IndexEntry>,
    size: u64,
    next_offset: Offset,
    batch_count: u64,
    min_timestamp: Timestamp,
    max_timestamp: Timestamp,
}

impl SegmentWriterState {
    /// The state of a segment holding only `header`.
    pub fn new(header: &SegmentHeader) -> Self {
        let header_len = header.encoded_len() as u64;
        Self {
            header_len,
            base_offset: header.base_offset,
            index_interval_bytes: header.index_interval_bytes,
            entries: Vec::new(),
            size: header_len,
            next_offset: header.base_offset,
            batch_count: 0,
            min_timestamp: Timestamp::MAX,
            max_timestamp: Timestamp::MIN,
        }
    }

    /// Records that `batch` was written at byte `position`. The batch must start at
    /// [`next_offset`](Self::next_offset) and `position` must be [`size`](Self::size)
    /// (batches are back to back) and its offsets must not pass `u64::MAX`; otherwise
    /// nothing changes and the error is [`TierError::InvalidInput`].
    pub fn note_batch(&mut self, batch: &RecordBatch, position: u64) -> Result<(), TierError> {
        let starts_interval = self.check(batch, position)?;
        self.apply(batch, position, starts_interval);
        Ok(())
    }

    /// Checks that `batch` may be noted at `position`; returns whether it starts an index
    /// interval.
    fn check(&self, batch: &RecordBatch, position: u64) -> Result<bool, TierError> {
        if batch.base_offset() != self.next_offset {
            return Err(TierError::invalid(
                ErrorContext::default().offset(batch.base_offset()),
                format!(
                    "batch starts at offset {} but the segment continues at {}",
                    batch.base_offset(),
                    self.next_offset
                ),
            ));
        }
        if batch.checked_end_offset().is_none() {
            return Err(TierError::invalid(
                ErrorContext::default().offset(batch.base_offset()),
                format!(
                    "batch of {} records at offset {} passes the last offset, u64::MAX",
                    batch.record_count(),
                    batch.base_offset()
                ),
            ));
        }
        if position != self.size {
            return Err(TierError::invalid(
                ErrorContext::default().offset(batch.base_offset()),
                format!("batch written at byte {position} but the segment's data ends at {}", self.size),
            ));
        }
        let starts_interval = match self.entries.last() {
            None => true,
            Some(e) => position - e.position >= u64::from(self.index_interval_bytes),
        };
        if starts_interval && self.entries.len() >= u32::MAX as usize {
            return Err(TierError::invalid(
                ErrorContext::default(),
                "segment index is full; rotate the segment",
            ));
        }
        Ok(starts_interval)
    }

    fn apply(&mut self, batch: &RecordBatch, position: u64, starts_interval: bool) {
        self.min_timestamp = self.min_timestamp.min(batch.min_timestamp());
        self.max_timestamp = self.max_timestamp.max(batch.max_timestamp());
        if starts_interval {
            self.entries.push(IndexEntry {
                offset: batch.base_offset(),
                max_timestamp: self.max_timestamp,
                position,
            });
        } else if let Some(last) = self.entries.last_mut() {
            last.max_timestamp = self.max_timestamp;
        }
        self.size += batch.encoded_len() as u64;
        self.next_offset = batch.end_offset();
        self.batch_count += 1;
    }

    /// The offset the next batch must start at.
    pub fn next_offset(&self) -> Offset {
        self.next_offset
    }

    /// Bytes written so far (header and batches): the position of the next batch.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Length of the header, so the position of the first batch.
    pub fn header_len(&self) -> u64 {
        self.header_len
    }

    /// The offsets written so far.
    pub fn offset_range(&self) -> OffsetRange {
        OffsetRange::new(self.base_offset, self.next_offset)
    }

    /// Number of records written.
    pub fn record_count(&self) -> u64 {
        self.next_offset - self.base_offset
    }

    /// Number of batches written.
    pub fn batch_count(&self) -> u64 {
        self.batch_count
    }

    /// Smallest record timestamp, `None` before the first batch.
    pub fn min_timestamp(&self) -> Option<Timestamp> {
        (self.batch_count > 0).then_some(self.min_timestamp)
    }

    /// Largest record timestamp, `None` before the first batch.
    pub fn max_timestamp(&self) -> Option<Timestamp> {
        (self.batch_count > 0).then_some(self.max_timestamp)
    }

    /// The index interval in bytes.
    pub fn index_interval_bytes(&self) -> u32 {
        self.index_interval_bytes
    }

    /// The index entries so far.
    pub fn index_entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// The index as it would be sealed now.
    pub fn index(&self) -> SegmentIndex {
        SegmentIndex::from_parts(self.entries.clone(), self.size, self.next_offset)
    }

    /// Size the segment will have once sealed now: data, index and trailer.
    pub fn sealed_len(&self) -> u64 {
        self.size + (self.entries.len() * INDEX_ENTRY_LEN + TRAILER_LEN) as u64
    }

    /// The trailer sealing the segment now.
    pub fn trailer(&self) -> Trailer {
        let mut index = Vec::new();
        SegmentIndex::encode_entries(&self.entries, &mut index);
        self.trailer_for(&index)
    }

    fn trailer_for(&self, index: &[u8]) -> Trailer {
        Trailer {
            index_position: self.size,
            base_offset: self.base_offset,
            end_offset: self.next_offset,
            record_count: self.record_count(),
            batch_count: self.batch_count,
            min_timestamp: self.min_timestamp,
            max_timestamp: self.max_timestamp,
            // A header is at most MAX_HEADER_LEN (238) bytes.
            header_len: self.header_len as u32,
            // note_batch refuses to add more than u32::MAX entries.
            index_entry_count: self.entries.len() as u32,
            index_interval_bytes: self.index_interval_bytes,
            index_crc: crc32c::crc32c(index),
        }
    }

    /// The footer to write after the last batch to seal the segment: index then trailer.
    pub fn footer_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() * INDEX_ENTRY_LEN + TRAILER_LEN);
        SegmentIndex::encode_entries(&self.entries, &mut out);
        let trailer = self.trailer_for(&out);
        out.extend_from_slice(&trailer.encode());
        out
    }
}

/// A streaming segment writer over any [`Write`]: writes the header on creation, each
/// batch as it is appended and the footer on [`seal`](Self::seal). Used by tests, tools
/// and the cold tier's helpers; the hot tier drives a [`SegmentWriterState`] itself.
#[derive(Debug)]
pub struct SegmentWriter<W: Write> {
    out: W,
    state: SegmentWriterState,
}

fn io_error(what: &str, e: std::io::Error) -> TierError {
    TierError::unavailable(ErrorContext::default(), what).with_source(e)
}

impl<W: Write> SegmentWriter<W> {
    /// Writes `header` to `out` and returns a writer ready for the first batch, which
    /// must start at the header's base offset.
    pub fn new(mut out: W, header: &SegmentHeader) -> Result<Self, TierError> {
        out.write_all(&header.encode()).map_err(|e| io_error("writing the segment header", e))?;
        Ok(Self { out, state: SegmentWriterState::new(header) })
    }

    /// Appends one batch; it must start at [`SegmentWriterState::next_offset`].
    pub fn append(&mut self, batch: &RecordBatch) -> Result<(), TierError> {
        let position = self.state.size();
        let starts_interval = self.state.check(batch, position)?;
        self.out.write_all(&batch.prefix()).map_err(|e| io_error("writing a batch", e))?;
        self.out.write_all(batch.body()).map_err(|e| io_error("writing a batch", e))?;
        self.state.apply(batch, position, starts_interval);
        Ok(())
    }

    /// The bookkeeping so far.
    pub fn state(&self) -> &SegmentWriterState {
        &self.state
    }

    /// Writes the footer, flushes and returns the output.
    pub fn seal(mut self) -> Result<W, TierError> {
        self.out
            .write_all(&self.state.footer_bytes())
            .map_err(|e| io_error("writing the segment footer", e))?;
        self.out.flush().map_err(|e| io_error("flushing the segment", e))?;
        Ok(self.out)
    }
}
