//! Warm trimming when WAL retention outruns it, and the offset reservation that keeps
//! acknowledged offsets from being reused after a lost WAL and a crash.
#![cfg(all(feature = "warm", feature = "cold"))]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::time::{Duration, SystemTime};

use common::{ColdOn, Deployment, Tiers, append_range, r, rec, slices};
use tier_core::StartPosition;
use tier_router::Source;

/// With cold enabled and retention deleting exported segments before the WAL holds
/// `max_cached_closed_segments` sealed ones, warm is trimmed to the WAL's start (never
/// beyond cold's end), and a lost WAL still comes back whole.
#[tokio::test]
async fn warm_is_trimmed_to_the_wal_start_when_retention_outruns_it() {
    let d = Deployment::new(Tiers::HotWarmCold, ColdOn::Local).await;
    let store = d.open(&[]).await;
    let topic = store.topic("trim").await.unwrap();
    let name = topic.name().clone();
    append_range(&topic, 0, 100, 10).await;
    store.wal().rotate(&name).await.unwrap();
    append_range(&topic, 100, 200, 10).await;
    assert_eq!(store.export_now("trim").await.unwrap().len(), 2);
    let later = SystemTime::now() + Duration::from_secs(48 * 3600);
    let deleted: Vec<_> = store.run_retention_now(later).await.unwrap().iter().map(|s| s.range).collect();
    assert_eq!(deleted, vec![r(0, 100), r(100, 200)]);
    append_range(&topic, 200, 300, 10).await;
    assert!(store.wal().sealed_segments(&name).len() < d.router.max_cached_closed_segments);

    let trimmed = store.trim_warm_now().await.unwrap();
    assert_eq!(trimmed, vec![(name.clone(), 200)]);
    let ranges = topic.ranges().await.unwrap();
    assert_eq!(ranges.hot, r(200, 300));
    assert_eq!(ranges.cold, Some(r(0, 200)));
    assert_eq!(ranges.warm, Some(r(200, 300)), "warm starts at the WAL's start");
    store.close().await;

    // The WAL is lost: cold and warm still hold every record.
    std::fs::remove_dir_all(d.hot_dir()).unwrap();
    let store = d.open(&["trim"]).await;
    let report = store.recover_topic("trim").await.unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.replayed, Some(r(200, 300)), "{report:?}");
    assert_eq!(report.next_offset, 300);
    let topic = store.topic("trim").await.unwrap();
    let mut stream = topic.reader_with_source(StartPosition::Earliest).await.unwrap();
    assert_eq!(
        slices(&mut stream, 0, 300).await.unwrap(),
        vec![(Source::Cold, r(0, 200)), (Source::Hot, r(200, 300))]
    );
    store.close().await;
}

/// Without cold, warm is the only copy of what retention deleted from the WAL: with
/// fewer than `max_cached_closed_segments` sealed segments nothing is trimmed.
#[tokio::test]
async fn without_cold_warm_keeps_what_the_wal_no_longer_holds() {
    let d = Deployment::new(Tiers::HotWarm, ColdOn::Local).await;
    let store = d.open(&[]).await;
    let topic = store.topic("nocold").await.unwrap();
    let name = topic.name().clone();
    append_range(&topic, 0, 100, 10).await;
    store.wal().rotate(&name).await.unwrap();
    append_range(&topic, 100, 200, 10).await;
    store.wal().rotate(&name).await.unwrap();
    let later = SystemTime::now() + Duration::from_secs(48 * 3600);
    let deleted: Vec<_> = store.run_retention_now(later).await.unwrap().iter().map(|s| s.range).collect();
    assert_eq!(deleted, vec![r(0, 100), r(100, 200)]);
    append_range(&topic, 200, 300, 10).await;
    assert_eq!(store.trim_warm_now().await.unwrap(), vec![]);
    let ranges = topic.ranges().await.unwrap();
    assert_eq!(ranges.hot, r(200, 300));
    assert_eq!(ranges.warm, Some(r(0, 300)));
    store.close().await;
}

