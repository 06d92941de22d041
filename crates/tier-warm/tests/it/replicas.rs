//! The replica check when the warm tier opens (`WarmTier::open`): a Valkey that has
//! never had a replica cannot confirm a single append under `wait_replicas >= 1`, and
//! says so in one line at open; a replica that left (and may come back) is a warning.

use crate::common;

use common::{batch, config, topic};
use tier_core::{ErrorKind, Tier};
use tier_testkit::servers::ValkeyPair;
use tier_warm::{ReplicaCheck, WarmTier, WithoutReplicas};

#[tokio::test]
async fn a_primary_that_never_had_a_replica_refuses_to_open_and_says_what_to_set() {
    let mut single = ValkeyPair::start_primary_only().await.expect("a Valkey primary");
    eprintln!("running against {}", single.server_kind());
    let url = single.primary_url();

    let err = WarmTier::open(config(&url, "alone:"), WithoutReplicas::Refuse).await.expect_err("no replica");
    let message = err.to_string();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{message}");
    assert!(message.contains("warm.wait_replicas = 1"), "{message}");
    assert!(message.contains("has no replica and has had none"), "{message}");
    assert!(message.contains("set `warm.wait_replicas = 0` in tierlog.toml"), "{message}");
    assert!(message.contains(&format!("127.0.0.1:{}", single.primary_port())), "{message}");
    assert!(!message.contains('\n'), "one line: {message}");

    // Warned about, it opens; and every append fails as the check said it would.
    let warned = WarmTier::open(config(&url, "alone:"), WithoutReplicas::Warn).await.expect("opens");
    assert!(matches!(warned.check_replicas().await.unwrap(), ReplicaCheck::NoReplication { .. }));
    let err = warned.append(&topic("alone"), batch(0, 1, "a")).await.expect_err("no replica confirms");
    assert!(err.to_string().contains("only 0 of 1 replicas acknowledged"), "{err}");

    // What the message says to set: the primary alone confirms.
    let mut without = config(&url, "alone:");
    without.wait_replicas = 0;
    let tier = WarmTier::open(without, WithoutReplicas::Refuse).await.expect("opens without WAIT");
    tier.append(&topic("alone-ok"), batch(0, 2, "a")).await.expect("appended");

    // Or start a replica.
    single.start_replica().await.expect("a replica starts");
    let tier = WarmTier::open(config(&url, "alone:"), WithoutReplicas::Refuse).await.expect("opens");
    assert_eq!(tier.check_replicas().await.unwrap(), ReplicaCheck::Enough);
    tier.append(&topic("replicated"), batch(0, 2, "a")).await.expect("confirmed");
}

#[tokio::test]
async fn fewer_replicas_than_wanted_after_one_was_attached_is_a_warning() {
    let mut pair = ValkeyPair::start().await.expect("a Valkey primary and replica");
    let url = pair.primary_url();
    let mut two = config(&url, "fewer:");
    two.wait_replicas = 2;
    let tier = WarmTier::open(two, WithoutReplicas::Refuse).await.expect("one of two replicas: opens");
    match tier.check_replicas().await.unwrap() {
        ReplicaCheck::Fewer { message } => {
            assert!(message.contains("has 1 replica online"), "{message}");
            assert!(message.contains("until 2 replicas acknowledge them"), "{message}");
        }
        other => panic!("expected Fewer, got {other:?}"),
    }

    // The replica goes away: the primary has had one, so it may come back.
    pair.stop_replica().await;
    pair.wait_connected_replicas(0).await.expect("the primary notices");
    let tier = WarmTier::open(config(&url, "fewer:"), WithoutReplicas::Refuse).await.expect("opens");
    match tier.check_replicas().await.unwrap() {
        ReplicaCheck::Fewer { message } => assert!(message.contains("has 0 replicas online"), "{message}"),
        other => panic!("expected Fewer, got {other:?}"),
    }
    pair.start_replica().await.expect("the replica is back");
    assert_eq!(tier.check_replicas().await.unwrap(), ReplicaCheck::Enough);
}
