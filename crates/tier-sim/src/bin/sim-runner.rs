//! `sim-runner`: runs simulation schedules (see `docs/simulation.md`); `cargo xtask sim`
//! builds and runs it. Prints a table and, for each invariant broken, a seed, the
//! violation and the shrunk schedule; exits non-zero on any violation.

// Tooling: seeds from the real clock and bounds a run in real time; the simulation
// itself reads only its schedule's clock.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use parking_lot::Mutex;
use tier_sim::{
    DEFAULT_STEPS, REGRESSION_SEEDS, Revert, Schedule, Stats, Violation, run, run_reverting,
    shrink::shrink_reverting,
};

#[derive(Debug, Parser)]
#[command(name = "sim-runner", about = "tierlog's deterministic simulation")]
struct Args {
    /// Run this many schedules (default: as many as fit in --secs).
    #[arg(long)]
    seeds: Option<u64>,
    /// Replay one schedule verbosely (twice, checking the replay is exact).
    #[arg(long)]
    seed: Option<u64>,
    /// With --seed: keep only these step indices (a shrunk schedule), comma-separated.
    #[arg(long, value_delimiter = ',')]
    keep: Option<Vec<u32>>,
    /// The version of the step generator (default: the current one; a regression
    /// schedule found with an older one names it in `REGRESSION_SEEDS`; the versions are
    /// described in `docs/simulation.md`).
    #[arg(long)]
    generator: Option<u32>,
    /// How long to run, in seconds, when --seeds is not given.
    #[arg(long, default_value_t = 60)]
    secs: u64,
    /// Steps per schedule.
    #[arg(long, default_value_t = DEFAULT_STEPS)]
    steps: u32,
    /// The first seed of the run (default: from the clock; printed).
    #[arg(long)]
    start: Option<u64>,
    /// Threads, one runtime each.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Runs allowed to shrink each reported violation.
    #[arg(long, default_value_t = 200)]
    shrink_budget: usize,
    /// Skip the regression seeds.
    #[arg(long)]
    no_regressions: bool,
    /// Shrink up to this many failing seeds per invariant (default 1), in parallel.
    #[arg(long, default_value_t = 1)]
    shrink_each: usize,
    /// With --seed: shrink the schedule for this invariant (e.g. "step hung").
    #[arg(long)]
    shrink_invariant: Option<String>,
    /// With --shrink-invariant: only keep schedules whose log mentions this text.
    #[arg(long)]
    shrink_text: Option<String>,
    /// Leave out the steps that destroy data or disturb warm (a sanity check of the
    /// model: a correct store needs no excuse).
    #[arg(long)]
    benign: bool,
    /// Print every violation as it is found (`seed<TAB>invariant<TAB>detail`).
    #[arg(long)]
    list: bool,
    /// Print a progress line (schedules run, violations found) this often, in seconds, while
    /// the run goes on; 0: only the table at the end.
    #[arg(long, default_value_t = 600)]
    progress_secs: u64,
    /// Put a repaired behaviour back (to see the simulation find the bug it was):
    /// `forget-cuts`, `trust-failed-fsyncs`, `holes-are-damage` (the WAL), `wait-alone`,
    /// `ignore-next` (the warm stand-in's protocol), `shared-state-dir`,
    /// `losses-in-state-dir-only`, `new-topic-over-held-topic`, `warm-past-its-hold`,
    /// `claim-answered`, `own-claims-keep-wal` (the router).
    #[arg(long, value_enum)]
    revert: Vec<Reverted>,
}

/// A repaired behaviour `--revert` puts back (`tier_sim::Revert`).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Reverted {
    /// An open ignores the cut an earlier open made (its `cut` marker).
    ForgetCuts,
    /// Warm's identical retry confirms with `WAIT` alone (no write of its own before it).
    WaitAlone,
    /// Warm's appends ignore the topic's next key (an empty stream takes any base past
    /// its end).
    IgnoreNext,
    /// A failed WAL fsync is trusted: the file is not cut back, an open reads the page cache.
    TrustFailedFsyncs,
    /// Holes before written pages and unwritten headers are damage (the topic refused).
    HolesAreDamage,
    /// A store opens on its state directory without locking it or checking its owner.
    SharedStateDir,
    /// Recovery keeps the losses it found in the state directory alone.
    LossesInStateDirOnly,
    /// A lost data directory's open takes a topic cold or warm holds for a new one.
    NewTopicOverHeldTopic,
    /// The writer sends warm a batch past records it lacks that no tier can give it.
    WarmPastItsHold,
    /// A claim whose answer was lost counts as made with the epoch the writer held.
    ClaimAnswered,
    /// Under `fail`, an open discards its WAL for any skipped owner epoch, this node's own
    /// lost claims included.
    OwnClaimsKeepWal,
}

