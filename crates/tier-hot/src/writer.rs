//! The per-topic writer task: serialises appends, group-commits them, rotates segments.
//!
//! Appends reach the task over a channel. The task takes every command already queued
//! (a *group*), checks each batch's base offset against the offset the log continues
//! at, writes the accepted batches with one vectored write (of at most
//! [`MAX_GROUP_BYTES`], or a single larger batch), makes them durable once
//! (fsync under [`FsyncPolicy::Always`]), and only then *commits*: it publishes the new
//! end, index entries and cached batches to readers, sends the batches to live-tail
//! subscribers, and acknowledges every append of the group. Concurrent producers thus
//! share one write and one fsync.
//!
//! The same task rotates segments (by size while grouping, by age on a timer that also
//! fires when the topic is idle, and on demand) and, under
//! [`FsyncPolicy::Interval`], fsyncs on a timer. fsyncs, segment creation and sealing,
//! and groups over `INLINE_WRITE_MAX` run on the blocking pool; a smaller group with no
//! fsync after it is written on the task itself (a buffered write to the page cache).
//! A rotation does not wait for the sealed segment's fsync: that runs in the
//! background, see [`seal`].
//!
//! An append that finds the writer idle skips the task altogether: see [`direct`]. The
//! writer's state is behind an async mutex that the task holds only while it works.
//!
//! A failed write or fsync *poisons* the writer: every later append fails with
//! `Unavailable` until the tier is reopened (after a failed fsync the page cache can no
//! longer be trusted to match the disk).

use std::sync::{Arc, atomic::Ordering};

use tier_core::{Offset, OffsetRange, RecordBatch, TierError, TopicName};
use tokio::{
    sync::{Mutex, Notify, broadcast, mpsc, oneshot},
    time::{Instant, MissedTickBehavior},
};
use tracing::{debug, warn};

use crate::config::{FsyncPolicy, HotConfig};
use crate::layout::{ctx, fsync_dir, io_err, write_gap_marker};
use crate::read::{blocking, find_batch};
use crate::segment::{ActiveSegment, SegmentEvent, SegmentInfo};
use crate::topic::{ActiveView, Gap, TopicShared};

/// Most commands taken into one group.
const MAX_GROUP: usize = 1024;
/// Most bytes of batches written with one write (and, under `always`, one fsync): a
/// group is flushed before a batch would take it past this, so only a single batch is
/// ever written alone in more. Under `always` only the last write can be missing after
/// a crash, so recovery calls a hole followed by intact batches a torn tail only when
/// they all fit in one such write (see `recovery`).
pub(crate) const MAX_GROUP_BYTES: u64 = 4 << 20;
/// Largest write (in encoded bytes) done on an async thread rather than the blocking
/// pool, when no fsync follows it: a buffered write of this size to the page cache
/// takes well under a millisecond.
const INLINE_WRITE_MAX: u64 = 1 << 20;

mod direct;
mod seal;
pub(crate) use seal::MAX_SEALS_IN_FLIGHT;

pub(crate) use direct::{Direct, append_direct};

/// A request to a topic's writer.
#[derive(Debug)]
pub(crate) enum Command {
    /// Append a batch; answer once it is committed.
    Append { batch: RecordBatch, done: oneshot::Sender<Result<(), TierError>> },
    /// Seal the active segment now (if it holds records).
    Rotate { done: oneshot::Sender<Result<Option<SegmentInfo>, TierError>> },
    /// Declare the offsets from the end to `offset` lost and continue the log there.
    SkipTo { offset: Offset, done: oneshot::Sender<Result<OffsetRange, TierError>> },
}

/// An append accepted into the current group.
struct Pending {
    batch: RecordBatch,
    done: oneshot::Sender<Result<(), TierError>>,
}

/// The writer task's state.
pub(crate) struct Writer {
    shared: Arc<TopicShared>,
    config: Arc<HotConfig>,
    events: broadcast::Sender<SegmentEvent>,
    active: Option<ActiveSegment>,
    /// Offset the next accepted batch must start at (committed end + queued group).
    next: Offset,
    /// When the active segment received its first batch (age rotation).
    first_write: Option<Instant>,
    /// Wakes the writer task to take a new `first_write` as its age deadline when a
    /// group appended in the caller's task ([`Writer::append_group`]) changed it.
    age_changed: Arc<Notify>,
    /// Written but not fsynced (interval policy).
    dirty: bool,
    /// The failure that poisoned the writer: every later write answers an error caused
    /// by it.
    poisoned: Option<Arc<TierError>>,
    group: Vec<Pending>,
    group_bytes: u64,
    /// Background seals in flight (see [`seal`]).
    seals: seal::Seals,
}

