//! One damaged WAL topic (a flipped footer byte in a sealed middle segment) does not keep
//! the store from opening: the other topics produce, consume, export and run retention;
//! the damaged one answers `Corruption` naming the file, every time, and is listed by
//! `TieredStore::failed_topics` (hot only and hot+cold on a local directory). And a slow
//! topic (its warm calls held) does not keep another from opening: topics recover
//! concurrently, at open and on first use, with no store-wide lock held across their I/O.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(all(feature = "warm", feature = "cold"))]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use common::{ColdOn, Deployment, Tiers, append_range, r, slices};
use tier_core::{ErrorKind, StartPosition, TierError, TopicName};
use tier_router::Source;
use tier_testkit::{FaultyTier, MemoryTier};

/// Longest wait for what must happen (a hang detector, not synchronisation).
const WAIT: Duration = Duration::from_secs(20);

/// Asserts that `err` is topic `a`'s corruption, naming `path`.
fn assert_damaged(err: &TierError, path: &Path, what: &str) {
    assert_eq!(err.kind(), ErrorKind::Corruption, "{what}: {err}");
    assert!(err.to_string().contains(&path.display().to_string()), "{what} names the file: {err}");
}

async fn one_damaged_topic_among_two(tiers: Tiers) {
    let d = Deployment::new(tiers, ColdOn::Local).await;
    let store = d.open(&[]).await;
    let (a, b) = (store.topic("a").await.unwrap(), store.topic("b").await.unwrap());
    let (a_name, b_name) = (TopicName::new("a").unwrap(), TopicName::new("b").unwrap());
    let mut a_sealed = Vec::new();
    for base in [0, 10, 20] {
        append_range(&a, base, base + 10, 5).await;
        a_sealed.push(store.wal().rotate(&a_name).await.unwrap().unwrap());
    }
    append_range(&b, 0, 30, 5).await;
    store.wal().rotate(&b_name).await.unwrap().unwrap();
    store.close().await;

    // One flipped byte in the footer of a's middle sealed segment.
    let damaged = a_sealed[1].path.clone();
    let mut bytes = std::fs::read(&damaged).unwrap();
    let at = bytes.len() - 20;
    bytes[at] ^= 0xFF;
    std::fs::write(&damaged, &bytes).unwrap();

    let store = d.try_open(&[], false).await.expect("one damaged topic does not fail the open");
    let failed = store.failed_topics();
    assert_eq!(failed.iter().map(|(t, _)| t).collect::<Vec<_>>(), vec![&a_name], "{failed:?}");
    assert_damaged(&failed[0].1, &damaged, "failed_topics()");
    assert_eq!(store.topics().await, vec![b_name.clone()], "only b is open");
    // The damaged topic answers its error every time, and never as an empty topic.
    for _ in 0..2 {
        assert_damaged(&store.topic("a").await.err().unwrap(), &damaged, "topic(a)");
        assert_damaged(&store.recover_topic("a").await.unwrap_err(), &damaged, "recover_topic(a)");
    }
    assert_damaged(&store.wal().range(&a_name).await.unwrap_err(), &damaged, "the WAL's range");
    assert_eq!(store.topics().await, vec![b_name.clone()], "asking again opened nothing");

    // b produces and consumes.
    let b = store.topic("b").await.unwrap();
    append_range(&b, 30, 40, 5).await;
    b.flush().await.unwrap();
    let mut reader = b.reader_with_source(StartPosition::Offset(0)).await.unwrap();
    assert_eq!(slices(&mut reader, 0, 40).await.unwrap(), vec![(Source::Hot, r(0, 40))]);

    // Background work runs for b and skips a.
    if tiers.cold() {
        let exported: Vec<_> = store.export_now("b").await.unwrap().iter().map(|e| e.range).collect();
        assert_eq!(exported, vec![r(0, 30), r(30, 40)]);
        assert_damaged(&store.export_now("a").await.unwrap_err(), &damaged, "export_now(a)");
        assert_eq!(store.cold().unwrap().range(&a_name).await.unwrap(), r(0, 0), "nothing of a is exported");
    }
    let later = SystemTime::now() + Duration::from_secs(400 * 24 * 3600);
    let deleted = store.run_retention_now(later).await.unwrap();
    assert!(deleted.iter().all(|s| s.topic == b_name), "{deleted:?}");
    if tiers.cold() {
        assert!(!deleted.is_empty(), "b's exported segments may go");
    }
    store.trim_warm_now().await.unwrap();
    store.close().await;
    assert_eq!(std::fs::read(&damaged).unwrap(), bytes, "the damaged file is left as it was");

    // With the background tasks on, the store opens the same way.
    let store = d.try_open(&[], true).await.expect("the store opens with background tasks");
    assert_eq!(store.failed_topics().len(), 1);
    append_range(&store.topic("b").await.unwrap(), 40, 45, 5).await;
    store.close().await;
}

