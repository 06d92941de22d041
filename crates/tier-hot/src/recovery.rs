//! Opening a topic directory after a restart or a crash.
//!
//! The segment files are taken in offset order. Every file but the last must be a
//! sealed segment (header, trailer and index are checked; the data is checked as it is
//! read) — or one whose background seal a crash cut short (footer missing or torn, or,
//! under `never`/`interval`, pages before a written trailer unwritten), which is scanned
//! like the last file and sealed again, or removed when no batch of it reached the disk
//! (its size may reach the disk without its data: the header, then zeros). The last
//! file is scanned batch by batch with the segment module's recovery scan: a torn tail
//! is truncated or refused as [`RecoveryPolicy`] says, and the writer state (next
//! offset, sparse index) is rebuilt from the valid batches. Invalid bytes
//! followed by intact batches are a torn tail only when they read as unwritten (a zeroed
//! sector) where the fsync policy says no fsync covered them ([`unsynced`]), and a header
//! that reads as never written is a torn creation only where the segment was created
//! after the last durable point ([`creation_torn`]); both decisions are pure functions of
//! the evidence, described in `docs/hot.md` ("Torn tails, holes and torn creations"). A
//! last file that turns out to be sealed is kept as sealed and a new active segment is started after
//! it. Consecutive files must continue each other's offsets; a gap is corruption naming
//! both files — unless a gap marker (`<from>-<to>.gap`, written by
//! [`HotTier::skip_to`](crate::HotTier::skip_to)) records exactly that gap, which is then
//! kept as a recorded gap of the topic, or the gap follows a file whose seal a crash cut
//! short (a *torn point*, see `check_continues`), whose lost offsets recovery records
//! with a marker of its own under `truncate_torn_tail`. Markers that bridge no discontinuity (below the
//! first segment after retention, or left by a `skip_to` interrupted before its new
//! segment existed) are removed. The next offset is the active segment's end, so a restart never resets
//! offsets, even when retention deleted every sealed segment (the active segment, empty
//! or not, is never deleted and its name and header carry its base offset).

use std::{
    fs::OpenOptions,
    io::{Seek, SeekFrom, Write},
    path::{Path, PathBuf},
    sync::Arc,
};

use tier_core::{
    ErrorKind, Offset, OffsetRange, TierError, TopicName,
    batch::DecodeError,
    segment::{
        HEADER_FIXED_LEN, MAX_HEADER_LEN, ScanOutcome, SegmentHeader, TRAILER_MAGIC, Trailer, Unsynced,
        header_unwritten, hole_is_torn, scan_unsealed_with, unwritten_page,
    },
};
use tracing::warn;

use crate::config::{FsyncPolicy, HotConfig, RecoveryPolicy};
use crate::layout::{
    at, ctx, fsync_dir, io_err, parse_gap_file_name, parse_segment_file_name, write_gap_marker,
};
use crate::segment::{ActiveSegment, SealedFile};
use crate::topic::Gap;
use crate::writer::MAX_GROUP_BYTES;

/// A topic as found on disk.
#[derive(Debug, Default)]
pub(crate) struct Recovered {
    pub(crate) sealed: Vec<Arc<SealedFile>>,
    pub(crate) active: Option<ActiveSegment>,
    /// Recorded gaps between consecutive segments, in order.
    pub(crate) gaps: Vec<Gap>,
    /// Recovery cut offsets off the log: it truncated a torn tail of the last file or
    /// batches of a segment whose seal was cut short, recorded a torn point, or removed a
    /// first segment none of whose batches reached the disk. Re-sealing a segment whose
    /// batches are all there (only its footer was cut short, as a kill during the seal
    /// leaves it) cuts nothing.
    pub(crate) cut_back: bool,
}

/// The gap markers of a topic directory, and those found to bridge a discontinuity.
#[derive(Debug, Default)]
struct Markers {
    /// Each with its path and whether it records a torn point.
    unused: Vec<(OffsetRange, PathBuf, bool)>,
    used: Vec<Gap>,
}

impl Markers {
    /// True (and the marker becomes a recorded gap) when a marker records exactly
    /// `range`.
    fn bridge(&mut self, range: OffsetRange) -> bool {
        let Some(i) = self.unused.iter().position(|(r, _, _)| *r == range) else { return false };
        let (range, marker, torn) = self.unused.remove(i);
        self.used.push(Gap { range, marker, torn });
        true
    }