impl Writer {
    pub(crate) fn new(
        shared: Arc<TopicShared>,
        config: Arc<HotConfig>,
        events: broadcast::Sender<SegmentEvent>,
        active: Option<ActiveSegment>,
    ) -> Self {
        let next = shared.state.read().end;
        let first_write = active.as_ref().filter(|a| !a.is_empty()).map(|_| Instant::now());
        Self {
            shared,
            config,
            events,
            active,
            next,
            first_write,
            age_changed: Arc::new(Notify::new()),
            dirty: false,
            poisoned: None,
            group: Vec::new(),
            group_bytes: 0,
            seals: seal::Seals::new(),
        }
    }

    fn topic(&self) -> &TopicName {
        &self.shared.name
    }

    /// Runs until every sender is dropped, then fsyncs what is unsynced.
    ///
    /// The state sits behind `this`'s lock so that [`direct`] appends can take it
    /// when the writer is idle; the task holds the lock only while it works (handling
    /// a group, rotating by age, fsyncing on the timer), never while it waits.
    pub(crate) async fn run(this: Arc<Mutex<Self>>, mut rx: mpsc::Receiver<Command>) {
        let (mut tick, segment_age, age_changed) = {
            let w = this.lock().await;
            let tick = match w.config.fsync {
                FsyncPolicy::Interval(every) => {
                    // The first tick comes one period after the start, not at once: a
                    // tick at the start has nothing to sync, and one that a busy
                    // runtime delays past the first appends would sync them early.
                    let every = every.max(std::time::Duration::from_millis(1));
                    let mut t = tokio::time::interval_at(Instant::now() + every, every);
                    t.set_missed_tick_behavior(MissedTickBehavior::Delay);
                    Some(t)
                }
                _ => None,
            };
            (tick, w.config.segment_age, Arc::clone(&w.age_changed))
        };
        let mut cmds = Vec::new();
        let mut age_deadline = this.lock().await.age_deadline(segment_age);
        loop {
            // Direct appends never start a segment (they leave its first batch to this
            // task), so `first_write` and with it the deadline change here or in a group
            // appended in its caller's task, which says so through `age_changed`.
            // Biased, timers first (each ready at most once per deadline or period, so
            // they cannot starve appends): no coin decides the order, so a simulated
            // schedule replays exactly.
            tokio::select! {
                biased;
                () = sleep_until(age_deadline), if age_deadline.is_some() => {
                    let mut w = this.lock().await;
                    debug!(topic = %w.topic(), "rotating the active segment by age");
                    if let Err(e) = w.rotate().await {
                        warn!(topic = %w.topic(), error = %e.report(), "age rotation failed");
                    }
                    age_deadline = w.age_deadline(segment_age);
                }
                _ = tick_opt(&mut tick), if tick.is_some() => this.lock().await.sync_if_dirty().await,
                () = age_changed.notified() => {
                    age_deadline = this.lock().await.age_deadline(segment_age);
                }
                n = rx.recv_many(&mut cmds, MAX_GROUP) => {
                    if n == 0 {
                        break;
                    }
                    let appends = cmds.iter().filter(|c| matches!(c, Command::Append { .. })).count();
                    let mut w = this.lock().await;
                    w.handle(cmds.drain(..)).await;
                    // Under the lock: a direct append that sees no queued append knows
                    // that every append sent before it is committed or answered.
                    w.shared.queued_appends.fetch_sub(appends, Ordering::SeqCst);
                    age_deadline = w.age_deadline(segment_age);
                }
            }
        }
        let mut w = this.lock().await;
        w.sync_if_dirty().await;
        // A failure is logged by the seal itself and reopening finds the segment again.
        if w.reap_seals(0).await.is_ok() {
            w.record_durable_seals().await;
        }
    }

