//! [`HotTier`]: the topics of a data directory, their writer tasks, and the `Tier`
//! implementation.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::SystemTime,
};

use async_trait::async_trait;
use parking_lot::{Mutex, RwLock};
use tier_core::{
    ErrorContext, Offset, OffsetRange, RecordBatch, Tier, TierError, TierKind, Timestamp, TopicName,
};
use tokio::{
    sync::{broadcast, mpsc, oneshot},
    task::JoinHandle,
};
use tracing::{error, warn};

use crate::config::HotConfig;
use crate::damaged::Damaged;
use crate::layout::{ctx, topic_dir};
use crate::read;
use crate::recovery::{Recovered, recover_topic};
use crate::retention;
use crate::segment::{SegmentEvent, SegmentInfo};
use crate::tail::Subscription;
use crate::topic::{ActiveView, TopicShared, TopicState, WriteStats};
use crate::writer::{Command, Direct, Writer, append_direct};

/// Appends queued per topic before producers wait for the writer.
const WRITER_QUEUE: usize = 4096;
/// Segment events buffered for slow listeners.
const EVENT_BUFFER: usize = 1024;

/// The hot tier: a write-ahead log of segment files under one data directory, for any
/// number of topics. Cheap to clone (clones share the tier).
///
/// Open it with [`HotTier::open`] inside a tokio runtime; it runs one writer task per
/// topic. [`close`](Self::close) stops them after fsyncing what is unsynced.
///
/// # Deviation from the `Tier` contract: recorded gaps
///
/// [`Tier`]'s invariant 1 (contiguity) holds for every topic except after
/// [`skip_to`](Self::skip_to), which only recovery calls (the router, when its commit
/// point is beyond what the WAL kept). The offsets it declares lost stay inside
/// `range()` but are not held: a read starting in such a gap fails with `NotFound`
/// naming the lost range and its marker file, and a read starting before the gap
/// stops before it (so invariant 6 still yields dense records). The conformance suite
/// never calls `skip_to`; without it the tier honours every invariant.
#[derive(Clone, Debug)]
pub struct HotTier {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: Arc<HotConfig>,
    topics: RwLock<HashMap<TopicName, Arc<TopicLog>>>,
    /// Topics whose recovery failed at open, kept aside (see [`HotTier::damaged`]);
    /// fixed for the tier's lifetime.
    damaged: HashMap<TopicName, Damaged>,
    events: broadcast::Sender<SegmentEvent>,
    closed: AtomicBool,
    /// The data directory's exclusive lock, held until [`HotTier::close`] or drop.
    lock: Mutex<Option<std::fs::File>>,
}