    /// Like [`bridge`](Self::bridge) for a chain of adjacent markers that together record
    /// exactly `range` (a `skip_to` on a log whose end was already a gap, e.g. a reservation
    /// skip after a lost WAL, then another after a crash): they are replaced by one marker
    /// for `range`, written durably before the others are removed; it records a torn point
    /// when any of them did. `Ok(false)` when no chain records `range`.
    fn bridge_chain(&mut self, topic: &TopicName, dir: &Path, range: OffsetRange) -> Result<bool, TierError> {
        let mut chain = Vec::new();
        let mut at = range.start;
        while at < range.end {
            let Some(i) = self.unused.iter().position(|(r, _, _)| r.start == at && r.end > at) else {
                return Ok(false);
            };
            at = self.unused[i].0.end;
            chain.push(i);
        }
        if at != range.end || chain.len() < 2 {
            return Ok(false);
        }
        let torn = chain.iter().any(|&i| self.unused[i].2);
        let marker = write_gap_marker(topic, dir, range, torn)?;
        chain.sort_unstable_by(|a, b| b.cmp(a));
        for i in chain {
            let (old, path, _) = self.unused.remove(i);
            warn!(topic = %topic, file = ?path, lost = %old, "merging adjacent gap markers into one");
            std::fs::remove_file(&path)
                .map_err(|e| io_err(topic, &path, "removing a merged gap marker", e))?;
        }
        fsync_dir(dir).map_err(|e| io_err(topic, dir, "fsyncing the topic directory", e))?;
        self.used.push(Gap { range, marker, torn });
        Ok(true)
    }

    /// Removes the markers that bridge nothing.
    fn remove_unused(&mut self, topic: &TopicName, dir: &Path) -> Result<(), TierError> {
        if self.unused.is_empty() {
            return Ok(());
        }
        for (range, path, _) in self.unused.drain(..) {
            warn!(topic = %topic, file = ?path, lost = %range, "removing a gap marker that bridges no segments");
            std::fs::remove_file(&path).map_err(|e| io_err(topic, &path, "removing a gap marker", e))?;
        }
        fsync_dir(dir).map_err(|e| io_err(topic, dir, "fsyncing the topic directory", e))
    }
}

/// The segment files of `dir` in offset order, and its gap markers.
fn list_files(topic: &TopicName, dir: &Path) -> Result<(Vec<(Offset, PathBuf)>, Markers), TierError> {
    let mut files = Vec::new();
    let mut markers = Markers::default();
    let entries = std::fs::read_dir(dir).map_err(|e| io_err(topic, dir, "listing the topic directory", e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io_err(topic, dir, "listing the topic directory", e))?;
        let name = entry.file_name();
        let name = name.to_str();
        if let Some(base) = name.and_then(parse_segment_file_name) {
            files.push((base, entry.path()));
        } else if let Some(range) = name.and_then(parse_gap_file_name) {
            let path = entry.path();
            let torn = crate::layout::gap_marker_is_torn(&path);
            markers.unused.push((range, path, torn));
        } else if name.is_some_and(crate::marker::is_marker) {
            // A marker the router's recovery reads (`rebuilt`, `unacked`), or a write of
            // one a crash cut short (a marker is renamed into place once whole).
        } else {
            warn!(topic = %topic, file = ?entry.path(), "ignoring a file that is not a segment");
        }
    }
    files.sort();
    Ok((files, markers))
}

/// Whether opening a topic cut its log back, kept durably: the `cut` marker
/// ([`crate::marker::CUT`]) is written before the first byte is dropped, and found by
/// later opens until the router records the cut ([`crate::HotTier::cut_recorded`]).
struct Cut<'a> {
    topic: &'a TopicName,
    dir: &'a Path,
    noted: bool,
}

impl<'a> Cut<'a> {
    /// The topic directory's cut, noted already when an earlier open left its marker.
    fn of(topic: &'a TopicName, dir: &'a Path) -> Self {
        let noted = dir.join(crate::marker::CUT.file).exists() && !reverted!(dir, ForgetCuts);
        Self { topic, dir, noted }
    }

    /// Records durably that the log is cut back, before the caller drops anything.
    fn note(&mut self) -> Result<(), TierError> {
        if !self.noted {
            let text = "the log was cut back at open; the router has not recorded the cut yet\n";
            crate::marker::CUT.write_in(self.dir, self.topic, text)?;
            self.noted = true;
        }
        Ok(())
    }
}

fn corrupt(topic: &TopicName, path: &Path, e: DecodeError) -> TierError {
    let pos = e.position();
    e.into_tier_error(ctx(topic).location(at(path, pos)))
}

/// True when `path` is an unsealed segment holding a valid header and no batch: the
/// leftover of a segment replaced when an empty topic took over a log at a larger
/// offset.
fn is_empty_leftover(path: &Path) -> bool {
    let small = std::fs::metadata(path).is_ok_and(|m| m.len() <= MAX_HEADER_LEN as u64);
    let Ok(bytes) = (if small { std::fs::read(path) } else { return false }) else { return false };
    SegmentHeader::decode(&bytes).is_ok_and(|(_, len)| len == bytes.len())
}

