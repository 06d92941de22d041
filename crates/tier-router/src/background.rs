//! Background work owned by the store: the exporter (sealed WAL segments → cold), the
//! deleter (WAL retention, never deleting what cold does not hold) and the warm trimmer
//! (keep the last N closed segments, never trimming what cold does not hold), with the
//! on-demand entry points the CLI and tests call.
//!
//! The tasks hold only a weak reference to the store and stop when it closes. An upload
//! in flight when the store closes is finished (the task is only interrupted while
//! waiting); an upload cut short by a crash is simply redone at the next start, which is
//! safe because storing a segment is idempotent.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use tier_core::segment::{SealedSegment, SegmentHeader, SegmentWriter};
use tier_core::{ErrorContext, IntoTopicName, Offset, OffsetRange, Tier, TierError, TierKind, TopicName};
use tier_hot::{SegmentEvent, SegmentInfo};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::store::{StoreInner, TieredStore};
use crate::topic::TopicCore;

/// A segment the exporter stored in cold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportedSegment {
    /// The topic.
    pub topic: TopicName,
    /// The segment's offsets.
    pub range: OffsetRange,
}

/// Starts the exporter (when cold is enabled) and the maintenance task.
pub(crate) fn spawn_all(store: &TieredStore) {
    let weak = Arc::downgrade(&store.inner);
    let mut tasks = Vec::new();
    if store.inner.tiers.cold.is_some() {
        let events = store.inner.tiers.hot.segment_events();
        tasks.push(tokio::spawn(exporter(weak.clone(), events, store.inner.shutdown.subscribe())));
    }
    tasks.push(tokio::spawn(maintenance(weak, store.inner.shutdown.subscribe())));
    store.inner.background.lock().extend(tasks);
}

fn upgrade(weak: &Weak<StoreInner>) -> Option<TieredStore> {
    weak.upgrade().map(|inner| TieredStore { inner })
}

/// Sleeps `delay`, returning `false` if the store shuts down first.
async fn wait(shutdown: &mut watch::Receiver<bool>, delay: Duration) -> bool {
    if *shutdown.borrow() {
        return false;
    }
    // Biased (polled in order, shutdown first) rather than random: what runs never
    // depends on a coin, so a simulated schedule replays exactly.
    tokio::select! {
        biased;
        _ = shutdown.changed() => false,
        () = tokio::time::sleep(delay) => true,
    }
}

async fn exporter(
    weak: Weak<StoreInner>,
    mut events: tokio::sync::broadcast::Receiver<SegmentEvent>,
    mut shutdown: watch::Receiver<bool>,
) {
    let Some(sweep) = upgrade(&weak).map(|s| s.config().export_sweep_interval) else { return };
    // A first sweep exports what a previous run left behind.
    let mut due: Option<Option<TopicName>> = Some(None);
    // Topics whose newest sealed segment ends past the commit point: the router's writer
    // writes a group in its own task, so a rotation inside a group seals a segment
    // holding batches it commits a moment later. Each waits for its commit point to
    // reach that end, then the topic is exported again.
    let mut uncommitted: HashSet<TopicName> = HashSet::new();
    let mut commits: FuturesUnordered<BoxFuture<'static, TopicName>> = FuturesUnordered::new();
    loop {
        if let Some(which) = due.take() {
            let Some(store) = upgrade(&weak) else { return };
            let topics = match which {
                Some(t) => vec![t],
                None => store.hot().topics(),
            };
            for topic in topics {
                // A topic whose recovery failed is not open: nothing of it is exported.
                if !store.is_open(&topic).await {
                    continue;
                }
                if !export_with_retry(&store, &topic, &mut shutdown).await {
                    return;
                }
                if let Some(wait) = store.sealed_past_commit(&topic)
                    && uncommitted.insert(topic.clone())
                {
                    commits.push(Box::pin(async move {
                        wait.await;
                        topic
                    }));
                }
            }
        }
        if *shutdown.borrow() {
            return;
        }
        // Biased, shutdown first: a segment sealed just before `close` is left to the
        // next run's first sweep rather than to a coin (see `wait`).
        tokio::select! {
            biased;
            _ = shutdown.changed() => return,
            Some(topic) = commits.next(), if !commits.is_empty() => {
                uncommitted.remove(&topic);
                due = Some(Some(topic));
            }
            event = events.recv() => match event {
                Ok(SegmentEvent::Sealed(info)) => due = Some(Some(info.topic)),
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => due = Some(None),
                Err(RecvError::Closed) => return,
            },
            () = tokio::time::sleep(sweep) => due = Some(None),
        }
    }
}

