//! Extension traits that let any [`Tier`] take the warm or the cold position.
//!
//! The router needs a little more from its warm and cold tiers than [`Tier`] offers:
//! the warm tier is trimmed and replayed after a lost disk ([`WarmBackend`]); the cold
//! tier receives whole sealed WAL segments ([`ColdBackend`]). Every method is required —
//! no default body a wrapper could forget to forward (the CLI's metered wrapper once
//! exported and read cold through such defaults). A custom tier with nothing better to
//! offer implements them with the helpers built on [`Tier`]: [`paged_records`],
//! [`rebuilt_batches`], [`rebuilt_warm_batches`], [`append_segment`], [`refuse_gap`]
//! and [`holds_records`]; tierlog's own tiers use their native operations.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use tier_core::segment::SealedSegment;
use tier_core::{
    ErrorContext, Offset, OffsetRange, ReadLimit, Record, RecordBatch, Tier, TierError, TopicName,
};

/// Records per batch rebuilt by the default [`WarmBackend::batches_from`].
const REBUILT_BATCH_RECORDS: usize = 1000;

/// Bytes of records per batch rebuilt by the default
/// [`ColdBackend::record_batches_from`].
const REBUILT_BATCH_BYTES: usize = 4 << 20;

/// The state of the default [`ColdBackend::record_batches_from`]: the record stream, the
/// offset the next batch starts at, and a failure to report after the batch before it.
struct Rebuild {
    records: stream::Fuse<BoxStream<'static, Result<Record, TierError>>>,
    next: Offset,
    failed: Option<TierError>,
}

/// A [`Tier`] usable in the warm position: written with every batch, trimmed to the last
/// closed segments, and replayed into a fresh WAL after the local disk is lost.
#[async_trait]
pub trait WarmBackend: Tier {
    /// Drops whole batches below `offset` (a batch holding `offset` may stay). Never
    /// removes the newest batch, so the tier keeps remembering where the log ends.
    async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError>;

    /// Every batch of `topic` from the one holding `from` on, in order, for replay into a
    /// fresh WAL and warm's own back-fill checks. Tiers that store batches return them as
    /// appended; [`rebuilt_warm_batches`] rebuilds batches from [`Tier::read`].
    fn batches_from(&self, topic: &TopicName, from: Offset) -> BoxStream<'_, Result<RecordBatch, TierError>>;

    /// Drops every batch of `topic` — all of them lie below `offset` — so that the tier
    /// holds nothing and takes its next batch at `offset`. The router calls it only to
    /// continue warm past offsets no tier holds any more (a reported loss), and only when
    /// the WAL or cold also holds every record warm holds (`docs/router.md`, "Warm past
    /// offsets no tier holds"). `InvalidInput` when a batch ends beyond `offset`.
    async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError>;

    /// Records that `topic` exists, durably as the tier's appends are (on a replicated
    /// tier, confirmed by the replicas; `Unavailable` when they do not confirm it).
    /// Idempotent. Recovery calls it before a topic's first offset is handed out, while
    /// the tier holds nothing of it: if the data directory is lost before warm holds a
    /// record the replicas confirmed (a `degrade` outage, a `WAIT` that fell short, then a
    /// failover), the marker is what tells the next recovery that offsets were handed out
    /// (`docs/router.md`, "Topic markers").
    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError>;

    /// True when [`record_topic`](Self::record_topic) recorded `topic`.
    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError>;
}

