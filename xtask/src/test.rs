//! `cargo xtask test`: everything CI checks, in order, each step timed.
//!
//! Lint steps (deps, fmt, clippy, rustdoc, deny, feature builds) fail fast: after the
//! first failure the rest are reported as skipped (unless `--keep-going`). deps runs as a
//! child process (`xtask deps`) beside fmt, clippy and rustdoc, which need nothing it
//! installs; its output is printed when it ends, before deny. The test steps
//! (workspace tests against shared servers, a 60-second simulation run, doctests, the
//! examples, a short fuzz run, the quick chaos run) all run even if one fails.
//! After the workspace tests it prints tier-router's deployment matrix and the
//! deployments × backends matrix (`backends.rs`).
//! The summary table is always printed, and its very last line is `N passed, N failed`.

use std::{
    fs::File,
    path::{Path, PathBuf},
    process::{Command, ExitCode, Stdio},
    time::Instant,
};

use anyhow::{Context, Result};

use crate::{
    backends, chaos, cmd, fuzz, matrix,
    report::{self, Outcome, StepReport},
    servers, sim,
    testout::{self, TestTally},
};

/// Options of `cargo xtask test`.
#[derive(Debug, clap::Args)]
pub(crate) struct TestArgs {
    /// Run the later steps even after a lint step failed.
    #[arg(long)]
    keep_going: bool,
    /// How long the quick fuzz run lasts, in seconds (in the test build).
    #[arg(long, default_value_t = 10)]
    fuzz_secs: u64,
}

/// What one step's body reports back.
struct StepResult {
    ok: bool,
    details: Vec<String>,
}

/// The steps run so far and the test totals.
#[derive(Default)]
struct Run {
    steps: Vec<StepReport>,
    passed: u64,
    failed: u64,
}

impl Run {
    /// Runs `body` as the step `name`, timing it; an `Err` is a failed step whose details
    /// are the error chain. Returns whether the step passed.
    fn step(&mut self, name: &str, body: impl FnOnce() -> Result<StepResult>) -> bool {
        println!("\n==> {name}");
        let started = Instant::now();
        let (ok, mut details) = match body() {
            Ok(result) => (result.ok, result.details),
            Err(e) => (false, error_lines(&e)),
        };
        if !ok && details.is_empty() {
            details.push("see its output above".into());
        }
        let outcome = if ok { Outcome::Passed } else { Outcome::Failed };
        self.steps.push(StepReport { name: name.into(), outcome, duration: started.elapsed(), details });
        ok
    }

    fn skip(&mut self, name: &str, why: &str) {
        self.steps.push(StepReport::skipped(name, why));
    }

    fn count(&mut self, tally: &TestTally) {
        self.passed += tally.passed();
        self.failed += tally.failed();
    }

    fn any_failed(&self) -> bool {
        self.steps.iter().any(|s| s.outcome == Outcome::Failed)
    }
}

