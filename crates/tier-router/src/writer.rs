//! The per-topic writer task: serialises appends, assigns offsets, group-commits to the
//! WAL and warm, and advances the topic's commit point (high watermark).
//!
//! # Design (see also `docs/router.md`, "Write path")
//!
//! Producers send encoded batches (built at base offset 0) over an mpsc queue with a
//! oneshot for the reply — or, for `Topic::append_batch` (nothing queued), add them to the
//! topic's arrivals, and the producer whose turn it is takes the writer's lock and commits
//! the arrivals in its own task ([`Writer::append_direct`]: the group commit the task
//! would make, without the queue's two task hand-offs; see `topic.rs`, `Arrivals`). The writer's state
//! sits behind that lock; the task holds it only while it handles commands. The task takes
//! the first queued request and drains whatever
//! else is queued (up to `max_group_bytes`), numbers each batch of the group from the
//! next offset (only the base offset in the prefix changes, nothing is re-encoded), and
//! writes the group to the WAL in this task (`HotTier::append_group`: one write, one
//! fsync) and, when enabled, to warm (`WarmBackend::append_group`: one round trip)
//! concurrently — the topic's one writer. Offsets are assigned exactly once: a numbered batch stays in the
//! writer's `pending` queue until every enabled write tier holds it, and every retry
//! re-sends the *identical* batch (both tiers accept an identical re-append, contract
//! invariant 5), so nothing is ever renumbered and WAL and warm hold the same batches.
//!
//! The high watermark is the end of the longest prefix of batches that are committed:
//! in the WAL and — under [`WarmFailurePolicy::Fail`] — in warm. Readers never read past
//! it. Under `Fail` a batch warm refused leaves the producer with `Unavailable` and keeps
//! its offsets; further appends are refused until the batch is in warm (retried every
//! `warm_retry_interval` and before each new group), and only then is it readable. Under
//! [`WarmFailurePolicy::Degrade`] the batch commits on the WAL alone and the pending
//! queue is the in-order back-fill list for warm. A topic opened while warm was
//! unreachable (degrade only) starts with warm's end unknown: once warm answers, the
//! writer asks for its range and queues the WAL's records from there.
//!
//! The offset reservation the writer keeps ahead of what it acknowledges: see
//! [`crate::reservation`].

use std::collections::VecDeque;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use futures::FutureExt;
use tier_core::{
    ErrorContext, ErrorKind, Offset, OffsetRange, RecordBatch, Tier, TierError, TierKind, TopicName,
};
use tokio::sync::{Notify, mpsc, oneshot};
use tracing::{error, info, warn};

use crate::commit_point::CommitPoint;
use crate::config::WarmFailurePolicy;
use crate::recovery::batches_for_warm;
use crate::reservation::Reservation;
use crate::tiers::Tiers;

/// A request to a topic's writer.
#[derive(Debug)]
pub(crate) enum Command {
    /// Append `batch` (numbered from 0); reply with its offsets once committed.
    Append { batch: RecordBatch, done: Reply },
    /// Reply once everything queued before is committed and in every write tier.
    Flush { done: oneshot::Sender<Result<(), TierError>> },
    /// Lift the fence of a topic whose acknowledged end is unknown: continue at `at`
    /// (at least the next offset); reply with the offsets skipped.
    Resume { at: Offset, done: oneshot::Sender<Result<OffsetRange, TierError>> },
}

/// Where an append's answer goes: its offsets once committed, or why not.
pub(crate) type Reply = oneshot::Sender<Result<OffsetRange, TierError>>;

/// Batches committed together, each with its producer's reply, in order.
type Group = Vec<(RecordBatch, Reply)>;

/// A numbered batch not yet in every enabled write tier.
#[derive(Debug)]
struct Pending {
    batch: RecordBatch,
    in_wal: bool,
    in_warm: bool,
    /// Warm was sent the batch and answered with an error that does not say it refused
    /// it (a `WAIT` that fell short, a timeout): warm may hold it unconfirmed.
    maybe_in_warm: bool,
}

impl Pending {
    fn new(batch: RecordBatch, in_wal: bool, in_warm: bool) -> Self {
        Self { batch, in_wal, in_warm, maybe_in_warm: false }
    }
}

/// What the writer knows of warm: one value, changed only by the writer's methods
/// (`warm_unknown`, `hold_warm_floor`, `discover_warm`, `settle`, `continue_warm`,
/// `advance`). The warm floor WAL retention reads is derived from it and the pending
/// queue ([`Writer::publish_warm_floor`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WarmState {
    /// No warm tier is enabled: the floor is `u64::MAX`.
    Disabled,
    /// Warm was unreachable when the topic opened (under `degrade`): its end is not known,
    /// nothing is sent to it, and the floor is 0, until it answers a range query
    /// ([`Writer::discover_warm`]). Its batches from `confirmed_from` (the last point
    /// known confirmed) may lack a confirmation — a `WAIT` that fell short before the
    /// restart — and are confirmed again then.
    Unknown { confirmed_from: Offset },
    /// Warm's end is known: it holds every batch before the first pending batch it lacks.
    Known {
        /// Warm refused (or has not yet been sent) a batch it lacks; cleared, with a log
        /// line, once it holds every batch again.
        behind: bool,
        /// Warm lacks the WAL's records from here and no batch queued for it says so (its
        /// back-fill stopped at offsets no tier holds): the floor stays at or below it
        /// until warm is continued ([`Writer::continue_warm`]).
        hold: Option<Offset>,
    },
}

/// The writer task's state.
pub(crate) struct Writer {
    topic: TopicName,
    tiers: Arc<Tiers>,
    next: Offset,
    pending: VecDeque<Pending>,
    hwm: CommitPoint,
    /// The writer has stopped (the store closes): no append is taken any more, the
    /// reservation having been lowered to the commit point.
    stopped: bool,
    /// What the writer knows of warm (see [`WarmState`]).
    warm: WarmState,
    /// Shared with WAL retention: warm holds (or will never need) every offset below it,
    /// so the WAL may delete segments ending at or below it and no lower: warm's
    /// back-fill reads them. `u64::MAX` without warm; 0 while warm's end is unknown.
    warm_floor: Arc<AtomicU64>,
    /// Appends are refused with this reason (the acknowledged end is unknown) until
    /// [`Command::Resume`].
    fenced: Option<String>,
    reservation: Reservation,
    /// Offsets an operator's resume skipped, until the commit point passes them.
    skipped: Option<OffsetRange>,
    /// Offsets recovery reported lost that no tier holds: no record is there.
    holes: Vec<OffsetRange>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("topic", &self.topic).field("next", &self.next).finish_non_exhaustive()
    }
}

