//! The *rebuilt* marker of a topic's WAL: `<data_dir>/<topic>/rebuilt`, one line, the
//! offset up to which records may have been acknowledged before the WAL was rebuilt
//! (`43`), or `unknown`.
//!
//! Recovery writes it before it replays another tier's records into a WAL that was lost
//! (or that cannot vouch for its end), and removes it once the topic continues past every
//! offset that may have been acknowledged. Until then the WAL's end says nothing about
//! what was acknowledged — and the marker says so from the WAL's own directory, so the
//! evidence survives the loss of the router's state directory, where the reservation
//! and the losses of that recovery live.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use tier_core::{Offset, TierError, TopicName};

use crate::layout::{ctx, fsync_dir, io_err, topic_dir};

/// The marker's file name in the topic directory.
pub(crate) const REBUILT_FILE: &str = "rebuilt";

/// The name the marker is written under before it is renamed into place.
pub(crate) const REBUILT_TMP: &str = "rebuilt.tmp";

/// What a topic's rebuilt marker says ([`HotTier::rebuilt`](crate::HotTier::rebuilt)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rebuilt {
    /// Records may have been acknowledged at offsets up to here (exclusive) before the
    /// WAL was rebuilt; `None`: nothing said how far.
    pub bound: Option<Offset>,
}

/// Writes the marker of `topic` under `data_dir` durably (a temporary file fsynced,
/// renamed into place, the directory fsynced), creating the topic directory if needed.
pub(crate) fn write(data_dir: &Path, topic: &TopicName, bound: Option<Offset>) -> Result<(), TierError> {
    let dir = topic_dir(data_dir, topic);
    if !dir.exists() {
        fs::create_dir_all(&dir).map_err(|e| io_err(topic, &dir, "creating the topic directory", e))?;
        fsync_dir(data_dir).map_err(|e| io_err(topic, data_dir, "fsyncing the data directory", e))?;
    }
    let tmp = dir.join(REBUILT_TMP);
    let text = bound.map_or_else(|| "unknown\n".to_owned(), |b| format!("{b}\n"));
    let mut file = File::create(&tmp).map_err(|e| io_err(topic, &tmp, "creating the rebuilt marker", e))?;
    file.write_all(text.as_bytes()).map_err(|e| io_err(topic, &tmp, "writing the rebuilt marker", e))?;
    file.sync_all().map_err(|e| io_err(topic, &tmp, "fsyncing the rebuilt marker", e))?;
    let path = dir.join(REBUILT_FILE);
    fs::rename(&tmp, &path).map_err(|e| io_err(topic, &path, "renaming the rebuilt marker into place", e))?;
    fsync_dir(&dir).map_err(|e| io_err(topic, &dir, "fsyncing the topic directory", e))
}

/// The marker of `topic` under `data_dir`, if there is one.
pub(crate) fn read(data_dir: &Path, topic: &TopicName) -> Result<Option<Rebuilt>, TierError> {
    let path = topic_dir(data_dir, topic).join(REBUILT_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(topic, &path, "reading the rebuilt marker", e)),
    };
    let bound = match text.trim() {
        "unknown" => None,
        n => Some(n.parse::<Offset>().map_err(|_| {
            TierError::corruption(
                ctx(topic).location(path.display().to_string()),
                format!("the rebuilt marker holds {:?}, not an offset or \"unknown\"", text.trim()),
            )
        })?),
    };
    Ok(Some(Rebuilt { bound }))
}

/// Removes the marker of `topic` under `data_dir` durably (nothing to do without one).
pub(crate) fn remove(data_dir: &Path, topic: &TopicName) -> Result<(), TierError> {
    let dir = topic_dir(data_dir, topic);
    let path = dir.join(REBUILT_FILE);
    match fs::remove_file(&path) {
        Ok(()) => fsync_dir(&dir).map_err(|e| io_err(topic, &dir, "fsyncing the topic directory", e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(topic, &path, "removing the rebuilt marker", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_round_trips_and_its_removal_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let topic = TopicName::new("t").unwrap();
        assert_eq!(read(dir.path(), &topic).unwrap(), None);
        write(dir.path(), &topic, Some(43)).unwrap();
        assert_eq!(read(dir.path(), &topic).unwrap(), Some(Rebuilt { bound: Some(43) }));
        write(dir.path(), &topic, None).unwrap();
        assert_eq!(read(dir.path(), &topic).unwrap(), Some(Rebuilt { bound: None }));
        assert!(!dir.path().join("t").join(REBUILT_TMP).exists());
        remove(dir.path(), &topic).unwrap();
        remove(dir.path(), &topic).unwrap();
        assert_eq!(read(dir.path(), &topic).unwrap(), None);
        std::fs::write(dir.path().join("t").join(REBUILT_FILE), "forty\n").unwrap();
        let e = read(dir.path(), &topic).unwrap_err();
        assert_eq!(e.kind(), tier_core::ErrorKind::Corruption, "{e}");
    }
}
