//! The recovery scan of a segment file after a crash: find the last valid batch, rebuild
//! the writer's state, and say what to do with the bytes after it.

use bytes::Bytes;

use super::{
    SegmentHeader, SegmentIndex, SegmentWriterState, TRAILER_LEN, TRAILER_MAGIC, Trailer, invalid, truncated,
};
use crate::RecordBatch;
use crate::batch::{BATCH_PREFIX_LEN, BatchPrefix, DecodeError, body_crc};

/// What [`scan_unsealed`] does with invalid bytes after the last valid batch.
///
/// A crash while appending leaves a *torn tail*: part of a batch, or a batch whose CRC
/// does not match, or zeros from a preallocated file — with nothing valid after it. An
/// invalid batch that is followed by an intact batch further on is not a torn tail but
/// damage in the middle of the data, and truncating there would drop acknowledged
/// records: both policies refuse it with an error naming the position. So is a batch
/// that is complete and whose CRC matches but that the grammar rejects (offsets past
/// `u64::MAX`, unknown attributes, malformed records): a crash does not write a batch
/// whole with a valid checksum, so it was written that way, and both policies refuse it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryPolicy {
    /// Report an invalid tail in [`ScanOutcome::torn_tail`]; the caller truncates the
    /// file to [`ScanOutcome::data_end`] and continues appending. Only bytes after the
    /// last valid batch, with no intact batch among them, count as a torn tail.
    TruncateTornTail,
    /// Any invalid byte after the last valid batch is an error.
    Refuse,
}

/// The result of [`scan_unsealed`].
#[derive(Clone, Debug)]
pub struct ScanOutcome {
    /// The segment's header.
    pub header: SegmentHeader,
    /// End of the last valid batch: the length to truncate the file to before appending
    /// again (for a sealed file, where the index begins).
    pub data_end: u64,
    /// The writer's state as it was after the last valid batch: next offset, record
    /// count, min/max timestamp and the sparse index, ready for more appends and a seal.
    pub state: SegmentWriterState,
    /// The position and cause of the invalid bytes after `data_end`, if any (only with
    /// [`RecoveryPolicy::TruncateTornTail`]).
    pub torn_tail: Option<(u64, DecodeError)>,
    /// `Some` when the file is already sealed: its (valid) trailer. The file is complete
    /// and must not be truncated or appended to.
    pub sealed: Option<Trailer>,
}

/// Scans a segment file that may be unsealed and may end in a torn tail.
///
/// The header must be valid (a file whose header is incomplete holds no batch; the
/// caller decides whether to delete it). Then every batch is decoded (CRC, records,
/// offset continuity) until the first invalid one or the end. A file that ends in a
/// valid footer matching its data is reported as sealed. Never panics; allocates at
/// most one batch at a time.
pub fn scan_unsealed(bytes: &[u8], policy: RecoveryPolicy) -> Result<ScanOutcome, DecodeError> {
    let (header, header_len) = SegmentHeader::decode(bytes)?;
    if let Some(outcome) = scan_sealed(bytes, &header, header_len)? {
        return Ok(outcome);
    }
    let mut state = SegmentWriterState::new(&header);
    let (data_end, failure) = scan_batches(bytes, header_len, bytes.len(), &mut state)?;
    let torn_tail = match (failure, policy) {
        (None, _) => None,
        (Some(e), RecoveryPolicy::TruncateTornTail) => {
            if let Some(intact) = intact_batch_after(bytes, data_end as usize, state.next_offset()) {
                return Err(invalid(
                    data_end,
                    format!(
                        "invalid batch at byte {data_end} ({e}) is followed by an intact batch at byte {intact}: \
                         damage inside the data, not a torn tail; refusing to truncate acknowledged records"
                    ),
                ));
            }
            Some((data_end, e))
        }
        (Some(e), RecoveryPolicy::Refuse) => return Err(e),
    };
    Ok(ScanOutcome { header, data_end, state, torn_tail, sealed: None })
}

