//! The sparse footer index and the lookups it answers without reading data.
//! Grammar in `docs/format.md` ("Index").

use std::ops::Range;

use bytes::{Buf, BufMut};

use super::{Trailer, invalid, truncated};
use crate::batch::DecodeError;
use crate::{Offset, Timestamp};

/// Size of one encoded [`IndexEntry`].
pub const INDEX_ENTRY_LEN: usize = 24;

/// One entry of the footer index: the start of an *index interval*.
///
/// The batches of a segment are split into intervals: the first batch starts one, and a
/// batch starts a new one when it begins at least `index_interval_bytes` after the start
/// of the current one. Each interval has one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// Base offset of the interval's first batch.
    pub offset: Offset,
    /// The running maximum timestamp at the interval's *last* record: the largest
    /// timestamp of every record of the segment before or in this interval. Never
    /// decreases from one entry to the next; the last entry's equals the segment's
    /// maximum timestamp.
    pub max_timestamp: Timestamp,
    /// Byte position of the interval's first batch in the segment.
    pub position: u64,
}

impl IndexEntry {
    /// The encoding.
    pub fn encode(&self) -> [u8; INDEX_ENTRY_LEN] {
        let mut out = [0u8; INDEX_ENTRY_LEN];
        let mut w = &mut out[..];
        w.put_u64_le(self.offset);
        w.put_i64_le(self.max_timestamp);
        w.put_u64_le(self.position);
        out
    }

    /// Decodes the entry at the start of `buf`.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        if buf.len() < INDEX_ENTRY_LEN {
            return Err(truncated(0, INDEX_ENTRY_LEN as u64, buf.len() as u64));
        }
        let mut b = buf;
        Ok(Self { offset: b.get_u64_le(), max_timestamp: b.get_i64_le(), position: b.get_u64_le() })
    }
}

/// Where to read for a lookup: one index interval of a sealed segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataRange {
    /// The bytes of the segment to read: whole batches, from the interval's first batch
    /// to the next interval (or the end of the data).
    pub bytes: Range<u64>,
    /// Base offset of the first batch in `bytes`.
    pub first_offset: Offset,
    /// One past the last record in `bytes`.
    pub end_offset: Offset,
    /// The running maximum timestamp of the records before `bytes`
    /// (`Timestamp::MIN` for the first interval).
    pub max_timestamp_before: Timestamp,
}

impl DataRange {
    /// Length of the range in bytes.
    pub fn len(&self) -> u64 {
        self.bytes.end - self.bytes.start
    }

    /// True when the range holds no byte (never the case for a range from an index).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The decoded, validated footer index of a sealed segment, with the lookups that need
/// no data: binary searches over the entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentIndex {
    entries: Vec<IndexEntry>,
    data_end: u64,
    end_offset: Offset,
}

impl SegmentIndex {
    /// Decodes `buf`, which must be exactly the index bytes the `trailer` describes, and
    /// checks it: CRC, entry count, and entries that start at the first batch, strictly
    /// increase in offset and position, stay inside the data, and carry a non-decreasing
    /// running maximum timestamp ending at the trailer's maximum. Error positions are
    /// relative to `buf`.
    pub fn decode(buf: &[u8], trailer: &Trailer) -> Result<Self, DecodeError> {
        if buf.len() as u64 != trailer.index_len() {
            return Err(invalid(
                0,
                format!("index is {} bytes; the trailer says {}", buf.len(), trailer.index_len()),
            ));
        }
        let computed = crc32c::crc32c(buf);
        if computed != trailer.index_crc {
            return Err(DecodeError::Crc { position: 0, stored: trailer.index_crc, computed });
        }
        let mut entries = Vec::with_capacity(buf.len() / INDEX_ENTRY_LEN);
        for (i, chunk) in buf.chunks_exact(INDEX_ENTRY_LEN).enumerate() {
            let e = IndexEntry::decode(chunk)?;
            let at = (i * INDEX_ENTRY_LEN) as u64;
            let ok = match entries.last() {
                None => e.offset == trailer.base_offset && e.position == u64::from(trailer.header_len),
                Some(p) => {
                    let p: &IndexEntry = p;
                    e.offset > p.offset && e.position > p.position && e.max_timestamp >= p.max_timestamp
                }
            };
            if !ok || e.offset >= trailer.end_offset || e.position >= trailer.index_position {
                return Err(invalid(
                    at,
                    format!("index entry {i} {e:?} is out of order or outside the data"),
                ));
            }
            entries.push(e);
        }
        if let Some(last) = entries.last()
            && last.max_timestamp != trailer.max_timestamp
        {
            return Err(invalid(
                buf.len().saturating_sub(INDEX_ENTRY_LEN) as u64,
                format!(
                    "last index entry's max timestamp {} differs from the segment's {}",
                    last.max_timestamp, trailer.max_timestamp
                ),
            ));
        }
        Ok(Self { entries, data_end: trailer.index_position, end_offset: trailer.end_offset })
    }

    /// An index built from entries already known to be valid (by a writer).
    pub(crate) fn from_parts(entries: Vec<IndexEntry>, data_end: u64, end_offset: Offset) -> Self {
        Self { entries, data_end, end_offset }
    }

    /// The entries, in order.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// The byte range and offsets of index interval `i`, or `None` past the last one.
    pub fn interval(&self, i: usize) -> Option<DataRange> {
        let e = self.entries.get(i)?;
        let (end_pos, end_offset) = match self.entries.get(i + 1) {
            Some(next) => (next.position, next.offset),
            None => (self.data_end, self.end_offset),
        };
        let max_timestamp_before = match i.checked_sub(1) {
            Some(p) => self.entries[p].max_timestamp,
            None => Timestamp::MIN,
        };
        Some(DataRange {
            bytes: e.position..end_pos,
            first_offset: e.offset,
            end_offset,
            max_timestamp_before,
        })
    }

    /// Number of the interval holding `offset`, or `None` outside the segment.
    pub fn interval_for_offset(&self, offset: Offset) -> Option<usize> {
        let first = self.entries.first()?;
        if offset < first.offset || offset >= self.end_offset {
            return None;
        }
        Some(self.entries.partition_point(|e| e.offset <= offset) - 1)
    }

    /// Number of the interval holding the first offset whose running maximum timestamp
    /// is `>= timestamp`, or `None` when no record of the segment reaches `timestamp`.
    pub fn interval_for_timestamp(&self, timestamp: Timestamp) -> Option<usize> {
        let i = self.entries.partition_point(|e| e.max_timestamp < timestamp);
        (i < self.entries.len()).then_some(i)
    }

    /// The bytes to read to find the batch holding `offset`: its index interval. `None`
    /// when the segment does not hold `offset`.
    pub fn locate_offset(&self, offset: Offset) -> Option<DataRange> {
        self.interval(self.interval_for_offset(offset)?)
    }

    /// The bytes holding the first offset whose running maximum timestamp is
    /// `>= timestamp` (see [`Tier`](crate::Tier) invariant 7), with the running maximum
    /// before them to continue from. `None` when no record reaches `timestamp`.
    pub fn locate_timestamp(&self, timestamp: Timestamp) -> Option<DataRange> {
        self.interval(self.interval_for_timestamp(timestamp)?)
    }

    /// The encoding of `entries` (without CRC; the trailer holds it).
    pub(crate) fn encode_entries(entries: &[IndexEntry], out: &mut Vec<u8>) {
        out.reserve(entries.len() * INDEX_ENTRY_LEN);
        for e in entries {
            out.put_slice(&e.encode());
        }
    }
}
