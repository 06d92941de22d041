//! Record batches: the unit of write, replication and checksum.
//!
//! A [`RecordBatch`] is kept encoded. The hot tier writes its bytes to the WAL as they
//! are, the warm tier stores the same bytes as a stream entry, and a sealed segment
//! (and so a cold object) is a header, these batches back to back, and a footer. The
//! grammar is in `docs/format.md` ("Record batch"); in short, little-endian:
//!
//! ```text
//!  0  u64  base_offset
//!  8  u32  length        bytes after this field (so the batch is 12 + length bytes)
//! 12  u32  crc           CRC-32C (Castagnoli) of bytes 16 .. end
//! 16  u32  record_count  >= 1
//! 20  u32  attributes    0; any other value is rejected as unsupported
//! 24  i64  first_timestamp
//! 32  i64  max_timestamp
//! 40  record*            record_count records
//!
//! record := varint length            bytes after this field
//!           zigzag-varint ts_delta   timestamp - first_timestamp
//!           varint key_len_plus_one  0 = no key
//!           key bytes
//!           varint header_count
//!           (varint name_len, name, varint value_len, value) * header_count
//!           payload                  the rest of the record
//! ```
//!
//! The base offset sits outside the CRC, as in Kafka's batch, so the writer can assign
//! offsets to an encoded batch without touching its bytes ([`RecordBatch::with_base_offset`]);
//! a wrong base offset is caught by the continuity checks every reader makes instead.
//!
//! Every offset a batch holds fits in a `u64`: `base_offset + record_count <= u64::MAX`.
//! The decoder refuses a batch that breaks this (corruption: a crafted or damaged base
//! offset) and the builder refuses to build one, so [`RecordBatch::end_offset`] and the
//! offsets of its records never wrap.

use std::fmt;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::{ErrorContext, Header, Offset, OffsetRange, Record, TierError, Timestamp};

/// Bytes before the first record: base offset, length, CRC, count, attributes, timestamps.
pub const BATCH_HEADER_LEN: usize = 40;
/// Bytes before the CRC-covered body: base offset, length and CRC.
pub const BATCH_PREFIX_LEN: usize = 16;
/// Largest encoded batch accepted by the builder and the decoders.
pub const MAX_BATCH_LEN: usize = 64 << 20;
/// Largest body [`RecordBatchBuilder::build`] copies into an exact-size buffer when its
/// buffer has spare capacity; a larger one is shrunk in place instead.
const BUILD_COPY_MAX: usize = 64 << 10;

/// Why bytes failed to decode. Positions are relative to the slice handed to the decoder;
/// callers add the file or object position when they turn this into a [`TierError`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ends before the structure does.
    #[error("truncated at byte {position}: need {needed} more bytes, {available} available")]
    Truncated {
        /// Where the missing bytes begin.
        position: u64,
        /// How many bytes were needed.
        needed: u64,
        /// How many were there.
        available: u64,
    },
    /// A checksum did not match.
    #[error("CRC mismatch at byte {position}: stored {stored:#010x}, computed {computed:#010x}")]
    Crc {
        /// Where the checked structure begins.
        position: u64,
        /// The CRC written in the data.
        stored: u32,
        /// The CRC of the bytes as read.
        computed: u32,
    },
    /// A field holds a value the grammar does not allow.
    #[error("invalid data at byte {position}: {message}")]
    Invalid {
        /// Where the bad field is.
        position: u64,
        /// What is wrong.
        message: String,
    },
    /// The data was written by a format version this build cannot read.
    #[error("unsupported format version {version} (this build reads versions {supported})")]
    UnsupportedVersion {
        /// The version found.
        version: u16,
        /// The versions this build reads, for the message.
        supported: &'static str,
    },
}

impl DecodeError {
    /// The byte position the error refers to, relative to the decoder's input.
    pub fn position(&self) -> u64 {
        match self {
            DecodeError::Truncated { position, .. }
            | DecodeError::Crc { position, .. }
            | DecodeError::Invalid { position, .. } => *position,
            DecodeError::UnsupportedVersion { .. } => 0,
        }
    }

    /// The same error with its position moved by `base` (to make it absolute).
    pub fn shifted(mut self, base: u64) -> Self {
        match &mut self {
            DecodeError::Truncated { position, .. }
            | DecodeError::Crc { position, .. }
            | DecodeError::Invalid { position, .. } => *position += base,
            DecodeError::UnsupportedVersion { .. } => {}
        }
        self
    }