/// Runs every step and prints the summary; the exit code is failure if any step failed.
pub(crate) fn run(root: &Path, args: &TestArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let mut run = Run::default();
    let lints_ok = run_lints(&mut run, root, args.keep_going);
    if lints_ok || args.keep_going {
        run_tests(&mut run, args.fuzz_secs);
    } else {
        for name in ["servers", "tests", "sim", "doctests", "examples", "fuzz", "chaos"] {
            run.skip(name, "a lint step failed");
        }
    }
    println!("\n==> summary ({} in all)\n", report::format_duration(started.elapsed()));
    print!("{}", report::render_table(&run.steps));
    println!("{} passed, {} failed", run.passed, run.failed);
    Ok(if run.any_failed() { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// deps (in the background from the start), fmt, clippy, rustdoc, deny, feature builds;
/// stops at the first failure unless `keep_going` (deps is waited for either way).
fn run_lints(run: &mut Run, root: &Path, keep_going: bool) -> bool {
    type Lint = fn(&Path) -> Result<StepResult>;
    let started = Instant::now();
    let deps = Deps::start(root);
    let before: [(&str, Lint); 3] = [("fmt", fmt), ("clippy", |_| clippy()), ("rustdoc", |_| rustdoc())];
    let after: [(&str, Lint); 2] = [("deny", |_| deny()), ("features", |_| feature_builds())];
    let mut all_ok = true;
    for (name, lint) in before {
        if !all_ok && !keep_going {
            run.skip(name, "an earlier step failed");
            continue;
        }
        all_ok &= run.step(name, || lint(root));
    }
    // Timed from here: the table's time is what the run waited for it; its own run time
    // is in the details.
    all_ok &= run.step("deps", || deps?.finish(started));
    for (name, lint) in after {
        if !all_ok && !keep_going {
            run.skip(name, "an earlier step failed");
            continue;
        }
        all_ok &= run.step(name, || lint(root));
    }
    all_ok
}

/// `xtask deps` running as a child process, its output going to a log file; a thread
/// waits for it and notes when it ended.
struct Deps {
    waiter: std::thread::JoinHandle<std::io::Result<(std::process::ExitStatus, Instant)>>,
    log: PathBuf,
}

impl Deps {
    /// Starts `xtask deps` (this program) with its output in `<target>/xtask-deps.log`.
    fn start(root: &Path) -> Result<Self> {
        let dir = cmd::target_dir(root);
        std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
        let log = dir.join("xtask-deps.log");
        let out = File::create(&log).with_context(|| format!("could not create {}", log.display()))?;
        let err = out.try_clone()?;
        let program = std::env::current_exe().context("could not find the xtask binary")?;
        let mut child = Command::new(program)
            .arg("deps")
            .current_dir(root)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .context("could not start `xtask deps`")?;
        let waiter = std::thread::spawn(move || child.wait().map(|status| (status, Instant::now())));
        Ok(Self { waiter, log })
    }

    /// Waits for it, prints its output, and reports how long it ran and the lines saying
    /// what is ready (or, if it failed, its last lines).
    fn finish(self, started: Instant) -> Result<StepResult> {
        let (status, ended) = self
            .waiter
            .join()
            .map_err(|_| anyhow::anyhow!("the thread waiting for `xtask deps` panicked"))?
            .context("waiting for `xtask deps`")?;
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        print!("{text}");
        let lines: Vec<String> =
            text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect();
        let mut details = vec![format!(
            "ran {} beside fmt, clippy and rustdoc",
            report::format_duration(ended.duration_since(started))
        )];
        if status.success() {
            details
                .extend(lines.iter().filter_map(|l| l.strip_prefix(crate::deps::READY)).map(str::to_owned));
        } else {
            details.extend(lines[lines.len().saturating_sub(4)..].iter().cloned());
        }
        Ok(StepResult { ok: status.success(), details })
    }
}

fn cargo(args: &[&str]) -> Command {
    let mut cargo = cmd::cargo();
    cargo.args(args).env("CARGO_TERM_COLOR", "never");
    cargo
}

fn fmt(root: &Path) -> Result<StepResult> {
    let root_prefix = format!("{}/", root.display());
    let captured = cmd::run_tee(&mut cargo(&["fmt", "--all", "--", "--check", "--color", "never"]))?;
    let mut files: Vec<String> = captured
        .lines
        .iter()
        .filter_map(|l| l.strip_prefix("Diff in "))
        .map(|rest| rest.split(':').next().unwrap_or(rest))
        .map(|path| path.strip_prefix(&root_prefix).unwrap_or(path).to_owned())
        .collect();
    files.dedup();
    let details = if files.is_empty() { vec![] } else { with_limit("needs `cargo fmt --all`: ", &files, 8) };
    Ok(StepResult { ok: captured.status.success(), details })
}

fn clippy() -> Result<StepResult> {
    let captured =
        cmd::run_tee(&mut cargo(&["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]))?;
    let failures: Vec<String> = captured
        .lines
        .iter()
        .filter_map(|l| l.strip_prefix("error: could not compile "))
        .map(str::to_owned)
        .collect();
    let details = if failures.is_empty() { vec![] } else { with_limit("could not compile ", &failures, 8) };
    Ok(StepResult { ok: captured.status.success(), details })
}

/// `cargo doc --workspace --no-deps` with every rustdoc warning an error (broken or
/// ambiguous intra-doc links, bad code blocks).
fn rustdoc() -> Result<StepResult> {
    let mut command = cargo(&["doc", "--workspace", "--no-deps"]);
    command.env("RUSTDOCFLAGS", "-D warnings");
    let captured = cmd::run_tee(&mut command)?;
    let failures: Vec<String> =
        captured.lines.iter().filter(|l| l.starts_with("error")).map(|l| l.trim().to_owned()).collect();
    Ok(StepResult { ok: captured.status.success(), details: with_limit("", &failures, 8) })
}

/// `cargo deny --offline check`. Offline, cargo-deny's `cargo metadata` cannot download the
/// crates of other platforms that a normal build never fetched, so `cargo fetch` runs first.
fn deny() -> Result<StepResult> {
    cmd::run(&mut cargo(&["fetch", "--quiet"]))?;
    let captured = cmd::run_tee(&mut cargo(&["deny", "--offline", "check"]))?;
    let summary = captured.lines.iter().rev().find(|l| {
        ["advisories", "bans", "licenses", "sources"].iter().any(|check| l.trim_start().starts_with(check))
            && (l.contains(" ok") || l.contains("FAILED"))
    });
    let first_error = || captured.lines.iter().find(|l| l.contains("[ERROR]") || l.starts_with("error"));
    let detail = summary.or_else(first_error).map(|s| s.trim().to_owned());
    Ok(StepResult { ok: captured.status.success(), details: detail.into_iter().collect() })
}

fn feature_builds() -> Result<StepResult> {
    let builds = matrix::builds()?;
    if builds.is_empty() {
        return Ok(StepResult { ok: true, details: vec!["no crate declares features yet".into()] });
    }
    let mut ok = true;
    let mut details = Vec::new();
    for build in builds {
        let passed = cmd::run(&mut build.command()).is_ok();
        ok &= passed;
        details.push(format!("{}: {}", build.label(), if passed { "ok" } else { "FAILED" }));
    }
    Ok(StepResult { ok, details })
}

/// An error chain as at most four non-empty detail lines.
fn error_lines(e: &anyhow::Error) -> Vec<String> {
    let text = format!("{e:#}");
    let lines: Vec<String> =
        text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect();
    with_limit("", &lines, 4)
}

/// `prefix` + the first `limit` items joined, noting how many more there are.
fn with_limit(prefix: &str, items: &[String], limit: usize) -> Vec<String> {
    let mut lines: Vec<String> = items.iter().take(limit).map(|i| format!("{prefix}{i}")).collect();
    if items.len() > limit {
        lines.push(format!("... and {} more", items.len() - limit));
    }
    lines
}

/// Shared servers, workspace tests, the simulation, doctests, the quick fuzz run, then the
/// quick chaos run.
fn run_tests(run: &mut Run, fuzz_secs: u64) {
    let mut shared = None;
    run.step("servers", || {
        let started = servers::start()?;
        let details = servers::describe(&started);
        shared = Some(started);
        Ok(StepResult { ok: true, details })
    });
    match &shared {
        Some(servers) => {
            let env = servers.env_vars();
            let kind = servers.valkey.server_kind();
            let mut tally = TestTally::default();
            run.step("tests", || workspace_tests(&env, &kind, &mut tally));
            run.count(&tally);
            let matrix = tally.deployment_matrix();
            if !matrix.is_empty() {
                println!("\n==> tier-router deployment matrix (tests/it/suite.rs)\n\n{matrix}");
            }
            println!("\n==> deployments x backends\n\n{}", backends::render(&tally.outcomes));
        }
        None => run.skip("tests", "the shared servers did not start"),
    }
    // Stops every server process by its PID (the harness kills and reaps them on drop).
    drop(shared);

    // 60 seconds of the deterministic simulation (no server needed).
    run.step("sim", || {
        let captured = sim::run(&crate::workspace_root(), &sim::SimArgs::for_test())?;
        Ok(StepResult { ok: captured.status.success(), details: sim::summary_lines(&captured) })
    });

    let mut doc_tally = TestTally::default();
    run.step("doctests", || {
        let captured = cmd::run_tee(&mut cargo(&["test", "--workspace", "--doc"]))?;
        doc_tally = testout::parse_cargo_test(&captured.lines);
        Ok(StepResult { ok: captured.status.success(), details: tally_details(&doc_tally) })
    });
    run.count(&doc_tally);

    // The examples a developer embedding the store starts from: each runs to completion.
    run.step("examples", || {
        let root = crate::workspace_root();
        cmd::build_workspace_bins(&root)?;
        let examples = cmd::target_dir(&root).join("debug/examples");
        let mut details = Vec::new();
        let mut ok = true;
        for (package, example) in EXAMPLES {
            let passed = cmd::run(Command::new(examples.join(example)).current_dir(&root)).is_ok();
            ok &= passed;
            details.push(format!("{package} --example {example}: {}", if passed { "ok" } else { "FAILED" }));
        }
        Ok(StepResult { ok, details })
    });

    let mut fuzz_tally = TestTally::default();
    run.step("fuzz", || {
        let outcome = fuzz::run(fuzz_secs, fuzz::Build::Test)?;
        let result = StepResult { ok: outcome.passed(), details: vec![outcome.summary()] };
        fuzz_tally = outcome.tally;
        Ok(result)
    });
    run.count(&fuzz_tally);

    // The quick chaos run starts its own servers (it kills and restarts them).
    run.step("chaos", || {
        let captured = chaos::run(&crate::workspace_root(), &chaos::ChaosArgs::quick())?;
        Ok(StepResult { ok: captured.status.success(), details: chaos::summary_lines(&captured) })
    });
}

/// The examples `cargo xtask test` runs: (package, example).
const EXAMPLES: &[(&str, &str)] =
    &[("tier-router", "embed"), ("tier-router", "custom_tier"), ("tier-router", "cold_archive")];

/// The whole workspace's tests (nextest when installed, else `cargo test`), with the
/// shared servers' addresses in the environment.
fn workspace_tests(env: &[(&str, String)], valkey_kind: &str, tally: &mut TestTally) -> Result<StepResult> {
    let nextest = cmd::first_line_of(cmd::cargo().args(["nextest", "--version"]));
    let mut command = match &nextest {
        Some(_) => cargo(&["nextest", "run", "--workspace", "--no-fail-fast", "--color", "never"]),
        None => cargo(&["test", "--workspace", "--no-fail-fast"]),
    };
    command.env("RUST_BACKTRACE", "1");
    for (name, value) in env {
        command.env(name, value);
    }
    let captured = cmd::run_tee(&mut command)?;
    *tally = match nextest {
        Some(_) => testout::parse_nextest(&captured.lines),
        None => testout::parse_cargo_test(&captured.lines),
    };
    let runner = nextest.unwrap_or_else(|| "cargo test (cargo-nextest not installed)".into());
    let mut details = vec![format!("{runner}; servers: {valkey_kind}, moto S3")];
    details.extend(tally_details(tally));
    if !captured.status.success() && tally.passed() + tally.failed() == 0 {
        details.push("no test ran: the build failed (see the output above)".into());
    }
    Ok(StepResult { ok: captured.status.success() && tally.failed() == 0, details })
}

/// One line per binary that ran tests (sorted by name) with its counts, then the failing
/// tests.
fn tally_details(tally: &TestTally) -> Vec<String> {
    let mut binaries: Vec<_> = tally.binaries.iter().filter(|b| b.passed + b.failed > 0).collect();
    binaries.sort_by(|a, b| a.name.cmp(&b.name));
    let mut lines: Vec<String> =
        binaries.iter().map(|b| format!("{}: {} passed, {} failed", b.name, b.passed, b.failed)).collect();
    let idle = tally.binaries.len() - binaries.len();
    if idle > 0 {
        lines.push(format!("{idle} binaries ran no tests"));
    }
    lines.extend(with_limit("FAILED: ", &tally.failures, 20));
    lines
}