#[derive(Debug)]
struct TopicLog {
    shared: Arc<TopicShared>,
    /// The writer's state, taken by the writer task or by a direct append.
    writer: Arc<tokio::sync::Mutex<Writer>>,
    tx: mpsc::Sender<Command>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl HotTier {
    /// Opens (creating it if needed) the data directory of `config` and recovers every
    /// topic in it: sealed segments are mapped and checked (header, trailer, index), the
    /// active segment is scanned and a torn tail handled per
    /// [`HotConfig::recovery`], and each topic continues at exactly the offset after
    /// its last valid record.
    ///
    /// # A topic that cannot be recovered
    ///
    /// One topic's failure does not fail the open: a topic whose recovery fails
    /// (`Corruption` naming the file and byte position — a malformed sealed segment, a
    /// torn tail under [`RecoveryPolicy::Refuse`](crate::RecoveryPolicy), segments that
    /// are not contiguous — or `Unavailable` on an I/O failure in its directory) is kept
    /// aside as *damaged*, listed by [`damaged`](Self::damaged) with that error, and
    /// every other topic opens and serves. Every operation on a damaged topic (append,
    /// read, range, subscribe, rotate, `skip_to`, …) answers the recovery's error again,
    /// with its kind and location: it never looks like an empty topic, so no offset is
    /// ever handed out twice. Nothing runs for it (no writer, retention or segment
    /// event) and its files are left as recovery found them, until they are repaired
    /// and the tier is reopened (see `docs/hot.md`, "A damaged topic").
    ///
    /// Errors: `Fenced` when another process (or another open `HotTier`) holds the data
    /// directory's lock; `Unavailable` when the data directory itself cannot be created,
    /// locked or listed.
    pub async fn open(config: HotConfig) -> Result<Self, TierError> {
        let config = Arc::new(config);
        let cfg = Arc::clone(&config);
        let (lock, found) = tier_core::blocking::spawn(move || recover_all(&cfg)).await.map_err(|e| {
            TierError::internal(ErrorContext::tier(TierKind::Hot), "the recovery task failed").with_source(e)
        })??;
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let mut damaged = HashMap::new();
        let mut healthy = Vec::new();
        for (name, recovered) in found {
            match recovered {
                Ok(recovered) => healthy.push((name, recovered)),
                Err(e) => {
                    error!(topic = %name, error = %e.report(), "recovering a topic failed; it stays closed until repaired");
                    damaged.insert(name.clone(), Damaged { topic: name, error: Arc::new(e) });
                }
            }
        }
        let tier = Self {
            inner: Arc::new(Inner {
                config,
                topics: RwLock::new(HashMap::new()),
                damaged,
                events,
                closed: AtomicBool::new(false),
                lock: Mutex::new(Some(lock)),
            }),
        };
        {
            let mut topics = tier.inner.topics.write();
            for (name, recovered) in healthy {
                let log = tier.start_topic(name.clone(), recovered);
                topics.insert(name, log);
            }
        }
        Ok(tier)
    }

    /// The configuration the tier was opened with.
    pub fn config(&self) -> &HotConfig {
        &self.inner.config
    }

    /// The topics the tier serves (recovered from disk or written since it opened),
    /// sorted. Damaged topics are not among them: see [`damaged`](Self::damaged).
    pub fn topics(&self) -> Vec<TopicName> {
        let mut names: Vec<TopicName> = self.inner.topics.read().keys().cloned().collect();
        names.sort();
        names
    }

    /// The topics whose recovery failed at open, sorted, each with the error recovery
    /// gave (see [`open`](Self::open)): what every operation on the topic answers.
    pub fn damaged(&self) -> Vec<(TopicName, TierError)> {
        let mut damaged: Vec<(TopicName, TierError)> =
            self.inner.damaged.values().map(|d| (d.topic.clone(), d.answer())).collect();
        damaged.sort_by(|a, b| a.0.cmp(&b.0));
        damaged
    }

    /// A receiver of every topic's segment events (sealed, deleted), from now on.
    pub fn segment_events(&self) -> broadcast::Receiver<SegmentEvent> {
        self.inner.events.subscribe()
    }

    /// The sealed segments of `topic`, oldest first (empty for an unknown topic): those
    /// sealed to the outside, i.e. fsynced. A segment whose background seal is still
    /// running after a rotation is readable but not listed yet; it is listed from the
    /// moment its [`SegmentEvent::Sealed`] is sent.
    pub fn sealed_segments(&self, topic: &TopicName) -> Vec<SegmentInfo> {
        self.lookup(topic)
            .map(|log| log.shared.state.read().published().iter().map(|s| s.info.clone()).collect())
            .unwrap_or_default()
    }

    /// The recorded gaps of `topic` (offsets declared lost by
    /// [`skip_to`](Self::skip_to), still inside the range), oldest first; empty for an
    /// unknown topic.
    pub fn gaps(&self, topic: &TopicName) -> Vec<OffsetRange> {
        self.lookup(topic)
            .map(|log| log.shared.state.read().gaps.iter().map(|g| g.range).collect())
            .unwrap_or_default()
    }

    /// The recorded gaps of `topic` that recovery recorded at a torn point (a seal a crash
    /// cut short lost acknowledged records; another tier may still hold them), oldest
    /// first — kept in the gap's marker, so known to every later open too. A gap that
    /// merged a torn point with skipped offsets is one of them.
    pub fn torn_points(&self, topic: &TopicName) -> Vec<OffsetRange> {
        self.lookup(topic)
            .map(|log| log.shared.state.read().gaps.iter().filter(|g| g.torn).map(|g| g.range).collect())
            .unwrap_or_default()
    }

    /// True when opening the tier cut `topic`'s log back — a torn tail truncated, a
    /// segment whose seal was cut short re-sealed, a segment that lost every batch
    /// removed, or a torn point recorded — or an earlier open did and the cut was not
    /// recorded since ([`cut_recorded`](Self::cut_recorded)). Its end may then be below
    /// what was acknowledged (media damage, or a power cut under `fsync =
    /// never/interval`); the router then does not trust it as exact. The evidence is the
    /// topic directory's `cut` marker, written before the first byte is dropped, so a
    /// cut outlives an open whose recovery failed (the log it leaves looks whole).
    pub fn cut_back_at_open(&self, topic: &TopicName) -> bool {
        self.lookup(topic).is_some_and(|log| log.shared.state.read().cut_back)
    }

    /// Says that what opening the tier cut from `topic`'s log was recorded (the router's
    /// recovery reported it and kept its losses): the `cut` marker is removed durably and
    /// [`cut_back_at_open`](Self::cut_back_at_open) answers false until a later open cuts
    /// the log again. Nothing to do for a topic that was not cut or does not exist.
    pub fn cut_recorded(&self, topic: &TopicName) -> Result<(), TierError> {
        let Some(log) = self.lookup(topic) else { return Ok(()) };
        crate::marker::CUT.remove(&self.inner.config.data_dir, topic)?;
        log.shared.state.write().cut_back = false;
        Ok(())
    }

    /// The offsets of `topic` its writer wrote to the active segment but could not fsync
    /// when it failed (`fsync = always`): refused, and cut off the file at once (see
    /// "Failed fsyncs" in `docs/hot.md`), yet their outcome is not certain: a crash before
    /// the cut reached the disk may leave those of them whose pages the failed writeback
    /// did write, which a restart then finds whole (and durable). Until the tier is
    /// reopened they are neither acknowledged nor readable. `None` when no fsync failed
    /// since the tier opened.
    pub fn unsynced(&self, topic: &TopicName) -> Option<OffsetRange> {
        self.lookup(topic).and_then(|log| *log.shared.unsynced.lock())
    }

    /// Records durably, in `topic`'s own directory, that its WAL is being rebuilt from
    /// other tiers — a recovery replays warm's records into a WAL that was lost or cannot
    /// vouch for its end — and that records may have been acknowledged at offsets up to
    /// `bound` (unknown when `None`). Until [`clear_rebuilt`](Self::clear_rebuilt) the
    /// WAL's end says nothing about what was acknowledged, even if everything beside the
    /// WAL (the router's state directory) is lost. Creates the topic's directory when
    /// missing. Blocking file I/O (a few small writes and fsyncs).
    pub fn mark_rebuilt(&self, topic: &TopicName, bound: Option<Offset>) -> Result<(), TierError> {
        crate::rebuilt::write(&self.inner.config.data_dir, topic, bound)
    }

    /// `topic`'s rebuilt marker under WAL directory `data_dir`, read without opening the
    /// WAL (which takes its lock and recovers its segments): for read-only inspection such
    /// as `tierlog status`.
    pub fn rebuilt_in(
        data_dir: &std::path::Path,
        topic: &TopicName,
    ) -> Result<Option<crate::Rebuilt>, TierError> {
        crate::rebuilt::read(data_dir, topic)
    }

    /// `topic`'s rebuilt marker ([`mark_rebuilt`](Self::mark_rebuilt)), if it has one.
    pub fn rebuilt(&self, topic: &TopicName) -> Result<Option<crate::Rebuilt>, TierError> {
        crate::rebuilt::read(&self.inner.config.data_dir, topic)
    }

    /// Removes `topic`'s rebuilt marker: the topic continues past every offset that may
    /// have been acknowledged, and the WAL's end vouches again.
    pub fn clear_rebuilt(&self, topic: &TopicName) -> Result<(), TierError> {
        crate::rebuilt::remove(&self.inner.config.data_dir, topic)
    }

    /// Records durably, in `topic`'s own directory, the offsets degraded opens skipped
    /// where warm may hold records that were never acknowledged (the router's
    /// `RecoveryReport::skipped`, which the WAL records as its gap): the WAL's gap alone
    /// does not say that warm's records there are never to be served, and the router's
    /// own record of them goes with its state directory. No ranges remove the marker.
    /// Creates the topic's directory when missing. Blocking file I/O.
    pub fn mark_unacked(&self, topic: &TopicName, ranges: &[OffsetRange]) -> Result<(), TierError> {
        crate::marker::write_unacked(&self.inner.config.data_dir, topic, ranges)
    }

    /// The ranges of `topic`'s `unacked` marker ([`mark_unacked`](Self::mark_unacked))
    /// under WAL directory `data_dir`, none without one; reads only, so it needs no open
    /// WAL (recovery, and read-only inspection such as `tierlog status`).
    pub fn unacked_in(data_dir: &std::path::Path, topic: &TopicName) -> Result<Vec<OffsetRange>, TierError> {
        crate::marker::read_unacked(data_dir, topic)
    }

    /// Records durably, in `topic`'s own directory, the offsets a recovery of the router
    /// reported `lost` and `maybe_lost`, until its report is handed out (the router's
    /// `<state_dir>/<topic>.losses`, which goes with its state directory): an open that
    /// fails after the recovery and a lost state directory then still leave the report
    /// for the next recovery, also where the WAL already continues past those offsets. No
    /// ranges remove the marker. Creates the topic's directory when missing. Blocking file
    /// I/O.
    pub fn keep_losses(
        &self,
        topic: &TopicName,
        lost: &[OffsetRange],
        maybe_lost: &[OffsetRange],
    ) -> Result<(), TierError> {
        crate::marker::write_losses(&self.inner.config.data_dir, topic, lost, maybe_lost)
    }

    /// The `lost` and `maybe_lost` ranges of `topic`'s `losses` marker
    /// ([`keep_losses`](Self::keep_losses)) under WAL directory `data_dir`, none without
    /// one; reads only, so it needs no open WAL.
    pub fn kept_losses_in(
        data_dir: &std::path::Path,
        topic: &TopicName,
    ) -> Result<(Vec<OffsetRange>, Vec<OffsetRange>), TierError> {
        crate::marker::read_losses(data_dir, topic)
    }

    /// Records durably, in `topic`'s own directory, the owner epoch under which this WAL
    /// is written from now on (the router's claim of the topic, see `docs/ownership.md`).
    /// Creates the topic's directory when missing. Blocking file I/O.
    pub fn record_owner_epoch(&self, topic: &TopicName, epoch: u64) -> Result<(), TierError> {
        crate::marker::write_owner(&self.inner.config.data_dir, topic, epoch)
    }

    /// The owner epoch `topic`'s WAL was last written under
    /// ([`record_owner_epoch`](Self::record_owner_epoch)), `None` when none was recorded.
    pub fn owner_epoch(&self, topic: &TopicName) -> Result<Option<u64>, TierError> {
        crate::marker::read_owner(&self.inner.config.data_dir, topic)
    }

    /// Drops everything the WAL holds of `topic` (segments, gap and marker files) as if
    /// it had never been written here: for a WAL that another owner's log superseded
    /// (`docs/ownership.md`). The topic's writer stops after the appends queued before
    /// this call; the directory is renamed aside (one atomic step: a crash leaves the
    /// whole old WAL or none of it) and removed. The next append creates the topic
    /// afresh. Meant for a topic nothing else uses yet (the router's recovery, before the
    /// topic serves).
    ///
    /// Errors: those of a damaged topic (its files are left for repair); `Unavailable`
    /// when the directory cannot be renamed or removed.
    pub async fn discard_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        if self.serving(topic)?.is_some() {
            let log = self.inner.topics.write().remove(topic);
            stop_writers(log.into_iter().collect()).await;
        }
        let data_dir = self.inner.config.data_dir.clone();
        let topic = topic.clone();
        tier_core::blocking::spawn(move || crate::layout::discard_topic_dir(&data_dir, &topic))
            .await
            .map_err(|e| {
                TierError::internal(ErrorContext::tier(TierKind::Hot), "the discard task failed")
                    .with_source(e)
            })?
    }