impl Reverted {
    fn behaviour(self) -> Revert {
        match self {
            Self::ForgetCuts => Revert::Hot(tier_hot::faults::Revert::ForgetCuts),
            Self::WaitAlone => Revert::WarmWaitAlone,
            Self::IgnoreNext => Revert::WarmIgnoresNext,
            Self::TrustFailedFsyncs => Revert::Hot(tier_hot::faults::Revert::TrustFailedFsyncs),
            Self::HolesAreDamage => Revert::Hot(tier_hot::faults::Revert::HolesAreDamage),
            Self::SharedStateDir => Revert::SharedStateDir,
            Self::LossesInStateDirOnly => Revert::Router(tier_router::testing::Repair::LossesInWal),
            Self::NewTopicOverHeldTopic => {
                Revert::Router(tier_router::testing::Repair::NewTopicOnlyWhenNoTierHolds)
            }
            Self::WarmPastItsHold => Revert::Router(tier_router::testing::Repair::WarmContinuesItsHold),
            Self::ClaimAnswered => Revert::Router(tier_router::testing::Repair::ClaimAnswered),
            Self::OwnClaimsKeepWal => Revert::Router(tier_router::testing::Repair::OwnClaimsKeepWal),
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(seed) = args.seed {
        return replay(seed, &args);
    }
    let generator = args.generator.unwrap_or(tier_sim::schedule::GENERATOR);
    let reverts: Vec<Revert> = args.revert.iter().map(|r| r.behaviour()).collect();
    let mut total = Stats::default();
    let mut failures: BTreeMap<&'static str, Vec<(u64, Violation)>> = BTreeMap::new();
    let started = Instant::now();
    if !args.no_regressions && !REGRESSION_SEEDS.is_empty() {
        println!("sim: replaying {} regression schedules", REGRESSION_SEEDS.len());
        for r in REGRESSION_SEEDS {
            let outcome = run(&r.schedule(), false);
            total.add(&outcome.stats);
            let verdict = match outcome.violations.iter().find(|v| v.invariant == r.invariant) {
                Some(v) => format!("FAILS: {v}"),
                None if outcome.violations.is_empty() => "passes".to_owned(),
                None => format!("FAILS differently: {}", outcome.violations[0]),
            };
            println!("sim:   seed {} --keep {:?} ({}): {verdict}", r.seed, r.keep, r.case);
            for v in outcome.violations {
                failures.entry(v.invariant).or_default().push((r.seed, v));
            }
        }
    }
    let start = args.start.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    println!("sim: first seed {start}, {} steps per schedule, {} threads", args.steps, args.threads);
    let next = Arc::new(AtomicU64::new(0));
    let shared_stats = Arc::new(Mutex::new(Stats::default()));
    let shared_fail = Arc::new(Mutex::new(Vec::<(u64, Violation)>::new()));
    let deadline = started + Duration::from_secs(args.secs);
    let main_started = Instant::now();
    std::thread::scope(|scope| {
        // Each worker holds a sender: the progress thread ends when the last one returns.
        let (running, workers_done) = std::sync::mpsc::channel::<()>();
        if args.progress_secs > 0 {
            let (stats, fail) = (Arc::clone(&shared_stats), Arc::clone(&shared_fail));
            let every = Duration::from_secs(args.progress_secs);
            scope.spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = workers_done.recv_timeout(every) {
                    let schedules = stats.lock().schedules;
                    let fail = fail.lock();
                    let mut seeds: Vec<u64> = fail.iter().map(|(s, _)| *s).collect();
                    seeds.dedup();
                    println!(
                        "sim: progress after {:.0} s: {schedules} schedules, {} violation(s) in {} schedule(s)",
                        main_started.elapsed().as_secs_f64(),
                        fail.len(),
                        seeds.len()
                    );
                }
            });
        }
        for _ in 0..args.threads.max(1) {
            let running = running.clone();
            let (next, stats, fail) =
                (Arc::clone(&next), Arc::clone(&shared_stats), Arc::clone(&shared_fail));
            let steps = args.steps;
            let limit = args.seeds;
            let list = args.list;
            let benign = args.benign;
            let reverts = &reverts;
            scope.spawn(move || {
                let _running = running;
                loop {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    if limit.map_or(Instant::now() >= deadline, |l| n >= l) {
                        return;
                    }
                    let seed = start.wrapping_add(n);
                    let mut schedule = Schedule::generate_with(generator, seed, steps);
                    if benign {
                        schedule = schedule.benign();
                    }
                    let outcome = run_reverting(&schedule, false, reverts);
                    stats.lock().add(&outcome.stats);
                    let mut f = fail.lock();
                    for v in outcome.violations {
                        if list {
                            println!("{seed}\t{}\t{}", v.invariant, v.detail);
                        }
                        f.push((seed, v));
                    }
                }
            });
        }
        drop(running);
    });
    let elapsed = main_started.elapsed();
    let main_stats = shared_stats.lock().clone();
    total.add(&main_stats);
    for (seed, v) in shared_fail.lock().drain(..) {
        failures.entry(v.invariant).or_default().push((seed, v));
    }
    print_table(&total, &main_stats, elapsed, &failures);
    if failures.is_empty() {
        return ExitCode::SUCCESS;
    }
    let mut jobs: Vec<(&'static str, u64, Violation, usize)> = Vec::new();
    for (invariant, list) in &failures {
        let mut seeds: Vec<u64> = list.iter().map(|(s, _)| *s).collect();
        seeds.sort_unstable();
        seeds.dedup();
        println!(
            "\nVIOLATION {invariant}: {} schedule(s), e.g. seeds {:?}",
            seeds.len(),
            &seeds[..seeds.len().min(5)]
        );
        for seed in seeds.iter().take(args.shrink_each.max(1)) {
            if let Some((_, v)) = list.iter().find(|(s, _)| s == seed) {
                jobs.push((invariant, *seed, v.clone(), seeds.len()));
            }
        }
    }
    let results = Mutex::new(Vec::new());
    let next_job = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..args.threads.max(1) {
            scope.spawn(|| {
                loop {
                    let i = next_job.fetch_add(1, Ordering::SeqCst) as usize;
                    let Some((invariant, seed, _, _)) = jobs.get(i) else { return };
                    let schedule = Schedule::generate_with(generator, *seed, args.steps);
                    // Replayed twice: a failing seed must reproduce exactly.
                    let exact = run_reverting(&schedule, false, &reverts).trace
                        == run_reverting(&schedule, false, &reverts).trace;
                    let shrunk = shrink_reverting(&schedule, invariant, args.shrink_budget, None, &reverts);
                    results.lock().push((i, shrunk, exact));
                }
            });
        }
    });
    let mut results = results.into_inner();
    results.sort_by_key(|(i, _, _)| *i);
    for (i, (short, runs), exact) in results {
        let (invariant, seed, v, _) = &jobs[i];
        println!("\n{invariant} — seed {seed}: {v}");
        println!("  replays exactly: {}", if exact { "yes" } else { "NO (non-deterministic)" });
        println!("  shrunk to {} steps ({runs} runs):", short.steps.len());
        for line in short.to_string().lines() {
            println!("    {line}");
        }
        println!("  replay: cargo xtask sim --seed {seed} --steps {} --keep {}", args.steps, short.indices());
    }
    ExitCode::FAILURE
}

