//! Runs a plan of scenarios (quick or full) against servers started by tier-testkit's
//! harness and collects their results. A scenario that cannot run at all becomes a
//! failed result naming the error, so the table is always complete.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use tier_router::WarmFailurePolicy;

use crate::{
    ChaosError, ScenarioResult,
    deploy::{Deployment, Servers},
    scenarios::{
        bad_input, compound, corruption, crash, full_disk, handover, load, lost_disk, objstore_faults,
        server_kill, valkey_failover, valkey_faults,
    },
};

/// How much to run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Quick (part of `cargo xtask test`) or full (>= 10x the iterations).
    pub quick: bool,
    /// Seed of every random choice (printed, to replay a run).
    pub seed: u64,
    /// Run only scenarios whose name contains this (e.g. `crash hot+warm`).
    pub only: Option<String>,
    /// Leave out scenarios whose name contains any of these (each is printed as not run).
    pub skip: Vec<String>,
    /// Overrides the number of kills per crash configuration (and of the server).
    pub kills: Option<u64>,
    /// Overrides the load scenario's duration in seconds (default 20 quick, 240 full).
    pub load_secs: Option<u64>,
}

impl Plan {
    /// Kills per crash configuration, and of the tierlog server in `server-kill hot`.
    pub fn kills(&self) -> u64 {
        self.kills.unwrap_or(if self.quick { 50 } else { 500 })
    }

    /// Moves of the topic between the two servers of `handover fail`.
    pub fn handover_moves(&self) -> u64 {
        if self.quick { 20 } else { 100 }
    }

    /// Whether scenario `name` is selected.
    pub fn wants(&self, name: &str) -> bool {
        self.only.as_ref().is_none_or(|only| name.contains(only.as_str()))
            && !self.skip.iter().any(|skip| name.contains(skip.as_str()))
    }

    /// Deployments the crash scenario covers (quick: the two extremes).
    pub fn crash_deployments(&self) -> Vec<Deployment> {
        if self.quick { vec![Deployment::Hot, Deployment::HotWarmCold] } else { Deployment::ALL.to_vec() }
    }

    /// WAL deletions per lost-disk configuration.
    pub fn lost_disk_rounds(&self) -> u64 {
        if self.quick { 3 } else { 30 }
    }

    /// Rounds of each compound scenario (the warm outage alternates restarts with Valkey
    /// up and down, so it runs at least two).
    pub fn compound_rounds(&self) -> u64 {
        if self.quick { 2 } else { 20 }
    }
}

fn or_failed(name: String, outcome: Result<ScenarioResult, ChaosError>) -> ScenarioResult {
    outcome.unwrap_or_else(|e| {
        let mut r = ScenarioResult::new(name);
        r.fail(format!("could not run: {e}"));
        r
    })
}