/// Opens the segments of `topic` in `dir`.
pub(crate) fn recover_topic(
    topic: &TopicName,
    dir: &Path,
    config: &HotConfig,
) -> Result<Recovered, TierError> {
    let (files, mut markers) = list_files(topic, dir)?;
    let Some(((last_base, last_path), older)) = files.split_last() else {
        markers.remove_unused(topic, dir)?;
        return Ok(Recovered::default());
    };
    let mut sealed: Vec<Arc<SealedFile>> = Vec::new();
    // The file since the last sealed segment whose seal a crash cut short, if any: what
    // follows it may start later (a torn point, see `check_continues`).
    let mut torn: Option<PathBuf> = None;
    let mut cut = Cut::of(topic, dir);
    let mut cut_back = false;
    let durable_seals = crate::marker::read_durable_seals(dir);
    for (i, (base, path)) in older.iter().enumerate() {
        let torn_header = config.recovery == RecoveryPolicy::TruncateTornTail && is_torn_header(path);
        if torn_header || is_empty_leftover(path) {
            // No batch of it reached the disk: a seal cut short before anything of it was
            // durable, or the leftover of a take-over. After a sealed segment, a torn
            // point. As the first file the topic starts at the next one; under
            // `never`/`interval` what it held — batches a power cut took, or nothing,
            // after a take-over — is the router's to judge: a cut (under `always` its
            // batches were fsynced by its seal: a take-over's leftover). After a sealed
            // segment, what it held is the gap to the next file: a cut when there is one
            // (`check_continues`).
            if sealed.is_empty() && config.fsync != FsyncPolicy::Always && !reverted!(dir, ForgetCuts) {
                cut.note()?;
                cut_back = true;
            }
            warn!(topic = %topic, file = ?path, "removing a segment that holds no batch");
            std::fs::remove_file(path).map_err(|e| io_err(topic, path, "removing an empty segment", e))?;
            fsync_dir(dir).map_err(|e| io_err(topic, dir, "fsyncing the topic directory", e))?;
            if !sealed.is_empty() {
                torn = Some(path.clone());
            }
            continue;
        }
        let place = if torn.is_some() { Place::AfterCutShortSeal } else { Place::Middle };
        // The seals of the last sealed segments may not have been durable (a rotation
        // fsyncs the sealed file in the background, at most `MAX_SEALS_IN_FLIGHT` at
        // once): under `never`/`interval` a footer may have reached the disk while a page
        // of the data before it did not, so their batches are checked — unless the
        // record a clean close wrote names the segment at its size (its seal finished).
        let in_flight = crate::writer::MAX_SEALS_IN_FLIGHT;
        let unproven = i + in_flight >= older.len()
            && config.fsync != FsyncPolicy::Always
            && !std::fs::metadata(path).is_ok_and(|m| durable_seals.contains(&(*base, m.len())));
        let (seg, resealed) = match open_or_reseal(topic, path, *base, config, place, unproven, &mut cut)? {
            Some(reopened) => reopened,
            None => {
                // None of its batches reached the disk (nor, maybe, its header): a seal
                // cut short (its own, and for a torn header the one before, which fsyncs
                // it). After a sealed segment, a torn point; as the first file, the topic
                // starts at the next one.
                cut.note()?;
                std::fs::remove_file(path)
                    .map_err(|e| io_err(topic, path, "removing a segment that holds no durable batch", e))?;
                fsync_dir(dir).map_err(|e| io_err(topic, dir, "fsyncing the topic directory", e))?;
                torn = Some(path.clone());
                cut_back = true;
                continue;
            }
        };
        check_name(topic, path, *base, seg.info.range.start)?;
        let prev = sealed.last().map(|s| (&s.info.path, s.info.range.end));
        let next = (path.as_path(), seg.info.range.start);
        check_continues(topic, dir, prev, next, torn.take().as_deref(), config, (&mut markers, &mut cut))?;
        sealed.push(Arc::new(seg));
        torn = resealed.then(|| path.clone());
    }
    let last_len = std::fs::metadata(last_path).map(|m| m.len()).ok();
    let active = recover_last(
        topic,
        dir,
        *last_base,
        last_path,
        config,
        (&mut sealed, &mut torn, &mut markers),
        &mut cut,
    )?;
    // The last file lost bytes (a torn tail), or went (a torn header); a torn point
    // before it notes the cut.
    let last_len_now = std::fs::metadata(last_path).map(|m| m.len()).ok();
    let prev = sealed.last().map(|s| (&s.info.path, s.info.range.end));
    let next = (active.path.as_path(), active.state.offset_range().start);
    check_continues(topic, dir, prev, next, torn.as_deref(), config, (&mut markers, &mut cut))?;
    cut_back |= last_len_now.is_none_or(|now| last_len.is_some_and(|before| now < before)) || cut.noted;
    markers.remove_unused(topic, dir)?;
    Ok(Recovered { sealed, active: Some(active), gaps: markers.used, cut_back })
}

/// True when `path` is too short to hold the segment header it starts (nothing, or a
/// part of it): a file created without an fsync whose first bytes never reached the
/// disk, or one torn while it was being created.
fn is_torn_header(path: &Path) -> bool {
    let small = std::fs::metadata(path).is_ok_and(|m| m.len() <= MAX_HEADER_LEN as u64);
    small && std::fs::read(path).is_ok_and(|bytes| header_torn(&bytes))
}

