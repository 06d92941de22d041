//! [`TieredStore`]: the enabled tiers, the topics and their writer tasks, the background
//! tasks, and opening (with recovery) and closing.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::Mutex;
use tier_core::{
    ErrorContext, IntoTopicName, Offset, RecordBatch, Tier, TierError, TierExt, TierKind, TopicName,
};
use tier_hot::{HotConfig, HotTier};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{error, warn};

#[cfg(feature = "testkit")]
use crate::backend::{ColdBackend, WarmBackend};
use crate::commit_point::CommitPoint;
use crate::config::RouterConfig;
use crate::recovery::{RecoveryReport, recover_topic, resume_at};
use crate::reservation::Reservation;
use crate::state::{
    Checkpoint, has_state, read_checkpoint, remove_fence, remove_losses_copies, write_checkpoint,
};
use crate::tiers::Tiers;
use crate::topic::{Topic, TopicCore};
use crate::writer::Writer;

/// Requests queued per topic before producers wait for the writer.
const WRITER_QUEUE: usize = 1024;

#[derive(Debug)]
pub(crate) struct StoreInner {
    pub(crate) tiers: Arc<Tiers>,
    /// The open topics. Never held across I/O: a topic is recovered under its own gate
    /// (`opening`), and only its finished core is put here.
    pub(crate) topics: Mutex<HashMap<TopicName, Arc<TopicCore>>>,
    /// One gate per topic being (or once) opened: one recovery of a topic at a time,
    /// while other topics open and the open ones serve.
    pub(crate) opening: Mutex<HashMap<TopicName, Arc<tokio::sync::Mutex<()>>>>,
    /// Topics whose last recovery failed, with its error (see
    /// [`TieredStore::failed_topics`]); never in `topics` at the same time.
    pub(crate) failed: Mutex<HashMap<TopicName, Arc<TierError>>>,
    pub(crate) background: Mutex<Vec<JoinHandle<()>>>,
    pub(crate) shutdown: watch::Sender<bool>,
    pub(crate) export_lock: tokio::sync::Mutex<()>,
    pub(crate) closed: AtomicBool,
    pub(crate) state_dir: PathBuf,
    /// The state directory's lock (`state::claim_state_dir`), held until
    /// [`TieredStore::close`], [`TieredStore::abort`] or drop.
    pub(crate) state_lock: Mutex<Option<std::fs::File>>,
}

/// Any subset of tiers as one log per topic: the WAL always, warm and cold when
/// configured. Cheap to clone (clones share the store).
///
/// Open it with [`TieredStore::open`] (from a [`StoreConfig`](crate::StoreConfig)) or
/// [`TieredStore::builder`] (from parts, e.g. custom [`WarmBackend`](crate::WarmBackend)/[`ColdBackend`](crate::ColdBackend)
/// implementations), inside a tokio runtime. Topics are created on first use
/// ([`topic`](Self::topic)); every topic found in the WAL, or named at open, is recovered
/// first (see [`RecoveryReport`]). [`close`](Self::close) stops everything gracefully.
#[derive(Clone, Debug)]
pub struct TieredStore {
    pub(crate) inner: Arc<StoreInner>,
}

impl TieredStore {
    /// The handle of topic `name`, creating (or recovering) the topic on first use.
    /// `InvalidInput` for an invalid name.
    pub async fn topic(&self, name: impl IntoTopicName) -> Result<Topic, TierError> {
        let name = name.into_topic_name()?;
        let core = self.core(&name).await?;
        Ok(Topic { tiers: Arc::clone(&self.inner.tiers), core })
    }

    /// The handle of topic `name` if the topic exists — it is open, or the WAL, the
    /// router's state files, warm or cold hold anything of it — opening (recovering) it
    /// as [`topic`](Self::topic) does; `NotFound` otherwise, having written nothing (no
    /// state file, no WAL directory, no cold marker). For readers, which must not create
    /// the topics they ask for.
    ///
    /// Errors: `NotFound` for a topic no tier knows; `InvalidInput` for an invalid name;
    /// a tier's error (`Unavailable`, …) when warm or cold cannot say whether they hold
    /// the topic; `Closed` once the store is closed.
    pub async fn existing_topic(&self, name: impl IntoTopicName) -> Result<Topic, TierError> {
        let name = name.into_topic_name()?;
        if !self.topic_exists(&name).await? {
            return Err(TierError::not_found(
                ErrorContext::tier(TierKind::Router).topic(&name),
                format!("topic '{name}' does not exist"),
            ));
        }
        self.topic(name).await
    }

