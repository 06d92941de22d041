//! Object names: `<prefix>/<topic>/<base_offset:020>-<last_offset:020>.seg`.
//!
//! The names encode each segment's offset range (`last` is inclusive), zero-padded so
//! that names sort by offset; the listing of `<prefix>/<topic>/` is the manifest, with no
//! metadata kept elsewhere. See `docs/cold.md` ("Object layout").

use object_store::path::Path;
use tier_core::{Offset, OffsetRange, TopicName};

/// Suffix of every segment object.
pub const SEGMENT_SUFFIX: &str = ".seg";

/// Width of each zero-padded offset in a name (`u64::MAX` has 20 digits).
const OFFSET_WIDTH: usize = 20;

/// The object names of one cold store: a prefix (possibly empty) under which each topic
/// has a folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    prefix: Path,
}

impl Layout {
    /// A layout under `prefix` (`""` for the bucket's root). Slashes separate folders;
    /// empty parts are dropped.
    pub fn new(prefix: &str) -> Self {
        Self { prefix: Path::from_iter(prefix.split('/').filter(|p| !p.is_empty())) }
    }

    /// The prefix.
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// `<prefix>/<topic>`: the folder listing a topic's segments.
    pub fn topic_dir(&self, topic: &TopicName) -> Path {
        self.prefix.clone().join(topic.as_str())
    }

    /// The object holding the non-empty offset range `range`.
    ///
    /// # Panics
    /// If `range` is empty (an empty segment is never stored).
    pub fn segment_key(&self, topic: &TopicName, range: OffsetRange) -> Path {
        assert!(!range.is_empty(), "an empty segment has no object name");
        self.topic_dir(topic).join(segment_file_name(range))
    }

    /// The offset range named by `key` when it is a segment object of `topic` directly in
    /// its folder; `None` for any other object.
    pub fn parse_key(&self, topic: &TopicName, key: &Path) -> Option<OffsetRange> {
        let dir = self.topic_dir(topic);
        let mut rest = key.prefix_match(&dir)?;
        let name = rest.next()?;
        if rest.next().is_some() {
            return None;
        }
        parse_file_name(name.as_ref())
    }
}

/// `<base:020>-<last:020>.seg` for `range` (non-empty).
pub fn segment_file_name(range: OffsetRange) -> String {
    format!("{:0w$}-{:0w$}{SEGMENT_SUFFIX}", range.start, range.end - 1, w = OFFSET_WIDTH)
}

/// The range a file name `<base:020>-<last:020>.seg` names, or `None` when it does not
/// follow the grammar (wrong widths, non-digits, `last < base`, `last == u64::MAX`).
pub fn parse_file_name(name: &str) -> Option<OffsetRange> {
    let stem = name.strip_suffix(SEGMENT_SUFFIX)?;
    let (base, last) = stem.split_once('-')?;
    let digits = |s: &str| s.len() == OFFSET_WIDTH && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(base) || !digits(last) {
        return None;
    }
    let base: Offset = base.parse().ok()?;
    let last: Offset = last.parse().ok()?;
    if last < base {
        return None;
    }
    Some(OffsetRange::new(base, last.checked_add(1)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sort_by_offset() {
        let layout = Layout::new("/archive//logs/");
        let topic = TopicName::new("orders").expect("valid");
        let key = layout.segment_key(&topic, OffsetRange::new(100, 200));
        assert_eq!(key.as_ref(), "archive/logs/orders/00000000000000000100-00000000000000000199.seg");
        assert_eq!(layout.parse_key(&topic, &key), Some(OffsetRange::new(100, 200)));
        let a = segment_file_name(OffsetRange::new(9, 10));
        let b = segment_file_name(OffsetRange::new(10, 11));
        assert!(a < b);
        assert_eq!(
            parse_file_name(&segment_file_name(OffsetRange::new(0, u64::MAX))),
            Some(OffsetRange::new(0, u64::MAX))
        );
    }

    #[test]
    fn foreign_names_are_not_segments() {
        let layout = Layout::new("");
        let topic = TopicName::new("t").expect("valid");
        for name in [
            "t/x.seg",
            "t/00000000000000000001-00000000000000000000.seg",
            "t/0000000000000000001-00000000000000000002.seg",
            "t/00000000000000000001-00000000000000000002.seg.tmp",
            "t/sub/00000000000000000001-00000000000000000002.seg",
            "u/00000000000000000001-00000000000000000002.seg",
            "t/18446744073709551615-18446744073709551615.seg",
        ] {
            assert_eq!(layout.parse_key(&topic, &Path::from(name)), None, "{name}");
        }
    }
}
