//! [`Topic`]: the per-topic handle producers and consumers use, and [`TopicCore`], the
//! state of one open topic the store keeps.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use parking_lot::Mutex;
use tier_core::batch::{BATCH_HEADER_LEN, MAX_BATCH_LEN};
use tier_core::{
    ErrorContext, Header, Offset, OffsetRange, Record, RecordBatchBuilder, StartPosition, Tier, TierError,
    TierKind, Timestamp, TopicName,
};
use tokio::sync::{Notify, OwnedMutexGuard, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::metrics;
use crate::reader::{self, ReadBatch, Source};
use crate::recovery::RecoveryReport;
use crate::tiers::Tiers;
use crate::writer::{Command, Writer};

/// One open topic: its writer's queue, state and commit point.
#[derive(Debug)]
pub(crate) struct TopicCore {
    pub(crate) name: TopicName,
    pub(crate) tx: Mutex<Option<mpsc::Sender<Command>>>,
    /// The writer's state, for an append that finds the writer idle: it does the
    /// writer's work in its own task ([`Topic::enqueue_batch`]). `None` once the writers
    /// stop (taken with `tx`).
    pub(crate) writer: Mutex<Option<Arc<tokio::sync::Mutex<Writer>>>>,
    /// Commands sent to the writer and not yet handled by it. An append is done directly
    /// only while it is 0 (under the writer's lock): every command queued before it was
    /// handled, so offsets follow the order appends were enqueued in.
    pub(crate) queued: Arc<AtomicUsize>,
    /// Makes the writer task look at its retry timer again (a direct append left
    /// batches to retry).
    pub(crate) wake: Arc<Notify>,
    pub(crate) hwm: watch::Receiver<Offset>,
    pub(crate) task: Mutex<Option<JoinHandle<()>>>,
    pub(crate) report: Mutex<RecoveryReport>,
    /// Warm holds (or will never need) every offset below it: WAL retention deletes no
    /// segment ending beyond it (warm's back-fill reads them). `u64::MAX` without warm,
    /// 0 while warm's end is unknown (opened with warm unreachable under `degrade`).
    pub(crate) warm_floor: Arc<AtomicU64>,
}

/// A record to append: the writer assigns its offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRecord {
    /// Publish time, milliseconds since the Unix epoch.
    pub timestamp: Timestamp,
    /// Optional key.
    pub key: Option<Bytes>,
    /// Headers.
    pub headers: Vec<Header>,
    /// Payload.
    pub payload: Bytes,
}

impl NewRecord {
    /// A record with no key and no header.
    pub fn new(timestamp: Timestamp, payload: impl Into<Bytes>) -> Self {
        Self { timestamp, key: None, headers: Vec::new(), payload: payload.into() }
    }

    /// Sets the key.
    pub fn with_key(mut self, key: impl Into<Bytes>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Adds a header.
    pub fn with_header(mut self, name: impl Into<Bytes>, value: impl Into<Bytes>) -> Self {
        self.headers.push(Header::new(name, value));
        self
    }

    /// At least the encoded bytes of one batch of `records` (up to [`MAX_BATCH_LEN`]): the
    /// capacity to build it in without growing the buffer record by record
    /// ([`RecordBatchBuilder::with_capacity`]).
    pub fn batch_capacity(records: &[NewRecord]) -> usize {
        let record =
            |r: &NewRecord| RecordBatchBuilder::max_record_len(r.key.as_deref(), &r.headers, r.payload.len());
        records.iter().map(record).fold(BATCH_HEADER_LEN, usize::saturating_add).min(MAX_BATCH_LEN)
    }
}

/// The offsets each enabled tier holds for a topic, and its commit point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TierRanges {
    /// The WAL.
    pub hot: OffsetRange,
    /// Warm (`None`: disabled).
    pub warm: Option<OffsetRange>,
    /// Cold (`None`: disabled).
    pub cold: Option<OffsetRange>,
    /// The high watermark: every offset below it is committed; readers stop there.
    pub committed: Offset,
}