/// Exports `topic`'s sealed segments, retrying with backoff until it works or the store
/// shuts down (then `false`).
async fn export_with_retry(
    store: &TieredStore,
    topic: &TopicName,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    let backoff = store.config().export_retry;
    let mut attempt = 0;
    loop {
        match store.export_sealed_of(topic).await {
            Ok(_) => return true,
            Err(e) => {
                let delay = backoff.delay(attempt);
                warn!(topic = %topic, error = %e.report(), retry_in = ?delay, "exporting a sealed segment failed");
                attempt = attempt.saturating_add(1);
                if !wait(shutdown, delay).await {
                    return false;
                }
            }
        }
    }
}

async fn maintenance(weak: Weak<StoreInner>, mut shutdown: watch::Receiver<bool>) {
    let Some(interval) = upgrade(&weak).map(|s| s.config().retention_interval) else { return };
    while wait(&mut shutdown, interval).await {
        let Some(store) = upgrade(&weak) else { return };
        if let Err(e) = store.run_retention_now(store.clock().now()).await {
            warn!(error = %e.report(), "WAL retention failed");
        }
        if let Err(e) = store.trim_warm_now().await {
            warn!(error = %e.report(), "trimming warm failed");
        }
        if let Err(e) = store.checkpoint().await {
            warn!(error = %e.report(), "writing checkpoints failed");
        }
    }
}

fn no_cold(topic: &TopicName) -> TierError {
    TierError::invalid(ErrorContext::tier(TierKind::Router).topic(topic), "the cold tier is not enabled")
}

impl TieredStore {
    /// Stores in cold every sealed segment of `topic` that ends beyond what cold holds
    /// and at or below the topic's commit point, oldest first — only committed offsets
    /// are ever exported. Returns what was stored. This is what the background exporter
    /// runs; unlike [`export_now`](Self::export_now) it neither waits for the writer nor
    /// rotates the active segment.
    ///
    /// A segment starting beyond cold's end follows offsets the WAL declared lost
    /// ([`tier_hot::HotTier::skip_to`]) or that recovery recorded lost in cold: the WAL's
    /// recorded gaps between cold's end and the segment's base are recorded in cold first
    /// ([`ColdBackend::record_gap`](crate::ColdBackend::record_gap); cold skips offsets
    /// it already recorded lost), then the segment is stored. Cold refuses a segment after
    /// a hole no one declared lost.
    ///
    /// Runs in an `export` tracing span (topic, cold's end before and after) and sets the
    /// topic's `tierlog_export_lag_records` gauge once done.
    pub async fn export_sealed(&self, topic: impl IntoTopicName) -> Result<Vec<ExportedSegment>, TierError> {
        self.export_sealed_of(&topic.into_topic_name()?).await
    }