/// A [`Tier`] usable in the cold position: it receives each sealed WAL segment once the
/// hot tier has sealed it, and serves long sequential reads for consumers catching up.
#[async_trait]
pub trait ColdBackend: Tier + 'static {
    /// The batches of `topic` holding `from..to` (or to the end of what the tier holds
    /// now, if sooner), in order, for a long sequential read (the router's reader): the
    /// first batch may start before `from`, the last may end after `to`, and each batch
    /// starts where the previous one ended. The stream is lazy and owns its handle on the
    /// tier. It never reads a batch starting at or past `to`, read-ahead included, so
    /// nothing there can fail it. [`rebuilt_batches`] rebuilds batches from
    /// [`paged_records`], which pages through [`Tier::read`] one bounded read at a time;
    /// tiers that store batches return them as stored, and tiers that can read ahead do
    /// better (the cold tier keeps several ranged GETs in flight).
    fn record_batches_from(
        self: Arc<Self>,
        topic: &TopicName,
        from: Offset,
        to: Offset,
    ) -> BoxStream<'static, Result<RecordBatch, TierError>>;

    /// Stores the sealed segment file at `path` of `topic` and returns its offsets.
    /// Must be idempotent: storing a segment the tier already holds is `Ok`.
    /// [`append_segment`] appends each batch not yet held with [`Tier::append`].
    async fn store_segment(&self, topic: &TopicName, path: &Path) -> Result<OffsetRange, TierError>;

    /// Records offsets `range` of `topic` as lost (the WAL declared them lost, or
    /// recovery found them held by no tier), so that the segment starting at `range.end`
    /// may continue what the tier holds. Must be idempotent. Reads of the range should
    /// fail with `NotFound` naming it. A tier that cannot hold a gap answers
    /// [`refuse_gap`]'s `InvalidInput`: its export then stops at the gap, which the
    /// exporter reports and retries, rather than storing a log with a hole in it.
    async fn record_gap(&self, topic: &TopicName, range: OffsetRange) -> Result<(), TierError>;

    /// Records durably that `topic` exists. The router calls it before a topic's first
    /// offset is handed out, so that a lost data directory (the WAL and the router's state
    /// files) cannot restart the topic at 0 while the tier holds none of its records yet.
    /// Must be idempotent. A tier that cannot hold such a marker answers `Ok(())` and
    /// implements [`topic_recorded`](Self::topic_recorded) with [`holds_records`].
    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError>;

    /// Whether [`record_topic`](Self::record_topic) recorded `topic`.
    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError>;

    /// The offset the next stored segment of `topic` must start at: the end of what the
    /// tier holds, moved past offsets recorded lost after it
    /// ([`record_gap`](Self::record_gap)); 0 for a topic it holds nothing of. Recovery
    /// never hands out an offset below it. A tier that cannot record a gap answers
    /// [`Tier::range`]'s end.
    async fn continuation(&self, topic: &TopicName) -> Result<Offset, TierError>;
}

/// [`ColdBackend::topic_recorded`] for a tier that cannot hold a topic marker: whether it
/// holds any record of `topic` (the only evidence such a tier keeps).
pub async fn holds_records<T: Tier + ?Sized>(tier: &T, topic: &TopicName) -> Result<bool, TierError> {
    Ok(!tier.range(topic).await?.is_empty())
}

/// [`WarmBackend::batches_from`] for a tier with nothing better: batches of up to 1000
/// records rebuilt from [`Tier::read`] (so batch boundaries may differ from the ones
/// appended).
pub fn rebuilt_warm_batches<'a, T: Tier + ?Sized>(
    tier: &'a T,
    topic: &TopicName,
    from: Offset,
) -> BoxStream<'a, Result<RecordBatch, TierError>> {
    let topic = topic.clone();
    stream::unfold(Some(from), move |next| {
        let topic = topic.clone();
        async move {
            let next = next?;
            let range = match tier.range(&topic).await {
                Ok(r) => r,
                Err(e) => return Some((Err(e), None)),
            };
            let from = next.max(range.start);
            if from >= range.end {
                return None;
            }
            let limit = ReadLimit { max_records: REBUILT_BATCH_RECORDS, max_bytes: REBUILT_BATCH_BYTES };
            let records = match tier.read(&topic, from, range.end, limit).await {
                Ok(r) if r.is_empty() => return None,
                Ok(r) => r,
                Err(e) => return Some((Err(e), None)),
            };
            let end = from + records.len() as u64;
            Some((RecordBatch::from_records(from, &records), Some(end)))
        }
    })
    .boxed()
}

/// The records of a tier with nothing better, for [`rebuilt_batches`] (and so for
/// [`ColdBackend::record_batches_from`]): pages through
/// [`Tier::read`] one bounded read at a time, never at or past `to`.
///
/// A read that fails with `Corruption` (damage somewhere in what it would return: the
/// [`Tier`] contract lets a tier fail the whole read for it) is narrowed to the longest
/// read ending before the damage (a few reads ending closer to the page's start,
/// galloping then bisecting, on the damaged path only), so the intact records before
/// the damage are yielded, then the `Corruption` of the read starting at the damaged
/// offset, which ends the stream.
pub fn paged_records<T: Tier + ?Sized + 'static>(
    tier: Arc<T>,
    topic: &TopicName,
    from: Offset,
    to: Offset,
) -> BoxStream<'static, Result<Record, TierError>> {
    let topic = topic.clone();
    stream::unfold(Some(from), move |next| {
        let tier = Arc::clone(&tier);
        let topic = topic.clone();
        async move {
            let next = next?;
            let range = match tier.range(&topic).await {
                Ok(r) => r,
                Err(e) => return Some((Err(e), None)),
            };
            let end = range.end.min(to);
            if next >= end {
                return None;
            }
            let read = |end| tier.read(&topic, next, end, ReadLimit::default());
            match crate::intact::read_intact(next, end, read).await {
                Ok(records) => {
                    let end = records.last()?.offset + 1;
                    Some((Ok(records), Some(end)))
                }
                Err(e) => Some((Err(e), None)),
            }
        }
    })
    .map_ok(|records| stream::iter(records.into_iter().map(Ok)))
    .try_flatten()
    .boxed()
}

