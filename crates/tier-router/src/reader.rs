//! The stitched reader: one ordered stream of the committed batches of a topic across
//! cold, warm, the WAL and the live tail — the verified [`RecordBatch`]es the tiers
//! store, with no [`Record`] built — and the record reader, which is its flattening
//! ([`open_records`]).
//!
//! For the next offset `n` wanted, the reader asks the WAL first (it serves `n` when it
//! holds it, up to the commit point), then warm (up to where the WAL takes over), then
//! cold (up to where warm or the WAL takes over), so each tier serves only its slice
//! ([`slice::choose`]). Every read is bounded (`router.read_batch_bytes`) and must hold
//! `n`: a tier that answers with other offsets is `Corruption`, an offset no tier holds
//! is `NotFound` naming the missing range — never skipped. Batches are never split and
//! their boundaries may differ between tiers, so each item carries the first offset not
//! delivered before ([`ReadBatch::from`]).
//!
//! The live tail is the commit point, then batch reads: at the commit point the reader
//! waits for the high watermark to move and reads the new batches from the WAL
//! ([`tier_hot::HotTier::read_batches`], served from its cache); if the WAL no longer
//! holds them (retention overtook a slow consumer), it continues from history. A batch
//! is yielded only once the commit point has passed all of it.
//!
//! A damaged WAL batch is served from warm or cold when one holds it, after the WAL's
//! intact batches before it ([`read_intact`](tier_core::position::read_intact),
//! [`slice::instead_of_wal`]). Cold's sequential stream is told where cold's slice ends,
//! so its read-ahead never fetches what the WAL serves.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use futures::stream::{self, BoxStream, StreamExt};
use tier_core::batch::RecordIter;
use tier_core::{
    ErrorContext, Offset, OffsetRange, Record, RecordBatch, StartPosition, Tier, TierError, TierKind,
    TopicName,
};
use tracing::{Instrument, Span};

use crate::backend::{ColdBackend, WarmBackend};
use crate::commit_point::Committed;
use crate::metrics;
use crate::slice::{self, Slice};
use crate::tiers::Tiers;

/// Which part of the store served a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// The cold tier.
    Cold,
    /// The warm tier.
    Warm,
    /// The WAL, read as history.
    Hot,
    /// The WAL's live tail.
    Live,
}

impl Source {
    /// The tier behind the source (`Live` is the WAL).
    pub fn tier(self) -> TierKind {
        match self {
            Source::Cold => TierKind::Cold,
            Source::Warm => TierKind::Warm,
            Source::Hot | Source::Live => TierKind::Hot,
        }
    }

    /// The [`TIER`](metrics::TIER) label of the records this source serves in
    /// [`READ_RECORDS`](metrics::READ_RECORDS) and the `tierlog` program's output.
    pub fn label(self) -> &'static str {
        match self {
            Source::Cold => "cold",
            Source::Warm => "warm",
            Source::Hot => "hot",
            Source::Live => "live",
        }
    }
}

/// A reader's handles of [`READ_RECORDS`](metrics::READ_RECORDS) /
/// [`READ_BYTES`](metrics::READ_BYTES) per source, looked up once.
struct ReadCounters([(::metrics::Counter, ::metrics::Counter); 4]);

impl ReadCounters {
    const SOURCES: [Source; 4] = [Source::Cold, Source::Warm, Source::Hot, Source::Live];

    fn new() -> Self {
        Self(Self::SOURCES.map(|s| {
            let label = s.label();
            (
                ::metrics::counter!(metrics::READ_RECORDS, metrics::TIER => label),
                ::metrics::counter!(metrics::READ_BYTES, metrics::TIER => label),
            )
        }))
    }

    /// Counts `records` records of `bytes` bytes served by `source`.
    fn read(&self, source: Source, records: u64, bytes: u64) {
        let i = Self::SOURCES.iter().position(|s| *s == source).expect("every source has counters");
        self.0[i].0.increment(records);
        self.0[i].1.increment(bytes);
    }
}

impl std::fmt::Debug for ReadCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadCounters")
    }
}

