//! `tierlog`: the command-line program of the tierlog workspace.
//!
//! It opens the store a TOML configuration describes (embedded defaults: WAL under
//! `./data/hot`, cold tier in `./data/cold`) and produces, consumes, shows status,
//! exports, verifies, recovers, and runs a demo. The commands, exit codes and
//! configuration are documented in `docs/cli.md`, `docs/configuration.md` and
//! `docs/metrics.md`.

mod cli;
mod cmd;
mod config;
mod exit;
mod metrics;
mod progress;
mod store;
mod units;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { exit::USAGE } else { exit::OK };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    init_tracing();
    std::panic::set_hook(Box::new(|info| {
        let message = info.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
        eprintln!("error: internal error (a bug in tierlog): {message}");
    }));
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::ERROR);
        }
    };
    let result = runtime.block_on(cmd::run(cli));
    // Do not wait for a thread blocked on stdin.
    runtime.shutdown_timeout(Duration::from_millis(200));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("{}", exit::one_line(&e));
            ExitCode::from(exit::code_for(&e))
        }
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (default `warn`).
fn init_tracing() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