    /// When `topic`'s newest sealed segment ends past its commit point: a future that is
    /// ready once the commit point reaches that end (or the topic closes). The segment
    /// is not exported before (`export_sealed_of`), and its `Sealed` event has passed.
    fn sealed_past_commit(&self, topic: &TopicName) -> Option<BoxFuture<'static, ()>> {
        let end = self.hot().sealed_segments(topic).last()?.range.end;
        let hwm = self.inner.topics.lock().get(topic)?.hwm.clone();
        if hwm.get() >= end {
            return None;
        }
        Some(Box::pin(async move {
            // An error is a closed topic: the next export attempt finds it not open.
            let _ = hwm.wait_for(|committed| committed >= end).await;
        }))
    }

    #[tracing::instrument(name = "export", skip_all, fields(topic = %topic, from = tracing::field::Empty, to = tracing::field::Empty))]
    async fn export_sealed_of(&self, topic: &TopicName) -> Result<Vec<ExportedSegment>, TierError> {
        let Some(cold) = self.inner.tiers.cold.clone() else { return Err(no_cold(topic)) };
        let Some(core) = self.inner.topics.lock().get(topic).cloned() else {
            // A topic not open has no known commit point: nothing of it is exported.
            return Ok(Vec::new());
        };
        let _serial = self.inner.export_lock.lock().await;
        let held = cold.range(topic).await?;
        let mut cold_end = held.end;
        let mut cold_empty = held.is_empty();
        tracing::Span::current().record("from", cold_end);
        let mut exported = Vec::new();
        for segment in self.hot().sealed_segments(topic) {
            if segment.range.end <= cold_end {
                continue;
            }
            let committed = core.hwm.get();
            if segment.range.start > committed {
                break;
            }
            // What lies below the segment is committed (or held by no record) even while
            // the segment itself is not: it is stored (warm's copy) or recorded lost first,
            // as warm may be continued past it only once cold holds it.
            if !cold_empty && segment.range.start > cold_end {
                self.fill_hole(topic, OffsetRange::new(cold_end, segment.range.start), &mut exported).await?;
            } else if cold_empty
                && segment.range.start > 0
                && let Some(below) = self.warm_below(topic, segment.range.start).await?
            {
                // Cold's first segment: warm holds records below the WAL's start (a torn
                // point at its start lost them from the WAL), which cold would otherwise
                // start past, and warm trim away. Warm's copy is stored; the offsets
                // between it and the segment, which no tier holds (recovery reported
                // them), are recorded lost so that cold takes the segment.
                let from_warm = self.export_from_warm(topic, below).await?;
                if from_warm > below.start {
                    exported.push(ExportedSegment {
                        topic: topic.clone(),
                        range: OffsetRange::new(below.start, from_warm),
                    });
                    if from_warm < segment.range.start {
                        let lost = OffsetRange::new(from_warm, segment.range.start);
                        cold.record_gap(topic, lost).await?;
                        info!(topic = %topic, range = %lost, "recorded offsets no tier holds as a gap in cold");
                    }
                }
            }
            if segment.range.end > committed {
                // Not committed yet (under `fail`, a batch warm has not confirmed).
                break;
            }
            let rebuilt = self.rebuilt_from_warm(topic, &segment).await?;
            let stored = cold.store_segment(topic, rebuilt.as_deref().unwrap_or(&segment.path)).await;
            if let Some(path) = &rebuilt {
                let _ = std::fs::remove_file(path);
            }
            let range = stored?;
            cold_empty = false;
            info!(topic = %topic, range = %range, "exported a sealed segment to cold");
            cold_end = cold_end.max(range.end);
            exported.push(ExportedSegment { topic: topic.clone(), range });
        }
        tracing::Span::current().record("to", cold_end);
        crate::metrics::export_lag(topic, core.hwm.get(), OffsetRange::new(held.start, cold_end));
        Ok(exported)
    }

    /// What warm holds below `start` (the WAL's first sealed segment), when it holds
    /// records there. `Unavailable` while warm cannot be asked: cold's first segment waits
    /// for it, as warm may hold acknowledged records the WAL lost below its start (a cut
    /// that took the WAL's first segment), which cold would otherwise start past.
    async fn warm_below(&self, topic: &TopicName, start: Offset) -> Result<Option<OffsetRange>, TierError> {
        let Some(warm) = self.inner.tiers.warm.as_ref() else { return Ok(None) };
        let held = match warm.range(topic).await {
            Ok(held) => held,
            Err(e) if e.kind() == tier_core::ErrorKind::Unavailable => return Err(e),
            Err(_) => return Ok(None),
        };
        Ok((held.start < start && !held.is_empty())
            .then(|| OffsetRange::new(held.start, held.end.min(start))))
    }

    /// True when warm is enabled and answers for `topic`.
    async fn warm_answers(&self, topic: &TopicName) -> bool {
        match &self.inner.tiers.warm {
            Some(warm) => warm.range(topic).await.is_ok(),
            None => false,
        }
    }

    /// Fills `hole` (from cold's end to the next segment's base) in order: every WAL gap
    /// inside it is recorded lost in cold (cold skips what it already recorded, and
    /// refuses a piece that does not continue what it holds) — except what warm holds of
    /// it: a torn point (a seal a crash cut short) lost records warm may still hold, and
    /// warm's copy is stored ([`export_from_warm`](Self::export_from_warm)). Offsets of
    /// the hole in no WAL gap, past where cold continues, are stored from warm's copy
    /// too (a torn point at the WAL's start: the WAL starts above cold's end, and warm
    /// holds what it lost); what warm lacks of them past its copy is recorded lost once
    /// the copy is stored (no tier holds it), and left while warm holds none of them (cold
    /// then refuses the segment after it).
    async fn fill_hole(
        &self,
        topic: &TopicName,
        hole: OffsetRange,
        exported: &mut Vec<ExportedSegment>,
    ) -> Result<(), TierError> {
        let Some(cold) = self.inner.tiers.cold.clone() else { return Ok(()) };
        let mut pieces = Vec::new();
        let mut at = hole.start;
        // Warm's copy of a WAL gap is taken from where warm starts: a gap whose records
        // warm holds from an offset inside it (a torn point merged with the gap a skip
        // recorded before it) is split there, so that what warm lacks is recorded lost
        // and what it holds is stored.
        let warm_start = match &self.inner.tiers.warm {
            Some(warm) => warm.range(topic).await.ok().filter(|w| !w.is_empty()).map(|w| w.start),
            None => None,
        };
        for gap in self.hot().gaps(topic) {
            let (start, end) = (gap.start.max(hole.start), gap.end.min(hole.end));
            if start >= end {
                continue;
            }
            if at < start {
                pieces.push((OffsetRange::new(at, start), false));
            }
            match warm_start.filter(|&w| start < w && w < end) {
                Some(w) => {
                    pieces.push((OffsetRange::new(start, w), true));
                    pieces.push((OffsetRange::new(w, end), true));
                }
                None => pieces.push((OffsetRange::new(start, end), true)),
            }
            at = end;
        }
        if at < hole.end {
            pieces.push((OffsetRange::new(at, hole.end), false));
        }
        let continues = if pieces.iter().any(|(_, gap)| !gap) { cold.continuation(topic).await? } else { 0 };
        for (piece, wal_gap) in pieces {
            let piece = if wal_gap {
                piece
            } else if piece.end > continues {
                OffsetRange::new(piece.start.max(continues), piece.end)
            } else {
                continue;
            };
            let from_warm = self.export_from_warm(topic, piece).await?;
            if from_warm > piece.start {
                exported.push(ExportedSegment {
                    topic: topic.clone(),
                    range: OffsetRange::new(piece.start, from_warm),
                });
            }
            if from_warm >= piece.end {
                continue;
            }
            // Offsets in no WAL gap below the WAL's next segment, past warm's copy: when
            // warm answered and stored what it holds, no tier holds the rest (a cut took
            // the WAL's first segment and the WAL continued past offsets recovery reported
            // lost); they are recorded lost so that cold takes the segment after them.
            // While warm cannot be asked they are left, and cold refuses that segment.
            if !wal_gap && (from_warm == piece.start || !self.warm_answers(topic).await) {
                break;
            }
            let lost = OffsetRange::new(from_warm, piece.end);
            cold.record_gap(topic, lost).await?;
            info!(topic = %topic, range = %lost, "recorded offsets lost in the WAL as a gap in cold");
        }
        Ok(())
    }

    /// Checks a sealed WAL segment's checksums before it is exported. Damage on the local
    /// disk would otherwise become the cold copy's damage, and the only copy once WAL
    /// retention and warm's trim have run. When the segment is damaged and warm holds its
    /// batches intact, they are written into a segment rebuilt in the state directory (the
    /// same offsets, so the same cold object) and its path is returned, for the caller to
    /// store and remove. Otherwise `None`: the WAL's file is stored — intact, or damaged
    /// with no intact copy anywhere (its intact batches stay readable from cold; a read of
    /// the damaged one names it). `Unavailable` while warm, which may hold the intact copy,
    /// cannot be asked: the export is retried.
    ///
    /// The check reads the whole file (on the blocking pool), as a single-part upload does.
    async fn rebuilt_from_warm(
        &self,
        topic: &TopicName,
        segment: &SegmentInfo,
    ) -> Result<Option<std::path::PathBuf>, TierError> {
        let ctx = || ErrorContext::tier(TierKind::Router).topic(topic).offset(segment.range.start);
        let path = segment.path.clone();
        let checked = tier_core::blocking::spawn(move || {
            let bytes = bytes::Bytes::from(std::fs::read(&path)?);
            let header = SegmentHeader::decode(&bytes).ok().map(|(h, _)| h);
            let damage = SealedSegment::open(bytes).and_then(|s| s.verify()).err().map(|e| e.to_string());
            Ok::<_, std::io::Error>((damage, header))
        })
        .await
        .map_err(|e| TierError::internal(ctx(), "the segment check task failed").with_source(e))?
        .map_err(|e| {
            TierError::unavailable(
                ctx().location(segment.path.display().to_string()),
                "reading a sealed segment",
            )
            .with_source(e)
        })?;
        let (Some(damage), header) = checked else { return Ok(None) };
        let range = segment.range;
        let Some(warm) = &self.inner.tiers.warm else {
            error!(topic = %topic, range = %range, damage, "exporting a damaged WAL segment as it is: no tier holds an intact copy");
            return Ok(None);
        };
        let held = warm.range(topic).await?;
        let mut batches = Vec::new();
        let reached = if held.start <= range.start && range.end <= held.end {
            crate::recovery::warm_batches(&self.inner.tiers, topic, range.start, range.end, &mut batches)
                .await?
        } else {
            range.start
        };
        let aligned = reached == range.end && batches.first().is_some_and(|b| b.base_offset() == range.start);
        if !aligned {
            error!(
                topic = %topic, range = %range, warm = %held, damage,
                "exporting a damaged WAL segment as it is: warm does not hold its batches"
            );
            return Ok(None);
        }
        let header = header.filter(|h| h.base_offset == range.start).unwrap_or_else(|| {
            SegmentHeader::new(topic.clone(), range.start, segment.min_timestamp)
                .with_index_interval_bytes(self.hot().config().index_interval_bytes)
        });
        let rebuilt = self.segment_of(topic, header, batches).await?;
        warn!(topic = %topic, range = %range, damage, "a sealed WAL segment is damaged; exporting warm's intact copy");
        Ok(Some(rebuilt))
    }

    /// Writes `batches` into a sealed segment with `header` in the state directory and
    /// returns its path, for the caller to store and remove.
    async fn segment_of(
        &self,
        topic: &TopicName,
        header: SegmentHeader,
        batches: Vec<tier_core::RecordBatch>,
    ) -> Result<std::path::PathBuf, TierError> {
        let base = header.base_offset;
        let ctx = || ErrorContext::tier(TierKind::Router).topic(topic).offset(base);
        let rebuilt = self.inner.state_dir.join(format!(".rebuilt-{topic}-{base}.seg"));
        let target = rebuilt.clone();
        tier_core::blocking::spawn(move || {
            let file = std::fs::File::create(&target).map_err(|e| {
                TierError::unavailable(
                    ErrorContext::default().location(target.display().to_string()),
                    "creating a rebuilt segment",
                )
                .with_source(e)
            })?;
            let mut writer = SegmentWriter::new(std::io::BufWriter::new(file), &header)?;
            for batch in &batches {
                writer.append(batch)?;
            }
            writer.seal().map(drop)
        })
        .await
        .map_err(|e| TierError::internal(ctx(), "the segment rebuild task failed").with_source(e))??;
        Ok(rebuilt)
    }

    /// Stores in cold, as one segment, warm's batches holding offsets `gap` of a gap the
    /// WAL recorded — from its start, whole batches inside it, never in offsets a degraded
    /// open skipped (warm's records there were never acknowledged). A torn point (a seal
    /// a power cut cut short) loses records the WAL had acknowledged and warm still holds:
    /// recording them lost in cold would lose them once warm trims. Returns where warm's
    /// copy ends (`gap.start` when warm holds none of it, or there is no warm tier).
    /// While warm cannot be asked: `Unavailable` (the export is retried) when the gap
    /// holds a torn point — one the WAL recorded (its marker says so, whichever open
    /// recorded it: [`HotTier::torn_points`](tier_hot::HotTier::torn_points)) or one at
    /// the WAL's start warm held when the topic opened (`Tiers::torn_in_warm`) —,
    /// `gap.start` otherwise: a gap recovery or a resume recorded holds nothing warm
    /// holds, and the export does not wait for warm.
    async fn export_from_warm(&self, topic: &TopicName, gap: OffsetRange) -> Result<Offset, TierError> {
        let tiers = &self.inner.tiers;
        let (Some(warm), Some(cold)) = (&tiers.warm, &tiers.cold) else { return Ok(gap.start) };
        let Ok(limit) = tiers.warm_limit(topic, gap.start) else { return Ok(gap.start) };
        let held = match warm.range(topic).await {
            Ok(held) => held,
            // A gap that held no acknowledged record warm holds at open is recorded lost
            // in cold as it is; warm's copy of a torn point is waited for.
            Err(e) if e.kind() == tier_core::ErrorKind::Unavailable => {
                let mut torn = tiers.torn_in_warm.lock().get(topic).cloned().unwrap_or_default();
                torn.extend(self.hot().torn_points(topic));
                if torn.iter().any(|t| t.start < gap.end && gap.start < t.end) {
                    return Err(e);
                }
                return Ok(gap.start);
            }
            Err(e) => return Err(e),
        };
        let to = gap.end.min(limit).min(held.end);
        if !(held.start <= gap.start && gap.start < to) {
            return Ok(gap.start);
        }
        let mut batches = Vec::new();
        match crate::recovery::warm_batches(tiers, topic, gap.start, to, &mut batches).await {
            Ok(_) => {}
            Err(e) if e.kind() == tier_core::ErrorKind::Unavailable => return Err(e),
            Err(e) => {
                error!(topic = %topic, lost_in_wal = %gap, error = %e.report(), "warm's copy of offsets the WAL lost cannot be read; recording them lost in cold");
                return Ok(gap.start);
            }
        }
        if batches.first().is_none_or(|b| b.base_offset() != gap.start) {
            return Ok(gap.start);
        }
        let whole = batches.iter().take_while(|b| b.end_offset() <= to).count();
        batches.truncate(whole);
        let Some(reached) = batches.last().map(tier_core::RecordBatch::end_offset) else {
            return Ok(gap.start);
        };
        let min_timestamp =
            batches.iter().map(tier_core::RecordBatch::min_timestamp).min().unwrap_or_default();
        let header = SegmentHeader::new(topic.clone(), gap.start, min_timestamp)
            .with_index_interval_bytes(self.hot().config().index_interval_bytes);
        let path = self.segment_of(topic, header, batches).await?;
        let stored = cold.store_segment(topic, &path).await;
        let _ = std::fs::remove_file(&path);
        let range = stored?;
        warn!(
            topic = %topic, lost_in_wal = %gap, exported = %range,
            "the WAL recorded these offsets lost (a torn point); exported warm's copy to cold"
        );
        Ok(reached)
    }

    /// Seals `topic`'s active WAL segment and stores every sealed segment cold does not
    /// hold yet, up to the commit point. Returns what was stored. `InvalidInput` when cold
    /// is disabled. Waits for the writer's queue first; a flush that fails `Unavailable`
    /// (warm cannot take the pending batches yet) does not stop the export of what is
    /// committed — cold does not need warm.
    pub async fn export_now(&self, topic: impl IntoTopicName) -> Result<Vec<ExportedSegment>, TierError> {
        let topic = self.topic(topic).await?;
        let name = topic.name().clone();
        // Only what is committed may be exported: wait for the writer's queue first
        // (`export_sealed` stops at the commit point, whatever the flush answered).
        if let Err(e) = topic.flush().await {
            if e.kind() != tier_core::ErrorKind::Unavailable {
                return Err(e);
            }
            warn!(topic = %name, error = %e.report(), "exporting what is committed although a flush failed");
        }
        self.hot().rotate(&name).await?;
        self.export_sealed_of(&name).await
    }

    /// Runs WAL retention now (as of `now`): deletes sealed segments due by age or size
    /// whose whole range is committed and — when cold is enabled — held by cold. Without
    /// cold, a segment must also be held by warm when warm is enabled: warm's back-fill
    /// reads the WAL, so a warm outage longer than retention keeps the segments warm lacks
    /// (bounded by `router.max_unreplicated_bytes` under `degrade`). With cold, what warm
    /// lacks keeps nothing cold holds: warm's back-fill reads cold below the WAL's start,
    /// and a warm floor held where a back-fill stopped (offsets no tier holds) would keep
    /// every later segment until an append moves warm on. With
    /// cold enabled, a segment ending where a WAL gap starts (offsets declared lost) is
    /// kept until cold holds a segment after the gap: deleting it would also delete the
    /// gap's marker, which the exporter needs to record the gap in cold.
    /// Returns the deleted segments, which are counted in `tierlog_deleted_segments_total`
    /// and `_bytes_total` — this is what the background deleter runs, every
    /// `retention_interval` — inside a `wal_retention` tracing span.
    pub async fn run_retention_now(&self, now: SystemTime) -> Result<Vec<SegmentInfo>, TierError> {
        let cores = self.cores().await;
        self.retention_of(cores, now).await
    }

    /// [`run_retention_now`](Self::run_retention_now) for topic `topic` alone (opening
    /// it): no other topic's segments are deleted.
    pub async fn run_topic_retention_now(
        &self,
        topic: impl IntoTopicName,
        now: SystemTime,
    ) -> Result<Vec<SegmentInfo>, TierError> {
        let topic = self.topic(topic).await?;
        self.retention_of(vec![Arc::clone(&topic.core)], now).await
    }

    /// Without cold, the end of what warm holds now, asked at each retention pass: the
    /// WAL deletes only what warm still holds. A failover to a replica behind can take
    /// batches warm confirmed; the writer learns of it only at its next batch, and the
    /// WAL's copy is then the only one. 0 (delete nothing) when warm does not answer;
    /// `Offset::MAX` (no bound) without warm.
    async fn warm_end_now(&self, topic: &TopicName) -> Offset {
        let Some(warm) = &self.inner.tiers.warm else { return Offset::MAX };
        match warm.range(topic).await {
            Ok(held) => held.end,
            Err(e) => {
                warn!(topic = %topic, error = %e.report(), "WAL retention keeps the topic's segments: warm does not answer");
                0
            }
        }
    }

    /// WAL retention over the segments of `cores` only.
    #[tracing::instrument(name = "wal_retention", skip_all, fields(deleted = tracing::field::Empty))]
    async fn retention_of(
        &self,
        cores: Vec<Arc<TopicCore>>,
        now: SystemTime,
    ) -> Result<Vec<SegmentInfo>, TierError> {
        type Allowed = (Offset, Offset, Option<OffsetRange>, Vec<OffsetRange>);
        let mut allowed: HashMap<TopicName, Allowed> = HashMap::new();
        for core in cores {
            let cold = match &self.inner.tiers.cold {
                Some(c) => Some(c.range(&core.name).await?),
                None => None,
            };
            let gaps = self.hot().gaps(&core.name);
            // Without cold, warm's back-fill reads the WAL from the first offset warm
            // lacks (0 while warm's end is unknown); with cold, cold, which must hold
            // every segment deleted.
            let committed = core.hwm.get();
            let (deletable_below, warm_end) = match cold {
                Some(_) => (committed, Offset::MAX),
                None => (
                    committed.min(core.warm_floor.load(std::sync::atomic::Ordering::Acquire)),
                    self.warm_end_now(&core.name).await,
                ),
            };
            allowed.insert(core.name.clone(), (deletable_below, warm_end, cold, gaps));
        }
        let hot = self.hot().clone();
        let deleted = tier_core::blocking::spawn(move || {
            let can_delete = |info: &SegmentInfo| match allowed.get(&info.topic) {
                None => false,
                Some((committed, warm_end, cold, gaps)) => {
                    // A gap after the segment goes with it, and the WAL then starts past
                    // the gap: never past the commit point, which recovery takes the WAL's
                    // start to be below (a torn point's gap holds records warm may not
                    // have confirmed yet). Without cold, the segment's records must be in
                    // warm now; a gap holds none.
                    info.range.end <= *committed
                        && info.range.end <= *warm_end
                        && gaps.iter().all(|g| g.start != info.range.end || g.end <= *committed)
                        && cold.is_none_or(|c| {
                            c.start <= info.range.start
                                && info.range.end <= c.end
                                && gaps.iter().all(|g| g.start != info.range.end || g.end <= c.end)
                        })
                }
            };
            hot.run_retention(now, &can_delete)
        })
        .await
        .map_err(|e| {
            TierError::internal(ErrorContext::tier(TierKind::Router), "the retention task failed")
                .with_source(e)
        })??;
        crate::metrics::deleted(&deleted);
        tracing::Span::current().record("deleted", deleted.len());
        Ok(deleted)
    }

    /// Trims warm to the last `max_cached_closed_segments` sealed WAL segments of every
    /// open topic: below the base offset of the N-th newest sealed segment, but never
    /// beyond what cold holds. When the WAL holds fewer than N sealed segments (retention
    /// deleted exported ones sooner) and cold is enabled, warm is trimmed below the
    /// WAL's start — everything below it is in cold — again never beyond cold's end;
    /// without cold, warm then keeps everything (it may be the only copy below the
    /// WAL's start). Returns the trim offset applied per topic.
    pub async fn trim_warm_now(&self) -> Result<Vec<(TopicName, Offset)>, TierError> {
        let cores = self.cores().await;
        self.trim_warm_of(cores).await
    }

    /// [`trim_warm_now`](Self::trim_warm_now) for topic `topic` alone (opening it): the
    /// trim offset applied, if any; no other topic is trimmed.
    pub async fn trim_topic_warm_now(&self, topic: impl IntoTopicName) -> Result<Option<Offset>, TierError> {
        let topic = self.topic(topic).await?;
        let trimmed = self.trim_warm_of(vec![Arc::clone(&topic.core)]).await?;
        Ok(trimmed.into_iter().next().map(|(_, at)| at))
    }

    /// Warm trimming over `cores` only.
    async fn trim_warm_of(&self, cores: Vec<Arc<TopicCore>>) -> Result<Vec<(TopicName, Offset)>, TierError> {
        let Some(warm) = self.inner.tiers.warm.clone() else { return Ok(Vec::new()) };
        let keep = self.config().max_cached_closed_segments;
        let mut trimmed = Vec::new();
        for core in cores {
            let sealed = self.hot().sealed_segments(&core.name);
            let mut point = if sealed.len() >= keep {
                sealed[sealed.len() - keep].range.start
            } else if self.inner.tiers.cold.is_some() {
                self.hot().range(&core.name).await?.start
            } else {
                continue;
            };
            if let Some(cold) = &self.inner.tiers.cold {
                point = point.min(cold.range(&core.name).await?.end);
            } else {
                // Without cold, warm's copy of a WAL gap it holds (a torn point: records
                // the WAL lost and warm still has) is the only one: never trimmed.
                let warm_start = warm.range(&core.name).await?.start;
                for gap in self.hot().gaps(&core.name) {
                    if gap.start < point && gap.end > warm_start {
                        point = point.min(gap.start.max(warm_start));
                    }
                }
            }
            // Never past the commit point: under `fail` a batch warm holds but never
            // confirmed (its `WAIT` fell short) waits above it to be confirmed, and the
            // trim would take warm's copy of it, the one the next recovery confirms again.
            point = point.min(core.hwm.get());
            if point == 0 {
                continue;
            }
            warm.trim_before(&core.name, point).await?;
            trimmed.push((core.name.clone(), point));
        }
        Ok(trimmed)
    }
}
