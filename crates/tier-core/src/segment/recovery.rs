//! The recovery scan of a segment file after a crash: find the last valid batch, rebuild
//! the writer's state, and say what to do with the bytes after it.

use bytes::Bytes;

use super::{
    SegmentHeader, SegmentIndex, SegmentWriterState, TRAILER_LEN, TRAILER_MAGIC, Trailer, invalid, truncated,
};
use crate::batch::{BATCH_PREFIX_LEN, BatchPrefix, DecodeError, body_crc};
use crate::{Offset, OffsetRange, RecordBatch, TopicName};

/// What [`scan_unsealed`] does with invalid bytes after the last valid batch.
///
/// A crash while appending leaves a *torn tail*: part of a batch, or a batch whose CRC
/// does not match, or zeros from a preallocated file — with nothing valid after it. An
/// invalid batch that is followed by an intact batch further on is a torn tail only
/// where no fsync covered it ([`Unsynced`]: writeback persists pages in any order, so an
/// unwritten page can sit before written ones); where every byte was fsynced it is damage
/// in the middle of the data, and so are invalid bytes with no zeroed sector among them
/// (a flipped bit, garbage: an unwritten page reads as zeros); truncating there would drop
/// acknowledged records: both policies refuse it with an error naming the position. So is
/// a batch that is complete and whose CRC matches but that the grammar rejects (offsets
/// past `u64::MAX`, unknown attributes, malformed records): a crash does not write a
/// batch whole with a valid checksum, so it was written that way, and both policies
/// refuse it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryPolicy {
    /// Report an invalid tail in [`ScanOutcome::torn_tail`]; the caller truncates the
    /// file to [`ScanOutcome::data_end`] and continues appending. Only bytes after the
    /// last valid batch count as a torn tail, and with an intact batch among them only
    /// where they read as unwritten and [`Unsynced`] says no fsync covered them.
    TruncateTornTail,
    /// Any invalid byte after the last valid batch is an error.
    Refuse,
}

/// What the writer's rules say about how much of a file's data a crash may have left
/// non-durable: where its *durable point* (the end of its last completed fsync) can lie.
/// [`scan_unsealed_with`] calls an invalid batch followed by intact ones a torn tail only
/// when it reads as unwritten and every byte from it to the file's end can lie past the
/// durable point (see [`hole_is_torn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsynced {
    /// Every batch of the file was fsynced: nothing past the last valid batch can be
    /// followed by intact data after a crash.
    Nothing,
    /// Every write was fsynced before the next one began, and no write holding more than
    /// one batch was longer than this many bytes: only the last write's bytes can be
    /// missing, and they all lie within this many bytes before the file's end.
    LastWrite(u64),
    /// No fsync position is known: any byte of the data may be past the durable point.
    Anything,
}

/// The unit a disk writes atomically at least (a sector): pages that never reached the
/// disk read back as zeros in whole, aligned units of this size.
pub const SECTOR: u64 = 512;

/// True when invalid bytes at `data_end`, followed by an intact batch, in a file of
/// `file_len` bytes, can be a hole a crash left in bytes no fsync covered (a torn tail);
/// false when they must be damage. `unwritten`: a whole aligned [`SECTOR`] among them
/// reads as zeros, as pages that never reached the disk do — a flipped bit or garbage
/// with no zeroed sector is damage wherever it lies.
///
/// Under [`Unsynced::LastWrite(max)`](Unsynced::LastWrite), the last write began at a
/// batch boundary at or before the hole, at or after `file_len - max`; the hole can be in
/// it only when `file_len - data_end <= max`. A write of one batch longer than `max`
/// holds no intact batch after a hole inside it, so intact data after such a hole came
/// from a later write, which began after the hole's write was fsynced.
pub fn hole_is_torn(data_end: u64, file_len: u64, unwritten: bool, unsynced: Unsynced) -> bool {
    unwritten
        && match unsynced {
            Unsynced::Nothing => false,
            Unsynced::LastWrite(max) => file_len.saturating_sub(data_end) <= max,
            Unsynced::Anything => true,
        }
}

/// The unit the kernel writes a file back in (a page): a page written after the last
/// fsync that never reached the disk reads as zeros from where the durable bytes end in
/// it to its end.
pub const PAGE: u64 = 4096;

