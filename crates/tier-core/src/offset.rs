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
    use super::OffsetRange;

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
}