impl Writer {
    /// A writer continuing `topic` at `next` (everything below it is committed).
    pub(crate) fn new(
        topic: TopicName,
        tiers: Arc<Tiers>,
        next: Offset,
        hwm: CommitPoint,
        reservation: Reservation,
    ) -> Self {
        let warm = if tiers.warm.is_some() {
            WarmState::Known { behind: false, hold: None }
        } else {
            WarmState::Disabled
        };
        Self {
            topic,
            tiers,
            next,
            pending: VecDeque::new(),
            hwm,
            stopped: false,
            warm,
            warm_floor: Arc::new(AtomicU64::new(u64::MAX)),
            fenced: None,
            reservation,
            skipped: None,
            holes: Vec::new(),
        }
    }

    /// The offsets recovery reported lost that no tier holds: the commit point passes
    /// them once it reaches them, as it passes the WAL's gaps (they need not be one: a
    /// cut may have taken the WAL's first segments, leaving it to start past them).
    pub(crate) fn recovered_holes(&mut self, holes: Vec<OffsetRange>) {
        self.holes = holes;
    }

    /// Keeps the warm floor at or below `at` (see [`WarmState::Known`]'s `hold`): the
    /// first offset at or after `at` outside the WAL's holes (they hold no record warm
    /// could lack), when one is below the WAL's end.
    pub(crate) fn hold_warm_floor(&mut self, at: Offset) {
        let at = self.past_holes(at);
        if at >= self.next {
            return;
        }
        if let WarmState::Known { hold, .. } = &mut self.warm {
            *hold = Some(hold.map_or(at, |h| h.min(at)));
        }
        self.publish_warm_floor();
    }

    /// Warm's end is not known yet (see [`WarmState::Unknown`]).
    fn warm_is_unknown(&self) -> bool {
        matches!(self.warm, WarmState::Unknown { .. })
    }

    /// Something waits for the retry timer: pending batches, or warm's end to find.
    pub(crate) fn has_retry_work(&self) -> bool {
        !self.pending.is_empty() || self.warm_is_unknown()
    }

    /// The offset WAL retention must not delete beyond (see the field `warm_floor`).
    pub(crate) fn warm_floor(&self) -> Arc<AtomicU64> {
        self.publish_warm_floor();
        Arc::clone(&self.warm_floor)
    }

    /// Refuses appends with `why` until the topic is resumed.
    pub(crate) fn fence(&mut self, why: String) {
        self.fenced = Some(why);
    }

    /// Marks warm's end as unknown (it was unreachable at open): nothing is sent to warm
    /// until it answers a range query, then warm's batches from `confirmed_from` (the
    /// last point known confirmed) are confirmed again and the WAL's records from warm's
    /// end are queued.
    pub(crate) fn warm_unknown(&mut self, confirmed_from: Offset) {
        if self.warm != WarmState::Disabled {
            self.warm = WarmState::Unknown { confirmed_from };
        }
        self.publish_warm_floor();
    }

    /// Recomputes the warm floor WAL retention reads.
    fn publish_warm_floor(&self) {
        let floor = match self.warm {
            WarmState::Disabled => u64::MAX,
            WarmState::Unknown { .. } => 0,
            WarmState::Known { hold, .. } => {
                let lacks =
                    self.pending.iter().find(|p| !p.in_warm).map_or(self.next, |p| p.batch.base_offset());
                hold.map_or(lacks, |hold| lacks.min(hold))
            }
        };
        self.warm_floor.store(floor, Ordering::Release);
    }

    /// Makes sure offsets below `end` may be acknowledged (see [`Reservation::reserve`]).
    async fn reserve(&mut self, end: Offset) -> Result<(), TierError> {
        self.reservation.reserve(&self.topic, end).await
    }

    /// Writes a reservation of exactly `offset` durably and records it as the current one.
    async fn write_reservation(&mut self, offset: Offset) -> Result<(), TierError> {
        self.reservation.write(&self.topic, offset).await
    }

    /// Makes the recovered end durable evidence before the topic is handed out: when the
    /// reservation found (none, after a lost state directory) is below the next offset, a
    /// reservation of exactly the next offset is written. Without it, a WAL whose tail is
    /// only in the page cache (`fsync = never/interval`) would be the only evidence of the
    /// offsets handed out, and a power cut would take it. A fenced topic writes none.
    pub(crate) async fn cover_recovered_end(&mut self) -> Result<(), TierError> {
        if self.fenced.is_some() || self.next <= self.reservation.reserved {
            return Ok(());
        }
        self.write_reservation(self.next).await
    }

    /// Lowers the reservation to the commit point: the writer stops, and nothing at or
    /// beyond the commit point was acknowledged (batches numbered beyond it were refused
    /// and live on only in the WAL, whose end is exact while it exists) — but not below a
    /// refused batch warm holds or may hold: a recovery that cannot reach warm continues
    /// at the reservation, never at offsets warm holds other records at.
    async fn release(&mut self) {
        self.reservation.settle(&self.topic).await;
        let in_warm = match self.tiers.warm {
            Some(_) => self
                .pending
                .iter()
                .filter(|p| p.in_warm || p.maybe_in_warm)
                .map(|p| p.batch.end_offset())
                .max(),
            None => None,
        };
        let floor = self.hwm.get().max(in_warm.unwrap_or(0));
        // Fenced: the acknowledged end is unknown, and a reservation would pass for
        // evidence of it.
        if self.fenced.is_some() || self.reservation.reserved <= floor {
            return;
        }
        if let Err(e) = self.write_reservation(floor).await {
            warn!(topic = %self.topic, error = %e.report(), "lowering the offset reservation failed");
        }
    }

    /// Sends the recovered backlog to warm once, before the topic is handed out, so that
    /// what warm confirms (under `fail`, the acknowledged batches after the checkpoint)
    /// is readable as soon as the topic opens; what it refuses stays queued. The commit
    /// point also moves over the holes it reaches (a torn point recovery recorded right
    /// above it, warm holding nothing there to confirm): a reader from the latest offset
    /// starts after them, not in offsets recorded lost.
    pub(crate) async fn settle_backlog(&mut self) {
        if !self.pending.is_empty() && !self.warm_is_unknown() {
            self.settle(true).await;
        } else {
            self.advance();
        }
    }

