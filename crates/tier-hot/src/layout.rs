//! Where the WAL lives on disk, and the small filesystem helpers every part uses.
//!
//! ```text
//! <data_dir>/<topic>/<base_offset:020>.seg
//! <data_dir>/<topic>/<from:020>-<to:020>.gap
//! ```
//!
//! One directory per topic (topic names are validated to be safe directory names); in
//! it, one file per segment named by the offset of its first record, zero-padded to 20
//! digits so that name order is offset order. The last file is the active segment
//! (unsealed, appended to); every other one is sealed (footer written, immutable).
//!
//! A `.gap` file is an empty *gap marker*: it records that offsets `from..to` were
//! declared lost — by [`HotTier::skip_to`](crate::HotTier::skip_to), or by recovery at a
//! torn point between segments (a seal a crash cut short) — so the segment ending at
//! `from` and the one starting at `to` may follow each other. A marker recovery writes at
//! a torn point holds one line of text saying so; a marker `skip_to` writes is empty. The
//! difference matters after the open that wrote it: a torn point lost records that were
//! acknowledged and that another tier (warm) may still hold, while skipped offsets were
//! never handed out ([`HotTier::torn_points`](crate::HotTier::torn_points)).

use std::{
    fs::{self, File},
    io,
    path::{Path, PathBuf},
};

use tier_core::{ErrorContext, Offset, OffsetRange, TierError, TierKind, TopicName};

/// Extension of segment files.
pub const SEGMENT_EXTENSION: &str = "seg";

/// The file name of the segment starting at `base_offset`.
pub fn segment_file_name(base_offset: Offset) -> String {
    format!("{base_offset:020}.{SEGMENT_EXTENSION}")
}

/// The base offset encoded in a segment file name, or `None` for any other file.
pub fn parse_segment_file_name(name: &str) -> Option<Offset> {
    let digits = name.strip_suffix(".seg")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The file in a topic directory recording which sealed segments' seals are durable
/// (written at a clean close; see `docs/hot.md`, "Layout and file naming").
pub const DURABLE_SEALS_FILE: &str = "sealed";

/// Extension of gap marker files.
pub const GAP_EXTENSION: &str = "gap";

/// The file name of the marker recording offsets `range` as lost.
pub fn gap_file_name(range: OffsetRange) -> String {
    tier_core::segment::gap_marker_name(range)
}

/// The lost range encoded in a gap marker's file name, or `None` for any other file
/// (including a marker naming an empty or reversed range).
pub fn parse_gap_file_name(name: &str) -> Option<OffsetRange> {
    tier_core::segment::parse_gap_marker_name(name)
}

/// The text of a gap marker recorded at a torn point (any non-empty marker is one).
const TORN_POINT_TEXT: &[u8] =
    b"a torn point: a seal a crash cut short lost these offsets; warm may hold them\n";

/// Writes the durable marker recording `range` of `topic` as lost in the topic
/// directory `dir` (file, then directory fsynced); returns its path. Used by
/// [`HotTier::skip_to`](crate::HotTier::skip_to) (`torn` false) and by recovery at a torn
/// point (`torn` true: the marker holds a line saying so, written and fsynced before the
/// directory is).
pub(crate) fn write_gap_marker(
    topic: &TopicName,
    dir: &Path,
    range: OffsetRange,
    torn: bool,
) -> Result<PathBuf, TierError> {
    let marker = dir.join(gap_file_name(range));
    let mut file = File::create(&marker).map_err(|e| io_err(topic, &marker, "creating a gap marker", e))?;
    if torn {
        io::Write::write_all(&mut file, TORN_POINT_TEXT)
            .map_err(|e| io_err(topic, &marker, "writing a gap marker", e))?;
    }
    file.sync_all().map_err(|e| io_err(topic, &marker, "fsyncing a gap marker", e))?;
    fsync_dir(dir).map_err(|e| io_err(topic, dir, "fsyncing the topic directory", e))?;
    Ok(marker)
}

/// Whether the gap marker at `path` records a torn point: it holds anything at all. A
/// marker whose text a power cut left as zeros still does (its size reached the disk
/// with it); one that reads as empty records skipped offsets.
pub(crate) fn gap_marker_is_torn(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
}

/// The directory of `topic` under `data_dir`.
pub(crate) fn topic_dir(data_dir: &Path, topic: &TopicName) -> PathBuf {
    data_dir.join(topic.as_str())
}

/// The name a discarded topic directory is renamed to before it is removed: not a topic
/// name (a topic name takes no leading dot), so an open that finds one a crash left
/// ignores it.
fn discarded_dir(data_dir: &Path, topic: &TopicName) -> PathBuf {
    data_dir.join(format!(".discarded-{}", topic.as_str()))
}

/// Removes `topic`'s directory under `data_dir`: renamed aside and the rename made
/// durable first, so a crash leaves the whole directory or none of it, then removed
/// (with whatever an earlier discard a crash cut short left aside).
pub(crate) fn discard_topic_dir(data_dir: &Path, topic: &TopicName) -> Result<(), TierError> {
    let dir = topic_dir(data_dir, topic);
    let aside = discarded_dir(data_dir, topic);
    let remove = |path: &Path| match fs::remove_dir_all(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(io_err(topic, path, "removing a discarded topic directory", e))
        }
        _ => Ok(()),
    };
    remove(&aside)?;
    match fs::rename(&dir, &aside) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err(topic, &dir, "renaming the topic directory aside", e)),
    }
    fsync_dir(data_dir).map_err(|e| io_err(topic, data_dir, "fsyncing the data directory", e))?;
    remove(&aside)
}

