//! Object names: `<prefix>/<topic>/<base_offset:020>-<last_offset:020>.seg` for segments
//! and `<prefix>/<topic>/<base_offset:020>-<last_offset:020>.ts-<min:016x>-<max:016x>` for
//! their zero-byte *time markers*.
//!
//! The names encode each segment's offset range (`last` is inclusive), zero-padded so
//! that names sort by offset; the listing of `<prefix>/<topic>/` is the manifest, with no
//! metadata kept elsewhere. A time marker carries its segment's smallest and largest
//! record timestamps, so a listing knows every segment's time bounds without reading a
//! trailer. Timestamps are written *offset-binary*: the `i64` with its sign bit flipped,
//! as 16 lowercase hex digits, so negative timestamps need no sign character and names
//! sort by timestamp (`i64::MIN` is `0000000000000000`, `0` is `8000000000000000`). A
//! marker sorts right after its segment (`.seg` < `.ts-`).
//!
//! A *gap marker* `<prefix>/<topic>/<from:020>-<to:020>.gap` (zero bytes; `to` is
//! **exclusive**, as in the WAL's gap markers) records that offsets `from..to` were
//! declared lost (see [`ColdTier::record_gap`](crate::ColdTier::record_gap)), so the
//! segment ending at `from` and the one starting at `to` may follow each other.
//!
//! A *successor pointer* `<prefix>/<topic>/<at:020>.next` holds, as its body, the file
//! name of the object that continues the log at offset `at`: the segment or gap marker
//! starting there (`at` = 0: the topic's first object, wherever it starts). Written with a
//! conditional PUT after the object it names, it lets a listing that lags writes (an
//! eventually consistent LIST) be completed with GETs, which are read-after-write
//! consistent (see [`ColdTier::refresh`](crate::ColdTier::refresh)). Listings ignore it.
//!
//! The *topic marker* `<prefix>/<topic>/topic` (zero bytes) records that the topic exists
//! (see [`ColdTier::record_topic`](crate::ColdTier::record_topic)): written before the
//! topic's first offset is handed out, it outlives a lost data directory even while cold
//! holds no segment of the topic yet. See `docs/cold.md` ("Object layout").

use object_store::path::Path;
use tier_core::{Offset, OffsetRange, Timestamp, TopicName};

/// Suffix of every segment object.
pub const SEGMENT_SUFFIX: &str = ".seg";

/// What follows `<base>-<last>` in a time marker's name, before the timestamps.
pub const MARKER_INFIX: &str = ".ts-";

/// Suffix of every gap marker.
pub const GAP_SUFFIX: &str = tier_core::segment::GAP_SUFFIX;

/// Suffix of every successor pointer (`<at:020>.next`).
pub const POINTER_SUFFIX: &str = ".next";

/// The name of the topic marker in a topic's folder.
pub const TOPIC_MARKER: &str = "topic";

/// Hex digits of each timestamp in a time marker's name.
const TIMESTAMP_WIDTH: usize = 16;

/// The smallest and largest record timestamps of a segment (both inclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimeBounds {
    /// Smallest record timestamp.
    pub min: Timestamp,
    /// Largest record timestamp.
    pub max: Timestamp,
}

