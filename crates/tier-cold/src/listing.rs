//! The in-memory manifest of a topic: its segment objects sorted by offset, built from a
//! (paginated) listing of `<prefix>/<topic>/` and extended after each export. Time markers
//! in the listing give segments their time bounds without a request, and gap markers
//! say which missing offsets were declared lost (recorded gaps).

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

/// Offsets declared lost, and the gap marker recording them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RecordedGap {
    /// The lost offsets.
    pub(crate) range: OffsetRange,
    /// The zero-byte marker object.
    pub(crate) key: Path,
}

/// A topic's segments, sorted by base offset, without overlaps, and its recorded gaps
/// (holes are allowed: those not covered by a recorded gap are reported by
/// [`gaps`](Self::gaps)).
#[derive(Debug, Default)]
pub(crate) struct Listing {
    segments: Vec<Arc<SegmentObject>>,
    /// Every gap marker listed or written, sorted.
    markers: Vec<RecordedGap>,
    /// The markers that count: at or after the first segment, overlapping no segment
    /// nor each other, sorted.
    recorded: Vec<RecordedGap>,
    /// Objects holding only offsets the kept segments hold (another exporter's
    /// segmentation of them; see [`resolve_overlaps`]): ignored, deleted by expiry.
    redundant: Vec<Arc<SegmentObject>>,
}

impl Listing {
    /// Sorts `segments` and resolves overlaps (see [`resolve_overlaps`]): where two
    /// writers exported different segmentations of the same offsets, one chain of objects
    /// that tiles them is kept and the objects it covers are ignored as redundant copies;
    /// overlapping objects that no chain tiles are `Corruption` naming two of them.
    /// Gap markers below the first segment (left by an interrupted expiry), overlapping
    /// a segment (those offsets are held after all) or overlapping an earlier marker are
    /// ignored.
    pub(crate) fn new(
        topic: &TopicName,
        segments: Vec<Arc<SegmentObject>>,
        markers: Vec<RecordedGap>,
    ) -> Result<Self, TierError> {
        let (segments, redundant) = resolve_overlaps(topic, segments)?;
        Ok(Self { redundant, ..Self::build(segments, markers) })
    }

    /// The listing of sorted, non-overlapping `segments` and the gap `markers`.
    fn build(segments: Vec<Arc<SegmentObject>>, mut markers: Vec<RecordedGap>) -> Self {
        markers.sort_by_key(|g| (g.range.start, g.range.end));
        markers.dedup();
        let first = segments.first().map(|s| s.range.start);
        let mut recorded: Vec<RecordedGap> = Vec::with_capacity(markers.len());
        for gap in &markers {
            let below_first = first.is_none_or(|f| gap.range.start < f);
            let overlaps_segment = segments.iter().any(|s| s.range.overlaps(&gap.range));
            let overlaps_gap = recorded.last().is_some_and(|g| gap.range.start < g.range.end);
            if !below_first && !overlaps_segment && !overlaps_gap {
                recorded.push(gap.clone());
            }
        }
        Self { segments, markers, recorded, redundant: Vec::new() }
    }

    /// Gap markers wholly below the first segment (or every marker when no segment is
    /// left): leftovers of an interrupted expiry, which the next expiry deletes.
    pub(crate) fn stale_markers(&self) -> Vec<RecordedGap> {
        let first = self.segments.first().map(|s| s.range.start);
        self.markers.iter().filter(|g| first.is_none_or(|f| g.range.end <= f)).cloned().collect()
    }

    /// The recorded gaps in offset order.
    pub(crate) fn recorded(&self) -> &[RecordedGap] {
        &self.recorded
    }

    /// The recorded gap holding `offset`, if any.
    pub(crate) fn recorded_gap_at(&self, offset: Offset) -> Option<&RecordedGap> {
        let i = self.recorded.partition_point(|g| g.range.end <= offset);
        self.recorded.get(i).filter(|g| g.range.contains(offset))
    }

