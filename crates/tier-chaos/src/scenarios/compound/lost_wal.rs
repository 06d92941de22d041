//! Lost WAL after an age-rotated unconfirmed batch (hot+warm+cold, `fail`): producers
//! append while the Valkey replica is stopped (`wait_replicas = 1`: every `WAIT` falls
//! short, so warm refuses the batches, which stay in the WAL unconfirmed); the segment
//! holding them rotates by age and the background exporter runs; the store closes
//! cleanly and the WAL directory is deleted.
//!
//! Checks: only committed offsets were exported (cold ends at or below the acknowledged
//! end); after reopening (replica still down) the next offset is at least the end of
//! everything cold holds and everything acknowledged, no never-acknowledged record is
//! served, every acknowledged record is read back at its offset; once the replica is back,
//! new appends get fresh offsets and the export continues up to the commit point.

use std::{path::Path, sync::Arc, time::Duration};

use tier_core::TopicName;
use tier_router::{TieredStore, WarmFailurePolicy};

use super::{acked_end, export_until_caught_up, flush_until_caught_up};
use crate::{
    ChaosError, ScenarioResult,
    deploy::{Deployment, Profile, Servers, store_config},
    rng::Rng,
    scenarios::{inproc::Producers, temp_dir},
    verify::verify_topic,
};

/// The row's name.
pub const NAME: &str = "compound lost-wal-after-unconfirmed hot+warm+cold";

const TOPIC: &str = "chaos-lost-wal";

/// Runs `rounds` rounds (the servers are stopped and restarted).
pub async fn run(
    servers: &mut Servers,
    base: &Path,
    rounds: u64,
    seed: u64,
) -> Result<ScenarioResult, ChaosError> {
    let mut r = ScenarioResult::new(NAME);
    let mut rng = Rng::new(seed);
    let mut unacked_committed_later = 0;
    for round in 0..rounds {
        servers.valkey.start_replica().await?;
        let dir = temp_dir(base, "lostwal-")?;
        let tag = format!("lostwal-{}-{round}", seed % 100_000);
        let profile = Profile {
            policy: WarmFailurePolicy::Fail,
            max_cached_closed_segments: 100_000,
            ..Profile::default()
        };
        let config = store_config(Deployment::HotWarmCold, dir.path(), servers, &tag, &profile).await?;
        let name = TopicName::new(TOPIC).map_err(|e| ChaosError::tier("topic name", e))?;
        let store = TieredStore::open_recovering(config.clone(), vec![name.clone()])
            .await
            .map_err(|e| ChaosError::tier("opening", e))?;
        let topic = store.topic(TOPIC).await.map_err(|e| ChaosError::tier("topic", e))?;
        let producers = Producers::start(&topic, 2);
        let tally = Arc::clone(&producers.tally);
        // Fault timing, not synchronisation: produce, then refuse for longer than the
        // segment age (300 ms) and several export sweeps (50 ms).
        tokio::time::sleep(Duration::from_millis(rng.between(300, 800))).await;
        servers.valkey.stop_replica().await;
        let before = tally.counts();
        tokio::time::sleep(Duration::from_millis(rng.between(800, 1500))).await;
        let acks = producers.stop().await?;
        let during = tally.counts();
        r.iterations += 1;
        if during.1 == before.1 {
            r.fail(format!("round {round}: no append failed with the replica stopped (wait_replicas = 1)"));
        }
        let acked = acked_end(&acks);
        let cold_before = match store.cold() {
            Some(c) => c.range(&name).await.map_err(|e| ChaosError::tier("cold range", e))?,
            None => return Err(ChaosError::Other("the deployment has no cold tier".into())),
        };
        if cold_before.end > acked {
            r.fail(format!(
                "round {round}: cold holds offsets up to {} but only [0, {acked}) was acknowledged: \
                 unconfirmed offsets were exported",
                cold_before.end
            ));
        }
        drop(topic);
        store.close().await;
        let checkpoint = std::fs::read_to_string(dir.path().join("router").join(format!("{TOPIC}.end")))
            .map_or_else(|e| format!("none ({e})"), |t| t.trim().to_owned());
        r.notes.push(format!(
            "round {round}: at the clean close: acknowledged end {acked}, cold {cold_before}, checkpoint {checkpoint}"
        ));
        crate::scenarios::lost_disk::delete_tree(&config.hot.data_dir)?;

        // Reopen with the replica still down: the refused batches are still unconfirmed.
        let store = TieredStore::open_recovering(config.clone(), vec![name.clone()])
            .await
            .map_err(|e| ChaosError::tier("reopening after the lost WAL", e))?;
        let checked = async {
            let report =
                store.recover_topic(TOPIC).await.map_err(|e| ChaosError::tier("recovery report", e))?;
            let floor = acked.max(cold_before.end);
            if report.next_offset < floor {
                r.fail(format!(
                    "round {round}: next offset {} after the lost WAL is below {floor} (acknowledged end \
                     {acked}, cold end {}): offsets would be reused ({report:?})",
                    report.next_offset, cold_before.end
                ));
            }
            let topic = store.topic(TOPIC).await.map_err(|e| ChaosError::tier("topic", e))?;
            let v = verify_topic(&topic, &acks, 0, &[]).await?;
            let acked_before = r.acked;
            r.absorb(&format!("round {round}, replica down"), &v);
            r.acked = acked_before;
            if v.unacknowledged > 0 {
                r.fail(format!(
                    "round {round}: with the replica still down, {} never-acknowledged records are served \
                     (commit point {}, acknowledged end {acked}; {report:?})",
                    v.unacknowledged,
                    topic.high_watermark()
                ));
            }

            // The replica is back: the writer confirms what it holds, new appends get
            // fresh offsets, the export continues.
            servers.valkey.start_replica().await?;
            if let Err(e) = flush_until_caught_up(&topic).await {
                r.fail(format!("round {round}: {e}"));
            }
            let more = Producers::start_writers(&topic, 100..101);
            // How long the new producer appends: the fault's shape, not a wait.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let new_acks = more.stop().await?;
            if new_acks.is_empty() {
                r.fail(format!("round {round}: no append was acknowledged after the replica came back"));
            }
            if let Some(reused) = new_acks.iter().find(|a| a.range.start < floor) {
                r.fail(format!(
                    "round {round}: a new append got offsets {}, below {floor}: acknowledged or exported \
                     offsets reused",
                    reused.range
                ));
            }
            if let Err(e) = export_until_caught_up(&store, &topic).await {
                r.fail(format!("round {round}: {e}"));
            }
            let mut all = acks.clone();
            all.extend(new_acks);
            let v = verify_topic(&topic, &all, 0, &[]).await?;
            let acked_before = r.acked;
            r.absorb(&format!("round {round}, after the export"), &v);
            r.acked = acked_before + v.acked;
            Ok::<u64, ChaosError>(v.unacknowledged)
        }
        .await;
        store.close().await;
        unacked_committed_later += checked?;
    }
    r.notes.push(format!(
        "seed {seed}; records of failed appends committed once the replica was back: {unacked_committed_later}"
    ));
    Ok(r)
}
