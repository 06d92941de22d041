//! Bounded reads and timestamp lookups across a topic's segments.

use tier_core::segment::{BatchCollector, BatchSink};
use tier_core::{Offset, RecordBatch, TierError, Timestamp, TopicName};

use crate::ColdTier;
use crate::error::topic_ctx;
use crate::gap::{gap_error, recorded_gap_error};

impl ColdTier {
    /// `Tier::read_batches`: walks the segments from the one holding `from`, one ranged
    /// request per index interval read (plus one tail request per segment whose metadata
    /// is not cached). A gap in the manifest (missing objects, or a recorded gap) ends the
    /// read there, or is `NotFound` naming the missing or lost offsets when nothing was
    /// read before it.
    pub(crate) async fn read_stored_batches(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, TierError> {
        let listing = self.listing(topic).await?;
        let held = listing.range();
        if let Some(gap) = listing.recorded_gap_at(from) {
            return Err(recorded_gap_error(topic, from, gap));
        }
        if from < held.start || from > held.end {
            return Err(TierError::trimmed(topic_ctx(topic).offset(from), from, held));
        }
        let mut collector = BatchCollector::new(from, to.min(held.end), max_bytes);
        while !collector.is_full() {
            let next = collector.next_offset();
            let i = match listing.find(next) {
                Ok(i) => i,
                Err(_) if next > from => break,
                Err(after) => return Err(gap_error(topic, &listing, next, after)),
            };
            let segment = &listing.segments()[i];
            self.open_segment(topic, segment).await?.read_into(&mut collector).await?;
            if collector.next_offset() < segment.range.end {
                // The segment stopped early: a limit was reached.
                break;
            }
        }
        Ok(collector.into_batches())
    }

    /// `Tier::offset_for_timestamp`: the answer lies in the first segment whose newest
    /// timestamp reaches `t` (every earlier record is below `t`). Recorded gaps are
    /// crossed (their records are lost, so they cannot hold the answer); a hole of
    /// missing objects is `NotFound`. Segment maxima come
    /// from the time markers in the listing (no request); a segment without one falls
    /// back to its trailer (one tail request, remembered in the manifest). Then the
    /// answering segment's index gives the interval to read: a lookup costs at most two
    /// requests when that segment's metadata is not cached, one when it is, and the
    /// interval stays in the data cache for the `read` that follows.
    pub(crate) async fn lookup_timestamp(
        &self,
        topic: &TopicName,
        t: Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        let listing = self.listing(topic).await?;
        let mut expected: Option<Offset> = None;
        for (i, segment) in listing.segments().iter().enumerate() {
            if let Some(mut want) = expected {
                while let Some(gap) = listing.recorded_gap_at(want) {
                    want = gap.range.end;
                }
                if want != segment.range.start {
                    return Err(gap_error(topic, &listing, want, i));
                }
            }
            expected = Some(segment.range.end);
            let max = match segment.bounds.get() {
                Some(bounds) => bounds.max,
                None => self.meta(topic, segment).await?.trailer().max_timestamp,
            };
            if max >= t {
                let ranged = self.open_segment(topic, segment).await?;
                return ranged.offset_for_timestamp(t).await;
            }
        }
        Ok(None)
    }
}