fn print_table(
    total: &Stats,
    main: &Stats,
    elapsed: Duration,
    failures: &BTreeMap<&'static str, Vec<(u64, Violation)>>,
) {
    let per_min = main.schedules as f64 / elapsed.as_secs_f64().max(1e-9) * 60.0;
    println!("\n| sim                                  | value |");
    println!("|--------------------------------------|-------|");
    println!("| schedules                            | {} |", total.schedules);
    println!("| steps                                | {} |", total.steps);
    println!("| schedules per minute (random seeds)  | {per_min:.0} |");
    println!("| acknowledged records                 | {} |", total.acked);
    println!("| acknowledged records checked         | {} |", total.checked);
    println!("| schedules ended on damaged data      | {} |", total.ended_on_damage);
    for (kind, n) in &total.faults {
        println!("| faults: {kind:<28} | {n} |");
    }
    for (kind, n) in &total.owner_events {
        println!("| warm owner epochs: {kind:<17} | {n} |");
    }
    let schedules: usize = {
        let mut s: Vec<u64> = failures.values().flatten().map(|(s, _)| *s).collect();
        s.sort_unstable();
        s.dedup();
        s.len()
    };
    println!(
        "| violations                           | {} in {schedules} schedule(s) |",
        failures.values().map(Vec::len).sum::<usize>()
    );
    for (invariant, list) in failures {
        println!("|   {invariant:<34} | {} |", list.len());
    }
}

fn replay(seed: u64, args: &Args) -> ExitCode {
    let generator = args.generator.unwrap_or(tier_sim::schedule::GENERATOR);
    let mut schedule = Schedule::generate_with(generator, seed, args.steps);
    if let Some(keep) = &args.keep {
        schedule = schedule.keep(keep);
    }
    print!("{schedule}");
    let reverts: Vec<_> = args.revert.iter().map(|r| r.behaviour()).collect();
    let run = |schedule: &Schedule, verbose| run_reverting(schedule, verbose, &reverts);
    let first = run(&schedule, true);
    for line in &first.log {
        println!("  {line}");
    }
    let second = run(&schedule, true);
    let exact = first.trace == second.trace && first.violations == second.violations;
    if let Some(i) =
        (0..first.log.len().max(second.log.len())).find(|i| first.log.get(*i) != second.log.get(*i))
    {
        println!("sim: the replay first differs at log line {i}:");
        println!("  first:  {:?}", first.log.get(i));
        println!("  replay: {:?}", second.log.get(i));
    }
    println!(
        "sim: replayed twice: {}",
        if exact { "identical" } else { "DIFFERENT (the simulation is not deterministic here)" }
    );
    for v in &first.violations {
        println!("VIOLATION {v}");
    }
    if let Some(invariant) = &args.shrink_invariant {
        let (short, runs) =
            shrink_reverting(&schedule, invariant, args.shrink_budget, args.shrink_text.as_deref(), &reverts);
        println!("\nshrunk for {invariant:?} to {} steps ({runs} runs):", short.steps.len());
        for line in short.to_string().lines() {
            println!("    {line}");
        }
        println!("  replay: cargo xtask sim --seed {seed} --steps {} --keep {}", args.steps, short.indices());
    }
    if first.violations.is_empty() && exact { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
