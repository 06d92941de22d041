//! The live tail: subscribers from any offset get every committed record once, in
//! order, including one so slow that it lags past the broadcast buffer and the cache.

// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::time::Duration;

use common::{append_records, open, small_config, topic};
use tier_core::{ErrorKind, Tier};
use tier_hot::HotConfig;
use tier_testkit::conformance::sample_records;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_subscriber_falls_behind_and_still_gets_every_record_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    // A tiny broadcast buffer and cache and small segments: the subscriber must catch up
    // from disk, across sealed segments.
    let mut config = small_config(dir.path());
    config.live_tail_batches = 4;
    config.cache_bytes = 8 * 1024;
    let tier = open(config).await;
    let t = topic("tail");
    let head = append_records(&tier, &t, 0, 30, 3).await;
    let mut sub = tier.subscribe(&t, 10).unwrap();
    let (stall_tx, stall_rx) = tokio::sync::oneshot::channel::<()>();
    let consumer = tokio::spawn(async move {
        let mut got = Vec::new();
        // Take a few records, then stall until the producer is far ahead.
        for _ in 0..5 {
            got.push(sub.next().await.unwrap());
        }
        stall_rx.await.unwrap();
        while got.len() < 20 + 1000 {
            got.push(sub.next().await.unwrap());
        }
        got
    });
    let mut want = head[10..].to_vec();
    let records = sample_records(30, 1000, 5);
    for chunk in records.chunks(4) {
        tier.append(&t, common::batch(chunk)).await.unwrap();
    }
    want.extend(records);
    assert!(!tier.sealed_segments(&t).is_empty());
    stall_tx.send(()).unwrap();
    let got = tokio::time::timeout(Duration::from_secs(60), consumer).await.unwrap().unwrap();
    let offsets: Vec<u64> = got.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (10..1030).collect::<Vec<_>>());
    assert_eq!(got, want);
    tier.close().await;
}

#[tokio::test]
async fn a_subscriber_at_the_end_receives_new_appends_live() {
    let dir = tempfile::tempdir().unwrap();
    let tier = open(HotConfig::new(dir.path())).await;
    let t = topic("live");
    append_records(&tier, &t, 0, 3, 3).await;
    let mut sub = tier.subscribe(&t, 3).unwrap();
    assert_eq!(sub.next_offset(), 3);
    let pending = tokio::time::timeout(Duration::from_millis(50), sub.next()).await;
    assert!(pending.is_err(), "nothing to yield yet");
    let more = append_records(&tier, &t, 3, 4, 2).await;
    for want in &more {
        assert_eq!(&sub.next().await.unwrap(), want);
    }
    assert_eq!(sub.next_offset(), 7);
    tier.close().await;
}

#[tokio::test]
async fn a_subscriber_below_the_retained_start_gets_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    let tier = open(small_config(dir.path())).await;
    let t = topic("gone");
    append_records(&tier, &t, 0, 10, 5).await;
    tier.rotate(&t).await.unwrap();
    append_records(&tier, &t, 10, 2, 2).await;
    tier.run_retention(std::time::SystemTime::now() + Duration::from_secs(1 << 30), &|_| true).unwrap();
    let mut sub = tier.subscribe(&t, 0).unwrap();
    assert_eq!(sub.next().await.unwrap_err().kind(), ErrorKind::Trimmed);
    let mut sub = tier.subscribe(&t, 10).unwrap();
    assert_eq!(sub.next().await.unwrap().offset, 10);
    assert_eq!(tier.range(&t).await.unwrap().start, 10);
    tier.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_wakes_a_waiting_subscriber_after_it_delivered_everything_committed() {
    let dir = tempfile::tempdir().unwrap();
    let tier = open(small_config(dir.path())).await;
    let t = topic("closing");
    let written = append_records(&tier, &t, 0, 10, 5).await;
    let mut waiting = tier.subscribe(&t, 0).unwrap();
    let mut late = tier.subscribe(&t, 3).unwrap();
    let (drained_tx, drained_rx) = tokio::sync::oneshot::channel();
    let consumer = tokio::spawn(async move {
        let mut got = Vec::new();
        for _ in 0..10 {
            got.push(waiting.next().await.unwrap());
        }
        drained_tx.send(()).unwrap();
        // Nothing more is committed: this waits until the tier closes.
        (got, waiting.next().await)
    });
    drained_rx.await.unwrap();
    tier.close().await;
    let (got, last) = tokio::time::timeout(Duration::from_secs(10), consumer).await.unwrap().unwrap();
    assert_eq!(got, written);
    assert_eq!(last.unwrap_err().kind(), ErrorKind::Closed);
    // A subscriber that had not read yet still gets every committed record, then the end.
    for r in &written[3..] {
        assert_eq!(&late.next().await.unwrap(), r);
    }
    let err = tokio::time::timeout(Duration::from_secs(10), late.next()).await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
}
