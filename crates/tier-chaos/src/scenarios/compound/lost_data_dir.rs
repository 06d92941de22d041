//! Lost whole data directory (hot+cold, cold in moto elsewhere): a `chaos-producer`
//! appends with the exporter running and is stopped (gracefully or with SIGKILL, at
//! random); then the WAL directory *and* the router's state directory beside it are
//! deleted. Nothing that survived bounds the acknowledged end.
//!
//! Checks: the topic opens fenced (`end_unknown`; an append answers `Fenced` naming
//! `resume`), reads of what cold holds work; `TieredStore::resume_topic` at the
//! producer's last acknowledged end lifts the fence and reports the skipped offsets maybe
//! lost; the next append gets an offset at or beyond the acknowledged end, and the export
//! continues after the gap.

use std::{path::Path, time::Duration};

use tier_core::{ErrorKind, OffsetRange, TopicName};
use tier_router::{NewRecord, TieredStore};

use super::{acked_end, export_until_caught_up};
use crate::{
    ChaosError, ScenarioResult,
    deploy::{Deployment, Profile, Servers, store_config, write_config},
    payload::{self, RecordId},
    process::{ProducerProcess, ProducerSpec},
    rng::Rng,
    scenarios::{lost_disk::delete_tree, temp_dir},
    verify::verify_topic,
};

/// The row's name.
pub const NAME: &str = "compound lost-data-dir hot+cold";

const TOPIC: &str = "chaos-lost-data";

/// Runs `rounds` losses, each on a fresh store and bucket.
pub async fn run(
    servers: &Servers,
    base: &Path,
    producer: &Path,
    rounds: u64,
    seed: u64,
) -> Result<ScenarioResult, ChaosError> {
    let mut r = ScenarioResult::new(NAME);
    let mut rng = Rng::new(seed);
    let mut skipped = 0u64;
    for round in 0..rounds {
        let dir = temp_dir(base, "lostdata-")?;
        let tag = format!("lostdata-{}-{round}", seed % 100_000);
        let config =
            store_config(Deployment::HotCold, dir.path(), servers, &tag, &Profile::default()).await?;
        let config_path = dir.path().join("store.toml");
        write_config(&config, &config_path)?;
        let spec = ProducerSpec {
            binary: producer.to_path_buf(),
            config: config_path,
            topic: TOPIC.into(),
            incarnation: 0,
            writers: 2,
            max_batch: 8,
        };
        let process = ProducerProcess::spawn(&spec)?;
        // How long it produces (several rotations and exports): the fault's timing.
        tokio::time::sleep(Duration::from_millis(rng.between(800, 1600))).await;
        let killed = rng.between(0, 1) == 1;
        let out = if killed { process.kill().await? } else { process.stop().await? };
        r.iterations += 1;
        let acked = acked_end(&out.acks);
        delete_tree(&config.hot.data_dir)?;
        delete_tree(&dir.path().join("router"))?;

        let name = TopicName::new(TOPIC).map_err(|e| ChaosError::tier("topic name", e))?;
        let store = match TieredStore::open_recovering(config.clone(), vec![name]).await {
            Ok(store) => store,
            Err(e) => {
                r.fail(format!("round {round}: the store does not open after the lost data directory: {e}"));
                continue;
            }
        };
        let checked = async {
            let report =
                store.recover_topic(TOPIC).await.map_err(|e| ChaosError::tier("recovery report", e))?;
            let cold_end = report.cold.map_or(0, |c| c.end);
            if cold_end == 0 {
                r.notes.push(format!("round {round}: cold held nothing yet (no evidence survived); skipped"));
                return Ok(());
            }
            if !report.end_unknown {
                r.fail(format!(
                    "round {round}: the topic opened unfenced after the lost data directory (cold ends at \
                     {cold_end}, acknowledged end {acked}): {report:?}"
                ));
            }
            let topic = store.topic(TOPIC).await.map_err(|e| ChaosError::tier("topic", e))?;
            let probe = |seq| vec![NewRecord::new(1, payload::encode(RecordId { writer: 999, seq }))];
            match topic.append(probe(0)).await {
                Err(e) if e.kind() == ErrorKind::Fenced && e.to_string().contains("resume") => {}
                Err(e) => r.fail(format!("round {round}: a fenced append failed otherwise: {e}")),
                Ok(got) => r.fail(format!(
                    "round {round}: an append was acknowledged at {got} before any operator decision \
                     (acknowledged end {acked})"
                )),
            }
            // What cold holds reads back; what it lacks was acknowledged but is gone.
            let excused = [OffsetRange::new(cold_end.min(acked), acked.max(cold_end))];
            let v = verify_topic(&topic, &out.acks, 0, &excused).await?;
            let acked_before = r.acked;
            r.absorb(&format!("round {round}, fenced"), &v);
            r.acked = acked_before + v.acked;

            let at = acked.max(report.next_offset);
            let resumed = match store.resume_topic(TOPIC, at).await {
                Ok(resumed) => resumed,
                Err(e) => {
                    r.fail(format!("round {round}: resume_topic({at}) failed: {e}"));
                    return Ok(());
                }
            };
            skipped += resumed.maybe_lost.iter().map(|l| l.end - l.start).sum::<u64>();
            if at > cold_end && !resumed.maybe_lost.iter().any(|l| l.start <= cold_end && l.end >= at) {
                r.fail(format!(
                    "round {round}: resuming at {at} with cold at {cold_end} does not report the skipped \
                     offsets maybe lost: {resumed:?}"
                ));
            }
            match topic.append(probe(1)).await {
                Ok(got) if got.start < acked => r.fail(format!(
                    "round {round}: after resuming at {at}, an append got {got}: acknowledged offsets reused"
                )),
                Ok(_) => {}
                Err(e) => r.fail(format!("round {round}: appending after resume_topic({at}): {e}")),
            }
            if let Err(e) = export_until_caught_up(&store, &topic).await {
                r.fail(format!("round {round}: {e}"));
            }
            Ok::<(), ChaosError>(())
        }
        .await;
        store.close().await;
        checked?;
    }
    r.notes.push(format!("seed {seed}; offsets skipped by resume_topic (maybe lost): {skipped}"));
    Ok(r)
}