    /// A corruption [`TierError`] carrying this error, with `ctx` for the location.
    pub fn into_tier_error(self, ctx: ErrorContext) -> TierError {
        match self {
            DecodeError::UnsupportedVersion { .. } => TierError::invalid(ctx, self.to_string()),
            _ => TierError::corruption(ctx, self.to_string()),
        }
    }

    fn invalid(position: usize, message: impl Into<String>) -> Self {
        DecodeError::Invalid { position: position as u64, message: message.into() }
    }

    fn truncated(position: usize, needed: usize, available: usize) -> Self {
        DecodeError::Truncated {
            position: position as u64,
            needed: needed as u64,
            available: available as u64,
        }
    }
}

/// The fixed fields at the start of an encoded batch, readable from its first
/// [`BATCH_PREFIX_LEN`] bytes so a streaming reader knows how much to fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchPrefix {
    /// Offset of the first record.
    pub base_offset: Offset,
    /// Whole encoded size of the batch, prefix included.
    pub encoded_len: usize,
    /// The stored CRC-32C of the body.
    pub crc: u32,
}

impl BatchPrefix {
    /// Parses the first [`BATCH_PREFIX_LEN`] bytes of a batch and checks the length is
    /// plausible (at least a header, at most [`MAX_BATCH_LEN`]).
    pub fn parse(buf: &[u8]) -> Result<Self, DecodeError> {
        if buf.len() < BATCH_PREFIX_LEN {
            return Err(DecodeError::truncated(0, BATCH_PREFIX_LEN, buf.len()));
        }
        let mut b = buf;
        let base_offset = b.get_u64_le();
        let length = b.get_u32_le() as usize;
        let crc = b.get_u32_le();
        let encoded_len = 12 + length;
        if encoded_len < BATCH_HEADER_LEN {
            return Err(DecodeError::invalid(
                8,
                format!("batch length {length} is shorter than a batch header"),
            ));
        }
        if encoded_len > MAX_BATCH_LEN {
            return Err(DecodeError::invalid(
                8,
                format!("batch length {length} exceeds the maximum of {MAX_BATCH_LEN} bytes"),
            ));
        }
        Ok(Self { base_offset, encoded_len, crc })
    }
}

/// An encoded, checksummed batch of records with dense offsets.
///
/// Cheap to clone (the bytes are shared). Built by [`RecordBatchBuilder`] or decoded
/// with [`RecordBatch::decode`]; either way its records have been validated, so
/// [`records`](Self::records) cannot fail.
///
/// What holding a batch keeps alive: a built batch's bytes are an allocation of their
/// own, exactly their size; a decoded batch's are a slice of the buffer it was decoded
/// from and keep all of that buffer alive, until [`compacted`](Self::compacted).
#[derive(Clone)]
pub struct RecordBatch {
    base_offset: Offset,
    crc: u32,
    /// Bytes 16.. of the encoding: the CRC-covered part.
    body: Bytes,
    /// `body` is the whole of an allocation of its own (built, or compacted), not a
    /// slice of a larger buffer. Not part of the batch's value (`==` ignores it).
    owns_buffer: bool,
}

impl PartialEq for RecordBatch {
    fn eq(&self, other: &Self) -> bool {
        self.base_offset == other.base_offset && self.crc == other.crc && self.body == other.body
    }
}

impl Eq for RecordBatch {}

impl RecordBatch {
    /// Offset of the first record.
    pub fn base_offset(&self) -> Offset {
        self.base_offset
    }

    /// Number of records (at least 1).
    pub fn record_count(&self) -> u32 {
        (&self.body[0..4]).get_u32_le()
    }

    /// One past the last record's offset.
    ///
    /// For every batch decoded or built this is `base_offset + record_count` exactly.
    /// Only [`with_base_offset`](Self::with_base_offset) can renumber a batch past
    /// `u64::MAX`; its end then saturates at `u64::MAX` instead of wrapping (see
    /// [`checked_end_offset`](Self::checked_end_offset)).
    pub fn end_offset(&self) -> Offset {
        self.base_offset.saturating_add(u64::from(self.record_count()))
    }

