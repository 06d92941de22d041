//! What a `WAIT` confirms. Valkey's `WAIT` counts the replicas that acknowledged the
//! *calling connection's* last write; on a connection that wrote nothing it counts every
//! connected replica at once. So an identical retry, whose `XADD` the stream refuses, is
//! confirmed only by a `WAIT` pipelined after a write of its own on the same connection.
//! Each test runs its own `ValkeyPair` whose replication link it cuts (a partition: the
//! primary still counts the replica as connected, the replica receives nothing).

use crate::common;

use common::{batch, config, raw_client, topic};
use fred::prelude::{KeysInterface, StreamsInterface};
use tier_core::{ErrorKind, OffsetRange, Tier};
use tier_testkit::servers::ValkeyPair;
use tier_warm::WarmTier;

/// A batch whose first `WAIT` fell short is retried through a fresh connection (a
/// reconnected client, a restarted router) while the replica still receives nothing:
/// the retry must not be confirmed. After a failover to that replica the batch is gone,
/// which is what a false confirmation would have hidden.
#[tokio::test]
async fn an_identical_retry_on_a_fresh_connection_is_not_confirmed_without_the_replica() {
    let mut pair = ValkeyPair::start_with_link_proxy().await.expect("a Valkey primary and replica");
    eprintln!("running against {}", pair.server_kind());
    let tier = WarmTier::connect(config(&pair.primary_url(), "confirm:")).await.expect("connect");
    let t = topic("fresh-retry");
    let key = tier.stream_key(&t);
    tier.append(&t, batch(0, 3, "a")).await.expect("the first batch is confirmed");

    pair.cut_replication_link().expect("cut the link");
    let b = batch(3, 2, "b");
    let err = tier.append(&t, b.clone()).await.expect_err("the replica receives nothing");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("only 0 of 1 replicas acknowledged"), "{err}");

    // The identical retry, through another client: its connection wrote nothing.
    let fresh = WarmTier::connect(config(&pair.primary_url(), "confirm:")).await.expect("connect");
    let err = fresh.append(&t, b.clone()).await.expect_err("the retry must not be confirmed");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("only 0 of 1 replicas acknowledged"), "{err}");
    // And through the first client too (its connection's last write is still unacknowledged).
    let err = tier.append(&t, b.clone()).await.expect_err("the retry must not be confirmed");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");

    // The primary holds the batch; the replica never got it. Fail over to the replica.
    assert_eq!(fresh.range(&t).await.expect("range"), OffsetRange::new(0, 5));
    pair.stop_primary().await;
    pair.promote_replica().await.expect("the replica is promoted");
    let promoted = raw_client(&pair.replica_url()).await;
    let len: u64 = promoted.xlen(key.as_str()).await.expect("XLEN");
    assert_eq!(len, 1, "the promoted replica holds only the first batch");
    let mut after = config(&pair.replica_url(), "confirm:");
    after.wait_replicas = 0;
    let after = WarmTier::connect(after).await.expect("connect to the promoted replica");
    assert_eq!(after.range(&t).await.expect("range"), OffsetRange::new(0, 3), "the batch is gone");
}

/// Once the link is back, the identical retry through a fresh connection is confirmed,
/// and the stream holds the batch once.
#[tokio::test]
async fn an_identical_retry_on_a_fresh_connection_is_confirmed_once_the_replica_has_it() {
    let pair = ValkeyPair::start_with_link_proxy().await.expect("a Valkey primary and replica");
    let tier = WarmTier::connect(config(&pair.primary_url(), "confirm:")).await.expect("connect");
    let t = topic("retry-after-heal");
    tier.append(&t, batch(0, 3, "a")).await.expect("the first batch is confirmed");

    pair.cut_replication_link().expect("cut the link");
    let b = batch(3, 2, "b");
    let err = tier.append(&t, b.clone()).await.expect_err("the replica receives nothing");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");

    pair.restore_replication_link().expect("restore the link");
    let mut fresh_config = config(&pair.primary_url(), "confirm:");
    // Long enough for the replica to catch up within one WAIT: no retry loop needed.
    fresh_config.wait_timeout = std::time::Duration::from_secs(5);
    let fresh = WarmTier::connect(fresh_config).await.expect("connect");
    fresh.append(&t, b).await.expect("the retry is confirmed once the replica has the batch");
    assert_eq!(fresh.range(&t).await.expect("range"), OffsetRange::new(0, 5));
    let raw = raw_client(&pair.replica_url()).await;
    let len: u64 = raw.xlen(tier.stream_key(&t).as_str()).await.expect("XLEN");
    assert_eq!(len, 2, "the replica holds both batches, each once");
    // The confirming write touched nothing but the topic's marker.
    let marker: Option<String> = raw.get(tier.topic_key(&t).as_str()).await.expect("GET");
    assert_eq!(marker.as_deref(), Some("1"));
}
