//! `cargo xtask chaos [--quick]`: builds `tier-chaos` (debug profile: dependencies at
//! opt-level 1 build much faster than a release build and run fast enough) and runs its
//! `chaos-runner`, which starts its own Valkey pair and moto server through tier-testkit's
//! harness, injects the faults, prints the results table and exits non-zero if any
//! record was lost, duplicated or skipped or a check failed. The guarantees each
//! scenario shows are in `docs/reliability.md`.

use std::{path::Path, process::Command};

use anyhow::Result;

use crate::cmd::{self, Captured};

/// Options of `cargo xtask chaos`.
#[derive(Debug, clap::Args)]
pub(crate) struct ChaosArgs {
    /// The short run (about 2 minutes; part of `cargo xtask test`).
    #[arg(long)]
    quick: bool,
    /// Seed of every random choice (replays a run; printed by every run).
    #[arg(long)]
    seed: Option<u64>,
    /// Only the scenarios whose name contains this, e.g. `crash hot+warm+cold`.
    #[arg(long)]
    only: Option<String>,
}

impl ChaosArgs {
    /// The quick run with a fresh seed, as `cargo xtask test` runs it.
    pub(crate) fn quick() -> Self {
        Self { quick: true, seed: None, only: None }
    }
}

/// Builds the runner and the producer, then runs the scenarios from `root`; returns the
/// runner's captured output (the table is its last lines).
pub(crate) fn run(root: &Path, args: &ChaosArgs) -> Result<Captured> {
    cmd::run(cmd::cargo().current_dir(root).args(["build", "-p", "tier-chaos", "--bins"]))?;
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), Into::into);
    let mut runner = Command::new(Path::new(&target).join("debug/chaos-runner"));
    runner.current_dir(root);
    if args.quick {
        runner.arg("--quick");
    }
    if let Some(seed) = args.seed {
        runner.arg("--seed").arg(seed.to_string());
    }
    if let Some(only) = &args.only {
        runner.arg("--only").arg(only);
    }
    cmd::run_tee(&mut runner)
}

/// The table rows and failure lines of a run, for a summary.
pub(crate) fn summary_lines(captured: &Captured) -> Vec<String> {
    captured
        .lines
        .iter()
        .filter(|l| l.ends_with(" PASS") || l.ends_with(" FAIL") || l.trim_start().starts_with("FAIL "))
        .chain(captured.lines.iter().filter(|l| l.starts_with("chaos: ") && l.contains("seed")))
        .map(|l| l.trim().to_owned())
        .collect()
}