    /// One past the last record's offset, or `None` when the batch was renumbered by
    /// [`with_base_offset`](Self::with_base_offset) so far that its offsets pass
    /// `u64::MAX` (no tier stores such a batch).
    pub fn checked_end_offset(&self) -> Option<Offset> {
        self.base_offset.checked_add(u64::from(self.record_count()))
    }

    /// The offsets this batch holds.
    pub fn offset_range(&self) -> OffsetRange {
        OffsetRange::new(self.base_offset, self.end_offset())
    }

    /// Timestamp of the first record.
    pub fn first_timestamp(&self) -> Timestamp {
        (&self.body[8..16]).get_i64_le()
    }

    /// Largest timestamp in the batch.
    pub fn max_timestamp(&self) -> Timestamp {
        (&self.body[16..24]).get_i64_le()
    }

    /// Smallest timestamp in the batch. Walks the records' length and timestamp fields
    /// only: no record is built and nothing is allocated.
    pub fn min_timestamp(&self) -> Timestamp {
        let first = self.first_timestamp();
        let mut min = first;
        let mut pos = BATCH_HEADER_LEN - BATCH_PREFIX_LEN;
        for _ in 0..self.record_count() {
            // Validated when the batch was built or decoded, so these cannot fail.
            let Ok((len, after_len)) = get_varint(&self.body, pos) else { break };
            let Ok((delta, _)) = get_varint(&self.body, after_len) else { break };
            min = min.min(first.wrapping_add(unzigzag(delta)));
            pos = after_len + len as usize;
        }
        min
    }

    /// The stored CRC-32C of the body.
    pub fn crc(&self) -> u32 {
        self.crc
    }

    /// Size of the whole encoding in bytes.
    pub fn encoded_len(&self) -> usize {
        BATCH_PREFIX_LEN + self.body.len()
    }

    /// The same batch renumbered to start at `base_offset`. Costs nothing: the base
    /// offset is not covered by the CRC and the body is shared.
    ///
    /// The caller must know the offsets fit (`base_offset + record_count <= u64::MAX`),
    /// as a writer assigning dense offsets does; where they might not, use
    /// [`try_with_base_offset`](Self::try_with_base_offset). A batch renumbered past
    /// `u64::MAX` does not wrap ([`end_offset`](Self::end_offset) saturates) and a
    /// segment writer refuses it ([`SegmentWriterState::note_batch`](crate::segment::SegmentWriterState::note_batch)).
    pub fn with_base_offset(mut self, base_offset: Offset) -> Self {
        self.base_offset = base_offset;
        self
    }

    /// [`with_base_offset`](Self::with_base_offset), refusing with
    /// [`TierError::InvalidInput`] a base offset whose records would pass `u64::MAX`.
    pub fn try_with_base_offset(self, base_offset: Offset) -> Result<Self, TierError> {
        check_offsets_fit(base_offset, self.record_count())?;
        Ok(self.with_base_offset(base_offset))
    }

    /// The first [`BATCH_PREFIX_LEN`] bytes of the encoding (base offset, length, CRC).
    pub fn prefix(&self) -> [u8; BATCH_PREFIX_LEN] {
        let mut out = [0u8; BATCH_PREFIX_LEN];
        let mut w = &mut out[..];
        w.put_u64_le(self.base_offset);
        w.put_u32_le((self.body.len() + 4) as u32);
        w.put_u32_le(self.crc);
        out
    }

    /// The CRC-covered rest of the encoding, after [`prefix`](Self::prefix). Writing the
    /// prefix then the body (a vectored write) writes the batch without copying it.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Appends the whole encoding to `buf`.
    pub fn write_to(&self, buf: &mut impl BufMut) {
        buf.put_slice(&self.prefix());
        buf.put_slice(&self.body);
    }

    /// True when the batch's bytes are known to be an allocation of their own, exactly
    /// their size, so holding the batch keeps nothing else alive: a built batch (and its
    /// clones, which share those bytes) and a [`compacted`](Self::compacted) one. False
    /// for a decoded batch, whose bytes are a slice of the buffer it was decoded from.
    pub fn owns_buffer(&self) -> bool {
        self.owns_buffer
    }

    /// The same batch with bytes of its own, exactly their size (see
    /// [`owns_buffer`](Self::owns_buffer)): for a batch that outlives the buffer it was
    /// decoded from (a cache), so it does not keep that whole buffer alive. Free when
    /// the batch owns its buffer already; otherwise copies the body once.
    pub fn compacted(self) -> Self {
        if self.owns_buffer {
            return self;
        }
        Self { body: Bytes::from(self.body.to_vec()), owns_buffer: true, ..self }
    }