    /// Counters of `topic`'s writer since the tier opened (`None` for an unknown
    /// topic).
    pub fn write_stats(&self, topic: &TopicName) -> Option<WriteStats> {
        self.lookup(topic).map(|log| log.shared.stats.snapshot())
    }

    /// Seals `topic`'s active segment now, after the appends queued before this call,
    /// and starts a new one. Returns the sealed segment once it is fsynced and listed by
    /// [`sealed_segments`](Self::sealed_segments), or `None` when the active segment
    /// held no record (nothing to seal).
    pub async fn rotate(&self, topic: &TopicName) -> Result<Option<SegmentInfo>, TierError> {
        let Some(log) = self.serving(topic)? else { return Ok(None) };
        let (done, answer) = oneshot::channel();
        send(topic, &log.tx, Command::Rotate { done }).await?;
        answer.await.map_err(|_| closed(topic))?
    }

    /// Declares offsets `end..offset` of `topic` lost and makes the log continue at
    /// `offset`; returns the range declared lost. For a recovery that had to drop
    /// acknowledged records (the router's commit point is beyond the WAL's end), so
    /// that the topic keeps accepting appends without ever reusing an offset.
    ///
    /// Runs in the topic's writer, after the appends queued before it: the active
    /// segment is sealed if it holds records (a usual [`SegmentEvent::Sealed`]), a
    /// durable marker `<from:020>-<to:020>.gap` is written in the topic directory (see
    /// [`layout`](crate::layout)), and a new active segment starts at `offset`.
    /// Afterwards [`range`](Tier::range) is `first..offset`, appends must start at
    /// `offset`, and a read starting inside the gap fails with `NotFound` naming the
    /// lost range and the marker; a read starting before it stops before it. Reopening
    /// keeps the gap (recovery accepts exactly the recorded discontinuities), and
    /// retention removes the marker with the last segment before it.
    ///
    /// `offset == end` does nothing (an empty range); on a topic holding no record it
    /// is the take-over of invariant 3 (no marker: nothing is held on either side).
    ///
    /// Errors: `InvalidInput` when `offset` is below the end (offsets are never
    /// reused); `Closed` when the tier is closed; `Unavailable` when a file operation fails (which
    /// poisons the topic's writer, as a failed append does).
    pub async fn skip_to(&self, topic: &TopicName, offset: Offset) -> Result<OffsetRange, TierError> {
        let log = self.topic_or_create(topic)?;
        let (done, answer) = oneshot::channel();
        let tx = log.tx.clone();
        drop(log);
        send(topic, &tx, Command::SkipTo { offset, done }).await?;
        answer.await.map_err(|_| closed(topic))?
    }