impl TopicCore {
    /// Sends `cmd` to the writer, counted in `queued` until the writer handled it (or
    /// the send failed or was cancelled). `Closed` once the writer's queue is gone.
    pub(crate) async fn send(&self, cmd: Command) -> Result<(), TierError> {
        /// Takes the command back out of `queued` unless it reached the queue.
        struct Counted<'a>(&'a AtomicUsize, bool);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                if !self.1 {
                    self.0.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }
        let tx = self.tx.lock().clone().ok_or_else(|| closed(&self.name))?;
        self.queued.fetch_add(1, Ordering::SeqCst);
        let mut counted = Counted(&self.queued, false);
        tx.send(cmd).await.map_err(|_| closed(&self.name))?;
        counted.1 = true;
        Ok(())
    }

    /// The writer's state, locked, when the writer is idle: nothing queued or being
    /// handled, and not stopped.
    fn idle_writer(&self) -> Option<OwnedMutexGuard<Writer>> {
        if self.queued.load(Ordering::SeqCst) != 0 {
            return None;
        }
        let writer = self.writer.lock().clone()?;
        let guard = writer.try_lock_owned().ok()?;
        (self.queued.load(Ordering::SeqCst) == 0 && !guard.is_stopped()).then_some(guard)
    }
}

/// `Closed` for `topic`: its writer's queue is gone.
fn closed(topic: &TopicName) -> TierError {
    TierError::closed(ErrorContext::tier(TierKind::Router).topic(topic), "the store is closed")
}

/// A batch queued by [`Topic::enqueue_batch`]: resolves to its offsets once every
/// enabled write tier confirmed it, or to the error that refused it (as
/// [`Topic::append_batch`]). Counted in the append metrics when it resolves.
#[derive(Debug)]
#[must_use = "the batch is appended whether or not this is awaited; await it for its offsets"]
pub struct PendingAppend {
    answer: oneshot::Receiver<Result<OffsetRange, TierError>>,
    /// The topic, for the error of a writer gone without answering.
    core: Arc<TopicCore>,
    records: usize,
    bytes: u64,
    started: Instant,
}

impl std::future::Future for PendingAppend {
    type Output = Result<OffsetRange, TierError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = &mut *self;
        let answer = std::task::ready!(std::pin::Pin::new(&mut this.answer).poll(cx));
        let result = answer.unwrap_or_else(|_| Err(closed(&this.core.name)));
        metrics::appended(&result, this.records, this.bytes, this.started.elapsed());
        std::task::Poll::Ready(result)
    }
}

/// A handle on one topic of a [`TieredStore`](crate::TieredStore). Cheap to clone;
/// usable from any number of tasks at once.
#[derive(Clone, Debug)]
pub struct Topic {
    pub(crate) tiers: Arc<Tiers>,
    pub(crate) core: Arc<TopicCore>,
}

impl Topic {
    /// The topic's name.
    pub fn name(&self) -> &TopicName {
        &self.core.name
    }

    fn closed(&self) -> TierError {
        closed(&self.core.name)
    }

    /// `Closed` once the store was closed (or aborted): its writer's queue is gone.
    fn check_open(&self) -> Result<(), TierError> {
        if self.core.tx.lock().is_none() { Err(self.closed()) } else { Ok(()) }
    }

    /// Appends `records` as one batch and returns their offsets once every enabled write
    /// tier confirmed (WAL, and warm unless the policy is `degrade` and warm is down).
    ///
    /// Errors: `InvalidInput` for an empty list or a batch over the size limit;
    /// `Unavailable` when a tier did not confirm (see `docs/router.md` for what that
    /// means for the records); the kind of the tier's own failure when it says more
    /// (`Fenced`, `Corruption`, `Internal`), with that failure as the source; `Closed`
    /// once the store is closed.
    ///
    /// Counted in `tierlog_append_records_total`, `_bytes_total` (payloads) and
    /// `tierlog_append_seconds` when acknowledged, `tierlog_append_errors_total` when
    /// not (`docs/metrics.md`).
    pub async fn append(&self, records: Vec<NewRecord>) -> Result<OffsetRange, TierError> {
        let mut builder = RecordBatchBuilder::with_capacity(NewRecord::batch_capacity(&records));
        for r in &records {
            if let Err(e) = builder.push(r.timestamp, r.key.as_deref(), &r.headers, &r.payload) {
                let failed = Err(self.in_ctx(e));
                metrics::appended(&failed, records.len(), 0, Duration::ZERO);
                return failed;
            }
        }
        self.append_batch(builder).await
    }

