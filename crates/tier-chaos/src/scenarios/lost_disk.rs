//! Scenario 2, lost disk: the WAL directory is deleted while a producer appends; the
//! producer is then stopped and the store reopened on the empty disk.
//!
//! - hot+warm and hot+warm+cold: every acknowledged record is recovered from warm and
//!   cold (warm keeps enough closed segments here to hold everything cold lacks) and
//!   recovery reports no loss.
//! - hot and hot+cold: recovery reports exactly the acknowledged range cold did not hold
//!   (`[cold end, acknowledged end)`, all of it without cold) as lost, and every
//!   acknowledged record outside it is still readable.

use std::{path::Path, time::Duration};

use tier_core::{OffsetRange, TopicName};
use tier_router::TieredStore;

use crate::{
    ChaosError, ScenarioResult,
    deploy::{Deployment, Profile, Servers, store_config, write_config},
    process::{ProducerProcess, ProducerSpec},
    rng::Rng,
    scenarios::temp_dir,
    verify::verify_topic,
};

/// Runs `rounds` WAL deletions for `deployment`.
pub async fn run(
    deployment: Deployment,
    servers: &Servers,
    base: &Path,
    producer: &Path,
    rounds: u64,
    seed: u64,
) -> Result<ScenarioResult, ChaosError> {
    let mut result = ScenarioResult::new(format!("lost-disk {}", deployment.label()));
    let mut rng = Rng::new(seed);
    let mut reported_lost = 0u64;
    for round in 0..rounds {
        let dir = temp_dir(base, "lost-")?;
        let tag = format!("lost-{}-{}-{round}", deployment.label().replace('+', "-"), seed % 100_000);
        let profile = Profile { max_cached_closed_segments: 100_000, ..Profile::default() };
        let config = store_config(deployment, dir.path(), servers, &tag, &profile).await?;
        let config_path = dir.path().join("store.toml");
        write_config(&config, &config_path)?;
        let topic = "chaos-lost-disk";
        let spec = ProducerSpec {
            binary: producer.to_path_buf(),
            config: config_path,
            topic: topic.into(),
            incarnation: 0,
            writers: 2,
            max_batch: 8,
        };
        let process = ProducerProcess::spawn(&spec)?;
        // Fault timing, not synchronisation: produce for a random while, lose the disk,
        // keep producing on the lost disk for a moment.
        tokio::time::sleep(Duration::from_millis(rng.between(500, 1200))).await;
        delete_tree(&config.hot.data_dir)?;
        tokio::time::sleep(Duration::from_millis(rng.between(50, 300))).await;
        let out = process.stop().await?;
        result.iterations += 1;
        if !out.closed {
            result.fail(format!("round {round}: the producer did not close gracefully after the disk loss"));
        }
        let acked_end = out.acks.iter().map(|a| a.range.end).max().unwrap_or(0);
        let name = TopicName::new(topic).map_err(|e| ChaosError::tier("topic name", e))?;
        let store = TieredStore::open_recovering(config.clone(), vec![name])
            .await
            .map_err(|e| ChaosError::tier("reopening after the disk loss", e))?;
        let checked = async {
            let report = store.recover_topic(topic).await.map_err(|e| ChaosError::tier("recovery report", e))?;
            let cold_end = report.cold.map_or(0, |r| r.end);
            let expected: Vec<OffsetRange> = if deployment.warm() || cold_end >= acked_end {
                vec![]
            } else {
                vec![OffsetRange { start: cold_end, end: acked_end }]
            };
            if report.lost != expected {
                result.fail(format!(
                    "round {round}: recovery reported lost {:?}, expected exactly {expected:?} \
                     (acknowledged end {acked_end}, cold end {cold_end}, next offset {})",
                    report.lost, report.next_offset
                ));
            }
            if report.next_offset < acked_end {
                result.fail(format!(
                    "round {round}: next offset {} is below the acknowledged end {acked_end}: offsets would be reused",
                    report.next_offset
                ));
            }
            reported_lost += expected.iter().map(|r| r.end - r.start).sum::<u64>();
            let handle = store.topic(topic).await.map_err(|e| ChaosError::tier("opening the topic", e))?;
            verify_topic(&handle, &out.acks, 0, &expected).await
        }
        .await;
        store.close().await;
        let v = checked?;
        let acked_before = result.acked;
        result.absorb(&format!("round {round}"), &v);
        result.acked = acked_before + v.acked;
    }
    result.notes.push(format!("seed {seed}; acknowledged records reported lost (expected): {reported_lost}"));
    Ok(result)
}

/// Deletes `dir` and everything in it while a producer may still be creating files in
/// it (a new segment after a rotation): retried until the directory is gone.
pub(crate) fn delete_tree(dir: &Path) -> Result<(), ChaosError> {
    let mut attempts = 0;
    loop {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(_) if attempts < 50 => attempts += 1,
            Err(e) => return Err(ChaosError::io(format!("deleting {}", dir.display()), e)),
        }
    }
}