/// Opens a file that is not the last as a sealed segment. A rotation fsyncs the
/// sealed file in the background (`writer::seal`), so after a crash such a file may
/// lack its footer or hold a torn one: when it does not open as sealed, it is scanned
/// like an unsealed segment (a hole before intact batches is a torn tail where
/// [`unsynced`] allows it); when it does not end with the trailer magic, or what follows
/// its data is a cut-short footer ([`footer_cut_short`]), or a hole before a written
/// trailer ([`hole_before_trailer`]: under `never`/`interval`, pages of the data or the
/// footer that never reached the disk while the trailer's page did), it is truncated
/// there (or refused, as [`RecoveryPolicy`] says) and sealed again (footer written and
/// fsynced). A complete footer that fails its checks stays `Corruption`. `None` (to be
/// removed as holding no durable batch) when the seal was cut short that way before any
/// batch of it reached the disk — under `never`/`interval` only (the size may persist
/// without the data: the header, then zeros), under `always` its batches were fsynced —
/// or when its header never reached the disk and [`creation_torn`] calls that a torn
/// creation at `place` (`Corruption` otherwise). Returns the segment and whether it was
/// sealed again; records lost from the end of such a file make a torn point (see
/// [`check_continues`]).
fn open_or_reseal(
    topic: &TopicName,
    path: &Path,
    base: Offset,
    config: &HotConfig,
    place: Place,
    unproven: bool,
    cut: &mut Cut<'_>,
) -> Result<Option<(SealedFile, bool)>, TierError> {
    let io = |what| move |e| io_err(topic, path, what, e);
    let not_sealed = match SealedFile::open(topic, path, None) {
        Ok(seg) if !unproven || config.recovery != RecoveryPolicy::TruncateTornTail => {
            return Ok(Some((seg, false)));
        }
        Ok(seg) => {
            drop(seg);
            crate::page_cache::read_from_disk_next(topic, path)?;
            let bytes = std::fs::read(path).map_err(io("reading a segment"))?;
            let Some(outcome) = hole_under_a_written_footer(&bytes, config) else {
                return SealedFile::open(topic, path, None).map(|seg| Some((seg, false)));
            };
            // Its footer is whole and a page of its data reads as never written: a seal
            // cut short, whose footer's pages reached the disk before its data's.
            if outcome.state.batch_count() == 0 {
                warn_torn_tail(topic, path, &outcome);
                return Ok(None);
            }
            return reseal(topic, path, &outcome, true, cut, config.clock.now()).map(Some);
        }
        Err(e) if e.kind() == ErrorKind::Corruption => e,
        Err(e) => return Err(e),
    };
    // Not known durable (its seal was cut short): scan what the disk holds.
    crate::page_cache::read_from_disk_next(topic, path)?;
    let bytes = std::fs::read(path).map_err(io("reading a segment"))?;
    let unsynced = unsynced(config, false);
    let outcome = match scan_unsealed_with(&bytes, config.recovery.into(), unsynced) {
        Ok(outcome) if outcome.sealed.is_none() => outcome,
        // Sealed after all: not a seal cut short; report why it failed to open.
        Ok(_) => return Err(not_sealed),
        Err(_) if never_written(topic, &bytes, base, config, place) => {
            warn!(
                topic = %topic, file = ?path, bytes = bytes.len(),
                "removing a segment whose header never reached the disk; dropping its bytes"
            );
            return Ok(None);
        }
        Err(e) => return Err(corrupt(topic, path, e)),
    };
    let footer = outcome.state.footer_bytes();
    // No trailer magic at the end: the footer's write never completed (the data may be
    // torn too). With it: only zeroed or missing pages of the footer, or unwritten pages
    // before a written trailer where no fsync covered them, are a cut-short seal; any
    // other difference is damage to a complete footer.
    let cut_short = !bytes.ends_with(&TRAILER_MAGIC)
        || footer_cut_short(&bytes, outcome.data_end, &footer)
        || hole_before_trailer(&bytes, outcome.data_end, footer.len(), unsynced);
    if outcome.header.topic != *topic || !cut_short {
        return Err(not_sealed);
    }
    if outcome.state.batch_count() == 0 {
        // A header, then no valid batch. Under `always` the seal found its batches
        // fsynced (and a header alone is removed before this): damage.
        if unsynced != Unsynced::Anything {
            return Err(not_sealed);
        }
        warn_torn_tail(topic, path, &outcome);
        warn!(
            topic = %topic, file = ?path, bytes = bytes.len(),
            "removing a segment whose seal was cut short before any of its batches reached the disk"
        );
        return Ok(None);
    }
    // Batch bytes dropped with the footer (a torn batch, a hole): offsets cut off.
    // Nothing but a cut-short footer after the data: every batch is there.
    let dropped = !footer_cut_short(&bytes, outcome.data_end, &footer);
    reseal(topic, path, &outcome, dropped, cut, config.clock.now()).map(Some)
}