    /// Appends the records of `builder` as one batch; see [`append`](Self::append).
    ///
    /// The batch goes through the writer's queue (the group commit: offset reservation
    /// first, then the WAL and warm). Committing a batch that finds the writer idle in the
    /// caller's task (`submit`'s direct path) saves the queue's two task hand-offs, but
    /// whether it finishes at once or is handed to a task depends on when a blocking job
    /// ran, which makes the simulation's replays inexact: it is not used until that
    /// decision no longer depends on thread timing.
    pub async fn append_batch(&self, builder: RecordBatchBuilder) -> Result<OffsetRange, TierError> {
        self.submit(builder, false).await?.await
    }

    /// [`append_batch`](Self::append_batch) in two steps, for a producer that keeps
    /// several batches in flight and their order: this returns once the batch has its
    /// place in the topic's queue (waiting only for room in it), and the
    /// [`PendingAppend`] resolves to its offsets as `append_batch` would. Batches
    /// enqueued one after another get offsets in that order, whatever order their
    /// answers are awaited in. Dropping the `PendingAppend` does not cancel the append.
    ///
    /// An error here (an oversized batch, a closed store) means the batch was not
    /// queued; it is counted as a failed append, as the pending append's own error is.
    ///
    /// The batch always goes through the writer's queue, so that batches kept in flight
    /// meet in its group commit (one WAL write, one fsync, one warm round trip per group).
    pub async fn enqueue_batch(&self, builder: RecordBatchBuilder) -> Result<PendingAppend, TierError> {
        self.submit(builder, false).await
    }

    /// Encodes `builder`'s batch and queues it to the writer — or, with `direct` and the
    /// writer idle, commits it in this task (see [`append_batch`](Self::append_batch)).
    async fn submit(&self, builder: RecordBatchBuilder, direct: bool) -> Result<PendingAppend, TierError> {
        let (records, bytes, started) = (builder.len(), builder.payload_bytes(), Instant::now());
        let queued = async {
            let batch = builder.build(0).map_err(|e| self.in_ctx(e))?;
            let (done, answer) = oneshot::channel();
            match direct.then(|| self.core.idle_writer()).flatten() {
                Some(mut writer) => {
                    let wake = Arc::clone(&self.core.wake);
                    let mut work = Box::pin(async move {
                        writer.append_direct(batch, done).await;
                        if writer.has_retry_work() {
                            wake.notify_one();
                        }
                    });
                    // Done at once (a write to the page cache): no hand-off. Else it waits
                    // (a fsync, warm, the WAL's lock): a task of its own finishes it, so
                    // that the writer's state is never left half-changed by a caller that
                    // stops waiting, and the writer's lock is held until then.
                    if futures::poll!(work.as_mut()).is_pending() {
                        tokio::spawn(work);
                    }
                }
                None => self.core.send(Command::Append { batch, done }).await?,
            }
            Ok(answer)
        };
        match queued.await {
            Ok(answer) => Ok(PendingAppend { answer, core: Arc::clone(&self.core), records, bytes, started }),
            Err(e) => {
                let failed = Err(e);
                metrics::appended(&failed, records, bytes, started.elapsed());
                failed
            }
        }
    }

    /// Waits until everything appended before is in every enabled write tier (warm
    /// included, whatever the policy). `Unavailable` when warm still lacks some; `Closed`
    /// once the store is closed.
    pub async fn flush(&self) -> Result<(), TierError> {
        let (done, answer) = oneshot::channel();
        self.send(Command::Flush { done }).await?;
        answer.await.map_err(|_| self.closed())?
    }

    async fn send(&self, cmd: Command) -> Result<(), TierError> {
        self.core.send(cmd).await
    }

    fn in_ctx(&self, mut e: TierError) -> TierError {
        let c = e.context_mut();
        c.tier.get_or_insert(TierKind::Router);
        c.topic.get_or_insert_with(|| self.core.name.clone());
        e
    }

    /// The commit point: every offset below it is committed and readable.
    pub fn high_watermark(&self) -> Offset {
        *self.core.hwm.borrow()
    }

