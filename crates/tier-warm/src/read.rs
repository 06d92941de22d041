//! The read side: `read_batches`, `offset_for_timestamp` and the recovery stream, all built on
//! [`Pager`](crate::pager::Pager)'s bounded pages.

use std::collections::VecDeque;

use futures::{StreamExt, stream::BoxStream};
use tier_core::{Offset, RecordBatch, TierError, Timestamp, TopicName};

use crate::{
    WarmTier,
    pager::{Pager, StreamHandle},
};

/// Invariant 6: the stored batches holding `from..to` in order, at most `max_bytes` of
/// them (at least one when any is available).
///
/// One `XREVRANGE … COUNT 1` finds the batch containing `from`; `XRANGE` pages of
/// `page_size` entries follow only while more batches are wanted.
pub(crate) async fn read_batches(
    tier: &WarmTier,
    topic: &TopicName,
    from: Offset,
    to: Offset,
    max_bytes: usize,
) -> Result<Vec<RecordBatch>, TierError> {
    if from >= to {
        return Ok(Vec::new());
    }
    let handle = tier.handle(topic);
    // A read racing the topic's first append may find no batch and then a range that
    // holds `from`: look again (bounded, appends only add).
    let mut attempts = 0;
    let (mut pager, first) = loop {
        let (pager, first) = handle.pager_from(from).await?;
        if let Some(first) = first {
            break (pager, first);
        }
        // No batch starts at or before `from`: the stream is empty or starts above it.
        let range = tier.refresh_range(topic).await?;
        attempts += 1;
        if range.contains(from) && attempts < 3 {
            continue;
        }
        if from == range.end {
            return Ok(Vec::new());
        }
        return Err(TierError::trimmed(handle.ctx.clone().offset(from), from, range));
    };
    let mut collector = Collector { from, to, max_bytes, out: Vec::new(), bytes: 0, done: false };
    collector.take(&first);
    while !collector.done {
        let page = pager.next_page().await?;
        if page.is_empty() {
            break;
        }
        for batch in &page {
            collector.take(batch);
            if collector.done {
                break;
            }
        }
    }
    let data_end = pager.end_so_far().unwrap_or(first.end_offset());
    if collector.out.is_empty() && from > data_end {
        let range = tier.refresh_range(topic).await?;
        return Err(TierError::trimmed(handle.ctx.clone().offset(from), from, range));
    }
    Ok(collector.out)
}

/// Accumulates the batches a read returns.
struct Collector {
    from: Offset,
    to: Offset,
    max_bytes: usize,
    out: Vec<RecordBatch>,
    bytes: usize,
    done: bool,
}

impl Collector {
    fn take(&mut self, batch: &RecordBatch) {
        if batch.end_offset() <= self.from {
            return;
        }
        let len = batch.encoded_len();
        if batch.base_offset() >= self.to
            || (!self.out.is_empty() && self.bytes.saturating_add(len) > self.max_bytes)
        {
            self.done = true;
            return;
        }
        self.bytes = self.bytes.saturating_add(len);
        self.out.push(batch.clone());
        if batch.end_offset() >= self.to {
            self.done = true;
        }
    }
}

/// Invariant 7 by a scan: streams have no time index, so this walks the stream's
/// batches from the oldest, a page at a time, skipping a batch whole when its maximum
/// timestamp cannot reach `timestamp`, and looking at records only in the batch where
/// the running maximum first reaches it. The warm tier holds only the last few
/// segments, so the scan is short.
pub(crate) async fn offset_for_timestamp(
    handle: StreamHandle,
    timestamp: Timestamp,
) -> Result<Option<Offset>, TierError> {
    let mut pager = handle.pager_from_start();
    let mut running_max = Timestamp::MIN;
    loop {
        let page = pager.next_page().await?;
        if page.is_empty() {
            return Ok(None);
        }
        for batch in &page {
            if running_max.max(batch.max_timestamp()) < timestamp {
                running_max = running_max.max(batch.max_timestamp());
                continue;
            }
            for record in batch.records() {
                running_max = running_max.max(record.timestamp);
                if running_max >= timestamp {
                    return Ok(Some(record.offset));
                }
            }
        }
    }
}

/// See [`WarmTier::recovery_stream`].
pub(crate) fn recovery_stream(
    handle: StreamHandle,
    from: Offset,
) -> BoxStream<'static, Result<RecordBatch, TierError>> {
    let state = RecoveryState { handle, from, pager: None, buffered: VecDeque::new() };
    futures::stream::try_unfold(state, |mut st| async move {
        loop {
            if let Some(batch) = st.buffered.pop_front() {
                return Ok(Some((batch, st)));
            }
            match st.pager.as_mut() {
                None => {
                    let (pager, first) = st.handle.pager_from(st.from).await?;
                    st.pager = Some(pager);
                    let from = st.from;
                    st.buffered.extend(first.filter(|b| b.end_offset() > from));
                }
                Some(pager) => {
                    let page = pager.next_page().await?;
                    if page.is_empty() {
                        return Ok(None);
                    }
                    st.buffered.extend(page);
                }
            }
        }
    })
    .boxed()
}

struct RecoveryState {
    handle: StreamHandle,
    from: Offset,
    pager: Option<Pager>,
    buffered: VecDeque<RecordBatch>,
}
