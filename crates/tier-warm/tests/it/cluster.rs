//! The warm tier in cluster mode against a real Valkey Cluster (tier-testkit's
//! [`ValkeyCluster`]: three primaries with a replica each): a topic's keys share one hash
//! slot, topics spread over the primaries, the conformance suites pass, a write and its
//! `WAIT` run on the topic's own primary (so another shard's replica never confirms
//! it), the replica check looks at every shard, and a primary failed over during produce
//! keeps every batch a `WAIT` confirmed (`docs/warm.md`, "Valkey Cluster").

use crate::common;

use std::{collections::BTreeSet, sync::Arc};

use common::{batch, topic};
use futures::TryStreamExt;
use tier_core::{
    ErrorKind, OffsetRange, ReadLimit, RecordBatch, Tier, TierExt, TopicName, position::WarmBackend,
};
use tier_testkit::{
    conformance::{SuiteConfig, run_all, warm_backend},
    servers::ValkeyCluster,
};
use tier_warm::{Mode, ReplicaCheck, WarmConfig, WarmTier, WithoutReplicas};
use tokio::sync::watch;

fn cluster_config(cluster: &ValkeyCluster, key_prefix: &str) -> WarmConfig {
    let urls = cluster.urls();
    let mut config = common::config(&urls[0], key_prefix);
    config.urls = urls;
    config.mode = Mode::Cluster;
    config
}

async fn start() -> ValkeyCluster {
    let cluster = ValkeyCluster::start().await.expect("a Valkey Cluster");
    eprintln!("cluster tests run against {}", cluster.server_kind());
    cluster
}

/// A topic named `<prefix>-<n>` whose stream the primary on `port` serves.
async fn topic_on(cluster: &ValkeyCluster, tier: &WarmTier, prefix: &str, port: u16) -> TopicName {
    for n in 0..1000 {
        let t = topic(&format!("{prefix}-{n}"));
        if cluster.primary_for_key(&tier.stream_key(&t)).await.expect("CLUSTER NODES") == port {
            return t;
        }
    }
    panic!("no topic {prefix}-<n> hashes to the primary on {port}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_warm_tier_passes_the_conformance_suites_on_a_cluster() {
    let cluster = start().await;
    let tier = WarmTier::open(cluster_config(&cluster, "conf:"), WithoutReplicas::Refuse)
        .await
        .expect("the warm tier opens on the cluster");
    assert_eq!(tier.check_replicas().await.expect("INFO replication"), ReplicaCheck::Enough);
    run_all(&tier, &SuiteConfig::new("conf-")).await;
    warm_backend(&tier, &SuiteConfig::new("conf-pos-")).await;
    tier.close().await;
}

/// Every key of a topic (its stream and its marker) hashes to one slot, as the server
/// computes it, so the topic lives on one primary; topics spread over all three, and
/// each takes single appends, its marker and group appends (one script) there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topics_keys_share_a_slot_and_topics_spread_over_the_primaries() {
    let cluster = start().await;
    let tier = WarmTier::open(cluster_config(&cluster, "spread:"), WithoutReplicas::Refuse)
        .await
        .expect("the warm tier opens on the cluster");
    let mut owners = BTreeSet::new();
    for n in 0..12 {
        let t = topic(&format!("spread-{n}"));
        let (stream, marker) = (tier.stream_key(&t), tier.topic_key(&t));
        let slot = cluster.key_slot(&stream).await.expect("CLUSTER KEYSLOT");
        assert_eq!(
            cluster.key_slot(&marker).await.expect("CLUSTER KEYSLOT"),
            slot,
            "{stream} and {marker} must share a hash slot"
        );
        owners.insert(cluster.primary_for_key(&stream).await.expect("CLUSTER NODES"));
        tier.record_topic(&t).await.expect("the marker is written and confirmed");
        tier.append(&t, batch(0, 3, &format!("t{n}"))).await.expect("appended and confirmed");
        tier.append(&t, batch(3, 2, &format!("t{n}"))).await.expect("appended and confirmed");
        // A group continuing the cached end: one script, routed by its key.
        let (held, result) =
            tier.append_group(&t, vec![batch(5, 1, &format!("t{n}")), batch(6, 1, &format!("t{n}"))]).await;
        result.unwrap_or_else(|e| panic!("the group is appended and confirmed: {}", e.report()));
        assert_eq!(held, 2);
    }
    assert_eq!(owners.len(), 3, "twelve topics land on all three primaries: {owners:?}");
    for n in 0..12 {
        let t = topic(&format!("spread-{n}"));
        assert!(tier.topic_recorded(&t).await.expect("EXISTS"));
        let got = tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.expect("read back");
        let payloads: Vec<_> = got.iter().map(|r| r.payload.clone()).collect();
        let want: Vec<_> = (0..7).map(|o| bytes::Bytes::from(format!("t{n}-{o}"))).collect();
        assert_eq!(payloads, want, "topic spread-{n}");
    }

    // A key prefix with an empty hash tag would make the server hash whole keys.
    let err = WarmTier::connect(cluster_config(&cluster, "x{}:")).await.expect_err("an empty hash tag");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("empty hash tag"), "{err}");
    // A prefix with a hash tag of its own puts every topic in that tag's slot.
    let tagged = WarmTier::connect(cluster_config(&cluster, "{all}:")).await.expect("a tagged prefix");
    for n in 0..3 {
        let t = topic(&format!("tagged-{n}"));
        let slot = cluster.key_slot(&tagged.stream_key(&t)).await.expect("CLUSTER KEYSLOT");
        assert_eq!(slot, cluster.key_slot("all").await.expect("CLUSTER KEYSLOT"));
        assert_eq!(cluster.key_slot(&tagged.topic_key(&t)).await.expect("CLUSTER KEYSLOT"), slot);
        tagged.append(&t, batch(0, 1, "tagged")).await.expect("appended and confirmed");
    }
    tier.close().await;
    tagged.close().await;
}