    /// Appends `batches` to `topic` in order as one group, in the caller's task: the
    /// entry of a caller that is itself the topic's only writer (the router's per-topic
    /// writer), so that its appends reach the WAL without a hand-off to the topic's
    /// writer task. It waits for the writer's state (held by the writer task only while
    /// that works: an age rotation, an interval fsync, appends other callers queued),
    /// then runs the batches through the same checks as [`Tier::append`] — each batch
    /// continues the log, an identical batch already held is `Ok` (invariant 5), a
    /// conflict is `Fenced` — and writes the accepted ones with one vectored write per
    /// 4 MiB (one fsync each under `always`), rotating by size in between as the writer
    /// task does. Each
    /// batch is committed (readable, cached, sent to the live tail) before this returns.
    ///
    /// Returns how many batches, from the first, are held, and the error of the first
    /// one that is not (`Ok` when all are). Each batch is decided as a separate append
    /// would be, so one after a refused batch may still be held (an identical retry of
    /// it is then `Ok`). Errors are those of [`Tier::append`].
    pub async fn append_group(
        &self,
        topic: &TopicName,
        batches: Vec<RecordBatch>,
    ) -> (usize, Result<(), TierError>) {
        if batches.is_empty() {
            return (0, Ok(()));
        }
        let mut batches = batches;
        // A batch past u64::MAX is refused before anything is written (see `Tier::append`),
        // and the ones after it are not tried.
        let refused = batches.iter().position(|b| b.checked_end_offset().is_none()).map(|bad| {
            let e = past_largest_offset(topic, &batches[bad]);
            batches.truncate(bad);
            e
        });
        let writer = match self.topic_or_create(topic) {
            Ok(log) => Arc::clone(&log.writer),
            Err(e) => return (0, Err(e)),
        };
        let (held, result) = if batches.is_empty() {
            (0, Ok(()))
        } else {
            let mut writer = writer.lock().await;
            // See `Tier::append` for why a batch gets bytes of its own.
            writer.append_group(batches.into_iter().map(RecordBatch::compacted).collect()).await
        };
        match (result, refused) {
            (Ok(()), Some(e)) => (held, Err(e)),
            (result, _) => (held, result),
        }
    }