    /// Whether topic `name` exists (see [`existing_topic`](Self::existing_topic)), asking
    /// the cheapest sources first; reads only.
    async fn topic_exists(&self, name: &TopicName) -> Result<bool, TierError> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(TierError::closed(
                ErrorContext::tier(TierKind::Router).topic(name),
                "the store is closed",
            ));
        }
        let tiers = &self.inner.tiers;
        if self.inner.topics.lock().contains_key(name)
            || self.inner.failed.lock().contains_key(name)
            || tiers.hot.topics().contains(name)
            || tiers.hot.damaged().iter().any(|(t, _)| t == name)
            || has_state(&self.inner.state_dir, name)
        {
            return Ok(true);
        }
        // A topic marker records a topic before its first offset is handed out; the
        // ranges find topics written before markers existed.
        if let Some(warm) = &tiers.warm
            && (warm.topic_recorded(name).await? || !warm.range(name).await?.is_empty())
        {
            return Ok(true);
        }
        if let Some(cold) = &tiers.cold
            && (cold.topic_recorded(name).await? || !cold.range(name).await?.is_empty())
        {
            return Ok(true);
        }
        Ok(false)
    }

    /// Recovers topic `name` from warm and cold if it is not open yet (for a topic the
    /// WAL does not know, after a lost disk) and returns what recovery found.
    pub async fn recover_topic(&self, name: impl IntoTopicName) -> Result<RecoveryReport, TierError> {
        let name = name.into_topic_name()?;
        Ok(self.core(&name).await?.report.lock().clone())
    }

    /// The operator's decision for a topic whose acknowledged end is unknown
    /// ([`RecoveryReport::end_unknown`]: the WAL and the router's state files were lost
    /// while another tier holds records): appends continue at `at`, which must be at
    /// least [`RecoveryReport::next_offset`]. Offsets from there to `at` are never used and
    /// are reported in [`RecoveryReport::maybe_lost`] (and recorded as lost — in the WAL
    /// when it holds records replayed from warm, and in cold — so the export continues).
    /// Choose `at` at or beyond the last offset any producer was told it holds;
    /// `next_offset` itself accepts that offsets beyond it may be handed out a second time.
    ///
    /// The skipped offsets are recorded before the fence is lifted, so a failure leaves the
    /// topic fenced and the call can simply be repeated (recording a gap is idempotent).
    ///
    /// Errors: `InvalidInput` when the topic's end is known, or `at` is below the next
    /// offset; `Unavailable` when a tier could not record the skipped offsets (the cold
    /// tier's gap marker PUT failed, say): the topic stays fenced, retry later.
    pub async fn resume_topic(
        &self,
        name: impl IntoTopicName,
        at: Offset,
    ) -> Result<RecoveryReport, TierError> {
        let name = name.into_topic_name()?;
        let core = self.core(&name).await?;
        let ctx = || ErrorContext::tier(TierKind::Router).topic(&name);
        let closed = || TierError::closed(ctx(), "the store is closed");
        // One resume (or export) at a time: the gaps recorded must match the `at` applied.
        let _serial = self.inner.export_lock.lock().await;
        let tiers = &self.inner.tiers;
        let next = {
            let report = core.report.lock();
            if !report.end_unknown {
                return Err(TierError::invalid(
                    ctx(),
                    "the topic's acknowledged end is known; it needs no resume",
                ));
            }
            report.next_offset
        };
        let wal = tiers.hot.range(&name).await?;
        let next = next.max(wal.end);
        if at < next {
            return Err(TierError::invalid(
                ctx().offset(at),
                format!("cannot resume at {at}: the tiers already hold offsets up to {next}"),
            ));
        }
        // Record the skipped offsets first — cold everything from its end to the WAL's
        // first offset, then the WAL (one replayed from warm records a gap up to `at`, an
        // empty one starts its segment file at `at`): until that has worked the topic
        // stays fenced and nothing is handed out. The WAL comes last because its file at
        // `at` is itself evidence of the topic's end: after it, a restart opens the topic
        // unfenced, so everything else must be recorded by then.
        // The operator said where the topic continues: a WAL a recovery was rebuilding
        // vouches for its end again (the same plan's last effect).
        resume_at(tiers, &self.inner.state_dir, &name, wal, at).await?;
        let (done, answer) = tokio::sync::oneshot::channel();
        core.send(crate::writer::Command::Resume { at, done }).await?;
        let skipped = answer.await.map_err(|_| closed())??;
        // The writer reserved `at` durably: that is the evidence of the end from now on.
        let state_dir = self.inner.state_dir.clone();
        let fence_topic = name.clone();
        tier_core::blocking::spawn(move || remove_fence(&state_dir, &fence_topic))
            .await
            .map_err(|e| TierError::internal(ctx(), "the fence task failed").with_source(e))??;
        let mut report = core.report.lock();
        if !skipped.is_empty() {
            report.maybe_lost.push(skipped);
        }
        report.end_unknown = false;
        report.next_offset = at;
        Ok(report.clone())
    }

    /// What recovery found for every open topic, sorted by topic.
    pub async fn recovery_reports(&self) -> Vec<RecoveryReport> {
        let mut reports: Vec<_> = self.cores().await.iter().map(|c| c.report.lock().clone()).collect();
        reports.sort_by(|a, b| a.topic.cmp(&b.topic));
        reports
    }

    /// The topics whose recovery failed (at open, or at their last
    /// [`topic`](Self::topic) call), sorted, each with the error it gave. Such a topic is
    /// not open: no background task runs for it, and `topic` (or
    /// [`recover_topic`](Self::recover_topic)) tries its recovery again, answering the
    /// error while it fails. A topic the WAL kept aside as damaged fails until its files
    /// are repaired and the store reopened (see `docs/hot.md`, "A damaged topic").
    pub fn failed_topics(&self) -> Vec<(TopicName, Arc<TierError>)> {
        let mut failed: Vec<_> =
            self.inner.failed.lock().iter().map(|(name, e)| (name.clone(), Arc::clone(e))).collect();
        failed.sort_by(|a, b| a.0.cmp(&b.0));
        failed
    }

    /// True when topic `name` is open (recovered, with its writer running).
    pub(crate) async fn is_open(&self, name: &TopicName) -> bool {
        self.inner.topics.lock().contains_key(name)
    }

    /// The open topics, sorted.
    pub async fn topics(&self) -> Vec<TopicName> {
        let mut names: Vec<_> = self.inner.topics.lock().keys().cloned().collect();
        names.sort();
        names
    }

    /// The WAL as the store shows it: what it holds, read as history, and its rotation —
    /// never an append, which only a topic's writer makes ([`Topic::append`]).
    pub fn wal(&self) -> Wal<'_> {
        Wal(&self.inner.tiers.hot)
    }

    /// The wall clock the store reads time from ([`StoreBuilder::clock`](crate::StoreBuilder::clock),
    /// default the system clock): the WAL's segment creation and seal times, and the
    /// "now" the background deleter passes to [`run_retention_now`](Self::run_retention_now).
    /// A caller running retention itself passes `store.clock().now()` for the same
    /// answer. A clock going backwards deletes nothing young (see [`tier_core::clock`]).
    pub fn clock(&self) -> &tier_core::clock::SharedClock {
        &self.inner.tiers.hot.config().clock
    }

    /// The WAL itself, for the router's own tasks.
    pub(crate) fn hot(&self) -> &HotTier {
        &self.inner.tiers.hot
    }

    /// The warm backend, when enabled — for tests and the simulation only (feature
    /// `testkit`): the backend takes appends, which must go through a topic's writer.
    #[cfg(feature = "testkit")]
    pub fn warm(&self) -> Option<&Arc<dyn WarmBackend>> {
        self.inner.tiers.warm.as_ref()
    }

    /// The cold backend, when enabled — for tests and the simulation only (feature
    /// `testkit`), like [`TieredStore::warm`].
    #[cfg(feature = "testkit")]
    pub fn cold(&self) -> Option<&Arc<dyn ColdBackend>> {
        self.inner.tiers.cold.as_ref()
    }

    /// The router settings.
    pub fn config(&self) -> &RouterConfig {
        &self.inner.tiers.config
    }

    pub(crate) async fn core(&self, name: &TopicName) -> Result<Arc<TopicCore>, TierError> {
        let (core, recovered) = self.core_kept(name).await?;
        if recovered {
            self.hand_out_report(name, &core).await;
        }
        Ok(core)
    }

    /// The open topic `name`, recovered (and its writer started) if it was not open, and
    /// whether this call recovered it; the losses its recovery kept in the state
    /// directory stay there until [`hand_out_report`](Self::hand_out_report).
    pub(crate) async fn core_kept(&self, name: &TopicName) -> Result<(Arc<TopicCore>, bool), TierError> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(TierError::closed(
                ErrorContext::tier(TierKind::Router).topic(name),
                "the store is closed",
            ));
        }
        if let Some(core) = self.inner.topics.lock().get(name) {
            return Ok((Arc::clone(core), false));
        }
        // One recovery of this topic at a time, under its own gate; a caller that waited
        // for another's finds the topic open.
        let gate = Arc::clone(self.inner.opening.lock().entry(name.clone()).or_default());
        let _opening = gate.lock().await;
        if let Some(core) = self.inner.topics.lock().get(name) {
            return Ok((Arc::clone(core), false));
        }
        let core = self.open_core(name).await?;
        self.inner.topics.lock().insert(name.clone(), Arc::clone(&core));
        // A close that began meanwhile may have stopped the writers before this one was
        // listed: stop it here (taking the queue and the task is idempotent).
        if self.inner.closed.load(Ordering::SeqCst) {
            stop_writers(std::slice::from_ref(&core)).await;
            return Err(TierError::closed(
                ErrorContext::tier(TierKind::Router).topic(name),
                "the store is closed",
            ));
        }
        Ok((core, true))
    }

    /// The report of the topic `core` (just recovered) is handed out (and logged): the
    /// losses kept for it are done with. Not before: a store whose open fails after this
    /// topic recovered (another topic's tier unreachable) is dropped with its reports,
    /// and the next open must report the losses again.
    pub(crate) async fn hand_out_report(&self, name: &TopicName, core: &TopicCore) {
        // A report without losses had none kept (recovery writes the file only for losses).
        let had_losses = {
            let report = core.report.lock();
            !report.lost.is_empty() || !report.maybe_lost.is_empty()
        };
        if had_losses {
            let (state_dir, done_topic) = (self.inner.state_dir.clone(), name.clone());
            let hot = self.inner.tiers.hot.clone();
            match tier_core::blocking::spawn(move || remove_losses_copies(&hot, &state_dir, &done_topic))
                .await
            {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    warn!(topic = %name, error = %e.report(), "removing the recorded losses failed")
                }
                Err(e) => warn!(topic = %name, error = %e, "removing the recorded losses failed"),
            }
        }
    }

    /// Recovers topic `name` and starts its writer (the caller holds its gate).
    async fn open_core(&self, name: &TopicName) -> Result<Arc<TopicCore>, TierError> {
        let tiers = &self.inner.tiers;
        let recovered = match recover_topic(tiers, &self.inner.state_dir, name).await {
            Ok(recovered) => {
                self.inner.failed.lock().remove(name);
                recovered
            }
            Err(e) => {
                error!(topic = %name, error = %e.report(), "recovering a topic failed; it stays closed");
                let e = Arc::new(e);
                self.inner.failed.lock().insert(name.clone(), Arc::clone(&e));
                return Err(recovery_failed(e));
            }
        };
        let next = recovered.report.next_offset;
        let (hwm_tx, hwm) = CommitPoint::new(recovered.committed);
        let durable = tiers.hot.config().fsync == tier_hot::FsyncPolicy::Always;
        let reservation = Reservation::new(
            self.inner.state_dir.clone(),
            recovered.reservation.map_or(0, |r| r.offset),
            tiers.boot_id.clone(),
            durable,
            Arc::clone(&tiers.state_writes),
        );
        let mut writer = Writer::new(name.clone(), Arc::clone(tiers), next, hwm_tx, reservation);
        writer.recovered_holes(recovered.holes);
        // Warm's back-fill stopped short of the WAL's end (offsets no tier holds lie in
        // between): until warm is continued, WAL retention (without cold) keeps what warm lacks.
        if let Some(warm) = recovered.report.warm {
            if !warm.is_empty() {
                let reached = recovered.backlog.last().map_or(warm.end, |b| b.end_offset().max(warm.end));
                if reached < next {
                    writer.hold_warm_floor(reached);
                }
            } else if let Some(fill) = recovered.report.warm_backfill {
                // An empty stream (a failover to a replica that had none of it) takes a
                // later batch at any offset: without a hold the floor would pass what its
                // back-fill never reached, and retention delete the WAL's only copy.
                let reached = recovered.backlog.last().map_or(fill.start, RecordBatch::end_offset);
                if reached < fill.end {
                    writer.hold_warm_floor(reached);
                }
            }
        }
        writer.queue_backlog(recovered.backlog);
        tiers.set_unacked(name, recovered.unacked);
        if recovered.report.warm_unreachable {
            writer.warm_unknown(recovered.warm_confirmed_from);
        }
        writer.settle_backlog().await;
        if recovered.report.end_unknown {
            writer.fence(format!(
                "the router's state files of topic '{name}' were lost and the WAL cannot vouch for its end: nothing \
                 bounds the offsets acknowledged beyond {next}, which would be reused; resume the topic at an offset \
                 at or beyond the last one acknowledged (TieredStore::resume_topic, tierlog recover --topic {name} \
                 --resume-at N)"
            ));
        }
        writer.cover_recovered_end().await?;
        let warm_floor = writer.warm_floor();
        let (tx, rx) = mpsc::channel(WRITER_QUEUE);
        let writer = Arc::new(tokio::sync::Mutex::new(writer));
        let (queued, wake) = (Arc::new(AtomicUsize::new(0)), Arc::new(Notify::new()));
        let task = tokio::spawn(Writer::run(Arc::clone(&writer), rx, Arc::clone(&queued), Arc::clone(&wake)));
        Ok(Arc::new(TopicCore {
            name: name.clone(),
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            queued,
            arrivals: Mutex::new(crate::topic::Arrivals::default()),
            wake,
            hwm,
            task: Mutex::new(Some(task)),
            report: Mutex::new(recovered.report),
            warm_floor,
        }))
    }

    /// Every open topic's core.
    pub(crate) async fn cores(&self) -> Vec<Arc<TopicCore>> {
        self.inner.topics.lock().values().cloned().collect()
    }

    /// Writes each open topic's commit point to the router's state directory (used by
    /// recovery to report the range a lost WAL took with it). `Closed` once the store is
    /// closed (closing writes the last checkpoints itself).
    pub async fn checkpoint(&self) -> Result<(), TierError> {
        if self.inner.closed.load(Ordering::SeqCst) {
            return Err(TierError::closed(ErrorContext::tier(TierKind::Router), "the store is closed"));
        }
        self.write_checkpoints().await
    }

    async fn write_checkpoints(&self) -> Result<(), TierError> {
        // A topic whose acknowledged end is unknown writes none: a checkpoint would pass
        // for evidence of where its offsets end.
        let has_warm = self.inner.tiers.warm.is_some();
        let entries: Vec<(TopicName, Checkpoint)> = self
            .cores()
            .await
            .iter()
            .filter(|c| !c.report.lock().end_unknown)
            .map(|c| {
                let end = c.hwm.get();
                // What warm confirmed (the warm floor; 0 while warm's end is unknown).
                let warm = has_warm.then(|| c.warm_floor.load(Ordering::Acquire));
                (c.name.clone(), Checkpoint { end, warm })
            })
            .collect();
        let dir = self.inner.state_dir.clone();
        tier_core::blocking::spawn(move || {
            for (topic, checkpoint) in entries {
                // An unchanged checkpoint is not rewritten: a store opened to read
                // (`tierlog consume`) leaves the state directory as it found it.
                if read_checkpoint(&dir, &topic).is_ok_and(|held| held == Some(checkpoint)) {
                    continue;
                }
                write_checkpoint(&dir, &topic, checkpoint)?;
            }
            Ok(())
        })
        .await
        .map_err(|e| {
            TierError::internal(ErrorContext::tier(TierKind::Router), "the checkpoint task failed")
                .with_source(e)
        })?
    }

    /// Stops gracefully: the background tasks (an upload in flight finishes), then each
    /// topic's writer after the appends already queued (a last attempt is made to give
    /// warm what it lacks), then writes checkpoints, closes the WAL and releases the state
    /// directory's lock (another store may open it then). Later calls — on
    /// the store, its topic handles and open readers — fail with `Closed`, which is not
    /// retryable.
    pub async fn close(&self) {
        if self.inner.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = self.inner.shutdown.send(true);
        let tasks: Vec<_> = self.inner.background.lock().drain(..).collect();
        for task in tasks {
            if let Err(e) = task.await {
                warn!(error = %e, "a background task failed");
            }
        }
        stop_writers(&self.cores().await).await;
        if let Err(e) = self.write_checkpoints().await {
            warn!(error = %e.report(), "writing checkpoints at close failed");
        }
        self.inner.tiers.hot.close().await;
        drop(self.inner.state_lock.lock().take());
    }
}