/// Seals again, at the end of its last valid batch, a segment whose seal was cut short
/// (`outcome` is its scan): truncated there, the footer written and fsynced. `dropped`:
/// the truncation drops bytes of batches (the cut is noted first), not only a footer cut
/// short. Returns the segment, and `true` (it was sealed again), sealed at `now` (the
/// tier's clock, also recorded as the file's modification time, see [`stamp_seal`]).
fn reseal(
    topic: &TopicName,
    path: &Path,
    outcome: &ScanOutcome,
    dropped: bool,
    cut: &mut Cut<'_>,
    now: std::time::SystemTime,
) -> Result<(SealedFile, bool), TierError> {
    let io = |what| move |e| io_err(topic, path, what, e);
    let footer = outcome.state.footer_bytes();
    warn!(topic = %topic, file = ?path, range = %outcome.state.offset_range(), "sealing a segment whose seal was cut short");
    if dropped {
        cut.note()?;
    }
    let mut file = OpenOptions::new().write(true).open(path).map_err(io("opening a segment to seal it"))?;
    warn_torn_tail(topic, path, outcome);
    file.set_len(outcome.data_end).map_err(io("truncating a torn footer"))?;
    file.seek(SeekFrom::Start(outcome.data_end)).map_err(io("positioning in a segment"))?;
    file.write_all(&footer).map_err(io("writing a segment footer"))?;
    crate::segment::stamp_seal(&file, now);
    file.sync_all().map_err(io("fsyncing a sealed segment"))?;
    synced!(path, &file);
    drop(file);
    SealedFile::open(topic, path, Some(now)).map(|seg| (seg, true))
}

/// Reports the torn tail `outcome` cuts off, if any: its position and cause, and the
/// intact batches dropped with it (a hole before written pages).
fn warn_torn_tail(topic: &TopicName, path: &Path, outcome: &ScanOutcome) {
    let Some((position, why)) = &outcome.torn_tail else { return };
    match &outcome.dropped_intact {
        Some(dropped) => warn!(
            topic = %topic, file = ?path, position, error = %why, intact_at = dropped.position,
            dropped = %dropped.offsets,
            "truncating a torn tail: invalid bytes (pages no fsync covered that never reached the disk) \
             before intact batches; dropping the records from the first invalid batch on"
        ),
        None => warn!(topic = %topic, file = ?path, position, error = %why, "truncating a torn tail"),
    }
}

/// Where a crash may have left holes in a file's data, from the fsync policy and
/// whether the file is the last one (see `docs/hot.md`, "Recovery"):
///
/// - `always`, the last file: every write was fsynced before the next began, so only
///   the last write can be missing, and a write of more than one batch is at most
///   [`MAX_GROUP_BYTES`] long.
/// - `always`, an earlier file: every batch was fsynced before the segment was sealed
///   (only its footer's fsync runs in the background).
/// - `never`/`interval`: no fsync position is recorded (the timer's, a clean close's), so
///   no byte of the data is known to be durable.
fn unsynced(config: &HotConfig, last: bool) -> Unsynced {
    if reverted!(&config.data_dir, HolesAreDamage) {
        return Unsynced::Nothing;
    }
    match (config.fsync, last) {
        (FsyncPolicy::Always, true) => Unsynced::LastWrite(MAX_GROUP_BYTES),
        (FsyncPolicy::Always, false) => Unsynced::Nothing,
        _ => Unsynced::Anything,
    }
}

/// Where a file lies in its topic, for [`creation_torn`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// The last file.
    Last,
    /// A file right after one whose seal a crash cut short (re-sealed, or removed for
    /// holding no batch): the seal that would have fsynced its header did not complete.
    AfterCutShortSeal,
    /// Any other file: the seal before it completed, and fsynced its header.
    Middle,
}

/// Whether a segment whose header reads as never written ([`header_unwritten`]: zeros
/// where its bytes should be) is a *torn creation* — created after the last durable point,
/// so that none of its header (and no fsync of it) reached the disk: removed, or
/// recreated as the last file — or damage. `holds_more`: the file is longer than its
/// header.
///
/// - `recovery = "refuse"`: damage, as every torn tail.
/// - A file after a seal that completed ([`Place::Middle`]): damage, its header was fsynced.
/// - `always`: a segment's creation fsyncs its header before anything is appended to it,
///   so only the last file, holding nothing past its header (a crash between the
///   creation's write and its fsync), is a torn creation.
/// - `never`/`interval`: rotation creates the next segment without an fsync; the last
///   file, or one after a seal cut short, is a torn creation, whatever follows the
///   header (none of it was fsynced: an fsync of the file would have written the header).
fn creation_torn(fsync: FsyncPolicy, recovery: RecoveryPolicy, place: Place, holds_more: bool) -> bool {
    if recovery == RecoveryPolicy::Refuse {
        return false;
    }
    match (fsync, place) {
        (_, Place::Middle) | (FsyncPolicy::Always, Place::AfterCutShortSeal) => false,
        (FsyncPolicy::Always, Place::Last) => !holds_more,
        (_, Place::Last | Place::AfterCutShortSeal) => true,
    }
}

/// True when `bytes`, the file of a segment of `topic` named `base`, starts with a header
/// that never reached the disk and [`creation_torn`] calls that a torn creation at `place`.
fn never_written(topic: &TopicName, bytes: &[u8], base: Offset, config: &HotConfig, place: Place) -> bool {
    let holds_more = bytes.len() > HEADER_FIXED_LEN + topic.as_str().len();
    header_unwritten(bytes, topic, base)
        && creation_torn(config.fsync, config.recovery, place, holds_more)
        && !reverted!(&config.data_dir, HolesAreDamage)
}

