//! The store's injected wall clock (`StoreBuilder::clock`): the WAL's seal times and the
//! retention "now" come from it, and a clock going backwards deletes nothing young.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tier_core::OffsetRange;
use tier_core::clock::{Clock, ManualClock};
use tier_hot::HotConfig;
use tier_router::{NewRecord, RouterConfig, TieredStore};

fn start() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(4_000_000_000)
}

#[tokio::test]
async fn retention_follows_the_injected_clock_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(start()));
    let mut hot = HotConfig::new(dir.path().join("hot"));
    hot.retention_time = Duration::from_secs(3600);
    let store = TieredStore::builder()
        .hot(hot)
        .router(RouterConfig::default())
        .background(false)
        .clock(Arc::clone(&clock))
        .open()
        .await
        .unwrap();
    let topic = store.topic("clocked").await.unwrap();
    let name = topic.name().clone();
    let records = |from: i64| (from..from + 10).map(|i| NewRecord::new(i, format!("r{i}"))).collect();
    assert_eq!(topic.append(records(0)).await.unwrap(), OffsetRange::new(0, 10));
    let sealed = store.wal().rotate(&name).await.unwrap().unwrap();
    assert_eq!(sealed.sealed_at, start(), "the seal time is the store's clock's");
    assert_eq!(topic.append(records(10)).await.unwrap(), OffsetRange::new(10, 20));

    // A day back: the segment is young, nothing goes.
    clock.rewind(Duration::from_secs(24 * 3600));
    assert_eq!(store.clock().now(), start() - Duration::from_secs(24 * 3600));
    assert!(store.run_retention_now(store.clock().now()).await.unwrap().is_empty());
    assert_eq!(store.wal().sealed_segments(&name), vec![sealed.clone()]);

    // Past the retention time: the committed segment goes.
    clock.set(start() + Duration::from_secs(3600));
    let deleted = store.run_retention_now(store.clock().now()).await.unwrap();
    assert_eq!(deleted, vec![sealed]);
    assert!(store.wal().sealed_segments(&name).is_empty());
    assert_eq!(clock.now(), store.clock().now());
    store.close().await;
}
