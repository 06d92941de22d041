//! The stitched reader: one ordered stream of committed records across cold, warm, the
//! WAL and the live tail.
//!
//! For the next offset `n` wanted, the reader asks the WAL first (it serves `n` when it
//! holds it, up to the commit point), then warm (up to where the WAL takes over), then
//! cold (up to where warm or the WAL takes over), so each tier serves only its slice
//! (the choice is [`slice::choose`], shared with the batch reader).
//! Every read is bounded ([`ReadLimit`]) and its first offset must be `n`: a tier that
//! answers with other offsets is `Corruption`, an offset no tier holds is `NotFound`
//! naming the missing range — never skipped. A damaged WAL batch is served from warm or
//! cold when one holds it, after the WAL's intact records before it
//! ([`read_intact`](crate::intact::read_intact), [`slice::instead_of_wal`]). Cold's sequential stream is told
//! where cold's slice ends, so its read-ahead never fetches what the WAL serves. At the
//! commit point the reader switches to the WAL's live tail from exactly `n`
//! ([`tier_hot::HotTier::subscribe`]) and yields a record only once the commit point has
//! passed it.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::stream::{self, BoxStream, StreamExt};
use tier_core::{
    ErrorContext, ErrorKind, Offset, OffsetRange, ReadLimit, Record, StartPosition, Tier, TierError,
    TierKind, TopicName,
};
use tier_hot::Subscription;
use tokio::sync::watch;

use crate::ColdBackend;
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
}

struct Reader {
    tiers: Arc<Tiers>,
    topic: TopicName,
    hwm: watch::Receiver<Offset>,
    next: Offset,
    buf: VecDeque<(Source, Record)>,
    live: Option<Subscription>,
    /// An open sequential read of cold (with its read-ahead) ending at the end of cold's
    /// slice: the offset it yields next, that end, the stream. Kept across slices of the
    /// same end, dropped at the hand-off to warm or the WAL.
    cold: Option<ColdStream>,
    limit: ReadLimit,
    done: bool,
}

/// An open sequential read of cold: the offset it yields next, the end it was opened
/// with, the records.
type ColdStream = (Offset, Offset, BoxStream<'static, Result<Record, TierError>>);

fn ctx(topic: &TopicName) -> ErrorContext {
    ErrorContext::tier(TierKind::Router).topic(topic)
}

/// Resolves `start` and returns the stream.
pub(crate) async fn open(
    tiers: Arc<Tiers>,
    topic: TopicName,
    hwm: watch::Receiver<Offset>,
    start: StartPosition,
) -> Result<BoxStream<'static, Result<(Source, Record), TierError>>, TierError> {
    let committed = *hwm.borrow();
    let live = match start {
        StartPosition::Latest => Some(tiers.hot.subscribe(&topic, committed)?),
        _ => None,
    };
    let next = start_offset(&tiers, &topic, start, committed).await?;
    let limit =
        ReadLimit { max_records: tiers.config.read_batch_records, max_bytes: tiers.config.read_batch_bytes };
    let reader =
        Reader { tiers, topic, hwm, next, buf: VecDeque::new(), live, cold: None, limit, done: false };
    Ok(stream::unfold(reader, |mut r| async move { r.next_item().await.map(|item| (item, r)) }).boxed())
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
        return Ok(o.min(committed));
    }
    Ok(tiers.hot.offset_for_timestamp(topic, t).await?.map_or(committed, |o| o.min(committed)))
}

impl Reader {
    async fn next_item(&mut self) -> Option<Result<(Source, Record), TierError>> {
        if self.done {
            return None;
        }
        loop {
            if let Some((source, record)) = self.buf.pop_front() {
                self.next = record.offset + 1;
                return Some(Ok((source, record)));
            }
            if let Err(e) = self.fill().await {
                self.done = true;
                return Some(Err(e));
            }
        }
    }

