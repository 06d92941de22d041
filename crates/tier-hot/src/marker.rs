//! Small files the router keeps in a topic's WAL directory, beside its segments, so that
//! what they say survives the loss of the router's own state directory:
//!
//! - `rebuilt` ([`crate::rebuilt`]): the WAL is being rebuilt from another tier;
//! - `cut`: opening the WAL cut the topic's log back (a torn tail truncated, a segment
//!   removed or sealed again, a torn point recorded) and the router has not yet recorded
//!   what the cut may have taken ([`crate::HotTier::cut_back_at_open`]). Written before
//!   the first byte is dropped, removed by [`crate::HotTier::cut_recorded`]: the evidence
//!   of a cut outlives an open whose recovery failed, when the log left behind looks
//!   whole;
//! - `unacked`: offsets degraded opens skipped, where warm may hold records that were
//!   never acknowledged (the router's `RecoveryReport::skipped`; one `<from> <to>` line
//!   each, [`tier_core::format_range_lines`]). The WAL records those offsets as its gap,
//!   which alone does not say that warm's records there are never to be served; the
//!   router keeps the same ranges in `<state_dir>/<topic>.unacked`, and recovery takes
//!   what either copy says.
//!
//! - `losses`: offsets a recovery of the router reported lost (`lost <from> <to>`) or
//!   maybe lost (`maybe <from> <to>`) whose report was not handed out yet, because the
//!   open did not complete. The router keeps the same in `<state_dir>/<topic>.losses`;
//!   this copy survives the state directory's loss, when the WAL may already continue
//!   past them with nothing else that says so (an emptied WAL that took over at a later
//!   offset), and recovery reports what either copy says.
//!
//! - `owner`: the owner epoch under which this WAL was last written (one decimal number,
//!   [`crate::HotTier::record_owner_epoch`]): a router whose claim of the topic in warm
//!   finds epochs claimed since this one knows another node may have owned the topic
//!   since, and that this WAL is then not the log past that takeover;
//!
//! - `sealed`: the WAL's own record of which of the newest sealed segments are known
//!   durable — their seal's fsyncs finished — written at a clean close (one
//!   `<base> <bytes>` line each, [`write_durable_seals`]). Under `never`/`interval` an open
//!   checks the batches of the sealed segments whose seals may have been in flight; a
//!   segment this record names, at that size, is trusted as the older ones are.
//!
//! Each is written to a temporary file, fsynced, renamed into place and the directory
//! fsynced, so a crash leaves the old or the new file.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use tier_core::{OffsetRange, TierError, TopicName};

use crate::layout::{ctx, fsync_dir, io_err, topic_dir};

/// One marker file of a topic directory: its name, the name it is written under before
/// it is renamed into place, and what errors call it.
pub(crate) struct Marker {
    pub(crate) file: &'static str,
    pub(crate) tmp: &'static str,
    pub(crate) what: &'static str,
}

/// The `cut` marker.
pub(crate) const CUT: Marker = Marker { file: "cut", tmp: "cut.tmp", what: "cut marker" };

/// The `unacked` marker.
pub(crate) const UNACKED: Marker = Marker { file: "unacked", tmp: "unacked.tmp", what: "unacked marker" };

/// The `losses` marker.
pub(crate) const LOSSES: Marker = Marker { file: "losses", tmp: "losses.tmp", what: "losses marker" };

/// The `owner` marker.
pub(crate) const OWNER: Marker = Marker { file: "owner", tmp: "owner.tmp", what: "owner epoch marker" };

/// The `sealed` record.
pub(crate) const DURABLE_SEALS: Marker =
    Marker { file: crate::layout::DURABLE_SEALS_FILE, tmp: "sealed.tmp", what: "record of durable seals" };

/// True for a marker's file name, or that of a write of one a crash cut short: files of
/// the topic directory that are not segments and not to be warned about.
pub(crate) fn is_marker(name: &str) -> bool {
    [&crate::rebuilt::REBUILT, &UNACKED, &LOSSES, &CUT, &DURABLE_SEALS, &OWNER]
        .iter()
        .any(|m| name == m.file || name == m.tmp)
}

impl Marker {
    /// Writes `text` as `topic`'s marker under `data_dir` durably (through `tmp`),
    /// creating the topic directory if needed.
    pub(crate) fn write(&self, data_dir: &Path, topic: &TopicName, text: &str) -> Result<(), TierError> {
        let dir = topic_dir(data_dir, topic);
        if !dir.exists() {
            fs::create_dir_all(&dir).map_err(|e| io_err(topic, &dir, "creating the topic directory", e))?;
            fsync_dir(data_dir).map_err(|e| io_err(topic, data_dir, "fsyncing the data directory", e))?;
        }
        self.write_in(&dir, topic, text)
    }

