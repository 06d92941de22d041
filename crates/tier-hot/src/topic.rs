//! A topic's state shared between its writer task, readers, subscribers and retention.
//!
//! The writer owns the active segment's file for writing; everyone else sees the topic
//! through [`TopicState`], which the writer updates at each *commit* (after the append's
//! durability step) under a short write lock. Readers take the read lock only to copy
//! what they need (segment handles, index positions, cached batches) and do their I/O
//! after releasing it.

use std::{
    fs::File,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
};

use parking_lot::{Mutex, RwLock};
use tier_core::{Offset, OffsetRange, RecordBatch, TierError, TopicName, segment::IndexEntry};
use tokio::sync::{broadcast, watch};

use crate::cache::BatchCache;
use crate::segment::{ActiveSegment, SealedFile, SegmentEvent};

/// Everything about one topic that is not private to its writer.
#[derive(Debug)]
pub(crate) struct TopicShared {
    pub(crate) name: TopicName,
    pub(crate) dir: PathBuf,
    pub(crate) state: RwLock<TopicState>,
    /// Committed batches, in order, for live-tail subscribers.
    pub(crate) tail: broadcast::Sender<RecordBatch>,
    /// Becomes true when the tier is closed, waking subscribers that wait for a batch
    /// (the broadcast never closes by itself: subscriptions hold this struct).
    pub(crate) closed: watch::Sender<bool>,
    /// Serialises retention runs on this topic.
    pub(crate) retention: Mutex<()>,
    /// Counters of the writer's work.
    pub(crate) stats: StatCounters,
    /// Appends sent to the writer task and not yet handled by it; direct appends
    /// (`writer::direct`) wait for this to be 0 so they never overtake a queued one.
    pub(crate) queued_appends: AtomicUsize,
    /// Set (with the reason in `seal_failure`) when a background seal failed: the
    /// writer then counts as poisoned.
    pub(crate) seal_failed: AtomicBool,
    pub(crate) seal_failure: Mutex<Option<Arc<TierError>>>,
    /// The offsets the writer wrote to the active segment but could not fsync when it
    /// failed (`fsync = always`): never acknowledged and cut off the file, yet a crash
    /// before the cut is durable may leave those whose pages reached the disk (see
    /// [`HotTier::unsynced`](crate::HotTier::unsynced)).
    pub(crate) unsynced: Mutex<Option<OffsetRange>>,
    /// The sealed batches the last disk read stopped at, verified: the read continuing
    /// there takes them without reading and checking them again (`read::collect_sealed`).
    /// Retention drops them with their segment.
    pub(crate) parked: Mutex<Option<ParkedBatch>>,
}

/// The verified batches of a sealed segment that a read stopped at: the one it stopped
/// inside or before, and the one before that (which a record read built over batch reads
/// may have taken only part of). Contiguous, in offset order.
#[derive(Debug)]
pub(crate) struct ParkedBatch {
    /// The segment holding them: they are used only while a read's plan names this very
    /// segment.
    pub(crate) segment: Arc<SealedFile>,
    pub(crate) batches: Vec<RecordBatch>,
}

/// Counters behind [`WriteStats`].
#[derive(Debug, Default)]
pub(crate) struct StatCounters {
    pub(crate) batches: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) fsyncs: AtomicU64,
}

/// What a topic's writer has done since the tier opened, from
/// [`HotTier::write_stats`](crate::HotTier::write_stats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Batches committed.
    pub batches: u64,
    /// Group writes (one vectored write each, holding one or more batches).
    pub writes: u64,
    /// fsyncs of the active segment for appends (group commit makes this at most
    /// `writes` under `FsyncPolicy::Always`; seals are not counted).
    pub fsyncs: u64,
}

impl StatCounters {
    pub(crate) fn snapshot(&self) -> WriteStats {
        WriteStats {
            batches: self.batches.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            fsyncs: self.fsyncs.load(Ordering::Relaxed),
        }
    }
}

/// The committed view of a topic.
#[derive(Debug)]
pub(crate) struct TopicState {
    /// Sealed segments, oldest first, contiguous: every one is readable; the last
    /// `pending_seals` are still being fsynced in the background (see
    /// [`published`](Self::published)).
    pub(crate) sealed: Vec<Arc<SealedFile>>,
    /// How many of the newest `sealed` entries are not yet sealed to the outside.
    pub(crate) pending_seals: usize,
    /// The active segment as of the last commit, `None` before the first append.
    pub(crate) active: Option<ActiveView>,
    /// One past the last committed offset (the high watermark).
    pub(crate) end: Offset,
    /// Recent committed batches.
    pub(crate) cache: BatchCache,
    /// Recorded gaps (offsets declared lost by `skip_to`) inside the range, in order.
    pub(crate) gaps: Vec<Gap>,
    /// Opening the tier cut this topic's log back: a torn tail truncated, a seal cut
    /// short re-sealed, a torn point recorded (see [`HotTier::cut_back_at_open`](crate::HotTier::cut_back_at_open)).
    pub(crate) cut_back: bool,
}