    /// The whole encoding in one buffer (copies the body).
    pub fn to_bytes(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(self.encoded_len());
        self.write_to(&mut buf);
        buf.freeze()
    }

    /// Decodes the batch at the start of `buf`, checking the CRC and every record. Bytes
    /// after the batch are ignored; the batch occupies [`encoded_len`](Self::encoded_len)
    /// bytes. The body is a zero-copy slice of `buf`.
    pub fn decode(buf: &Bytes) -> Result<Self, DecodeError> {
        let prefix = BatchPrefix::parse(buf)?;
        if buf.len() < prefix.encoded_len {
            return Err(DecodeError::truncated(0, prefix.encoded_len, buf.len()));
        }
        let body = buf.slice(BATCH_PREFIX_LEN..prefix.encoded_len);
        let computed = body_crc(&body);
        if computed != prefix.crc {
            return Err(DecodeError::Crc { position: 0, stored: prefix.crc, computed });
        }
        let count = validate_body(&body)?;
        if prefix.base_offset.checked_add(u64::from(count)).is_none() {
            return Err(DecodeError::invalid(
                0,
                format!(
                    "base offset {} with {count} records overflows the 64-bit offset space",
                    prefix.base_offset
                ),
            ));
        }
        Ok(Self { base_offset: prefix.base_offset, crc: prefix.crc, body, owns_buffer: false })
    }

    /// The records, in offset order.
    pub fn records(&self) -> RecordIter<'_> {
        RecordIter {
            batch: self,
            pos: BATCH_HEADER_LEN - BATCH_PREFIX_LEN,
            index: 0,
            count: self.record_count(),
            first_ts: self.first_timestamp(),
        }
    }

    /// The records with offsets `>= from` (all of them when `from <= base_offset`):
    /// those before are stepped over by their length fields, without being built.
    pub fn records_from(&self, from: Offset) -> RecordIter<'_> {
        let mut records = self.records();
        records.skip_records(from.saturating_sub(self.base_offset));
        records
    }

    /// A batch holding `records`, renumbered from `base_offset` (their own offsets are
    /// ignored). Convenient for tests and tools.
    pub fn from_records(base_offset: Offset, records: &[Record]) -> Result<Self, TierError> {
        let mut builder = RecordBatchBuilder::new();
        for r in records {
            builder.push(r.timestamp, r.key.as_deref(), &r.headers, &r.payload)?;
        }
        builder.build(base_offset)
    }
}

impl fmt::Debug for RecordBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordBatch")
            .field("offsets", &self.offset_range())
            .field("bytes", &self.encoded_len())
            .field("crc", &format_args!("{:#010x}", self.crc))
            .finish()
    }
}

/// Iterator over a batch's records; see [`RecordBatch::records`].
#[derive(Debug)]
pub struct RecordIter<'a> {
    batch: &'a RecordBatch,
    pos: usize,
    index: u32,
    count: u32,
    first_ts: Timestamp,
}

impl RecordIter<'_> {
    /// Steps over the next `n` records (or all that are left) without building them:
    /// only their length fields are read.
    pub(crate) fn skip_records(&mut self, n: u64) {
        let left = u64::from(self.count - self.index);
        let n = n.min(left) as u32;
        for _ in 0..n {
            // Validated when the batch was built or decoded, so this cannot fail; if it
            // did, the iterator ends rather than panicking.
            match get_varint(&self.batch.body, self.pos) {
                Ok((len, after)) => self.pos = after + len as usize,
                Err(_) => {
                    self.index = self.count;
                    return;
                }
            }
            self.index += 1;
        }
    }
}

