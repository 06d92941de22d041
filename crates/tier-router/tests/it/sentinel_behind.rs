//! The router over a warm tier in sentinel mode when the failover promotes a replica
//! that lacks writes a met `WAIT` confirmed (`docs/warm.md`, "What `WAIT` guarantees, and
//! what it does not"). With `wait_replicas = 1` and two replicas, one replica's
//! replication link is cut (tier-testkit's [`ValkeySentinel::start_with_link_proxy`]: the
//! primary still counts it, it receives nothing) while the other meets every `WAIT`; the
//! other is then barred from promotion (`replica-priority 0`) and the primary killed, so
//! the sentinels promote the replica behind. The store carries on producing through the
//! sentinels, and nothing acknowledged is lost: the router reads every acknowledged
//! record back at its offset, once, and warm holds every record from offset 0 — the
//! writer gave warm back, from the WAL, what the failover took.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(feature = "warm")]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{ColdOn, Deployment, Tiers, warm_config};
use futures::StreamExt;
use tier_core::{ErrorKind, OffsetRange, ReadLimit, StartPosition, Tier, TierExt, TopicName};
use tier_router::{NewRecord, Topic, WarmBackend, WarmFailurePolicy};
use tier_testkit::servers::{FAILOVER_TIMEOUT, SENTINEL_SERVICE, ValkeySentinel};
use tier_warm::{Mode, WarmTier, WithoutReplicas};

const T: &str = "t";
/// Appends per phase: before the cut, while cut, after the failover.
const BATCHES: usize = 4;
const PER_BATCH: usize = 10;
/// Pause before trying again an append or a flush warm did not confirm (a retry
/// back-off, not a synchronisation: the loop ends on the store's answer).
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// When the replica that is promoted stops receiving the primary's writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// After the first `BATCHES` acknowledged appends, which it holds; it lacks the next
    /// `BATCHES`.
    Midway,
    /// Before the store opens: it never had the topic's stream (nor its marker).
    BeforeTheTopic,
}

/// Each acknowledged append: its offsets and its payloads.
type Acked = Vec<(OffsetRange, Vec<String>)>;