    /// Appends `batches` to `topic` at once, in the caller's thread, when that takes no
    /// wait: the topic is open, its writer idle (nothing queued, its lock free), the
    /// batches continue the log one after another inside the active segment, and they are
    /// written without an fsync (`fsync` is not `always`) in one buffered write (at most
    /// 1 MiB together) — the case [`Tier::append`] writes and commits in the caller's task.
    /// Otherwise the batches are handed back untouched, to be appended with
    /// [`append_group`](Self::append_group) or [`Tier::append`]. When it applies, the
    /// outcome is the one of a group the WAL writes at once: every batch held, or none.
    pub fn try_append_now(
        &self,
        topic: &TopicName,
        batches: Vec<RecordBatch>,
    ) -> Result<Result<(), TierError>, Vec<RecordBatch>> {
        if batches.last().is_none_or(|b| b.checked_end_offset().is_none())
            || self.inner.closed.load(Ordering::SeqCst)
        {
            return Err(batches);
        }
        let Ok(Some(log)) = self.serving(topic) else { return Err(batches) };
        let Ok(mut writer) = log.writer.try_lock() else { return Err(batches) };
        // See `Tier::append` for why a batch gets bytes of its own.
        writer.append_inline(batches.into_iter().map(RecordBatch::compacted).collect())
    }

