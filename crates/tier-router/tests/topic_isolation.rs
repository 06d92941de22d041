//! One damaged WAL topic (a flipped footer byte in a sealed middle segment) does not keep
//! the store from opening: the other topics produce, consume, export and run retention;
//! the damaged one answers `Corruption` naming the file, every time, and is listed by
//! `TieredStore::failed_topics` (hot only and hot+cold on a local directory).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(all(feature = "warm", feature = "cold"))]

mod common;

use std::path::Path;
use std::time::{Duration, SystemTime};

use common::{ColdOn, Deployment, Tiers, append_range, r, slices};
use tier_core::{ErrorKind, StartPosition, Tier, TierError, TopicName};
use tier_router::Source;

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
        a_sealed.push(store.hot().rotate(&a_name).await.unwrap().unwrap());
    }
    append_range(&b, 0, 30, 5).await;
    store.hot().rotate(&b_name).await.unwrap().unwrap();
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
    assert_damaged(&Tier::range(store.hot(), &a_name).await.unwrap_err(), &damaged, "the WAL's range");
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