/// With the replica of one topic's primary stopped, an append to that topic is not
/// confirmed (`WAIT` runs on the topic's primary, which has no replica left) while
/// topics on the other primaries are; and the replica check names that primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_counts_only_the_replicas_of_the_topics_own_primary() {
    let mut cluster = start().await;
    let tier = WarmTier::open(cluster_config(&cluster, "wait:"), WithoutReplicas::Refuse)
        .await
        .expect("the warm tier opens on the cluster");
    let primaries = cluster.primaries().await.expect("CLUSTER NODES");
    assert_eq!(primaries.len(), 3);
    let (lonely, others) = (primaries[0], &primaries[1..]);
    let t = topic_on(&cluster, &tier, "lonely", lonely).await;
    tier.append(&t, batch(0, 2, "a")).await.expect("confirmed while the replica runs");

    let replicas = cluster.replicas_of(lonely).await.expect("CLUSTER NODES");
    assert_eq!(replicas.len(), 1);
    cluster.stop_replica(replicas[0]).await.expect("the replica stops");
    cluster.wait_replicas_online(lonely, 0).await.expect("the primary notices");

    let err = tier.append(&t, batch(2, 2, "b")).await.expect_err("no replica of its primary confirms it");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("only 0 of 1 replicas acknowledged"), "{err}");
    let err = tier.record_topic(&t).await.expect_err("nor the marker");
    assert!(err.to_string().contains("only 0 of 1 replicas acknowledged"), "{err}");
    // The identical retry (a marker write and WAIT on the stream's primary) neither.
    let err = tier.append(&t, batch(2, 2, "b")).await.expect_err("nor the retry");
    assert!(err.to_string().contains("only 0 of 1 replicas acknowledged"), "{err}");
    // A group append (one script, taken when the group continues the cached end) neither.
    assert_eq!(tier.range(&t).await.expect("range"), OffsetRange::new(0, 4));
    let (_, result) = tier.append_group(&t, vec![batch(4, 1, "c"), batch(5, 1, "c")]).await;
    let err = result.expect_err("nor a group");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");

    // fred sends a keyless command to whichever node its connection map yields first,
    // which differs between clients: fresh clients would not all pick this primary.
    for _ in 0..8 {
        let fresh = WarmTier::connect(cluster_config(&cluster, "wait:")).await.expect("connect");
        let err = fresh.record_topic(&t).await.expect_err("no replica of its primary confirms the marker");
        assert!(err.to_string().contains("only 0 of 1 replicas acknowledged"), "{err}");
        fresh.close().await;
    }

    for &port in others {
        let other = topic_on(&cluster, &tier, "other", port).await;
        tier.append(&other, batch(0, 2, "o")).await.expect("the other primaries' replicas confirm");
    }
    match tier.check_replicas().await.expect("INFO replication on every primary") {
        ReplicaCheck::Fewer { message } => {
            assert!(message.contains(&format!("127.0.0.1:{lonely}")), "{message}");
            assert!(message.contains("has 0 replicas online"), "{message}");
        }
        other => panic!("expected Fewer for the primary on {lonely}, got {other:?}"),
    }
    tier.close().await;
}

/// A slot moves to another primary after the tier read the slot map: the tier's write
/// goes to the old primary, which answers `MOVED`. The write must not be confirmed by the
/// old primary's replica (a `WAIT` left behind on the old connection) while the new
/// owner's replica is stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_redirected_to_another_primary_is_not_confirmed_by_the_old_one() {
    let mut cluster = start().await;
    let tier = WarmTier::open(cluster_config(&cluster, "moved:"), WithoutReplicas::Refuse)
        .await
        .expect("the warm tier opens on the cluster");
    let primaries = cluster.primaries().await.expect("CLUSTER NODES");
    let (old, new) = (primaries[0], primaries[1]);
    let t = topic_on(&cluster, &tier, "moved", old).await;
    let key = tier.stream_key(&t);
    // The tier learns the (empty) range while the old primary serves the slot, so the
    // append below goes out without reading anything first.
    assert_eq!(tier.range(&t).await.expect("range"), OffsetRange::empty_at(0));

    let new_replica = cluster.replicas_of(new).await.expect("CLUSTER NODES")[0];
    cluster.stop_replica(new_replica).await.expect("the new owner's replica stops");
    cluster.wait_replicas_online(new, 0).await.expect("the new owner notices");
    let slot = cluster.key_slot(&key).await.expect("CLUSTER KEYSLOT");
    cluster.move_empty_slot(slot, new).await.expect("the slot moves");

    let err = tier.append(&t, batch(0, 2, "a")).await.expect_err("no replica of the new owner confirms it");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{}", err.report());
    // Once the tier follows the slot, the WAIT runs on the new owner: still not confirmed.
    let err = tier.append(&t, batch(0, 2, "a")).await.expect_err("no replica of the new owner confirms it");
    assert!(err.to_string().contains("only 0 of 1 replicas acknowledged"), "{}", err.report());
    tier.close().await;
}