    /// Queues batches the WAL holds but warm lacks (found by recovery), in order.
    pub(crate) fn queue_backlog(&mut self, backlog: Vec<RecordBatch>) {
        let has_warm = self.tiers.warm.is_some();
        self.pending.extend(backlog.into_iter().map(|batch| Pending::new(batch, true, !has_warm)));
    }

    fn ctx(&self) -> ErrorContext {
        ErrorContext::tier(TierKind::Router).topic(&self.topic)
    }

    // The warm failure policy is decided here, in `refusal` and in `is_committed`, and
    // nowhere else in the writer.

    /// Whether a batch the WAL holds is committed — acknowledged, readable — before warm
    /// confirms it (`degrade`), the pending queue then being warm's back-fill list.
    fn commits_on_wal_alone(&self) -> bool {
        self.tiers.config.warm_failure_policy == WarmFailurePolicy::Degrade
    }

    /// Whether `p` is committed as far as the tiers go: in the WAL, and in warm unless the
    /// policy commits on the WAL alone.
    fn is_committed(&self, p: &Pending) -> bool {
        p.in_wal && (p.in_warm || self.commits_on_wal_alone())
    }

    /// Whether the writer has stopped (see the field `stopped`).
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Commits a group of awaited appends in a producer's task, the caller holding the
    /// writer's lock (`Topic::append_batch`): the same group commit as the task's.
    pub(crate) async fn append_direct(&mut self, group: Vec<(RecordBatch, Reply)>) {
        self.commit_group(group).await;
    }