    /// A live-tail subscription yielding every committed record of `topic` from `from`
    /// on, in order, exactly once (see [`Subscription`]).
    pub fn subscribe(&self, topic: &TopicName, from: Offset) -> Result<Subscription, TierError> {
        let log = self.topic_or_create(topic)?;
        Ok(Subscription::new(Arc::clone(&log.shared), from))
    }

    /// Deletes sealed segments of every topic by age ([`HotConfig::retention_time`],
    /// measured from each segment's seal time to `now`) and size (while a topic's
    /// segment files take more than [`HotConfig::retention_bytes`]): oldest first,
    /// never the active segment, asking `can_delete` before each deletion and stopping
    /// at a topic's first refusal. Returns the deleted segments.
    ///
    /// Does blocking file I/O (unlink, directory fsync); call it from a blocking
    /// context or `spawn_blocking` in an async program.
    pub fn run_retention(
        &self,
        now: SystemTime,
        can_delete: &dyn Fn(&SegmentInfo) -> bool,
    ) -> Result<Vec<SegmentInfo>, TierError> {
        let logs: Vec<Arc<TopicLog>> = self.inner.topics.read().values().cloned().collect();
        let mut deleted = Vec::new();
        for log in logs {
            deleted.extend(retention::run_topic(
                &log.shared,
                &self.inner.config,
                now,
                can_delete,
                &self.inner.events,
            )?);
        }
        Ok(deleted)
    }

    /// Stops every writer task after the appends already queued, fsyncing unsynced
    /// data. Later calls on this tier (or its clones) fail with `Closed`.
    pub async fn close(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        let logs: Vec<Arc<TopicLog>> = self.inner.topics.write().drain().map(|(_, log)| log).collect();
        stop_writers(logs).await;
        // Every writer has stopped: another process may take the directory now.
        drop(self.inner.lock.lock().take());
    }

    fn lookup(&self, topic: &TopicName) -> Option<Arc<TopicLog>> {
        self.inner.topics.read().get(topic).cloned()
    }

    /// The open topic `topic` (`None` when the tier does not know it), or the error of
    /// a damaged topic.
    fn serving(&self, topic: &TopicName) -> Result<Option<Arc<TopicLog>>, TierError> {
        match self.inner.damaged.get(topic) {
            Some(damaged) => Err(damaged.answer()),
            None => Ok(self.lookup(topic)),
        }
    }