impl Iterator for RecordIter<'_> {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        if self.index >= self.count {
            return None;
        }
        let body = &self.batch.body;
        let parsed = parse_record(body, self.pos, self.first_ts)
            .expect("batch records are validated when the batch is built or decoded");
        // Cannot overflow for a decoded or built batch; saturates for one renumbered
        // past u64::MAX (see `RecordBatch::end_offset`).
        let offset = self.batch.base_offset.saturating_add(u64::from(self.index));
        self.pos = parsed.end;
        self.index += 1;
        // The common record has no header: skip building (and dropping) an iterator.
        let headers = if parsed.headers.is_empty() {
            Vec::new()
        } else {
            parsed
                .headers
                .iter()
                .map(|&(n, v)| Header { name: body.slice(n.0..n.1), value: body.slice(v.0..v.1) })
                .collect()
        };
        Some(Record {
            offset,
            timestamp: parsed.timestamp,
            key: parsed.key.map(|(a, b)| body.slice(a..b)),
            headers,
            payload: body.slice(parsed.payload.0..parsed.payload.1),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.count - self.index) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for RecordIter<'_> {}

/// Builds a [`RecordBatch`], encoding each record as it is pushed: the payload is copied
/// once, into the batch buffer, and nothing is allocated per record.
///
/// The buffer grows by doubling as records are pushed; [`build`](Self::build) hands the
/// batch exactly the bytes it holds, so a built batch keeps no more memory alive than
/// its encoding.
#[derive(Debug)]
pub struct RecordBatchBuilder {
    buf: Vec<u8>,
    count: u32,
    first_ts: Timestamp,
    max_ts: Timestamp,
    payload_bytes: u64,
}

impl Default for RecordBatchBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl RecordBatchBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::with_capacity(4096)
    }

    /// An empty builder whose buffer is pre-sized for `bytes` of encoded batch.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut buf = Vec::with_capacity(bytes.max(BATCH_HEADER_LEN));
        buf.put_bytes(0, BATCH_HEADER_LEN - BATCH_PREFIX_LEN);
        Self { buf, count: 0, first_ts: 0, max_ts: Timestamp::MIN, payload_bytes: 0 }
    }

    /// Number of records pushed.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True before the first push.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Payload bytes of the records pushed (keys and headers not included).
    pub fn payload_bytes(&self) -> u64 {
        self.payload_bytes
    }

    /// Size the batch would have if built now.
    pub fn encoded_len(&self) -> usize {
        BATCH_PREFIX_LEN + self.buf.len()
    }

    /// Appends a record. Fails, leaving the builder unchanged, if the batch would
    /// exceed [`MAX_BATCH_LEN`].
    pub fn push(
        &mut self,
        timestamp: Timestamp,
        key: Option<&[u8]>,
        headers: &[Header],
        payload: &[u8],
    ) -> Result<(), TierError> {
        if self.count == 0 {
            self.first_ts = timestamp;
        }
        let delta = zigzag(timestamp.wrapping_sub(self.first_ts));
        let inner = record_body_len(varint_len(delta), key, headers, payload.len());
        let total = varint_len(inner as u64) + inner;
        if self.encoded_len() + total > MAX_BATCH_LEN || self.count == u32::MAX {
            return Err(TierError::invalid(
                ErrorContext::default(),
                format!(
                    "record of {total} encoded bytes does not fit in a batch of at most {MAX_BATCH_LEN} bytes \
                     ({} used)",
                    self.encoded_len()
                ),
            ));
        }
        self.buf.reserve(total);
        put_varint(&mut self.buf, inner as u64);
        put_varint(&mut self.buf, delta);
        match key {
            Some(k) => {
                put_varint(&mut self.buf, k.len() as u64 + 1);
                self.buf.put_slice(k);
            }
            None => put_varint(&mut self.buf, 0),
        }
        put_varint(&mut self.buf, headers.len() as u64);
        for h in headers {
            put_varint(&mut self.buf, h.name.len() as u64);
            self.buf.put_slice(&h.name);
            put_varint(&mut self.buf, h.value.len() as u64);
            self.buf.put_slice(&h.value);
        }
        self.buf.put_slice(payload);
        self.count += 1;
        self.max_ts = self.max_ts.max(timestamp);
        self.payload_bytes += payload.len() as u64;
        Ok(())
    }

    /// The most bytes [`push`](Self::push) adds for a record (its timestamp delta at its
    /// widest): summed over the records of a batch, the capacity to build it in without
    /// growing the buffer ([`with_capacity`](Self::with_capacity)).
    pub fn max_record_len(key: Option<&[u8]>, headers: &[Header], payload_len: usize) -> usize {
        let inner = record_body_len(varint_len(u64::MAX), key, headers, payload_len);
        varint_len(inner as u64) + inner
    }

    /// Finishes the batch with its first record at `base_offset`. Fails if no record
    /// was pushed, or if the records' offsets would pass `u64::MAX`.
    ///
    /// The batch's bytes are exactly its encoding: the builder's buffer when it is full,
    /// else a copy of a small body (up to 64 KiB: the builder's buffer goes back to the
    /// allocator whole, to be reused by the next builder, instead of leaving a hole
    /// beside every batch kept), else the buffer shrunk in place.
    pub fn build(mut self, base_offset: Offset) -> Result<RecordBatch, TierError> {
        if self.count == 0 {
            return Err(TierError::invalid(
                ErrorContext::default(),
                "a record batch needs at least one record",
            ));
        }
        check_offsets_fit(base_offset, self.count)?;
        let mut head = &mut self.buf[..BATCH_HEADER_LEN - BATCH_PREFIX_LEN];
        head.put_u32_le(self.count);
        head.put_u32_le(0);
        head.put_i64_le(self.first_ts);
        head.put_i64_le(self.max_ts);
        // A `Vec` whose length is its capacity becomes `Bytes` without another
        // allocation, and what the batch keeps alive is then exactly its body.
        let body = if self.buf.len() == self.buf.capacity() {
            Bytes::from(self.buf)
        } else if self.buf.len() <= BUILD_COPY_MAX {
            Bytes::copy_from_slice(&self.buf)
        } else {
            self.buf.shrink_to_fit();
            Bytes::from(self.buf)
        };
        let crc = body_crc(&body);
        Ok(RecordBatch { base_offset, crc, body, owns_buffer: true })
    }
}

