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

use std::path::Path;

use tier_core::{Offset, TierError, TopicName};

use crate::layout::ctx;
use crate::marker::Marker;

/// The marker.
pub(crate) const REBUILT: Marker = Marker { file: "rebuilt", tmp: "rebuilt.tmp", what: "rebuilt marker" };

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
    let text = bound.map_or_else(|| "unknown\n".to_owned(), |b| format!("{b}\n"));
    REBUILT.write(data_dir, topic, &text)
}

/// The marker of `topic` under `data_dir`, if there is one.
pub(crate) fn read(data_dir: &Path, topic: &TopicName) -> Result<Option<Rebuilt>, TierError> {
    let Some((path, text)) = REBUILT.read(data_dir, topic)? else { return Ok(None) };
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
    REBUILT.remove(data_dir, topic)
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
        assert!(!dir.path().join("t").join(REBUILT.tmp).exists());
        remove(dir.path(), &topic).unwrap();
        remove(dir.path(), &topic).unwrap();
        assert_eq!(read(dir.path(), &topic).unwrap(), None);
        std::fs::write(dir.path().join("t").join(REBUILT.file), "forty\n").unwrap();
        let e = read(dir.path(), &topic).unwrap_err();
        assert_eq!(e.kind(), tier_core::ErrorKind::Corruption, "{e}");
    }
}