    /// The topic a read from `from` goes to, or `None` for the empty answer of a topic
    /// never written read from 0; from elsewhere that is `Trimmed` (its range is `0..0`).
    fn read_target(&self, topic: &TopicName, from: Offset) -> Result<Option<Arc<TopicLog>>, TierError> {
        match self.serving(topic)? {
            Some(log) => Ok(Some(log)),
            None if from == 0 => Ok(None),
            None => Err(TierError::trimmed(ctx(topic).offset(from), from, OffsetRange::empty_at(0))),
        }
    }

    fn topic_or_create(&self, topic: &TopicName) -> Result<Arc<TopicLog>, TierError> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(closed(topic));
        }
        // A damaged topic is never recreated empty (that would reuse its offsets).
        if let Some(log) = self.serving(topic)? {
            return Ok(log);
        }
        let mut topics = self.inner.topics.write();
        if let Some(log) = topics.get(topic) {
            return Ok(Arc::clone(log));
        }
        let log = self.start_topic(topic.clone(), Recovered::default());
        topics.insert(topic.clone(), Arc::clone(&log));
        Ok(log)
    }

    fn start_topic(&self, name: TopicName, recovered: Recovered) -> Arc<TopicLog> {
        let config = &self.inner.config;
        let mut state = TopicState::new(config.cache_bytes);
        state.sealed = recovered.sealed;
        state.gaps = recovered.gaps;
        state.cut_back = recovered.cut_back;
        if let Some(active) = &recovered.active {
            state.active = Some(ActiveView::of(active));
            state.end = active.state.next_offset();
        }
        let dir = topic_dir(&config.data_dir, &name);
        let shared = Arc::new(TopicShared::new(name, dir, state, config.live_tail_batches));
        let (tx, rx) = mpsc::channel(WRITER_QUEUE);
        let writer = Arc::new(tokio::sync::Mutex::new(Writer::new(
            Arc::clone(&shared),
            Arc::clone(config),
            self.inner.events.clone(),
            recovered.active,
        )));
        let task = tokio::spawn(Writer::run(Arc::clone(&writer), rx));
        Arc::new(TopicLog { shared, writer, tx, task: Mutex::new(Some(task)) })
    }
}

/// The refusal of a batch whose records would pass `u64::MAX`.
fn past_largest_offset(topic: &TopicName, batch: &RecordBatch) -> TierError {
    TierError::invalid(
        ctx(topic).offset(batch.base_offset()),
        format!(
            "a batch of {} records at offset {} would pass the largest offset (u64::MAX)",
            batch.record_count(),
            batch.base_offset()
        ),
    )
}

/// Name of the lock file in the data directory.
pub(crate) const LOCK_FILE: &str = ".lock";

/// Takes the data directory's exclusive lock, so a second process (or a second
/// `HotTier` in this one) cannot open the same WAL and interleave writes. The lock is
/// an advisory `flock` on `<data_dir>/.lock`, released when the file is closed — also
/// when the process dies, so a crash never leaves a stale lock. Tools that read the
/// WAL's files without opening it (`tierlog verify`) take the same lock.
pub fn lock_data_dir(data_dir: &std::path::Path) -> Result<std::fs::File, TierError> {
    let path = data_dir.join(LOCK_FILE);
    let ctx = || ErrorContext::tier(TierKind::Hot).location(path.display().to_string());
    let file =
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(|e| {
            TierError::unavailable(ctx(), "opening the data directory's lock file").with_source(e)
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(TierError::fenced(
            ctx(),
            format!("the data directory {} is in use by another tierlog process", data_dir.display()),
        )),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(TierError::unavailable(ctx(), "locking the data directory").with_source(e))
        }
    }
}

/// What recovering one topic directory gave.
type Found = Vec<(TopicName, Result<Recovered, TierError>)>;