    /// Where the next segment must start to continue the log: the last segment's end,
    /// moved past the recorded gaps that start there (`0` when empty).
    pub(crate) fn continuation(&self) -> Offset {
        let mut end = self.range().end;
        while let Some(gap) = self.recorded.iter().find(|g| g.range.start == end) {
            end = gap.range.end;
        }
        end
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

    /// Offsets inside [`range`](Self::range) that no object holds and no recorded gap
    /// covers (missing objects, never declared lost).
    pub(crate) fn gaps(&self) -> Vec<OffsetRange> {
        let mut out = Vec::new();
        for pair in self.segments.windows(2) {
            let (mut at, end) = (pair[0].range.end, pair[1].range.start);
            let inside = |g: &&RecordedGap| pair[0].range.end <= g.range.start && g.range.end <= end;
            for gap in self.recorded.iter().filter(inside) {
                if at < gap.range.start {
                    out.push(OffsetRange::new(at, gap.range.start));
                }
                at = gap.range.end;
            }
            if at < end {
                out.push(OffsetRange::new(at, end));
            }
        }
        out
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
        segments.extend(self.redundant.iter().cloned());
        segments.push(segment);
        Self::new(topic, segments, self.markers.clone())
    }

    /// The listing with the recorded gap `gap` added (ignored when it overlaps a
    /// segment or a recorded gap, as in [`new`](Self::new)).
    pub(crate) fn with_gap(&self, gap: RecordedGap) -> Self {
        let mut markers = self.markers.clone();
        markers.push(gap);
        Self { redundant: self.redundant.clone(), ..Self::build(self.segments.clone(), markers) }
    }

    /// The listing with the segment of the same key replaced by `segment`.
    pub(crate) fn replacing(&self, segment: Arc<SegmentObject>) -> Self {
        let segments = self
            .segments
            .iter()
            .map(|s| if s.key == segment.key { segment.clone() } else { s.clone() })
            .collect();
        Self { redundant: self.redundant.clone(), ..Self::build(segments, self.markers.clone()) }
    }

    /// The listing without the first `n` segments (the gap markers below the first
    /// remaining one become stale) and without the gap markers in `deleted`.
    pub(crate) fn without_first(&self, n: usize, deleted: &[RecordedGap]) -> Self {
        let segments = self.segments[n.min(self.segments.len())..].to_vec();
        let markers = self.markers.iter().filter(|g| !deleted.contains(g)).cloned().collect();
        Self { redundant: self.redundant.clone(), ..Self::build(segments, markers) }
    }

    /// The redundant objects (see [`resolve_overlaps`]) starting below `offset`.
    pub(crate) fn redundant_below(&self, offset: Offset) -> Vec<Arc<SegmentObject>> {
        self.redundant.iter().filter(|s| s.range.start < offset).cloned().collect()
    }

    /// The listing without the redundant objects of keys `deleted`.
    pub(crate) fn without_redundant(&self, deleted: &[Path]) -> Self {
        let redundant = self.redundant.iter().filter(|s| !deleted.contains(&s.key)).cloned().collect();
        Self {
            segments: self.segments.clone(),
            markers: self.markers.clone(),
            recorded: self.recorded.clone(),
            redundant,
        }
    }
}

/// Sorts `segments` by offset and drops redundant copies: objects are grouped into runs
/// of mutually overlapping ones (two exporters of one topic, e.g. the old and the new owner
/// after an ownership move, whose WAL copies rotated at different points), and each run is
/// replaced by the chain of objects, each starting where the previous one ends, that tiles
/// it from its first offset to its last with the fewest objects (ties: the first found in
/// `(start, end, key)` order, so every reader picks the same chain). The others hold only
/// offsets the chain holds — the same records, since only committed offsets are exported
/// and offsets are never reused — and are ignored. A run no chain tiles (an object ending
/// inside another's offsets with nothing continuing it) is `Corruption` naming two
/// overlapping objects.
type Segments = Vec<Arc<SegmentObject>>;

/// Returns the kept segments and the redundant ones.
fn resolve_overlaps(
    topic: &TopicName,
    mut segments: Vec<Arc<SegmentObject>>,
) -> Result<(Segments, Segments), TierError> {
    segments.sort_by(|a, b| (a.range.start, a.range.end, &a.key).cmp(&(b.range.start, b.range.end, &b.key)));
    let mut kept = Vec::with_capacity(segments.len());
    let mut redundant = Vec::new();
    let mut i = 0;
    while i < segments.len() {
        // The run of objects overlapping one another, starting at `i`.
        let mut run_end = segments[i].range.end;
        let mut j = i + 1;
        while j < segments.len() && segments[j].range.start < run_end {
            run_end = run_end.max(segments[j].range.end);
            j += 1;
        }
        let run = &segments[i..j];
        if run.len() == 1 {
            kept.push(run[0].clone());
        } else {
            let chain = tile(run, run_end).ok_or_else(|| overlap_error(topic, run))?;
            redundant.extend(run.iter().filter(|s| !chain.iter().any(|c| Arc::ptr_eq(c, s))).cloned());
            kept.extend(chain);
        }
        i = j;
    }
    Ok((kept, redundant))
}

/// The chain of `run` (sorted by start) from its first offset to `end` with the fewest
/// objects, if one exists.
fn tile(run: &[Arc<SegmentObject>], end: Offset) -> Option<Vec<Arc<SegmentObject>>> {
    // For each offset a chain reaches: the fewest objects reaching it, and the last one.
    let mut best: std::collections::BTreeMap<Offset, (usize, Option<usize>)> =
        std::collections::BTreeMap::new();
    best.insert(run[0].range.start, (0, None));
    // Sorted by start: every chain reaching an object's start is known when it is reached.
    for (i, s) in run.iter().enumerate() {
        let Some(&(n, _)) = best.get(&s.range.start) else { continue };
        let candidate = (n + 1, Some(i));
        best.entry(s.range.end)
            .and_modify(|b| {
                if candidate.0 < b.0 {
                    *b = candidate
                }
            })
            .or_insert(candidate);
    }
    let mut chain = Vec::new();
    let mut at = end;
    while let Some(&(_, Some(i))) = best.get(&at) {
        chain.push(run[i].clone());
        at = run[i].range.start;
    }
    (at == run[0].range.start && !chain.is_empty()).then(|| {
        chain.reverse();
        chain
    })
}

fn overlap_error(topic: &TopicName, run: &[Arc<SegmentObject>]) -> TierError {
    let (a, b) = run
        .windows(2)
        .find(|p| p[1].range.start < p[0].range.end)
        .map_or((&run[0], &run[run.len() - 1]), |p| (&p[0], &p[1]));
    TierError::corruption(
        key_ctx(topic, &b.key),
        format!(
            "segment objects overlap and no chain of objects tiles their offsets: {} holds {:?}, {} holds {:?}",
            a.key, a.range, b.key, b.range
        ),
    )
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
        let l = Listing::new(&topic, vec![seg(20, 30), seg(0, 10), seg(10, 20), seg(40, 50)], vec![])
            .expect("no overlap");
        assert_eq!(l.range(), OffsetRange::new(0, 50));
        assert_eq!(l.gaps(), vec![OffsetRange::new(30, 40)]);
        assert_eq!(l.find(0), Ok(0));
        assert_eq!(l.find(19), Ok(1));
        assert_eq!(l.find(29), Ok(2));
        assert_eq!(l.find(35), Err(3));
        assert_eq!(l.find(49), Ok(3));
        assert_eq!(l.find(50), Err(4));
        let err = Listing::new(&topic, vec![seg(0, 10), seg(5, 15)], vec![]).expect_err("overlap");
        assert!(err.to_string().contains("overlap"), "{err}");
    }

