//! Valkey failover after a short `WAIT` (hot+warm, `fail`, `wait_replicas = 1`): a private
//! primary and replica whose replication link runs through a proxy. While producers
//! append, the link is cut — the primary still counts the replica as connected, but the
//! replica receives nothing more, so every `WAIT 1` from then on falls short (and a
//! `WAIT` that follows no write of its own connection would not: it returns the
//! connected replicas at once). Once a `WAIT` fell short every client connection is
//! closed, so the router retries the refused batch on a new connection. Then the primary
//! is killed and the replica promoted, the WAL directory is lost, and the store reopens
//! on the promoted replica and recovers from it.
//!
//! Checks: every acknowledged record is present exactly once at its offset, read back
//! through the recovered store — an acknowledgement under `fail` promises the batch is on
//! a replica, so the promoted one must hold it; every record served before the failover
//! (the commit point under `fail` moves only past batches a replica confirmed) is still
//! there, the same; and no such offset is reported lost or handed out again.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use tier_core::TopicName;
use tier_router::{TieredStore, WarmFailurePolicy};
use tier_testkit::servers::ValkeyPair;

use crate::{
    ChaosError, ScenarioResult,
    ack::Ack,
    deploy::{Deployment, Profile, Servers, store_config},
    payload::RecordId,
    rng::Rng,
    scenarios::{
        compound::{acked_end, reported_losses},
        inproc::{Producers, until},
        lost_disk::delete_tree,
        temp_dir,
    },
    verify::{served_records, verify_topic},
};

/// The row's name.
pub const NAME: &str = "valkey-failover fail";

const TOPIC: &str = "chaos-failover";

/// Runs `rounds` cut-kill-promote rounds, each on a fresh Valkey pair and data directory.
pub async fn run(
    servers: &Servers,
    base: &std::path::Path,
    rounds: u64,
    seed: u64,
) -> Result<ScenarioResult, ChaosError> {
    let mut r = ScenarioResult::new(NAME);
    let mut rng = Rng::new(seed);
    for round in 0..rounds {
        let mut pair = ValkeyPair::start_with_link_proxy().await?;
        let dir = temp_dir(base, "failover-")?;
        let profile = Profile { policy: WarmFailurePolicy::Fail, ..Profile::default() };
        let tag = format!("failover-{}-{round}", seed % 100_000);
        let mut config = store_config(Deployment::HotWarm, dir.path(), servers, &tag, &profile).await?;
        let warm = config.warm.as_mut().ok_or_else(|| ChaosError::Other("no warm tier configured".into()))?;
        warm.urls = vec![pair.primary_url()];

        let store = TieredStore::open(config.clone()).await.map_err(|e| ChaosError::tier("opening", e))?;
        let topic = store.topic(TOPIC).await.map_err(|e| ChaosError::tier("topic", e))?;
        let producers = Producers::start(&topic, 2);
        let tally = Arc::clone(&producers.tally);
        // Fault timing: how long the link works, then how long it is cut.
        tokio::time::sleep(Duration::from_millis(rng.between(200, 500))).await;
        pair.cut_replication_link()?;
        let at_cut = tally.counts();
        // Each time a `WAIT` fell short, the clients' connections are closed: the router's
        // retry of the refused batch runs on a new connection, whose `WAIT` confirms
        // nothing unless it follows a write of its own. (The first refused batch may have
        // reached the replica before the cut, its acknowledgement held back; later ones,
        // written after the cut, cannot have.)
        let mut killed = 0;
        for _ in 0..3 {
            let refused = tally.counts().1;
            until(|| tally.counts().1 != refused).await;
            killed += pair.kill_primary_clients().await?;
        }
        tokio::time::sleep(Duration::from_millis(rng.between(300, 600))).await;
        let at_kill = tally.counts();
        // What consumers have been served: every record up to the commit point.
        let committed = topic.high_watermark();
        let served = served_records(&topic, 0, committed).await?;
        pair.stop_primary().await;
        let acks: Vec<Ack> = producers.stop().await?;
        drop(topic);
        store.abort().await;
        r.iterations += 1;
        if at_kill.1 == at_cut.1 {
            r.fail(format!(
                "round {round}: no append failed with the replication link cut (wait_replicas = 1)"
            ));
        }
        r.notes.push(format!(
            "round {round}: {} appends acknowledged before the cut, {} while it was cut, {} refused; \
             {killed} client connections closed; commit point {committed}, acknowledged end {acked}",
            at_cut.0,
            at_kill.0 - at_cut.0,
            at_kill.1 - at_cut.1,
            acked = acked_end(&acks),
        ));

        // Failover, and the WAL is lost: only the promoted replica can give the records back.
        pair.promote_replica().await?;
        delete_tree(&config.hot.data_dir)?;
        let warm = config.warm.as_mut().ok_or_else(|| ChaosError::Other("no warm tier configured".into()))?;
        warm.urls = vec![pair.replica_url()];
        let name = TopicName::new(TOPIC).map_err(|e| ChaosError::tier("topic name", e))?;
        let store = match TieredStore::open_recovering(config.clone(), vec![name]).await {
            Ok(store) => store,
            Err(e) => {
                r.fail(format!("round {round}: the store does not open on the promoted replica: {e}"));
                continue;
            }
        };
        let checked = check_recovered(&store, round, &acks, committed, &served, &mut r).await;
        store.close().await;
        checked?;
    }
    Ok(r)
}

