//! `cargo xtask bench [--quick]`: builds `tier-bench` in release mode and runs it.
//!
//! `tier-bench` starts its own Valkey pair and moto server, measures each workload
//! against a baseline taken in the same run, prints a markdown table and writes JSON to
//! `target/bench/<unix time>.json` and `target/bench/latest.json`. The workloads and the
//! latest numbers are in `docs/benchmarks.md`.

use std::path::Path;

use anyhow::Result;

use crate::cmd;

/// Options of `cargo xtask bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// Smaller data sets and shorter cases (about 3 minutes instead of up to 20).
    #[arg(long)]
    quick: bool,
    /// Run only these workloads (numbers 1-12, comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<u32>,
}

/// Builds and runs `tier-bench` in release mode from the workspace root `root`.
pub(crate) fn run(root: &Path, args: &BenchArgs) -> Result<()> {
    let mut cargo = cmd::cargo();
    cargo.current_dir(root).args(["run", "--release", "-p", "tier-bench", "--"]);
    if args.quick {
        cargo.arg("--quick");
    }
    if !args.only.is_empty() {
        let only: Vec<String> = args.only.iter().map(u32::to_string).collect();
        cargo.arg("--only").arg(only.join(","));
    }
    cmd::run(&mut cargo)
}
