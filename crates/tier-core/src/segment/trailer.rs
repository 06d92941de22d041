//! The fixed-size trailer that ends a sealed segment: where the index is, what the
//! segment holds. Grammar in `docs/format.md` ("Trailer").

use bytes::{Buf, BufMut};

use super::{
    FORMAT_VERSION, HEADER_FIXED_LEN, INDEX_ENTRY_LEN, MAX_HEADER_LEN, invalid, truncated, unsupported,
};
use crate::batch::DecodeError;
use crate::{Offset, OffsetRange, Timestamp};

/// The last 8 bytes of every sealed segment.
pub const TRAILER_MAGIC: [u8; 8] = *b"TIEREND\0";

/// Size of the trailer in bytes.
pub const TRAILER_LEN: usize = 88;

/// Bytes covered by the trailer's CRC (everything before the CRC field).
const CRC_COVERED: usize = 76;

/// The trailer of a sealed segment. Everything a reader holding only the tail of an
/// object needs: where the index is and what it covers, plus the segment's statistics.
///
/// An empty segment (no batch) has `record_count == 0`, no index entry,
/// `min_timestamp == Timestamp::MAX` and `max_timestamp == Timestamp::MIN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trailer {
    /// Byte position of the index, which is also the end of the last batch.
    pub index_position: u64,
    /// Offset of the first record (equals the header's base offset).
    pub base_offset: Offset,
    /// One past the last record's offset.
    pub end_offset: Offset,
    /// Number of records (`end_offset - base_offset`).
    pub record_count: u64,
    /// Number of batches.
    pub batch_count: u64,
    /// Smallest record timestamp.
    pub min_timestamp: Timestamp,
    /// Largest record timestamp.
    pub max_timestamp: Timestamp,
    /// Length of the header, so the position of the first batch.
    pub header_len: u32,
    /// Number of index entries.
    pub index_entry_count: u32,
    /// The index interval the writer used (copied from the header).
    pub index_interval_bytes: u32,
    /// CRC-32C of the index bytes.
    pub index_crc: u32,
}

impl Trailer {
    /// Length of the index in bytes.
    pub fn index_len(&self) -> u64 {
        u64::from(self.index_entry_count) * INDEX_ENTRY_LEN as u64
    }

    /// Total length of the sealed segment: data, index and trailer.
    pub fn segment_len(&self) -> u64 {
        // Cannot overflow: checked by `decode`, and writers never come near u64::MAX.
        self.index_position + self.index_len() + TRAILER_LEN as u64
    }

    /// The offsets the segment holds.
    pub fn offset_range(&self) -> OffsetRange {
        OffsetRange::new(self.base_offset, self.end_offset.max(self.base_offset))
    }

    /// The encoding.
    pub fn encode(&self) -> [u8; TRAILER_LEN] {
        let mut out = [0u8; TRAILER_LEN];
        let mut w = &mut out[..];
        w.put_u64_le(self.index_position);
        w.put_u64_le(self.base_offset);
        w.put_u64_le(self.end_offset);
        w.put_u64_le(self.record_count);
        w.put_u64_le(self.batch_count);
        w.put_i64_le(self.min_timestamp);
        w.put_i64_le(self.max_timestamp);
        w.put_u32_le(self.header_len);
        w.put_u32_le(self.index_entry_count);
        w.put_u32_le(self.index_interval_bytes);
        w.put_u32_le(self.index_crc);
        w.put_u16_le(0);
        w.put_u16_le(FORMAT_VERSION);
        let crc = crc32c::crc32c(&out[..CRC_COVERED]);
        out[CRC_COVERED..CRC_COVERED + 4].copy_from_slice(&crc.to_le_bytes());
        out[CRC_COVERED + 4..].copy_from_slice(&TRAILER_MAGIC);
        out
    }

    /// Decodes the trailer held in the last [`TRAILER_LEN`] bytes of `buf` (the tail of
    /// a segment or object). Checks magic, version, CRC and that the fields agree with
    /// each other; error positions are relative to `buf`.
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        if buf.len() < TRAILER_LEN {
            return Err(truncated(0, TRAILER_LEN as u64, buf.len() as u64));
        }
        let start = buf.len() - TRAILER_LEN;
        let t = &buf[start..];
        let at = |rel: usize| (start + rel) as u64;
        if t[CRC_COVERED + 4..] != TRAILER_MAGIC {
            return Err(invalid(at(CRC_COVERED + 4), "bad trailer magic: not a sealed tierlog segment"));
        }
        // The CRC covers the version field (in every version, the trailer ends with its
        // CRC and the magic): checked first, a damaged version field is corruption, and
        // only an intact trailer of another version is `UnsupportedVersion`.
        let stored = (&t[CRC_COVERED..CRC_COVERED + 4]).get_u32_le();
        let computed = crc32c::crc32c(&t[..CRC_COVERED]);
        if stored != computed {
            return Err(DecodeError::Crc { position: at(0), stored, computed });
        }
        let version = (&t[74..76]).get_u16_le();
        if !super::is_supported_version(version) {
            return Err(unsupported(version));
        }
        let mut b = t;
        let tr = Trailer {
            index_position: b.get_u64_le(),
            base_offset: b.get_u64_le(),
            end_offset: b.get_u64_le(),
            record_count: b.get_u64_le(),
            batch_count: b.get_u64_le(),
            min_timestamp: b.get_i64_le(),
            max_timestamp: b.get_i64_le(),
            header_len: b.get_u32_le(),
            index_entry_count: b.get_u32_le(),
            index_interval_bytes: b.get_u32_le(),
            index_crc: b.get_u32_le(),
        };
        let flags = b.get_u16_le();
        if flags != 0 {
            return Err(invalid(at(72), format!("unknown trailer flags {flags:#06x}")));
        }
        tr.check_consistency().map_err(|msg| invalid(at(0), format!("inconsistent trailer: {msg}")))?;
        Ok(tr)
    }

    fn check_consistency(&self) -> Result<(), String> {
        let header_len = self.header_len as usize;
        if !(HEADER_FIXED_LEN < header_len && header_len <= MAX_HEADER_LEN) {
            return Err(format!("header length {header_len} is impossible"));
        }
        if self.index_position < u64::from(self.header_len) {
            return Err(format!("index position {} is inside the header", self.index_position));
        }
        let Some(count) = self.end_offset.checked_sub(self.base_offset) else {
            return Err(format!("end offset {} before base offset {}", self.end_offset, self.base_offset));
        };
        if count != self.record_count {
            return Err(format!(
                "record count {} but offsets {}..{}",
                self.record_count, self.base_offset, self.end_offset
            ));
        }
        if self.index_position.checked_add(self.index_len() + TRAILER_LEN as u64).is_none() {
            return Err("segment length overflows".into());
        }
        if self.record_count == 0 {
            if self.batch_count != 0 || self.index_entry_count != 0 {
                return Err("an empty segment with batches or index entries".into());
            }
            if self.index_position != u64::from(self.header_len) {
                return Err("an empty segment with data".into());
            }
        } else {
            if self.index_entry_count == 0 || self.batch_count < u64::from(self.index_entry_count) {
                return Err(format!(
                    "{} batches but {} index entries",
                    self.batch_count, self.index_entry_count
                ));
            }
            if self.batch_count > self.record_count {
                return Err(format!("{} batches for {} records", self.batch_count, self.record_count));
            }
            if self.min_timestamp > self.max_timestamp {
                return Err("min timestamp after max timestamp".into());
            }
        }
        Ok(())
    }
}
