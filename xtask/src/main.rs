//! `cargo xtask`: tierlog's developer and CI tasks.
//!
//! - `deps`: installs what the tests and lints need (Valkey, moto, Azurite, fake-gcs-server, Chromium,
//!   cargo-deny, the advisory DB).
//! - `test`: the full check CI runs (`.ci/run`): fmt, clippy, rustdoc, deny, feature builds, every
//!   test against shared real servers, a short fuzz run, and a summary table.
//! - `fuzz`: runs tier-core's decoder fuzz test in release mode for a while.
//! - `servers`: starts the shared test servers and keeps them up until Ctrl-C.
//! - `bench`: builds and runs `tier-bench` (release), tierlog against same-run baselines.
//! - `chaos`: builds and runs `tier-chaos`'s fault scenarios (`--quick` is part of `test`).
//! - `sim`: builds and runs `tier-sim`'s deterministic simulation (60 s of it is part of `test`).

// Tooling: times the tasks it runs.
#![allow(clippy::disallowed_methods)]

mod backends;
mod bench;
mod chaos;
mod cmd;
mod deps;
mod fuzz;
mod matrix;
mod report;
mod servers;
mod sim;
mod test;
mod testout;

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use clap::{Parser, Subcommand};

/// tierlog's developer tasks.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "tierlog's developer tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Install what is missing: Valkey, moto (in target/venv), Azurite (target/azurite),
    /// fake-gcs-server (target/fake-gcs-server), Chromium, cargo-deny, the advisory DB.
    Deps,
    /// Run everything CI runs and print a summary table.
    Test(test::TestArgs),
    /// Run tier-core's decoder fuzz test in release mode.
    Fuzz {
        /// How long to fuzz, in seconds.
        #[arg(long, default_value_t = 60)]
        secs: u64,
    },
    /// Start the shared Valkey pair and S3 server, print their env exports, wait for Ctrl-C.
    Servers,
    /// Run the benchmarks (`tier-bench`, release build) against same-run baselines.
    Bench(bench::BenchArgs),
    /// Run the chaos scenarios (crash, lost disk, corruption, bad input) and print the table.
    Chaos(chaos::ChaosArgs),
    /// Run the deterministic simulation (seeded fault schedules against a model).
    Sim(sim::SimArgs),
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    let root = workspace_root();
    std::env::set_current_dir(&root)?;
    match cli.task {
        Task::Deps => {
            for line in deps::ensure_all(&root)? {
                println!("{}{line}", deps::READY);
            }
            Ok(ExitCode::SUCCESS)
        }
        Task::Test(args) => test::run(&root, &args),
        Task::Fuzz { secs } => {
            let outcome = fuzz::run(secs, fuzz::Build::Release)?;
            println!("fuzz: {}", outcome.summary());
            Ok(if outcome.passed() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Task::Servers => servers::run().map(|()| ExitCode::SUCCESS),
        Task::Bench(args) => bench::run(&root, &args).map(|()| ExitCode::SUCCESS),
        Task::Chaos(args) => {
            let captured = chaos::run(&root, &args)?;
            Ok(if captured.status.success() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Task::Sim(args) => {
            let captured = sim::run(&root, &args)?;
            Ok(if captured.status.success() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
    }
}

/// The workspace root: the parent of this package's directory.
fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest_dir.parent().expect("xtask's manifest directory sits inside the workspace root");
    root.to_path_buf()
}