/// [`ColdBackend::record_batches_from`] for a tier with nothing better: batches of up to
/// 1000 records / 4 MiB rebuilt from `records` (a record stream starting at `from`, such
/// as [`paged_records`]); the first batch starts at `from`, and a record stream that is not
/// dense from `from` is `Corruption` (context: `kind`, `topic`).
pub fn rebuilt_batches(
    kind: tier_core::TierKind,
    topic: &TopicName,
    records: BoxStream<'static, Result<Record, TierError>>,
    from: Offset,
) -> BoxStream<'static, Result<RecordBatch, TierError>> {
    let ctx = ErrorContext::tier(kind).topic(topic);
    let state = Rebuild { records: records.fuse(), next: from, failed: None };
    stream::unfold(Some(state), move |state| {
        let ctx = ctx.clone();
        async move {
            let mut st = state?;
            if let Some(e) = st.failed.take() {
                return Some((Err(e), None));
            }
            let mut chunk: Vec<Record> = Vec::new();
            let mut bytes = 0usize;
            while chunk.len() < REBUILT_BATCH_RECORDS && bytes < REBUILT_BATCH_BYTES {
                let want = st.next + chunk.len() as u64;
                match st.records.next().await {
                    Some(Ok(r)) if r.offset == want => {
                        bytes = bytes.saturating_add(r.size());
                        chunk.push(r);
                    }
                    Some(Ok(r)) => {
                        st.failed = Some(TierError::corruption(
                            ctx.clone().offset(want),
                            format!(
                                "the record stream yielded offset {} where {want} was expected",
                                r.offset
                            ),
                        ));
                        break;
                    }
                    Some(Err(e)) => {
                        st.failed = Some(e);
                        break;
                    }
                    None => break,
                }
            }
            if chunk.is_empty() {
                // Nothing before the end or the failure: report the failure, if any.
                return st.failed.take().map(|e| (Err(e), None));
            }
            let batch = match RecordBatch::from_records(st.next, &chunk) {
                Ok(b) => b,
                Err(e) => return Some((Err(e), None)),
            };
            st.next = batch.end_offset();
            Some((Ok(batch), Some(st)))
        }
    })
    .boxed()
}

/// [`ColdBackend::store_segment`] for a tier with nothing better: reads the file, checks it
/// with [`SealedSegment`] and appends each batch `tier` does not hold yet with
/// [`Tier::append`] (batches already held are skipped).
pub async fn append_segment<T: Tier + ?Sized>(
    tier: &T,
    topic: &TopicName,
    path: &Path,
) -> Result<OffsetRange, TierError> {
    let ctx = || ErrorContext::tier(tier.kind()).topic(topic).location(path.display().to_string());
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|e| TierError::unavailable(ctx(), "reading a sealed segment to store it").with_source(e))?;
    let segment = SealedSegment::open(Bytes::from(bytes)).map_err(|e| {
        let at = e.position();
        e.into_tier_error(
            ErrorContext::tier(tier.kind()).topic(topic).location(format!("{}@{at}", path.display())),
        )
    })?;
    let held = tier.range(topic).await?;
    for item in segment.batches() {
        let (_, batch) = item.map_err(|e| {
            let at = e.position();
            e.into_tier_error(
                ErrorContext::tier(tier.kind()).topic(topic).location(format!("{}@{at}", path.display())),
            )
        })?;
        if !held.is_empty() && batch.end_offset() <= held.end {
            continue;
        }
        tier.append(topic, batch).await?;
    }
    Ok(segment.offset_range())
}

/// [`ColdBackend::record_gap`] for a tier that cannot hold a gap: `InvalidInput` naming
/// `kind`.
pub fn refuse_gap(kind: tier_core::TierKind, topic: &TopicName, range: OffsetRange) -> TierError {
    TierError::invalid(
        ErrorContext::tier(kind).topic(topic).offset(range.start),
        format!("the {kind} tier in the cold position cannot record offsets {range} as lost"),
    )
}

