//! Reading a sealed segment held in memory (or in an mmap wrapped as [`Bytes`]).

use bytes::Bytes;

use super::collect::{BatchSink, RecordCollector, scan_interval_for_timestamp};
use super::{
    SegmentBatches, SegmentHeader, SegmentIndex, SegmentWriterState, TRAILER_LEN, Trailer, cursor::LastBatch,
    invalid, truncated,
};
use crate::batch::DecodeError;
use crate::{Offset, OffsetRange, ReadLimit, Record, Timestamp};

/// A sealed segment whose bytes are all at hand: a hot-tier file (an mmap handed over
/// with `Bytes::from_owner`) or a whole downloaded object.
///
/// [`open`](Self::open) checks the header, trailer and index (not the data); reads
/// locate their start with the index and check every batch they decode (CRC, offset
/// continuity). [`verify`](Self::verify) checks everything.
#[derive(Clone, Debug)]
pub struct SealedSegment {
    bytes: Bytes,
    header: SegmentHeader,
    header_len: u64,
    trailer: Trailer,
    index: SegmentIndex,
    /// The last batch a read checked (see [`LastBatch`]).
    last: LastBatch,
}

impl SealedSegment {
    /// Opens the sealed segment `bytes`: decodes and cross-checks header, trailer and
    /// index. Costs O(index), not O(data).
    pub fn open(bytes: Bytes) -> Result<Self, DecodeError> {
        let (header, header_len) = SegmentHeader::decode(&bytes)?;
        let len = bytes.len() as u64;
        if bytes.len() < header_len + TRAILER_LEN {
            return Err(truncated(header_len as u64, TRAILER_LEN as u64, len - header_len as u64));
        }
        let trailer = Trailer::decode(&bytes)?;
        let trailer_at = len - TRAILER_LEN as u64;
        if trailer.segment_len() != len {
            return Err(invalid(
                trailer_at,
                format!("the trailer describes a segment of {} bytes, not {len}", trailer.segment_len()),
            ));
        }
        if u64::from(trailer.header_len) != header_len as u64
            || trailer.base_offset != header.base_offset
            || trailer.index_interval_bytes != header.index_interval_bytes
        {
            return Err(invalid(trailer_at, "the trailer does not match the header"));
        }
        let index_at = trailer.index_position;
        // segment_len() == len, so the index lies inside `bytes`.
        let index_bytes = &bytes[index_at as usize..(index_at + trailer.index_len()) as usize];
        let index = SegmentIndex::decode(index_bytes, &trailer).map_err(|e| e.shifted(index_at))?;
        Ok(Self { bytes, header, header_len: header_len as u64, trailer, index, last: LastBatch::default() })
    }

    /// The header.
    pub fn header(&self) -> &SegmentHeader {
        &self.header
    }

    /// The trailer.
    pub fn trailer(&self) -> &Trailer {
        &self.trailer
    }

    /// The footer index.
    pub fn index(&self) -> &SegmentIndex {
        &self.index
    }

    /// The offsets the segment holds.
    pub fn offset_range(&self) -> OffsetRange {
        self.trailer.offset_range()
    }

    /// The whole segment.
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// All batches, from the first, each checked (no batch is taken from the memo of
    /// [`batches_from`](Self::batches_from)).
    pub fn batches(&self) -> SegmentBatches {
        self.batches_between(self.header_len, Some(self.trailer.base_offset))
    }

    /// The batches from byte `position`, which must be a batch boundary (an index entry's
    /// position, or one a previous iteration reported). Continuity is checked from there
    /// to the end of the data. The batch the previous read through this segment (or
    /// any clone of it) checked last is not checked again: a sequential reader whose
    /// read ended inside a batch resumes in it without a second CRC pass.
    pub fn batches_from(&self, position: u64) -> Result<SegmentBatches, DecodeError> {
        if position < self.header_len || position > self.trailer.index_position {
            return Err(invalid(position, "position is outside the segment's data"));
        }
        let entries = self.index.entries();
        let expected =
            entries.binary_search_by_key(&position, |e| e.position).ok().map(|i| entries[i].offset);
        Ok(self.batches_between(position, expected).with_memo(&self.last))
    }

    fn batches_between(&self, position: u64, first_offset: Option<Offset>) -> SegmentBatches {
        let data = self.bytes.slice(position as usize..self.trailer.index_position as usize);
        SegmentBatches::new(
            data,
            position,
            first_offset,
            self.trailer.base_offset,
            Some(self.trailer.end_offset),
        )
    }

    /// Records with offsets in `max(from, start)..min(to, end)` of the segment, in order,
    /// bounded by `limit` as in [`TierExt::read`](crate::TierExt::read) (invariant 6). Starts
    /// at the index interval holding `from`, skipping the records before `from` there.
    /// Returns an empty vector when `from` is at or past the segment's end.
    pub fn read(&self, from: Offset, to: Offset, limit: ReadLimit) -> Result<Vec<Record>, DecodeError> {
        let from = from.max(self.trailer.base_offset);
        let mut collector = RecordCollector::new(from, to, limit);
        let Some(range) = self.index.locate_offset(from) else {
            return Ok(Vec::new());
        };
        let mut batches =
            self.batches_between(range.bytes.start, Some(range.first_offset)).with_memo(&self.last);
        batches.skip_to(from);
        for item in batches {
            if collector.is_full() {
                break;
            }
            let (_, batch) = item?;
            collector.push_batch(&batch);
        }
        Ok(collector.into_records())
    }

    /// The first offset whose running maximum timestamp is `>= timestamp`
    /// ([`Tier`](crate::Tier) invariant 7, within this segment), or `None` when no
    /// record reaches it. Reads one index interval at most.
    pub fn offset_for_timestamp(&self, timestamp: Timestamp) -> Result<Option<Offset>, DecodeError> {
        let Some(range) = self.index.locate_timestamp(timestamp) else {
            return Ok(None);
        };
        let data = self.bytes.slice(range.bytes.start as usize..range.bytes.end as usize);
        let batches = SegmentBatches::new(
            data,
            range.bytes.start,
            Some(range.first_offset),
            self.trailer.base_offset,
            Some(range.end_offset),
        );
        scan_interval_for_timestamp(batches, timestamp, range.max_timestamp_before, range.bytes.start)
            .map(Some)
    }

    /// Checks the whole segment: every batch (CRC, continuity) and that rebuilding the
    /// footer from the data gives exactly the stored footer (index, statistics).
    pub fn verify(&self) -> Result<(), DecodeError> {
        let mut state = SegmentWriterState::new(&self.header);
        for item in self.batches() {
            let (position, batch) = item?;
            state
                .note_batch(&batch, position)
                .map_err(|e| invalid(position, format!("batch does not continue the segment: {e}")))?;
        }
        let footer = &self.bytes[self.trailer.index_position as usize..];
        if state.footer_bytes() != footer {
            return Err(invalid(
                self.trailer.index_position,
                "the footer does not match the data (index or statistics differ)",
            ));
        }
        Ok(())
    }
}