/// fsyncs a directory, making the creation, rename or removal of its entries durable.
/// Public for the router's state directory, so that the fault-injection feature's record
/// of durable directory listings ([`crate::faults::track_directories`]) sees its fsyncs
/// too.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    fault!(DirFsync, dir)?;
    File::open(dir)?.sync_all()?;
    #[cfg(feature = "fault-injection")]
    crate::faults::dir_synced(dir);
    Ok(())
}

/// The context of an error about `topic` in the hot tier.
pub(crate) fn ctx(topic: &TopicName) -> ErrorContext {
    ErrorContext::tier(TierKind::Hot).topic(topic)
}

/// An I/O failure on `path` while doing `what`, as a retryable error.
pub(crate) fn io_err(topic: &TopicName, path: &Path, what: &str, e: io::Error) -> TierError {
    TierError::unavailable(ctx(topic).location(path.display().to_string()), what).with_source(e)
}

/// `path@position`, the location format of errors.
pub(crate) fn at(path: &Path, position: u64) -> String {
    format!("{}@{position}", path.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_by_offset_and_round_trip() {
        let names: Vec<String> =
            [0u64, 9, 10, 1_000_000, u64::MAX].iter().map(|&o| segment_file_name(o)).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert_eq!(names[0], "00000000000000000000.seg");
        for (name, want) in names.iter().zip([0u64, 9, 10, 1_000_000, u64::MAX]) {
            assert_eq!(parse_segment_file_name(name), Some(want));
        }
        for bad in
            ["0.seg", "0000000000000000000a.seg", "00000000000000000000.tmp", "99999999999999999999.seg"]
        {
            assert_eq!(parse_segment_file_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn gap_names_round_trip_and_reject_others() {
        let range = OffsetRange::new(1035, 1040);
        let name = gap_file_name(range);
        assert_eq!(name, "00000000000000001035-00000000000000001040.gap");
        assert_eq!(parse_gap_file_name(&name), Some(range));
        assert_eq!(parse_segment_file_name(&name), None);
        for bad in [
            "00000000000000001040-00000000000000001035.gap",
            "00000000000000001035-00000000000000001035.gap",
            "1035-1040.gap",
            "00000000000000001035-00000000000000001040.seg",
            "00000000000000001035-0000000000000000104a.gap",
            "99999999999999999999-99999999999999999999.gap",
        ] {
            assert_eq!(parse_gap_file_name(bad), None, "{bad}");
        }
    }
}
