//! Optional time-based expiry: deleting whole segments from the front of a topic.

use futures::StreamExt;
use object_store::path::Path;
use tier_core::{Offset, OffsetRange, TierError, Timestamp, TopicName};

use crate::ColdTier;
use crate::error::{key_ctx, map_store_error};
use crate::layout::TimeBounds;
use crate::stats::Counters;

impl ColdTier {
    /// Deletes, oldest first, the segments of `topic` whose newest record is older than
    /// `cutoff_ms`, stopping at the first segment that is not. The last segment is never
    /// deleted, so the range's end never moves back (invariant 2). Returns the segment
    /// keys deleted and the range now held.
    ///
    /// Segments' newest timestamps come from their time markers when the listing has
    /// them (no request), else from their trailers. Each segment's marker is deleted
    /// *before* the segment, so a crash in between leaves a segment without a marker
    /// (which lookups handle by reading its trailer), never a marker without a segment;
    /// its successor pointer goes after it (a pointer to a missing segment is never
    /// followed: pointers are read only from a manifest's end, which expiry keeps).
    /// Gap markers (see [`record_gap`](Self::record_gap)) that fall below the first
    /// remaining segment are deleted after the segments (a crash in between leaves
    /// markers the listing ignores and the next expiry deletes).
    ///
    /// A failed DELETE may have taken effect (its answer lost to a timeout or a reset
    /// connection), so after one the cached manifest is dropped and the next use lists
    /// the topic again: it never keeps serving a segment that may be gone, nor drops one
    /// that may still be there.
    pub async fn expire_before(
        &self,
        topic: &TopicName,
        cutoff_ms: Timestamp,
    ) -> Result<(Vec<Path>, OffsetRange), TierError> {
        let state = self.topic_state(topic);
        let _guard = state.append_lock.lock().await;
        let listing = self.listing(topic).await?;
        let segments = listing.segments();
        let mut doomed = Vec::new();
        for segment in segments.iter().take(segments.len().saturating_sub(1)) {
            let bounds = match segment.bounds.get() {
                Some(bounds) => *bounds,
                None => {
                    let meta = self.meta(topic, segment).await?;
                    TimeBounds { min: meta.trailer().min_timestamp, max: meta.trailer().max_timestamp }
                }
            };
            if bounds.max >= cutoff_ms {
                break;
            }
            doomed.push((
                segment.key.clone(),
                self.layout.marker_key(topic, segment.range, bounds),
                self.layout.pointer_key(topic, segment.range.start),
            ));
        }
        // Redundant copies (another exporter's segmentation) of offsets below the first
        // segment kept go first: left behind, they would overlap nothing the listing keeps
        // and a later listing would try to tile them with what remains.
        let keep_from = segments.get(doomed.len()).map_or(Offset::MAX, |s| s.range.start);
        let mut dropped = Vec::new();
        for copy in listing.redundant_below(keep_from) {
            let marker = copy.bounds.get().map(|b| self.layout.marker_key(topic, copy.range, *b));
            for (what, object) in [
                ("deleting a redundant time marker", marker.as_ref()),
                ("deleting a redundant segment", Some(&copy.key)),
            ] {
                let Some(object) = object else { continue };
                if let Err(e) = self.delete_object(object).await {
                    *state.listing.lock() = None;
                    return Err(map_store_error(key_ctx(topic, object), what, e));
                }
            }
            self.metas.lock().remove(&copy.key);
            dropped.push(copy.key.clone());
        }
        let listing = std::sync::Arc::new(listing.without_redundant(&dropped));
        let mut deleted = Vec::new();
        // One at a time from the front: a failure leaves a contiguous suffix behind.
        for (key, marker, pointer) in &doomed {
            for (what, object) in [
                ("deleting an expired time marker", marker),
                ("deleting an expired segment", key),
                ("deleting an expired successor pointer", pointer),
            ] {
                if let Err(e) = self.delete_object(object).await {
                    *state.listing.lock() = None;
                    return Err(map_store_error(key_ctx(topic, object), what, e));
                }
            }
            self.metas.lock().remove(key);
            deleted.push(key.clone());
        }
        let remaining = listing.without_first(deleted.len(), &[]);
        let mut gone = Vec::new();
        for gap in remaining.stale_markers() {
            let pointer = self.layout.pointer_key(topic, gap.range.start);
            for (what, object) in [
                ("deleting an expired gap marker", &gap.key),
                ("deleting an expired successor pointer", &pointer),
            ] {
                if let Err(e) = self.delete_object(object).await {
                    *state.listing.lock() = None;
                    return Err(map_store_error(key_ctx(topic, object), what, e));
                }
            }
            gone.push(gap);
        }
        let remaining = std::sync::Arc::new(remaining.without_first(0, &gone));
        let range = remaining.range();
        *state.listing.lock() = Some(remaining);
        Ok((deleted, range))
    }

    /// Deletes `key`; an object already gone is success.
    async fn delete_object(&self, key: &Path) -> Result<(), object_store::Error> {
        let mut results = self.store.delete_stream(futures::stream::iter([Ok(key.clone())]).boxed());
        while let Some(result) = results.next().await {
            match result {
                Ok(_) => Counters::add(&self.counters.deletes, 1),
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// [`expire_before`](Self::expire_before) `now_ms - expiry` when the configuration
    /// sets `expiry`; does nothing (and returns `None`) when it does not.
    pub async fn expire(
        &self,
        topic: &TopicName,
        now_ms: Timestamp,
    ) -> Result<Option<(Vec<Path>, OffsetRange)>, TierError> {
        let Some(age) = self.config.expiry else {
            return Ok(None);
        };
        let age = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
        Ok(Some(self.expire_before(topic, now_ms.saturating_sub(age)).await?))
    }
}
