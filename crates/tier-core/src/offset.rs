use std::fmt;

/// A record's position in its topic: dense from 0, assigned by the writer, never reused
/// and never reset by a restart.
pub type Offset = u64;

/// A publish timestamp in milliseconds since the Unix epoch. Producers set it; it need
/// not increase with the offset.
pub type Timestamp = i64;

/// A half-open range of offsets, `start..end`. Empty when `start == end`.
///
/// A tier's [`range`](crate::Tier::range) is the offsets it holds now: `start` is the
/// oldest retained offset and `end` is the offset the next append must carry.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OffsetRange {
    /// First offset in the range.
    pub start: Offset,
    /// One past the last offset in the range.
    pub end: Offset,
}

impl OffsetRange {
    /// A range `start..end`.
    ///
    /// # Panics
    /// If `start > end`; ranges are built from trusted values only.
    pub fn new(start: Offset, end: Offset) -> Self {
        assert!(start <= end, "OffsetRange start {start} > end {end}");
        Self { start, end }
    }

    /// The empty range positioned at `at`.
    pub fn empty_at(at: Offset) -> Self {
        Self { start: at, end: at }
    }

    /// Number of offsets in the range.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// True when the range holds no offset.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// True when `offset` lies in the range.
    pub fn contains(&self, offset: Offset) -> bool {
        self.start <= offset && offset < self.end
    }

    /// True when the two (non-empty) ranges share at least one offset; ranges that only
    /// touch (`a.end == b.start`) do not overlap.
    pub fn overlaps(&self, other: &OffsetRange) -> bool {
        self.start < other.end && other.start < self.end
    }
}

impl fmt::Debug for OffsetRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.start, self.end)
    }
}

impl fmt::Display for OffsetRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {})", self.start, self.end)
    }
}

/// `ranges` as text, one `<start> <end>` line each: the format of the files that keep a
/// topic's offset ranges beside its data (the router's `<topic>.unacked`, the WAL's
/// `unacked` marker), read back by [`parse_range_lines`].
pub fn format_range_lines(ranges: &[OffsetRange]) -> String {
    ranges.iter().map(|r| format!("{} {}\n", r.start, r.end)).collect()
}

/// The ranges of [`format_range_lines`]' text (blank lines ignored); `Err` says which line
/// is not two offsets, the second not below the first.
pub fn parse_range_lines(text: &str) -> Result<Vec<OffsetRange>, String> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let bad = |why: &str| format!("bad line {line:?}{why}");
        let [start, end] = words[..] else { return Err(bad(": not two offsets")) };
        let (Ok(start), Ok(end)) = (start.parse::<Offset>(), end.parse::<Offset>()) else {
            return Err(bad(": not two offsets"));
        };
        if end < start {
            return Err(bad(": the range ends before it starts"));
        }
        out.push(OffsetRange::new(start, end));
    }
    Ok(out)
}

/// Where a reader starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartPosition {
    /// The oldest offset any tier still holds.
    Earliest,
    /// The next offset to be written: only records appended after the reader opened.
    Latest,
    /// A given offset.
    Offset(Offset),
    /// The first offset whose running maximum timestamp is at or after the given time.
    Timestamp(Timestamp),
}

#[cfg(test)]
mod tests {
    use super::{OffsetRange, format_range_lines, parse_range_lines};

    #[test]
    fn half_open_ranges_overlap_only_when_they_share_an_offset() {
        let r = OffsetRange::new(10, 20);
        assert!(r.overlaps(&OffsetRange::new(19, 30)));
        assert!(r.overlaps(&OffsetRange::new(0, 11)));
        assert!(r.overlaps(&OffsetRange::new(12, 13)));
        assert!(!r.overlaps(&OffsetRange::new(20, 30)), "touching at the end");
        assert!(!r.overlaps(&OffsetRange::new(0, 10)), "touching at the start");
        assert!(!r.overlaps(&OffsetRange::new(30, 40)));
    }

    #[test]
    fn range_lines_round_trip_and_name_a_bad_line() {
        let ranges = vec![OffsetRange::new(10, 15), OffsetRange::new(20, 20)];
        let text = format_range_lines(&ranges);
        assert_eq!(text, "10 15\n20 20\n");
        assert_eq!(parse_range_lines(&format!("{text}\n")).unwrap(), ranges);
        assert_eq!(parse_range_lines("").unwrap(), vec![]);
        for bad in ["9 3", "9", "9 x", "1 2 3"] {
            let e = parse_range_lines(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }
}
