//! Acknowledged records lost off the WAL's tail (media damage, or `fsync = never` and a
//! power loss) while the checkpoint is beyond: recovery reports the range lost, records
//! the gap in the WAL, and the topic keeps accepting appends after it (hot only and
//! hot+cold on a local directory). With cold, the exporter records the gap in cold
//! before exporting the segment after it, so WAL retention can delete everything
//! exported and readers still get the records on both sides and an error naming the gap.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(all(feature = "warm", feature = "cold"))]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::{ColdOn, Deployment, Tiers, append_range, check, r, slices};
use futures::StreamExt;
use tier_core::{ErrorKind, StartPosition, TopicName};
use tier_router::{Source, TieredStore, Topic};

const TOPIC: &str = "damaged";

/// The last (active) segment file of the topic's WAL directory.
fn active_segment(hot_dir: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(hot_dir.join(TOPIC))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    files.sort();
    files.pop().unwrap()
}

async fn acknowledged_tail_lost(tiers: Tiers) {
    let d = Deployment::new(tiers, ColdOn::Local).await;
    let store = d.open(&[TOPIC]).await;
    let topic = store.topic(TOPIC).await.unwrap();
    let name = TopicName::new(TOPIC).unwrap();
    append_range(&topic, 0, 50, 10).await;
    store.wal().rotate(&name).await.unwrap().unwrap();
    if tiers.cold() {
        let exported: Vec<_> = store.export_now(TOPIC).await.unwrap().iter().map(|e| e.range).collect();
        assert_eq!(exported, vec![r(0, 50)]);
    }
    append_range(&topic, 50, 100, 10).await;
    // Closing checkpoints the commit point (100).
    store.close().await;

    // Damage: the last batch (90..100) of the active segment loses its last 5 bytes.
    let active = active_segment(&d.hot_dir());
    let len = std::fs::metadata(&active).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&active).unwrap().set_len(len - 5).unwrap();

    let store = d.open(&[TOPIC]).await;
    assert_eq!(store.wal().range(&name).await.unwrap().end, 100, "the WAL continues at the checkpoint");
    let report = store.recover_topic(TOPIC).await.unwrap();
    assert_eq!(report.hot, r(0, 90));
    assert_eq!(report.lost, vec![r(90, 100)]);
    assert_eq!(report.next_offset, 100);
    let topic = store.topic(TOPIC).await.unwrap();
    append_range(&topic, 100, 120, 10).await;
    topic.flush().await.unwrap();

    // From 0: the records before the gap, then an error naming it.
    let mut from_zero = topic.reader_with_source(StartPosition::Offset(0)).await.unwrap();
    slices(&mut from_zero, 0, 90).await.unwrap();
    let err =
        tokio::time::timeout(Duration::from_secs(20), from_zero.next()).await.unwrap().unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("90..100") && err.to_string().contains("lost"), "{err}");
    // From the checkpoint: the new records.
    let mut from_cp = topic.reader_with_source(StartPosition::Offset(100)).await.unwrap();
    slices(&mut from_cp, 100, 20).await.unwrap();
    if tiers.cold() {
        export_across_the_gap_then_retention(&store, &topic, &name).await;
    }
    store.close().await;

    // Reopening again: nothing more is lost, the gap and both sides stay.
    let store = d.open(&[TOPIC]).await;
    let report = store.recover_topic(TOPIC).await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.next_offset, 120);
    let topic = store.topic(TOPIC).await.unwrap();
    append_range(&topic, 120, 130, 10).await;
    let mut from_cp = topic.reader(StartPosition::Offset(100)).await.unwrap();
    for offset in 100..130 {
        let record =
            tokio::time::timeout(Duration::from_secs(20), from_cp.next()).await.unwrap().unwrap().unwrap();
        assert_eq!(record.offset, offset);
        check(&record);
    }
    let mut in_gap = topic.reader(StartPosition::Offset(95)).await.unwrap();
    let err =
        tokio::time::timeout(Duration::from_secs(20), in_gap.next()).await.unwrap().unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("90..100"), "{err}");
    store.close().await;
}

/// Rotates and exports: the segment before the gap, the gap (recorded in cold first),
/// the segment after it. Retention then deletes every exported WAL segment, and reads
/// come from cold: the records before the gap, an error naming it, the records after.
async fn export_across_the_gap_then_retention(store: &TieredStore, topic: &Topic, name: &TopicName) {
    let exported: Vec<_> = store.export_now(TOPIC).await.unwrap().iter().map(|e| e.range).collect();
    assert_eq!(exported, vec![r(50, 90), r(100, 120)], "the gap is no reason to stop exporting");
    let cold = store.cold().unwrap();
    assert_eq!(cold.range(name).await.unwrap(), r(0, 120));
    let later = SystemTime::now() + Duration::from_secs(400 * 24 * 3600);
    let deleted: Vec<_> = store.run_retention_now(later).await.unwrap().iter().map(|s| s.range).collect();
    assert_eq!(deleted, vec![r(0, 50), r(50, 90), r(100, 120)], "everything exported may go");
    assert!(store.wal().range(name).await.unwrap().start >= 120);

    let mut from_zero = topic.reader_with_source(StartPosition::Offset(0)).await.unwrap();
    assert_eq!(slices(&mut from_zero, 0, 90).await.unwrap(), vec![(Source::Cold, r(0, 90))]);
    let err =
        tokio::time::timeout(Duration::from_secs(20), from_zero.next()).await.unwrap().unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
    let text = err.to_string();
    assert!(text.contains("90..100") && text.contains("lost") && text.contains(".gap"), "{text}");
    let mut from_cp = topic.reader_with_source(StartPosition::Offset(100)).await.unwrap();
    assert_eq!(slices(&mut from_cp, 100, 20).await.unwrap(), vec![(Source::Cold, r(100, 120))]);
}

#[tokio::test]
async fn hot_only_acknowledged_tail_lost_continues_after_the_gap() {
    acknowledged_tail_lost(Tiers::Hot).await;
}

#[tokio::test]
async fn hot_cold_acknowledged_tail_lost_continues_after_the_gap() {
    acknowledged_tail_lost(Tiers::HotCold).await;
}
