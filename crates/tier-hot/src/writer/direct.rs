//! Direct appends: an append that finds its topic's writer idle does the writer's work
//! itself instead of queueing it to the writer task.
//!
//! Queueing costs thread hand-offs (producer → writer task → blocking pool → writer
//! task → producer) that dwarf a buffered write of a small batch. So when the writer's
//! lock is free and no append is queued, [`append_direct`] checks that the batch is the
//! plain case — it continues the log, fits the active segment, the segment already
//! holds a batch, the writer is not poisoned — and then writes and commits it:
//!
//! - without an fsync (`never`, `interval`), in the caller's task, synchronously (so a
//!   cancelled append can never leave a write half done), for batches up to
//!   `INLINE_WRITE_MAX`;
//! - under `always`, and for larger batches without an fsync, in one blocking task
//!   that owns the lock until the batch is written (fsynced under `always`) and
//!   committed (it finishes even if the caller stops waiting): one hand-off to the
//!   blocking pool instead of the writer task's three.
//!
//! Everything else — a new segment, rotation, a retry below the end, a take-over, a
//! busy writer — is queued as before, so concurrent producers still meet in the writer
//! task's group and share its write and fsync. Correctness does not depend on which
//! path an append takes: both hold the same lock while they change the writer's state,
//! and a direct append only runs when every append queued before it has been handled.

use std::sync::{Arc, atomic::Ordering};

use tier_core::{RecordBatch, TierError};
use tokio::sync::Mutex;

use super::{INLINE_WRITE_MAX, Writer};
use crate::config::FsyncPolicy;
use crate::layout::ctx;

/// What [`append_direct`] did with a batch.
pub(crate) enum Direct {
    /// The batch was appended (or failed) without the writer task.
    Done(Result<(), TierError>),
    /// The direct path does not apply: queue the batch to the writer task.
    Queue(RecordBatch),
}

/// Appends `batch` without the writer task when the writer is idle and the batch is the
/// plain case (see the module docs); otherwise hands the batch back to be queued.
pub(crate) async fn append_direct(writer: &Arc<Mutex<Writer>>, batch: RecordBatch) -> Direct {
    let Ok(mut w) = Arc::clone(writer).try_lock_owned() else { return Direct::Queue(batch) };
    let always = w.config.fsync == FsyncPolicy::Always;
    w.absorb_seal_failure();
    let one = std::slice::from_ref(&batch);
    if !w.direct_applies(one) {
        return Direct::Queue(batch);
    }
    if w.writes_inline(one) {
        return Direct::Done(w.append_now(vec![batch], false));
    }
    let topic = w.topic().clone();
    match tier_core::blocking::spawn(move || w.append_now(vec![batch], always)).await {
        Ok(result) => Direct::Done(result),
        Err(e) => Direct::Done(Err(
            TierError::internal(ctx(&topic), "the blocking file task failed").with_source(e)
        )),
    }
}

impl Writer {
    /// Writes and commits `batches` here, as [`append_direct`] writes one batch inline,
    /// when they are the plain case ([`direct_applies`](Self::direct_applies)) written
    /// with one write and no fsync, at most `INLINE_WRITE_MAX` bytes together
    /// ([`writes_inline`](Self::writes_inline)); hands them back otherwise.
    pub(crate) fn append_inline(
        &mut self,
        batches: Vec<RecordBatch>,
    ) -> Result<Result<(), TierError>, Vec<RecordBatch>> {
        if !self.writes_inline(&batches) {
            return Err(batches);
        }
        self.absorb_seal_failure();
        if !self.direct_applies(&batches) {
            return Err(batches);
        }
        Ok(self.append_now(batches, false))
    }

    /// True when a direct append of `batches` is written in the caller's task: no fsync
    /// follows it and they are at most `INLINE_WRITE_MAX` bytes together.
    pub(super) fn writes_inline(&self, batches: &[RecordBatch]) -> bool {
        self.config.fsync != FsyncPolicy::Always && encoded_len(batches) <= INLINE_WRITE_MAX
    }

    /// True when `batches` (at least one) can be written and committed at once: nothing
    /// is queued or grouped, they continue the log one after another, the active segment
    /// exists, already holds a batch (so `first_write`, the age deadline, is set) and has
    /// room for them.
    pub(super) fn direct_applies(&self, batches: &[RecordBatch]) -> bool {
        let mut next = self.next;
        for batch in batches {
            if batch.base_offset() != next {
                return false;
            }
            next = batch.end_offset();
        }
        let len = encoded_len(batches);
        !batches.is_empty()
            && self.poisoned.is_none()
            && self.group.is_empty()
            && self.first_write.is_some()
            && self.shared.queued_appends.load(Ordering::SeqCst) == 0
            && self.active.as_ref().is_some_and(|a| a.state.size() + len <= self.config.segment_bytes)
    }

    /// Writes `batches` (fsyncing when `sync`) and commits them, as a group would be;
    /// a failure poisons the writer. Blocking file I/O: call it where that is allowed.
    pub(super) fn append_now(&mut self, batches: Vec<RecordBatch>, sync: bool) -> Result<(), TierError> {
        let Some(mut active) = self.active.take() else {
            return Err(TierError::internal(ctx(self.topic()), "direct append without an active segment"));
        };
        let written = super::write_and_sync(&mut active, &batches, sync, &self.shared);
        if let Err(e) = written {
            self.active = Some(active);
            return Err(self.fail(e));
        }
        let stats = &self.shared.stats;
        stats.writes.fetch_add(1, Ordering::Relaxed);
        stats.batches.fetch_add(batches.len() as u64, Ordering::Relaxed);
        if sync {
            stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        self.next = batches.last().map_or(self.next, RecordBatch::end_offset);
        self.commit(&active, batches);
        self.active = Some(active);
        self.dirty = !sync;
        Ok(())
    }
}

/// The bytes `batches` take in a segment.
fn encoded_len(batches: &[RecordBatch]) -> u64 {
    batches.iter().map(|b| b.encoded_len() as u64).sum()
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("topic", self.topic())
            .field("next", &self.next)
            .field("queued_in_group", &self.group.len())
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}
