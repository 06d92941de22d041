//! The router over a warm tier in sentinel mode (tier-testkit's [`ValkeySentinel`]: a
//! primary, two replicas, three sentinels), the primary killed while a producer appends
//! and a replica promoted by the sentinels, under both warm failure policies. Nothing
//! acknowledged is lost: every acknowledged record is read back with its payload, warm
//! holds what the WAL holds once the store was reopened (recovery gives warm what a
//! failover may have taken from it), and with the WAL then lost the records come back
//! from warm alone.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(feature = "warm")]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::warm_config;
use tier_core::{ErrorKind, OffsetRange, ReadLimit, TierExt, TopicName};
use tier_hot::{FsyncPolicy, HotConfig};
use tier_router::{NewRecord, RouterConfig, TieredStore, Topic, WarmBackend, WarmFailurePolicy};
use tier_testkit::servers::{FAILOVER_TIMEOUT, SENTINEL_SERVICE, ValkeySentinel};
use tier_warm::{Mode, WarmTier, WithoutReplicas};

async fn open(
    dir: &tempfile::TempDir,
    warm: Arc<WarmTier>,
    policy: WarmFailurePolicy,
) -> (TieredStore, Topic) {
    let mut router = RouterConfig::default();
    router.warm_failure_policy = policy;
    router.warm_retry_interval = Duration::from_millis(50);
    let store = TieredStore::builder()
        .hot(HotConfig::new(dir.path().join("hot")).with_fsync(FsyncPolicy::Never))
        .warm(warm as Arc<dyn WarmBackend>)
        .router(router)
        .background(false)
        .open()
        .await
        .unwrap();
    let topic = store.topic("t").await.unwrap();
    (store, topic)
}

/// Appends batches of 10 records (payload `a<n>-<i>`), one every 5 ms, until `count`
/// were acknowledged and `until` is set; returns each acknowledged range with its
/// payloads. A refused append (warm unreachable under `fail`) is not acknowledged and is
/// not sent again.
async fn produce(
    topic: &Topic,
    first: &mut u64,
    count: usize,
    until: &AtomicBool,
) -> Vec<(OffsetRange, Vec<String>)> {
    let mut acked = Vec::new();
    let started = Instant::now();
    while acked.len() < count || !until.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let n = *first;
        *first += 1;
        let payloads: Vec<String> = (0..10).map(|i| format!("a{n}-{i}")).collect();
        let records = payloads.iter().map(|p| NewRecord::new(1000 + n as i64, p.clone())).collect();
        match topic.append(records).await {
            Ok(range) => acked.push((range, payloads)),
            Err(e) if e.kind() == ErrorKind::Unavailable && started.elapsed() < FAILOVER_TIMEOUT => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("append {n}: {}", e.report()),
        }
    }
    acked
}

async fn flush_eventually(topic: &Topic) {
    let deadline = Instant::now() + FAILOVER_TIMEOUT;
    loop {
        match topic.flush().await {
            Ok(()) => return,
            Err(e) => assert!(Instant::now() < deadline, "warm never caught up: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Where acknowledged records are read back from.
enum From<'a> {
    Wal(&'a TieredStore),
    Warm(&'a WarmTier),
}

async fn assert_acked(from: From<'_>, acked: &[(OffsetRange, Vec<String>)], what: &str) {
    let name = TopicName::new("t").unwrap();
    for (range, payloads) in acked {
        let got = match &from {
            From::Wal(store) => store.wal().read(&name, range.start, range.end, ReadLimit::unbounded()).await,
            From::Warm(warm) => warm.read(&name, range.start, range.end, ReadLimit::unbounded()).await,
        };
        let got: Vec<String> =
            got.unwrap().iter().map(|r| String::from_utf8_lossy(&r.payload).into_owned()).collect();
        assert_eq!(&got, payloads, "{what}: acknowledged {range}");
    }
}

async fn failover_during_produce(policy: WarmFailurePolicy) {
    let mut sentinels = ValkeySentinel::start().await.expect("a Valkey sentinel deployment");
    let mut config = warm_config(&sentinels.sentinel_urls()[0], &format!("router-{policy:?}:"));
    config.urls = sentinels.sentinel_urls();
    config.mode = Mode::Sentinel { service_name: SENTINEL_SERVICE.to_owned() };
    let warm = Arc::new(WarmTier::open(config, WithoutReplicas::Refuse).await.unwrap());
    let dir = tempfile::tempdir().unwrap();
    let (store, topic) = open(&dir, warm.clone(), policy).await;

    let mut n = 0;
    let mut acked = produce(&topic, &mut n, 20, &AtomicBool::new(true)).await;
    let old = sentinels.kill_primary().await.unwrap();
    // The producer carries on while the sentinels fail the primary over, and after.
    let failed_over = AtomicBool::new(false);
    let failover = async {
        let promoted = sentinels.wait_failover(old).await;
        failed_over.store(true, Ordering::SeqCst);
        promoted
    };
    let (more, promoted) = tokio::join!(produce(&topic, &mut n, 20, &failed_over), failover);
    assert_ne!(promoted.unwrap(), old);
    acked.extend(more);
    acked.extend(produce(&topic, &mut n, 20, &failed_over).await);
    flush_eventually(&topic).await;
    assert_acked(From::Wal(&store), &acked, "the WAL").await;
    drop(topic);
    store.close().await;

    // A reopen gives warm whatever the failover took from it.
    let (store, topic) = open(&dir, warm.clone(), policy).await;
    flush_eventually(&topic).await;
    assert_acked(From::Warm(&warm), &acked, "warm after the failover and a reopen").await;
    drop(topic);
    store.close().await;

    // The WAL lost: recovery replays warm, and everything acknowledged is there.
    std::fs::remove_dir_all(dir.path().join("hot")).unwrap();
    let (store, topic) = open(&dir, warm.clone(), policy).await;
    assert_acked(From::Wal(&store), &acked, "the WAL rebuilt from warm").await;
    drop(topic);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_during_produce_loses_nothing_acknowledged_under_fail() {
    failover_during_produce(WarmFailurePolicy::Fail).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_during_produce_loses_nothing_acknowledged_under_degrade() {
    failover_during_produce(WarmFailurePolicy::Degrade).await;
}