/// One item of [`Topic::batch_reader`](crate::Topic::batch_reader): a committed batch,
/// the part of the store that served it, and the first of its offsets the reader had not
/// delivered before.
#[derive(Clone, Debug)]
pub struct ReadBatch {
    /// Which part of the store served the batch.
    pub source: Source,
    /// The batch, whole and verified (CRC and records checked by the tier).
    pub batch: RecordBatch,
    /// The first offset of `batch` not delivered by an earlier item: the previous item's
    /// `batch.end_offset()`, or the resolved start offset for the first item. It lies
    /// inside the batch (`batch.base_offset() <= from < batch.end_offset()`).
    pub from: Offset,
}

impl ReadBatch {
    /// The records of the batch from [`from`](Self::from) on: the ones this item
    /// delivers (those before `from` are stepped over without being built).
    pub fn records(&self) -> RecordIter<'_> {
        self.batch.records_from(self.from)
    }

    /// The offsets this item delivers: `from..batch.end_offset()`.
    pub fn offsets(&self) -> OffsetRange {
        OffsetRange::new(self.from, self.batch.end_offset())
    }
}

/// An open sequential read of cold (with its read-ahead) ending at the end of cold's
/// slice, kept across slices of the same end and dropped at the hand-off to warm or the
/// WAL.
struct ColdStream {
    /// The offset the next batch must start at (or, before the first, hold).
    next: Offset,
    /// The end the stream was opened with (it reads no batch starting there or after).
    end: Offset,
    /// No batch has been taken from the stream yet.
    fresh: bool,
    batches: BoxStream<'static, Result<RecordBatch, TierError>>,
}

struct Reader {
    tiers: Arc<Tiers>,
    topic: TopicName,
    hwm: Committed,
    /// The first offset not delivered yet.
    next: Offset,
    buf: VecDeque<(Source, RecordBatch)>,
    /// The reader reached the commit point: batches the WAL serves now are the live tail.
    live: bool,
    cold: Option<ColdStream>,
    /// Bounds of each read (`router.read_batch_bytes`, `router.read_batch_records`; the
    /// first batch of a read is taken whatever its size).
    max_bytes: usize,
    max_records: u64,
    done: bool,
    /// What the stream counts as read (`tierlog_read_*`); the record reader counts its
    /// records' payloads itself.
    counters: Option<ReadCounters>,
    /// Until the first batch: the reader's positioning.
    seek: Option<Seek>,
}

/// A reader positioning itself: from its opening to its first batch (see
/// `tierlog_seek_seconds` and `_bytes_total` in `docs/metrics.md`).
#[derive(Debug)]
struct Seek {
    opened: Instant,
    span: Span,
}

impl Seek {
    /// Counts a reader of `topic` from `start` opened now, and opens its `seek` span
    /// (fields: topic, start, the resolved offset once known).
    fn start(topic: &TopicName, start: StartPosition) -> Self {
        ::metrics::counter!(metrics::SEEK_REQUESTS, metrics::BY => metrics::by_label(start)).increment(1);
        let span =
            tracing::info_span!("seek", topic = %topic, start = ?start, offset = tracing::field::Empty);
        Self { opened: metrics::latency_start(), span }
    }

    /// The first batch was delivered.
    fn done(self) {
        ::metrics::histogram!(metrics::SEEK_SECONDS).record(self.opened.elapsed().as_secs_f64());
    }
}

/// Resolves `start` and returns the stream of batches.
pub(crate) async fn open_batches(
    tiers: Arc<Tiers>,
    topic: TopicName,
    hwm: Committed,
    start: StartPosition,
) -> Result<BoxStream<'static, Result<ReadBatch, TierError>>, TierError> {
    open(tiers, topic, hwm, start, Some(ReadCounters::new())).await
}

/// Resolves `start` and returns the reader's stream; `counters`: what it counts as read.
async fn open(
    tiers: Arc<Tiers>,
    topic: TopicName,
    hwm: Committed,
    start: StartPosition,
    counters: Option<ReadCounters>,
) -> Result<BoxStream<'static, Result<ReadBatch, TierError>>, TierError> {
    let seek = Seek::start(&topic, start);
    let committed = hwm.get();
    let next = metrics::positioning(start_offset(&tiers, &topic, start, committed))
        .instrument(seek.span.clone())
        .await?;
    seek.span.record("offset", next);
    let max_bytes = tiers.config.read_batch_bytes;
    let max_records = u64::try_from(tiers.config.read_batch_records).unwrap_or(u64::MAX);
    let reader = Reader {
        tiers,
        topic,
        hwm,
        next,
        buf: VecDeque::new(),
        live: matches!(start, StartPosition::Latest),
        cold: None,
        max_bytes,
        max_records,
        done: false,
        counters,
        seek: Some(seek),
    };
    Ok(stream::unfold(reader, |mut r| async move { r.next_item().await.map(|item| (item, r)) }).boxed())
}

