//! The simulation's verdicts as tests.
//!
//! - Every regression schedule (issue 15's cases 1–7, found on 3892a13) must pass: each
//!   fails on 3892a13 with the invariant it names, and passes once its case is fixed.
//! - A few hundred short benign schedules (no data-destroying or warm faults) from a fixed
//!   seed set must pass: a quick sample of what `cargo xtask test` runs for a minute. The
//!   full fault mix still finds violations on open bugs (`docs/simulation.md`).
//!
//! On 3892a13 (before issue 15's fixes) the regression schedules fail; that is what they
//! are for.

use tier_sim::{REGRESSION_SEEDS, Schedule, run};

#[test]
fn every_regression_schedule_passes() {
    let mut failing = Vec::new();
    for r in REGRESSION_SEEDS {
        let outcome = run(&r.schedule(), false);
        if let Some(v) = outcome.violations.first() {
            failing.push(format!("seed {} --keep {:?} ({}): {v}", r.seed, r.keep, r.case));
        }
    }
    assert!(failing.is_empty(), "{} regression schedule(s) fail:\n{}", failing.len(), failing.join("\n"));
}

#[test]
fn three_hundred_short_benign_schedules_pass() {
    let mut failing = Vec::new();
    for seed in 0..300u64 {
        let outcome = run(&Schedule::generate(seed, 40).benign(), false);
        if let Some(v) = outcome.violations.first() {
            failing.push(format!("seed {seed} (40 steps): {v}"));
        }
    }
    assert!(
        failing.is_empty(),
        "{} of 300 schedules fail (replay one with `cargo xtask sim --benign --seed S --steps 40`):\n{}",
        failing.len(),
        failing.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
}