    fn keyed(start: u64, end: u64, owner: &str) -> Arc<SegmentObject> {
        Arc::new(SegmentObject::new(
            Path::from(format!("t/{owner}/{start}")),
            OffsetRange::new(start, end),
            1,
        ))
    }

    #[test]
    fn overlapping_segmentations_keep_one_tiling_chain() {
        let topic = TopicName::new("t").expect("valid");
        let ranges =
            |l: &Listing| l.segments().iter().map(|s| (s.range.start, s.range.end)).collect::<Vec<_>>();
        // Old owner [0,100) [100,200) [200,300); new owner [0,150) [150,250); then a hole.
        let l = Listing::new(
            &topic,
            vec![
                keyed(150, 250, "b"),
                keyed(0, 100, "a"),
                keyed(200, 300, "a"),
                keyed(0, 150, "b"),
                keyed(100, 200, "a"),
                keyed(400, 500, "a"),
            ],
            vec![],
        )
        .expect("a chain tiles the overlapping objects");
        assert_eq!(ranges(&l), vec![(0, 100), (100, 200), (200, 300), (400, 500)]);
        assert_eq!(l.gaps(), vec![OffsetRange::new(300, 400)]);
        // The fewest objects win; the same chain whatever the input order.
        let l = Listing::new(
            &topic,
            vec![keyed(0, 150, "b"), keyed(100, 200, "a"), keyed(0, 100, "a"), keyed(150, 200, "b")],
            vec![],
        )
        .expect("tiles");
        assert_eq!(ranges(&l), vec![(0, 100), (100, 200)]);
        let l = Listing::new(
            &topic,
            vec![keyed(100, 200, "a"), keyed(150, 200, "b"), keyed(0, 100, "a"), keyed(0, 150, "b")],
            vec![],
        )
        .expect("tiles");
        assert_eq!(ranges(&l), vec![(0, 100), (100, 200)]);
        // An object contained in another is redundant.
        let l = Listing::new(&topic, vec![keyed(0, 100, "a"), keyed(20, 40, "b")], vec![]).expect("tiles");
        assert_eq!(ranges(&l), vec![(0, 100)]);
    }