/// Resolves `start` and returns the stream of records: the batch stream
/// ([`open_batches`]) flattened, each record with the part of the store that served it.
pub(crate) async fn open_records(
    tiers: Arc<Tiers>,
    topic: TopicName,
    hwm: Committed,
    start: StartPosition,
) -> Result<BoxStream<'static, Result<(Source, Record), TierError>>, TierError> {
    let batches = open(tiers, topic, hwm, start, None).await?;
    let counters = ReadCounters::new();
    Ok(batches
        .flat_map(move |item| {
            let records: Vec<Result<(Source, Record), TierError>> = match item {
                Ok(read) => {
                    let records: Vec<_> = read.records().map(|r| Ok((read.source, r))).collect();
                    let payload: usize = records.iter().flatten().map(|(_, r)| r.payload.len()).sum();
                    counters.read(read.source, records.len() as u64, payload as u64);
                    records
                }
                Err(e) => vec![Err(e)],
            };
            stream::iter(records)
        })
        .boxed())
}

/// The first offset a read from `start` yields, `committed` being the commit point now
/// (see the start positions in `docs/router.md`).
pub(crate) async fn start_offset(
    tiers: &Tiers,
    topic: &TopicName,
    start: StartPosition,
    committed: Offset,
) -> Result<Offset, TierError> {
    match start {
        StartPosition::Offset(o) => Ok(o),
        StartPosition::Latest => Ok(committed),
        StartPosition::Earliest => earliest(tiers, topic, committed).await,
        StartPosition::Timestamp(t) => by_timestamp(tiers, topic, t, committed).await,
    }
}

/// The oldest offset any tier holds (the commit point when none holds any).
async fn earliest(tiers: &Tiers, topic: &TopicName, committed: Offset) -> Result<Offset, TierError> {
    let mut ranges = vec![tiers.hot.range(topic).await?];
    if let Some(w) = &tiers.warm {
        ranges.push(w.range(topic).await?);
    }
    if let Some(c) = &tiers.cold {
        ranges.push(c.range(topic).await?);
    }
    Ok(ranges.iter().filter(|r| !r.is_empty()).map(|r| r.start).min().unwrap_or(committed).min(committed))
}

/// Asks cold, warm, then the WAL (oldest data first); the first answer wins.
async fn by_timestamp(
    tiers: &Tiers,
    topic: &TopicName,
    t: tier_core::Timestamp,
    committed: Offset,
) -> Result<Offset, TierError> {
    if let Some(c) = &tiers.cold
        && let Some(o) = c.offset_for_timestamp(topic, t).await?
    {
        return Ok(o.min(committed));
    }
    if let Some(w) = &tiers.warm
        && let Some(o) = w.offset_for_timestamp(topic, t).await?
    {
        // Never a record warm holds in offsets a degraded open skipped (never
        // acknowledged, written before the records after them): the first after them.
        let o = tiers.warm_limit(topic, o).map_or_else(|skipped| skipped.end, |_| o);
        return Ok(o.min(committed));
    }
    Ok(tiers.hot.offset_for_timestamp(topic, t).await?.map_or(committed, |o| o.min(committed)))
}

/// Checks that `batch`, answered by `kind` for offset `expected`, holds it (`first`: the
/// first batch of a read, which may start before it) or starts exactly at it.
fn check_batch(
    kind: TierKind,
    topic: &TopicName,
    expected: Offset,
    first: bool,
    batch: &RecordBatch,
) -> Result<(), TierError> {
    let (base, end) = (batch.base_offset(), batch.end_offset());
    let ok = if first { base <= expected && expected < end } else { base == expected && expected < end };
    if ok {
        return Ok(());
    }
    let want = if first { "holding" } else { "starting at" };
    Err(TierError::corruption(
        ErrorContext::tier(kind).topic(topic).offset(expected),
        format!(
            "asked for the batch {want} offset {expected}, got a batch of offsets {}",
            batch.offset_range()
        ),
    ))
}