/// What an object of a topic's folder is, by its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectName {
    /// A segment object holding these offsets.
    Segment(OffsetRange),
    /// The time marker of the segment holding these offsets.
    TimeMarker(OffsetRange, TimeBounds),
    /// A gap marker: these offsets were declared lost.
    Gap(OffsetRange),
}

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

    /// The zero-byte time marker of the segment holding `range` (non-empty) whose record
    /// timestamps are `bounds`.
    ///
    /// # Panics
    /// If `range` is empty (an empty segment is never stored).
    pub fn marker_key(&self, topic: &TopicName, range: OffsetRange, bounds: TimeBounds) -> Path {
        assert!(!range.is_empty(), "an empty segment has no object name");
        self.topic_dir(topic).join(marker_file_name(range, bounds))
    }

    /// The zero-byte gap marker recording offsets `range` (non-empty) as lost.
    ///
    /// # Panics
    /// If `range` is empty (an empty gap is never recorded).
    pub fn gap_key(&self, topic: &TopicName, range: OffsetRange) -> Path {
        assert!(!range.is_empty(), "an empty gap has no marker");
        self.topic_dir(topic).join(gap_file_name(range))
    }

    /// The successor pointer naming the object that continues `topic`'s log at `at`
    /// (`<at:020>.next`; see the module docs).
    pub fn pointer_key(&self, topic: &TopicName, at: Offset) -> Path {
        self.topic_dir(topic).join(format!("{at:0w$}{POINTER_SUFFIX}", w = OFFSET_WIDTH))
    }

    /// The zero-byte topic marker of `topic` ([`TOPIC_MARKER`] in its folder).
    pub fn topic_marker_key(&self, topic: &TopicName) -> Path {
        self.topic_dir(topic).join(TOPIC_MARKER)
    }

    /// The offset range named by `key` when it is a segment object of `topic` directly in
    /// its folder; `None` for any other object (time markers included).
    pub fn parse_key(&self, topic: &TopicName, key: &Path) -> Option<OffsetRange> {
        match self.parse_object(topic, key)? {
            ObjectName::Segment(range) => Some(range),
            ObjectName::TimeMarker(..) | ObjectName::Gap(_) => None,
        }
    }

    /// What `key` is when it is a segment, a time marker or a gap marker of `topic`
    /// directly in its folder; `None` for any other object.
    pub fn parse_object(&self, topic: &TopicName, key: &Path) -> Option<ObjectName> {
        let dir = self.topic_dir(topic);
        let mut rest = key.prefix_match(&dir)?;
        let name = rest.next()?;
        if rest.next().is_some() {
            return None;
        }
        let name = name.as_ref();
        if let Some(range) = parse_file_name(name) {
            return Some(ObjectName::Segment(range));
        }
        if let Some(range) = parse_gap_name(name) {
            return Some(ObjectName::Gap(range));
        }
        parse_marker_name(name).map(|(range, bounds)| ObjectName::TimeMarker(range, bounds))
    }
}

/// `<base:020>-<last:020>.seg` for `range` (non-empty).
pub fn segment_file_name(range: OffsetRange) -> String {
    format!("{:0w$}-{:0w$}{SEGMENT_SUFFIX}", range.start, range.end - 1, w = OFFSET_WIDTH)
}

/// `<from:020>-<to:020>.gap` for the lost offsets `range` (non-empty; `to` exclusive).
pub fn gap_file_name(range: OffsetRange) -> String {
    tier_core::segment::gap_marker_name(range)
}

/// The lost range a gap marker name `<from:020>-<to:020>.gap` names, or `None` when it
/// does not follow the grammar (wrong widths, non-digits, `to <= from`).
pub fn parse_gap_name(name: &str) -> Option<OffsetRange> {
    tier_core::segment::parse_gap_marker_name(name)
}

/// `<base:020>-<last:020>.ts-<min:016x>-<max:016x>` for `range` (non-empty) and `bounds`.
pub fn marker_file_name(range: OffsetRange, bounds: TimeBounds) -> String {
    format!(
        "{:0w$}-{:0w$}{MARKER_INFIX}{}-{}",
        range.start,
        range.end - 1,
        encode_timestamp(bounds.min),
        encode_timestamp(bounds.max),
        w = OFFSET_WIDTH
    )
}

/// The range and time bounds a marker name `<base:020>-<last:020>.ts-<min:016x>-<max:016x>`
/// names, or `None` when it does not follow the grammar (including `min > max`).
pub fn parse_marker_name(name: &str) -> Option<(OffsetRange, TimeBounds)> {
    let (stem, times) = name.split_once(MARKER_INFIX)?;
    let range = parse_range(stem)?;
    let (min, max) = times.split_once('-')?;
    let bounds = TimeBounds { min: decode_timestamp(min)?, max: decode_timestamp(max)? };
    (bounds.min <= bounds.max).then_some((range, bounds))
}

/// Offset-binary: the sign bit flipped, 16 lowercase hex digits (sorts like the `i64`).
fn encode_timestamp(t: Timestamp) -> String {
    format!("{:0w$x}", (t as u64) ^ (1 << 63), w = TIMESTAMP_WIDTH)
}

fn decode_timestamp(s: &str) -> Option<Timestamp> {
    if s.len() != TIMESTAMP_WIDTH || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let biased = u64::from_str_radix(s, 16).ok()?;
    Some((biased ^ (1 << 63)) as Timestamp)
}