/// True when the bytes after the data (`data_end..`, the last valid batch's end) of a
/// file that ends with the trailer magic are more than a footer of `footer_len` bytes and
/// what precedes the footer's place reads as pages that never reached the disk
/// ([`unwritten_page`]) where [`hole_is_torn`] lets a hole lie past the durable point:
/// writeback persisted the trailer's page and not the pages before it (lost batches, the
/// footer's first part). The same evidence a hole before intact batches needs, the
/// trailer standing for the intact bytes after the hole. Under `always` (`Unsynced::Nothing`)
/// the batches were fsynced before the seal: never.
fn hole_before_trailer(file: &[u8], data_end: u64, footer_len: usize, unsynced: Unsynced) -> bool {
    let len = file.len() as u64;
    let Some(hole_end) = len.checked_sub(footer_len as u64).filter(|&end| end > data_end) else {
        return false;
    };
    hole_is_torn(data_end, len, unwritten_page(file, data_end, hole_end), unsynced)
}

/// Page size assumed for torn writes: writeback writes whole pages, so a footer whose
/// write a crash cut short is the expected footer with pages missing from its end or
/// left as zeros.
const PAGE: u64 = 4096;

/// True when the bytes of `file` after the data (`data_end..`) are what a seal cut
/// short leaves of `footer`: nothing, a prefix of it, or it with whole pages (by file
/// position) zeroed. A byte that differs from the footer the data implies in any other
/// way is damage to a complete seal.
fn footer_cut_short(file: &[u8], data_end: u64, footer: &[u8]) -> bool {
    let Some(found) = usize::try_from(data_end).ok().and_then(|start| file.get(start..)) else {
        return false;
    };
    if found.len() > footer.len() {
        return false;
    }
    let mut at = 0usize;
    while at < found.len() {
        let position = data_end + at as u64;
        let page_left = usize::try_from(PAGE - position % PAGE).unwrap_or(usize::MAX);
        let end = found.len().min(at.saturating_add(page_left));
        let (got, want) = (&found[at..end], &footer[at..end]);
        if got != want && got.iter().any(|&b| b != 0) {
            return false;
        }
        at = end;
    }
    true
}

/// Recovers the last file: the active segment, or a sealed one followed by a new
/// active segment (then `torn` is cleared: the new segment starts at its end).
fn recover_last(
    topic: &TopicName,
    dir: &Path,
    base: Offset,
    path: &Path,
    config: &HotConfig,
    (sealed, torn, markers): (&mut Vec<Arc<SealedFile>>, &mut Option<PathBuf>, &mut Markers),
    cut: &mut Cut<'_>,
) -> Result<ActiveSegment, TierError> {
    let io = |what| move |e| io_err(topic, path, what, e);
    // Not known durable (the last file): scan what the disk holds, not what the page cache
    // shows, so that nothing a failed fsync left in the cache only is served.
    crate::page_cache::read_from_disk_next(topic, path)?;
    let bytes = std::fs::read(path).map_err(io("reading the active segment"))?;
    let outcome = match scan_unsealed_with(&bytes, config.recovery.into(), unsynced(config, true)) {
        Ok(outcome) => outcome,
        Err(DecodeError::Truncated { .. })
            if config.recovery == RecoveryPolicy::TruncateTornTail && header_torn(&bytes) =>
        {
            // A crash while creating the segment: no batch was ever written to it.
            warn!(topic = %topic, file = ?path, "recreating a segment whose header was torn");
            std::fs::remove_file(path).map_err(io("removing a torn segment"))?;
            return ActiveSegment::create(topic, dir, base, config.index_interval_bytes, config.clock.now());
        }
        Err(_) if never_written(topic, &bytes, base, config, Place::Last) => {
            // Created after the last durable point, its header (and whatever followed it)
            // never reached the disk: nothing of it was durable. Bytes past the header
            // may have held batches: a cut.
            if bytes.len() > HEADER_FIXED_LEN + topic.as_str().len() {
                cut.note()?;
            }
            warn!(
                topic = %topic, file = ?path, bytes = bytes.len(),
                "recreating a segment whose header never reached the disk; dropping its bytes"
            );
            std::fs::remove_file(path).map_err(io("removing a segment that was never written"))?;
            return ActiveSegment::create(topic, dir, base, config.index_interval_bytes, config.clock.now());
        }
        Err(_) if let Some(outcome) = hole_under_a_written_footer(&bytes, config) => {
            // A seal cut short whose footer reached the disk and some of its data did
            // not: an unsealed segment with a torn tail, truncated below.
            outcome
        }
        Err(e) => return Err(corrupt(topic, path, e)),
    };
    check_name(topic, path, base, outcome.header.base_offset)?;
    if outcome.header.topic != *topic {
        return Err(TierError::corruption(
            ctx(topic).location(at(path, 0)),
            format!("segment belongs to topic '{}'", outcome.header.topic),
        ));
    }
    if outcome.sealed.is_some() {
        let seg = SealedFile::open(topic, path, None)?;
        let prev = sealed.last().map(|s| (&s.info.path, s.info.range.end));
        check_continues(
            topic,
            dir,
            prev,
            (path, seg.info.range.start),
            torn.take().as_deref(),
            config,
            (markers, cut),
        )?;
        let end = seg.info.range.end;
        sealed.push(Arc::new(seg));
        return ActiveSegment::create(topic, dir, end, config.index_interval_bytes, config.clock.now());
    }
    let file =
        OpenOptions::new().read(true).write(true).open(path).map_err(io("opening the active segment"))?;
    warn_torn_tail(topic, path, &outcome);
    if outcome.torn_tail.is_some() {
        cut.note()?;
        file.set_len(outcome.data_end).map_err(io("truncating a torn tail"))?;
        file.sync_all().map_err(io("fsyncing a truncated segment"))?;
        synced!(path, &file);
    }
    ActiveSegment::from_parts(topic, path.to_owned(), file, outcome.state)
}