impl TieredStore {
    /// Blocks the calling thread until no offset reservation is being written ahead on
    /// the blocking pool (the writer starts the next one before it is needed; see
    /// `docs/router.md`, "Offset reservation"). For tests and simulations that stop a
    /// process at a chosen point: what the reservation file holds afterwards then does not
    /// depend on when a blocking thread ran. Never call it from a runtime's thread.
    #[doc(hidden)]
    pub fn wait_for_state_writes(&self) {
        self.inner.tiers.state_writes.wait();
    }

    /// Stops at once, as a crash (SIGKILL) would: the background tasks and every writer
    /// are aborted where they are — no queued append is settled, no checkpoint written,
    /// no reservation lowered. The WAL is closed, which fsyncs what it holds unsynced (a
    /// killed process leaves it in the OS page cache; a power-cut simulation cuts the
    /// files back to what it counts as durable), and the state directory's lock released,
    /// as a dead process's would be. Once every handle of the
    /// store is dropped, the data directory can be opened again, which runs recovery as
    /// after a crash. For tests and simulations; [`close`](Self::close) is the shutdown.
    pub async fn abort(&self) {
        self.inner.closed.store(true, Ordering::SeqCst);
        let _ = self.inner.shutdown.send(true);
        // The tasks stop first, where they are: a writer task whose queue closed first
        // would run its shutdown (lowering the offset reservation), which a killed
        // process never does.
        let cores = self.cores().await;
        let mut tasks: Vec<_> = self.inner.background.lock().drain(..).collect();
        tasks.extend(cores.iter().filter_map(|core| core.task.lock().take()));
        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            let _ = task.await;
        }
        for core in cores {
            core.tx.lock().take();
            core.writer.lock().take();
        }
        self.inner.tiers.hot.close().await;
        drop(self.inner.state_lock.lock().take());
    }
}