    /// Writes `text` as `topic`'s marker in its existing topic directory `dir` durably.
    pub(crate) fn write_in(&self, dir: &Path, topic: &TopicName, text: &str) -> Result<(), TierError> {
        let what = self.what;
        let tmp = dir.join(self.tmp);
        let mut file =
            File::create(&tmp).map_err(|e| io_err(topic, &tmp, &format!("creating the {what}"), e))?;
        file.write_all(text.as_bytes())
            .map_err(|e| io_err(topic, &tmp, &format!("writing the {what}"), e))?;
        file.sync_all().map_err(|e| io_err(topic, &tmp, &format!("fsyncing the {what}"), e))?;
        let path = dir.join(self.file);
        fs::rename(&tmp, &path)
            .map_err(|e| io_err(topic, &path, &format!("renaming the {what} into place"), e))?;
        fsync_dir(dir).map_err(|e| io_err(topic, dir, "fsyncing the topic directory", e))
    }

    /// `topic`'s marker under `data_dir` (its path and text), if there is one.
    pub(crate) fn read(
        &self,
        data_dir: &Path,
        topic: &TopicName,
    ) -> Result<Option<(PathBuf, String)>, TierError> {
        let path = topic_dir(data_dir, topic).join(self.file);
        match fs::read_to_string(&path) {
            Ok(text) => Ok(Some((path, text))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(topic, &path, &format!("reading the {}", self.what), e)),
        }
    }

    /// Removes `topic`'s marker under `data_dir` durably (nothing to do without one).
    pub(crate) fn remove(&self, data_dir: &Path, topic: &TopicName) -> Result<(), TierError> {
        let dir = topic_dir(data_dir, topic);
        let path = dir.join(self.file);
        match fs::remove_file(&path) {
            Ok(()) => fsync_dir(&dir).map_err(|e| io_err(topic, &dir, "fsyncing the topic directory", e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(topic, &path, &format!("removing the {}", self.what), e)),
        }
    }
}

/// Records `ranges` as `topic`'s `unacked` marker under `data_dir`; none remove it.
pub(crate) fn write_unacked(
    data_dir: &Path,
    topic: &TopicName,
    ranges: &[OffsetRange],
) -> Result<(), TierError> {
    if ranges.is_empty() {
        return UNACKED.remove(data_dir, topic);
    }
    UNACKED.write(data_dir, topic, &tier_core::format_range_lines(ranges))
}

/// The ranges of `topic`'s `unacked` marker under `data_dir` (none without one).
pub(crate) fn read_unacked(data_dir: &Path, topic: &TopicName) -> Result<Vec<OffsetRange>, TierError> {
    let Some((path, text)) = UNACKED.read(data_dir, topic)? else { return Ok(Vec::new()) };
    tier_core::parse_range_lines(&text).map_err(|why| {
        TierError::corruption(
            ctx(topic).location(path.display().to_string()),
            format!("the unacked marker: {why}"),
        )
    })
}

/// Records `lost` and `maybe_lost` as `topic`'s `losses` marker under `data_dir`; none
/// remove it.
pub(crate) fn write_losses(
    data_dir: &Path,
    topic: &TopicName,
    lost: &[OffsetRange],
    maybe_lost: &[OffsetRange],
) -> Result<(), TierError> {
    if lost.is_empty() && maybe_lost.is_empty() {
        return LOSSES.remove(data_dir, topic);
    }
    let lines = lost.iter().map(|r| ("lost", r)).chain(maybe_lost.iter().map(|r| ("maybe", r)));
    let text: String = lines.map(|(kind, r)| format!("{kind} {} {}\n", r.start, r.end)).collect();
    LOSSES.write(data_dir, topic, &text)
}

/// The `lost` and `maybe` ranges of `topic`'s `losses` marker under `data_dir` (none
/// without one).
pub(crate) fn read_losses(
    data_dir: &Path,
    topic: &TopicName,
) -> Result<(Vec<OffsetRange>, Vec<OffsetRange>), TierError> {
    let (mut lost, mut maybe_lost) = (Vec::new(), Vec::new());
    let Some((path, text)) = LOSSES.read(data_dir, topic)? else { return Ok((lost, maybe_lost)) };
    let bad = |line: &str| {
        TierError::corruption(
            ctx(topic).location(path.display().to_string()),
            format!("bad losses marker line {line:?}"),
        )
    };
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [kind, from, to] = words[..] else { return Err(bad(line)) };
        let (Ok(from), Ok(to)) = (from.parse(), to.parse()) else { return Err(bad(line)) };
        if to < from {
            return Err(bad(line));
        }
        match kind {
            "lost" => lost.push(OffsetRange::new(from, to)),
            "maybe" => maybe_lost.push(OffsetRange::new(from, to)),
            _ => return Err(bad(line)),
        }
    }
    Ok((lost, maybe_lost))
}

