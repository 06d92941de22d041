//! The live tail: a subscription yielding every committed record of a topic from a
//! starting offset, in order, exactly once.
//!
//! A subscription listens to the topic's broadcast of committed batches. Whenever it is
//! behind what the broadcast offers — it started in the past, or it lagged past the
//! broadcast buffer, or a batch arrives that does not continue where it stands — it
//! catches up by reading from the tier (the cache when it holds the offsets, else the
//! segment files), then resumes listening. Each record is delivered once: anything
//! below the subscription's next offset is skipped.

use std::{collections::VecDeque, sync::Arc};

use tier_core::{Offset, ReadLimit, Record, RecordBatch, TierError};
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};
use tokio::sync::watch;

use crate::layout::ctx;
use crate::read;
use crate::topic::TopicShared;

/// A live-tail subscription, from [`HotTier::subscribe`](crate::HotTier::subscribe).
#[derive(Debug)]
pub struct Subscription {
    shared: Arc<TopicShared>,
    rx: broadcast::Receiver<RecordBatch>,
    closed: watch::Receiver<bool>,
    next: Offset,
    ready: VecDeque<Record>,
}

impl Subscription {
    pub(crate) fn new(shared: Arc<TopicShared>, from: Offset) -> Self {
        // Subscribe before anything else: every batch committed from now on is either
        // received or (if the receiver lags) read back from the tier.
        let rx = shared.tail.subscribe();
        let closed = shared.closed.subscribe();
        Self { shared, rx, closed, next: from, ready: VecDeque::new() }
    }

    /// The offset of the next record this subscription yields.
    pub fn next_offset(&self) -> Offset {
        self.next
    }

    /// The next committed record, waiting for one to be appended when the subscription
    /// has seen everything.
    ///
    /// Errors: `Trimmed` when retention deleted the records this subscription needs;
    /// `Closed` once the tier is closed and every record committed before has been
    /// delivered (a subscriber waiting for a new record when `close` runs is woken with
    /// it); read errors (`Corruption`, …) as they come.
    pub async fn next(&mut self) -> Result<Record, TierError> {
        loop {
            if let Some(r) = self.ready.pop_front() {
                return Ok(r);
            }
            match self.rx.try_recv() {
                Ok(batch) => self.take(batch).await?,
                Err(TryRecvError::Lagged(_)) => self.catch_up().await?,
                Err(TryRecvError::Closed) => return Err(self.closed()),
                Err(TryRecvError::Empty) => {
                    if self.next < self.shared.state.read().end {
                        self.catch_up().await?;
                        continue;
                    }
                    // `None`: the tier was closed while waiting.
                    // Biased: a batch already sent is taken before the close is seen.
                    let received = tokio::select! {
                        biased;
                        received = self.rx.recv() => Some(received),
                        _ = self.closed.wait_for(|closed| *closed) => None,
                    };
                    match received {
                        Some(Ok(batch)) => self.take(batch).await?,
                        Some(Err(RecvError::Lagged(_))) => self.catch_up().await?,
                        Some(Err(RecvError::Closed)) => return Err(self.closed()),
                        // Every writer has stopped, so what is committed is final: take
                        // what the broadcast still holds, else stop.
                        None => match self.rx.try_recv() {
                            Ok(batch) => self.take(batch).await?,
                            Err(TryRecvError::Lagged(_)) => self.catch_up().await?,
                            Err(TryRecvError::Empty | TryRecvError::Closed) => {
                                if self.next >= self.shared.state.read().end {
                                    return Err(self.closed());
                                }
                            }
                        },
                    }
                }
            }
        }
    }

    /// Queues the records of `batch` not yet delivered, catching up first if the batch
    /// starts after the next offset.
    async fn take(&mut self, batch: RecordBatch) -> Result<(), TierError> {
        if batch.base_offset() > self.next {
            self.catch_up().await?;
        }
        if batch.end_offset() <= self.next || batch.base_offset() > self.next {
            return Ok(());
        }
        self.ready.extend(batch.records().filter(|r| r.offset >= self.next));
        self.next = batch.end_offset();
        Ok(())
    }

    /// Reads committed records from the next offset (cache or disk).
    async fn catch_up(&mut self) -> Result<(), TierError> {
        let records = read::read(&self.shared, self.next, Offset::MAX, ReadLimit::default()).await?;
        if let Some(last) = records.last() {
            self.next = last.offset + 1;
        }
        self.ready.extend(records);
        Ok(())
    }

    fn closed(&self) -> TierError {
        TierError::closed(ctx(&self.shared.name).offset(self.next), "the hot tier was closed")
    }
}
