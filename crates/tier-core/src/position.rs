//! The warm and cold **positions**: what a [`Tier`] must offer besides the [`Tier`]
//! trait to serve as the router's warm tier ([`WarmBackend`]) or cold tier
//! ([`ColdBackend`]).
//!
//! The warm tier is trimmed and replayed after a lost disk; the cold tier receives whole
//! sealed WAL segments and serves long sequential reads. Every method is required — no
//! default body a wrapper could forget to forward (the CLI's metered wrapper once exported
//! and read cold through such defaults): a wrapper that forgets one does not compile. The
//! owner-epoch methods of [`WarmBackend`] are the exception: their defaults describe a tier
//! without owner epochs, whose writes are not fenced, and a wrapper that does not forward
//! them is such a tier. A
//! custom tier with nothing better to offer implements them with the helpers built on
//! [`Tier`]: [`append_each`], [`paged_batches`], [`paged_records`], [`rebuilt_warm_batches`],
//! [`append_segment_bytes`] (tier-router's `append_segment` reads the file for it),
//! [`refuse_gap`] and [`holds_records`]; tierlog's own tiers use their native operations.
//! `tier-testkit`'s conformance suite (`conformance::warm_backend`,
//! `conformance::cold_backend`) is the executable form of these contracts.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};

use crate::segment::SealedSegment;
use crate::{ErrorContext, ErrorKind, Offset, OffsetRange, Record, RecordBatch, Tier, TierError, TopicName};

/// Most encoded bytes of batches one [`Tier::read_batches`] call of [`paged_batches`] or
/// [`rebuilt_warm_batches`] asks for.
const PAGE_BYTES: usize = 4 << 20;

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
    /// fresh WAL and warm's own back-fill checks, as appended. [`rebuilt_warm_batches`]
    /// pages through [`Tier::read_batches`].
    fn batches_from(&self, topic: &TopicName, from: Offset) -> BoxStream<'_, Result<RecordBatch, TierError>>;

    /// Drops every batch of `topic` — all of them lie below `offset` — so that the tier
    /// holds nothing and takes its next batch at `offset`. The router calls it only to
    /// continue warm past offsets no tier holds any more (a reported loss), and only when
    /// the WAL or cold also holds every record warm holds (`docs/router.md`, "Warm past
    /// offsets no tier holds"). `InvalidInput` when a batch ends beyond `offset`.
    async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError>;

    /// Takes `topic` over as its writer for the node `claimer`: records a new owner epoch
    /// where every writer sees it, after which this tier's appends, trims and restarts of
    /// the topic are refused (`Fenced`) once another writer has claimed it since — a node
    /// that still believes it owns the topic (paused, partitioned) then writes nothing.
    /// Returns the epoch, or `None` for a tier without owner epochs (the default), whose
    /// writes are not fenced. The router claims every topic it opens for writing, before
    /// recovery reads the tier (`docs/router.md`, "Owner epochs"). `Unavailable` when the
    /// claim was not confirmed (claim again: epochs may skip).
    ///
    /// A tier that can records `claimer` as the epoch's claimer in the same atomic step as
    /// the epoch ([`claimers`](Self::claimers)): a record exists only beside the epoch it
    /// names, and a failover that loses the epoch loses its record with it. A tier that
    /// cannot records none; its epochs' claimers are unknown.
    async fn claim_owner(&self, topic: &TopicName, claimer: NodeId) -> Result<Option<u64>, TierError> {
        let _ = (topic, claimer);
        Ok(None)
    }

    /// The claimers [`claim_owner`](Self::claim_owner) recorded for the epochs of `topic`
    /// in `epochs`, by epoch. An epoch absent from the answer has no claimer known: none
    /// was recorded (a tier that records none, the default; a server that refused the
    /// claim script), the epoch was set by a write after a failover lost its claim, or the
    /// tier keeps only the records of its latest epochs. The router asks for the epochs a
    /// claim skipped, to tell its own lost claim answers from another node's claims
    /// (`docs/ownership.md`).
    async fn claimers(
        &self,
        topic: &TopicName,
        epochs: Range<u64>,
    ) -> Result<BTreeMap<u64, NodeId>, TierError> {
        let _ = (topic, epochs);
        Ok(BTreeMap::new())
    }

    /// The epoch this tier's last [`claim_owner`](Self::claim_owner) of `topic` recorded
    /// on the server, also when that claim answered `Unavailable` because the replicas did
    /// not confirm it (the epoch holds on the primary); `None` when no claim recorded one.
    fn claimed_owner(&self, topic: &TopicName) -> Option<u64> {
        let _ = topic;
        None
    }

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

/// The identity of a node — of one store's data directory and state directory — that a
/// claim of a topic's owner epoch records ([`WarmBackend::claim_owner`]), so that the node
/// can later tell the epochs it claimed itself, whose answers it may have lost, from other
/// nodes' claims ([`WarmBackend::claimers`]). 128 random bits, created once per state
/// directory by the router (`docs/ownership.md`, "Who claimed an epoch"); written as 32
/// lowercase hexadecimal digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u128);

impl NodeId {
    /// The id whose bits are `bits`.
    pub const fn from_u128(bits: u128) -> Self {
        Self(bits)
    }