    fn gap(start: u64, end: u64) -> RecordedGap {
        RecordedGap { range: OffsetRange::new(start, end), key: Path::from(format!("t/{start}.gap")) }
    }

    #[test]
    fn recorded_gaps_cover_holes_and_extend_the_continuation() {
        let topic = TopicName::new("t").expect("valid");
        let l = Listing::new(
            &topic,
            vec![seg(10, 20), seg(30, 40), seg(50, 60)],
            // Below the first segment, overlapping a segment, overlapping another gap:
            // all ignored.
            vec![gap(25, 30), gap(0, 10), gap(15, 22), gap(20, 24), gap(22, 26), gap(60, 65), gap(65, 70)],
        )
        .expect("no overlap");
        let kept: Vec<_> = l.recorded().iter().map(|g| g.range).collect();
        assert_eq!(
            kept,
            vec![
                OffsetRange::new(20, 24),
                OffsetRange::new(25, 30),
                OffsetRange::new(60, 65),
                OffsetRange::new(65, 70)
            ]
        );
        assert_eq!(l.range(), OffsetRange::new(10, 60), "a trailing gap does not extend the range");
        assert_eq!(l.continuation(), 70, "the next segment continues after the chained gaps");
        assert_eq!(l.gaps(), vec![OffsetRange::new(24, 25), OffsetRange::new(40, 50)], "unrecorded holes");
        assert_eq!(l.recorded_gap_at(27).map(|g| g.range), Some(OffsetRange::new(25, 30)));
        assert_eq!(l.recorded_gap_at(24), None);
        assert_eq!(l.recorded_gap_at(30), None);
        let stale: Vec<_> = l.stale_markers().iter().map(|g| g.range).collect();
        assert_eq!(stale, vec![OffsetRange::new(0, 10)]);
        let trimmed = l.without_first(2, &[]);
        let kept: Vec<_> = trimmed.recorded().iter().map(|g| g.range).collect();
        assert_eq!(kept, vec![OffsetRange::new(60, 65), OffsetRange::new(65, 70)]);
        let stale: Vec<_> = trimmed.stale_markers().iter().map(|g| g.range).collect();
        assert_eq!(stale.len(), 5, "every marker below 50: {stale:?}");
        let cleaned = trimmed.without_first(0, &trimmed.stale_markers());
        assert!(cleaned.stale_markers().is_empty());
        assert_eq!(cleaned.recorded().len(), 2);
        assert_eq!(Listing::default().continuation(), 0);
    }
}
