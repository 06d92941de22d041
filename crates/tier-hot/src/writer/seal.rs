//! Rotation with the seal's fsync off the append path.
//!
//! Rotation writes the old segment's footer, maps it, and starts the next active
//! segment (under `never`/`interval` without fsyncing the new file), all without an
//! fsync; appends continue into the new segment at once. The fsyncs — the sealed file,
//! the new file when it was not synced, the topic directory — run in a background
//! blocking task. Until that task is done the segment is readable through the topic's
//! state (its mmap) but not *sealed to the outside*: only then is it announced with
//! `SegmentEvent::Sealed`, listed by `sealed_segments()` and open to retention (see
//! `TopicState::publish_synced`).
//!
//! At most [`MAX_SEALS_IN_FLIGHT`] background seals run per topic; a rotation beyond
//! that waits for the oldest. A failed background fsync poisons the writer (the next
//! append fails with `Unavailable`), like a failed write; its segment and every later
//! one stay unpublished. The writer task waits for in-flight seals before it ends, so
//! `HotTier::close` does too; `HotTier::rotate` and `skip_to` wait for theirs.

use std::{fs::File, path::PathBuf, sync::Arc};

use tier_core::TierError;
use tokio::sync::broadcast;
use tracing::{debug, warn};

use super::Writer;
use crate::config::FsyncPolicy;
use crate::layout::ctx;
use crate::read::blocking;
use crate::segment::{ActiveSegment, SealedFile, SegmentEvent, SegmentInfo, sync_sealed};
use crate::topic::{ActiveView, TopicShared};
use tier_core::blocking::Job;

/// Background seals allowed in flight per topic.
pub(crate) const MAX_SEALS_IN_FLIGHT: usize = 2;

/// The fsyncs that finish one rotation, run on the blocking pool.
struct SealJob {
    shared: Arc<TopicShared>,
    events: broadcast::Sender<SegmentEvent>,
    sealed: Arc<SealedFile>,
    file: File,
    /// The next active segment, when it was created without an fsync.
    next: Option<(PathBuf, Arc<File>)>,
}

impl SealJob {
    fn run(self) {
        let topic = &self.shared.name;
        let also = self.next.as_ref().map(|(p, f)| (p.as_path(), f.as_ref()));
        match sync_sealed(topic, &self.sealed.info.path, &self.file, also) {
            Ok(()) => {
                self.sealed.mark_synced();
                self.shared.state.write().publish_synced(&self.events);
                debug!(topic = %topic, range = %self.sealed.info.range, bytes = self.sealed.info.bytes, "sealed a segment");
            }
            Err(e) => {
                warn!(topic = %topic, error = %e.report(), "sealing a segment failed; appends to this topic fail until reopened");
                self.shared.fail_seal(Arc::new(e));
            }
        }
    }
}

impl Writer {
    /// Seals the active segment (if it holds records) and starts a new one at the end;
    /// the seal's fsync runs in the background (see the module docs). Returns the
    /// segment being sealed.
    pub(crate) async fn rotate(&mut self) -> Result<Option<SegmentInfo>, TierError> {
        self.absorb_seal_failure();
        if let Some(why) = &self.poisoned {
            return Err(super::poisoned(self.topic(), why));
        }
        if self.active.as_ref().is_none_or(ActiveSegment::is_empty) {
            self.first_write = None;
            return Ok(None);
        }
        self.reap_seals(MAX_SEALS_IN_FLIGHT - 1).await?;
        let Some(active) = self.active.take() else { return Ok(None) };
        let (topic, dir, interval) =
            (self.topic().clone(), self.shared.dir.clone(), self.config.index_interval_bytes);
        // The seal time and the next segment's creation time: the tier's clock's (which may
        // have gone back since the last seal; nothing orders segments by it).
        let now = self.config.clock.now();
        // Under `always` the next segment's file and directory entry must be durable
        // before an append into it is acknowledged: create it synced, as before.
        let sync_new = self.config.fsync == FsyncPolicy::Always;
        let end = active.state.next_offset();
        let result = blocking(self.topic(), move || {
            let (sealed, file) = active.finish(&topic, now)?;
            let new = ActiveSegment::create_with(&topic, &dir, end, interval, now, sync_new)?;
            Ok((sealed, file, new))
        })
        .await;
        let (sealed, file, new) = match result {
            Ok(v) => v,
            Err(e) => return Err(self.fail(e)),
        };
        let sealed = Arc::new(sealed);
        let info = sealed.info.clone();
        {
            let mut state = self.shared.state.write();
            state.sealed.push(Arc::clone(&sealed));
            state.pending_seals += 1;
            state.active = Some(ActiveView::of(&new));
        }
        let job = SealJob {
            shared: Arc::clone(&self.shared),
            events: self.events.clone(),
            sealed,
            file,
            next: (!sync_new).then(|| (new.path.clone(), Arc::clone(&new.read_handle))),
        };
        self.seals.push_back(tier_core::blocking::spawn_seal(move || job.run()));
        self.active = Some(new);
        self.first_write = None;
        self.dirty = false;
        Ok(Some(info))
    }

    /// Waits until at most `keep` background seals are in flight; `Unavailable` when
    /// one failed (the writer is then poisoned).
    pub(crate) async fn reap_seals(&mut self, keep: usize) -> Result<(), TierError> {
        while self.seals.front().is_some_and(Job::is_finished) || self.seals.len() > keep {
            let Some(job) = self.seals.pop_front() else { break };
            if let Err(e) = job.await {
                let e =
                    TierError::internal(ctx(self.topic()), "the background seal task failed").with_source(e);
                self.shared.fail_seal(Arc::new(e));
            }
        }
        self.absorb_seal_failure();
        match &self.poisoned {
            Some(why) => Err(super::poisoned(self.topic(), why)),
            None => Ok(()),
        }
    }

    /// Takes a background seal's failure over as the writer's poison.
    pub(crate) fn absorb_seal_failure(&mut self) {
        if self.poisoned.is_none() && self.shared.seal_failed.load(std::sync::atomic::Ordering::SeqCst) {
            self.poisoned = self.shared.seal_failure.lock().clone();
        }
    }
}

/// Background seals in flight, oldest first.
pub(crate) type Seals = std::collections::VecDeque<Job<()>>;
