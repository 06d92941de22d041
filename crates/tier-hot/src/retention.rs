//! Retention: deleting a topic's oldest sealed segments by age and total size.
//!
//! Oldest first; never the active segment, nor a segment whose background seal (fsync)
//! has not finished (it is not sealed to the outside yet); the caller's predicate is
//! asked before each deletion (the router answers "does the cold tier hold this whole
//! range?") and the first refusal stops the run for that topic, so the WAL never has a
//! hole. The file is unlinked (and the directory fsynced) before the segment leaves the
//! topic's state; after a failed fsync the next run finishes the deletion (a file
//! already unlinked counts as unlinked). Readers already holding its mmap keep reading
//! it safely. A recorded gap's marker is removed with the last segment before the gap
//! (the gap is then below the range).

use std::{sync::Arc, time::SystemTime};

use tier_core::TierError;
use tracing::info;

use crate::config::HotConfig;
use crate::layout::{fsync_dir, io_err};
use crate::segment::{SegmentEvent, SegmentInfo};
use crate::topic::{Gap, TopicShared};

/// Why a sealed segment is due for deletion, if it is. A segment sealed after `now` (the
/// clock went back since) is never due by age, whatever the retention time: it has no
/// age yet (see `tier_core::clock`, "A clock going backwards").
fn is_due(info: &SegmentInfo, total_bytes: u64, now: SystemTime, config: &HotConfig) -> bool {
    let too_old = now.duration_since(info.sealed_at).is_ok_and(|age| age >= config.retention_time);
    too_old || total_bytes > config.retention_bytes
}

/// Applies retention to one topic; returns the segments deleted, oldest first.
pub(crate) fn run_topic(
    shared: &TopicShared,
    config: &HotConfig,
    now: SystemTime,
    can_delete: &dyn Fn(&SegmentInfo) -> bool,
    events: &tokio::sync::broadcast::Sender<SegmentEvent>,
) -> Result<Vec<SegmentInfo>, TierError> {
    let _serial = shared.retention.lock();
    let mut deleted = Vec::new();
    loop {
        let (oldest, total) = {
            let state = shared.state.read();
            (state.published().first().cloned(), state.total_bytes())
        };
        let Some(oldest) = oldest else { break };
        if !is_due(&oldest.info, total, now, config) || !can_delete(&oldest.info) {
            break;
        }
        let path = &oldest.info.path;
        match std::fs::remove_file(path) {
            // Already unlinked by a run whose directory fsync failed: fsync again.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            result => result.map_err(|e| io_err(&shared.name, path, "deleting a sealed segment", e))?,
        }
        fsync_dir(&shared.dir)
            .map_err(|e| io_err(&shared.name, &shared.dir, "fsyncing the topic directory", e))?;
        let stale_gaps = {
            let mut state = shared.state.write();
            if state.sealed.first().is_some_and(|s| Arc::ptr_eq(s, &oldest)) {
                state.sealed.remove(0);
            }
            let start = state.range().start;
            state.cache.trim_before(start);
            shared.parked.lock().take_if(|p| Arc::ptr_eq(&p.segment, &oldest));
            let below = state.gaps.partition_point(|g| g.range.end <= start);
            state.gaps.drain(..below).collect::<Vec<_>>()
        };
        info!(topic = %shared.name, range = %oldest.info.range, "retention deleted a sealed segment");
        // Announced before the markers go: the segment has left the state either way.
        let _ = events.send(SegmentEvent::Deleted(oldest.info.clone()));
        deleted.push(oldest.info.clone());
        remove_markers(shared, &stale_gaps)?;
    }
    Ok(deleted)
}

/// Deletes the marker files of gaps now below the range (already gone from the state:
/// a marker left behind by a failure here is removed at the next open).
fn remove_markers(shared: &TopicShared, gaps: &[Gap]) -> Result<(), TierError> {
    if gaps.is_empty() {
        return Ok(());
    }
    for gap in gaps {
        std::fs::remove_file(&gap.marker)
            .map_err(|e| io_err(&shared.name, &gap.marker, "deleting a gap marker", e))?;
        info!(topic = %shared.name, lost = %gap.range, "retention deleted a gap marker below the range");
    }
    fsync_dir(&shared.dir).map_err(|e| io_err(&shared.name, &shared.dir, "fsyncing the topic directory", e))
}
