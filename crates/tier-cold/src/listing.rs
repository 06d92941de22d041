//! The in-memory manifest of a topic: its segment objects sorted by offset, built from a
//! (paginated) listing of `<prefix>/<topic>/` and extended after each export. Time markers
//! in the listing give segments their time bounds without a request.

use std::sync::{Arc, OnceLock};

use object_store::path::Path;
use tier_core::{Offset, OffsetRange, TierError, TopicName};

use crate::error::key_ctx;
use crate::layout::TimeBounds;

/// One segment object as the listing knows it.
#[derive(Debug)]
pub(crate) struct SegmentObject {
    /// Its key.
    pub(crate) key: Path,
    /// The offsets its name says it holds.
    pub(crate) range: OffsetRange,
    /// Its size in bytes.
    pub(crate) size: u64,
    /// The record timestamps' bounds, from the segment's time marker in the listing, its
    /// export, or once its trailer has been read.
    pub(crate) bounds: OnceLock<TimeBounds>,
    /// Whether its time marker is known to exist (listed, or written by this tier).
    pub(crate) marked: bool,
}

impl SegmentObject {
    /// A segment whose time bounds are not known yet.
    pub(crate) fn new(key: Path, range: OffsetRange, size: u64) -> Self {
        Self { key, range, size, bounds: OnceLock::new(), marked: false }
    }

    /// A segment whose time marker is known to exist with `bounds` (`None`: no marker
    /// known, bounds not known yet).
    pub(crate) fn with_bounds(key: Path, range: OffsetRange, size: u64, bounds: Option<TimeBounds>) -> Self {
        let mut segment = Self::new(key, range, size);
        if let Some(bounds) = bounds {
            let _ = segment.bounds.set(bounds);
            segment.marked = true;
        }
        segment
    }
}

/// A topic's segments, sorted by base offset, without overlaps (gaps are allowed and
/// reported by [`gaps`](Self::gaps)).
#[derive(Debug, Default)]
pub(crate) struct Listing {
    segments: Vec<Arc<SegmentObject>>,
}

impl Listing {
    /// Sorts `segments` and checks that no two overlap (an overlap means two writers
    /// exported different segmentations of the same offsets: `Corruption` naming both).
    pub(crate) fn new(topic: &TopicName, mut segments: Vec<Arc<SegmentObject>>) -> Result<Self, TierError> {
        segments.sort_by_key(|s| s.range.start);
        for pair in segments.windows(2) {
            if pair[1].range.start < pair[0].range.end {
                return Err(TierError::corruption(
                    key_ctx(topic, &pair[1].key),
                    format!(
                        "segment objects overlap: {} holds {:?}, {} holds {:?}",
                        pair[0].key, pair[0].range, pair[1].key, pair[1].range
                    ),
                ));
            }
        }
        Ok(Self { segments })
    }

    /// The segments in offset order.
    pub(crate) fn segments(&self) -> &[Arc<SegmentObject>] {
        &self.segments
    }

    /// From the first segment's base to the last segment's end (`0..0` when empty).
    pub(crate) fn range(&self) -> OffsetRange {
        match (self.segments.first(), self.segments.last()) {
            (Some(first), Some(last)) => OffsetRange::new(first.range.start, last.range.end),
            _ => OffsetRange::empty_at(0),
        }
    }

    /// Offsets inside [`range`](Self::range) that no object holds.
    pub(crate) fn gaps(&self) -> Vec<OffsetRange> {
        self.segments
            .windows(2)
            .filter(|p| p[0].range.end < p[1].range.start)
            .map(|p| OffsetRange::new(p[0].range.end, p[1].range.start))
            .collect()
    }

    /// Position of the segment holding `offset` (binary search), or `Err` with the
    /// position of the first segment after it (`len` past the end).
    pub(crate) fn find(&self, offset: Offset) -> Result<usize, usize> {
        let after = self.segments.partition_point(|s| s.range.start <= offset);
        match after.checked_sub(1) {
            Some(i) if self.segments[i].range.contains(offset) => Ok(i),
            _ => Err(after),
        }
    }

    /// The listing with `segment` added (it must not overlap).
    pub(crate) fn with(&self, topic: &TopicName, segment: Arc<SegmentObject>) -> Result<Self, TierError> {
        let mut segments = self.segments.clone();
        segments.push(segment);
        Self::new(topic, segments)
    }

    /// The listing with the segment of the same key replaced by `segment`.
    pub(crate) fn replacing(&self, segment: Arc<SegmentObject>) -> Self {
        let segments = self
            .segments
            .iter()
            .map(|s| if s.key == segment.key { segment.clone() } else { s.clone() })
            .collect();
        Self { segments }
    }

    /// The listing without the first `n` segments.
    pub(crate) fn without_first(&self, n: usize) -> Self {
        Self { segments: self.segments[n.min(self.segments.len())..].to_vec() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(start: u64, end: u64) -> Arc<SegmentObject> {
        Arc::new(SegmentObject::new(Path::from(format!("t/{start}")), OffsetRange::new(start, end), 1))
    }

    #[test]
    fn finds_segments_and_reports_gaps() {
        let topic = TopicName::new("t").expect("valid");
        let l = Listing::new(&topic, vec![seg(20, 30), seg(0, 10), seg(10, 20), seg(40, 50)])
            .expect("no overlap");
        assert_eq!(l.range(), OffsetRange::new(0, 50));
        assert_eq!(l.gaps(), vec![OffsetRange::new(30, 40)]);
        assert_eq!(l.find(0), Ok(0));
        assert_eq!(l.find(19), Ok(1));
        assert_eq!(l.find(29), Ok(2));
        assert_eq!(l.find(35), Err(3));
        assert_eq!(l.find(49), Ok(3));
        assert_eq!(l.find(50), Err(4));
        let err = Listing::new(&topic, vec![seg(0, 10), seg(5, 15)]).expect_err("overlap");
        assert!(err.to_string().contains("overlap"), "{err}");
    }
}