/// Hot+cold: the WAL is deleted and the process is killed (no close, so no close-time
/// checkpoint). Acknowledged offsets after the last checkpoint are reported as possibly
/// lost and never reused.
#[tokio::test]
async fn a_lost_wal_and_a_kill_never_reuse_acknowledged_offsets() {
    let d = Deployment::new(Tiers::HotCold, ColdOn::Local).await;
    let store = d.open(&[]).await;
    let topic = store.topic("kill").await.unwrap();
    append_range(&topic, 0, 100, 10).await;
    assert_eq!(store.export_now("kill").await.unwrap().len(), 1);
    append_range(&topic, 100, 200, 10).await;
    store.checkpoint().await.unwrap();
    append_range(&topic, 200, 300, 10).await;
    assert_eq!(topic.high_watermark(), 300, "[0, 300) acknowledged");
    std::fs::remove_dir_all(d.hot_dir()).unwrap();
    // Simulated kill: nothing of the store's shutdown runs (no checkpoint, no reservation
    // lowered); its locks go, as a dead process's do.
    store.abort().await;
    drop(topic);
    drop(store);

    let store = d.open(&["kill"]).await;
    let report = store.recover_topic("kill").await.unwrap();
    assert_eq!(report.cold, Some(r(0, 100)));
    assert_eq!(report.lost, vec![r(100, 200)], "known acknowledged (checkpoint): {report:?}");
    assert_eq!(report.maybe_lost.len(), 1, "{report:?}");
    let maybe = report.maybe_lost[0];
    assert_eq!(maybe.start, 200, "{report:?}");
    assert!(maybe.end >= 300, "every acknowledged offset is covered: {report:?}");
    assert_eq!(report.next_offset, maybe.end);
    assert!(!report.is_clean());
    let topic = store.topic("kill").await.unwrap();
    let next = topic.append(vec![rec(0)]).await.unwrap();
    assert_eq!(next, r(maybe.end, maybe.end + 1), "no acknowledged offset is reused");

    // A clean shutdown lowers the reservation: the next recovery of a lost WAL is exact.
    let acked_end = next.end;
    store.close().await;
    std::fs::remove_dir_all(d.hot_dir()).unwrap();
    let store = d.open(&["kill"]).await;
    let report = store.recover_topic("kill").await.unwrap();
    assert_eq!(report.maybe_lost, vec![], "{report:?}");
    assert_eq!(report.lost, vec![r(100, acked_end)], "{report:?}");
    assert_eq!(report.next_offset, acked_end);
    store.close().await;
}

/// Reservations are written ahead in chunks, so many appends cost few writes, and the
/// reservation is always beyond every acknowledged offset.
#[tokio::test]
async fn the_reservation_stays_ahead_of_every_acknowledged_offset() {
    let d = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    let store = d.open(&[]).await;
    let topic = store.topic("res").await.unwrap();
    let file = d.dir.path().join("router").join("res.reserved");
    // `<offset> <boot id> <durable|lazy>`.
    let reserved = || {
        let text = std::fs::read_to_string(&file).unwrap();
        text.split_whitespace().next().unwrap().parse::<u64>().unwrap()
    };
    append_range(&topic, 0, 10, 10).await;
    let first = reserved();
    assert!(first >= 10 + 1024, "a first chunk of at least 1024: {first}");
    append_range(&topic, 10, 5000, 50).await;
    let now = reserved();
    assert!(now >= 5000, "{now}");
    assert!(now > first, "a new reservation once the first was used up");
    store.close().await;
    assert_eq!(reserved(), 5000, "close lowers the reservation to the commit point");
}

/// Per-topic retention and warm trimming touch that topic alone: another topic's
/// exported segments stay in the WAL and its warm copy stays whole.
#[tokio::test]
async fn per_topic_retention_and_trim_leave_other_topics_alone() {
    let d = Deployment::new(Tiers::HotWarmCold, ColdOn::Local).await;
    let store = d.open(&[]).await;
    let mut names = Vec::new();
    for name in ["mine", "theirs"] {
        let topic = store.topic(name).await.unwrap();
        append_range(&topic, 0, 100, 10).await;
        store.wal().rotate(topic.name()).await.unwrap();
        append_range(&topic, 100, 200, 10).await;
        assert_eq!(store.export_now(name).await.unwrap().len(), 2);
        names.push(topic);
    }
    let later = SystemTime::now() + Duration::from_secs(48 * 3600);
    let deleted = store.run_topic_retention_now("mine", later).await.unwrap();
    assert_eq!(
        deleted.iter().map(|s| (s.topic.as_str(), s.range)).collect::<Vec<_>>(),
        vec![("mine", r(0, 100)), ("mine", r(100, 200))]
    );
    assert_eq!(store.trim_topic_warm_now("mine").await.unwrap(), Some(200));
    let (mine, theirs) = (names[0].ranges().await.unwrap(), names[1].ranges().await.unwrap());
    assert_eq!(mine.hot.start, 200);
    assert_eq!(theirs.hot, r(0, 200), "the other topic's WAL is untouched");
    assert_eq!(theirs.warm, Some(r(0, 200)), "the other topic's warm copy is untouched");
    store.close().await;
}