/// Checks the store recovered from the promoted replica: no acknowledged or served offset
/// reported lost or handed out again, every acknowledged record present exactly once at
/// its offset, every record served before the failover still the same.
async fn check_recovered(
    store: &TieredStore,
    round: u64,
    acks: &[Ack],
    committed: u64,
    served: &BTreeMap<u64, RecordId>,
    r: &mut ScenarioResult,
) -> Result<(), ChaosError> {
    let acked = acked_end(acks);
    let report = store.recover_topic(TOPIC).await.map_err(|e| ChaosError::tier("recovery report", e))?;
    if report.next_offset < committed.max(acked) {
        r.fail(format!(
            "round {round}: next offset {} is below the commit point {committed} before the failover \
             (acknowledged end {acked}): offsets consumers were served would be handed out again ({report:?})",
            report.next_offset
        ));
    }
    let lost = reported_losses(&report);
    if !lost.is_empty() {
        r.fail(format!(
            "round {round}: recovery from the promoted replica reports offsets lost that were served or \
             acknowledged: {lost:?} (commit point {committed}, acknowledged end {acked})"
        ));
    }
    let topic = store.topic(TOPIC).await.map_err(|e| ChaosError::tier("topic", e))?;
    let v = verify_topic(&topic, acks, 0, &[]).await?;
    let acked_before = r.acked;
    r.absorb(&format!("round {round}"), &v);
    r.acked = acked_before + v.acked;
    let now = served_records(&topic, 0, topic.high_watermark().min(committed)).await?;
    r.notes.push(format!(
        "round {round}: recovered from the promoted replica: warm {:?}, next offset {}, lost {:?}, maybe lost {:?}; \
         {} records served before, {} read back",
        report.warm,
        report.next_offset,
        report.lost,
        report.maybe_lost,
        served.len(),
        now.len()
    ));
    let changed: Vec<_> = served.iter().filter(|(o, id)| now.get(o) != Some(id)).take(3).collect();
    if !changed.is_empty() {
        let gone = served.iter().filter(|(o, id)| now.get(o) != Some(id)).count();
        r.lost += gone as u64;
        r.fail(format!(
            "round {round}: {gone} records consumers were served before the failover are gone or changed \
             after it (first: {:?})",
            changed.iter().map(|(o, id)| (**o, **id, now.get(o).copied())).collect::<Vec<_>>()
        ));
    }
    Ok(())
}
