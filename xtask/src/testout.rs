//! Reading test counts out of what `cargo nextest run` and `cargo test` print.
//!
//! Both formats are the runners' human-readable output (nextest's status lines
//! `PASS [ 0.004s] (1/9) tier-core batch::tests::x`, libtest's `Running …` headers and
//! `test result: ok. 9 passed; 0 failed; …` lines), parsed leniently: lines that do not
//! match are ignored.

/// Tests passed and failed in one test binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BinaryCounts {
    /// nextest's binary id (`tier-core`, `tier-core::fuzz_decoders`) or libtest's binary.
    pub(crate) name: String,
    /// Tests that passed.
    pub(crate) passed: u64,
    /// Tests that failed (including timeouts and crashes).
    pub(crate) failed: u64,
}

/// Counts for a whole run, per binary in the order first seen, plus failing test names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TestTally {
    /// Per-binary counts.
    pub(crate) binaries: Vec<BinaryCounts>,
    /// `binary test-name` of every failing test.
    pub(crate) failures: Vec<String>,
    /// Outcomes of tier-router's deployment suite: `(deployment, test, passed)`.
    pub(crate) deployments: Vec<(String, String, bool)>,
    /// Every test's final outcome: `(binary, test, passed)`, the binary as nextest names
    /// it (`tier-router::it`) or, from `cargo test`, libtest's binary label
    /// (`it tests/it/main.rs`).
    pub(crate) outcomes: Vec<(String, String, bool)>,
}

/// The nextest binary id of tier-router's integration tests, among which the behavioural
/// suite's tests are named `suite::<deployment>::<test>`.
const SUITE_BINARY: &str = "tier-router::it";

/// The module path of the behavioural suite's tests in [`SUITE_BINARY`].
const SUITE_PREFIX: &str = "suite::";

/// libtest's label (see [`libtest_binary_label`]) of every crate's `tests/it` binary
/// starts with this; `cargo test`'s output does not say which crate's it is.
const IT_LABEL_PREFIX: &str = "it ";

impl TestTally {
    /// Tests passed in all binaries.
    pub(crate) fn passed(&self) -> u64 {
        self.binaries.iter().map(|b| b.passed).sum()
    }

    /// Tests failed in all binaries.
    pub(crate) fn failed(&self) -> u64 {
        self.binaries.iter().map(|b| b.failed).sum()
    }

    /// Records the outcome of a test named `suite::<deployment>::<test>`; a test named
    /// otherwise is not the suite's and is not recorded.
    fn note_deployment(&mut self, name: &str, passed: bool) {
        if let Some((deployment, test)) = name.strip_prefix(SUITE_PREFIX).and_then(|n| n.split_once("::")) {
            self.deployments.push((deployment.to_owned(), test.to_owned(), passed));
        }
    }

    /// tier-router's deployment suite as a table: one row per deployment, one column per
    /// behavioural test (`ok`, `FAIL`, or `-` when that deployment does not run it).
    /// Empty when the suite did not run.
    pub(crate) fn deployment_matrix(&self) -> String {
        let mut deployments: Vec<&str> = Vec::new();
        let mut tests: Vec<&str> = Vec::new();
        for (d, t, _) in &self.deployments {
            if !deployments.contains(&d.as_str()) {
                deployments.push(d);
            }
            if !tests.contains(&t.as_str()) {
                tests.push(t);
            }
        }
        if deployments.is_empty() {
            return String::new();
        }
        deployments.sort_unstable();
        tests.sort_unstable();
        let width = deployments.iter().map(|d| d.len()).max().unwrap_or(0).max("deployment".len());
        let mut out = format!("{:width$}", "deployment");
        for i in 1..=tests.len() {
            out.push_str(&format!("  {:>4}", format!("t{i}")));
        }
        out.push('\n');
        for d in &deployments {
            out.push_str(&format!("{d:width$}"));
            for t in &tests {
                let cell = self
                    .deployments
                    .iter()
                    .find(|(dd, tt, _)| dd == d && tt == t)
                    .map_or("-", |(_, _, ok)| if *ok { "ok" } else { "FAIL" });
                out.push_str(&format!("  {cell:>4}"));
            }
            out.push('\n');
        }
        for (i, t) in tests.iter().enumerate() {
            out.push_str(&format!("t{} = {t}\n", i + 1));
        }
        out
    }

    fn binary(&mut self, name: &str) -> &mut BinaryCounts {
        let index = match self.binaries.iter().position(|b| b.name == name) {
            Some(i) => i,
            None => {
                self.binaries.push(BinaryCounts { name: name.to_owned(), passed: 0, failed: 0 });
                self.binaries.len() - 1
            }
        };
        &mut self.binaries[index]
    }
}

/// How one nextest status word counts.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Passed,
    Failed,
    NotFinal,
}