/// The last file, under `never`/`interval` and `truncate_torn_tail`, when it ends with a
/// valid trailer but its data does not match it because pages of the data read as never
/// written ([`unwritten_page`] from the first invalid batch up to the index): a rotation
/// wrote the footer and a power cut came before its seal's fsync, writeback having
/// persisted the footer's pages and not all of the data's (and the next segment never
/// reached the disk). Scanned as an unsealed segment up to the index: the outcome has a
/// torn tail at the first invalid batch, to be truncated there (the footer with it) and
/// appended after. `None` under `always` (the seal found every batch fsynced) or
/// `refuse`, or when the invalid bytes show no unwritten page: damage.
fn hole_under_a_written_footer(bytes: &[u8], config: &HotConfig) -> Option<ScanOutcome> {
    let unsynced = unsynced(config, true);
    if unsynced != Unsynced::Anything || config.recovery != RecoveryPolicy::TruncateTornTail {
        return None;
    }
    let trailer = Trailer::decode(bytes).ok().filter(|t| t.segment_len() == bytes.len() as u64)?;
    let index_at = usize::try_from(trailer.index_position).ok().filter(|&at| at < bytes.len())?;
    let outcome = scan_unsealed_with(&bytes[..index_at], config.recovery.into(), unsynced).ok()?;
    let torn = outcome.torn_tail.is_some() && unwritten_page(bytes, outcome.data_end, index_at as u64);
    torn.then_some(outcome)
}

/// True when `bytes` is too short to hold the header it starts (the magic, if present,
/// is right): a segment torn while it was being created.
fn header_torn(bytes: &[u8]) -> bool {
    matches!(SegmentHeader::decode(bytes), Err(DecodeError::Truncated { .. }))
}

fn check_name(topic: &TopicName, path: &Path, named: Offset, header: Offset) -> Result<(), TierError> {
    if named == header {
        return Ok(());
    }
    Err(TierError::corruption(
        ctx(topic).location(at(path, 0)),
        format!("file name says base offset {named} but the segment starts at {header}"),
    ))
}

