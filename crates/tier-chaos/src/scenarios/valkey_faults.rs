//! Scenario 3, Valkey faults: while producers append to a hot+warm store, the replica is
//! stopped (so `WAIT` comes back short) and later the primary is killed and restarted
//! empty.
//!
//! - `fail`: producers get errors during the outages, and nothing acknowledged is lost.
//! - `degrade`: producers keep being acknowledged on the WAL alone, and once Valkey is
//!   back the back-fill completes (`flush` succeeds and warm reaches the commit point).

use std::{
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use tier_router::{TieredStore, WarmFailurePolicy};

use crate::{
    ChaosError, ScenarioResult,
    deploy::{Deployment, Profile, Servers, store_config},
    scenarios::{inproc::Producers, temp_dir},
    verify::verify_topic,
};

/// Runs the Valkey-fault scenario with `policy` (the servers are stopped and restarted).
pub async fn run(
    policy: WarmFailurePolicy,
    servers: &mut Servers,
    base: &Path,
    seed: u64,
) -> Result<ScenarioResult, ChaosError> {
    let label = match policy {
        WarmFailurePolicy::Fail => "fail",
        WarmFailurePolicy::Degrade => "degrade",
    };
    let mut r = ScenarioResult::new(format!("valkey-faults {label}"));
    let dir = temp_dir(base, "valkey-")?;
    let profile = Profile { policy, max_cached_closed_segments: 100_000, ..Profile::default() };
    let tag = format!("valkey-{label}-{}", seed % 100_000);
    let config = store_config(Deployment::HotWarm, dir.path(), servers, &tag, &profile).await?;
    let store = TieredStore::open(config).await.map_err(|e| ChaosError::tier("opening", e))?;
    let topic = store.topic("chaos-valkey").await.map_err(|e| ChaosError::tier("topic", e))?;
    let producers = Producers::start(&topic, 2);
    let tally = Arc::clone(&producers.tally);
    // The pauses below are the outages' durations, not waits for a condition.
    let pause = |ms| tokio::time::sleep(Duration::from_millis(ms));
    pause(300).await;

    let before = tally.counts();
    servers.valkey.stop_replica().await;
    pause(1500).await;
    let during_replica = tally.counts();
    servers.valkey.start_replica().await?;
    r.iterations += 1;
    pause(300).await;

    let before_primary = tally.counts();
    servers.valkey.stop_primary().await;
    pause(1500).await;
    let during_primary = tally.counts();
    servers.valkey.restart_primary().await?;
    r.iterations += 1;
    pause(800).await;
    let acks = producers.stop().await?;

    let acked_in = |a: (usize, u64), b: (usize, u64)| (b.0 - a.0, b.1 - a.1);
    let (replica_acks, replica_errors) = acked_in(before, during_replica);
    let (primary_acks, primary_errors) = acked_in(before_primary, during_primary);
    r.notes.push(format!(
        "replica down: {replica_acks} acks, {replica_errors} errors; primary down: {primary_acks} acks, \
         {primary_errors} errors"
    ));
    match policy {
        WarmFailurePolicy::Fail => {
            if replica_errors == 0 || primary_errors == 0 {
                r.fail("under `fail`, producers got no error during an outage");
            }
        }
        WarmFailurePolicy::Degrade => {
            if replica_acks == 0 || primary_acks == 0 {
                r.fail("under `degrade`, producers were not acknowledged during an outage");
            }
        }
    }
    // Back-fill (degrade) or the pending batch (fail) must complete now Valkey is back.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match topic.flush().await {
            Ok(()) => break,
            Err(e) if Instant::now() > deadline => {
                r.fail(format!("warm did not catch up within 15 s of Valkey's return: {e}"));
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    let ranges = topic.ranges().await.map_err(|e| ChaosError::tier("ranges", e))?;
    r.notes.push(format!("after the faults: {ranges:?}"));
    let v = verify_topic(&topic, &acks, 0, &[]).await?;
    r.absorb("after the faults", &v);
    store.close().await;
    Ok(r)
}