/// The tier answered with nothing for `n` although its range held it a moment ago: its
/// range moved (retention, trimming); the caller re-reads the ranges and retries.
fn moved(kind: TierKind, topic: &TopicName, n: Offset) -> TierError {
    TierError::trimmed(ErrorContext::tier(kind).topic(topic).offset(n), n, OffsetRange::empty_at(n))
}

impl Reader {
    async fn next_item(&mut self) -> Option<Result<ReadBatch, TierError>> {
        if self.done {
            return None;
        }
        loop {
            if let Some((source, batch)) = self.buf.pop_front() {
                let end = batch.end_offset();
                // A batch is yielded only once the commit point has passed all of it.
                if self.hwm.get() < end && self.hwm.wait_for(|h| h >= end).await.is_err() {
                    self.done = true;
                    return Some(Err(self.closed()));
                }
                let from = self.next;
                self.next = end;
                self.count(source, &batch, from);
                return Some(Ok(ReadBatch { source, batch, from }));
            }
            // Until the first batch, filling is part of the seek.
            let filled = match self.seek.as_ref().map(|s| s.span.clone()) {
                Some(span) => metrics::positioning(self.fill()).instrument(span).await,
                None => self.fill().await,
            };
            if let Err(e) = filled {
                self.done = true;
                return Some(Err(e));
            }
        }
    }

    /// Counts the records of `batch` from `from` served by `source`, and their bytes: the
    /// share of the batch's encoded length they take (no record is decoded to count
    /// payloads; the record reader counts its payloads itself). The first batch ends the
    /// seek.
    fn count(&mut self, source: Source, batch: &RecordBatch, from: Offset) {
        if let Some(counters) = &self.counters {
            let records = batch.end_offset() - from;
            let all = u64::from(batch.record_count()).max(1);
            let bytes = (batch.encoded_len() as u128 * u128::from(records) / u128::from(all)) as u64;
            counters.read(source, records, bytes);
        }
        if let Some(seek) = self.seek.take() {
            seek.done();
        }
    }

    fn closed(&self) -> TierError {
        TierError::closed(ErrorContext::tier(TierKind::Router).topic(&self.topic), "the store is closed")
    }