    /// The writer task: runs until the queue closes, then makes a last attempt to settle
    /// pending batches. It holds the writer's lock while it handles commands (and only
    /// then), and subtracts the commands it handled from `queued` before letting go of it;
    /// `wake` makes it look at its retry timer again (a producer's commit left batches to
    /// retry).
    pub(crate) async fn run(
        writer: Arc<tokio::sync::Mutex<Writer>>,
        mut rx: mpsc::Receiver<Command>,
        queued: Arc<AtomicUsize>,
        wake: Arc<Notify>,
    ) {
        let (retry_interval, max_group) = {
            let w = writer.lock().await;
            (w.tiers.config.warm_retry_interval, w.tiers.config.max_group_bytes)
        };
        let mut tick = tokio::time::interval(retry_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // A request taken from the queue that did not fit the last group (still counted
        // in `queued`).
        let mut carry: Option<Command> = None;
        loop {
            let first = if let Some(cmd) = carry.take() {
                Some(cmd)
            } else {
                let retry = writer.lock().await.has_retry_work();
                // Biased, appends first; a retry that is due also runs after each group
                // (below). Neither starves the other — a retry can outlast its interval
                // (warm unreachable), after which the tick is ready at once — and no coin
                // decides the order, so a simulated schedule replays exactly.
                tokio::select! {
                    biased;
                    cmd = rx.recv() => cmd,
                    _ = tick.tick(), if retry => {
                        writer.lock().await.settle(true).await;
                        continue;
                    }
                    () = wake.notified() => continue,
                }
            };
            let Some(first) = first else { break };
            let mut w = writer.lock().await;
            let mut group = Vec::new();
            let mut flush = None;
            let mut resume = None;
            let mut bytes = 0;
            let mut handled = 0;
            let mut next_cmd = Some(first);
            while let Some(cmd) = next_cmd.take() {
                match cmd {
                    Command::Append { batch, done } => {
                        if !group.is_empty() && bytes + batch.encoded_len() > max_group {
                            carry = Some(Command::Append { batch, done });
                            break;
                        }
                        bytes += batch.encoded_len();
                        group.push((batch, done));
                    }
                    Command::Flush { done } => {
                        flush = Some(done);
                        handled += 1;
                        break;
                    }
                    Command::Resume { at, done } => {
                        resume = Some((at, done));
                        handled += 1;
                        break;
                    }
                }
                if bytes < max_group {
                    next_cmd = rx.try_recv().ok();
                }
            }
            handled += group.len();
            if !group.is_empty() {
                w.commit_group(group).await;
            }
            if let Some(done) = flush {
                let _ = done.send(w.flush().await);
            }
            if let Some((at, done)) = resume {
                let _ = done.send(w.resume(at).await);
            }
            if w.has_retry_work() && tick.tick().now_or_never().is_some() {
                w.settle(true).await;
            }
            queued.fetch_sub(handled, Ordering::SeqCst);
        }
        let mut w = writer.lock().await;
        if w.has_retry_work() {
            w.settle(true).await;
            if w.has_retry_work() {
                warn!(topic = %w.topic, batches = w.pending.len(), "writer stopped with batches warm does not hold");
            }
        }
        w.stopped = true;
        w.release().await;
        // Readers of the live tail end (`Closed`) once the commit point's sender is gone,
        // whoever still holds the writer's state.
        w.hwm.close();
    }

    async fn flush(&mut self) -> Result<(), TierError> {
        let failed = self.settle(true).await;
        match self.pending.front() {
            // Another writer took the topic over: what warm lacks never reaches it.
            Some(p) if failed.as_ref().is_some_and(|e| e.kind() == ErrorKind::Fenced) => {
                Err(TierError::fenced(
                    self.ctx().offset(p.batch.base_offset()),
                    format!(
                        "{} batch(es) from offset {} are not in warm, and never will be: {}",
                        self.pending.len(),
                        p.batch.base_offset(),
                        self.fenced.as_deref().unwrap_or("another writer took the topic over")
                    ),
                ))
            }
            None if self.warm_is_unknown() => Err(TierError::unavailable(
                self.ctx(),
                "the warm tier has been unreachable since the topic opened; its back-fill has not started",
            )),
            None => Ok(()),
            Some(p) => Err(TierError::unavailable(
                self.ctx().offset(p.batch.base_offset()),
                format!(
                    "{} batch(es) from offset {} are not yet in every write tier",
                    self.pending.len(),
                    p.batch.base_offset()
                ),
            )),
        }
    }

    /// Lifts the fence: continues at `at`, durably reserving it first so that a crash
    /// before the next append still bounds the acknowledged end. Returns the offsets
    /// skipped.
    async fn resume(&mut self, at: Offset) -> Result<OffsetRange, TierError> {
        if self.fenced.is_none() {
            return Err(TierError::invalid(
                self.ctx(),
                "the topic's acknowledged end is known; it needs no resume",
            ));
        }
        if at < self.next {
            return Err(TierError::invalid(
                self.ctx().offset(at),
                format!("cannot resume at {at}: the tiers already hold offsets up to {}", self.next),
            ));
        }
        self.reserve(at).await?;
        // A WAL holding the topic (replayed from warm) continues at `at` too: the skipped
        // offsets are recorded as its gap, as recovery records the ones it skips.
        let wal = self.tiers.hot.range(&self.topic).await?;
        if !wal.is_empty() && wal.end < at {
            let gap = self.tiers.hot.skip_to(&self.topic, at).await?;
            warn!(topic = %self.topic, lost = %gap, "recorded the skipped offsets in the WAL");
        }
        let skipped = OffsetRange::new(self.next, at);
        self.next = at;
        self.fenced = None;
        self.skipped = Some(skipped);
        // The commit point passes the skipped offsets once every batch before them is
        // committed — not before: a batch recovery queued for warm (under `fail`, one warm
        // never confirmed) is not readable until warm holds it.
        self.advance();
        warn!(topic = %self.topic, skipped = %skipped, "resumed by the operator; the skipped offsets are never used");
        Ok(skipped)
    }

    /// Why a new group cannot be accepted now, if it cannot.
    fn refusal(&self) -> Option<(ErrorContext, String)> {
        let first = self.pending.front()?;
        let unreplicated: usize = self.pending.iter().map(|p| p.batch.encoded_len()).sum();
        let reason = match self.tiers.config.warm_failure_policy {
            WarmFailurePolicy::Fail => Some("an earlier batch is not yet confirmed by every write tier"),
            WarmFailurePolicy::Degrade if self.pending.iter().any(|p| !p.in_wal) => {
                Some("an earlier batch is not yet in the WAL")
            }
            WarmFailurePolicy::Degrade if unreplicated > self.tiers.config.max_unreplicated_bytes => {
                Some("the warm tier is too far behind (router.max_unreplicated_bytes)")
            }
            WarmFailurePolicy::Degrade => None,
        }?;
        Some((
            self.ctx().offset(first.batch.base_offset()),
            format!("{reason} (pending from offset {}); retry later", first.batch.base_offset()),
        ))
    }

    async fn commit_group(&mut self, group: Vec<(RecordBatch, Reply)>) {
        // Under `degrade`, warm's back-fill is left to the retry timer so that appends
        // do not wait for an unreachable warm tier; the WAL must be complete first.
        if let Some(why) = &self.fenced {
            for (_, done) in group {
                let _ = done.send(Err(TierError::fenced(self.ctx().offset(self.next), why.clone())));
            }
            return;
        }
        self.settle(!self.commits_on_wal_alone()).await;
        if let Some((ctx, why)) = self.refusal() {
            for (_, done) in group {
                let _ = done.send(Err(TierError::unavailable(ctx.clone(), why.clone())));
            }
            return;
        }
        let base = self.next;
        let numbered = match number(group, base) {
            Ok(numbered) => numbered,
            Err((group, e)) => {
                // Nothing was numbered: offsets past u64::MAX.
                let e = Arc::new(e);
                for (_, done) in group {
                    let e = TierError::caused_by(self.ctx().offset(base), "not written", Arc::clone(&e));
                    let _ = done.send(Err(e));
                }
                return;
            }
        };
        let end = numbered.last().map_or(base, |(batch, _)| batch.end_offset());
        if let Err(e) = self.reserve(end).await {
            warn!(topic = %self.topic, error = %e.report(), "writing the offset reservation failed");
            let e = Arc::new(e);
            for (_, done) in numbered {
                let _ = done.send(Err(TierError::unavailable(
                    self.ctx().offset(base),
                    "not written: the offset reservation could not be recorded",
                )
                .with_source(Arc::clone(&e))));
            }
            return;
        }
        self.next = end;
        let has_warm = self.tiers.warm.is_some();
        let warm_backlog = self.warm_is_unknown() || self.pending.iter().any(|p| !p.in_warm);
        // The pending queue shares the batches' bytes; the group keeps them for their
        // offsets, with the replies.
        self.pending.extend(numbered.iter().map(|(batch, _)| Pending::new(batch.clone(), false, !has_warm)));
        let errors = self.settle(!warm_backlog).await.map(Arc::new);
        // Each producer is answered by where its own batch is: a tier that failed inside
        // the group (a rotation the disk refused) leaves the batches before it committed,
        // and those are acknowledged — recovery counts them as such.
        let hwm = self.hwm.get();
        for (batch, done) in numbered {
            let _ = done.send(self.answer(batch.offset_range(), hwm, errors.as_ref()));
        }
    }

    /// [`commit_group`](Self::commit_group) of `group` when no step of it waits, without a
    /// future: nothing is pending (so nothing is settled or refused first), no warm tier
    /// is enabled, the durable reservation covers the group, and the WAL writes it at once
    /// ([`HotTier::try_append_now`](tier_hot::HotTier::try_append_now)). The same steps in
    /// the same order, with the same outcome; each batch's answer goes to `answer` with its
    /// place in the group and its reply, in order. The group handed back when the steps do
    /// not all apply, nothing done but a reservation written ahead that was due.
    pub(crate) fn commit_now(
        &mut self,
        group: Group,
        mut answer: impl FnMut(usize, Reply, Result<OffsetRange, TierError>),
    ) -> Result<(), Group> {
        let base = self.next;
        // The commit point at the next offset: no batch is waiting and no hole lies there
        // for `advance` to step over (holes lie below the WAL's end).
        if self.fenced.is_some()
            || self.stopped
            || self.warm != WarmState::Disabled
            || !self.pending.is_empty()
            || self.hwm.get() != base
        {
            return Err(group);
        }
        let numbered = match number(group, base) {
            Ok(numbered) => numbered,
            Err((group, _)) => return Err(group),
        };
        let end = numbered.last().map_or(base, |(batch, _)| batch.end_offset());
        if !self.reservation.covers(&self.topic, end) {
            return Err(numbered);
        }
        // The clones share the bytes: the batches stay pending if the WAL refuses them.
        let batches = numbered.iter().map(|(batch, _)| batch.clone()).collect();
        let Ok(written) = self.tiers.hot.try_append_now(&self.topic, batches) else { return Err(numbered) };
        self.next = end;
        match written {
            Ok(()) => {
                self.hwm.set(end);
                for (at, (batch, done)) in numbered.into_iter().enumerate() {
                    answer(at, done, Ok(batch.offset_range()));
                }
            }
            Err(e) => {
                warn!(topic = %self.topic, error = %e.report(), "WAL append failed");
                self.pending
                    .extend(numbered.iter().map(|(batch, _)| Pending::new(batch.clone(), false, true)));
                self.advance();
                let (hwm, e) = (self.hwm.get(), Arc::new(e));
                for (at, (batch, done)) in numbered.into_iter().enumerate() {
                    answer(at, done, self.answer(batch.offset_range(), hwm, Some(&e)));
                }
            }
        }
        Ok(())
    }

    /// A producer's answer for its batch at `range` once its commit is done: its offsets
    /// when the commit point `hwm` passed them, else why not (`errors`: the first failure
    /// the commit met).
    fn answer(
        &self,
        range: OffsetRange,
        hwm: Offset,
        errors: Option<&Arc<TierError>>,
    ) -> Result<OffsetRange, TierError> {
        if hwm >= range.end {
            return Ok(range);
        }
        let (message, may_commit) = self.refused_message(range);
        let mut ctx = self.ctx().offset(range.start);
        if may_commit {
            ctx = ctx.may_commit(range);
        }
        Err(not_acknowledged(ctx, message, errors))
    }

    /// What a producer is told of its batch at `range` that was not committed, by where
    /// the batch is: only a WAL copy keeps its offsets (the WAL cannot renumber or remove
    /// it, and it commits once warm holds it too). A batch the WAL does not hold is stored
    /// nowhere that lasts: a reopened writer continues from the WAL's end, so its offsets
    /// go to later records — unless warm took it, and recovery may commit it from warm.
    /// With whether the records may still be committed at `range` (the outcome unknown).
    fn refused_message(&self, range: OffsetRange) -> (String, bool) {
        let pending = self.pending.iter().find(|p| p.batch.base_offset() == range.start);
        let message = match pending {
            Some(p) if p.in_wal => format!(
                "not acknowledged: the WAL holds the records at offsets {range}; they become readable only once \
                 every write tier holds them"
            ),
            Some(p) if p.in_warm && self.tiers.warm.is_some() => format!(
                "not acknowledged: the WAL did not store the records; warm holds them at offsets {range}, and \
                 recovery after a restart may commit them there"
            ),
            _ if self
                .tiers
                .hot
                .unsynced(&self.topic)
                .is_some_and(|u| u.start <= range.start && range.end <= u.end) =>
            {
                format!(
                    "not acknowledged: the WAL wrote the records but could not make them durable (its fsync \
                     failed), so after a restart it may hold them at offsets {range}, and recovery may commit \
                     them there"
                )
            }
            Some(p) if p.maybe_in_warm => format!(
                "not acknowledged: the WAL did not store the records and warm did not confirm them, but warm may \
                 hold them at offsets {range}, and recovery after a restart may commit them there"
            ),
            _ => {
                return (
                    format!(
                        "not written: the WAL did not store the records, so they hold no offsets; offsets {range} go \
                         to the next records written"
                    ),
                    false,
                );
            }
        };
        (message, true)
    }

    /// Sends every pending batch to the tiers that lack it, in order per tier (the WAL
    /// and warm concurrently), then advances the high watermark over the committed
    /// prefix. `with_warm: false` leaves warm alone. Returns the first error met, if any.
    async fn settle(&mut self, with_warm: bool) -> Option<TierError> {
        let mut with_warm = with_warm;
        if with_warm
            && self.warm_is_unknown()
            && let Err(e) = self.discover_warm().await
        {
            warn!(topic = %self.topic, error = %e.report(), "the warm tier is still unreachable");
            with_warm = false;
        }
        // Warm lacks records before the first batch it would be sent that no queued batch
        // holds (its back-fill stopped short): it is continued first, or not sent the batch.
        if with_warm && !self.warm_continues().await {
            if let WarmState::Known { behind, .. } = &mut self.warm {
                *behind = true;
            }
            with_warm = false;
        }
        // Nothing to send (the common case before a group: every batch is in every tier).
        if self.pending.iter().all(|p| p.in_wal && (p.in_warm || !with_warm)) {
            self.advance();
            return None;
        }
        let wal_todo: Vec<RecordBatch> =
            self.pending.iter().skip_while(|p| p.in_wal).map(|p| p.batch.clone()).collect();
        let warm_todo: Vec<RecordBatch> = if with_warm {
            self.pending.iter().skip_while(|p| p.in_warm).map(|p| p.batch.clone()).collect()
        } else {
            Vec::new()
        };
        let warm_todo_len = warm_todo.len();
        let tiers = Arc::clone(&self.tiers);
        let warm = tiers.warm.as_deref();
        // Each tier takes its list as one group (the WAL: one write, one fsync, in this
        // task; warm: one round trip where it can), both at once.
        let ((wal_done, wal_err), (warm_done, warm_err)) = futures::join!(
            async {
                let (done, result) = tiers.hot.append_group(&self.topic, wal_todo).await;
                (done, result.err())
            },
            async {
                match warm {
                    Some(w) if !warm_todo.is_empty() => {
                        let (done, result) = w.append_group(&self.topic, warm_todo).await;
                        (done, result.err())
                    }
                    _ => (0, None),
                }
            }
        );
        let wal_skip = self.pending.iter().take_while(|p| p.in_wal).count();
        for p in self.pending.iter_mut().skip(wal_skip).take(wal_done) {
            p.in_wal = true;
        }
        self.mark_in_warm(warm_done);
        if let Some(e) = &warm_err
            && !matches!(e.kind(), ErrorKind::InvalidInput | ErrorKind::Fenced)
        {
            // Sent in one round trip (tier-warm pipelines a group): every batch after the
            // confirmed ones may have landed.
            let skip = self.pending.iter().take_while(|p| p.in_warm).count();
            for p in self.pending.iter_mut().skip(skip).take(warm_todo_len - warm_done) {
                p.maybe_in_warm = true;
            }
        }
        let mut warm_err = warm_err;
        if let (Some(w), Some(e)) = (warm, &warm_err)
            && e.kind() == ErrorKind::InvalidInput
        {
            // Warm does not continue where the next batch starts: catch it up, or restart
            // it past offsets no tier holds, then try once more (with the commit point
            // over what warm just confirmed).
            self.advance();
            match self.continue_warm().await {
                Ok(true) => {
                    let todo: Vec<RecordBatch> =
                        self.pending.iter().skip_while(|p| p.in_warm).map(|p| p.batch.clone()).collect();
                    let (done, result) = w.append_group(&self.topic, todo).await;
                    self.mark_in_warm(done);
                    warm_err = result.err();
                }
                Ok(false) => {}
                Err(e) => {
                    warn!(topic = %self.topic, error = %e.report(), "could not bring warm to the next batch")
                }
            }
        }
        if let Some(e) = &warm_err {
            if let WarmState::Known { behind, .. } = &mut self.warm {
                *behind = true;
            }
            warn!(topic = %self.topic, error = %e.report(), "warm tier did not confirm a batch");
            if e.kind() == ErrorKind::Fenced && self.fenced.is_none() {
                // Another writer claimed the topic in warm since this one opened it: this
                // store writes it no more, under either policy (reopening claims it back).
                error!(topic = %self.topic, error = %e.report(), "another writer took the topic over; its appends are refused");
                self.fenced = Some(format!(
                    "another writer took topic '{}' over (warm: {}); this store appends to it no more — reopen the \
                     topic to take it back",
                    self.topic, e
                ));
            }
        }
        if let Some(e) = &wal_err {
            warn!(topic = %self.topic, error = %e.report(), "WAL append failed");
        }
        self.advance();
        wal_err.or(warm_err)
    }

    /// Whether warm may be sent the first pending batch it lacks. Not while it lacks the
    /// WAL's records from its hold (see [`WarmState::Known`]) up to that batch, unless
    /// [`Writer::continue_warm`] queues them or restarts warm past them: a stream that a
    /// failover emptied takes a batch at any offset and starts there, and a later
    /// recovery counts a stream's start as committed — it would serve the records before
    /// it that were never committed (under `fail`, refused batches whose WAL copy is
    /// damaged). See `docs/router.md`, "Warm past offsets no tier holds".
    async fn warm_continues(&mut self) -> bool {
        let WarmState::Known { hold: Some(hold), .. } = self.warm else { return true };
        let Some(first) = self.pending.iter().find(|p| !p.in_warm).map(|p| p.batch.base_offset()) else {
            return true;
        };
        if first <= hold {
            return true;
        }
        #[cfg(feature = "testkit")]
        if crate::testing::reverted(&self.reservation.state_dir, crate::testing::Repair::WarmContinuesItsHold)
        {
            return true;
        }
        // Warm continues there after all (a stream's end, or the next key it keeps).
        if let Some(warm) = self.tiers.warm.clone()
            && warm.range(&self.topic).await.is_ok_and(|held| held.end == first)
        {
            self.release_warm_hold();
            return true;
        }
        match self.continue_warm().await {
            Ok(true) => true,
            Ok(false) => {
                warn!(
                    topic = %self.topic, lacks_from = hold, next = first,
                    "warm is not sent the next batch: it lacks records before it that no tier can give it"
                );
                false
            }
            Err(e) => {
                warn!(topic = %self.topic, error = %e.report(), "could not bring warm to the next batch");
                false
            }
        }
    }

    /// Marks the first `done` pending batches warm lacked as held by warm.
    fn mark_in_warm(&mut self, done: usize) {
        let skip = self.pending.iter().take_while(|p| p.in_warm).count();
        for p in self.pending.iter_mut().skip(skip).take(done) {
            p.in_warm = true;
        }
    }

    /// Warm refused the first batch it lacks as not continuing its end. If the WAL or cold
    /// holds the offsets in between, they are queued for warm ahead of it. If no tier holds
    /// some of them (a reported loss, a gap the WAL recorded), warm can never be caught up:
    /// when every record warm holds is also in the WAL or cold, warm is restarted at that
    /// batch ([`WarmBackend::restart_at`]) — the only way for it to continue while its
    /// stream IDs stay offsets — and takes the batches from there. Returns true when warm
    /// should now take the batch. See `docs/router.md`, "Warm past offsets no tier holds".
    async fn continue_warm(&mut self) -> Result<bool, TierError> {
        let Some(warm) = self.tiers.warm.clone() else { return Ok(false) };
        let Some(at) = self.pending.iter().position(|p| !p.in_warm) else { return Ok(false) };
        let first = self.pending[at].batch.base_offset();
        // An empty stream refuses too when it keeps where its next batch must start (its
        // next key, tier-warm): a failover emptied it, and it lacks the batches up to there.
        let held = warm.range(&self.topic).await?;
        if held.end >= first {
            return Ok(false);
        }
        let hole = OffsetRange::new(held.end, first);
        let fill = batches_for_warm(&self.tiers, &self.topic, hole).await?;
        if fill.last().is_some_and(|b| b.end_offset() == first) {
            for (i, batch) in fill.into_iter().enumerate() {
                self.pending.insert(at + i, Pending::new(batch, true, false));
            }
            info!(topic = %self.topic, warm = %held, "queued the records warm lacks before the next batch");
            self.release_warm_hold();
            return Ok(true);
        }
        if let Some(only) = crate::recovery::only_in_warm(&self.tiers, &self.topic, held).await? {
            error!(
                topic = %self.topic, warm = %held, lost = %hole, only_in_warm = %only,
                "warm cannot be continued: no tier holds the offsets before the next batch, and warm holds \
                 records no other tier does"
            );
            return Ok(false);
        }
        // Restart where the last offsets no tier holds end (a gap the WAL recorded), and
        // send warm what the WAL holds from there, so that warm keeps holding every record
        // after the gap (it is what a lost WAL is replayed from); else at the batch itself.
        // The WAL's own start counts as a gap's end: retention may have deleted the
        // segments before the gap, and its marker with them.
        let wal_start = self.tiers.hot.range(&self.topic).await?.start;
        let after_gap = self
            .tiers
            .hot
            .gaps(&self.topic)
            .iter()
            .filter(|g| g.start < first && g.end > hole.start)
            .map(|g| g.end.min(first))
            .chain((hole.start < wal_start && wal_start < first).then_some(wal_start))
            .max();
        let mut restart = first;
        let mut fill = Vec::new();
        if let Some(gap_end) = after_gap
            && gap_end < first
            && let Some(batches) = self.whole_fill(gap_end, first).await?
        {
            restart = gap_end;
            fill = batches;
        }
        // The WAL cannot give everything from there (a damaged batch): restart after the
        // damage, at the first WAL segment from which it gives every batch up to the
        // next one — never past intact records only the WAL holds, which a lost WAL or a
        // power cut of its unsynced tail would take with it.
        if restart == first
            && let Some((at, batches)) = self.intact_from(hole.start, first).await?
        {
            restart = at;
            fill = batches;
        }
        // Never past records the WAL holds that were never committed (under `fail`, a
        // refused batch whose WAL copy is damaged): a restarted stream's start counts as
        // committed at the next recovery, which would serve the refused records after it.
        if let Some(held_back) = self.uncommitted_in_wal(OffsetRange::new(hole.start, restart)).await? {
            error!(
                topic = %self.topic, warm = %held, uncommitted = %held_back,
                "warm cannot be continued: the WAL holds records in the offsets before the next batch that were \
                 never committed and that no tier can give it (docs/reliability.md, known limits: 'a never-confirmed WAL batch that is then damaged blocks the topic')"
            );
            return Ok(false);
        }
        warm.restart_at(&self.topic, restart).await?;
        warn!(
            topic = %self.topic, dropped = %held, lost = %OffsetRange::new(hole.start, restart), at = restart,
            "restarted warm past offsets no tier holds; the WAL or cold holds everything warm held"
        );
        for (i, batch) in fill.into_iter().enumerate() {
            self.pending.insert(at + i, Pending::new(batch, true, false));
        }
        self.release_warm_hold();
        Ok(true)
    }

    /// Warm is continued past where its back-fill stopped: the floor follows the pending
    /// queue again.
    fn release_warm_hold(&mut self) {
        if let WarmState::Known { hold, .. } = &mut self.warm {
            *hold = None;
        }
    }

    /// The lowest WAL segment boundary in `(after, first)` from which the WAL gives every
    /// batch up to `first`, with those batches, if any (for a restart of warm after
    /// damage the WAL cannot give).
    async fn intact_from(
        &self,
        after: Offset,
        first: Offset,
    ) -> Result<Option<(Offset, Vec<RecordBatch>)>, TierError> {
        let mut bounds: Vec<Offset> = self
            .tiers
            .hot
            .sealed_segments(&self.topic)
            .iter()
            .flat_map(|s| [s.range.start, s.range.end])
            .filter(|&b| after < b && b < first)
            .collect();
        bounds.sort_unstable();
        bounds.dedup();
        for at in bounds {
            if let Some(batches) = self.whole_fill(at, first).await? {
                return Ok(Some((at, batches)));
            }
        }
        Ok(None)
    }

    /// The batches holding every offset of `[from, to)` as the WAL or cold gives them,
    /// if they can give all of it.
    async fn whole_fill(&self, from: Offset, to: Offset) -> Result<Option<Vec<RecordBatch>>, TierError> {
        let batches = batches_for_warm(&self.tiers, &self.topic, OffsetRange::new(from, to)).await?;
        let whole = batches.first().is_some_and(|b| b.base_offset() == from)
            && batches.last().is_some_and(|b| b.end_offset() == to);
        Ok(whole.then_some(batches))
    }

    /// The first offset in `range` at or after the commit point that the WAL holds — inside
    /// its range, in no gap it recorded, not skipped by a resume — if any: a record that was
    /// never committed (under `degrade` the commit point is past every record in the WAL).
    async fn uncommitted_in_wal(&self, range: OffsetRange) -> Result<Option<Offset>, TierError> {
        let wal = self.tiers.hot.range(&self.topic).await?;
        // Past the holes: no record is there.
        let at = self.past_holes(range.start.max(self.hwm.get()).max(wal.start));
        Ok((at < range.end.min(wal.end)).then_some(at))
    }

    /// Warm answered after being unreachable at open: queues, ahead of the pending
    /// batches, the WAL's records from warm's actual end to the first pending batch.
    async fn discover_warm(&mut self) -> Result<(), TierError> {
        let WarmState::Unknown { confirmed_from } = self.warm else { return Ok(()) };
        let Some(warm) = self.tiers.warm.clone() else {
            self.warm = WarmState::Disabled;
            self.publish_warm_floor();
            return Ok(());
        };
        // Taken over first, as at recovery: a writer that held the topic while warm was
        // unreachable writes nothing there after this.
        if let Some(epoch) =
            crate::recovery::claim(warm.as_ref(), &self.topic, &self.reservation.state_dir).await?
        {
            // Claims whose answers were lost while warm was unreachable skip epochs too, so
            // a skip here is only reported (see `recovery::take_ownership`).
            if !crate::recovery::wal_continues(self.tiers.hot.owner_epoch(&self.topic)?, epoch) {
                warn!(
                    topic = %self.topic, epoch,
                    "owner epochs were claimed while the warm tier was unreachable here: by this node's lost answers, or by another node"
                );
            }
            self.tiers.hot.record_owner_epoch(&self.topic, epoch)?;
        }
        let held = warm.range(&self.topic).await?;
        // It must hold none of the never-acknowledged records of offsets a degraded open
        // skipped: restarted past them (when the WAL or cold holds the rest), they are
        // forgotten; else they are never confirmed again (below).
        let mut unacked = self.tiers.unacked_of(&self.topic);
        let held = crate::recovery::drop_unacked(&self.tiers, &self.topic, held, &unacked).await?;
        if !unacked.iter().any(|r| crate::recovery::overlaps(*r, held)) {
            self.forget_unacked(&unacked).await?;
            unacked.clear();
        }
        let first = self.pending.front().map_or(self.next, |p| p.batch.base_offset());
        let mut backlog = Vec::new();
        // What warm holds past the last point known confirmed is confirmed again, as warm
        // stores it, before WAL retention may delete the WAL's copy.
        let (from, to) = (confirmed_from.max(held.start), held.end.min(first));
        let to = to.min(crate::tiers::first_unacked(&unacked, from));
        if !held.is_empty() && from < to {
            crate::recovery::warm_batches(&self.tiers, &self.topic, from, to, &mut backlog).await?;
        }
        // Warm continues at its end. An empty stream that never held the topic accepts any
        // base offset: it is sent the WAL's records from the last point known confirmed
        // (as recovery does), which only the WAL may hold — the topic was reopened while
        // warm was down. One whose next key names its end refuses a later base, and
        // `continue_warm` back-fills it from there.
        let fill_from = if held.is_empty() {
            let wal_start = self.tiers.hot.range(&self.topic).await?.start;
            confirmed_from.max(held.start).max(wal_start)
        } else {
            held.end
        };
        let mut hold = None;
        if fill_from < first && held.end <= first {
            let fill = batches_for_warm(&self.tiers, &self.topic, OffsetRange::new(fill_from, first)).await?;
            // The back-fill stopped short (offsets no tier holds lie in between): until warm
            // is continued past them, WAL retention keeps what warm lacks.
            let reached = self.past_holes(fill.last().map_or(fill_from, RecordBatch::end_offset));
            if reached < first {
                hold = Some(reached);
            }
            backlog.extend(fill);
        } else if held.end > self.next {
            warn!(
                topic = %self.topic, warm = %held, next = self.next,
                "warm holds offsets beyond the WAL's end (never acknowledged); its back-fill will be refused"
            );
        }
        for batch in backlog.into_iter().rev() {
            self.pending.push_front(Pending::new(batch, true, false));
        }
        info!(topic = %self.topic, warm = %held, "the warm tier answers again; back-filling it from its end");
        self.warm = WarmState::Known { behind: true, hold };
        self.publish_warm_floor();
        Ok(())
    }

    /// Warm holds none of the offsets degraded opens skipped (`unacked`): they need no
    /// remembering (`<topic>.unacked` and the WAL's `unacked` marker are removed, on the
    /// blocking pool).
    async fn forget_unacked(&self, unacked: &[OffsetRange]) -> Result<(), TierError> {
        if unacked.is_empty() {
            return Ok(());
        }
        let (dir, topic, tiers) =
            (self.reservation.state_dir.clone(), self.topic.clone(), Arc::clone(&self.tiers));
        tier_core::blocking::spawn(move || crate::state::write_unacked_copies(&tiers.hot, &dir, &topic, &[]))
            .await
            .map_err(|e| {
                TierError::internal(self.ctx(), "removing the unacknowledged offsets' file failed")
                    .with_source(e)
            })??;
        self.tiers.set_unacked(&self.topic, Vec::new());
        Ok(())
    }

    /// Where the holes starting at `at` end — the WAL's recorded gaps, the offsets a
    /// resume skipped and the losses recovery found no tier holding, which hold no
    /// record — or `at` itself outside them.
    fn past_holes(&self, at: Offset) -> Offset {
        let mut holes = self.tiers.hot.gaps(&self.topic);
        holes.extend(self.skipped);
        holes.extend(self.holes.iter().copied());
        holes.sort_by_key(|h| h.start);
        let mut at = at;
        for hole in holes {
            if hole.start <= at && at < hole.end {
                at = hole.end;
            }
        }
        at
    }

    /// Moves the high watermark over committed batches and forgets batches every write
    /// tier holds.
    fn advance(&mut self) {
        let mut hwm = self.hwm.get();
        for p in &self.pending {
            if !self.is_committed(p) {
                break;
            }
            // The commit point moves over offsets no batch here holds only where no record
            // is: a gap the WAL recorded, or offsets a resume skipped. Records the WAL holds
            // below the batch that were never committed (a backlog recovery could not
            // queue for warm: damaged, with no intact copy) keep it where it is.
            // (`past_holes(hwm)` is at least `hwm`: asked only for a batch past it.)
            if p.batch.base_offset() > hwm && p.batch.base_offset() > self.past_holes(hwm) {
                break;
            }
            hwm = hwm.max(p.batch.end_offset());
        }
        // And over a hole it reaches (a reader from the latest offset starts after it) —
        // not past a batch still waiting to be committed: a torn point's records are a
        // WAL gap that warm's copies fill, which under `fail` recovery sends to be
        // confirmed again, and until warm confirms them they are not readable.
        let waiting = self.pending.iter().find(|p| !self.is_committed(p)).map(|p| p.batch.base_offset());
        let hwm = self.past_holes(hwm).min(waiting.unwrap_or(Offset::MAX).max(hwm));
        while self.pending.front().is_some_and(|p| p.in_wal && p.in_warm) {
            self.pending.pop_front();
        }
        if let WarmState::Known { behind: behind @ true, .. } = &mut self.warm
            && self.pending.iter().all(|p| p.in_warm)
        {
            *behind = false;
            info!(topic = %self.topic, "the warm tier holds every batch again");
        }
        if hwm > self.hwm.get() {
            self.hwm.set(hwm);
        }
        self.publish_warm_floor();
    }
}

/// The answer to an append the tiers did not all confirm, caused by `cause` (the first
/// failure met, when there was one), which it carries as its source. It keeps the kind of
/// a cause that tells the producer more than "retry later" — `Fenced` (another writer owns
/// the position: stop writing), `Corruption`, `Internal`, `Closed` — and is `Unavailable`
/// otherwise: a tier's `InvalidInput`, `Trimmed` or `NotFound` on the router's own batch is
/// nothing the producer can fix, and the writer keeps the records pending for the tiers
/// that lack them.
fn not_acknowledged(ctx: ErrorContext, message: String, cause: Option<&Arc<TierError>>) -> TierError {
    let Some(cause) = cause else { return TierError::unavailable(ctx, message) };
    match cause.kind() {
        ErrorKind::Fenced | ErrorKind::Corruption | ErrorKind::Internal | ErrorKind::Closed => {
            TierError::caused_by(ctx, message, Arc::clone(cause))
        }
        _ => TierError::unavailable(ctx, message).with_source(Arc::clone(cause)),
    }
}

/// The batches of `group` numbered from `base` in order, each as the producer encoded it
/// (only the base offset in its prefix changes: the CRC covers the body), each with its
/// reply, in the group's own vector; the group unnumbered and the error when the last
/// batch would pass `u64::MAX`.
fn number(group: Group, base: Offset) -> Result<Group, (Group, TierError)> {
    let mut at = base;
    for (batch, _) in &group {
        match at.checked_add(u64::from(batch.record_count())) {
            Some(end) => at = end,
            None => {
                let e = match batch.clone().try_with_base_offset(at) {
                    Err(e) => e,
                    Ok(_) => TierError::invalid(ErrorContext::default().offset(at), "offsets past u64::MAX"),
                };
                return Err((group, e));
            }
        }
    }
    let mut at = base;
    Ok(group
        .into_iter()
        .map(|(batch, done)| {
            let batch = batch.with_base_offset(at);
            at = batch.end_offset();
            (batch, done)
        })
        .collect())
}
