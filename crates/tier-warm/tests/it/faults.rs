//! The warm tier when servers fail: a stopped replica, a stopped and restarted primary.
//! Each test runs its own `ValkeyPair`.

// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::time::{Duration, Instant};

use common::{batch, config, topic};
use tier_core::{ErrorKind, OffsetRange, ReadLimit, Tier, TierError, TierExt};
use tier_testkit::servers::ValkeyPair;
use tier_warm::WarmTier;

/// Retries `op` until it succeeds or `limit` passes, returning the last error then.
async fn eventually<T, F, Fut>(limit: Duration, mut op: F) -> Result<T, TierError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, TierError>>,
{
    let deadline = Instant::now() + limit;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

#[tokio::test]
async fn too_few_replicas_is_unavailable_until_the_replica_returns() {
    let mut pair = ValkeyPair::start().await.expect("a Valkey primary and replica");
    eprintln!("running against {}", pair.server_kind());
    let tier = WarmTier::connect(config(&pair.primary_url(), "faults:")).await.unwrap();
    let t = topic("replica");
    tier.append(&t, batch(0, 3, "a")).await.unwrap();

    pair.stop_replica().await;
    let started = Instant::now();
    let b = batch(3, 2, "b");
    let err = tier.append(&t, b.clone()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("only 0 of 1 replicas acknowledged"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());

    pair.start_replica().await.expect("replica restarts");
    // The retry of the same batch is the idempotent path: it succeeds once the replica
    // acknowledges, and the batch is stored once.
    eventually(Duration::from_secs(15), || tier.append(&t, b.clone())).await.unwrap();
    tier.append(&t, batch(5, 1, "c")).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 6));
    let records = tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(records.iter().map(|r| r.offset).collect::<Vec<_>>(), (0..6).collect::<Vec<_>>());
}

#[tokio::test]
async fn primary_outage_fails_fast_and_the_client_reconnects() {
    let mut pair = ValkeyPair::start().await.expect("a Valkey primary and replica");
    eprintln!("running against {}", pair.server_kind());
    let tier = WarmTier::connect(config(&pair.primary_url(), "faults:")).await.unwrap();
    let t = topic("before");
    tier.append(&t, batch(0, 3, "a")).await.unwrap();

    pair.stop_primary().await;
    let started = Instant::now();
    let err = tier.append(&t, batch(3, 1, "b")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let err = tier.range(&topic("uncached")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let err = tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "outage errors took {:?}", started.elapsed());

    // Connecting a new tier during the outage fails within the connect timeout.
    let started = Instant::now();
    let err = WarmTier::connect(config(&pair.primary_url(), "faults:")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(started.elapsed() < Duration::from_secs(3), "connect took {:?}", started.elapsed());

    pair.restart_primary().await.expect("primary restarts");
    // The same client reconnects by itself; the restarted primary kept nothing.
    let fresh = topic("after");
    eventually(Duration::from_secs(15), || tier.append(&fresh, batch(0, 2, "c"))).await.unwrap();
    assert_eq!(tier.range(&fresh).await.unwrap(), OffsetRange::new(0, 2));
    assert_eq!(tier.read(&fresh, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap().len(), 2);
}

/// The topic marker (`record_topic`) is written like an append: confirmed by the replicas
/// (`Unavailable` while they are silent), idempotent, and not a stream: the topic's range
/// stays empty.
#[tokio::test]
async fn a_topic_marker_is_confirmed_by_the_replicas() {
    let mut pair = ValkeyPair::start().await.expect("a Valkey primary and replica");
    let tier = WarmTier::connect(config(&pair.primary_url(), "marker:")).await.unwrap();
    let (t, other) = (topic("marked"), topic("never-marked"));
    assert!(!tier.topic_recorded(&t).await.unwrap());
    tier.record_topic(&t).await.unwrap();
    tier.record_topic(&t).await.unwrap();
    assert!(tier.topic_recorded(&t).await.unwrap());
    assert!(!tier.topic_recorded(&other).await.unwrap());
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 0), "the marker is not the stream");
    assert_eq!(tier.topic_key(&t), "marker:marked:topic");

    pair.stop_replica().await;
    let err = tier.record_topic(&other).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("only 0 of 1 replicas acknowledged"), "{err}");
    pair.start_replica().await.expect("replica restarts");
    eventually(Duration::from_secs(15), || tier.record_topic(&other)).await.unwrap();
    assert!(tier.topic_recorded(&other).await.unwrap());
}