    /// Buffers the next batches, waiting at the commit point for new ones.
    async fn fill(&mut self) -> Result<(), TierError> {
        let n = self.next;
        if n >= self.hwm.get() {
            // The live tail: the next batches are read from the WAL once committed.
            self.live = true;
            self.cold = None;
            if self.hwm.wait_for(|h| h > n).await.is_err() {
                return Err(self.closed());
            }
        }
        let mut attempt = 0;
        loop {
            let committed = self.hwm.get();
            match self.read_slice(committed).await {
                Ok(()) => return Ok(()),
                Err(e) if slice::retry_moved(&e, &mut attempt) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads the next batches below `committed` from the tier [`slice::choose`] picks.
    async fn read_slice(&mut self, committed: Offset) -> Result<(), TierError> {
        let mut chosen = slice::choose(&self.tiers, &self.topic, self.next, committed).await?;
        // At most twice round: the WAL's failure either ends the read or names the tier
        // replacing the WAL there, which is never the WAL.
        loop {
            match chosen {
                Slice::Hot { to } => match self.read_hot(to).await {
                    Ok(()) => return Ok(()),
                    Err(e) => {
                        chosen = slice::instead_of_wal(&self.tiers, &self.topic, self.next, to, e).await?
                    }
                },
                Slice::Warm { tier, to } => {
                    self.cold = None;
                    self.live = false;
                    return self.read_warm(tier, to).await;
                }
                Slice::Cold { tier, to } => {
                    self.live = false;
                    let (n, read) = (self.next, self.read_cold(tier, to).await);
                    return slice::or_unreachable(&self.tiers, &self.topic, n, read).await;
                }
            }
        }
    }

    /// Reads the WAL's batches holding `self.next..to`; on a damaged batch, the intact
    /// batches before it, or the `Corruption` when the batch holding `self.next` is the
    /// damaged one.
    async fn read_hot(&mut self, to: Offset) -> Result<(), TierError> {
        // A hand-off away from cold stops its read-ahead.
        self.cold = None;
        let source = if self.live { Source::Live } else { Source::Hot };
        let (n, max_bytes) = (self.next, self.max_bytes);
        let to = to.min(n.saturating_add(self.max_records));
        let (hot, topic) = (&self.tiers.hot, &self.topic);
        let batches =
            tier_core::position::read_intact(n, to, |end| hot.read_batches(topic, n, end, max_bytes)).await?;
        self.accept(TierKind::Hot, source, batches)
    }

    /// Buffers `batches`, answered by `kind` for `self.next`, after checking that they
    /// continue the read; an empty answer means the tier's range moved.
    fn accept(&mut self, kind: TierKind, source: Source, batches: Vec<RecordBatch>) -> Result<(), TierError> {
        if batches.is_empty() {
            return Err(moved(kind, &self.topic, self.next));
        }
        let mut expected = self.next;
        for (i, batch) in batches.iter().enumerate() {
            check_batch(kind, &self.topic, expected, i == 0, batch)?;
            expected = batch.end_offset();
        }
        self.buf.extend(batches.into_iter().map(|b| (source, b)));
        Ok(())
    }

    /// Reads warm's batches holding `self.next..to`, about `max_bytes` of them, through
    /// [`WarmBackend::batches_from`] (paged; dropped after the read).
    async fn read_warm(&mut self, tier: Arc<dyn WarmBackend>, to: Offset) -> Result<(), TierError> {
        let n = self.next;
        metrics::warm_read();
        let mut stream = tier.batches_from(&self.topic, n);
        let (mut batches, mut bytes, mut next) = (Vec::new(), 0usize, n);
        while next < to && bytes < self.max_bytes && next - n < self.max_records {
            match stream.next().await {
                Some(Ok(batch)) => {
                    if batches.is_empty()
                        && batch.base_offset() > n
                        && !tier.range(&self.topic).await?.contains(n)
                    {
                        // Trimmed since the slice was chosen.
                        return Err(moved(TierKind::Warm, &self.topic, n));
                    }
                    check_batch(TierKind::Warm, &self.topic, next, batches.is_empty(), &batch)?;
                    next = batch.end_offset();
                    bytes = bytes.saturating_add(batch.encoded_len());
                    batches.push(batch);
                }
                // Deliver the batches before a failure first; the next read reports it.
                Some(Err(_)) if !batches.is_empty() => break,
                Some(Err(e)) => return Err(e),
                None => break,
            }
        }
        self.accept(TierKind::Warm, Source::Warm, batches)
    }

    /// Serves `self.next..to` from cold through one long sequential stream of batches
    /// ending at `to` ([`ColdBackend::record_batches_from`], about `max_bytes` per call),
    /// kept open across slices so catch-up reads get the cold tier's read-ahead, which
    /// stops where cold's slice does.
    async fn read_cold(&mut self, tier: Arc<dyn ColdBackend>, to: Offset) -> Result<(), TierError> {
        let n = self.next;
        if self.cold.as_ref().is_none_or(|c| c.next != n || c.end != to) {
            let batches = tier.record_batches_from(&self.topic, n, to);
            self.cold = Some(ColdStream { next: n, end: to, fresh: true, batches });
        }
        let Some(cold) = self.cold.as_mut() else { return Ok(()) };
        let (mut count, mut bytes) = (0usize, 0usize);
        let (mut failure, mut ended) = (None, false);
        while cold.next < to && bytes < self.max_bytes && cold.next.saturating_sub(n) < self.max_records {
            match cold.batches.next().await {
                Some(Ok(batch)) => {
                    if let Err(e) = check_batch(TierKind::Cold, &self.topic, cold.next, cold.fresh, &batch) {
                        self.cold = None;
                        return Err(e);
                    }
                    cold.fresh = false;
                    cold.next = batch.end_offset();
                    count += 1;
                    bytes = bytes.saturating_add(batch.encoded_len());
                    self.buf.push_back((Source::Cold, batch));
                }
                Some(Err(e)) => {
                    // Deliver the batches before the failure (e.g. a gap) first; the next
                    // slice reopens the stream where it failed and reports it.
                    failure = Some(e);
                    break;
                }
                None => {
                    ended = true;
                    break;
                }
            }
        }
        if let Some(e) = failure {
            self.cold = None;
            if count == 0 {
                return Err(e);
            }
            return Ok(());
        }
        let reached = self.cold.as_ref().map_or(n, |c| c.next);
        if reached >= to || count == 0 || ended {
            // Hand-off to warm or the WAL (or the stream ended): stop reading ahead.
            self.cold = None;
        }
        if count == 0 {
            return Err(moved(TierKind::Cold, &self.topic, n));
        }
        Ok(())
    }
}
