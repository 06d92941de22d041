use async_trait::async_trait;

use crate::segment::{BatchSink, RecordCollector};
use crate::{
    ErrorContext, Offset, OffsetRange, Record, RecordBatch, TierError, TierKind, Timestamp, TopicName,
};

/// Most encoded bytes [`TierExt::read`] asks [`Tier::read_batches`] for at a time, so that
/// a read bounded by records only does not fetch a tier's whole log.
const READ_PAGE_BYTES: usize = 4 << 20;

/// Bounds on one [`TierExt::read`] call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadLimit {
    /// Most records to return.
    pub max_records: usize,
    /// Most payload+key+header bytes to return, except that a read that would return
    /// nothing returns its first record however large it is.
    pub max_bytes: usize,
}

impl ReadLimit {
    /// A limit on records only.
    pub fn records(max_records: usize) -> Self {
        Self { max_records, max_bytes: usize::MAX }
    }

    /// No limit.
    pub fn unbounded() -> Self {
        Self { max_records: usize::MAX, max_bytes: usize::MAX }
    }
}

impl Default for ReadLimit {
    /// 1000 records or 4 MiB, whichever comes first.
    fn default() -> Self {
        Self { max_records: 1000, max_bytes: 4 << 20 }
    }
}

/// What a [`Tier`] promises beyond the contract's baseline, as it reports itself
/// ([`Tier::capabilities`]). Non-exhaustive: later capabilities (say, a tier that
/// compresses batches) are added without breaking implementations, which build it with
/// [`Capabilities::none`] and the `with_*` methods.
///
/// ```
/// use tier_core::Capabilities;
///
/// let caps = Capabilities::none().with_idempotent_append(true);
/// assert!(caps.idempotent_append);
/// assert!(!Capabilities::none().idempotent_append);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// Re-appending a batch identical to one held is `Ok` and stores nothing twice; a
    /// different batch at a held offset is `Fenced` (invariant 5). The router's warm
    /// position requires it: the writer re-sends a batch whose confirmation it lost.
    pub idempotent_append: bool,
}

impl Capabilities {
    /// No capability beyond the contract's baseline.
    pub const fn none() -> Self {
        Self { idempotent_append: false }
    }

    /// With `idempotent_append` set to `yes`.
    #[must_use]
    pub const fn with_idempotent_append(mut self, yes: bool) -> Self {
        self.idempotent_append = yes;
        self
    }
}

/// A storage tier holding, for each topic, a contiguous run of a log's offsets.
///
/// Implemented by the hot (WAL), warm (Valkey) and cold (object store) tiers, by
/// tier-testkit's `MemoryTier`, and by anything a user plugs in; `tier-testkit`'s
/// conformance suite checks an implementation against this contract. Usable as
/// `dyn Tier`.
///
/// # Contract
///
/// 1. **Contiguity.** For each topic a tier holds exactly the offsets of
///    [`range`](Tier::range), `start..end`, with none missing. A topic never written
///    has range `0..0`.
/// 2. **Monotonic ends.** `range().end` never decreases. `range().start` only grows
///    (by retention or trimming) and never passes `end`.
/// 3. **Append position.** [`append`](Tier::append) accepts a batch whose base offset
///    equals `range().end`. When the tier holds no record of the topic
///    (`start == end`), it also accepts a larger base offset, and its range then starts
///    there (this is how a fresh tier takes over an existing log). A base offset inside
///    the held range (`start <= base < end`) is a retry or a conflict, handled by
///    invariant 5. Any other base offset is [`TierError::InvalidInput`] and writes
///    nothing.
/// 4. **Durability.** `Ok(())` from `append` means the batch is durable to the degree
///    this tier promises (fsync policy, replica acknowledgement, object written) and
///    visible to `read` and `range` called afterwards. An `Err` leaves the tier either
///    without the batch or, for tiers that cannot tell (a timed-out network write),
///    with it; re-appending the identical batch is then safe under invariant 5.
/// 5. **Idempotent retry.** Tiers that report `idempotent_append` in their
///    [`capabilities`](Tier::capabilities) accept re-appending a batch identical to one they hold (same base
///    offset, same bytes) and return `Ok` without storing it twice. A *different*
///    batch at an offset already held is [`TierError::Fenced`], never an overwrite.
///    Tiers without `idempotent_append` answer any append inside the held range with
///    `Fenced` or `InvalidInput`, and never change what they hold.
/// 6. **Reads.** Batches: [`read_batches`](Tier::read_batches)`(from, to, max_bytes)`
///    returns the verified batches (CRC and records checked) holding offsets
///    `from..to`, in offset order, each starting where the previous one ended: the first
///    holds `from` (it may start before it), none starts at or past `to` or past
///    `range().end` (the last may end after `to`). It stops before the batch that would
///    take the total [`encoded_len`](RecordBatch::encoded_len) past `max_bytes`, except
///    that the first batch is returned however large it is. Batches come back exactly as
///    appended (same base offsets, same bytes).
///
///    Records: [`TierExt::read`]`(from, to, limit)`, built on `read_batches` for every
///    tier, returns records with offsets `from, from+1, …`, dense and in order, all
///    `< to`, stopping at `range().end`, at `limit.max_records` records, or before the
///    record that would take the returned bytes past `limit.max_bytes` (at least one
///    record is returned when any is available; record size is [`Record::size`]).
///    Records come back exactly as appended.
///
///    Both: `from == range().end` returns an empty vector. `from < range().start` or
///    `from > range().end` is [`TierError::Trimmed`] naming the range held. When
///    `from >= to` the result is empty, except that a tier may still report `from`
///    outside its range as `Trimmed`.
/// 7. **Timestamps.** [`offset_for_timestamp`](Tier::offset_for_timestamp)`(t)` returns
///    the first offset in the range whose *running maximum* timestamp (the largest
///    timestamp at or before it) is `>= t`, or `None` when no held record reaches `t`.
///    With timestamps that increase with offsets this is the first record at or after
///    `t` — and in fact it always equals the first record whose own timestamp is
///    `>= t`. The running-max wording is what lets a sparse index answer it: an index
///    entry's running maximum tells whether the answer can lie before it.
/// 8. **Concurrency.** All methods take `&self` and may be called concurrently; a read
///    running during appends sees a prefix of the log that ends at a batch boundary.
/// 9. **Errors.** Every error is a [`TierError`] whose context names this tier and the
///    topic; its [`ErrorKind`](crate::ErrorKind) says what the caller does: `Unavailable`
///    — retry later (the only retryable kind); `Trimmed` — read the offsets elsewhere;
///    `NotFound` — the thing does not exist; `Corruption` — stored bytes failed a check,
///    do not trust them; `InvalidInput` — fix the call; `Fenced` — another writer or
///    other data holds the position, stop writing; `Internal` — a bug or an unexpected
///    answer; `Closed` — the tier was closed, nothing on it answers again (not
///    retryable). An error caused by another keeps it as its `source` and does not repeat
///    it in its message (`docs/architecture.md`, "Errors").
#[async_trait]
pub trait Tier: Send + Sync + std::fmt::Debug {
    /// Which tier this is, for error context and metrics.
    fn kind(&self) -> TierKind;

