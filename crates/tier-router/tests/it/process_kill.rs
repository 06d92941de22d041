//! A process killed while a rotation's background seal was writing the sealed segment's
//! footer leaves every batch of that segment in place: re-sealing it at open cuts no
//! offset off the log. The topic must continue at the WAL's end with nothing reported
//! lost and no offset skipped. Taken for a cut, it made recovery skip to the offset
//! reservation written ahead of the WAL and record the never-used offsets as a gap, at
//! which every reader from the start stopped (chaos `server-kill hot`: a SIGKILLed
//! `tierlog serve` whose read-back ended with `NotFound` "recorded lost at recovery").
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{append_range, r, slices};
use tier_core::{StartPosition, TopicName};
use tier_hot::layout::parse_segment_file_name;
use tier_hot::{FsyncPolicy, HotConfig};
use tier_router::{Source, TieredStore};

const T: &str = "t";

/// Records appended before the kill: enough to fill several small segments.
const ACKED: u64 = 1000;

fn hot(dir: &Path) -> HotConfig {
    let mut hot = HotConfig::new(dir.join("hot")).with_fsync(FsyncPolicy::Always);
    hot.segment_bytes = 2048;
    hot.segment_age = Duration::from_secs(3600);
    hot
}

async fn open(dir: &Path) -> TieredStore {
    TieredStore::builder()
        .hot(hot(dir))
        .background(false)
        .topics([TopicName::new(T).unwrap()])
        .open()
        .await
        .unwrap()
}

/// The topic's segment files, in offset order.
fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(dir.join("hot").join(T))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|p| parse_segment_file_name(p.file_name()?.to_str()?).map(|base| (base, p)))
        .collect();
    files.sort();
    files.into_iter().map(|(_, p)| p).collect()
}

/// Appends [0, ACKED) and kills the process (nothing closed, nothing flushed).
async fn acknowledge_then_kill(dir: &Path) {
    let store = open(dir).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, ACKED, 5).await;
    drop(topic);
    // The reservation written ahead of the WAL is on disk, as a kill finds it.
    store.wait_for_state_writes();
    store.abort().await;
    assert!(segments(dir).len() >= 3, "the appends rotated segments: {:?}", segments(dir));
}

/// Opens again and checks that the topic continues at `ACKED` with nothing lost, and that
/// a reader from the start reads every acknowledged record, then a new one, without a
/// gap.
async fn reopen_continues_at_the_acknowledged_end(dir: &Path) {
    let store = open(dir).await;
    let reports = store.recovery_reports().await;
    assert_eq!(reports.len(), 1, "{reports:?}");
    let report = &reports[0];
    assert_eq!(report.hot, r(0, ACKED), "{report:?}");
    assert!(
        report.lost.is_empty() && report.maybe_lost.is_empty(),
        "nothing acknowledged was lost: {report:?}"
    );
    assert_eq!(report.next_offset, ACKED, "no offset is skipped: {report:?}");
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, ACKED, ACKED + 5, 5).await;
    let mut reader = topic.reader_with_source(StartPosition::Earliest).await.unwrap();
    let served = slices(&mut reader, 0, ACKED + 5).await.unwrap();
    assert!(served.iter().all(|(s, _)| matches!(s, Source::Hot | Source::Live)), "{served:?}");
    drop(reader);
    drop(topic);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_a_background_seal_skips_no_offset() {
    let dir = tempfile::tempdir().unwrap();
    acknowledge_then_kill(dir.path()).await;
    // The kill landed while the last rotation's seal was writing the footer of the
    // segment before the active one: part of the footer is in the file.
    let files = segments(dir.path());
    let sealed = &files[files.len() - 2];
    let len = std::fs::metadata(sealed).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(sealed).unwrap().set_len(len - 10).unwrap();
    reopen_continues_at_the_acknowledged_end(dir.path()).await;
}