#[cfg(feature = "warm")]
#[async_trait]
impl WarmBackend for tier_warm::WarmTier {
    async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        tier_warm::WarmTier::trim_before(self, topic, offset).await.map(|_| ())
    }

    fn batches_from(&self, topic: &TopicName, from: Offset) -> BoxStream<'_, Result<RecordBatch, TierError>> {
        self.recovery_stream(topic, from)
    }

    async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        tier_warm::WarmTier::restart_at(self, topic, offset).await.map(|_| ())
    }

    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        tier_warm::WarmTier::record_topic(self, topic).await
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        tier_warm::WarmTier::topic_recorded(self, topic).await
    }
}

#[cfg(feature = "cold")]
#[async_trait]
impl ColdBackend for tier_cold::ColdTier {
    /// [`tier_cold::ColdTier::stream_batches_owned`]: the batches as stored, ranged GETs
    /// of `read_buffer` bytes with `read_ahead` in flight.
    fn record_batches_from(
        self: Arc<Self>,
        topic: &TopicName,
        from: Offset,
        to: Offset,
    ) -> BoxStream<'static, Result<RecordBatch, TierError>> {
        let topic = topic.clone();
        stream::once(async move { self.stream_batches_owned(&topic, from, to).await }).try_flatten().boxed()
    }

    /// Uploads the file byte for byte ([`tier_cold::ColdTier::export_segment`]).
    async fn store_segment(&self, topic: &TopicName, path: &Path) -> Result<OffsetRange, TierError> {
        let outcome = self.export_segment(topic, path).await?;
        Ok(match outcome {
            tier_cold::ExportOutcome::Uploaded { range, .. }
            | tier_cold::ExportOutcome::AlreadyPresent { range, .. } => range,
            // ExportOutcome is non-exhaustive: fall back to what the tier now holds.
            _ => self.range(topic).await?,
        })
    }

    /// Writes a gap marker ([`tier_cold::ColdTier::record_gap`]).
    async fn record_gap(&self, topic: &TopicName, range: OffsetRange) -> Result<(), TierError> {
        tier_cold::ColdTier::record_gap(self, topic, range).await
    }

    /// Writes the topic marker ([`tier_cold::ColdTier::record_topic`]).
    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        tier_cold::ColdTier::record_topic(self, topic).await
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        tier_cold::ColdTier::topic_recorded(self, topic).await
    }

    /// [`tier_cold::ColdTier::continuation`]: past the recorded gaps after the last segment.
    async fn continuation(&self, topic: &TopicName) -> Result<Offset, TierError> {
        tier_cold::ColdTier::continuation(self, topic).await
    }
}

/// A cold backend in the shape of a custom tier with nothing better: its sequential reads
/// are built on its [`Tier`] methods with [`paged_records`] and [`rebuilt_batches`];
/// every other method is forwarded to the tier it wraps. For testing the router's read
/// path over such a tier with a real one underneath (tier-router's tests, the simulation).
#[cfg(feature = "testkit")]
#[derive(Debug)]
pub struct PagedCold<T: ?Sized>(pub Arc<T>);

#[cfg(feature = "testkit")]
#[async_trait]
impl<T: ColdBackend + ?Sized> Tier for PagedCold<T> {
    fn kind(&self) -> tier_core::TierKind {
        self.0.kind()
    }
    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        self.0.range(topic).await
    }
    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        self.0.append(topic, batch).await
    }
    async fn read(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        limit: ReadLimit,
    ) -> Result<Vec<Record>, TierError> {
        self.0.read(topic, from, to, limit).await
    }
    async fn offset_for_timestamp(
        &self,
        topic: &TopicName,
        timestamp: tier_core::Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        self.0.offset_for_timestamp(topic, timestamp).await
    }
}

#[cfg(feature = "testkit")]
#[async_trait]
impl<T: ColdBackend + ?Sized> ColdBackend for PagedCold<T> {
    fn record_batches_from(
        self: Arc<Self>,
        topic: &TopicName,
        from: Offset,
        to: Offset,
    ) -> BoxStream<'static, Result<RecordBatch, TierError>> {
        let kind = self.kind();
        rebuilt_batches(kind, topic, paged_records(self, topic, from, to), from)
    }

    async fn store_segment(&self, topic: &TopicName, path: &Path) -> Result<OffsetRange, TierError> {
        self.0.store_segment(topic, path).await
    }

    async fn record_gap(&self, topic: &TopicName, range: OffsetRange) -> Result<(), TierError> {
        self.0.record_gap(topic, range).await
    }

    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        self.0.record_topic(topic).await
    }

    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        self.0.topic_recorded(topic).await
    }

    async fn continuation(&self, topic: &TopicName) -> Result<Offset, TierError> {
        self.0.continuation(topic).await
    }
}