    async fn fill(&mut self) -> Result<(), TierError> {
        let committed = *self.hwm.borrow();
        if self.live.is_none() && self.next < committed {
            return self.fill_history(committed).await;
        }
        if self.live.is_none() {
            self.live = Some(self.tiers.hot.subscribe(&self.topic, self.next)?);
        }
        let Some(sub) = self.live.as_mut() else { return Ok(()) };
        let record = match sub.next().await {
            Ok(r) => r,
            Err(e) if e.kind() == ErrorKind::Trimmed => {
                // Retention overtook a slow consumer: continue from history.
                self.live = None;
                return Ok(());
            }
            Err(e) if e.kind() == ErrorKind::Corruption => {
                // The WAL's copy is damaged (in the segment the tail reads): once the
                // record is committed, history serves it from a tier holding it intact
                // (or ends with the damage when none does), as for any damaged batch.
                self.live = None;
                let next = self.next;
                self.hwm
                    .wait_for(|h| *h > next)
                    .await
                    .map_err(|_| TierError::closed(ctx(&self.topic), "the store is closed"))?;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        if record.offset != self.next {
            return Err(TierError::corruption(
                ctx(&self.topic).offset(self.next),
                format!("the live tail yielded offset {} where {} was expected", record.offset, self.next),
            ));
        }
        let offset = record.offset;
        self.hwm
            .wait_for(|h| *h > offset)
            .await
            .map_err(|_| TierError::closed(ctx(&self.topic), "the store is closed"))?;
        self.buf.push_back((Source::Live, record));
        Ok(())
    }

    /// Reads the next slice of history below `committed` from the preferred tier.
    async fn fill_history(&mut self, committed: Offset) -> Result<(), TierError> {
        let mut attempt = 0;
        loop {
            match self.read_slice(committed).await {
                Ok(()) => return Ok(()),
                Err(e) if slice::retry_moved(&e, &mut attempt) => {}
                Err(e) => return Err(e),
            }
        }
    }

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
                Slice::Warm { tier, to } => return self.read_from(tier.as_ref(), Source::Warm, to).await,
                Slice::Cold { tier, to } => {
                    let (n, read) = (self.next, self.read_cold(tier, to).await);
                    return slice::or_unreachable(&self.tiers, &self.topic, n, read).await;
                }
            }
        }
    }

    /// Serves `self.next..to` from the WAL; on a damaged batch, the intact records before
    /// it, or the `Corruption` when the batch holding `self.next` is the damaged one.
    async fn read_hot(&mut self, to: Offset) -> Result<(), TierError> {
        let (n, limit) = (self.next, self.limit);
        let (hot, topic) = (&self.tiers.hot, &self.topic);
        let records = crate::intact::read_intact(n, to, |end| hot.read(topic, n, end, limit)).await?;
        self.accept(TierKind::Hot, Source::Hot, to, records)
    }

    /// Serves `self.next..to` from cold through one long sequential stream ending at `to`
    /// (bounded by the reader's limit per call), so catch-up reads get the cold tier's
    /// read-ahead, and the read-ahead stops where cold's slice does.
    async fn read_cold(&mut self, cold: Arc<dyn ColdBackend>, to: Offset) -> Result<(), TierError> {
        let n = self.next;
        if self.cold.as_ref().is_none_or(|(next, end, _)| *next != n || *end != to) {
            self.cold = Some((n, to, cold.records_from(&self.topic, n, to)));
        }
        let Some((next, _, records)) = self.cold.as_mut() else { return Ok(()) };
        let (mut count, mut bytes) = (0usize, 0usize);
        let mut ended = false;
        while count < self.limit.max_records && bytes < self.limit.max_bytes && *next < to {
            match records.next().await {
                Some(Ok(r)) if r.offset == *next => {
                    *next += 1;
                    count += 1;
                    bytes = bytes.saturating_add(r.size());
                    self.buf.push_back((Source::Cold, r));
                }
                Some(Ok(r)) => {
                    let found = r.offset;
                    self.cold = None;
                    return Err(TierError::corruption(
                        ErrorContext::tier(TierKind::Cold).topic(&self.topic).offset(n),
                        format!(
                            "the cold stream yielded offset {found} where {} was expected",
                            n + count as u64
                        ),
                    ));
                }
                Some(Err(e)) => {
                    self.cold = None;
                    if count > 0 {
                        // Deliver the records before the failure (e.g. a gap) first; the
                        // next slice reopens the stream where it failed and reports it.
                        return Ok(());
                    }
                    return Err(e);
                }
                None => {
                    // An ended stream must not be polled again.
                    ended = true;
                    break;
                }
            }
        }
        let reached = self.cold.as_ref().map_or(n, |(next, _, _)| *next);
        if reached >= to || count == 0 || ended {
            // Hand-off to warm or the WAL (or the stream ended): stop reading ahead.
            self.cold = None;
        }
        if count == 0 {
            return Err(TierError::trimmed(
                ErrorContext::tier(TierKind::Cold).topic(&self.topic).offset(n),
                n,
                OffsetRange::empty_at(n),
            ));
        }
        Ok(())
    }

    async fn read_from(&mut self, tier: &dyn Tier, source: Source, to: Offset) -> Result<(), TierError> {
        let records = tier.read(&self.topic, self.next, to, self.limit).await?;
        self.accept(tier.kind(), source, to, records)
    }

    /// Buffers `records`, answered by `kind` for `self.next..to`, after checking that
    /// they continue the read; an empty answer means the tier's range moved.
    fn accept(
        &mut self,
        kind: TierKind,
        source: Source,
        to: Offset,
        records: Vec<Record>,
    ) -> Result<(), TierError> {
        let n = self.next;
        let Some(first) = records.first() else {
            return Err(TierError::trimmed(
                ErrorContext::tier(kind).topic(&self.topic).offset(n),
                n,
                OffsetRange::empty_at(n),
            ));
        };
        let last = records.last().map_or(first.offset, |r| r.offset);
        if first.offset != n || last != n + records.len() as u64 - 1 || last >= to {
            return Err(TierError::corruption(
                ErrorContext::tier(kind).topic(&self.topic).offset(n),
                format!(
                    "asked for offsets from {n} below {to}, got {} records from {} to {last}",
                    records.len(),
                    first.offset
                ),
            ));
        }
        self.buf.extend(records.into_iter().map(|r| (source, r)));
        Ok(())
    }
}
