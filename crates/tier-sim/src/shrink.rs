//! Shrinking a failing schedule: drop chunks of steps (halves, quarters, … single steps)
//! while the schedule still breaks the same invariant, within a budget of runs.

use crate::run::run;
use crate::schedule::Schedule;

/// The shortest schedule found that still breaks `invariant`, and the runs it took.
pub fn shrink(schedule: &Schedule, invariant: &str, budget: usize) -> (Schedule, usize) {
    let fails = |s: &Schedule| run(s, false).violations.iter().any(|v| v.invariant == invariant);
    let mut best = schedule.clone();
    let mut runs = 0;
    // Steps after the first violation cannot matter (unless it was found by the final
    // checks): cut there first.
    let first = run(&best, false);
    runs += 1;
    if let Some(step) = first.violations.iter().find(|v| v.invariant == invariant).and_then(|v| v.step) {
        let mut cut = best.clone();
        cut.steps.retain(|(i, _)| *i <= step);
        runs += 1;
        if fails(&cut) {
            best = cut;
        }
    }
    let mut chunk = best.steps.len().div_ceil(2).max(1);
    while chunk >= 1 && runs < budget {
        let mut start = 0;
        let mut removed_any = false;
        while start < best.steps.len() && runs < budget {
            let mut candidate = best.clone();
            let end = (start + chunk).min(candidate.steps.len());
            candidate.steps.drain(start..end);
            runs += 1;
            if fails(&candidate) {
                best = candidate;
                removed_any = true;
            } else {
                start += chunk;
            }
        }
        if chunk == 1 && !removed_any {
            break;
        }
        chunk = if chunk == 1 { 1 } else { chunk / 2 };
    }
    (best, runs)
}
