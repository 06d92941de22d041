//! The simulation itself is deterministic: a schedule replays exactly, and shrinking keeps
//! step seeds. (The regression schedules, each of which fails while the bug it guards
//! against is present, are checked by `regressions.rs`.)

use tier_sim::{Schedule, run};

#[test]
fn a_schedule_replays_exactly() {
    for seed in 0..20u64 {
        let schedule = Schedule::generate(seed, 60);
        let a = run(&schedule, false);
        let b = run(&schedule, false);
        assert_eq!(a.trace, b.trace, "seed {seed} did not replay exactly");
        assert_eq!(a.violations, b.violations, "seed {seed}");
        assert!(a.stats.steps > 0);
    }
}

#[test]
fn the_same_seed_generates_the_same_schedule() {
    let a = Schedule::generate(42, 200);
    let b = Schedule::generate(42, 200);
    assert_eq!(a.to_string(), b.to_string());
    assert_ne!(a.to_string(), Schedule::generate(43, 200).to_string());
    let kept = a.clone().keep(&[3, 7]);
    assert_eq!(kept.steps, vec![a.steps[3], a.steps[7]]);
}

/// A power cut while a rotation's seal is held stops the process part-way through a step
/// (its durable lengths taken while the seal waits): it must replay exactly too, and the
/// schedules must reach the state it is for — a rotation whose seal never ran, new files
/// lost with their header.
#[test]
fn a_power_cut_before_a_seal_replays_exactly() {
    use tier_sim::schedule::Step;
    let (mut cuts, mut rotated, mut headers) = (0, 0, 0);
    for seed in 0..60u64 {
        let schedule = Schedule::generate_with(6, seed, 100);
        if !schedule.steps.iter().any(|(_, s)| matches!(s, Step::PowerCutBeforeSeal { .. })) {
            continue;
        }
        cuts += 1;
        let a = run(&schedule, true);
        let b = run(&schedule, true);
        assert_eq!(a.trace, b.trace, "seed {seed} did not replay exactly");
        assert_eq!(a.log, b.log, "seed {seed}");
        rotated += a.log.iter().filter(|l| l.contains("rotated with the seal held: true")).count();
        headers += a.log.iter().filter(|l| l.contains("new files zeroed, empty or gone")).count();
    }
    assert!(cuts >= 5, "{cuts} schedules with a power cut before a seal");
    assert!(rotated > 0 && headers > 0, "rotations with the seal held: {rotated}, new files lost: {headers}");
}

/// A simulated process runs on its thread alone: its blocking jobs wait for every task to
/// idle (`tier_core::blocking::defer_jobs_here`) and a seal is held in the queue, so no
/// step depends on when another thread ran. Jobs run on tokio's blocking pool started
/// threads, and then a replay under load could differ from the first run.
#[test]
fn a_simulated_process_starts_no_thread() {
    for seed in 0..10u64 {
        let schedule = Schedule::generate(seed, 60);
        run(&schedule, false);
    }
    let seals = Schedule::generate_with(6, 1, 100);
    run(&seals, false);
    assert_eq!(tier_sim::run::threads_started(), 0);
}
