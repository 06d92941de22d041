//! Shrinking a failing schedule: drop chunks of steps (halves, quarters, … single steps)
//! while the schedule still breaks the same invariant (and, optionally, its log still
//! mentions a given text, to keep a shrunk schedule on one cause), within a budget of
//! runs.

use crate::run::{Revert, run_reverting};
use crate::schedule::Schedule;

/// The shortest schedule found that still breaks `invariant` (with `text` in its log,
/// when given; `a && b` asks for both), and the runs it took.
pub fn shrink(schedule: &Schedule, invariant: &str, budget: usize, text: Option<&str>) -> (Schedule, usize) {
    shrink_reverting(schedule, invariant, budget, text, &[])
}

/// [`shrink`], each run with `reverts` put back ([`run_reverting`]).
pub fn shrink_reverting(
    schedule: &Schedule,
    invariant: &str,
    budget: usize,
    text: Option<&str>,
    reverts: &[Revert],
) -> (Schedule, usize) {
    let run = |s: &Schedule, verbose: bool| run_reverting(s, verbose, reverts);
    let fails = |s: &Schedule| {
        let outcome = run(s, text.is_some());
        outcome.violations.iter().any(|v| v.invariant == invariant)
            && text.is_none_or(|t| t.split("&&").all(|t| outcome.log.iter().any(|l| l.contains(t.trim()))))
    };
    let mut best = schedule.clone();
    let mut runs = 0;
    // Steps after the first violation cannot matter (unless it was found by the final
    // checks): cut there first.
    let first = run(&best, false);
    runs += 1;
    if !fails(&best) {
        return (best, runs + 1);
    }
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
