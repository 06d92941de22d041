//! The warm tier in sentinel mode against real Valkey sentinels (tier-testkit's
//! [`ValkeySentinel`]: a primary, two replicas, three sentinels): it finds the primary
//! through the sentinels, its `WAIT 1` counts the primary's replicas, and after the
//! primary is killed and a replica promoted it carries on against the new primary, which
//! holds every batch a `WAIT` confirmed before the kill (the sentinels promote the
//! replica with the most replicated data: `docs/warm.md`, "What WAIT guarantees").

// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::time::{Duration, Instant};

use common::{batch, topic};
use tier_core::{ErrorKind, OffsetRange, ReadLimit, Tier, TierExt};
use tier_testkit::servers::{FAILOVER_TIMEOUT, SENTINEL_SERVICE, ValkeySentinel};
use tier_warm::{Mode, WarmConfig, WarmTier, WithoutReplicas};

fn sentinel_config(sentinels: &ValkeySentinel) -> WarmConfig {
    let urls = sentinels.sentinel_urls();
    let mut config = common::config(&urls[0], "sentinel:");
    config.urls = urls;
    config.mode = Mode::Sentinel { service_name: SENTINEL_SERVICE.to_owned() };
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_deployment_serves_appends_and_keeps_what_wait_confirmed_across_a_failover() {
    let mut sentinels = ValkeySentinel::start().await.expect("a Valkey sentinel deployment");
    eprintln!("sentinel tests run against {}", sentinels.server_kind());
    let tier = WarmTier::open(sentinel_config(&sentinels), WithoutReplicas::Refuse)
        .await
        .expect("the warm tier finds the primary through the sentinels");
    let t = topic("failover");
    for base in (0..50).step_by(10) {
        tier.append(&t, batch(base, 10, "before")).await.expect("an append WAIT confirms");
    }
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 50));

    let old = sentinels.kill_primary().await.unwrap();
    let new = sentinels.wait_failover(old).await.unwrap();
    assert_ne!(new, old);
    // The tier reconnects through the sentinels; appends fail `Unavailable` until it has.
    let started = Instant::now();
    loop {
        match tier.append(&t, batch(50, 10, "after")).await {
            Ok(()) => break,
            Err(e) if e.kind() == ErrorKind::Unavailable && started.elapsed() < FAILOVER_TIMEOUT => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("appending after the failover: {}", e.report()),
        }
    }
    let got = tier.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    let offsets: Vec<u64> = got.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (0..60).collect::<Vec<_>>(), "every confirmed batch survived the failover");
    assert_eq!(got[49].payload, b"before-49".as_ref());
    assert_eq!(got[50].payload, b"after-50".as_ref());
    tier.close().await;
}