/// The position of a complete, valid batch somewhere after the invalid bytes at `from`
/// whose base offset lies after `next_offset` (where the invalid batch would have begun)
/// and no further than the remaining bytes could number. Candidates are filtered on the
/// cheap prefix fields before any CRC is computed, so the search stays fast on large
/// files.
fn intact_batch_after(bytes: &[u8], from: usize, next_offset: u64) -> Option<usize> {
    let max_records = (bytes.len().saturating_sub(from) / 4) as u64;
    (from + 1..bytes.len().saturating_sub(crate::batch::BATCH_HEADER_LEN)).find(|&q| {
        let rest = &bytes[q..];
        let Ok(prefix) = BatchPrefix::parse(rest) else { return false };
        prefix.base_offset > next_offset
            && prefix.base_offset <= next_offset.saturating_add(max_records)
            && prefix.encoded_len <= rest.len()
            && RecordBatch::decode(&Bytes::copy_from_slice(&rest[..prefix.encoded_len])).is_ok()
    })
}

/// Notes the batches of `bytes[start..end]` in `state`; returns where the valid ones end
/// and why the scan stopped early, if it did (what a torn write can leave: a short
/// batch, an impossible length, a CRC mismatch, a batch not continuing the offsets).
/// A complete batch whose CRC matches but that does not decode is an error: it was
/// written whole, so it is not a torn tail (see [`RecoveryPolicy`]).
fn scan_batches(
    bytes: &[u8],
    start: usize,
    end: usize,
    state: &mut SegmentWriterState,
) -> Result<(u64, Option<DecodeError>), DecodeError> {
    let mut pos = start;
    while pos < end {
        let at = pos as u64;
        let rest = &bytes[pos..end];
        let prefix = match BatchPrefix::parse(rest) {
            Ok(p) => p,
            Err(e) => return Ok((at, Some(e.shifted(at)))),
        };
        if rest.len() < prefix.encoded_len {
            return Ok((
                at,
                Some(truncated(at + BATCH_PREFIX_LEN as u64, prefix.encoded_len as u64, rest.len() as u64)),
            ));
        }
        let encoded = &rest[..prefix.encoded_len];
        let batch = match RecordBatch::decode(&Bytes::copy_from_slice(encoded)) {
            Ok(b) => b,
            Err(e) if body_crc(&encoded[BATCH_PREFIX_LEN..]) == prefix.crc => {
                return Err(invalid(
                    at,
                    format!(
                        "batch at byte {at} is whole and its CRC matches, but it is invalid: {}",
                        e.shifted(at)
                    ),
                ));
            }
            Err(e) => return Ok((at, Some(e.shifted(at)))),
        };
        if let Err(e) = state.note_batch(&batch, at) {
            return Ok((at, Some(invalid(at, e.to_string()))));
        }
        pos += prefix.encoded_len;
    }
    Ok((pos as u64, None))
}

/// `Some` when `bytes` is a complete sealed segment whose footer matches its data; an
/// error when the footer is valid but the data does not match it.
fn scan_sealed(
    bytes: &[u8],
    header: &SegmentHeader,
    header_len: usize,
) -> Result<Option<ScanOutcome>, DecodeError> {
    let len = bytes.len();
    if len < header_len + TRAILER_LEN || bytes[len - TRAILER_MAGIC.len()..] != TRAILER_MAGIC {
        return Ok(None);
    }
    let Ok(trailer) = Trailer::decode(bytes) else {
        return Ok(None);
    };
    if trailer.segment_len() != len as u64
        || u64::from(trailer.header_len) != header_len as u64
        || trailer.base_offset != header.base_offset
    {
        return Ok(None);
    }
    let index_at = trailer.index_position as usize;
    let index_bytes = &bytes[index_at..len - TRAILER_LEN];
    if SegmentIndex::decode(index_bytes, &trailer).is_err() {
        return Ok(None);
    }
    // A valid footer: from here on, a mismatch is corruption of a sealed file.
    let mut state = SegmentWriterState::new(header);
    let (data_end, failure) = scan_batches(bytes, header_len, index_at, &mut state)?;
    if let Some(e) = failure {
        return Err(e);
    }
    if state.footer_bytes() != bytes[index_at..] {
        return Err(invalid(data_end, "sealed segment's footer does not match its data"));
    }
    Ok(Some(ScanOutcome { header: header.clone(), data_end, state, torn_tail: None, sealed: Some(trailer) }))
}
