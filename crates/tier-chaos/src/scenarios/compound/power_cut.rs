//! Stale checkpoint plus a power-cut tail (hot, `fsync = never`): a `chaos-producer`
//! process is SIGKILLed; then the active WAL segment is cut back by a random number of
//! bytes (what a power cut leaves of unsynced writes: whole batches and a torn one) and
//! the boot id in `<state_dir>/<topic>.reserved` is rewritten, so the restart is a new
//! OS boot (the page cache, with every unsynced write, is gone).
//!
//! Checks: every acknowledged offset the cut took is reported (`lost` or `maybe_lost`);
//! the next offset is at least the acknowledged end (no acknowledged offset reused, also
//! by a new append); every acknowledged record outside the reported ranges reads back.

use std::path::Path;
use std::time::Duration;

use tier_core::{TopicName, segment::SegmentHeader};
use tier_hot::FsyncPolicy;
use tier_router::{NewRecord, TieredStore};

use super::{acked_end, reported_losses, segment_files, unreported_losses};
use crate::{
    ChaosError, ScenarioResult,
    deploy::{Deployment, Profile, Servers, store_config, write_config},
    payload::{self, RecordId},
    process::{ProducerProcess, ProducerSpec},
    rng::Rng,
    scenarios::temp_dir,
    verify::verify_topic,
};

/// The row's name.
pub const NAME: &str = "compound power-cut-stale-checkpoint hot";

const TOPIC: &str = "chaos-power-cut";

/// Runs `rounds` kills and cuts, each on a fresh data directory.
pub async fn run(
    servers: &Servers,
    base: &Path,
    producer: &Path,
    rounds: u64,
    seed: u64,
) -> Result<ScenarioResult, ChaosError> {
    let mut r = ScenarioResult::new(NAME);
    let mut rng = Rng::new(seed);
    let mut cut_records = 0u64;
    let mut reported = 0u64;
    for round in 0..rounds {
        let dir = temp_dir(base, "powercut-")?;
        let tag = format!("powercut-{}-{round}", seed % 100_000);
        let mut config =
            store_config(Deployment::Hot, dir.path(), servers, &tag, &Profile::default()).await?;
        config.hot.fsync = FsyncPolicy::Never;
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
        // The kill's timing is the fault, not a wait for a condition.
        tokio::time::sleep(Duration::from_millis(rng.between(400, 1200))).await;
        let out = process.kill().await?;
        r.iterations += 1;
        let acked = acked_end(&out.acks);

        // The power cut: the active segment loses a random tail.
        let files = segment_files(&config.hot.data_dir.join(TOPIC))?;
        let Some(active) = files.last() else {
            r.fail(format!("round {round}: the producer left no WAL segment"));
            continue;
        };
        let bytes = std::fs::read(active).map_err(|e| ChaosError::io("reading the active segment", e))?;
        let header_len = SegmentHeader::decode(&bytes).map(|(_, n)| n as u64).unwrap_or(0);
        let len = bytes.len() as u64;
        let cut = if len > header_len { rng.between(1, len - header_len) } else { 0 };
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(active)
            .map_err(|e| ChaosError::io("opening the active segment", e))?;
        file.set_len(len - cut).map_err(|e| ChaosError::io("cutting the active segment", e))?;
        drop(file);
        // The reboot: the reservation was written during another OS boot.
        let reserved = dir.path().join("router").join(format!("{TOPIC}.reserved"));
        let text = std::fs::read_to_string(&reserved)
            .map_err(|e| ChaosError::io(format!("reading {}", reserved.display()), e))?;
        let mut words: Vec<String> = text.split_whitespace().map(str::to_owned).collect();
        if words.len() < 3 {
            r.fail(format!(
                "round {round}: {} holds {text:?}, not `<offset> <boot> <durable|lazy>`",
                reserved.display()
            ));
            continue;
        }
        words[1] = format!("chaos-reboot-{seed}-{round}");
        std::fs::write(&reserved, words.join(" ") + "\n")
            .map_err(|e| ChaosError::io(format!("writing {}", reserved.display()), e))?;

        let name = TopicName::new(TOPIC).map_err(|e| ChaosError::tier("topic name", e))?;
        let store = match TieredStore::open_recovering(config.clone(), vec![name]).await {
            Ok(store) => store,
            Err(e) => {
                r.fail(format!("round {round}: the store does not open after the power cut: {e}"));
                continue;
            }
        };
        let checked = async {
            let report =
                store.recover_topic(TOPIC).await.map_err(|e| ChaosError::tier("recovery report", e))?;
            let held = report.hot.end;
            cut_records += acked.saturating_sub(held);
            reported += reported_losses(&report).iter().map(|l| l.end - l.start).sum::<u64>();
            let unreported = unreported_losses(&out.acks, held, &report);
            if unreported > 0 {
                r.lost += unreported;
                r.fail(format!(
                    "round {round}: {unreported} acknowledged offsets the cut took are not reported lost \
                     (WAL ends at {held}, acknowledged end {acked}; {report:?})"
                ));
            }
            if report.next_offset < acked {
                r.fail(format!(
                    "round {round}: next offset {} is below the acknowledged end {acked}: offsets would be \
                     reused ({report:?})",
                    report.next_offset
                ));
            }
            let topic = store.topic(TOPIC).await.map_err(|e| ChaosError::tier("topic", e))?;
            let v = verify_topic(&topic, &out.acks, 0, &reported_losses(&report)).await?;
            let acked_before = r.acked;
            r.absorb(&format!("round {round}"), &v);
            r.acked = acked_before + v.acked;
            let probe = vec![NewRecord::new(1, payload::encode(RecordId { writer: 999, seq: 0 }))];
            match topic.append(probe).await {
                Ok(got) if got.start < acked => r.fail(format!(
                    "round {round}: a new append got offset {}, below the acknowledged end {acked}",
                    got.start
                )),
                Ok(_) => {}
                Err(e) => r.fail(format!("round {round}: appending after the power cut: {e}")),
            }
            Ok::<(), ChaosError>(())
        }
        .await;
        store.close().await;
        checked?;
    }
    r.notes.push(format!(
        "seed {seed}; acknowledged records the cuts took: {cut_records}; offsets reported lost or maybe lost: \
         {reported}"
    ));
    Ok(r)
}
