//! The segment header: what a segment is (magic, version), whose it is (topic) and where
//! it starts (base offset). Grammar in `docs/format.md` ("Segment header").

use bytes::{Buf, BufMut};

use super::{
    DEFAULT_INDEX_INTERVAL_BYTES, FORMAT_VERSION, invalid, is_supported_version, truncated, unsupported,
};
use crate::batch::DecodeError;
use crate::{MAX_TOPIC_NAME_LEN, Offset, Timestamp, TopicName};

/// The first 8 bytes of every segment.
pub const SEGMENT_MAGIC: [u8; 8] = *b"TIERLOG\0";

/// Size of the header without the topic name: magic, version, flags, index interval,
/// base offset, creation time, topic length and CRC.
pub const HEADER_FIXED_LEN: usize = 38;

/// Largest possible header (with a topic name of [`MAX_TOPIC_NAME_LEN`] bytes).
pub const MAX_HEADER_LEN: usize = HEADER_FIXED_LEN + MAX_TOPIC_NAME_LEN;

/// Bytes of the header before the topic name.
const BEFORE_TOPIC: usize = 34;

/// The header that starts every segment.
///
/// `index_interval_bytes` is recorded so that recovery rebuilds exactly the index the
/// writer would have written had it not crashed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The topic the segment belongs to.
    pub topic: TopicName,
    /// Offset of the segment's first record (the first batch's base offset).
    pub base_offset: Offset,
    /// When the segment was created, milliseconds since the Unix epoch.
    pub created_at: Timestamp,
    /// Distance in bytes between two entries of the footer index (0: every batch).
    pub index_interval_bytes: u32,
}

impl SegmentHeader {
    /// A header with the default index interval ([`DEFAULT_INDEX_INTERVAL_BYTES`]).
    pub fn new(topic: TopicName, base_offset: Offset, created_at: Timestamp) -> Self {
        Self { topic, base_offset, created_at, index_interval_bytes: DEFAULT_INDEX_INTERVAL_BYTES }
    }

    /// The same header with another index interval.
    pub fn with_index_interval_bytes(mut self, index_interval_bytes: u32) -> Self {
        self.index_interval_bytes = index_interval_bytes;
        self
    }

    /// Size of the encoding in bytes.
    pub fn encoded_len(&self) -> usize {
        HEADER_FIXED_LEN + self.topic.as_str().len()
    }

    /// The encoding, CRC included.
    pub fn encode(&self) -> Vec<u8> {
        let topic = self.topic.as_str().as_bytes();
        let mut out = Vec::with_capacity(self.encoded_len());
        out.put_slice(&SEGMENT_MAGIC);
        out.put_u16_le(FORMAT_VERSION);
        out.put_u16_le(0);
        out.put_u32_le(self.index_interval_bytes);
        out.put_u64_le(self.base_offset);
        out.put_i64_le(self.created_at);
        // TopicName guarantees at most MAX_TOPIC_NAME_LEN (200) bytes.
        out.put_u16_le(topic.len() as u16);
        out.put_slice(topic);
        let crc = crc32c::crc32c(&out);
        out.put_u32_le(crc);
        out
    }

    /// The error for a header of format `version`, which this build cannot read. The
    /// CRC covers the version field, but where it lies depends on the version: when the
    /// bytes after the version read as this version's layout and the CRC found there
    /// fails, a flipped version field is far likelier than a newer file, and it is
    /// corruption; otherwise `UnsupportedVersion`.
    fn other_version(buf: &[u8], version: u16) -> DecodeError {
        let current_layout_crc = || {
            let topic_len = usize::from((&buf.get(32..BEFORE_TOPIC)?[..]).get_u16_le());
            let len = HEADER_FIXED_LEN + topic_len;
            let stored = (&buf.get(len - 4..len)?[..]).get_u32_le();
            Some((stored, crc32c::crc32c(&buf[..len - 4])))
        };
        match current_layout_crc() {
            Some((stored, computed)) if stored != computed => invalid(
                8,
                format!(
                    "format version {version} is not one this build reads and the header's CRC does not \
                     match (stored {stored:#010x}, computed {computed:#010x}): the header is damaged (or was \
                     written by a newer tierlog with another header layout)"
                ),
            ),
            _ => unsupported(version),
        }
    }

    /// Decodes the header at the start of `buf`; returns it and its length. Bytes after
    /// the header are ignored.
    pub fn decode(buf: &[u8]) -> Result<(Self, usize), DecodeError> {
        let avail = buf.len() as u64;
        if buf.len() < SEGMENT_MAGIC.len() {
            return Err(truncated(0, SEGMENT_MAGIC.len() as u64, avail));
        }
        if buf[..8] != SEGMENT_MAGIC {
            return Err(invalid(0, "bad magic: not a tierlog segment"));
        }
        if buf.len() < 10 {
            return Err(truncated(8, 2, avail - 8));
        }
        let version = (&buf[8..10]).get_u16_le();
        if !is_supported_version(version) {
            return Err(Self::other_version(buf, version));
        }
        if buf.len() < BEFORE_TOPIC {
            return Err(truncated(10, (BEFORE_TOPIC - 10) as u64, avail - 10));
        }
        let mut b = &buf[10..BEFORE_TOPIC];
        let flags = b.get_u16_le();
        let index_interval_bytes = b.get_u32_le();
        let base_offset = b.get_u64_le();
        let created_at = b.get_i64_le();
        let topic_len = usize::from(b.get_u16_le());
        if flags != 0 {
            return Err(invalid(10, format!("unknown header flags {flags:#06x}")));
        }
        if topic_len == 0 || topic_len > MAX_TOPIC_NAME_LEN {
            return Err(invalid(
                32,
                format!("topic name length {topic_len} is outside 1..={MAX_TOPIC_NAME_LEN}"),
            ));
        }
        let len = HEADER_FIXED_LEN + topic_len;
        if buf.len() < len {
            return Err(truncated(
                BEFORE_TOPIC as u64,
                (len - BEFORE_TOPIC) as u64,
                avail - BEFORE_TOPIC as u64,
            ));
        }
        let stored = (&buf[len - 4..len]).get_u32_le();
        let computed = crc32c::crc32c(&buf[..len - 4]);
        if stored != computed {
            return Err(DecodeError::Crc { position: 0, stored, computed });
        }
        let name = std::str::from_utf8(&buf[BEFORE_TOPIC..len - 4])
            .map_err(|_| invalid(BEFORE_TOPIC as u64, "topic name is not UTF-8"))?;
        let topic = TopicName::new(name).map_err(|e| invalid(BEFORE_TOPIC as u64, e.to_string()))?;
        Ok((Self { topic, base_offset, created_at, index_interval_bytes }, len))
    }
}
