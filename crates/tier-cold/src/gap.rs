//! Recorded gaps: offsets declared lost upstream (the WAL lost acknowledged records and
//! the log continued after them), written as zero-byte gap markers so that the segment
//! after them may be stored and reads name the lost range instead of a missing object.

use object_store::{PutMode, PutOptions, PutPayload};
use tier_core::{Offset, OffsetRange, TierError, TopicName};

use crate::ColdTier;
use crate::error::{key_ctx, map_store_error, topic_ctx};
use crate::listing::{Listing, RecordedGap};
use crate::stats::Counters;

/// The error of a read starting at `from` inside the recorded gap `gap`: `NotFound`
/// naming the lost range and its marker (the wording of the WAL's gap error, which the
/// router's stitched reader passes on as "held by no tier").
pub(crate) fn recorded_gap_error(topic: &TopicName, from: Offset, gap: &RecordedGap) -> TierError {
    TierError::not_found(
        key_ctx(topic, &gap.key).offset(from),
        format!(
            "offsets {}..{} of topic {topic} were lost (recorded lost in cold storage by {})",
            gap.range.start, gap.range.end, gap.key
        ),
    )
}

/// The error for `offset`, which no segment holds: the recorded gap holding it, or else
/// the missing offsets up to the segment at position `next` of the listing.
pub(crate) fn gap_error(topic: &TopicName, listing: &Listing, offset: Offset, next: usize) -> TierError {
    if let Some(gap) = listing.recorded_gap_at(offset) {
        return recorded_gap_error(topic, offset, gap);
    }
    let end = listing.segments().get(next).map_or(listing.range().end, |s| s.range.start);
    let end =
        listing.recorded().iter().find(|g| g.range.start > offset).map_or(end, |g| g.range.start.min(end));
    TierError::not_found(
        topic_ctx(topic).offset(offset),
        format!(
            "offsets {} are missing from cold storage: no segment object holds them",
            OffsetRange::new(offset, end.max(offset))
        ),
    )
}

impl ColdTier {
    /// Records offsets `range` of `topic` as lost: writes the zero-byte gap marker
    /// `<prefix>/<topic>/<from:020>-<to:020>.gap` (see [`Layout`](crate::Layout)) with a
    /// conditional PUT (an existing marker is success: idempotent), then the successor
    /// pointer from `range.start` to it (see
    /// [`Layout::pointer_key`](crate::Layout::pointer_key)). Afterwards the segment
    /// starting at `range.end` continues the log ([`export_segment`]
    /// accepts it), [`range`](tier_core::Tier::range) stays from the first segment to
    /// the last one's end (so it includes the gap once a segment follows it), and a read
    /// starting inside the gap is `NotFound` naming the lost range and the marker; a
    /// read starting before it stops before it.
    ///
    /// The gap must start where held offsets end: at the end of a segment or of another
    /// recorded gap (normally cold's end, or inside the recorded gaps that follow it), and
    /// must not overlap a segment; otherwise `InvalidInput`. Offsets at the start of
    /// `range` already recorded lost are skipped: only the rest gets a marker, starting
    /// where those recorded gaps end. So a second loss reported from cold's end — `[20,
    /// 1049)` when `[20, 30)` is already recorded after the last segment ending at 20 —
    /// records `[30, 1049)`. A range wholly recorded already is `Ok` (idempotent) when it
    /// ends where a recorded gap ends; ending inside one is `InvalidInput` (no segment
    /// could start there). When the topic holds no segment nothing is written (the next
    /// segment takes over at its base, invariant 3).
    ///
    /// [`export_segment`]: Self::export_segment
    pub async fn record_gap(&self, topic: &TopicName, range: OffsetRange) -> Result<(), TierError> {
        let ctx = topic_ctx(topic).offset(range.start);
        if range.is_empty() {
            return Err(TierError::invalid(ctx, format!("the gap {range} is empty")));
        }
        let state = self.topic_state(topic);
        let _guard = state.append_lock.lock().await;
        let listing = self.listing(topic).await?;
        if listing.segments().is_empty() {
            return Ok(());
        }
        // Skip the offsets at the start of `range` that are already recorded lost.
        let mut from = range.start;
        while from < range.end
            && let Some(g) = listing.recorded_gap_at(from)
        {
            from = g.range.end;
        }
        if from >= range.end {
            if from == range.end {
                return Ok(());
            }
            return Err(TierError::invalid(
                ctx,
                format!(
                    "the gap {range} ends inside offsets recorded lost up to {from}: the log continues at \
                     {from}, not at {}",
                    range.end
                ),
            ));
        }
        let skipped = from > range.start;
        let range = OffsetRange::new(from, range.end);
        if let Some(s) = listing.segments().iter().find(|s| s.range.overlaps(&range)) {
            return Err(TierError::invalid(
                ctx,
                format!("the gap {range} overlaps offsets {} held by {}", s.range, s.key),
            ));
        }
        if let Some(g) = listing.recorded().iter().find(|g| g.range.overlaps(&range)) {
            return Err(TierError::invalid(
                ctx,
                format!("the gap {range} overlaps the recorded gap {} ({})", g.range, g.key),
            ));
        }
        let adjacent = skipped
            || listing.segments().iter().any(|s| s.range.end == range.start)
            || listing.recorded().iter().any(|g| g.range.end == range.start);
        if !adjacent {
            return Err(TierError::invalid(
                ctx,
                format!(
                    "the gap {range} does not start where held offsets end (cold holds {}, the next \
                     segment must start at {})",
                    listing.range(),
                    listing.continuation()
                ),
            ));
        }
        let key = self.layout.gap_key(topic, range);
        let opts = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        Counters::add(&self.counters.gap_marker_puts, 1);
        match self.store.put_opts(&key, PutPayload::new(), opts).await {
            Ok(_)
            | Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => {}
            Err(e) => return Err(map_store_error(key_ctx(topic, &key), "writing a gap marker", e)),
        }
        self.put_pointer(topic, range.start, &crate::layout::gap_file_name(range)).await?;
        self.note_gap(topic, RecordedGap { range, key });
        Ok(())
    }

    /// Where the next segment of `topic` must start: the last segment's end, moved past
    /// the recorded gaps that follow it (0 when the topic holds nothing). Unlike
    /// [`range`](tier_core::Tier::range), which ends at the last segment, it counts a
    /// trailing gap: after one, the log continues beyond it.
    pub async fn continuation(&self, topic: &TopicName) -> Result<Offset, TierError> {
        Ok(self.listing(topic).await?.continuation())
    }

    /// The recorded gaps of `topic` (from the cached manifest), in offset order.
    pub async fn recorded_gaps(&self, topic: &TopicName) -> Result<Vec<OffsetRange>, TierError> {
        Ok(self.listing(topic).await?.recorded().iter().map(|g| g.range).collect())
    }
}
