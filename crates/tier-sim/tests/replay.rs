//! The simulation itself is deterministic: a schedule replays exactly, and shrinking keeps
//! step seeds. (The regression seeds, which must fail on the old code and pass on the
//! fixed one, are checked by `regressions.rs`.)

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
