//! The warm and cold **positions**: what a [`Tier`] must offer besides the [`Tier`]
//! trait to serve as the router's warm tier ([`WarmBackend`]) or cold tier
//! ([`ColdBackend`]).
//!
//! The warm tier is trimmed and replayed after a lost disk; the cold tier receives whole
//! sealed WAL segments and serves long sequential reads. Every method is required — no
//! default body a wrapper could forget to forward (the CLI's metered wrapper once exported
//! and read cold through such defaults): a wrapper that forgets one does not compile. A
//! custom tier with nothing better to offer implements them with the helpers built on
//! [`Tier`]: [`append_each`], [`paged_records`], [`rebuilt_batches`], [`rebuilt_warm_batches`],
//! [`append_segment_bytes`] (tier-router's `append_segment` reads the file for it),
//! [`refuse_gap`] and [`holds_records`]; tierlog's own tiers use their native operations.
//! `tier-testkit`'s conformance suite (`conformance::warm_backend`,
//! `conformance::cold_backend`) is the executable form of these contracts.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};

use crate::segment::SealedSegment;
use crate::{
    ErrorContext, ErrorKind, Offset, OffsetRange, ReadLimit, Record, RecordBatch, Tier, TierError, TopicName,
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
    /// Appends `batches` — each starting where the one before it ends — in order, each
    /// with the checks and meaning of [`Tier::append`], stopping at the first refusal:
    /// returns how many, from the first, the tier holds, and that refusal (`Ok` when it
    /// holds them all). The router's writer sends each group commit's batches through it,
    /// as its producers encoded them. A tier that can add several in one round trip does
    /// (tierlog's warm tier: one script and one `WAIT`); [`append_each`] appends them one
    /// at a time with [`Tier::append`].
    async fn append_group(
        &self,
        topic: &TopicName,
        batches: Vec<RecordBatch>,
    ) -> (usize, Result<(), TierError>);

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
    /// [`append_segment_bytes`] (or tier-router's `append_segment`, which reads the file)
    /// appends each batch not yet held with [`Tier::append`].
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

/// [`WarmBackend::append_group`] for a tier with nothing better: [`Tier::append`] of each
/// batch in turn, stopping at the first refusal.
pub async fn append_each<T: Tier + ?Sized>(
    tier: &T,
    topic: &TopicName,
    batches: Vec<RecordBatch>,
) -> (usize, Result<(), TierError>) {
    let mut held = 0;
    for batch in batches {
        if let Err(e) = tier.append(topic, batch).await {
            return (held, Err(e));
        }
        held += 1;
    }
    (held, Ok(()))
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
            match read_intact(next, end, read).await {
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

/// [`ColdBackend::record_batches_from`] built on a tier's [`Tier::read`] alone: the
/// [`paged_records`] of `tier` from `from` to `to`, as [`rebuilt_batches`].
pub fn paged_batches<T: Tier + ?Sized + 'static>(
    tier: Arc<T>,
    topic: &TopicName,
    from: Offset,
    to: Offset,
) -> BoxStream<'static, Result<RecordBatch, TierError>> {
    let kind = tier.kind();
    rebuilt_batches(kind, topic, paged_records(tier, topic, from, to), from)
}

/// [`ColdBackend::record_batches_from`] for a tier with nothing better: batches of up to
/// 1000 records / 4 MiB rebuilt from `records` (a record stream starting at `from`, such
/// as [`paged_records`]); the first batch starts at `from`, and a record stream that is not
/// dense from `from` is `Corruption` (context: `kind`, `topic`).
pub fn rebuilt_batches(
    kind: crate::TierKind,
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

/// [`ColdBackend::record_gap`] for a tier that cannot hold a gap: `InvalidInput` naming
/// `kind`.
pub fn refuse_gap(kind: crate::TierKind, topic: &TopicName, range: OffsetRange) -> TierError {
    TierError::invalid(
        ErrorContext::tier(kind).topic(topic).offset(range.start),
        format!("the {kind} tier in the cold position cannot record offsets {range} as lost"),
    )
}

/// [`ColdBackend::store_segment`] for a tier with nothing better, given the sealed
/// segment's bytes (read from the file `location` names): checks them with
/// [`SealedSegment`] and appends each batch `tier` does not hold yet with
/// [`Tier::append`] (batches already held are skipped). Returns the segment's offsets.
pub async fn append_segment_bytes<T: Tier + ?Sized>(
    tier: &T,
    topic: &TopicName,
    bytes: Bytes,
    location: &str,
) -> Result<OffsetRange, TierError> {
    let damaged = |e: crate::batch::DecodeError| {
        let at = e.position();
        e.into_tier_error(ErrorContext::tier(tier.kind()).topic(topic).location(format!("{location}@{at}")))
    };
    let segment = SealedSegment::open(bytes).map_err(damaged)?;
    let held = tier.range(topic).await?;
    for item in segment.batches() {
        let (_, batch) = item.map_err(damaged)?;
        if !held.is_empty() && batch.end_offset() <= held.end {
            continue;
        }
        tier.append(topic, batch).await?;
    }
    Ok(segment.offset_range())
}

/// Reads `[n, to)` from the WAL (or any tier read through [`Tier::read`], as
/// [`paged_records`] does) through `read`, which reads `[n, end)`
/// for the `end` it is given (`n < to`). When the tier answers `Corruption` (a damaged
/// batch inside what the read would return), returns instead the longest answer it
/// still gives intact:
/// the records or batches before the damaged batch, found by asking for reads ending
/// closer to `n` (galloping from `n + 1`, then bisecting; a read stops decoding at its
/// end, so a read ending before the damaged batch never touches it). When even
/// `[n, n + 1)` is damaged, the `Corruption`: the caller serves `n` from another tier
/// (tier-router's `instead_of_wal`) or ends the read with it.
pub async fn read_intact<T, F, Fut>(n: Offset, to: Offset, mut read: F) -> Result<Vec<T>, TierError>
where
    F: FnMut(Offset) -> Fut,
    Fut: Future<Output = Result<Vec<T>, TierError>>,
{
    let damage = match read(to).await {
        Err(e) if e.kind() == ErrorKind::Corruption => e,
        answer => return answer,
    };
    // Reads ending at `lo` succeed (`good` is the answer of the last one), reads ending
    // at `hi` fail.
    let (mut lo, mut hi, mut good) = (n, to, None);
    let mut step: u64 = 1;
    while n.saturating_add(step) < hi {
        let end = n + step;
        match read(end).await {
            Ok(answer) => (lo, good, step) = (end, Some(answer), step.saturating_mul(2)),
            Err(e) if e.kind() == ErrorKind::Corruption => {
                hi = end;
                break;
            }
            Err(e) => return Err(e),
        }
    }
    while hi - lo > 1 {
        let end = lo + (hi - lo) / 2;
        match read(end).await {
            Ok(answer) => (lo, good) = (end, Some(answer)),
            Err(e) if e.kind() == ErrorKind::Corruption => hi = end,
            Err(e) => return Err(e),
        }
    }
    match good {
        Some(answer) if !answer.is_empty() => Ok(answer),
        _ => Err(damage),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use crate::TierKind;

    use super::*;

    /// A WAL holding `[0, 1000)` whose batch `[b, b + 10)` is damaged: a read `[n, end)`
    /// fails when it reaches that batch, else answers its offsets. Counts the reads.
    async fn damaged_at(b: Offset, n: Offset, to: Offset) -> (Result<Vec<Offset>, TierError>, u32) {
        let reads = Cell::new(0);
        let answer = read_intact(n, to, |end| {
            reads.set(reads.get() + 1);
            let reaches = n < b + 10 && end > b;
            async move {
                if reaches {
                    Err(TierError::corruption(ErrorContext::tier(TierKind::Hot), "CRC mismatch"))
                } else {
                    Ok((n..end).collect())
                }
            }
        })
        .await;
        (answer, reads.get())
    }

    #[tokio::test]
    async fn an_intact_read_is_one_read() {
        let (answer, reads) = damaged_at(500, 0, 400).await;
        assert_eq!(answer.expect("intact"), (0..400).collect::<Vec<_>>());
        assert_eq!(reads, 1);
    }

    #[tokio::test]
    async fn a_damaged_read_answers_the_offsets_before_the_damaged_batch_in_few_reads() {
        for (b, n) in [(1, 0), (200, 0), (999 - 9, 3), (500, 499)] {
            let (answer, reads) = damaged_at(b, n, 1000).await;
            assert_eq!(answer.expect("the intact prefix"), (n..b).collect::<Vec<_>>(), "damage at {b}");
            assert!(reads <= 2 + 2 * 10, "{reads} reads for damage at {b}");
        }
    }

    #[tokio::test]
    async fn a_read_starting_in_the_damaged_batch_is_its_corruption() {
        for n in [200, 205, 209] {
            let (answer, reads) = damaged_at(200, n, 1000).await;
            assert_eq!(answer.expect_err("damaged").kind(), ErrorKind::Corruption);
            assert_eq!(reads, 2, "the read, then [n, n + 1)");
        }
    }

    #[tokio::test]
    async fn other_errors_are_not_narrowed() {
        let reads = Cell::new(0);
        let answer: Result<Vec<Offset>, _> = read_intact(0, 100, |_| {
            reads.set(reads.get() + 1);
            async { Err(TierError::unavailable(ErrorContext::tier(TierKind::Hot), "disk gone")) }
        })
        .await;
        assert_eq!(answer.expect_err("unavailable").kind(), ErrorKind::Unavailable);
        assert_eq!(reads.get(), 1);
    }
}