/// The range a file name `<base:020>-<last:020>.seg` names, or `None` when it does not
/// follow the grammar (wrong widths, non-digits, `last < base`, `last == u64::MAX`).
pub fn parse_file_name(name: &str) -> Option<OffsetRange> {
    parse_range(name.strip_suffix(SEGMENT_SUFFIX)?)
}

/// The range `<base:020>-<last:020>` names.
fn parse_range(stem: &str) -> Option<OffsetRange> {
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
    fn markers_round_trip_sort_next_to_their_segment_and_handle_negative_times() {
        let layout = Layout::new("p");
        let topic = TopicName::new("t").expect("valid");
        let range = OffsetRange::new(5, 10);
        for bounds in [
            TimeBounds { min: -7, max: 3 },
            TimeBounds { min: i64::MIN, max: i64::MAX },
            TimeBounds { min: 1_764_000_000_000, max: 1_764_000_000_000 },
        ] {
            let key = layout.marker_key(&topic, range, bounds);
            assert_eq!(layout.parse_object(&topic, &key), Some(ObjectName::TimeMarker(range, bounds)));
            assert_eq!(layout.parse_key(&topic, &key), None, "a marker is not a segment");
        }
        assert_eq!(
            marker_file_name(range, TimeBounds { min: -1, max: 0 }),
            "00000000000000000005-00000000000000000009.ts-7fffffffffffffff-8000000000000000"
        );
        let seg = segment_file_name(range);
        let marker = marker_file_name(range, TimeBounds { min: i64::MIN, max: i64::MIN });
        let next = segment_file_name(OffsetRange::new(10, 11));
        assert!(seg < marker && marker < next, "{seg} {marker} {next}");
        let mut times: Vec<i64> = vec![5, -3, i64::MIN, 0, i64::MAX, -1];
        let mut names: Vec<String> = times.iter().map(|&t| encode_timestamp(t)).collect();
        times.sort();
        names.sort();
        assert_eq!(names.iter().map(|n| decode_timestamp(n).expect("valid")).collect::<Vec<_>>(), times);
    }

    #[test]
    fn malformed_markers_are_ignored() {
        let layout = Layout::new("");
        let topic = TopicName::new("t").expect("valid");
        for name in [
            "t/00000000000000000001-00000000000000000002.ts-8000000000000001-8000000000000000",
            "t/00000000000000000001-00000000000000000002.ts-800000000000000-8000000000000000",
            "t/00000000000000000001-00000000000000000002.ts-800000000000000G-8000000000000000",
            "t/00000000000000000001-00000000000000000002.ts-8000000000000000",
            "t/00000000000000000002-00000000000000000001.ts-8000000000000000-8000000000000000",
            "t/00000000000000000001-00000000000000000002.ts-8000000000000000-8000000000000000x",
        ] {
            assert_eq!(layout.parse_object(&topic, &Path::from(name)), None, "{name}");
        }
    }

    #[test]
    fn gap_markers_round_trip_with_an_exclusive_end() {
        let layout = Layout::new("p");
        let topic = TopicName::new("t").expect("valid");
        let key = layout.gap_key(&topic, OffsetRange::new(90, 100));
        assert_eq!(key.as_ref(), "p/t/00000000000000000090-00000000000000000100.gap");
        assert_eq!(layout.parse_object(&topic, &key), Some(ObjectName::Gap(OffsetRange::new(90, 100))));
        assert_eq!(layout.parse_key(&topic, &key), None, "a gap marker is not a segment");
        for name in [
            "t/00000000000000000100-00000000000000000100.gap",
            "t/00000000000000000100-00000000000000000090.gap",
            "t/0000000000000000090-00000000000000000100.gap",
            "t/00000000000000000090-00000000000000000100.gap.tmp",
            "t/0000000000000000009x-00000000000000000100.gap",
        ] {
            assert_eq!(layout.parse_object(&topic, &Path::from(name)), None, "{name}");
        }
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

    #[test]
    fn successor_pointers_are_named_by_offset_and_are_no_listed_object() {
        let layout = Layout::new("p");
        let topic = TopicName::new("t").expect("valid");
        let key = layout.pointer_key(&topic, 150);
        assert_eq!(key.as_ref(), "p/t/00000000000000000150.next");
        assert_eq!(layout.parse_object(&topic, &key), None, "listings ignore pointers");
        assert!(layout.pointer_key(&topic, 9) < layout.pointer_key(&topic, 10), "sorted by offset");
    }
}
