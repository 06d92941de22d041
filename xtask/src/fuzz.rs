//! `cargo xtask fuzz`: tier-core's decoder fuzz test (`crates/tier-core/tests/fuzz_decoders.rs`)
//! in release mode for a given number of seconds. `cargo xtask test`'s quick run uses the
//! test build instead, which the workspace tests have just built (tier-core at opt-level
//! 1: about 80 % of the release build's inputs a second, without a release build).
//!
//! The test reads its duration from `TIERLOG_FUZZ_SECS` and prints its seed and how many
//! inputs it ran; this module runs it and reads that count back.

use anyhow::Result;

use crate::{
    cmd,
    testout::{self, TestTally},
};

/// The environment variable the fuzz test reads its duration from.
const ENV_FUZZ_SECS: &str = "TIERLOG_FUZZ_SECS";

/// What a fuzz run did.
#[derive(Debug)]
pub(crate) struct FuzzOutcome {
    /// Whether cargo exited zero.
    pub(crate) exited_ok: bool,
    /// The test counts (one test, normally).
    pub(crate) tally: TestTally,
    /// How many inputs the test says it ran, when it said so.
    pub(crate) inputs: Option<u64>,
    /// The requested duration.
    pub(crate) secs: u64,
}

impl FuzzOutcome {
    /// True when cargo succeeded and at least one test ran and none failed.
    pub(crate) fn passed(&self) -> bool {
        self.exited_ok && self.tally.failed() == 0 && self.tally.passed() > 0
    }

    /// One line: inputs, duration and test counts.
    pub(crate) fn summary(&self) -> String {
        let inputs = match self.inputs {
            Some(n) => format!("{n} inputs in {} s", self.secs),
            None => format!("{} s, the test printed no input count", self.secs),
        };
        let mut line = format!("{inputs}; {} passed, {} failed", self.tally.passed(), self.tally.failed());
        if !self.exited_ok && self.tally.passed() + self.tally.failed() == 0 {
            line.push_str(" (cargo failed before running the test: see its output above)");
        }
        line
    }
}

/// Which build the fuzz test runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Build {
    /// `--release` (`cargo xtask fuzz`).
    Release,
    /// The test build the workspace tests use (`cargo xtask test`).
    Test,
}

/// Runs the fuzz test for `secs` seconds in `build`.
pub(crate) fn run(secs: u64, build: Build) -> Result<FuzzOutcome> {
    let mut cargo = cmd::cargo();
    match build {
        Build::Release => cargo.args(["test", "-p", "tier-core", "--release"]),
        // Over the whole workspace, so that features resolve as in the workspace tests'
        // build and its artifacts are reused (`-p tier-core` rebuilds tier-core's
        // dependencies with tier-core's features alone).
        Build::Test => cargo.args(["test", "--workspace"]),
    };
    cargo
        .args(["--test", "fuzz_decoders", "--", "--nocapture"])
        .env(ENV_FUZZ_SECS, secs.to_string())
        .env("CARGO_TERM_COLOR", "never");
    let captured = cmd::run_tee(&mut cargo)?;
    Ok(FuzzOutcome {
        exited_ok: captured.status.success(),
        tally: testout::parse_cargo_test(&captured.lines),
        inputs: inputs_from(&captured.lines),
        secs,
    })
}

/// The input count from the last line that mentions inputs: the number just before the
/// word (`ran 12345 inputs`) or just after it (`inputs: 12345`).
fn inputs_from(lines: &[String]) -> Option<u64> {
    lines.iter().rev().find_map(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        words.iter().enumerate().find_map(|(i, word)| {
            let bare = word.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_ascii_lowercase();
            if bare != "inputs" && bare != "input" {
                return None;
            }
            let before = i.checked_sub(1).and_then(|j| testout::parse_number(words[j]));
            before.or_else(|| words.get(i + 1).and_then(|w| testout::parse_number(w)))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn reads_the_input_count_in_either_word_order() {
        assert_eq!(
            inputs_from(&lines("seed 0xdead\nfuzz_decoders: ran 1_234_567 inputs in 10.0s")),
            Some(1234567)
        );
        assert_eq!(inputs_from(&lines("fuzz_decoders seed=42 inputs: 98765 elapsed=2s")), Some(98765));
        assert_eq!(inputs_from(&lines("Inputs=5")), None, "not a separate word: not guessed");
        assert_eq!(inputs_from(&lines("test fuzz ... ok\ntest result: ok. 1 passed;")), None);
    }

    #[test]
    fn a_run_without_tests_is_not_a_pass() {
        let outcome = FuzzOutcome { exited_ok: true, tally: TestTally::default(), inputs: None, secs: 10 };
        assert!(!outcome.passed());
        let tally = testout::parse_cargo_test(&lines("test result: ok. 1 passed; 0 failed;"));
        let outcome = FuzzOutcome { exited_ok: true, tally, inputs: Some(7), secs: 10 };
        assert!(outcome.passed());
        assert_eq!(outcome.summary(), "7 inputs in 10 s; 1 passed, 0 failed");
    }
}
