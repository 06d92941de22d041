//! [`Topic`]: the per-topic handle producers and consumers use, and [`TopicCore`], the
//! state of one open topic the store keeps.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use parking_lot::Mutex;
use tier_core::batch::{BATCH_HEADER_LEN, MAX_BATCH_LEN};
use tier_core::{
    ErrorContext, Header, Offset, OffsetRange, Record, RecordBatch, RecordBatchBuilder, StartPosition, Tier,
    TierError, TierKind, Timestamp, TopicName,
};
use tokio::sync::{Notify, OwnedMutexGuard, mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::commit_point::Committed;
use crate::metrics;
use crate::reader::{self, ReadBatch, Source};
use crate::recovery::RecoveryReport;
use crate::tiers::Tiers;
use crate::writer::{Command, Reply, Writer};

/// One open topic: its writer's queue, state and commit point.
#[derive(Debug)]
pub(crate) struct TopicCore {
    pub(crate) name: TopicName,
    pub(crate) tx: Mutex<Option<mpsc::Sender<Command>>>,
    /// The writer's state, for the producer that commits the batches of
    /// [`Topic::append_batch`] in its own task (see [`Arrivals`]). `None` once the writers
    /// stop (taken with `tx`).
    pub(crate) writer: Mutex<Option<Arc<tokio::sync::Mutex<Writer>>>>,
    /// Commands sent to the writer and not yet handled by it. An awaited append arrives
    /// for a producer's commit only while it is 0: every command queued before it was
    /// handled, so offsets follow the order appends were enqueued in.
    pub(crate) queued: Arc<AtomicUsize>,
    /// The batches of awaited appends waiting to be committed, in arrival order.
    pub(crate) arrivals: Mutex<Arrivals>,
    /// Makes the writer task look at its retry timer again (a producer's commit left
    /// batches to retry).
    pub(crate) wake: Arc<Notify>,
    pub(crate) hwm: Committed,
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

    /// Adds `batch` to the arrivals; the guard takes it out again unless a commit took it.
    fn arrive(self: &Arc<Self>, batch: RecordBatch, done: Reply) -> Arrived {
        let mut arrivals = self.arrivals.lock();
        let id = arrivals.next_id;
        arrivals.next_id += 1;
        arrivals.waiting.push_back(Arrival { id, batch, done, waker: None });
        Arrived { core: Arc::clone(self), id }
    }

    /// Waits until the batch `id`'s producer has its answer (a commit took the batch) or
    /// its turn to commit ([`Lead`]): it takes a free turn, or finds the turn handed to
    /// it; otherwise it leaves its waker with its batch, for the commit that hands the
    /// turn over. The answer's channel is polled first.
    fn poll_turn(
        &self,
        id: u64,
        answer: &mut oneshot::Receiver<Result<OffsetRange, TierError>>,
        cx: &mut Context<'_>,
    ) -> Poll<Turn> {
        if let Poll::Ready(answer) = Pin::new(answer).poll(cx) {
            return Poll::Ready(Turn::Answered(answer.unwrap_or_else(|_| Err(closed(&self.name)))));
        }
        let mut arrivals = self.arrivals.lock();
        let lead = arrivals.lead;
        // Taken by a commit, which answers it (its waker is the answer channel's).
        let Some(arrival) = arrivals.find_mut(id) else { return Poll::Pending };
        match lead {
            Lead::Producer(next) if next == id => Poll::Ready(Turn::Lead),
            Lead::Free => {
                arrivals.lead = Lead::Producer(id);
                Poll::Ready(Turn::Lead)
            }
            Lead::Producer(_) | Lead::Committing => {
                if !arrival.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    arrival.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }

    /// The commit of the next group of waiting batches, by the producer of the batch `id`,
    /// which holds the turn, done here with no await ([`Writer::commit_now`]) when the
    /// group holds that batch, the writer's lock is free and no step of the commit
    /// waits: the same group commit the producer would run, without the future that
    /// finishes it in a task of its own when dropped (nothing here can be dropped half
    /// done). The other producers get their answers; the turn then passes on as after any
    /// commit. `None`, the batches waiting and the turn its producer's as before, when it
    /// does not apply — but for the batches of producers that stopped waiting meanwhile
    /// (on other threads), which are not appended, as when no commit took them.
    fn commit_at_once(
        &self,
        writer: &tokio::sync::Mutex<Writer>,
        id: u64,
        max_group: usize,
    ) -> Option<Result<OffsetRange, TierError>> {
        let mut writer = writer.try_lock().ok()?;
        let mut guard = self.arrivals.lock();
        if guard.lead != Lead::Producer(id) {
            return None;
        }
        let count = guard.group_with(id, max_group)?;
        let arrivals = &mut *guard;
        let (mut group, mut own_at) = (Vec::with_capacity(count), 0);
        for (at, Arrival { id: of, batch, done, waker }) in arrivals.waiting.drain(..count).enumerate() {
            if of == id {
                own_at = at;
            }
            arrivals.held.push((of, waker));
            group.push((batch, done));
        }
        arrivals.lead = Lead::Committing;
        drop(guard);
        let mut own = None;
        let committed = writer.commit_now(group, |at, done, answer| {
            if at == own_at {
                own = Some(answer);
            } else {
                let _ = done.send(answer);
            }
        });
        match committed {
            Ok(()) => {
                let next = self.end_commit(&writer);
                drop(writer);
                if let Some(next) = next {
                    next.wake();
                }
                // The group holds the batch `id` (`group_with`), so it was answered.
                Some(own.unwrap_or_else(|| {
                    Err(TierError::internal(
                        ErrorContext::tier(TierKind::Router).topic(&self.name),
                        "a commit did not answer its own producer",
                    ))
                }))
            }
            Err(group) => {
                let mut guard = self.arrivals.lock();
                let arrivals = &mut *guard;
                let held = arrivals.held.drain(..);
                for ((batch, done), (of, waker)) in group.into_iter().zip(held).rev() {
                    if !arrivals.dropped.contains(&of) {
                        arrivals.waiting.push_front(Arrival { id: of, batch, done, waker });
                    }
                }
                arrivals.dropped.clear();
                arrivals.lead = Lead::Producer(id);
                None
            }
        }
    }

    /// Ends a commit, the caller still holding the writer's lock: the writer task looks at
    /// its retry timer again when the commit left batches to retry, and the turn passes on
    /// ([`Arrivals::pass_lead`]; the batches of producers that stopped waiting during a
    /// commit with no await were committed with it). Returns the next producer's waker, to
    /// be woken once the lock is let go.
    #[must_use]
    fn end_commit(&self, writer: &Writer) -> Option<Waker> {
        if writer.has_retry_work() {
            self.wake.notify_one();
        }
        let mut arrivals = self.arrivals.lock();
        arrivals.held.clear();
        arrivals.dropped.clear();
        arrivals.pass_lead()
    }
}

/// The batches of awaited appends ([`Topic::append_batch`]) waiting for a commit, in
/// arrival order, and whose turn it is to commit them ([`Lead`]). The producer whose turn
/// it is gets the writer's lock, takes the batches from the front as groups (up to
/// `router.max_group_bytes` each) and commits them in its own task until its own batch is
/// committed; producers whose batches it took find their answers. Its commit then hands
/// the turn to the producer of the batch now at the front, if any — never to a producer
/// already answered, so a producer whose batch was committed never waits for the writer's
/// lock, and one not polled after its answer holds up no one. Every producer polled in
/// one pass of the runtime (a join of appends) arrives before any of them takes a group,
/// so which batches meet in a group depends on what arrived, never on whether a commit
/// that started earlier has finished — which would depend on when a blocking job ran on a
/// thread of its own.
#[derive(Debug, Default)]
pub(crate) struct Arrivals {
    next_id: u64,
    /// Ids increase from front to back.
    waiting: VecDeque<Arrival>,
    lead: Lead,
    /// The producers (id, waker) of the batches a commit with no await
    /// ([`TopicCore::commit_at_once`]) took from the front, in order, which it hands back
    /// if it cannot run. Empty when no such commit runs; kept, not reallocated, between
    /// commits.
    held: Vec<(u64, Option<Waker>)>,
    /// Producers that stopped waiting meanwhile: their batches are not handed back (not
    /// appended, as for any batch no commit took).
    dropped: Vec<u64>,
}

/// Whose turn it is to commit the [`Arrivals`]. At most one producer commits at a time;
/// the turn passes on when a commit ends, or when the producer holding the turn stops
/// waiting before its commit started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Lead {
    /// Nobody's: the next producer with a batch waiting that looks takes it.
    #[default]
    Free,
    /// The producer of the waiting batch `id`, which has not started its commit (it
    /// waits for the writer's lock, or has yet to wake up and see the turn is its own).
    Producer(u64),
    /// A commit runs ([`commit_arrivals`], in its producer's task or a task of its own);
    /// it passes the turn on when it ends.
    Committing,
}

/// What a producer waiting in the [`Arrivals`] gets first.
enum Turn {
    /// Its batch was committed by a commit (or refused): the answer.
    Answered(Result<OffsetRange, TierError>),
    /// Its batch still waits and the turn to commit is its own.
    Lead,
}

/// One batch waiting in the [`Arrivals`].
#[derive(Debug)]
struct Arrival {
    id: u64,
    batch: RecordBatch,
    done: Reply,
    /// Woken when the turn to commit is handed to this batch's producer.
    waker: Option<Waker>,
}

impl Arrivals {
    /// The batch `id`, while it waits.
    fn find_mut(&mut self, id: u64) -> Option<&mut Arrival> {
        let at = self.waiting.binary_search_by_key(&id, |a| a.id).ok()?;
        self.waiting.get_mut(at)
    }

    /// Takes the batch `id` out, if it still waits.
    /// Takes the batch `id` out, if it still waits; whether it did.
    fn remove(&mut self, id: u64) -> bool {
        let Ok(at) = self.waiting.binary_search_by_key(&id, |a| a.id) else { return false };
        self.waiting.remove(at);
        true
    }

    /// Hands the turn to commit to the producer of the batch at the front, if one waits
    /// (else frees it), and returns that producer's waker, to be woken once the caller
    /// let go of the lock.
    #[must_use]
    fn pass_lead(&mut self) -> Option<Waker> {
        match self.waiting.front_mut() {
            Some(front) => {
                self.lead = Lead::Producer(front.id);
                front.waker.take()
            }
            None => {
                self.lead = Lead::Free;
                None
            }
        }
    }

    /// How many batches from the front make the next group ([`take_group`](Self::take_group):
    /// as many as fit in `max_bytes`, at least one), when it holds the batch `id`.
    fn group_with(&self, id: u64, max_bytes: usize) -> Option<usize> {
        let (mut bytes, mut count, mut mine) = (0, 0, false);
        for arrival in &self.waiting {
            let len = arrival.batch.encoded_len();
            if count > 0 && bytes + len > max_bytes {
                break;
            }
            bytes += len;
            count += 1;
            mine |= arrival.id == id;
        }
        mine.then_some(count)
    }

    /// The next group from the front, up to `max_bytes` (at least one batch), and whether
    /// it holds the batch `id`.
    fn take_group(&mut self, id: u64, max_bytes: usize) -> (Vec<(RecordBatch, Reply)>, bool) {
        let (mut group, mut bytes, mut mine) = (Vec::new(), 0, false);
        while let Some(next) = self.waiting.front() {
            let len = next.batch.encoded_len();
            if !group.is_empty() && bytes + len > max_bytes {
                break;
            }
            let Some(arrival) = self.waiting.pop_front() else { break };
            bytes += len;
            mine |= arrival.id == id;
            group.push((arrival.batch, arrival.done));
        }
        (group, mine)
    }
}

/// A producer's batch in the [`Arrivals`]: dropped while the batch still waits (the
/// producer stopped waiting before any commit took it), it takes the batch out — it is
/// not appended and holds no offsets — and passes on the turn to commit if it held it.
struct Arrived {
    core: Arc<TopicCore>,
    id: u64,
}

impl Drop for Arrived {
    fn drop(&mut self) {
        let mut arrivals = self.core.arrivals.lock();
        if !arrivals.remove(self.id) && !arrivals.held.is_empty() {
            // Possibly held by a commit with no await that may hand it back.
            arrivals.dropped.push(self.id);
        }
        let next = if arrivals.lead == Lead::Producer(self.id) { arrivals.pass_lead() } else { None };
        drop(arrivals);
        if let Some(next) = next {
            next.wake();
        }
    }
}

/// A commit run in the caller's task that the caller cannot leave half done: dropped
/// before it finished (the caller stopped waiting), it hands the rest to a task of its
/// own, which holds the writer's lock until the commit is finished — the producers whose
/// batches it took get their answers, and the writer's state is never left between two
/// steps of a commit. Whether a commit runs inline is decided before it starts, never from
/// whether a poll of it was ready.
struct Finish {
    work: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
}

impl Future for Finish {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if let Some(work) = self.work.as_mut() {
            std::task::ready!(work.as_mut().poll(cx));
            self.work = None;
        }
        Poll::Ready(())
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        let Some(work) = self.work.take() else { return };
        // Without a runtime (it is shutting down) no task would run it either: every task
        // of the store stops where it is, as in a crash.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            drop(runtime.spawn(work));
        }
    }
}