/// True when the invalid bytes `from..to` read as a page that never reached the disk: a
/// whole, aligned [`SECTOR`] overlapping them is zeros, or every byte from `from` (where
/// the last valid batch ends, so where the unwritten bytes of a page begin) to the end of
/// its [`PAGE`] is zero — the shape of an unwritten page whose first part was durable,
/// which may hold no whole zeroed sector. The evidence [`scan_unsealed_with`] passes to
/// [`hole_is_torn`]; a caller judging other written bytes after a hole (a segment's
/// trailer) uses the same.
pub fn unwritten_page(bytes: &[u8], from: u64, to: u64) -> bool {
    let page_end = (from / PAGE + 1) * PAGE;
    let rest = usize::try_from(from)
        .ok()
        .zip(usize::try_from(page_end.min(bytes.len() as u64)).ok())
        .and_then(|(a, b)| bytes.get(a..b));
    rest.is_some_and(|r| !r.is_empty() && r.iter().all(|&b| b == 0)) || zeroed_sector(bytes, from, to)
}

/// True when a whole, aligned [`SECTOR`] of `bytes` that overlaps `from..to` is zeros.
fn zeroed_sector(bytes: &[u8], from: u64, to: u64) -> bool {
    let mut start = from - from % SECTOR;
    while start < to {
        let end = start + SECTOR;
        let sector =
            usize::try_from(start).ok().zip(usize::try_from(end).ok()).and_then(|(a, b)| bytes.get(a..b));
        if sector.is_some_and(|s| s.iter().all(|&b| b == 0)) {
            return true;
        }
        start = end;
    }
    false
}

/// Intact batches a torn tail drops: found after its first invalid byte, in bytes no
/// fsync covered (a hole before written pages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DroppedIntact {
    /// Position of the first intact batch after the invalid bytes.
    pub position: u64,
    /// The offsets dropped with the tail: from where the first invalid batch starts to
    /// the end of the last intact batch found after it.
    pub offsets: OffsetRange,
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
    /// With a torn tail: the intact batches found after its invalid bytes, which it drops
    /// (only where [`Unsynced`] allows it, see [`scan_unsealed_with`]).
    pub dropped_intact: Option<DroppedIntact>,
    /// `Some` when the file is already sealed: its (valid) trailer. The file is complete
    /// and must not be truncated or appended to.
    pub sealed: Option<Trailer>,
}

/// Scans a segment file that may be unsealed and may end in a torn tail, every byte of
/// its data fsynced: [`scan_unsealed_with`] and [`Unsynced::Nothing`].
pub fn scan_unsealed(bytes: &[u8], policy: RecoveryPolicy) -> Result<ScanOutcome, DecodeError> {
    scan_unsealed_with(bytes, policy, Unsynced::Nothing)
}

/// Scans a segment file that may be unsealed and may end in a torn tail.
///
/// The header must be valid (a file whose header is incomplete holds no batch; the
/// caller decides whether to delete it). Then every batch is decoded (CRC, records,
/// offset continuity) until the first invalid one or the end. A file that ends in a
/// valid footer matching its data is reported as sealed. Invalid bytes followed by an
/// intact batch are a torn tail (reported in [`ScanOutcome::dropped_intact`]) when
/// [`hole_is_torn`] says so — a whole [`SECTOR`] among them reads as zeros, and
/// `unsynced` allows bytes that far from the end to be unsynced — and an error (damage)
/// otherwise. Never panics; allocates at most one batch at a time.
pub fn scan_unsealed_with(
    bytes: &[u8],
    policy: RecoveryPolicy,
    unsynced: Unsynced,
) -> Result<ScanOutcome, DecodeError> {
    let (header, header_len) = SegmentHeader::decode(bytes)?;
    if let Some(outcome) = scan_sealed(bytes, &header, header_len)? {
        return Ok(outcome);
    }
    let mut state = SegmentWriterState::new(&header);
    let (data_end, failure) = scan_batches(bytes, header_len, bytes.len(), &mut state)?;
    let mut dropped_intact = None;
    let torn_tail = match (failure, policy) {
        (None, _) => None,
        (Some(e), RecoveryPolicy::TruncateTornTail) => {
            let next = state.next_offset();
            if let Some(intact) = intact_batch_after(bytes, data_end as usize, next) {
                let unwritten = unwritten_page(bytes, data_end, intact as u64);
                if !hole_is_torn(data_end, bytes.len() as u64, unwritten, unsynced) {
                    let why = if unwritten {
                        "bytes no fsync covered cannot reach that far"
                    } else {
                        "neither a sector of it nor the rest of its page reads as zeros, as pages that never \
                         reached the disk do"
                    };
                    return Err(invalid(
                        data_end,
                        format!(
                            "invalid batch at byte {data_end} ({e}) is followed by an intact batch at byte \
                             {intact} ({why}): damage inside the data, not a torn tail; refusing to \
                             truncate acknowledged records"
                        ),
                    ));
                }
                let end = last_intact_end(bytes, intact);
                dropped_intact =
                    Some(DroppedIntact { position: intact as u64, offsets: OffsetRange::new(next, end) });
            }
            Some((data_end, e))
        }
        (Some(e), RecoveryPolicy::Refuse) => return Err(e),
    };
    Ok(ScanOutcome { header, data_end, state, torn_tail, dropped_intact, sealed: None })
}

