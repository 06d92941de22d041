//! A cut the WAL made at an open whose recovery failed must still be judged by the next
//! recovery. Under `fsync = never`, records appended while warm was down are in the WAL
//! alone; a power cut takes them; the next open cuts the WAL's torn tail and fails (warm
//! is unreachable and the WAL cannot vouch for its end). Opened again once warm answers,
//! the WAL looks whole and ends below what was acknowledged: recovery must still report
//! the offsets the cut may have taken, and never hand them out again (simulation seed
//! 64000015, generator 6).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(all(feature = "warm", feature = "cold"))]

mod common;

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
    let mut router = RouterConfig::default();
    router.warm_failure_policy = WarmFailurePolicy::Degrade;
    TieredStore::builder()
        .hot(hot(dir))
        .router(router)
        .background(false)
        .topics([TopicName::new(T).unwrap()])
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