struct ParsedRecord {
    end: usize,
    timestamp: Timestamp,
    key: Option<(usize, usize)>,
    /// (name, value) spans; empty (so unallocated) for the common record without headers.
    headers: Vec<((usize, usize), (usize, usize))>,
    payload: (usize, usize),
}

/// Refuses a base offset whose `count` records would pass `u64::MAX`.
fn check_offsets_fit(base_offset: Offset, count: u32) -> Result<(), TierError> {
    if base_offset.checked_add(u64::from(count)).is_some() {
        return Ok(());
    }
    Err(TierError::invalid(
        ErrorContext::default().offset(base_offset),
        format!("a batch of {count} records at offset {base_offset} would pass the last offset, u64::MAX"),
    ))
}

/// The CRC-32C (Castagnoli) of a batch body. `crc-fast` picks the fastest kernel the
/// CPU offers at run time (carry-less multiplication folding where available), about
/// twice the throughput of the `crc32c` crate on large bodies; the value is the same
/// CRC-32C every other structure of the format uses.
#[inline]
pub(crate) fn body_crc(body: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(body)
}

/// Checks the body (bytes 16.. of a batch): header fields and every record. Returns the
/// record count.
fn validate_body(body: &[u8]) -> Result<u32, DecodeError> {
    const HEAD: usize = BATCH_HEADER_LEN - BATCH_PREFIX_LEN;
    if body.len() < HEAD {
        return Err(DecodeError::truncated(BATCH_PREFIX_LEN, HEAD, body.len()));
    }
    let mut h = &body[..HEAD];
    let count = h.get_u32_le();
    let attributes = h.get_u32_le();
    let first_ts = h.get_i64_le();
    let max_ts = h.get_i64_le();
    if count == 0 {
        return Err(DecodeError::invalid(16, "record count is 0"));
    }
    if attributes != 0 {
        return Err(DecodeError::invalid(20, format!("unsupported batch attributes {attributes:#x}")));
    }
    // Every record takes at least 4 bytes (length, delta, key marker, header count).
    if count as usize > (body.len() - HEAD) / 4 {
        return Err(DecodeError::invalid(
            16,
            format!("record count {count} cannot fit in {} bytes", body.len()),
        ));
    }
    let mut pos = HEAD;
    let mut seen_max = Timestamp::MIN;
    for i in 0..count {
        let r = parse_record(body, pos, first_ts).map_err(|e| e.shifted(BATCH_PREFIX_LEN as u64))?;
        if i == 0 && r.timestamp != first_ts {
            return Err(DecodeError::invalid(
                BATCH_PREFIX_LEN + pos,
                "first record's timestamp differs from the batch's",
            ));
        }
        seen_max = seen_max.max(r.timestamp);
        pos = r.end;
    }
    if pos != body.len() {
        return Err(DecodeError::invalid(
            BATCH_PREFIX_LEN + pos,
            format!("{} bytes after the last record", body.len() - pos),
        ));
    }
    if seen_max != max_ts {
        return Err(DecodeError::invalid(32, format!("max timestamp {max_ts} but records reach {seen_max}")));
    }
    Ok(count)
}