    /// What this tier promises beyond the baseline (invariant 5's `idempotent_append`).
    /// Required, like every method: a wrapper forwards its inner tier's answer.
    fn capabilities(&self) -> Capabilities;

    /// The offsets this tier holds for `topic` now (invariants 1, 2).
    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError>;

    /// Appends one batch (invariants 3, 4, 5).
    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError>;

    /// The verified batches holding `from..to`, at most `max_bytes` of them but at least
    /// one when any is available (invariant 6).
    async fn read_batches(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, TierError>;

    /// The first offset whose running maximum timestamp is `>= timestamp` (invariant 7).
    async fn offset_for_timestamp(
        &self,
        topic: &TopicName,
        timestamp: Timestamp,
    ) -> Result<Option<Offset>, TierError>;
}

/// Conveniences over [`Tier`]'s required methods, implemented for every tier (`dyn Tier`
/// included) by the blanket impl: a tier implements [`Tier`] alone.
#[async_trait]
pub trait TierExt: Tier {
    /// Reads records `from..to`, bounded by `limit` (invariant 6), from the batches of
    /// [`Tier::read_batches`], asking for more while the limit allows: each call asks for
    /// the offsets of the records still wanted, at most 4 MiB of batches. A failure after
    /// some records were gathered ends the read with those records; the next read,
    /// starting after them, reports it (this is how a read stops before a recorded gap,
    /// as it stops at `range().end`).
    async fn read(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        limit: ReadLimit,
    ) -> Result<Vec<Record>, TierError>;
}

#[async_trait]
impl<T: Tier + ?Sized> TierExt for T {
    async fn read(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        limit: ReadLimit,
    ) -> Result<Vec<Record>, TierError> {
        let mut collector = RecordCollector::new(from, to, limit);
        if collector.is_full() {
            // Nothing is wanted: only `from`'s place in the range is checked.
            self.read_batches(topic, from, to.min(from), 0).await?;
            return Ok(Vec::new());
        }
        loop {
            let next = collector.next_offset();
            // No more bytes than the records may still take: a tier verifies every batch
            // it reads, and one read past the limit is work thrown away.
            let page = collector.bytes_left().min(READ_PAGE_BYTES);
            // Only the batches holding the records still wanted: offsets within one tier's
            // read are contiguous, so they end by `next` + that many (a read of 1,000
            // small records does not fetch and verify megabytes of batches to drop them).
            let still = limit
                .max_records
                .saturating_sub(usize::try_from(next.saturating_sub(from)).unwrap_or(usize::MAX));
            let upto = to.min(next.saturating_add(still as u64));
            let batches = match self.read_batches(topic, next, upto, page).await {
                Ok(batches) => batches,
                Err(_) if next > from => break,
                Err(e) => return Err(e),
            };
            if batches.is_empty() {
                break;
            }
            let mut want = next;
            for batch in &batches {
                if batch.base_offset() > want || batch.end_offset() <= want {
                    return Err(TierError::internal(
                        ErrorContext::tier(self.kind()).topic(topic).offset(want),
                        format!(
                            "read_batches answered a batch holding {} where one holding {want} was due",
                            batch.offset_range()
                        ),
                    ));
                }
                collector.push_batch(batch);
                want = batch.end_offset();
                if collector.is_full() {
                    break;
                }
            }
            if collector.is_full() {
                break;
            }
        }
        Ok(collector.into_records())
    }
}
