//! Opening a topic directory after a restart or a crash.
//!
//! The segment files are taken in offset order. Every file but the last must be a
//! sealed segment (header, trailer and index are checked; the data is checked as it is
//! read). The last file is scanned batch by batch with the segment module's recovery
//! scan: a torn tail is truncated or refused as [`RecoveryPolicy`] says, and the writer
//! state (next offset, sparse index) is rebuilt from the valid batches. A last file that
//! turns out to be sealed is kept as sealed and a new active segment is started after
//! it. Consecutive files must continue each other's offsets; a gap is corruption naming
//! both files — unless a gap marker (`<from>-<to>.gap`, written by
//! [`HotTier::skip_to`](crate::HotTier::skip_to)) records exactly that gap, which is then
//! kept as a recorded gap of the topic. Markers that bridge no discontinuity (below the
//! first segment after retention, or left by a `skip_to` interrupted before its new
//! segment existed) are removed. The next offset is the active segment's end, so a restart never resets
//! offsets, even when retention deleted every sealed segment (the active segment, empty
//! or not, is never deleted and its name and header carry its base offset).

use std::{
    fs::OpenOptions,
    path::{Path, PathBuf},
    sync::Arc,
};

use tier_core::{
    Offset, OffsetRange, TierError, TopicName,
    batch::DecodeError,
    segment::{MAX_HEADER_LEN, SegmentHeader, scan_unsealed},
};
use tracing::warn;

use crate::config::{HotConfig, RecoveryPolicy};
use crate::layout::{at, ctx, fsync_dir, io_err, parse_gap_file_name, parse_segment_file_name};
use crate::segment::{ActiveSegment, SealedFile};
use crate::topic::Gap;

/// A topic as found on disk.
#[derive(Debug, Default)]
pub(crate) struct Recovered {
    pub(crate) sealed: Vec<Arc<SealedFile>>,
    pub(crate) active: Option<ActiveSegment>,
    /// Recorded gaps between consecutive segments, in order.
    pub(crate) gaps: Vec<Gap>,
}

/// The gap markers of a topic directory, and those found to bridge a discontinuity.
#[derive(Debug, Default)]
struct Markers {
    unused: Vec<(OffsetRange, PathBuf)>,
    used: Vec<Gap>,
}

impl Markers {
    /// True (and the marker becomes a recorded gap) when a marker records exactly
    /// `range`.
    fn bridge(&mut self, range: OffsetRange) -> bool {
        let Some(i) = self.unused.iter().position(|(r, _)| *r == range) else { return false };
        let (range, marker) = self.unused.remove(i);
        self.used.push(Gap { range, marker });
        true
    }

    /// Removes the markers that bridge nothing.
    fn remove_unused(&mut self, topic: &TopicName, dir: &Path) -> Result<(), TierError> {
        if self.unused.is_empty() {
            return Ok(());
        }
        for (range, path) in self.unused.drain(..) {
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
            markers.unused.push((range, entry.path()));
        } else {
            warn!(topic = %topic, file = ?entry.path(), "ignoring a file that is not a segment");
        }
    }
    files.sort();
    Ok((files, markers))
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
    for (base, path) in older {
        if is_empty_leftover(path) {
            warn!(topic = %topic, file = ?path, "removing an empty leftover segment");
            std::fs::remove_file(path).map_err(|e| io_err(topic, path, "removing an empty segment", e))?;
            fsync_dir(dir).map_err(|e| io_err(topic, dir, "fsyncing the topic directory", e))?;
            continue;
        }
        let seg = SealedFile::open(topic, path, None)?;
        check_name(topic, path, *base, seg.info.range.start)?;
        check_continues(
            topic,
            sealed.last().map(|s| (&s.info.path, s.info.range.end)),
            path,
            seg.info.range.start,
            &mut markers,
        )?;
        sealed.push(Arc::new(seg));
    }
    let active = recover_last(topic, dir, *last_base, last_path, config, &mut sealed, &mut markers)?;
    let prev = sealed.last().map(|s| (&s.info.path, s.info.range.end));
    check_continues(topic, prev, &active.path, active.state.offset_range().start, &mut markers)?;
    markers.remove_unused(topic, dir)?;
    Ok(Recovered { sealed, active: Some(active), gaps: markers.used })
}

/// Recovers the last file: the active segment, or a sealed one followed by a new
/// active segment.
fn recover_last(
    topic: &TopicName,
    dir: &Path,
    base: Offset,
    path: &Path,
    config: &HotConfig,
    sealed: &mut Vec<Arc<SealedFile>>,
    markers: &mut Markers,
) -> Result<ActiveSegment, TierError> {
    let io = |what| move |e| io_err(topic, path, what, e);
    let bytes = std::fs::read(path).map_err(io("reading the active segment"))?;
    let outcome = match scan_unsealed(&bytes, config.recovery.into()) {
        Ok(outcome) => outcome,
        Err(DecodeError::Truncated { .. })
            if config.recovery == RecoveryPolicy::TruncateTornTail && header_torn(&bytes) =>
        {
            // A crash while creating the segment: no batch was ever written to it.
            warn!(topic = %topic, file = ?path, "recreating a segment whose header was torn");
            std::fs::remove_file(path).map_err(io("removing a torn segment"))?;
            return ActiveSegment::create(topic, dir, base, config.index_interval_bytes);
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
        check_continues(
            topic,
            sealed.last().map(|s| (&s.info.path, s.info.range.end)),
            path,
            seg.info.range.start,
            markers,
        )?;
        let end = seg.info.range.end;
        sealed.push(Arc::new(seg));
        return ActiveSegment::create(topic, dir, end, config.index_interval_bytes);
    }
    let file =
        OpenOptions::new().read(true).write(true).open(path).map_err(io("opening the active segment"))?;
    if let Some((position, why)) = &outcome.torn_tail {
        warn!(topic = %topic, file = ?path, position, error = %why, "truncating a torn tail");
        file.set_len(outcome.data_end).map_err(io("truncating a torn tail"))?;
        file.sync_all().map_err(io("fsyncing a truncated segment"))?;
    }
    ActiveSegment::from_parts(topic, path.to_owned(), file, outcome.state)
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

fn check_continues(
    topic: &TopicName,
    prev: Option<(&PathBuf, Offset)>,
    path: &Path,
    start: Offset,
    markers: &mut Markers,
) -> Result<(), TierError> {
    match prev {
        Some((_, end)) if end < start && markers.bridge(OffsetRange::new(end, start)) => Ok(()),
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
