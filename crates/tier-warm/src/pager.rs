//! Bounded paging over one topic's stream: the primitive under `read`,
//! `offset_for_timestamp`, `range` and the recovery stream.
//!
//! Nothing here loads a whole stream: every request carries `COUNT`, and a [`Pager`]
//! keeps only the ID of the last entry it returned.

use std::time::Duration;

use fred::{
    prelude::{Client, StreamsInterface},
    types::Value,
};
use tier_core::{ErrorContext, Offset, RecordBatch, TierError};

use crate::{
    client::bounded,
    entry::{RawEntry, entry_id, parse_entries},
};

/// What a pager needs to talk to one stream. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct StreamHandle {
    pub(crate) client: Client,
    pub(crate) key: String,
    pub(crate) ctx: ErrorContext,
    pub(crate) command_timeout: Duration,
    pub(crate) page_size: u32,
}

impl StreamHandle {
    /// `XRANGE key start end COUNT count`, decoded into raw entries.
    pub(crate) async fn xrange(
        &self,
        start: &str,
        end: &str,
        count: u64,
    ) -> Result<Vec<RawEntry>, TierError> {
        let reply: Value = bounded(
            &self.ctx,
            "XRANGE",
            self.command_timeout,
            self.client.xrange(self.key.as_str(), start, end, Some(count)),
        )
        .await?;
        parse_entries(&self.ctx, reply)
    }

    /// `XREVRANGE key end start COUNT count`, decoded into raw entries.
    pub(crate) async fn xrevrange(
        &self,
        end: &str,
        start: &str,
        count: u64,
    ) -> Result<Vec<RawEntry>, TierError> {
        let reply: Value = bounded(
            &self.ctx,
            "XREVRANGE",
            self.command_timeout,
            self.client.xrevrange(self.key.as_str(), end, start, Some(count)),
        )
        .await?;
        parse_entries(&self.ctx, reply)
    }

    /// The batch with the largest base offset `<= offset` (the one containing `offset`
    /// when the stream is contiguous there), if any.
    pub(crate) async fn batch_at_or_before(&self, offset: Offset) -> Result<Option<RecordBatch>, TierError> {
        let entries = self.xrevrange(&entry_id(offset), "-", 1).await?;
        entries.first().map(|e| e.decode(&self.ctx, &self.key)).transpose()
    }

    /// The stored entry whose ID is exactly that of a batch based at `base`.
    pub(crate) async fn entry_at(&self, base: Offset) -> Result<Option<RawEntry>, TierError> {
        let id = entry_id(base);
        Ok(self.xrange(&id, &id, 1).await?.into_iter().next())
    }

    /// A pager positioned at the batch containing `from` (or, when no batch starts at
    /// or before `from`, at the stream's first batch).
    pub(crate) async fn pager_from(&self, from: Offset) -> Result<(Pager, Option<RecordBatch>), TierError> {
        match self.batch_at_or_before(from).await? {
            Some(first) => {
                let pager = Pager {
                    stream: self.clone(),
                    cursor: format!("({}", entry_id(first.base_offset())),
                    expected: Some(first.end_offset()),
                    done: false,
                };
                Ok((pager, Some(first)))
            }
            None => Ok((self.pager_from_start(), None)),
        }
    }

    /// A pager over the whole stream from its first entry.
    pub(crate) fn pager_from_start(&self) -> Pager {
        Pager { stream: self.clone(), cursor: "-".to_owned(), expected: None, done: false }
    }
}

/// Walks a stream forward a page at a time, decoding each entry and checking that
/// batches are contiguous (each one starts where the previous ended).
#[derive(Debug)]
pub(crate) struct Pager {
    stream: StreamHandle,
    /// The `XRANGE` start of the next page: `-` or `(<last id>` (exclusive).
    cursor: String,
    /// Base offset the next batch must have, once one batch has been seen.
    expected: Option<Offset>,
    done: bool,
}

impl Pager {
    /// The next page of at most `page_size` batches; empty once the stream is exhausted.
    pub(crate) async fn next_page(&mut self) -> Result<Vec<RecordBatch>, TierError> {
        if self.done {
            return Ok(Vec::new());
        }
        let count = u64::from(self.stream.page_size.max(1));
        let entries = self.stream.xrange(&self.cursor, "+", count).await?;
        if (entries.len() as u64) < count {
            self.done = true;
        }
        let mut batches = Vec::with_capacity(entries.len());
        for entry in &entries {
            let batch = entry.decode(&self.stream.ctx, &self.stream.key)?;
            if let Some(expected) = self.expected
                && batch.base_offset() != expected
            {
                return Err(TierError::corruption(
                    self.stream.ctx.clone().location(format!("{}@{}", self.stream.key, entry.id)),
                    format!(
                        "stream {} is not contiguous: entry {} starts at offset {} but the previous batch ended at {} (expected ID {})",
                        self.stream.key,
                        entry.id,
                        batch.base_offset(),
                        expected,
                        entry_id(expected)
                    ),
                ));
            }
            self.expected = Some(batch.end_offset());
            self.cursor = format!("({}", entry.id);
            batches.push(batch);
        }
        Ok(batches)
    }

    /// End offset of the last batch returned so far.
    pub(crate) fn end_so_far(&self) -> Option<Offset> {
        self.expected
    }
}