/// Checks that the segment `next` (its path and first offset) continues `prev` (the
/// previous segment's path and end). A gap is accepted when a marker records exactly
/// it; or, under [`RecoveryPolicy::TruncateTornTail`], when it follows `torn` — a file
/// whose seal a crash cut short (re-sealed shorter, or removed for holding no batch):
/// its lost records and those of any segment between are a *torn point*, which is
/// recorded as lost with a new durable gap marker (reported in a warning, kept as a
/// recorded gap) so that the durable segments after it stay and no offset is reused.
/// Any other gap, or an overlap, is `Corruption` naming both files.
fn check_continues(
    topic: &TopicName,
    dir: &Path,
    prev: Option<(&PathBuf, Offset)>,
    (path, start): (&Path, Offset),
    torn: Option<&Path>,
    config: &HotConfig,
    (markers, cut): (&mut Markers, &mut Cut<'_>),
) -> Result<(), TierError> {
    let bridged = match prev {
        Some((_, end)) if end < start => {
            let gap = OffsetRange::new(end, start);
            markers.bridge(gap) || markers.bridge_chain(topic, dir, gap)?
        }
        _ => false,
    };
    if bridged {
        return Ok(());
    }
    match prev {
        Some((prev_path, end))
            if end < start && torn.is_some() && config.recovery == RecoveryPolicy::TruncateTornTail =>
        {
            let lost = OffsetRange::new(end, start);
            cut.note()?;
            let marker = write_gap_marker(topic, dir, lost, true)?;
            warn!(
                topic = %topic, lost = %lost, cut_short = ?torn, after = ?prev_path, next = ?path, marker = ?marker,
                "a seal cut short by a crash lost records between segments; recorded them as lost"
            );
            markers.used.push(Gap { range: lost, marker, torn: true });
            Ok(())
        }
        Some((prev_path, end)) if end != start => Err(TierError::corruption(
            ctx(topic).offset(end).location(at(path, 0)),
            format!(
                "segments are not contiguous: {} ends at offset {end} but {} starts at {start} (and no gap \
                 marker records those offsets as lost)",
                prev_path.display(),
                path.display()
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tier_core::segment::Unsynced;

    use super::{
        MAX_GROUP_BYTES, PAGE, Place, creation_torn, footer_cut_short, hole_before_trailer, unsynced,
    };
    use crate::config::{FsyncPolicy, RecoveryPolicy};

    const POLICIES: [FsyncPolicy; 3] =
        [FsyncPolicy::Always, FsyncPolicy::Interval(Duration::from_millis(100)), FsyncPolicy::Never];

    #[test]
    fn holes_may_be_torn_only_in_bytes_no_fsync_covered() {
        // (policy, the last file) -> what may be unsynced.
        let cases = [
            (POLICIES[0], true, Unsynced::LastWrite(MAX_GROUP_BYTES)),
            (POLICIES[0], false, Unsynced::Nothing),
            (POLICIES[1], true, Unsynced::Anything),
            (POLICIES[1], false, Unsynced::Anything),
            (POLICIES[2], true, Unsynced::Anything),
            (POLICIES[2], false, Unsynced::Anything),
        ];
        for (fsync, last, expected) in cases {
            let config = crate::HotConfig::new("/nonexistent").with_fsync(fsync);
            assert_eq!(unsynced(&config, last), expected, "{fsync:?}, last file: {last}");
        }
    }

    #[test]
    fn every_case_of_a_header_that_never_reached_the_disk() {
        use Place::{AfterCutShortSeal, Last, Middle};
        // (fsync is `always`, place, the file holds more than a header) -> torn creation.
        let cases = [
            (true, Last, false, true), // a crash between the creation's write and its fsync
            (true, Last, true, false), // the header was fsynced before any append
            (true, AfterCutShortSeal, false, false),
            (true, AfterCutShortSeal, true, false),
            (true, Middle, false, false),
            (true, Middle, true, false),
            (false, Last, false, true), // rotation created it without an fsync
            (false, Last, true, true),
            (false, AfterCutShortSeal, false, true), // the seal that fsyncs its header did not complete
            (false, AfterCutShortSeal, true, true),
            (false, Middle, false, false), // the seal before it fsynced its header
            (false, Middle, true, false),
        ];
        for (always, place, holds_more, torn) in cases {
            let policies: &[FsyncPolicy] = if always { &POLICIES[..1] } else { &POLICIES[1..] };
            for &fsync in policies {
                let case = format!("{fsync:?} {place:?}, holds more than a header: {holds_more}");
                assert_eq!(
                    creation_torn(fsync, RecoveryPolicy::TruncateTornTail, place, holds_more),
                    torn,
                    "{case}"
                );
                assert!(!creation_torn(fsync, RecoveryPolicy::Refuse, place, holds_more), "refused: {case}");
            }
        }
    }

    #[test]
    fn only_missing_or_zeroed_pages_make_a_footer_cut_short() {
        // Data ends 100 bytes before a page boundary; the footer is 300 bytes.
        let data_end = PAGE - 100;
        let footer: Vec<u8> = (0..300u32).map(|i| (i % 251 + 1) as u8).collect();
        let file = |tail: &[u8]| [vec![7u8; data_end as usize], tail.to_vec()].concat();
        assert!(footer_cut_short(&file(&[]), data_end, &footer), "no footer at all");
        assert!(footer_cut_short(&file(&footer[..150]), data_end, &footer), "a prefix");
        assert!(footer_cut_short(&file(&footer), data_end, &footer), "complete and equal");
        let mut zeroed = footer.clone();
        zeroed[..100].fill(0); // the page before the boundary never reached the disk
        assert!(footer_cut_short(&file(&zeroed), data_end, &footer));
        let mut half = footer.clone();
        half[..50].fill(0); // zeros inside a page that holds footer bytes too
        assert!(!footer_cut_short(&file(&half), data_end, &footer));
        let mut flipped = footer.clone();
        flipped[250] ^= 0x01;
        assert!(!footer_cut_short(&file(&flipped), data_end, &footer), "a flipped bit");
        let longer = [footer.clone(), vec![1]].concat();
        assert!(!footer_cut_short(&file(&longer), data_end, &footer), "more than a footer");
    }

    #[test]
    fn a_hole_before_a_written_trailer_is_a_seal_cut_short_only_where_no_fsync_covered_it() {
        // Data ends at 1000; batches lost from there to 9000 (a page of them unwritten),
        // then a footer of 300 bytes whose trailer page was written.
        let data_end = 1000u64;
        let footer = 300usize;
        let mut file = vec![7u8; 9000 + footer];
        file[PAGE as usize..2 * PAGE as usize].fill(0);
        for fsync in POLICIES {
            let config = crate::HotConfig::new("/nonexistent").with_fsync(fsync);
            let torn = hole_before_trailer(&file, data_end, footer, unsynced(&config, false));
            assert_eq!(torn, fsync != POLICIES[0], "{fsync:?}");
        }
        let never = unsynced(&crate::HotConfig::new("/nonexistent").with_fsync(POLICIES[2]), false);
        let garbage = vec![7u8; 9000 + footer];
        assert!(!hole_before_trailer(&garbage, data_end, footer, never), "no page reads as unwritten");
        let complete = vec![7u8; data_end as usize + footer];
        assert!(!hole_before_trailer(&complete, data_end, footer, never), "a footer's length after the data");
        let shorter = vec![0u8; data_end as usize + footer - 1];
        assert!(!hole_before_trailer(&shorter, data_end, footer, never), "less than a footer");
    }
}