/// Offsets declared lost by [`HotTier::skip_to`](crate::HotTier::skip_to), and the
/// marker file recording them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Gap {
    pub(crate) range: OffsetRange,
    pub(crate) marker: PathBuf,
    /// Recorded at a torn point (acknowledged records lost; warm may hold them), not by
    /// `skip_to`.
    pub(crate) torn: bool,
}

/// What readers need of the active segment, as of the last commit.
#[derive(Debug, Clone)]
pub(crate) struct ActiveView {
    pub(crate) path: PathBuf,
    pub(crate) file: Arc<File>,
    pub(crate) base_offset: Offset,
    /// The sparse index so far (positions of interval starts, running max timestamps).
    pub(crate) entries: Vec<IndexEntry>,
    /// End of the committed data.
    pub(crate) data_end: u64,
}

impl ActiveView {
    pub(crate) fn of(active: &ActiveSegment) -> Self {
        Self {
            path: active.path.clone(),
            file: Arc::clone(&active.read_handle),
            base_offset: active.state.offset_range().start,
            entries: active.state.index_entries().to_vec(),
            data_end: active.state.size(),
        }
    }

    /// Brings the view up to date with `active` (the same file, grown): copies only the
    /// new index entries and the last one, whose running maximum may have grown.
    pub(crate) fn refresh(&mut self, active: &ActiveSegment) {
        // The same segment shares its read handle (cheaper than comparing paths).
        if !Arc::ptr_eq(&self.file, &active.read_handle) {
            *self = Self::of(active);
            return;
        }
        let all = active.state.index_entries();
        let known = self.entries.len().min(all.len());
        if let Some(last) = known.checked_sub(1) {
            self.entries[last] = all[last];
        }
        self.entries.extend_from_slice(&all[known..]);
        self.data_end = active.state.size();
    }
}

impl TopicState {
    pub(crate) fn new(cache_bytes: u64) -> Self {
        Self {
            sealed: Vec::new(),
            pending_seals: 0,
            active: None,
            end: 0,
            cache: BatchCache::new(cache_bytes),
            gaps: Vec::new(),
            cut_back: false,
        }
    }

    /// The segments sealed to the outside: fsynced, announced with
    /// `SegmentEvent::Sealed`, listed by `sealed_segments()` and open to retention.
    pub(crate) fn published(&self) -> &[Arc<SealedFile>] {
        &self.sealed[..self.sealed.len() - self.pending_seals]
    }

    /// Publishes the pending seals that are now synced, oldest first, stopping at the
    /// first that is not (so the published segments stay a prefix, and events go out
    /// in offset order even when background seals finish out of order). Called under
    /// the write lock, which also orders the events.
    pub(crate) fn publish_synced(&mut self, events: &broadcast::Sender<SegmentEvent>) {
        while self.pending_seals > 0 {
            let next = &self.sealed[self.sealed.len() - self.pending_seals];
            if !next.is_synced() {
                break;
            }
            self.pending_seals -= 1;
            // No listener is not an error.
            let _ = events.send(SegmentEvent::Sealed(next.info.clone()));
        }
    }

    /// The first recorded gap that ends after `offset` (it holds `offset` when it
    /// starts at or before it).
    pub(crate) fn gap_after(&self, offset: Offset) -> Option<&Gap> {
        let i = self.gaps.partition_point(|g| g.range.end <= offset);
        self.gaps.get(i)
    }

    /// The offsets held: from the oldest segment's base to the high watermark.
    pub(crate) fn range(&self) -> OffsetRange {
        let start = match (self.sealed.first(), &self.active) {
            (Some(s), _) => s.info.range.start,
            (None, Some(a)) => a.base_offset,
            (None, None) => self.end,
        };
        OffsetRange::new(start.min(self.end), self.end)
    }

    /// Bytes of every segment file (sealed files, active data).
    pub(crate) fn total_bytes(&self) -> u64 {
        self.sealed.iter().map(|s| s.info.bytes).sum::<u64>() + self.active.as_ref().map_or(0, |a| a.data_end)
    }
}

impl TopicShared {
    pub(crate) fn new(name: TopicName, dir: PathBuf, state: TopicState, tail_capacity: usize) -> Self {
        let (tail, _) = broadcast::channel(tail_capacity.max(1));
        Self {
            name,
            dir,
            state: RwLock::new(state),
            tail,
            closed: watch::Sender::new(false),
            retention: Mutex::new(()),
            stats: StatCounters::default(),
            queued_appends: AtomicUsize::new(0),
            seal_failed: AtomicBool::new(false),
            seal_failure: Mutex::new(None),
            unsynced: Mutex::new(None),
            parked: Mutex::new(None),
        }
    }

    /// Records that a background seal failed (see `seal_failed`).
    pub(crate) fn fail_seal(&self, why: Arc<TierError>) {
        *self.seal_failure.lock() = Some(why);
        self.seal_failed.store(true, Ordering::SeqCst);
    }

    pub(crate) fn range(&self) -> OffsetRange {
        self.state.read().range()
    }
}