/// Runs every scenario of `plan` with scratch data under `base`, printing each result
/// as it completes.
pub async fn run(plan: &Plan, base: &Path, producer: &Path) -> Result<Vec<ScenarioResult>, ChaosError> {
    let mut servers = Servers::start().await?;
    let mut results = Vec::new();
    let mut push = |r: ScenarioResult, started: Instant| {
        println!(
            "chaos: {} {} in {:.1}s ({} iterations, {} acked, {} lost, {} duplicated, {} gaps)",
            r.name,
            if r.passed() { "passed" } else { "FAILED" },
            started.elapsed().as_secs_f64(),
            r.iterations,
            r.acked,
            r.lost,
            r.duplicated,
            r.gaps
        );
        results.push(r);
    };
    for (i, deployment) in plan.crash_deployments().into_iter().enumerate() {
        if !plan.wants(&format!("crash {}", deployment.label())) {
            continue;
        }
        let started = Instant::now();
        let opts = crash::CrashOptions {
            kills: plan.kills(),
            verify_every: if plan.quick { 10 } else { 50 },
            delay_ms: (150, 700),
            seed: plan.seed.wrapping_add(i as u64),
        };
        let outcome = crash::run(deployment, &servers, base, producer, &opts).await;
        push(or_failed(format!("crash {}", deployment.label()), outcome), started);
    }
    if plan.wants(server_kill::NAME) {
        let started = Instant::now();
        let opts = server_kill::ServerKillOptions {
            kills: plan.kills(),
            uptime_ms: (100, 400),
            seed: plan.seed.wrapping_add(50),
        };
        let outcome = match server_kill::tierlog_binary() {
            Ok(tierlog) => server_kill::run(&servers, base, &tierlog, &opts).await,
            Err(e) => Err(e),
        };
        push(or_failed(server_kill::NAME.into(), outcome), started);
    }
    if plan.wants(handover::NAME) {
        let started = Instant::now();
        let opts = handover::HandoverOptions {
            moves: plan.handover_moves(),
            uptime_ms: (150, 600),
            seed: plan.seed.wrapping_add(60),
        };
        let outcome = match server_kill::tierlog_binary() {
            Ok(tierlog) => Box::pin(handover::run(&servers, base, &tierlog, &opts)).await,
            Err(e) => Err(e),
        };
        push(or_failed(handover::NAME.into(), outcome), started);
    }
    for (i, deployment) in Deployment::ALL.into_iter().enumerate() {
        if !plan.wants(&format!("lost-disk {}", deployment.label())) {
            continue;
        }
        let started = Instant::now();
        let seed = plan.seed.wrapping_add(100 + i as u64);
        let outcome =
            lost_disk::run(deployment, &servers, base, producer, plan.lost_disk_rounds(), seed).await;
        push(or_failed(format!("lost-disk {}", deployment.label()), outcome), started);
    }
    for policy in [WarmFailurePolicy::Fail, WarmFailurePolicy::Degrade] {
        let name =
            format!("valkey-faults {}", if policy == WarmFailurePolicy::Fail { "fail" } else { "degrade" });
        if !plan.wants(&name) {
            continue;
        }
        let rounds = if plan.quick { 1 } else { 10 };
        for round in 0..rounds {
            let started = Instant::now();
            let seed = plan.seed.wrapping_add(200 + round);
            let outcome = valkey_faults::run(policy, &mut servers, base, seed).await;
            push(or_failed(name.clone(), outcome), started);
        }
    }
    if plan.wants(valkey_failover::NAME) {
        let started = Instant::now();
        let rounds = if plan.quick { 1 } else { 10 };
        let outcome = valkey_failover::run(&servers, base, rounds, plan.seed.wrapping_add(250)).await;
        push(or_failed(valkey_failover::NAME.into(), outcome), started);
    }
    run_compound(plan, &mut servers, base, producer, &mut push).await;
    if plan.wants(full_disk::NAME) {
        let started = Instant::now();
        let rounds = if plan.quick { 2 } else { 20 };
        let outcome = full_disk::run(&servers, rounds, plan.seed.wrapping_add(500)).await;
        push(or_failed(full_disk::NAME.into(), outcome), started);
    }
    if plan.wants("corruption hot+cold") {
        let started = Instant::now();
        push(or_failed("corruption hot+cold".into(), corruption::run(base).await), started);
    }
    if plan.wants("bad-input hot+cold") {
        let started = Instant::now();
        push(or_failed("bad-input hot+cold".into(), Box::pin(bad_input::run(&servers, base)).await), started);
    }
    if plan.wants("load hot+warm+cold") {
        let started = Instant::now();
        let duration = Duration::from_secs(plan.load_secs.unwrap_or(if plan.quick { 20 } else { 240 }));
        push(
            or_failed("load hot+warm+cold".into(), load::run(&servers, base, duration, plan.seed).await),
            started,
        );
    }
    // Last: it restarts moto, which empties every bucket.
    if plan.wants("objstore-faults hot+cold") {
        let rounds = if plan.quick { 1 } else { 10 };
        for round in 0..rounds {
            let started = Instant::now();
            let outcome = objstore_faults::run(&mut servers, base, plan.seed.wrapping_add(300 + round)).await;
            push(or_failed("objstore-faults hot+cold".into(), outcome), started);
        }
    }
    Ok(results)
}

/// The compound scenarios (two faults in a row), each a row.
async fn run_compound(
    plan: &Plan,
    servers: &mut Servers,
    base: &Path,
    producer: &Path,
    push: &mut impl FnMut(ScenarioResult, Instant),
) {
    use compound::{damaged_topic, lost_data_dir, lost_wal, power_cut, warm_outage};
    let rounds = plan.compound_rounds();
    let seed = |n: u64| plan.seed.wrapping_add(400 + n);
    if plan.wants(lost_wal::NAME) {
        let started = Instant::now();
        let outcome = lost_wal::run(servers, base, rounds, seed(0)).await;
        push(or_failed(lost_wal::NAME.into(), outcome), started);
    }
    if plan.wants(power_cut::NAME) {
        let started = Instant::now();
        let outcome = power_cut::run(servers, base, producer, rounds, seed(1)).await;
        push(or_failed(power_cut::NAME.into(), outcome), started);
    }
    if plan.wants(lost_data_dir::NAME) {
        let started = Instant::now();
        let outcome = lost_data_dir::run(servers, base, producer, rounds, seed(2)).await;
        push(or_failed(lost_data_dir::NAME.into(), outcome), started);
    }
    if plan.wants(warm_outage::NAME) {
        let started = Instant::now();
        let outcome = warm_outage::run(servers, base, rounds, seed(3)).await;
        push(or_failed(warm_outage::NAME.into(), outcome), started);
    }
    if plan.wants(damaged_topic::NAME) {
        let started = Instant::now();
        let outcome = damaged_topic::run(servers, base, rounds, seed(4)).await;
        push(or_failed(damaged_topic::NAME.into(), outcome), started);
    }
}
