//! `cargo xtask sim`: builds `tier-sim` (debug profile, dependencies at opt-level 1, like
//! `chaos`; with `--optimized` the `sim` profile: release optimisation with debug assertions
//! and overflow checks kept) and runs its `sim-runner`: seeded schedules of appends, reads, background work
//! and compound faults against the real router, WAL and cold tier, with a reference model
//! checked after every step (see `docs/simulation.md`). Prints a table and, for each
//! invariant broken, a seed and the shrunk schedule; exits non-zero on any violation.

use std::{path::Path, process::Command};

use anyhow::Result;

use crate::cmd::{self, Captured};

/// Options of `cargo xtask sim`.
#[derive(Debug, clap::Args)]
pub(crate) struct SimArgs {
    /// Run this many schedules (default: as many as fit in --secs).
    #[arg(long)]
    seeds: Option<u64>,
    /// Replay one schedule verbosely (printed step by step, run twice to check it replays
    /// exactly).
    #[arg(long)]
    seed: Option<u64>,
    /// With --seed: keep only these step indices (a shrunk schedule), comma-separated.
    #[arg(long)]
    keep: Option<String>,
    /// The version of the step generator (default: the current one; see
    /// `tier_sim::schedule::GENERATOR`, the `generator` of each regression schedule, and
    /// the versions in `docs/simulation.md`).
    #[arg(long)]
    generator: Option<u32>,
    /// How long to run, in seconds, when --seeds is not given.
    #[arg(long, default_value_t = 60)]
    secs: u64,
    /// Steps per schedule.
    #[arg(long)]
    steps: Option<u32>,
    /// The first seed of the run (default: from the clock; printed).
    #[arg(long)]
    start: Option<u64>,
    /// Leave out the steps that destroy data or disturb warm (the model's sanity check, and
    /// what `cargo xtask test` runs while the full fault mix still finds violations).
    #[arg(long)]
    benign: bool,
    /// Build with the `sim` profile (release optimisation, debug assertions and overflow
    /// checks kept): a few minutes more to build, several times the schedules per minute —
    /// for long runs such as `--seeds 100000`.
    #[arg(long)]
    optimized: bool,
    /// Skip the regression schedules (they are replayed first otherwise).
    #[arg(long)]
    no_regressions: bool,
}

impl SimArgs {
    /// The run `cargo xtask test` makes: the regression schedules, then 60 seconds of the
    /// full fault mix from a fresh seed (`docs/simulation.md`).
    pub(crate) fn for_test() -> Self {
        Self {
            seeds: None,
            seed: None,
            keep: None,
            generator: None,
            secs: 60,
            steps: None,
            start: None,
            benign: false,
            optimized: false,
            no_regressions: false,
        }
    }
}

/// Builds the runner and runs it from `root`; returns its captured output.
pub(crate) fn run(root: &Path, args: &SimArgs) -> Result<Captured> {
    let dir = if args.optimized {
        cmd::run(cmd::cargo().current_dir(root).args([
            "build",
            "--profile",
            "sim",
            "-p",
            "tier-sim",
            "--bins",
        ]))?;
        "sim"
    } else {
        cmd::build_workspace_bins(root)?;
        "debug"
    };
    let mut runner = Command::new(cmd::target_dir(root).join(dir).join("sim-runner"));
    runner.current_dir(root).arg("--secs").arg(args.secs.to_string());
    if let Some(n) = args.seeds {
        runner.arg("--seeds").arg(n.to_string());
    }
    if let Some(seed) = args.seed {
        runner.arg("--seed").arg(seed.to_string());
    }
    if let Some(keep) = &args.keep {
        runner.arg("--keep").arg(keep);
    }
    if let Some(generator) = args.generator {
        runner.arg("--generator").arg(generator.to_string());
    }
    if let Some(steps) = args.steps {
        runner.arg("--steps").arg(steps.to_string());
    }
    if let Some(start) = args.start {
        runner.arg("--start").arg(start.to_string());
    }
    if args.benign {
        runner.arg("--benign");
    }
    if args.no_regressions {
        runner.arg("--no-regressions");
    }
    cmd::run_tee(&mut runner)
}

/// The table's schedule and violation rows, for the `cargo xtask test` summary.
pub(crate) fn summary_lines(captured: &Captured) -> Vec<String> {
    captured
        .lines
        .iter()
        .filter(|l| {
            l.starts_with("| schedules")
                || l.starts_with("| violations")
                || l.starts_with("|   ")
                || l.starts_with("sim: first seed")
        })
        .map(|l| l.trim().to_owned())
        .collect()
}
