//! Successor pointers: `<prefix>/<topic>/<at:020>.next`, whose body is the file name of
//! the object continuing the log at `at` (see [`Layout::pointer_key`]).
//!
//! A listing is the manifest, but a LIST may lag writes: on stores whose listings are
//! eventually consistent (AWS S3 before December 2020, several S3-compatible stores
//! today), an object a PUT just created may be missing from a LIST while a GET or HEAD of
//! its key already finds it. A manifest built from such a listing ends early, and a
//! process that trusted it would see offsets it holds as missing — to be exported again
//! over, recorded lost, or handed out again. So each stored segment and recorded gap gets
//! a pointer from the offset it starts at, written after it with a conditional PUT, and
//! a manifest built from a listing is completed by following the pointers from its
//! continuation: one GET that finds nothing when the listing was complete.
//!
//! [`Layout::pointer_key`]: crate::Layout::pointer_key

use std::sync::Arc;

use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};
use tier_core::{Offset, TierError, TopicName};

use crate::ColdTier;
use crate::error::{key_ctx, map_store_error};
use crate::layout::{parse_file_name, parse_gap_name};
use crate::listing::{Listing, RecordedGap, SegmentObject};
use crate::stats::Counters;

/// Pointers followed at most per listing (each costs a GET and a HEAD).
const MAX_HOPS: usize = 10_000;

impl ColdTier {
    /// Writes the pointer from `at` to the object named `name` (a file name in the
    /// topic's folder). One conditional PUT; an existing pointer is success (it names an
    /// object continuing the log at `at` too: another writer's segmentation of the same
    /// offsets, or this one's from an earlier attempt).
    pub(crate) async fn put_pointer(
        &self,
        topic: &TopicName,
        at: Offset,
        name: &str,
    ) -> Result<(), TierError> {
        let key = self.layout.pointer_key(topic, at);
        let opts = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        Counters::add(&self.counters.pointer_puts, 1);
        match self.store.put_opts(&key, PutPayload::from(name.to_owned()), opts).await {
            Ok(_)
            | Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => Ok(()),
            Err(e) => Err(map_store_error(key_ctx(topic, &key), "writing a successor pointer", e)),
        }
    }

    /// Where the pointer to an object starting at `start` goes, given the manifest it
    /// is added to: `0` when the manifest holds no segment (the object may take over
    /// at any base: the pointer from 0 names the topic's first object), else `start`.
    pub(crate) fn pointer_from(listing: &Listing, start: Offset) -> Offset {
        if listing.segments().is_empty() { 0 } else { start }
    }

    /// `listing` completed with the objects a lagging LIST did not show: before its first
    /// segment, the chain of pointers from 0 (which names the topic's first object) when
    /// it reaches that segment — a LIST that shows a later object before an earlier one
    /// (each object's listing lags its own write) — between two listed segments, the
    /// chain from the earlier one's end when it reaches the later one, and after the last,
    /// the pointers from its continuation ([`follow_chain`](Self::follow_chain)).
    pub(crate) async fn follow_pointers(
        &self,
        topic: &TopicName,
        mut listing: Listing,
    ) -> Result<Listing, TierError> {
        if let Some(first) = listing.segments().first().map(|s| s.range.start)
            && first > 0
        {
            let head = self.follow_chain(topic, Listing::new(topic, Vec::new(), Vec::new())?, first).await?;
            // Only a chain that reaches the first listed segment: one that stops short
            // names objects an expiry deleted (their pointers stay) or never completed.
            if !head.segments().is_empty() && head.continuation() >= first {
                for segment in head.segments() {
                    listing = listing.with(topic, segment.clone())?;
                }
                for gap in head.recorded() {
                    listing = listing.with_gap(gap.clone());
                }
            }
        }
        // Between two listed segments: the chain from the end of the earlier one, when it
        // reaches the later one exactly (a segment whose own listing lags).
        for hole in listing.gaps() {
            let before = |end: Offset| end <= hole.start;
            let segments = listing.segments().iter().filter(|s| before(s.range.end)).cloned().collect();
            let gaps = listing.recorded().iter().filter(|g| before(g.range.end)).cloned().collect();
            let prefix = Listing::new(topic, segments, gaps)?;
            if prefix.continuation() != hole.start {
                continue;
            }
            let filled = self.follow_chain(topic, prefix, hole.end).await?;
            if filled.continuation() != hole.end {
                continue;
            }
            for segment in filled.segments().iter().filter(|s| s.range.start >= hole.start) {
                listing = listing.with(topic, segment.clone())?;
            }
            for gap in filled.recorded().iter().filter(|g| g.range.start >= hole.start) {
                listing = listing.with_gap(gap.clone());
            }
        }
        self.follow_chain(topic, listing, Offset::MAX).await
    }

    /// `listing` completed with the objects the pointers from its continuation name, up
    /// to `until`: segments (their size from a HEAD) and recorded gaps. Stops at the
    /// first pointer that is absent, unreadable as a name, names an object that does not
    /// continue the log there, or names a segment that is gone, and once the
    /// continuation reaches `until`.
    async fn follow_chain(
        &self,
        topic: &TopicName,
        mut listing: Listing,
        until: Offset,
    ) -> Result<Listing, TierError> {
        for _ in 0..MAX_HOPS {
            if listing.continuation() >= until {
                break;
            }
            let at = listing.continuation();
            let first = listing.segments().is_empty();
            let key = self.layout.pointer_key(topic, at);
            Counters::add(&self.counters.pointer_gets, 1);
            let body = match self.store.get(&key).await {
                Ok(result) => result.bytes().await,
                Err(e) => Err(e),
            };
            let body = match body {
                Ok(body) => body,
                Err(object_store::Error::NotFound { .. }) => break,
                Err(e) => {
                    return Err(map_store_error(key_ctx(topic, &key), "reading a successor pointer", e));
                }
            };
            let Ok(name) = std::str::from_utf8(&body) else { break };
            if let Some(range) = parse_file_name(name) {
                if range.start != at && !(first && range.start > at) {
                    break;
                }
                let segment = self.layout.segment_key(topic, range);
                Counters::add(&self.counters.head_requests, 1);
                let size = match self.store.head(&segment).await {
                    Ok(meta) => meta.size,
                    Err(object_store::Error::NotFound { .. }) => break,
                    Err(e) => {
                        return Err(map_store_error(
                            key_ctx(topic, &segment),
                            "checking a pointed-to segment",
                            e,
                        ));
                    }
                };
                listing = listing.with(topic, Arc::new(SegmentObject::new(segment, range, size)))?;
            } else if let Some(range) = parse_gap_name(name) {
                if first || range.start != at {
                    break;
                }
                listing = listing.with_gap(RecordedGap { range, key: self.layout.gap_key(topic, range) });
            } else {
                break;
            }
            if listing.continuation() <= at {
                break;
            }
        }
        Ok(listing)
    }
}
