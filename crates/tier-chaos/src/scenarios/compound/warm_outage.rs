//! Warm outage longer than WAL retention under `degrade` (hot+warm+cold): producers
//! append while the Valkey primary is stopped for many times the retention interval, with
//! exports and retention (1 ms retention time) running; the store closes; it reopens with
//! Valkey still down (started afterwards) or with Valkey back (both, alternately).
//!
//! Checks: producers stay acknowledged during the outage; the store opens; warm is
//! back-filled (`flush` succeeds: warm holds everything its stream should; the primary
//! restarts empty, having no persistence, so warm takes over at the commit point); every
//! acknowledged record reads back; new appends continue after the acknowledged end and
//! warm holds them (its end is the commit point).

use std::{
    path::Path,
    time::{Duration, Instant},
};

use tier_core::TopicName;
use tier_router::{TieredStore, WarmFailurePolicy};

use super::{acked_end, flush_until_caught_up};
use crate::{
    ChaosError, ScenarioResult,
    deploy::{Deployment, Profile, Servers, store_config},
    rng::Rng,
    scenarios::{inproc::Producers, temp_dir},
    verify::verify_topic,
};

/// The row's name.
pub const NAME: &str = "compound warm-outage-past-retention hot+warm+cold degrade";

const TOPIC: &str = "chaos-warm-outage";

/// Appends acknowledged during the outage before it may end.
const MIN_OUTAGE_ACKS: usize = 3;

/// The longest outage.
const OUTAGE_MAX: Duration = Duration::from_secs(10);

/// Runs `rounds` outages, each restart alternately with Valkey down and up.
pub async fn run(
    servers: &mut Servers,
    base: &Path,
    rounds: u64,
    seed: u64,
) -> Result<ScenarioResult, ChaosError> {
    let mut r = ScenarioResult::new(NAME);
    let mut rng = Rng::new(seed);
    for round in 0..rounds {
        let down_at_restart = round % 2 == 1;
        let label =
            format!("round {round} (Valkey {} at the restart)", if down_at_restart { "down" } else { "up" });
        servers.valkey.restart_primary().await?;
        servers.valkey.start_replica().await?;
        let dir = temp_dir(base, "warmout-")?;
        let tag = format!("warmout-{}-{round}", seed % 100_000);
        let profile = Profile {
            policy: WarmFailurePolicy::Degrade,
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
        let tally = std::sync::Arc::clone(&producers.tally);
        // The outage's timing and length (retention runs every 40 ms, segments rotate
        // every 300 ms): the fault, not a wait for a condition.
        tokio::time::sleep(Duration::from_millis(rng.between(300, 600))).await;
        servers.valkey.stop_primary().await;
        let outage_started = Instant::now();
        let before = tally.counts();
        tokio::time::sleep(Duration::from_millis(rng.between(1500, 2500))).await;
        // The outage must cover appends warm lacks: it lasts until a few were acknowledged
        // (appends answer slowly while Valkey is unreachable: each waits out the warm
        // command), at most OUTAGE_MAX.
        let outage_end = Instant::now() + OUTAGE_MAX;
        while tally.counts().0 < before.0 + MIN_OUTAGE_ACKS && Instant::now() < outage_end {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let during = tally.counts();
        let acks = producers.stop().await?;
        r.iterations += 1;
        if during.0 == before.0 {
            r.fail(format!(
                "{label}: under `degrade`, no append was acknowledged during {OUTAGE_MAX:?} of the outage"
            ));
        }
        let hot = store.wal().range(&name).await.map_err(|e| ChaosError::tier("WAL range", e))?;
        r.notes.push(format!(
            "{label}: {} acks, {} errors during the outage of {:.1} s; the WAL holds {hot} at its end",
            during.0 - before.0,
            during.1 - before.1,
            outage_started.elapsed().as_secs_f64()
        ));
        drop(topic);
        store.close().await;

        if !down_at_restart {
            servers.valkey.restart_primary().await?;
        }
        let store = match TieredStore::open_recovering(config.clone(), vec![name.clone()]).await {
            Ok(store) => store,
            Err(e) => {
                r.fail(format!("{label}: the store does not open after the outage: {e}"));
                servers.valkey.restart_primary().await?;
                continue;
            }
        };
        if down_at_restart {
            servers.valkey.restart_primary().await?;
        }
        let checked = async {
            let topic = store.topic(TOPIC).await.map_err(|e| ChaosError::tier("topic", e))?;
            if let Err(e) = flush_until_caught_up(&topic).await {
                r.fail(format!("{label}: {e}"));
            }
            let at_restart = topic.ranges().await.map_err(|e| ChaosError::tier("ranges", e))?;
            let v = verify_topic(&topic, &acks, 0, &[]).await?;
            let acked_before = r.acked;
            r.absorb(&label, &v);
            r.acked = acked_before + v.acked;
            let more = Producers::start_writers(&topic, 100..101);
            // How long the new producer appends.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let new_acks = more.stop().await?;
            match new_acks.iter().map(|a| a.range.start).min() {
                None => r.fail(format!("{label}: no append was acknowledged after the restart")),
                Some(start) if start < acked_end(&acks) => r.fail(format!(
                    "{label}: a new append got offset {start}, below the acknowledged end {}",
                    acked_end(&acks)
                )),
                Some(_) => {}
            }
            // Warm (restarted empty: the primary has no persistence) continues at the
            // commit point and holds every later append.
            if let Err(e) = flush_until_caught_up(&topic).await {
                r.fail(format!("{label}, after new appends: {e}"));
            }
            let ranges = topic.ranges().await.map_err(|e| ChaosError::tier("ranges", e))?;
            if ranges.warm.is_none_or(|w| w.end != ranges.committed) {
                r.fail(format!(
                    "{label}: warm does not reach the commit point after new appends: {ranges:?}"
                ));
            }
            r.notes.push(format!(
                "{label}: once flushed after the restart {at_restart:?}; after new appends {ranges:?}"
            ));
            Ok::<(), ChaosError>(())
        }
        .await;
        store.close().await;
        checked?;
    }
    r.notes.push(format!("seed {seed}"));
    Ok(r)
}