fn nextest_verdict(status: &str) -> Verdict {
    let first = status.split_whitespace().next().unwrap_or("");
    match first {
        "PASS" | "LEAK" | "FLAKY" => Verdict::Passed,
        "FAIL" | "TIMEOUT" | "ABORT" | "LEAK-FAIL" | "LEAK-TIMEOUT" => Verdict::Failed,
        s if s.starts_with("SIG") => Verdict::Failed,
        _ => Verdict::NotFinal, // START, SLOW, TRY n …, RETRY, SETUP, …
    }
}

/// Counts from `cargo nextest run` output. Only lines before the final `Summary` are read,
/// since nextest repeats the failing tests after it.
pub(crate) fn parse_nextest(lines: &[String]) -> TestTally {
    let mut tally = TestTally::default();
    for line in lines {
        let line = line.trim();
        if line.starts_with("Summary [") {
            break;
        }
        let Some((status, rest)) = line.split_once('[') else { continue };
        let Some((time, rest)) = rest.split_once(']') else { continue };
        let status = status.trim();
        let status_like = !status.is_empty()
            && status.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || "-/ ".contains(c));
        if !status_like || !time.trim().ends_with('s') {
            continue;
        }
        // Newer nextest versions print a progress counter, padded: `(  1/151)`.
        let rest = rest.trim_start();
        let rest = match rest.strip_prefix('(').and_then(|r| r.split_once(')')) {
            Some((counter, after)) if counter.contains('/') => after,
            _ => rest,
        };
        let mut words = rest.split_whitespace();
        let (Some(binary), Some(test)) = (words.next(), words.next()) else { continue };
        let passed = match nextest_verdict(status) {
            Verdict::Passed => {
                tally.binary(binary).passed += 1;
                true
            }
            Verdict::Failed => {
                tally.binary(binary).failed += 1;
                tally.failures.push(format!("{binary} {test}"));
                false
            }
            Verdict::NotFinal => continue,
        };
        tally.outcomes.push((binary.to_owned(), test.to_owned(), passed));
        if binary == SUITE_BINARY {
            tally.note_deployment(test, passed);
        }
    }
    tally
}

/// Counts from `cargo test` output: each `test result:` line is credited to the binary
/// named by the `Running` / `Doc-tests` header before it. A test named `suite::…` of an
/// `it` binary is taken for tier-router's suite (no other crate's `tests/it` has a
/// `suite` module).
pub(crate) fn parse_cargo_test(lines: &[String]) -> TestTally {
    let mut tally = TestTally::default();
    let mut current = String::from("(unknown binary)");
    for line in lines {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Running ") {
            current = libtest_binary_label(rest);
        } else if let Some(krate) = line.strip_prefix("Doc-tests ") {
            current = format!("{} doctests", krate.trim());
        } else if line.starts_with("test result:") {
            let counts = tally.binary(&current);
            counts.passed += count_before(line, "passed").unwrap_or(0);
            counts.failed += count_before(line, "failed").unwrap_or(0);
        } else if let Some(name) = line.strip_prefix("test ").and_then(|l| l.strip_suffix(" ... FAILED")) {
            tally.failures.push(format!("{current} {name}"));
            tally.outcomes.push((current.clone(), name.to_owned(), false));
            if current.starts_with(IT_LABEL_PREFIX) {
                tally.note_deployment(name, false);
            }
        } else if let Some(name) = line.strip_prefix("test ").and_then(|l| l.strip_suffix(" ... ok")) {
            tally.outcomes.push((current.clone(), name.to_owned(), true));
            if current.starts_with(IT_LABEL_PREFIX) {
                tally.note_deployment(name, true);
            }
        }
    }
    tally
}

/// `tier_core unittests src/lib.rs` from `unittests src/lib.rs (target/debug/deps/tier_core-0a1b)`.
fn libtest_binary_label(running: &str) -> String {
    let Some((source, path)) = running.rsplit_once(" (") else { return running.trim().to_owned() };
    let file = path.trim_end_matches(')').rsplit('/').next().unwrap_or(path);
    let stem = match file.rsplit_once('-') {
        Some((stem, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => stem,
        _ => file,
    };
    format!("{stem} {}", source.trim())
}

/// The number written just before the word `word` (`9 passed;` → 9), if any.
pub(crate) fn count_before(line: &str, word: &str) -> Option<u64> {
    let words: Vec<&str> = line.split_whitespace().collect();
    words.windows(2).find_map(|pair| {
        let after = pair[1].trim_matches(|c: char| !c.is_ascii_alphanumeric());
        if after == word { parse_number(pair[0]) } else { None }
    })
}

/// A whole number, allowing `_` and `,` as thousands separators and trailing `,;:.`
/// (`seed=42` or `(1/5)` are not numbers).
pub(crate) fn parse_number(word: &str) -> Option<u64> {
    let word = word.trim_end_matches([',', ';', ':', '.']);
    let digits: String = word.chars().filter(|c| *c != '_' && *c != ',').collect();
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests;