    /// At a clean close, every seal having finished: records the newest sealed segments
    /// (those an open would otherwise check, `MAX_SEALS_IN_FLIGHT`) as durable, so that
    /// the next open trusts them without reading their batches. Only under
    /// `never`/`interval` (under `always` no open checks them); a failure only costs the
    /// next open that check.
    async fn record_durable_seals(&self) {
        if self.config.fsync == FsyncPolicy::Always {
            return;
        }
        let segments: Vec<(u64, u64)> = {
            let state = self.shared.state.read();
            let published = state.published();
            let from = published.len().saturating_sub(MAX_SEALS_IN_FLIGHT);
            published[from..].iter().map(|s| (s.info.range.start, s.info.bytes)).collect()
        };
        if segments.is_empty() {
            return;
        }
        let (topic, dir) = (self.topic().clone(), self.shared.dir.clone());
        let written =
            blocking(self.topic(), move || crate::marker::write_durable_seals(&dir, &topic, &segments)).await;
        if let Err(e) = written {
            warn!(topic = %self.topic(), error = %e.report(), "could not record the durable seals; the next open checks them");
        }
    }

    /// When the active segment is due for rotation by age: `segment_age` after its first
    /// batch, and never once the writer is poisoned — every rotation would fail, and a
    /// deadline left in the past would be ready on every turn of the task's biased
    /// select, which would then never see its queue (appends, or its close).
    fn age_deadline(&mut self, segment_age: std::time::Duration) -> Option<Instant> {
        self.absorb_seal_failure();
        if self.poisoned.is_some() {
            return None;
        }
        self.first_write.map(|t| t + segment_age)
    }

    async fn handle(&mut self, cmds: impl Iterator<Item = Command>) {
        for cmd in cmds {
            match cmd {
                Command::Append { batch, done } => self.accept(batch, done).await,
                Command::Rotate { done } => {
                    self.flush().await;
                    // On demand, the caller gets the segment once it is sealed to the
                    // outside (listed by `sealed_segments`).
                    let rotated = match self.rotate().await {
                        Ok(info) => self.reap_seals(0).await.map(|()| info),
                        Err(e) => Err(e),
                    };
                    let _ = done.send(rotated);
                }
                Command::SkipTo { offset, done } => {
                    self.flush().await;
                    let _ = done.send(self.skip_to(offset).await);
                }
            }
        }
        self.flush().await;
    }

    /// Appends `batches` as one group in the caller's task (see
    /// [`HotTier::append_group`](crate::HotTier::append_group)): the same accept, group and
    /// flush steps as a group of queued appends. Returns how many batches from the first
    /// are held and the first refusal.
    pub(crate) async fn append_group(
        &mut self,
        mut batches: Vec<RecordBatch>,
    ) -> (usize, Result<(), TierError>) {
        // A group of one small batch in the plain case, with no fsync after it: written
        // and committed here as a direct append is (see `direct`), without the group's
        // per-batch channels.
        if let [_] = batches.as_slice() {
            match self.append_inline(batches) {
                Ok(Ok(())) => return (1, Ok(())),
                Ok(Err(e)) => return (0, Err(e)),
                Err(back) => batches = back,
            }
        }
        let mut answers = Vec::with_capacity(batches.len());
        let cmds: Vec<Command> = batches
            .into_iter()
            .map(|batch| {
                let (done, answer) = oneshot::channel();
                answers.push(answer);
                Command::Append { batch, done }
            })
            .collect();
        let started = self.first_write;
        self.handle(cmds.into_iter()).await;
        if self.first_write != started {
            // A stored permit if the task is busy: it looks once it waits again.
            self.age_changed.notify_one();
        }
        let mut held = 0;
        for mut answer in answers {
            // `handle` answers every append before it returns (it flushes the group).
            match answer.try_recv() {
                Ok(Ok(())) => held += 1,
                Ok(Err(e)) => return (held, Err(e)),
                Err(_) => {
                    return (
                        held,
                        Err(TierError::internal(
                            ctx(self.topic()),
                            "an append of the group was not answered",
                        )),
                    );
                }
            }
        }
        (held, Ok(()))
    }