#[tokio::test]
async fn hot_only_one_damaged_topic_does_not_block_the_others() {
    one_damaged_topic_among_two(Tiers::Hot).await;
}

#[tokio::test]
async fn hot_cold_one_damaged_topic_does_not_block_the_others() {
    one_damaged_topic_among_two(Tiers::HotCold).await;
}

/// Hot+warm with warm an in-memory tier whose calls can be held per topic.
async fn with_holdable_warm() -> (Deployment, Arc<FaultyTier<MemoryTier>>) {
    let mut d = Deployment::new(Tiers::HotWarm, ColdOn::Local).await;
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    d.warm = Some(warm.clone());
    (d, warm)
}

/// While topic `slow` recovers (warm does not answer for it), topic `fast` opens and takes
/// appends: opening a topic holds no store-wide lock across its recovery.
#[tokio::test]
async fn a_slow_topic_does_not_keep_another_from_opening() {
    let (d, warm) = with_holdable_warm().await;
    let store = d.open(&[]).await;
    let slow = TopicName::new("slow").unwrap();
    warm.hold(&slow);
    let opening = tokio::spawn({
        let store = store.clone();
        async move { store.topic("slow").await.map(|_| ()) }
    });
    tokio::time::timeout(WAIT, warm.wait_held(1)).await.expect("the slow topic's recovery asks warm");
    let fast = tokio::time::timeout(WAIT, store.topic("fast"))
        .await
        .expect("topic 'fast' opens while 'slow' recovers")
        .unwrap();
    append_range(&fast, 0, 10, 5).await;
    let listed = tokio::time::timeout(WAIT, store.topics()).await.expect("the open topics are listed");
    assert_eq!(listed, vec![TopicName::new("fast").unwrap()]);
    warm.release(&slow);
    opening.await.unwrap().unwrap();
    assert_eq!(store.topics().await.len(), 2);
    store.close().await;
}

/// At open, the topics the WAL holds recover concurrently: both are waiting on warm at
/// once (one after the other, the second would never be asked while the first waits).
#[tokio::test]
async fn topics_recover_concurrently_at_open() {
    let (d, warm) = with_holdable_warm().await;
    let store = d.open(&[]).await;
    for name in ["a", "b"] {
        append_range(&store.topic(name).await.unwrap(), 0, 10, 5).await;
    }
    store.close().await;
    let (a, b) = (TopicName::new("a").unwrap(), TopicName::new("b").unwrap());
    warm.hold(&a);
    warm.hold(&b);
    let (store, ()) = tokio::join!(d.open(&[]), async {
        tokio::time::timeout(WAIT, warm.wait_held(2)).await.expect("both topics recover at once");
        warm.release(&a);
        warm.release(&b);
    });
    assert_eq!(store.topics().await, vec![a, b]);
    for name in ["a", "b"] {
        assert_eq!(store.topic(name).await.unwrap().high_watermark(), 10);
    }
    store.close().await;
}