/// True when `bytes`, the start of the file of a segment of `topic` starting at
/// `base_offset`, is what a crash leaves of a header whose write never reached the disk,
/// or reached it in part: the file's length was made durable before its blocks (ext4
/// `data=writeback`), so the header reads as zeros, wholly or in part. Every byte of the
/// header's length (or of `bytes`, if shorter) whose value the file's name and topic fix
/// — magic, version, flags, base offset, topic length and name — is that byte or zero,
/// and at least one of them that is not zero reads zero. A header that decodes (its CRC
/// matches) was written; a wrong non-zero byte (another magic, another topic's name) is
/// not a header that was never written; nor is one all of whose fixed bytes are right
/// (its CRC or creation time is damaged).
pub fn header_unwritten(bytes: &[u8], topic: &TopicName, base_offset: Offset) -> bool {
    if SegmentHeader::decode(bytes).is_ok() {
        // Whole, with a matching CRC: it was written (if not as this file's).
        return false;
    }
    let expected = SegmentHeader::new(topic.clone(), base_offset, 0).encode();
    let crc_at = expected.len() - 4;
    // Bytes any value may fill: the index interval, the creation time and the CRC.
    let free = |i: usize| (12..16).contains(&i) || (24..32).contains(&i) || i >= crc_at;
    let found = &bytes[..bytes.len().min(expected.len())];
    let mut zeroed = false;
    for (i, (&got, &want)) in found.iter().zip(&expected).enumerate() {
        if free(i) || got == want {
            continue;
        }
        if got != 0 {
            return false;
        }
        zeroed = true;
    }
    zeroed
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

/// The complete, valid batch at `pos`, if there is one.
fn batch_at(bytes: &[u8], pos: usize) -> Option<RecordBatch> {
    let rest = bytes.get(pos..)?;
    let prefix = BatchPrefix::parse(rest).ok()?;
    let encoded = rest.get(..prefix.encoded_len)?;
    RecordBatch::decode(&Bytes::copy_from_slice(encoded)).ok()
}

/// The end offset of the last intact batch at or after the intact batch at `first`:
/// follows the batches that continue the offsets, and past invalid bytes the next intact
/// batch further on.
fn last_intact_end(bytes: &[u8], first: usize) -> Offset {
    let mut pos = first;
    let mut end: Option<Offset> = None;
    loop {
        while let Some(batch) = batch_at(bytes, pos).filter(|b| end.is_none_or(|e| b.base_offset() >= e)) {
            end = Some(batch.end_offset());
            pos += batch.encoded_len();
        }
        let Some(last) = end else { return 0 };
        match intact_batch_after(bytes, pos, last) {
            Some(next) => pos = next,
            None => return last,
        }
    }
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
    Ok(Some(ScanOutcome {
        header: header.clone(),
        data_end,
        state,
        torn_tail: None,
        dropped_intact: None,
        sealed: Some(trailer),
    }))
}
