//! Compound scenarios: two faults in a row, each a sequence that can reuse an acknowledged
//! offset, serve a never-acknowledged record, wedge the export or keep the store from
//! opening unless recovery handles it.
//!
//! - [`lost_wal`]: under `fail` warm refuses batches (replica stopped, `wait_replicas = 1`),
//!   the segment holding them rotates by age and the exporter runs, a clean close, then
//!   the WAL is lost.
//! - [`power_cut`]: `fsync = never`, a SIGKILLed producer, the active segment cut back as
//!   a power cut leaves it and the reservation's boot id changed (a reboot).
//! - [`lost_data_dir`]: the WAL and the router's state directory lost, cold elsewhere.
//! - [`warm_outage`]: under `degrade` the Valkey primary is down longer than WAL retention
//!   takes to delete exported segments; restarts with Valkey down and with it up.
//! - [`damaged_topic`]: a flipped footer byte in one topic's sealed segment while the
//!   other topics must keep serving.

pub mod damaged_topic;
pub mod lost_data_dir;
pub mod lost_wal;
pub mod power_cut;
pub mod warm_outage;

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use tier_core::{Offset, OffsetRange};
use tier_router::{RecoveryReport, TieredStore, Topic};

use crate::{ChaosError, ack::Ack};

/// How long a scenario waits for warm or cold to catch up once the faults stopped.
const CATCH_UP: Duration = Duration::from_secs(20);

/// The end of the acknowledged offsets (0 when none).
pub(crate) fn acked_end(acks: &[Ack]) -> Offset {
    acks.iter().map(|a| a.range.end).max().unwrap_or(0)
}

/// What recovery reported lost or maybe lost: the offsets a verification excuses.
pub(crate) fn reported_losses(report: &RecoveryReport) -> Vec<OffsetRange> {
    report.lost.iter().chain(&report.maybe_lost).copied().collect()
}

/// Acknowledged offsets (as ranges) that recovery neither kept nor reported: in `acks`
/// at or beyond `held_end` (what the tiers hold) and outside every reported loss.
pub(crate) fn unreported_losses(acks: &[Ack], held_end: Offset, report: &RecoveryReport) -> u64 {
    let reported = reported_losses(report);
    acks.iter()
        .flat_map(|a| a.range.start.max(held_end)..a.range.end)
        .filter(|o| !reported.iter().any(|r| r.start <= *o && *o < r.end))
        .count() as u64
}

/// `flush` until it succeeds (warm holds everything appended), at most [`CATCH_UP`].
pub(crate) async fn flush_until_caught_up(topic: &Topic) -> Result<(), String> {
    let deadline = Instant::now() + CATCH_UP;
    loop {
        match topic.flush().await {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => {
                return Err(format!("warm did not catch up within {CATCH_UP:?}: {e}"));
            }
            // Pacing retries of a background catch-up, not synchronisation.
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Exports until cold holds everything committed, at most [`CATCH_UP`]; `Err` names
/// where cold stopped.
pub(crate) async fn export_until_caught_up(store: &TieredStore, topic: &Topic) -> Result<(), String> {
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let exported = store.export_now(topic.name().as_str()).await;
        let ranges = topic.ranges().await.map_err(|e| format!("reading the ranges: {e}"))?;
        let cold_end = ranges.cold.map_or(0, |c| c.end);
        // `export_now` seals the active segment first: cold then holds everything committed.
        if exported.is_ok() && cold_end >= ranges.committed {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the export did not continue within {CATCH_UP:?}: cold ends at {cold_end}, committed {} ({})",
                ranges.committed,
                exported.err().map_or_else(String::new, |e| e.to_string())
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Segment files (`*.seg`) in `dir`, sorted by name (= by base offset).
pub(crate) fn segment_files(dir: &Path) -> Result<Vec<PathBuf>, ChaosError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| ChaosError::io(format!("listing {}", dir.display()), e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    files.sort();
    Ok(files)
}