/// `Closed` for `topic`: its writer's queue is gone.
fn closed(topic: &TopicName) -> TierError {
    TierError::closed(ErrorContext::tier(TierKind::Router).topic(topic), "the store is closed")
}

/// Commits the [`Arrivals`] of `core` from the front, group by group, under the writer's
/// `lock`, until the batch `id` is committed (or no batch waits), then passes the turn to
/// commit on ([`Lead`]; the caller set it to `Committing`). Refused with `Closed` once the
/// writer has stopped.
async fn commit_arrivals(
    core: Arc<TopicCore>,
    mut writer: OwnedMutexGuard<Writer>,
    id: u64,
    max_group: usize,
) {
    loop {
        let (group, mine) = core.arrivals.lock().take_group(id, max_group);
        if group.is_empty() {
            break;
        }
        if writer.is_stopped() {
            for (_, done) in group {
                let _ = done.send(Err(closed(&core.name)));
            }
        } else {
            writer.append_direct(group).await;
        }
        if mine {
            break;
        }
    }
    let next = core.end_commit(&writer);
    drop(writer);
    if let Some(next) = next {
        next.wake();
    }
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
    /// The batch is committed in the caller's task (no hand-off to the writer task and
    /// back): it arrives among the topic's awaited appends, and the producer whose turn it
    /// is takes the writer's lock and commits what arrived, as the writer task's group
    /// commit would (offset reservation first, then the WAL and warm; see
    /// `docs/router.md`, "Write path"); the turn then passes to the oldest batch still
    /// waiting, so none waits forever, and a producer whose batch was committed by
    /// another never waits for the lock. A caller that stops waiting cannot leave a commit
    /// half done: a batch no commit took yet is not appended (and the turn, if it was its
    /// own, passes on); one a commit took is committed to the end by a task of its own.
    /// Once polled, the future is to be awaited to the end or dropped: held without being
    /// polled while it leads a commit, it holds up the topic's appends. While batches of
    /// [`enqueue_batch`](Self::enqueue_batch) (or a flush) are queued, the batch goes
    /// through the writer's queue behind them.
    pub async fn append_batch(&self, builder: RecordBatchBuilder) -> Result<OffsetRange, TierError> {
        if self.core.queued.load(Ordering::SeqCst) != 0 {
            return self.submit(builder).await?.await;
        }
        let (records, bytes, started) = (builder.len(), builder.payload_bytes(), metrics::latency_start());
        let result = self.commit_here(builder).await;
        metrics::appended(&result, records, bytes, started.elapsed());
        result
    }

    /// [`append_batch`](Self::append_batch)'s commit in the caller's task: the batch
    /// arrives, then its producer waits for its answer or its turn to commit
    /// ([`Arrivals`]).
    async fn commit_here(&self, builder: RecordBatchBuilder) -> Result<OffsetRange, TierError> {
        let batch = builder.build(0).map_err(|e| self.in_ctx(e))?;
        // Taken, with the queue, when the store closes.
        let writer = self.core.writer.lock().clone().ok_or_else(|| self.closed())?;
        let (done, mut answer) = oneshot::channel();
        let arrived = self.core.arrive(batch, done);
        // Every producer polled in this pass arrives before anyone takes a group.
        yield_once().await;
        let id = arrived.id;
        match std::future::poll_fn(|cx| self.core.poll_turn(id, &mut answer, cx)).await {
            Turn::Answered(answer) => return answer,
            Turn::Lead => {}
        }
        let max_group = self.tiers.config.max_group_bytes;
        if let Some(answer) = self.core.commit_at_once(&writer, id, max_group) {
            return answer;
        }
        // Dropped while waiting for the lock, `arrived` takes the batch out and passes
        // the turn on.
        let lock = writer.lock_owned().await;
        // From here the commit holds the turn, and passes it on when it ends.
        self.core.arrivals.lock().lead = Lead::Committing;
        Finish { work: Some(Box::pin(commit_arrivals(Arc::clone(&self.core), lock, id, max_group))) }.await;
        drop(arrived);
        answer.await.unwrap_or_else(|_| Err(self.closed()))
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
        self.submit(builder).await
    }

    /// Encodes `builder`'s batch and queues it to the writer.
    async fn submit(&self, builder: RecordBatchBuilder) -> Result<PendingAppend, TierError> {
        let (records, bytes, started) = (builder.len(), builder.payload_bytes(), metrics::latency_start());
        let queued = async {
            let batch = builder.build(0).map_err(|e| self.in_ctx(e))?;
            let (done, answer) = oneshot::channel();
            self.core.send(Command::Append { batch, done }).await?;
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
        self.core.hwm.get()
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

/// Returns `Pending` once, waking its task first, so that the task is polled again after
/// whatever else its current poll polls (the other futures of a `join`). Unlike
/// `tokio::task::yield_now`, the wake-up does not wait for the runtime's next pass over
/// its I/O driver: on a worker with nothing else queued, that pass is an `epoll_wait`
/// per append.
async fn yield_once() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if std::mem::replace(&mut yielded, true) {
            return Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}