    /// The id's bits.
    pub const fn as_u128(self) -> u128 {
        self.0
    }

    /// The id written as `text` ([`Display`](fmt::Display): 32 hexadecimal digits);
    /// `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        (text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u128::from_str_radix(text, 16).ok().map(Self))
            .flatten()
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeId({self})")
    }
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
    /// nothing there can fail it. [`paged_batches`] pages through [`Tier::read_batches`]
    /// one bounded read at a time, returning the batches as stored; tiers that can read
    /// ahead do better (the cold tier keeps several ranged GETs in flight).
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

/// [`WarmBackend::batches_from`] for a tier with nothing better: the batches of
/// [`Tier::read_batches`] from the one holding `from` (or the first held, when `from` is
/// below the range) to the end of the range, as stored, a bounded read at a time.
pub fn rebuilt_warm_batches<'a, T: Tier + ?Sized>(
    tier: &'a T,
    topic: &TopicName,
    from: Offset,
) -> BoxStream<'a, Result<RecordBatch, TierError>> {
    let topic = topic.clone();
    paged(from, move |next| {
        let topic = topic.clone();
        async move {
            let range = match tier.range(&topic).await {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            let from = next.max(range.start);
            if from >= range.end {
                return None;
            }
            Some(tier.read_batches(&topic, from, range.end, PAGE_BYTES).await)
        }
    })
}

/// The records `from..to` of [`paged_batches`]: what a record stream of a tier with
/// nothing better reads, one bounded [`Tier::read_batches`] at a time.
pub fn paged_records<T: Tier + ?Sized + 'static>(
    tier: Arc<T>,
    topic: &TopicName,
    from: Offset,
    to: Offset,
) -> BoxStream<'static, Result<Record, TierError>> {
    paged_batches(tier, topic, from, to)
        .map_ok(move |batch| {
            let records: Vec<Record> = batch.records_from(from).take_while(|r| r.offset < to).collect();
            stream::iter(records.into_iter().map(Ok))
        })
        .try_flatten()
        .boxed()
}

/// [`ColdBackend::record_batches_from`] for a tier with nothing better: pages through
/// [`Tier::read_batches`] one bounded read at a time, never reading a batch starting at
/// or past `to`, and yields the batches as stored (the first may start before `from`).
///
/// A read that fails with `Corruption` (damage somewhere in what it would return: the
/// [`Tier`] contract lets a tier fail the whole read for it) is narrowed to the longest
/// read ending before the damage (a few reads ending closer to the page's start,
/// galloping then bisecting, on the damaged path only), so the intact batches before
/// the damage are yielded, then the `Corruption` of the read starting at the damaged
/// offset, which ends the stream.
pub fn paged_batches<T: Tier + ?Sized + 'static>(
    tier: Arc<T>,
    topic: &TopicName,
    from: Offset,
    to: Offset,
) -> BoxStream<'static, Result<RecordBatch, TierError>> {
    let topic = topic.clone();
    paged(from, move |next| {
        let tier = Arc::clone(&tier);
        let topic = topic.clone();
        async move {
            let range = match tier.range(&topic).await {
                Ok(r) => r,
                Err(e) => return Some(Err(e)),
            };
            let end = range.end.min(to);
            if next >= end {
                return None;
            }
            let read = |end| tier.read_batches(&topic, next, end, PAGE_BYTES);
            Some(read_intact(next, end, read).await)
        }
    })
}

/// The batches of successive pages as one stream: `page(next)` reads the page that
/// starts at `next` (`None` past the end); the next page starts where the last batch of
/// this one ends, and an empty page or an error (yielded) ends the stream.
fn paged<'a, F, Fut>(from: Offset, page: F) -> BoxStream<'a, Result<RecordBatch, TierError>>
where
    F: Fn(Offset) -> Fut + Send + 'a,
    Fut: Future<Output = Option<Result<Vec<RecordBatch>, TierError>>> + Send + 'a,
{
    stream::unfold(Some(from), move |next| {
        let page = next.map(&page);
        async move {
            match page?.await? {
                Ok(batches) => {
                    let end = batches.last()?.end_offset();
                    Some((Ok(batches), Some(end)))
                }
                Err(e) => Some((Err(e), None)),
            }
        }
    })
    .map_ok(|batches| stream::iter(batches.into_iter().map(Ok)))
    .try_flatten()
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

/// Reads `[n, to)` from the WAL (or any tier read through [`Tier::read_batches`], as
/// [`paged_batches`] does) through `read`, which reads `[n, end)`
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

    #[test]
    fn a_node_id_reads_back_from_its_text_and_nothing_else_passes_for_one() {
        let id = NodeId::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        assert_eq!(id.to_string(), "0123456789abcdef0011223344556677");
        assert_eq!(NodeId::parse(&id.to_string()), Some(id));
        assert_eq!(NodeId::from_u128(7).to_string().len(), 32, "leading zeros kept");
        for bad in [
            "",
            "7",
            "0123456789abcdef001122334455667",
            "0123456789abcdef00112233445566778",
            "+123456789abcdef0011223344556677",
            "0123456789abcdef001122334455667g",
        ] {
            assert_eq!(NodeId::parse(bad), None, "{bad:?}");
        }
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