    /// Decides what to do with one append: add it to the group, or answer it now.
    async fn accept(&mut self, batch: RecordBatch, done: oneshot::Sender<Result<(), TierError>>) {
        self.absorb_seal_failure();
        if let Some(why) = &self.poisoned {
            let _ = done.send(Err(poisoned(self.topic(), why)));
            return;
        }
        let base = batch.base_offset();
        let holds_nothing = self.group.is_empty() && self.shared.range().is_empty();
        if base == self.next || (holds_nothing && base > self.next) {
            if base != self.next {
                // An empty tier takes over a log at a larger offset (invariant 3).
                if let Err(e) = self.restart_at(base).await {
                    let _ = done.send(Err(e));
                    return;
                }
            }
            let len = batch.encoded_len() as u64;
            let size = self.active.as_ref().map_or(0, |a| a.state.size());
            let has_data = !self.group.is_empty() || self.active.as_ref().is_some_and(|a| !a.is_empty());
            if has_data && size + self.group_bytes + len > self.config.segment_bytes {
                self.flush().await;
                if let Err(e) = self.rotate().await {
                    let _ = done.send(Err(e));
                    return;
                }
            } else if !self.group.is_empty() && self.group_bytes + len > MAX_GROUP_BYTES {
                // Recovery tells a write torn by a crash from damage by this bound.
                self.flush().await;
                if let Some(why) = &self.poisoned {
                    let _ = done.send(Err(poisoned(self.topic(), why)));
                    return;
                }
            }
            self.next = batch.end_offset();
            self.group_bytes += len;
            self.group.push(Pending { batch, done });
            return;
        }
        if base < self.next {
            // A retry of a batch already held is fine; anything else conflicts.
            self.flush().await;
            let _ = done.send(self.check_retry(batch).await);
            return;
        }
        let _ = done.send(Err(TierError::invalid(
            ctx(self.topic()).offset(base),
            format!("batch starts at offset {base} but the log continues at {}", self.next),
        )));
    }

    /// Answers a batch whose base offset is below the end: `Ok` when the identical
    /// batch is held (invariant 5), `Fenced` when other data is, `InvalidInput` below
    /// the range.
    async fn check_retry(&self, batch: RecordBatch) -> Result<(), TierError> {
        let base = batch.base_offset();
        let held = self.shared.range();
        let c = ctx(self.topic()).offset(base);
        if base < held.start {
            return Err(TierError::invalid(
                c,
                format!(
                    "batch starts at offset {base}, below the range held {held}; offsets are never reused"
                ),
            ));
        }
        let shared = Arc::clone(&self.shared);
        let found = blocking(self.topic(), move || find_batch(&shared, base)).await?;
        match found {
            Some(stored) if stored == batch => Ok(()),
            Some(_) => {
                Err(TierError::fenced(c, format!("a different batch is already held at offset {base}")))
            }
            None => Err(TierError::fenced(
                c,
                format!("offset {base} is held inside another batch; the log continues at {}", held.end),
            )),
        }
    }