/// The store's WAL, read-only but for [`rotate`](Self::rotate): see [`TieredStore::wal`].
/// Appends bypassing the writer would pass the offset reservation, warm and the commit
/// point, so there is no way to make one here:
///
/// ```compile_fail
/// # use tier_router::{RecordBatch, Tier, TieredStore, TopicName};
/// # async fn bypass(store: TieredStore, name: TopicName, batch: RecordBatch) {
/// store.wal().append(&name, batch).await; // no such method: appends go through a topic
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Wal<'a>(&'a HotTier);

impl Wal<'_> {
    /// The WAL writer's counters of `topic` since the store opened — batches, group writes,
    /// fsyncs (`None` for a topic the WAL has not seen).
    pub fn write_stats(&self, topic: impl IntoTopicName) -> Option<tier_hot::WriteStats> {
        self.0.write_stats(&topic.into_topic_name().ok()?)
    }

    /// The offsets the WAL holds of `topic` (empty at its next offset when it holds none).
    pub async fn range(&self, topic: impl IntoTopicName) -> Result<tier_core::OffsetRange, TierError> {
        self.0.range(&topic.into_topic_name()?).await
    }

    /// The WAL's records of `topic` in `from..to` within `limit`, as [`TierExt::read`] —
    /// uncommitted ones included (the topic's readers serve committed records only).
    pub async fn read(
        &self,
        topic: impl IntoTopicName,
        from: Offset,
        to: Offset,
        limit: tier_core::ReadLimit,
    ) -> Result<Vec<tier_core::Record>, TierError> {
        self.0.read(&topic.into_topic_name()?, from, to, limit).await
    }

    /// The first offset of `topic` whose record's timestamp is at or after `timestamp`,
    /// as [`Tier::offset_for_timestamp`].
    pub async fn offset_for_timestamp(
        &self,
        topic: impl IntoTopicName,
        timestamp: tier_core::Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        self.0.offset_for_timestamp(&topic.into_topic_name()?, timestamp).await
    }

    /// The sealed segments of `topic`, oldest first (none for an invalid name).
    pub fn sealed_segments(&self, topic: impl IntoTopicName) -> Vec<tier_hot::SegmentInfo> {
        topic.into_topic_name().map(|t| self.0.sealed_segments(&t)).unwrap_or_default()
    }

    /// The offsets the WAL recorded as lost (its gap markers) for `topic` (none for an
    /// invalid name).
    pub fn gaps(&self, topic: impl IntoTopicName) -> Vec<tier_core::OffsetRange> {
        topic.into_topic_name().map(|t| self.0.gaps(&t)).unwrap_or_default()
    }

    /// The offsets of `topic` the WAL wrote but could not fsync when its writer failed:
    /// refused, yet in the file (see [`HotTier::unsynced`]); `None` when no fsync failed
    /// since the store opened (or for an invalid name).
    pub fn unsynced(&self, topic: impl IntoTopicName) -> Option<tier_core::OffsetRange> {
        topic.into_topic_name().ok().and_then(|t| self.0.unsynced(&t))
    }

    /// The topics the WAL kept aside as damaged at open, with their errors.
    pub fn damaged(&self) -> Vec<(TopicName, TierError)> {
        self.0.damaged()
    }

    /// The topics the WAL holds.
    pub fn topics(&self) -> Vec<TopicName> {
        self.0.topics()
    }

    /// The WAL's settings.
    pub fn config(&self) -> &HotConfig {
        self.0.config()
    }

    /// Seals `topic`'s active segment now (`None` when it is empty), as the size and age
    /// limits would; the exporter may then store it in cold once it is committed.
    pub async fn rotate(
        &self,
        topic: impl IntoTopicName,
    ) -> Result<Option<tier_hot::SegmentInfo>, TierError> {
        self.0.rotate(&topic.into_topic_name()?).await
    }
}

/// Stops the writers of `cores` after the appends already queued (a last attempt is made
/// to give warm what it lacks).
async fn stop_writers(cores: &[Arc<TopicCore>]) {
    for core in cores {
        core.tx.lock().take();
        core.writer.lock().take();
    }
    for core in cores {
        let task = core.task.lock().take();
        if let Some(task) = task
            && let Err(e) = task.await
        {
            warn!(topic = %core.name, error = %e, "a writer task failed");
        }
    }
}

/// What a caller gets for a recovery failure `e` the store also keeps (see
/// [`TieredStore::failed_topics`]): an error of `e`'s kind and context (a caller may look
/// for the damaged file's location) with `e` itself, shared, as its source.
fn recovery_failed(e: Arc<TierError>) -> TierError {
    let ctx = e.context().clone();
    TierError::caused_by(ctx, "recovering the topic failed", e)
}

impl Drop for StoreInner {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}