/// What the producer reports to the test.
#[derive(Clone, Debug, Default)]
struct Produced {
    /// Batches whose append was confirmed, in order.
    confirmed: Vec<RecordBatch>,
    /// Appends refused so far.
    refused: usize,
}

/// A primary is killed while a producer appends to a topic it serves and to one on
/// another primary, retrying each refused batch: every append is confirmed or refused,
/// and after the failover the promoted replica holds every batch that was confirmed.
/// The promoted primary has no replica, so `WAIT 1` confirms nothing on it; the other
/// topic carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_failed_over_during_produce_keeps_every_confirmed_batch() {
    let mut cluster = start().await;
    let tier = Arc::new(
        WarmTier::open(cluster_config(&cluster, "failover:"), WithoutReplicas::Refuse)
            .await
            .expect("the warm tier opens on the cluster"),
    );
    let primaries = cluster.primaries().await.expect("CLUSTER NODES");
    let victim = topic_on(&cluster, &tier, "victim", primaries[0]).await;
    let bystander = topic_on(&cluster, &tier, "bystander", primaries[1]).await;

    let (tx, mut rx) = watch::channel((Produced::default(), Produced::default()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let producer = {
        let (tier, victim, bystander) = (tier.clone(), victim.clone(), bystander.clone());
        tokio::spawn(async move {
            let mut next = [0u64, 0u64];
            while !*stop_rx.borrow() {
                for (i, t) in [&victim, &bystander].into_iter().enumerate() {
                    let b = batch(next[i], 2, t.as_str());
                    let result = tier.append(t, b.clone()).await;
                    tx.send_modify(|(v, s)| {
                        let produced = if i == 0 { v } else { s };
                        match &result {
                            Ok(()) => produced.confirmed.push(b.clone()),
                            Err(_) => produced.refused += 1,
                        }
                    });
                    match result {
                        Ok(()) => next[i] += 2,
                        Err(e) => assert_eq!(e.kind(), ErrorKind::Unavailable, "{}", e.report()),
                    }
                }
            }
        })
    };

    rx.wait_for(|(v, _)| v.confirmed.len() >= 10).await.expect("the producer confirms batches");
    let old = cluster.kill_primary_of(&tier.stream_key(&victim)).await.expect("the primary is killed");
    let new = cluster.wait_failover(old).await.expect("its replica takes over");
    assert_ne!(new, old);
    // The victim's appends are refused from the kill on (no primary, then a primary
    // without a replica); the bystander's go on being confirmed.
    let at_failover = rx.borrow().1.confirmed.len();
    rx.wait_for(|(v, s)| v.refused >= 3 && s.confirmed.len() >= at_failover + 5)
        .await
        .expect("the producer carries on");
    stop_tx.send(true).expect("the producer listens");
    producer.await.expect("the producer ends without a panic");
    let (victim_produced, bystander_produced) = rx.borrow().clone();
    eprintln!(
        "victim: {} confirmed, {} refused; bystander: {} confirmed, {} refused",
        victim_produced.confirmed.len(),
        victim_produced.refused,
        bystander_produced.confirmed.len(),
        bystander_produced.refused
    );

    for (t, produced) in [(&victim, &victim_produced), (&bystander, &bystander_produced)] {
        let got: Vec<RecordBatch> = tier.batches_from(t, 0).try_collect().await.expect("read back");
        assert!(
            got.len() >= produced.confirmed.len(),
            "{t}: {} batches held, {} confirmed",
            got.len(),
            produced.confirmed.len()
        );
        assert_eq!(
            &got[..produced.confirmed.len()],
            produced.confirmed.as_slice(),
            "{t}: a confirmed batch is lost"
        );
    }
    // The victim's last appends were refused; its primary now is the promoted replica,
    // which serves the topic (a tier without WAIT appends at the end it holds).
    let mut without_wait = cluster_config(&cluster, "failover:");
    without_wait.wait_replicas = 0;
    let after = WarmTier::connect(without_wait).await.expect("connect after the failover");
    let range = after.range(&victim).await.expect("range");
    assert!(range.end >= 2 * victim_produced.confirmed.len() as u64, "{range}");
    after.append(&victim, batch(range.end, 1, "after")).await.expect("the promoted primary takes appends");
    assert_eq!(cluster.primary_for_key(&after.stream_key(&victim)).await.expect("CLUSTER NODES"), new);
    tier.close().await;
    after.close().await;
}