    /// Replaces the (empty) active segment by one starting at `base`.
    async fn restart_at(&mut self, base: Offset) -> Result<(), TierError> {
        self.next = base;
        let old = self.active.take();
        let (topic, dir, interval) =
            (self.topic().clone(), self.shared.dir.clone(), self.config.index_interval_bytes);
        let created_at = self.config.clock.now();
        // Create the new file before removing the old one, so a crash in between leaves
        // the old empty segment as a lower bound, which recovery discards. A topic with no
        // segment file yet gets its directory and one: the file is the durable record of
        // where the topic continues (nothing else in the WAL would say it).
        let new = blocking(self.topic(), move || {
            if old.is_none() {
                create_topic_dir(&topic, &dir)?;
            }
            let new = ActiveSegment::create(&topic, &dir, base, interval, created_at)?;
            if let Some(old) = old {
                std::fs::remove_file(&old.path)
                    .map_err(|e| io_err(&topic, &old.path, "removing an empty segment", e))?;
                fsync_dir(&dir).map_err(|e| io_err(&topic, &dir, "fsyncing the topic directory", e))?;
            }
            Ok(new)
        })
        .await;
        match new {
            Ok(new) => {
                self.active = Some(new);
                Ok(())
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Declares `end..offset` lost (see [`HotTier::skip_to`](crate::HotTier::skip_to)):
    /// seals the active segment if it holds records, writes the durable gap marker,
    /// then starts the new active segment at `offset`. The group is flushed already.
    async fn skip_to(&mut self, offset: Offset) -> Result<OffsetRange, TierError> {
        if let Some(why) = &self.poisoned {
            return Err(poisoned(self.topic(), why));
        }
        let end = self.next;
        if offset < end {
            return Err(TierError::invalid(
                ctx(self.topic()).offset(offset),
                format!("cannot skip to offset {offset}: the log already continues at {end}"),
            ));
        }
        let gap = OffsetRange::new(end, offset);
        if gap.is_empty() {
            return Ok(gap);
        }
        if self.shared.range().is_empty() {
            // Nothing held on either side: the same take-over as an append at `offset`.
            self.restart_at(offset).await?;
            self.publish_skip(end, offset, None);
            return Ok(gap);
        }
        self.rotate().await?;
        self.reap_seals(0).await?;
        let (topic, dir) = (self.topic().clone(), self.shared.dir.clone());
        let written = blocking(self.topic(), move || write_gap_marker(&topic, &dir, gap, false)).await;
        let marker = match written {
            Ok(marker) => marker,
            Err(e) => return Err(self.fail(e)),
        };
        self.restart_at(offset).await?;
        warn!(topic = %self.topic(), lost = %gap, marker = ?marker, "recorded offsets as lost; the log continues after them");
        self.publish_skip(end, offset, Some(Gap { range: gap, marker, torn: false }));
        Ok(gap)
    }

    /// Shows readers the log continuing at `offset` (after `restart_at`), with `gap`
    /// recorded.
    fn publish_skip(&mut self, end: Offset, offset: Offset, gap: Option<Gap>) {
        let mut state = self.shared.state.write();
        debug_assert_eq!(state.end, end, "skip_to runs after the group is committed");
        state.active = self.active.as_ref().map(ActiveView::of);
        state.end = offset;
        state.cache.clear();
        state.gaps.extend(gap);
    }

    /// Writes, syncs and commits the current group.
    async fn flush(&mut self) {
        if self.group.is_empty() {
            return;
        }
        let group = std::mem::take(&mut self.group);
        let group_bytes = std::mem::take(&mut self.group_bytes);
        let batches: Vec<RecordBatch> = group.iter().map(|p| p.batch.clone()).collect();
        let always = self.config.fsync == FsyncPolicy::Always;
        let active = self.active.take();
        // Without an fsync, a small group into an existing segment is a write to the page
        // cache: done here, it saves two thread hand-offs. fsyncs, new segments and
        // large groups go to the blocking pool.
        let inline = !always && group_bytes <= INLINE_WRITE_MAX && active.is_some();
        let (topic, dir, interval) =
            (self.topic().clone(), self.shared.dir.clone(), self.config.index_interval_bytes);
        let shared = Arc::clone(&self.shared);
        let clock = self.config.clock.clone();
        let write = move || {
            let mut active = match active {
                Some(a) => a,
                None => {
                    create_topic_dir(&topic, &dir)?;
                    ActiveSegment::create(&topic, &dir, batches[0].base_offset(), interval, clock.now())?
                }
            };
            write_and_sync(&mut active, &batches, always, &shared).map(|()| (active, batches))
        };
        let result = if inline { write() } else { blocking(self.topic(), write).await };
        match result {
            Ok((active, batches)) => {
                let stats = &self.shared.stats;
                stats.writes.fetch_add(1, Ordering::Relaxed);
                stats.batches.fetch_add(batches.len() as u64, Ordering::Relaxed);
                if always {
                    stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                }
                self.commit(&active, batches);
                self.active = Some(active);
                self.dirty = !always;
                for p in group {
                    let _ = p.done.send(Ok(()));
                }
            }
            Err(e) => {
                let e = self.poison(e);
                // The batches are not committed; `next` goes back to the committed end.
                self.next = self.shared.state.read().end;
                for p in group {
                    let _ = p.done.send(Err(written_by(self.topic(), &e)));
                }
            }
        }
    }

    /// Publishes durable batches to readers and subscribers.
    fn commit(&mut self, active: &ActiveSegment, batches: Vec<RecordBatch>) {
        if self.first_write.is_none() {
            self.first_write = Some(Instant::now());
        }
        {
            let mut state = self.shared.state.write();
            match &mut state.active {
                Some(view) => view.refresh(active),
                None => state.active = Some(ActiveView::of(active)),
            }
            state.end = active.state.next_offset();
            for b in &batches {
                state.cache.push(b.clone());
            }
        }
        for b in batches {
            // No subscriber is not an error.
            let _ = self.shared.tail.send(b);
        }
    }

    async fn sync_if_dirty(&mut self) {
        self.absorb_seal_failure();
        if !self.dirty || self.poisoned.is_some() {
            return;
        }
        let Some(active) = self.active.take() else { return };
        let topic = self.topic().clone();
        let result = blocking(self.topic(), move || {
            let mut active = active;
            let r = active.sync_untracked().map_err(|e| io_err(&topic, &active.path, "fsyncing the WAL", e));
            Ok((active, r))
        })
        .await;
        match result {
            Ok((active, r)) => {
                self.active = Some(active);
                match r {
                    Ok(()) => {
                        self.dirty = false;
                        self.shared.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        self.poison(e);
                    }
                }
            }
            Err(e) => {
                self.poison(e);
            }
        }
    }

    /// Marks the writer failed; returns the error to report.
    fn poison(&mut self, e: TierError) -> Arc<TierError> {
        warn!(topic = %self.topic(), error = %e.report(), "WAL writer failed; appends to this topic fail until reopened");
        let e = Arc::new(e);
        self.poisoned = Some(Arc::clone(&e));
        e
    }

    /// Marks the writer failed; returns the answer to the write that failed.
    fn fail(&mut self, e: TierError) -> TierError {
        let e = self.poison(e);
        written_by(self.topic(), &e)
    }
}

/// Writes `batches` to `active` and, when `sync`, fsyncs it.
///
/// When the write succeeded and the fsync failed, the file is cut back to its last durable
/// length: after a failed writeback the page cache may show bytes the disk never got, and
/// no later fsync would write them (see `page_cache`), so they are never served nor
/// appended after. The batches' offsets are recorded as `unsynced` in `shared`: refused,
/// yet those of them whose pages did reach the disk may be found whole by a crash before
/// the cut is durable (see [`HotTier::unsynced`](crate::HotTier::unsynced)).
pub(crate) fn write_and_sync(
    active: &mut ActiveSegment,
    batches: &[RecordBatch],
    sync: bool,
    shared: &TopicShared,
) -> Result<(), TierError> {
    let topic = &shared.name;
    active.write_batches(batches).map_err(|e| io_err(topic, &active.path, "writing to the WAL", e))?;
    if sync && let Err(e) = active.sync() {
        if let (Some(first), Some(last)) = (batches.first(), batches.last()) {
            *shared.unsynced.lock() = Some(OffsetRange::new(first.base_offset(), last.end_offset()));
        }
        if reverted!(&active.path, TrustFailedFsyncs) {
            return Err(io_err(topic, &active.path, "fsyncing the WAL", e));
        }
        if let Err(cut) = active.cut_back_to_durable() {
            // Recovery still reads the file as the disk holds it at the next open.
            warn!(topic = %topic, file = ?active.path, error = %cut, "cutting the WAL back to its durable length after a failed fsync failed too");
        }
        return Err(io_err(topic, &active.path, "fsyncing the WAL", e));
    }
    Ok(())
}

/// The answer to a write the failure `e` refused: its kind, with `e` as the source.
pub(crate) fn written_by(topic: &TopicName, e: &Arc<TierError>) -> TierError {
    TierError::caused_by(ctx(topic), "writing the WAL failed", Arc::clone(e))
}

/// The answer to a write after the failure `why` poisoned the writer.
pub(crate) fn poisoned(topic: &TopicName, why: &Arc<TierError>) -> TierError {
    TierError::unavailable(
        ctx(topic),
        "the WAL writer failed earlier; writes fail until the tier is reopened",
    )
    .with_source(Arc::clone(why))
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

async fn tick_opt(tick: &mut Option<tokio::time::Interval>) {
    match tick {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// Creates the topic directory `dir` (if missing) and fsyncs the data directory holding
/// it, so the new directory entry is durable before a segment file is created in it.
fn create_topic_dir(topic: &TopicName, dir: &std::path::Path) -> Result<(), TierError> {
    std::fs::create_dir_all(dir).map_err(|e| io_err(topic, dir, "creating the topic directory", e))?;
    if let Some(parent) = dir.parent() {
        fsync_dir(parent).map_err(|e| io_err(topic, parent, "fsyncing the data directory", e))?;
    }
    Ok(())
}
