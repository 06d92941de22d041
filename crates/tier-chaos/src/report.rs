//! [`ScenarioResult`]: what one scenario found, and the table the runner prints.

use crate::verify::Verification;

/// What one scenario (in one configuration) found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScenarioResult {
    /// Scenario and configuration, e.g. `crash hot+warm+cold`.
    pub name: String,
    /// Faults injected (kills, deletions, flips, bad inputs).
    pub iterations: u64,
    /// Acknowledged records checked.
    pub acked: u64,
    /// Acknowledged records missing (beyond a loss the store itself reported, when the
    /// scenario expects one).
    pub lost: u64,
    /// Records present more than once.
    pub duplicated: u64,
    /// Offsets missing from the dense sequence.
    pub gaps: u64,
    /// Corruptions the store detected and reported (expected in the corruption scenario;
    /// anywhere else a detected corruption is also a failed check).
    pub corruptions_detected: u64,
    /// Checks that failed, in words; empty when the scenario passed them all.
    pub failures: Vec<String>,
    /// Other observations (seed, counts, reported losses).
    pub notes: Vec<String>,
}

impl ScenarioResult {
    /// An empty result named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), ..Self::default() }
    }

    /// True when nothing was lost, duplicated or skipped and no check failed.
    pub fn passed(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.gaps == 0 && self.failures.is_empty()
    }

    /// Records a failed check.
    pub fn fail(&mut self, what: impl Into<String>) {
        self.failures.push(what.into());
    }

    /// Adds a verification's counts; its problems become failures.
    pub fn absorb(&mut self, label: &str, v: &Verification) {
        self.acked = self.acked.max(v.acked);
        self.lost += v.lost;
        self.duplicated += v.duplicated;
        self.gaps += v.gaps;
        if v.bad_payloads > 0 {
            self.corruptions_detected += v.bad_payloads;
            self.fail(format!("{label}: {} records with a bad payload", v.bad_payloads));
        }
        if !v.is_clean() {
            for n in &v.notes {
                self.fail(format!("{label}: {n}"));
            }
        }
    }
}

/// The results as a fixed-width table with a PASS/FAIL column, then each scenario's
/// failures and notes.
pub fn render_table(results: &[ScenarioResult]) -> String {
    let name_w = results.iter().map(|r| r.name.len()).max().unwrap_or(8).max(8);
    let mut out = format!(
        "{:<name_w$}  {:>6}  {:>9}  {:>5}  {:>10}  {:>5}  {:>11}  result\n",
        "scenario", "iters", "acked", "lost", "duplicated", "gaps", "corruptions"
    );
    for r in results {
        out.push_str(&format!(
            "{:<name_w$}  {:>6}  {:>9}  {:>5}  {:>10}  {:>5}  {:>11}  {}\n",
            r.name,
            r.iterations,
            r.acked,
            r.lost,
            r.duplicated,
            r.gaps,
            r.corruptions_detected,
            if r.passed() { "PASS" } else { "FAIL" }
        ));
    }
    for r in results {
        for f in &r.failures {
            out.push_str(&format!("  FAIL {}: {f}\n", r.name));
        }
        for n in &r.notes {
            out.push_str(&format!("  note {}: {n}\n", r.name));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loss_fails_the_row() {
        let ok = ScenarioResult { name: "crash hot".into(), iterations: 50, acked: 10, ..Default::default() };
        let bad = ScenarioResult { name: "crash hot+cold".into(), lost: 1, ..Default::default() };
        assert!(ok.passed());
        assert!(!bad.passed());
        let table = render_table(&[ok, bad]);
        assert!(table.lines().nth(1).is_some_and(|l| l.ends_with("PASS")));
        assert!(table.lines().nth(2).is_some_and(|l| l.ends_with("FAIL")));
    }
}