/// Records `epoch` as `topic`'s owner marker under `data_dir`.
pub(crate) fn write_owner(data_dir: &Path, topic: &TopicName, epoch: u64) -> Result<(), TierError> {
    OWNER.write(data_dir, topic, &format!("{epoch}\n"))
}

/// The epoch of `topic`'s owner marker under `data_dir` (`None` without one).
pub(crate) fn read_owner(data_dir: &Path, topic: &TopicName) -> Result<Option<u64>, TierError> {
    let Some((path, text)) = OWNER.read(data_dir, topic)? else { return Ok(None) };
    text.trim().parse().map(Some).map_err(|_| {
        TierError::corruption(
            ctx(topic).location(path.display().to_string()),
            format!("the owner epoch marker holds {:?}, not an epoch", text.trim()),
        )
    })
}

/// Records that the seals of `segments` (base offset and file size each) are durable, in
/// the existing topic directory `dir`.
pub(crate) fn write_durable_seals(
    dir: &Path,
    topic: &TopicName,
    segments: &[(u64, u64)],
) -> Result<(), TierError> {
    let text: String = segments.iter().map(|(base, bytes)| format!("{base} {bytes}\n")).collect();
    DURABLE_SEALS.write_in(dir, topic, &text)
}

/// The segments (base offset and file size) the `sealed` record in `dir` names; none
/// without one, or when it cannot be read or parsed (it only spares an open a check).
pub(crate) fn read_durable_seals(dir: &Path) -> Vec<(u64, u64)> {
    let Ok(text) = fs::read_to_string(dir.join(DURABLE_SEALS.file)) else { return Vec::new() };
    let parsed: Option<Vec<(u64, u64)>> = text
        .lines()
        .map(|line| {
            let (base, bytes) = line.split_once(' ')?;
            Some((base.parse().ok()?, bytes.parse().ok()?))
        })
        .collect();
    parsed.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_losses_marker_round_trips_and_none_remove_it() {
        let dir = tempfile::tempdir().unwrap();
        let topic = TopicName::new("t").unwrap();
        assert_eq!(read_losses(dir.path(), &topic).unwrap(), (vec![], vec![]));
        let (lost, maybe) =
            (vec![OffsetRange::new(5, 10)], vec![OffsetRange::new(10, 1034), OffsetRange::new(2000, 2010)]);
        write_losses(dir.path(), &topic, &lost, &maybe).unwrap();
        assert_eq!(read_losses(dir.path(), &topic).unwrap(), (lost, maybe));
        assert!(!dir.path().join("t").join(LOSSES.tmp).exists());
        write_losses(dir.path(), &topic, &[], &[]).unwrap();
        write_losses(dir.path(), &topic, &[], &[]).unwrap();
        assert_eq!(read_losses(dir.path(), &topic).unwrap(), (vec![], vec![]));
        std::fs::write(dir.path().join("t").join(LOSSES.file), "gone 1 2\n").unwrap();
        assert_eq!(read_losses(dir.path(), &topic).unwrap_err().kind(), tier_core::ErrorKind::Corruption);
    }

    #[test]
    fn the_unacked_marker_round_trips_and_none_remove_it() {
        let dir = tempfile::tempdir().unwrap();
        let topic = TopicName::new("t").unwrap();
        assert_eq!(read_unacked(dir.path(), &topic).unwrap(), vec![]);
        let ranges = vec![OffsetRange::new(10, 1034)];
        write_unacked(dir.path(), &topic, &ranges).unwrap();
        assert_eq!(read_unacked(dir.path(), &topic).unwrap(), ranges);
        assert!(!dir.path().join("t").join(UNACKED.tmp).exists());
        write_unacked(dir.path(), &topic, &[]).unwrap();
        write_unacked(dir.path(), &topic, &[]).unwrap();
        assert!(!dir.path().join("t").join(UNACKED.file).exists());
        std::fs::write(dir.path().join("t").join(UNACKED.file), "9 3\n").unwrap();
        let e = read_unacked(dir.path(), &topic).unwrap_err();
        assert_eq!(e.kind(), tier_core::ErrorKind::Corruption, "{e}");
    }
}