/// Takes the data directory's lock and recovers every topic directory under it; a
/// topic's failure is its own entry, not the function's.
fn recover_all(config: &HotConfig) -> Result<(std::fs::File, Found), TierError> {
    let data_dir = &config.data_dir;
    let hot = || ErrorContext::tier(TierKind::Hot).location(data_dir.display().to_string());
    std::fs::create_dir_all(data_dir)
        .map_err(|e| TierError::unavailable(hot(), "creating the data directory").with_source(e))?;
    let lock = lock_data_dir(data_dir)?;
    let entries = std::fs::read_dir(data_dir)
        .map_err(|e| TierError::unavailable(hot(), "listing the data directory").with_source(e))?;
    let mut found = Vec::new();
    for entry in entries {
        let entry =
            entry.map_err(|e| TierError::unavailable(hot(), "listing the data directory").with_source(e))?;
        let path = entry.path();
        let topic = match entry.file_name().to_str().map(TopicName::new) {
            Some(Ok(topic)) if path.is_dir() => topic,
            _ if entry.file_name() == LOCK_FILE => continue,
            _ => {
                warn!(path = ?path, "ignoring an entry of the data directory that is not a topic");
                continue;
            }
        };
        let recovered = recover_topic(&topic, &path, config);
        found.push((topic, recovered));
    }
    Ok((lock, found))
}

/// Stops the writers of `logs`, taken out of the tier's map, after the appends already
/// queued, then wakes their live-tail subscribers waiting for a batch that will not come
/// (they deliver what was committed first).
async fn stop_writers(logs: Vec<Arc<TopicLog>>) {
    let mut tasks = Vec::new();
    for log in &logs {
        if let Some(task) = log.task.lock().take() {
            tasks.push(task);
        }
    }
    let shared: Vec<Arc<TopicShared>> = logs.into_iter().map(|log| Arc::clone(&log.shared)).collect();
    // Dropping the last sender ends the writer's loop.
    for task in tasks {
        if let Err(e) = task.await {
            warn!(error = %e, "a WAL writer task failed");
        }
    }
    for s in &shared {
        s.closed.send_replace(true);
    }
}

async fn send(topic: &TopicName, tx: &mpsc::Sender<Command>, cmd: Command) -> Result<(), TierError> {
    tx.send(cmd).await.map_err(|_| closed(topic))
}

fn closed(topic: &TopicName) -> TierError {
    TierError::closed(ctx(topic), "the hot tier is closed")
}

#[async_trait]
impl Tier for HotTier {
    fn kind(&self) -> TierKind {
        TierKind::Hot
    }

    fn capabilities(&self) -> tier_core::Capabilities {
        tier_core::Capabilities::none().with_idempotent_append(true)
    }

    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        Ok(self.serving(topic)?.map_or(OffsetRange::empty_at(0), |log| log.shared.range()))
    }

    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        if batch.checked_end_offset().is_none() {
            // Refused before anything is written: a batch past u64::MAX would be written,
            // then refused, and poison the writer with bytes that read as corruption.
            return Err(past_largest_offset(topic, &batch));
        }
        // The cache and the live tail keep the batch after the append: a batch decoded
        // from a larger buffer gets bytes of its own first, so they do not keep that
        // whole buffer alive (free for a built batch, which owns its bytes exactly).
        let batch = batch.compacted();
        let log = self.topic_or_create(topic)?;
        // An idle writer: write and commit here (see `writer::direct`).
        let batch = match append_direct(&log.writer, batch).await {
            Direct::Done(result) => return result,
            Direct::Queue(batch) => batch,
        };
        let (done, answer) = oneshot::channel();
        let tx = log.tx.clone();
        let shared = Arc::clone(&log.shared);
        drop(log);
        // Counted before it can be received, so that no direct append overtakes it; the
        // writer task uncounts it once handled.
        let permit = tx.reserve().await.map_err(|_| closed(topic))?;
        shared.queued_appends.fetch_add(1, Ordering::SeqCst);
        permit.send(Command::Append { batch, done });
        answer.await.map_err(|_| closed(topic))?
    }

    /// From the cache when it holds `from`, else from disk: nothing is built per record,
    /// and every batch has had its CRC and records checked. Stops before a recorded gap
    /// (a read starting in one is `NotFound` naming it); a damaged batch is `Corruption`.
    async fn read_batches(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, TierError> {
        match self.read_target(topic, from)? {
            Some(log) => read::read_batches(&log.shared, from, to, max_bytes).await,
            None => Ok(Vec::new()),
        }
    }

    async fn offset_for_timestamp(
        &self,
        topic: &TopicName,
        timestamp: Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        match self.serving(topic)? {
            Some(log) => read::offset_for_timestamp(&log.shared, timestamp).await,
            None => Ok(None),
        }
    }
}
