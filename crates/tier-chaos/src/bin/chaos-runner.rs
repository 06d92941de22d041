//! `chaos-runner`: runs tierlog's chaos scenarios (`cargo xtask chaos` builds and starts
//! it), prints the results table and exits non-zero if any scenario lost, duplicated or
//! skipped a record or failed a check.

// Tooling: seeds from the real clock and times real scenarios.
#![allow(clippy::disallowed_methods)]

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use tier_chaos::{
    process::sibling_binary,
    render_table,
    runner::{self, Plan},
};

/// Runs the chaos scenarios.
#[derive(Debug, Parser)]
struct Args {
    /// The short run (part of `cargo xtask test`); without it, the full run.
    #[arg(long)]
    quick: bool,
    /// Seed of every random choice (default: from the clock; printed either way).
    #[arg(long)]
    seed: Option<u64>,
    /// Run only the scenarios whose name contains this (e.g. `crash hot+warm+cold`).
    #[arg(long)]
    only: Option<String>,
    /// Leave out the scenarios whose name contains this (repeatable); each is listed as
    /// NOT RUN so a partial run is never mistaken for a full one.
    #[arg(long)]
    skip: Vec<String>,
    /// Kills per crash configuration and of the server (default 50 quick, 500 full).
    #[arg(long)]
    kills: Option<u64>,
    /// Duration of the load scenario in seconds (default 20 quick, 240 full).
    #[arg(long)]
    load_secs: Option<u64>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    for skip in &args.skip {
        println!("chaos: NOT RUN: scenarios matching {skip:?} (--skip)");
    }
    let plan = Plan {
        quick: args.quick,
        seed,
        only: args.only,
        skip: args.skip,
        kills: args.kills,
        load_secs: args.load_secs,
    };
    println!(
        "chaos: {} run, seed {seed} (replay with --seed {seed})",
        if plan.quick { "quick" } else { "full" }
    );
    let producer = sibling_binary("chaos-producer")?;
    let scratch =
        tempfile::Builder::new().prefix("tierlog-chaos-").tempdir().context("creating a scratch dir")?;
    let results = runner::run(&plan, scratch.path(), &producer).await?;
    println!();
    print!("{}", render_table(&results));
    let failed = results.iter().filter(|r| !r.passed()).count();
    println!("chaos: {} scenarios, {} passed, {failed} failed", results.len(), results.len() - failed);
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
