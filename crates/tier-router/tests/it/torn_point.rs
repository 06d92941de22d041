//! A torn point: a power cut under `fsync = never` while a background seal's fsync is
//! held, with the next segment's data durable, leaves the sealed segment short of its
//! unsynced tail. Opening the WAL records the lost offsets as a gap (a `.gap` marker,
//! `docs/hot.md`, Recovery) — acknowledged records no longer in the WAL. Recovery must
//! report them when no other tier holds them, and when warm does, the exporter must
//! store warm's copy in cold rather than record the offsets lost there (simulation seeds
//! 60000004, 61000018, 61001156).
//!
//! The state is produced with tier-hot's `fault-injection` tools, without sleeps (as in
//! tier-hot's `tests/power_cut.rs`): the seal's fsync is held, the store closes (which
//! fsyncs the active segment), the power cut is taken once that fsync is done, and the
//! files are cut back to what was fsynced.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(all(feature = "warm", feature = "cold"))]

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::{append_range, r};
use futures::StreamExt;
use tier_cold::{ColdConfig, ColdTier};
use tier_core::{StartPosition, Tier, TopicName};
use tier_hot::faults::{self, FaultPoint};
use tier_hot::layout::segment_file_name;
use tier_hot::{FsyncPolicy, HotConfig};
use tier_router::{
    ColdBackend, NewRecord, RecoveryReport, RouterConfig, TieredStore, WarmBackend, WarmFailurePolicy,
};
use tier_testkit::{FaultyTier, MemoryTier};

const T: &str = "t";

fn name() -> TopicName {
    TopicName::new(T).unwrap()
}

fn hot_dir(dir: &Path) -> PathBuf {
    dir.join("hot")
}

/// 64 KiB segments, `fsync = never`; age rotation never fires during a test.
fn hot(dir: &Path) -> HotConfig {
    let mut hot = HotConfig::new(hot_dir(dir)).with_fsync(FsyncPolicy::Never);
    hot.segment_bytes = 64 * 1024;
    hot.segment_age = Duration::from_secs(3600);
    hot
}

type Warm = Arc<FaultyTier<MemoryTier>>;

async fn open(dir: &Path, warm: Option<Warm>, cold: &Arc<ColdTier>) -> TieredStore {
    let mut router = RouterConfig::default();
    router.warm_failure_policy = WarmFailurePolicy::Degrade;
    let mut b = TieredStore::builder()
        .hot(hot(dir))
        .router(router)
        .background(false)
        .topics([name()])
        .cold(cold.clone() as Arc<dyn ColdBackend>);
    if let Some(w) = warm {
        b = b.warm(w as Arc<dyn WarmBackend>);
    }
    b.open().await.unwrap()
}

async fn blocking(what: &str, f: impl FnOnce() + Send + 'static) {
    tokio::time::timeout(Duration::from_secs(30), tokio::task::spawn_blocking(f))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .unwrap();
}

/// Records [0, 5) appended and made durable by a clean close; then [5, 10) (only in the
/// page cache) and a batch over half a segment, [10, 20), which rotates: segment 0's seal
/// is held, the store closes (fsyncing segment 10) and the power cut is taken. Segment 0
/// comes back holding [0, 5) without its footer.
async fn torn_point(dir: &Path, warm: Option<Warm>, cold: &Arc<ColdTier>) {
    let hot = hot_dir(dir);
    faults::track_durability(&hot);
    let store = open(dir, warm.clone(), cold).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 0, 5, 5).await;
    drop(topic);
    store.close().await;

    faults::hold(&hot, FaultPoint::SealFsync);
    let store = open(dir, warm, cold).await;
    let topic = store.topic(T).await.unwrap();
    append_range(&topic, 5, 10, 5).await;
    let big: Vec<NewRecord> =
        (10..20).map(|o| NewRecord::new(1000 + 10 * o as i64, vec![b'x'; 8 * 1024])).collect();
    assert_eq!(topic.append(big).await.unwrap(), r(10, 20));
    drop(topic);
    let held = hot.clone();
    blocking("the seal reaching its fsync", move || faults::wait_held(&held, FaultPoint::SealFsync)).await;
    let closing = tokio::spawn(async move { store.close().await });
    let active = hot.join(T).join(segment_file_name(10));
    let len = std::fs::metadata(&active).unwrap().len();
    blocking("the active segment's fsync at close", move || faults::wait_durable(&active, len)).await;
    let cut = faults::power_cut(&hot);
    faults::release(&hot, FaultPoint::SealFsync);
    tokio::time::timeout(Duration::from_secs(30), closing).await.unwrap().unwrap();
    cut.apply().unwrap();
}

async fn report(store: &TieredStore) -> RecoveryReport {
    let reports = store.recovery_reports().await;
    assert_eq!(reports.len(), 1, "{reports:?}");
    reports[0].clone()
}

