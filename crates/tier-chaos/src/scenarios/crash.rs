//! Scenario 1, process crash: a producer appending with acknowledgements (background
//! rotation, export, retention and warm trimming running every few tens of ms) is killed
//! with SIGKILL after a random delay and restarted on the same data directory; every few
//! kills the verifier opens the store and checks every acknowledged record is present
//! exactly once with its payload, offsets dense and continuous across tiers.

use std::{path::Path, time::Duration};

use crate::{
    ChaosError, ScenarioResult,
    deploy::{Deployment, Profile, Servers, store_config, write_config},
    process::{ProducerProcess, ProducerSpec},
    rng::Rng,
    scenarios::{open_and_verify, temp_dir},
};

/// Settings of one crash run.
#[derive(Clone, Debug)]
pub struct CrashOptions {
    /// Kills.
    pub kills: u64,
    /// Verify after every this many kills (and after the last).
    pub verify_every: u64,
    /// Shortest and longest delay between spawn and kill, in ms.
    pub delay_ms: (u64, u64),
    /// Seed of the delays.
    pub seed: u64,
}

/// Runs the crash scenario for `deployment` under `base` (a scratch directory).
pub async fn run(
    deployment: Deployment,
    servers: &Servers,
    base: &Path,
    producer: &Path,
    opts: &CrashOptions,
) -> Result<ScenarioResult, ChaosError> {
    let mut result = ScenarioResult::new(format!("crash {}", deployment.label()));
    let mut rng = Rng::new(opts.seed);
    let dir = temp_dir(base, "crash-")?;
    let tag = format!("crash-{}-{}", deployment.label().replace('+', "-"), opts.seed % 100_000);
    let config = store_config(deployment, dir.path(), servers, &tag, &Profile::default()).await?;
    let config_path = dir.path().join("store.toml");
    write_config(&config, &config_path)?;
    let topic = "chaos-crash";
    let mut acks = Vec::new();
    let mut never_ready = 0u64;
    let mut last_tiers = String::new();
    for kill in 0..opts.kills {
        let spec = ProducerSpec {
            binary: producer.to_path_buf(),
            config: config_path.clone(),
            topic: topic.into(),
            incarnation: kill,
            writers: 2,
            max_batch: 4,
        };
        let process = ProducerProcess::spawn(&spec)?;
        let delay = rng.between(opts.delay_ms.0, opts.delay_ms.1);
        // The delay *is* the fault's timing (where in the producer's work the kill lands),
        // not a wait for some condition.
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let out = process.kill().await?;
        if !out.ready {
            never_ready += 1;
        }
        acks.extend(out.acks);
        result.iterations += 1;
        if (kill + 1) % opts.verify_every == 0 || kill + 1 == opts.kills {
            let v = open_and_verify(&config, topic, &acks, &[]).await?;
            result.absorb(&format!("after kill {}", kill + 1), &v);
            last_tiers.clone_from(&v.tiers);
            if !v.is_clean() {
                break;
            }
        }
    }
    result.notes.push(format!(
        "seed {}; {} acks; {} kills landed before the store opened",
        opts.seed,
        acks.len(),
        never_ready
    ));
    result.notes.push(format!("at the last check: {last_tiers}"));
    if acks.is_empty() {
        result.fail("no append was ever acknowledged: the producer never got going");
    }
    Ok(result)
}