/// Parses the record at `pos` of `body`; positions in errors are relative to `body`.
#[inline]
fn parse_record(body: &[u8], pos: usize, first_ts: Timestamp) -> Result<ParsedRecord, DecodeError> {
    let (len, p) = get_varint(body, pos)?;
    let len = usize::try_from(len).map_err(|_| DecodeError::invalid(pos, "record length overflows"))?;
    if len > body.len() - p {
        return Err(DecodeError::truncated(p, len, body.len() - p));
    }
    let end = p + len;
    let rec = &body[..end];
    let (delta, p) = get_varint(rec, p)?;
    let timestamp = first_ts.wrapping_add(unzigzag(delta));
    let (key_marker, mut p) = get_varint(rec, p)?;
    let key = if key_marker == 0 {
        None
    } else {
        let klen = span_len(key_marker - 1, rec, p)?;
        let span = (p, p + klen);
        p += klen;
        Some(span)
    };
    let (hcount, mut p2) = get_varint(rec, p)?;
    // Each header takes at least two bytes; refuse counts that cannot fit before allocating.
    if hcount > ((end - p2) / 2) as u64 {
        return Err(DecodeError::invalid(p, format!("header count {hcount} cannot fit in the record")));
    }
    let mut headers = Vec::new();
    if hcount > 0 {
        headers.reserve(hcount as usize);
    }
    for _ in 0..hcount {
        let (nlen, p3) = get_varint(rec, p2)?;
        let nlen = span_len(nlen, rec, p3)?;
        let name = (p3, p3 + nlen);
        let (vlen, p4) = get_varint(rec, p3 + nlen)?;
        let vlen = span_len(vlen, rec, p4)?;
        headers.push((name, (p4, p4 + vlen)));
        p2 = p4 + vlen;
    }
    Ok(ParsedRecord { end, timestamp, key, headers, payload: (p2, end) })
}

fn span_len(len: u64, buf: &[u8], pos: usize) -> Result<usize, DecodeError> {
    let available = buf.len().saturating_sub(pos);
    match usize::try_from(len) {
        Ok(len) if len <= available => Ok(len),
        _ => Err(DecodeError::Truncated { position: pos as u64, needed: len, available: available as u64 }),
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A record's encoding after its length varint: the timestamp delta (`delta_len` bytes),
/// the key, the headers and the payload.
fn record_body_len(delta_len: usize, key: Option<&[u8]>, headers: &[Header], payload_len: usize) -> usize {
    let mut len = delta_len + payload_len;
    len += match key {
        Some(k) => varint_len(k.len() as u64 + 1) + k.len(),
        None => 1,
    };
    len += varint_len(headers.len() as u64);
    for h in headers {
        len += varint_len(h.name.len() as u64) + h.name.len();
        len += varint_len(h.value.len() as u64) + h.value.len();
    }
    len
}

fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Writes `v` as an unsigned LEB128 varint.
pub fn put_varint(buf: &mut impl BufMut, mut v: u64) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// Reads an unsigned LEB128 varint at `pos`; returns the value and the position after it.
/// At most 10 bytes; overlong or overflowing encodings are errors.
#[inline(always)]
pub fn get_varint(buf: &[u8], pos: usize) -> Result<(u64, usize), DecodeError> {
    // Fast path: most fields of a record (lengths below 128, small timestamp deltas, the
    // key marker, the header count) are one byte.
    if let Some(&byte) = buf.get(pos)
        && byte < 0x80
    {
        return Ok((u64::from(byte), pos + 1));
    }
    get_varint_long(buf, pos)
}

/// [`get_varint`] for encodings longer than one byte (and the errors).
#[inline(never)]
fn get_varint_long(buf: &[u8], pos: usize) -> Result<(u64, usize), DecodeError> {
    let mut value: u64 = 0;
    let mut p = pos;
    for i in 0..10 {
        let Some(&byte) = buf.get(p) else {
            return Err(DecodeError::truncated(p, 1, 0));
        };
        p += 1;
        if i == 9 && byte > 1 {
            return Err(DecodeError::invalid(pos, "varint overflows 64 bits"));
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((value, p));
        }
    }
    Err(DecodeError::invalid(pos, "varint longer than 10 bytes"))
}

#[cfg(test)]
mod tests;
