//! A cut the WAL made at an open whose recovery failed must still be judged by the next
//! recovery. Under `fsync = never`, records appended while warm was down are in the WAL
//! alone; a power cut takes them; the next open cuts the WAL's torn tail and fails (warm
//! is unreachable and the WAL cannot vouch for its end). Opened again once warm answers,
//! the WAL looks whole and ends below what was acknowledged: recovery must still report
//! the offsets the cut may have taken, and never hand them out again (simulation seed
//! 64000015, generator 6). The same holds for the losses a recovery found when its open
//! failed afterwards: they are reported again even when the state directory that kept
//! them is lost.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(all(feature = "warm", feature = "cold"))]

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::{append_range, r};
use tier_cold::{ColdConfig, ColdTier};
use tier_core::{TierError, TopicName};
use tier_hot::layout::segment_file_name;
use tier_hot::{FsyncPolicy, HotConfig};
use tier_router::{ColdBackend, RouterConfig, TieredStore, WarmBackend, WarmFailurePolicy};
use tier_testkit::{FaultyTier, MemoryTier};

const T: &str = "t";

fn hot(dir: &Path) -> HotConfig {
    let mut hot = HotConfig::new(dir.join("hot")).with_fsync(FsyncPolicy::Never);
    hot.segment_bytes = 64 * 1024;
    hot.segment_age = Duration::from_secs(3600);
    hot
}

async fn open(
    dir: &Path,
    warm: &Arc<FaultyTier<MemoryTier>>,
    cold: &Arc<ColdTier>,
) -> Result<TieredStore, TierError> {
    open_topics(dir, warm, cold, &[T]).await
}

async fn open_topics(
    dir: &Path,
    warm: &Arc<FaultyTier<MemoryTier>>,
    cold: &Arc<ColdTier>,
    topics: &[&str],
) -> Result<TieredStore, TierError> {
    let mut router = RouterConfig::default();
    router.warm_failure_policy = WarmFailurePolicy::Degrade;
    TieredStore::builder()
        .hot(hot(dir))
        .router(router)
        .background(false)
        .topics(topics.iter().map(|t| TopicName::new(t).unwrap()))
        .warm(warm.clone() as Arc<dyn WarmBackend>)
        .cold(cold.clone() as Arc<dyn ColdBackend>)
        .open()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_made_by_an_open_whose_recovery_failed_is_reported_by_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let cold = Arc::new(ColdTier::open(ColdConfig::local(dir.path().join("cold"))).unwrap());
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    let store = open(dir.path(), &warm, &cold).await.unwrap();
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 5, 5).await;
    drop(topic);
    store.close().await;
    let segment = dir.path().join("hot").join(T).join(segment_file_name(0));
    let durable = std::fs::metadata(&segment).unwrap().len();

    // Warm goes down; [5, 10) is acknowledged by the WAL alone (degraded), never fsynced.
    let store = open(dir.path(), &warm, &cold).await.unwrap();
    let topic = store.topic(T).await.unwrap();
    warm.fail_fraction(1.0);
    append_range(&topic, 5, 10, 5).await;
    drop(topic);
    store.abort().await; // the process dies
    // The power cut took the unsynced tail but its first bytes.
    std::fs::OpenOptions::new().write(true).open(&segment).unwrap().set_len(durable + 30).unwrap();

    let Err(refused) = open(dir.path(), &warm, &cold).await else { panic!("warm is needed and unreachable") };
    assert_eq!(refused.kind(), tier_core::ErrorKind::Unavailable, "{refused}");

    warm.clear();
    let store = open(dir.path(), &warm, &cold).await.unwrap();
    let reports = store.recovery_reports().await;
    assert_eq!(reports.len(), 1, "{reports:?}");
    let report = &reports[0];
    assert_eq!(report.hot, r(0, 5), "{report:?}");
    let reported: Vec<_> = report.lost.iter().chain(&report.maybe_lost).copied().collect();
    assert!(
        reported.iter().any(|x| x.start <= 5 && x.end >= 10),
        "the acknowledged [5, 10) the cut took is reported: {report:?}"
    );
    assert!(report.next_offset >= 10, "acknowledged offsets are never handed out again: {report:?}");
    let topic = store.topic(T).await.unwrap();
    let next = topic.append(vec![tier_router::NewRecord::new(1, b"x".to_vec())]).await.unwrap();
    assert!(next.start >= 10, "the next append lands past every acknowledged offset: {next:?}");
    drop(topic);
    store.close().await;
}

/// An open that fails after this topic's recovery finished (another topic's warm
/// unreachable), and the router's state directory lost next: the recovery found [0, 5)
/// maybe lost (a power cut took the WAL's every batch; the reservation was past them),
/// made the emptied WAL continue past them, and kept its report in the state directory.
/// The WAL's own copy of that report must outlive the open, so that the next recovery
/// reports the offsets again: nothing else says the WAL continues past a loss (simulation
/// seed 220023971, generator 13: [0, 12) gone, nothing reported).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losses_found_by_an_open_that_failed_outlive_the_state_directory() {
    const U: &str = "u";
    let dir = tempfile::tempdir().unwrap();
    let cold = Arc::new(ColdTier::open(ColdConfig::local(dir.path().join("cold"))).unwrap());
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    let store = open_topics(dir.path(), &warm, &cold, &[T, U]).await.unwrap();
    let t = store.topic(T).await.unwrap();
    // [0, 5) of `t` is acknowledged by the WAL alone (warm down, degraded), never fsynced.
    warm.fail_fraction(1.0);
    append_range(&t, 0, 5, 5).await;
    drop(t);
    store.abort().await; // the process dies
    // The power cut took every batch: the segment keeps its header only.
    let segment = dir.path().join("hot").join(T).join(segment_file_name(0));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len((tier_core::segment::HEADER_FIXED_LEN + T.len()) as u64)
        .unwrap();

    // `t` recovers (the WAL continues past what the cut may have taken); `u` cannot (its
    // warm is unreachable and its WAL holds nothing to continue from), so the open fails.
    warm.clear();
    warm.fail_topic(&TopicName::new(U).unwrap());
    let Err(refused) = open_topics(dir.path(), &warm, &cold, &[T, U]).await else {
        panic!("u's warm is down")
    };
    assert_eq!(refused.kind(), tier_core::ErrorKind::Unavailable, "{refused}");
    std::fs::remove_dir_all(dir.path().join("router")).unwrap();

    warm.clear();
    let store = open_topics(dir.path(), &warm, &cold, &[T, U]).await.unwrap();
    let reports = store.recovery_reports().await;
    let report = reports.iter().find(|r| r.topic.as_str() == T).unwrap();
    let reported: Vec<_> = report.lost.iter().chain(&report.maybe_lost).copied().collect();
    assert!(
        reported.iter().any(|x| x.start == 0 && x.end >= 5),
        "the acknowledged [0, 5) the cut took is reported again: {report:?}"
    );
    store.close().await;
}
