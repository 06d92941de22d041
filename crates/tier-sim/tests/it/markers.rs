//! The warm topic marker against the simulation's warm stand-in, which models what
//! `MemoryTier` cannot: a write whose `WAIT` falls short lands on the primary only, and a
//! failover to the replica takes it away.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use std::sync::Arc;
use std::time::Duration;

use tier_core::{ErrorKind, TopicName};
use tier_hot::{FsyncPolicy, HotConfig};
use tier_router::{RouterConfig, TieredStore, WarmBackend, WarmFailurePolicy};
use tier_sim::warm::SimWarm;

async fn open(dir: &std::path::Path, warm: &Arc<SimWarm>) -> Result<TieredStore, tier_core::TierError> {
    let hot = HotConfig::new(dir.join("hot")).with_fsync(FsyncPolicy::Always);
    let mut router = RouterConfig::default();
    router.warm_failure_policy = WarmFailurePolicy::Degrade;
    router.warm_retry_interval = Duration::from_millis(20);
    TieredStore::builder()
        .hot(hot)
        .router(router)
        .background(false)
        .topics([TopicName::new("t").unwrap()])
        .warm(warm.clone())
        .open()
        .await
}

/// A new topic's first open fails on a `WAIT` that falls short: the marker is on warm's
/// primary only. With the state directory lost next, a later open finds that marker (and
/// fences the topic, nothing local vouching for its end) — and must confirm it before the
/// topic opens: otherwise a failover takes it away while offsets are handed out, and a
/// lost data directory after that restarts the topic at 0 — sim seed 200016869.
#[tokio::test]
async fn a_marker_found_on_the_primary_is_confirmed_before_the_topic_opens() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(SimWarm::new());
    let topic = TopicName::new("t").unwrap();
    warm.set_wait_short(true);
    let err = open(dir.path(), &warm).await.expect_err("a new topic needs its marker confirmed");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(warm.topic_recorded(&topic).await.unwrap(), "the marker is on the primary");
    std::fs::remove_dir_all(dir.path().join("router")).unwrap();

    // Still short: finding the marker is not enough to open.
    let err = open(dir.path(), &warm).await.expect_err("the marker found is not confirmed yet");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    warm.set_wait_short(false);
    let store = open(dir.path(), &warm).await.unwrap();
    assert!(store.recover_topic("t").await.unwrap().end_unknown, "a marker with nothing local fences");
    warm.fail_over();
    assert!(warm.topic_recorded(&topic).await.unwrap(), "the failover took the marker the topic opened with");
    store.close().await;
}