    /// What each enabled tier holds now, and the commit point. With cold enabled, sets
    /// the topic's `tierlog_export_lag_records` gauge (committed records cold lacks).
    pub async fn ranges(&self) -> Result<TierRanges, TierError> {
        let topic = &self.core.name;
        let hot = self.tiers.hot.range(topic).await?;
        let warm = match &self.tiers.warm {
            Some(w) => Some(w.range(topic).await?),
            None => None,
        };
        let cold = match &self.tiers.cold {
            Some(c) => Some(c.range(topic).await?),
            None => None,
        };
        let committed = self.high_watermark();
        if let Some(cold) = cold {
            metrics::export_lag(topic, committed, cold);
        }
        Ok(TierRanges { hot, warm, cold, committed })
    }

    /// The offset a reader from `start` begins at now: `start`'s offset, the commit point
    /// for `Latest`, the oldest offset any tier holds for `Earliest`, the first offset at
    /// or after a time (asking cold, then warm, then the WAL) for `Timestamp` — each
    /// bounded by the commit point but `Offset`'s. A reader opened later resolves its
    /// start again (tiers' ranges may have moved meanwhile).
    pub async fn start_offset(&self, start: StartPosition) -> Result<Offset, TierError> {
        reader::start_offset(&self.tiers, &self.core.name, start, self.high_watermark()).await
    }

    /// A stream of the topic's committed records from `start`, stitched across tiers
    /// and continuing into the live tail (it never ends by itself). See
    /// [`reader_with_source`](Self::reader_with_source).
    pub async fn reader(
        &self,
        start: StartPosition,
    ) -> Result<BoxStream<'static, Result<Record, TierError>>, TierError> {
        Ok(self.reader_with_source(start).await?.map(|item| item.map(|(_, r)| r)).boxed())
    }

    /// Like [`reader`](Self::reader), with the [`Source`] that served each record:
    /// cold `[start, warm_start)`, warm `[warm_start, hot_start)`, the WAL from
    /// `hot_start` to the commit point, then the live tail. The WAL is preferred for any
    /// offset it holds, then warm, then cold. A gap between tiers ends the stream with
    /// `NotFound` naming the missing offsets; a tier returning other offsets than asked
    /// ends it with `Corruption`; closing the store ends it with `Closed` (after what was
    /// committed). Memory is bounded by one read (`router.read_batch_records` /
    /// `read_batch_bytes`). `Closed` when the store is closed already.
    pub async fn reader_with_source(
        &self,
        start: StartPosition,
    ) -> Result<BoxStream<'static, Result<(Source, Record), TierError>>, TierError> {
        self.check_open()?;
        reader::open_records(Arc::clone(&self.tiers), self.core.name.clone(), self.core.hwm.clone(), start)
            .await
    }

    /// The batch counterpart of [`reader_with_source`](Self::reader_with_source): the
    /// topic's committed batches from `start`, as the tiers store them (verified, with no
    /// [`Record`] built), stitched across cold, warm and the WAL exactly as the record
    /// reader chooses tiers (same hand-off points), then the live tail. The stream never
    /// ends by itself.
    ///
    /// Batches are never split and their boundaries may differ between tiers, so a batch
    /// may start before the offset the reader is at. Guarantees, for items `i`:
    /// `from` lies inside `batch`; the first item's `from` is the resolved start offset;
    /// item `i`'s `from` is item `i - 1`'s `batch.end_offset()` (no offset skipped or
    /// repeated); a batch is yielded only once the commit point is at or past its end.
    /// [`ReadBatch::records`] yields the records the item delivers, the same as the
    /// record reader's. At the commit point the reader waits for the high watermark and
    /// reads the new batches from the WAL (`Source::Live`); if retention removed them
    /// meanwhile, it continues from history.
    ///
    /// Errors end the stream: `NotFound` for an offset no tier holds (naming the missing
    /// range), `Corruption` for a tier answering with a batch that does not hold the
    /// offset asked for, `Closed` once the store is closed (creating the reader then
    /// answers `Closed` too). Memory is bounded by about `router.read_batch_bytes` (plus one
    /// batch) per WAL or warm read, and the cold tier's read-ahead.
    pub async fn batch_reader(
        &self,
        start: StartPosition,
    ) -> Result<BoxStream<'static, Result<ReadBatch, TierError>>, TierError> {
        self.check_open()?;
        reader::open_batches(Arc::clone(&self.tiers), self.core.name.clone(), self.core.hwm.clone(), start)
            .await
    }
}