#[cfg(feature = "testkit")]
mod testkit_impls {
    use super::*;
    use tier_testkit::{FaultyTier, MemoryTier};

    #[async_trait]
    impl WarmBackend for MemoryTier {
        async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
            let range = self.range(topic).await?;
            // Like the warm tier: never drop the newest batch.
            MemoryTier::trim_before(self, topic, offset.min(range.end.saturating_sub(1)));
            Ok(())
        }

        fn batches_from(
            &self,
            topic: &TopicName,
            from: Offset,
        ) -> BoxStream<'_, Result<RecordBatch, TierError>> {
            let batches = self.batches(topic);
            stream::iter(batches.into_iter().filter(move |b| b.end_offset() > from).map(Ok)).boxed()
        }

        async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
            let range = self.range(topic).await?;
            if range.end > offset {
                return Err(TierError::invalid(
                    ErrorContext::tier(self.kind()).topic(topic).offset(offset),
                    format!("cannot restart at {offset}: the tier holds {range}"),
                ));
            }
            MemoryTier::trim_before(self, topic, offset);
            Ok(())
        }

        async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
            self.create_topic(topic);
            Ok(())
        }

        async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
            Ok(self.topics().contains(topic))
        }
    }

    #[async_trait]
    impl ColdBackend for MemoryTier {
        fn record_batches_from(
            self: Arc<Self>,
            topic: &TopicName,
            from: Offset,
            to: Offset,
        ) -> BoxStream<'static, Result<RecordBatch, TierError>> {
            let kind = self.kind();
            rebuilt_batches(kind, topic, paged_records(self, topic, from, to), from)
        }

        async fn store_segment(&self, topic: &TopicName, path: &Path) -> Result<OffsetRange, TierError> {
            append_segment(self, topic, path).await
        }

        /// A memory tier holds contiguous batches only.
        async fn record_gap(&self, topic: &TopicName, range: OffsetRange) -> Result<(), TierError> {
            Err(refuse_gap(self.kind(), topic, range))
        }

        /// A memory tier keeps no marker: a topic is recorded once it holds records.
        async fn record_topic(&self, _topic: &TopicName) -> Result<(), TierError> {
            Ok(())
        }

        async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
            holds_records(self, topic).await
        }

        /// A memory tier records no gap: its log continues at its end.
        async fn continuation(&self, topic: &TopicName) -> Result<Offset, TierError> {
            Ok(self.range(topic).await?.end)
        }
    }

    /// Faults apply to the [`Tier`] methods only; trimming, replay and the topic marker
    /// are forwarded.
    #[async_trait]
    impl<T: WarmBackend> WarmBackend for FaultyTier<T> {
        async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
            self.inner().trim_before(topic, offset).await
        }

        fn batches_from(
            &self,
            topic: &TopicName,
            from: Offset,
        ) -> BoxStream<'_, Result<RecordBatch, TierError>> {
            self.inner().batches_from(topic, from)
        }

        async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
            self.inner().restart_at(topic, offset).await
        }

        async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
            self.inner().record_topic(topic).await
        }

        async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
            self.inner().topic_recorded(topic).await
        }
    }

    /// Faults apply to the [`Tier`] methods, so reads and stores go through them (built on
    /// [`Tier::read`] and [`Tier::append`]); recording a gap is forwarded.
    #[async_trait]
    impl<T: ColdBackend> ColdBackend for FaultyTier<T> {
        fn record_batches_from(
            self: Arc<Self>,
            topic: &TopicName,
            from: Offset,
            to: Offset,
        ) -> BoxStream<'static, Result<RecordBatch, TierError>> {
            let kind = self.kind();
            rebuilt_batches(kind, topic, paged_records(self, topic, from, to), from)
        }

        async fn store_segment(&self, topic: &TopicName, path: &Path) -> Result<OffsetRange, TierError> {
            append_segment(self, topic, path).await
        }

        async fn record_gap(&self, topic: &TopicName, range: OffsetRange) -> Result<(), TierError> {
            self.inner().record_gap(topic, range).await
        }

        async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
            self.inner().record_topic(topic).await
        }

        async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
            self.inner().topic_recorded(topic).await
        }

        async fn continuation(&self, topic: &TopicName) -> Result<Offset, TierError> {
            self.inner().continuation(topic).await
        }
    }
}