/// Appends `BATCHES` batches of `PER_BATCH` records, each until acknowledged, and adds
/// them to `acked`. An attempt refused with `Unavailable` (warm unreachable during the
/// failover under `fail`) is not acknowledged; it may still be committed later, so each
/// attempt carries payloads of its own (`<phase>-<append>-<attempt>-<i>`).
async fn append_acked(topic: &Topic, phase: &str, acked: &mut Acked) {
    for _ in 0..BATCHES {
        let n = acked.len();
        let deadline = Instant::now() + FAILOVER_TIMEOUT;
        for attempt in 0.. {
            let payloads: Vec<String> =
                (0..PER_BATCH).map(|i| format!("{phase}-{n}-{attempt}-{i}")).collect();
            let records = payloads.iter().map(|p| NewRecord::new(1000 + n as i64, p.clone())).collect();
            match topic.append(records).await {
                Ok(range) => {
                    acked.push((range, payloads));
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Unavailable && Instant::now() < deadline => {
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                Err(e) => panic!("{phase} append {n}: {}", e.report()),
            }
        }
    }
}

/// Flushes until warm holds everything appended (`flush` is `Unavailable` until then).
async fn flush(topic: &Topic) {
    let deadline = Instant::now() + FAILOVER_TIMEOUT;
    while let Err(e) = topic.flush().await {
        assert!(Instant::now() < deadline, "warm never caught up: {}", e.report());
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// Checks `records` (offset, payload) are dense from 0, every acknowledged record is at
/// its offset, and no payload is there twice.
fn assert_holds_acked(records: &[(u64, String)], acked: &Acked, what: &str) {
    for (i, (offset, _)) in records.iter().enumerate() {
        assert_eq!(*offset, i as u64, "{what}: offsets are dense from 0");
    }
    for (range, payloads) in acked {
        let got: Vec<&String> = records
            .get(range.start as usize..range.end as usize)
            .unwrap_or_else(|| panic!("{what} ends at {} before acknowledged {range}", records.len()))
            .iter()
            .map(|(_, p)| p)
            .collect();
        assert_eq!(got, payloads.iter().collect::<Vec<_>>(), "{what}: acknowledged {range}");
    }
    let distinct: HashSet<&String> = records.iter().map(|(_, p)| p).collect();
    assert_eq!(distinct.len(), records.len(), "{what}: a record is there twice");
}

/// A warm tier on the server on `port` alone (no sentinel, no cached range), reading
/// the keys under `prefix`.
async fn warm_on(port: u16, prefix: &str) -> WarmTier {
    let mut config = warm_config(&format!("redis://127.0.0.1:{port}"), prefix);
    config.wait_replicas = 0;
    WarmTier::connect(config).await.unwrap()
}

async fn failover_to_the_replica_behind(policy: WarmFailurePolicy, cut: Cut) {
    let mut sentinels = ValkeySentinel::start_with_link_proxy().await.expect("a Valkey sentinel deployment");
    let behind = sentinels.proxied_replica_port().unwrap();
    let prefix = format!("behind-{policy:?}-{cut:?}:");
    let mut config = warm_config(&sentinels.sentinel_urls()[0], &prefix);
    config.urls = sentinels.sentinel_urls();
    config.mode = Mode::Sentinel { service_name: SENTINEL_SERVICE.to_owned() };
    let warm = WarmTier::open(config, WithoutReplicas::Refuse).await.unwrap();
    let mut d = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    d.tiers = Tiers::HotWarm;
    d.warm = Some(Arc::new(warm) as Arc<dyn WarmBackend>);
    d.router.warm_failure_policy = policy;
    d.router.warm_retry_interval = Duration::from_millis(50);
    let name = TopicName::new(T).unwrap();

    if cut == Cut::BeforeTheTopic {
        sentinels.cut_replica_link().unwrap();
    }
    let store = d.open(&[]).await;
    let topic = store.topic(T).await.unwrap();
    let mut acked = Acked::new();
    append_acked(&topic, "before", &mut acked).await;
    flush(&topic).await;
    let mut promoted_holds = OffsetRange::new(0, 0);
    if cut == Cut::Midway {
        // Both replicas hold every batch so far; from now on only the other one gets any.
        let primary = sentinels.primary_port().await.unwrap();
        sentinels.wait_replicas_acknowledge(primary, 2).await.unwrap();
        sentinels.cut_replica_link().unwrap();
        promoted_holds = OffsetRange::new(0, topic.high_watermark());
        append_acked(&topic, "cut", &mut acked).await;
        flush(&topic).await;
    }
    let confirmed = topic.high_watermark();

    sentinels.restrict_promotion_to(behind).await.unwrap();
    let old = sentinels.kill_primary().await.unwrap();
    assert_eq!(sentinels.wait_failover(old).await.unwrap(), behind, "the replica behind is promoted");
    // The failover took batches warm confirmed: the new primary lacks them.
    assert_eq!(
        warm_on(behind, &prefix).await.range(&name).await.unwrap(),
        promoted_holds,
        "the promoted replica's stream before the store writes to it (warm confirmed [0, {confirmed}))"
    );

    append_acked(&topic, "after", &mut acked).await;
    flush(&topic).await;
    let committed = topic.high_watermark();

    let mut reader = topic.reader(StartPosition::Earliest).await.unwrap();
    let mut from_router = Vec::new();
    while (from_router.len() as u64) < committed {
        let record = tokio::time::timeout(Duration::from_secs(20), reader.next())
            .await
            .expect("the reader yields within 20 s")
            .expect("the reader does not end")
            .unwrap();
        from_router.push((record.offset, String::from_utf8_lossy(&record.payload).into_owned()));
    }
    drop(reader);
    assert_holds_acked(&from_router, &acked, "the router");

    // Warm was given back what the failover took: it holds every record from 0 (read
    // through a new client: the range a client cached is not the server's).
    let promoted = warm_on(behind, &prefix).await;
    assert_eq!(
        promoted.range(&name).await.unwrap(),
        OffsetRange::new(0, committed),
        "warm's range on the promoted replica after the store caught it up"
    );
    let in_warm: Vec<(u64, String)> = promoted
        .read(&name, 0, committed, ReadLimit::unbounded())
        .await
        .unwrap()
        .iter()
        .map(|r| (r.offset, String::from_utf8_lossy(&r.payload).into_owned()))
        .collect();
    assert_holds_acked(&in_warm, &acked, "warm");
    assert_eq!(in_warm, from_router, "warm and the router hold the same records");
    drop(topic);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_to_a_replica_lacking_the_last_confirmed_batches_loses_nothing_under_fail() {
    failover_to_the_replica_behind(WarmFailurePolicy::Fail, Cut::Midway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_to_a_replica_that_never_had_the_topic_loses_nothing_under_fail() {
    failover_to_the_replica_behind(WarmFailurePolicy::Fail, Cut::BeforeTheTopic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_to_a_replica_lacking_the_last_confirmed_batches_loses_nothing_under_degrade() {
    failover_to_the_replica_behind(WarmFailurePolicy::Degrade, Cut::Midway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_to_a_replica_that_never_had_the_topic_loses_nothing_under_degrade() {
    failover_to_the_replica_behind(WarmFailurePolicy::Degrade, Cut::BeforeTheTopic).await;
}