/// hot+cold: the torn point's records were acknowledged (the checkpoint written at the
/// clean close is past them) and no tier holds them: they are reported lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_point_no_tier_holds_is_reported_lost() {
    let dir = tempfile::tempdir().unwrap();
    let cold = Arc::new(ColdTier::open(ColdConfig::local(dir.path().join("cold"))).unwrap());
    torn_point(dir.path(), None, &cold).await;

    let store = open(dir.path(), None, &cold).await;
    assert_eq!(store.wal().gaps(name()), vec![r(5, 10)], "the WAL recorded the torn point");
    let report = report(&store).await;
    assert_eq!(report.hot, r(0, 20), "{report:?}");
    assert_eq!(report.lost, vec![r(5, 10)], "the torn point's acknowledged records: {report:?}");
    assert!(report.maybe_lost.is_empty(), "{report:?}");
    assert_eq!(report.next_offset, 20, "{report:?}");
    store.close().await;
}

/// hot+warm+cold: warm holds the torn point's records. Nothing is reported; while warm
/// cannot be asked the exporter stops before the torn point (recording it lost in cold
/// would lose warm's copy once warm trims), then stores warm's copy in cold; once warm
/// trimmed them they are read from cold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_point_warm_holds_is_exported_from_warm_not_recorded_lost_in_cold() {
    let dir = tempfile::tempdir().unwrap();
    let cold = Arc::new(ColdTier::open(ColdConfig::local(dir.path().join("cold"))).unwrap());
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    torn_point(dir.path(), Some(warm.clone()), &cold).await;

    let store = open(dir.path(), Some(warm.clone()), &cold).await;
    assert_eq!(store.wal().gaps(name()), vec![r(5, 10)], "the WAL recorded the torn point");
    let report = report(&store).await;
    assert!(report.is_clean(), "warm holds the torn point's records: {report:?}");
    assert_eq!(report.warm, Some(r(0, 20)), "{report:?}");

    warm.fail_fraction(1.0);
    store.wal().rotate(name()).await.unwrap();
    let err = store.export_sealed(name()).await.unwrap_err();
    assert_eq!(err.kind(), tier_core::ErrorKind::Unavailable, "{err}");
    assert_eq!(cold.range(&name()).await.unwrap(), r(0, 5), "the export stops before the torn point");
    assert_eq!(cold.continuation(&name()).await.unwrap(), 5, "nothing recorded lost in cold");
    warm.clear();
    store.export_now(T).await.unwrap();
    assert_eq!(cold.range(&name()).await.unwrap(), r(0, 20));
    assert_eq!(cold.continuation(&name()).await.unwrap(), 20);
    warm.inner().trim_before(&name(), 20);
    let topic = store.topic(T).await.unwrap();
    let mut reader = topic.reader(StartPosition::Offset(5)).await.unwrap();
    for want in 5..10 {
        let got = tokio::time::timeout(Duration::from_secs(10), reader.next()).await.unwrap().unwrap();
        let record = got.unwrap_or_else(|e| panic!("reading offset {want} from cold: {e}"));
        assert_eq!(record.offset, want);
        assert_eq!(record.payload, format!("r{want}").as_bytes());
    }
    drop(topic);
    store.close().await;
}

/// hot+warm+cold: as above, but the store is closed and opened again before warm goes
/// down. The open that finds the torn point is not the one that exports it: the WAL's
/// marker says it is a torn point, and the exporter still waits for warm's copy rather
/// than record the offsets lost in cold (simulation seed 67000739).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_point_recorded_by_an_earlier_open_still_waits_for_warm() {
    let dir = tempfile::tempdir().unwrap();
    let cold = Arc::new(ColdTier::open(ColdConfig::local(dir.path().join("cold"))).unwrap());
    let warm = Arc::new(FaultyTier::new(MemoryTier::new()));
    torn_point(dir.path(), Some(warm.clone()), &cold).await;
    let store = open(dir.path(), Some(warm.clone()), &cold).await;
    assert!(report(&store).await.is_clean());
    store.close().await;

    let store = open(dir.path(), Some(warm.clone()), &cold).await;
    assert_eq!(store.wal().gaps(name()), vec![r(5, 10)]);
    warm.fail_fraction(1.0);
    store.wal().rotate(name()).await.unwrap();
    let err = store.export_sealed(name()).await.unwrap_err();
    assert_eq!(err.kind(), tier_core::ErrorKind::Unavailable, "{err}");
    assert_eq!(cold.continuation(&name()).await.unwrap(), 5, "nothing recorded lost in cold");
    warm.clear();
    store.export_now(T).await.unwrap();
    assert_eq!(cold.range(&name()).await.unwrap(), r(0, 20));
    let topic = store.topic(T).await.unwrap();
    let mut reader = topic.reader(StartPosition::Offset(5)).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), reader.next()).await.unwrap().unwrap().unwrap();
    assert_eq!((got.offset, got.payload.as_ref()), (5, b"r5".as_ref()));
    drop(topic);
    store.close().await;
}
