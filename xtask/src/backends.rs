//! The deployments × backends matrix `cargo xtask test` prints after the tests: for each
//! deployment (hot, hot+cold, hot+warm, hot+warm+cold) and each backend of its tiers
//! (cold: local, S3, Azure, GCS; warm: standalone, sentinel, cluster, TLS), the outcome of
//! the tests that exercise that combination, read from the run's test results.
//!
//! Which tests exercise which cell is the table [`EVIDENCE`]. A cell is `ok N` when all
//! `N` of its tests passed, `FAIL F/N` when `F` failed, `not run` when no test of this run
//! exercises it (never `ok`), and `-` when the deployment has no tier of that backend.
//! A last row, "tier alone", shows each backend under its own tier's suites (tier-cold's
//! and tier-warm's tests against the real server) rather than under the router.

use std::fmt::Write as _;

/// A row of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Row {
    Hot,
    HotCold,
    HotWarm,
    HotWarmCold,
    /// The backend under its own tier's suites, without the router.
    TierAlone,
}

const ROWS: [(Row, &str); 5] = [
    (Row::Hot, "hot"),
    (Row::HotCold, "hot+cold"),
    (Row::HotWarm, "hot+warm"),
    (Row::HotWarmCold, "hot+warm+cold"),
    (Row::TierAlone, "tier alone"),
];

/// A column of the matrix: no backend (the WAL only), a cold backend or a warm backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Column {
    None,
    Local,
    S3,
    Azure,
    Gcs,
    Standalone,
    Sentinel,
    Cluster,
    Tls,
}

const COLUMNS: [(Column, &str); 9] = [
    (Column::None, "none"),
    (Column::Local, "local"),
    (Column::S3, "S3"),
    (Column::Azure, "Azure"),
    (Column::Gcs, "GCS"),
    (Column::Standalone, "standalone"),
    (Column::Sentinel, "sentinel"),
    (Column::Cluster, "cluster"),
    (Column::Tls, "TLS"),
];

impl Column {
    fn is_cold(self) -> bool {
        matches!(self, Column::Local | Column::S3 | Column::Azure | Column::Gcs)
    }

    fn is_warm(self) -> bool {
        matches!(self, Column::Standalone | Column::Sentinel | Column::Cluster | Column::Tls)
    }
}

impl Row {
    /// Whether the deployment has a tier on `column`'s backend (`-` when not).
    fn has(self, column: Column) -> bool {
        match self {
            Row::Hot => column == Column::None,
            Row::HotCold => column.is_cold(),
            Row::HotWarm => column.is_warm(),
            Row::HotWarmCold => column.is_cold() || column.is_warm(),
            Row::TierAlone => column != Column::None,
        }
    }
}

/// Tests of `binary` (a nextest binary id) whose names start with one of `tests` (a
/// module path such as `"gcs::"`: every test of that module) exercise `row` on each of
/// `columns`.
#[derive(Debug)]
pub(crate) struct Evidence {
    pub(crate) binary: &'static str,
    pub(crate) tests: &'static [&'static str],
    pub(crate) row: Row,
    pub(crate) columns: &'static [Column],
}

/// The suite cell of `row` on `columns`: the suite's tests whose names start with one of
/// `module` (`suite::<deployment>::`).
const fn suite(module: &'static [&'static str], row: Row, columns: &'static [Column]) -> Evidence {
    Evidence { binary: SUITE, tests: module, row, columns }
}

/// The test binary of tier-router's behavioural suite (`tests/it/suite.rs`): the crate's
/// one integration-test binary, in which the suite's tests are
/// `suite::<deployment>::<test>` ([`SUITE_PREFIX`] then the deployment).
const SUITE: &str = "tier-router::it";

/// The module path the suite's test names start with in [`SUITE`].
const SUITE_PREFIX: &str = "suite::";

/// Which tests exercise which cell. A suite cell of hot+warm+cold counts for its warm
/// and its cold backend both.
pub(crate) const EVIDENCE: &[Evidence] = &[
    suite(&["suite::hot::"], Row::Hot, &[Column::None]),
    suite(&["suite::hot_cold_local::"], Row::HotCold, &[Column::Local]),
    suite(&["suite::hot_cold_s3::"], Row::HotCold, &[Column::S3]),
    suite(&["suite::hot_cold_azure::"], Row::HotCold, &[Column::Azure]),
    suite(&["suite::hot_warm::"], Row::HotWarm, &[Column::Standalone]),
    suite(&["suite::hot_warm_cluster::"], Row::HotWarm, &[Column::Cluster]),
    suite(&["suite::hot_warm_cold_local::"], Row::HotWarmCold, &[Column::Standalone, Column::Local]),
    suite(&["suite::hot_warm_cold_s3::"], Row::HotWarmCold, &[Column::Standalone, Column::S3]),
    suite(&["suite::hot_warm_cold_azure::"], Row::HotWarmCold, &[Column::Standalone, Column::Azure]),
    suite(&["suite::hot_warm_cluster_cold_local::"], Row::HotWarmCold, &[Column::Cluster, Column::Local]),
    suite(&["suite::hot_warm_tls::"], Row::HotWarm, &[Column::Tls]),
    suite(&["suite::hot_warm_tls_cold_s3::"], Row::HotWarmCold, &[Column::Tls, Column::S3]),
    // The router over sentinel-mode warm through failovers.
    Evidence {
        binary: "tier-router::it",
        tests: &["sentinel::"],
        row: Row::HotWarm,
        columns: &[Column::Sentinel],
    },
    Evidence {
        binary: "tier-router::it",
        tests: &["sentinel_behind::"],
        row: Row::HotWarm,
        columns: &[Column::Sentinel],
    },
    // The `tierlog` binary's `demo` on real servers.
    Evidence {
        binary: "tierlog::cli",
        tests: &["servers::demo_with_cold_on_azurite"],
        row: Row::HotCold,
        columns: &[Column::Azure],
    },
    Evidence {
        binary: "tierlog::cli",
        tests: &["servers::demo_against_valkey_and_s3"],
        row: Row::HotWarmCold,
        columns: &[Column::Standalone, Column::S3],
    },
    // Each tier's own suites against the backend.
    Evidence {
        binary: "tier-cold::it",
        tests: &[
            "conformance::conformance_on_a_local_directory",
            "conformance::the_cold_position_conformance_suite_on_a_local_directory",
        ],
        row: Row::TierAlone,
        columns: &[Column::Local],
    },
    Evidence {
        binary: "tier-cold::it",
        tests: &["conformance::conformance_on_s3", "conformance::the_cold_position_conformance_suite_on_s3"],
        row: Row::TierAlone,
        columns: &[Column::S3],
    },
    Evidence {
        binary: "tier-cold::it",
        tests: &["encryption::"],
        row: Row::TierAlone,
        columns: &[Column::S3],
    },
    Evidence { binary: "tier-cold::it", tests: &["azure::"], row: Row::TierAlone, columns: &[Column::Azure] },
    Evidence { binary: "tier-cold::it", tests: &["gcs::"], row: Row::TierAlone, columns: &[Column::Gcs] },
    Evidence {
        binary: "tier-warm::it",
        tests: &["conformance::"],
        row: Row::TierAlone,
        columns: &[Column::Standalone],
    },
    Evidence {
        binary: "tier-warm::it",
        tests: &["sentinel::"],
        row: Row::TierAlone,
        columns: &[Column::Sentinel],
    },
    Evidence {
        binary: "tier-warm::it",
        tests: &["cluster::"],
        row: Row::TierAlone,
        columns: &[Column::Cluster],
    },
    Evidence { binary: "tier-warm::it", tests: &["tls::"], row: Row::TierAlone, columns: &[Column::Tls] },
];

/// What the matrix says under itself.
const NOTES: &[&str] = &[
    "ok N: all N tests of the cell passed; FAIL F/N: F of them failed; not run: no test of this run \
     exercises the cell; -: the deployment has no tier on that backend",
    "hot+warm+cold: a suite deployment counts for its warm and its cold backend both",
    "tier alone: tier-cold's / tier-warm's own suites against the server, without the router",
    "GCS: the read path only; fake-gcs-server refuses object_store's XML API PUT (docs/cold.md, \"Backends\")",
];

impl Evidence {
    fn covers(&self, binary: &str, test: &str) -> bool {
        binary == self.binary && self.tests.iter().any(|prefix| test.starts_with(prefix))
    }
}

/// `(passed, failed)` of the tests in `outcomes` (`(binary, test, passed)`) that
/// exercise `row` on `column`; a test counts once even if two entries cover it.
fn cell_counts(outcomes: &[(String, String, bool)], row: Row, column: Column) -> (usize, usize) {
    let covering: Vec<&Evidence> =
        EVIDENCE.iter().filter(|e| e.row == row && e.columns.contains(&column)).collect();
    let mut counts = (0, 0);
    for (binary, test, passed) in outcomes {
        if covering.iter().any(|e| e.covers(binary, test)) {
            if *passed {
                counts.0 += 1;
            } else {
                counts.1 += 1;
            }
        }
    }
    counts
}

fn cell_text(row: Row, column: Column, outcomes: &[(String, String, bool)]) -> String {
    if !row.has(column) {
        return "-".into();
    }
    match cell_counts(outcomes, row, column) {
        (0, 0) => "not run".into(),
        (passed, 0) => format!("ok {passed}"),
        (passed, failed) => format!("FAIL {failed}/{}", passed + failed),
    }
}

/// The matrix for a run's `outcomes` (`(binary, test, passed)`), with its notes, and a
/// line naming the suite deployments that no cell counts (a new one must be added to
/// [`EVIDENCE`]).
pub(crate) fn render(outcomes: &[(String, String, bool)]) -> String {
    let header: Vec<&str> =
        std::iter::once("deployment").chain(COLUMNS.iter().map(|(_, name)| *name)).collect();
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|s| (*s).to_owned()).collect()];
    for (row, name) in ROWS {
        let mut line = vec![name.to_owned()];
        line.extend(COLUMNS.iter().map(|(column, _)| cell_text(row, *column, outcomes)));
        table.push(line);
    }
    let widths: Vec<usize> =
        (0..header.len()).map(|i| table.iter().map(|line| line[i].len()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    // A line above the header naming the tiers the columns belong to.
    let mut tiers = format!("{:w0$}  {:w1$}", "", "", w0 = widths[0], w1 = widths[1]);
    let cold_width: usize = widths[2..6].iter().map(|w| w + 2).sum::<usize>() - 2;
    let _ = write!(tiers, "  {:cold_width$}  warm", "cold");
    out.push_str(tiers.trim_end());
    out.push('\n');
    for line in &table {
        let text: Vec<String> =
            line.iter().zip(&widths).map(|(cell, width)| format!("{cell:width$}")).collect();
        out.push_str(text.join("  ").trim_end());
        out.push('\n');
    }
    for note in NOTES {
        let _ = writeln!(out, "{note}");
    }
    let mut unmapped: Vec<&str> = outcomes
        .iter()
        .filter(|(binary, test, _)| binary == SUITE && !EVIDENCE.iter().any(|e| e.covers(binary, test)))
        .filter_map(|(_, test, _)| test.strip_prefix(SUITE_PREFIX))
        .filter_map(|test| test.split_once("::").map(|(deployment, _)| deployment))
        .collect();
    unmapped.sort_unstable();
    unmapped.dedup();
    if !unmapped.is_empty() {
        let _ = writeln!(
            out,
            "suite deployments in no cell (add them to xtask's EVIDENCE): {}",
            unmapped.join(", ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(binary: &str, test: &str, passed: bool) -> (String, String, bool) {
        (binary.to_owned(), test.to_owned(), passed)
    }

    /// The cells of `row` (after its name), split on runs of two or more spaces.
    fn cells(matrix: &str, row: &str) -> Vec<String> {
        let line = matrix.lines().find(|l| l.starts_with(row) && l[row.len()..].starts_with("  ")).unwrap();
        line[row.len()..].split("  ").map(str::trim).filter(|c| !c.is_empty()).map(str::to_owned).collect()
    }

    #[test]
    fn cells_count_their_tests_and_a_cell_no_test_ran_is_not_run() {
        let outcomes = [
            outcome(SUITE, "suite::hot::restart", true),
            outcome(SUITE, "suite::hot_cold_azure::restart", true),
            outcome(SUITE, "suite::hot_cold_azure::live_tail", false),
            outcome(SUITE, "suite::hot_warm_cold_s3::restart", true),
            outcome(SUITE, "suite::hot_warm_cold_local::restart", true),
            outcome("tier-cold::it", "gcs::reads", true),
            outcome("tier-warm::it", "tls::refuses", false),
            // Not evidence of anything: another binary, tests outside the prefixes (the
            // router's other modules, a deployment's name outside `suite::`, a module
            // whose name only starts like a covered one).
            outcome("tier-router::config", "suite::hot::x", true),
            outcome(SUITE, "hot::x", true),
            outcome(SUITE, "config::parses", true),
            outcome(SUITE, "sentinel_like::failover", true),
            outcome("tier-cold::it", "conformance::something_else", true),
            outcome("tier-cold::it", "reads::gcs_like", true),
        ];
        let matrix = render(&outcomes);
        assert_eq!(cells(&matrix, "hot"), ["ok 1", "-", "-", "-", "-", "-", "-", "-", "-"]);
        assert_eq!(
            cells(&matrix, "hot+cold"),
            ["-", "not run", "not run", "FAIL 1/2", "not run", "-", "-", "-", "-"]
        );
        assert_eq!(
            cells(&matrix, "hot+warm"),
            ["-", "-", "-", "-", "-", "not run", "not run", "not run", "not run"]
        );
        // Two suite deployments with standalone warm: both count for the standalone cell.
        assert_eq!(
            cells(&matrix, "hot+warm+cold"),
            ["-", "ok 1", "ok 1", "not run", "not run", "ok 2", "not run", "not run", "not run"]
        );
        assert_eq!(
            cells(&matrix, "tier alone"),
            ["-", "not run", "not run", "not run", "ok 1", "not run", "not run", "not run", "FAIL 1/1"]
        );
        assert!(!matrix.contains("in no cell"), "{matrix}");
    }

    #[test]
    fn nothing_run_is_not_run_everywhere_and_an_unknown_suite_deployment_is_named() {
        let matrix = render(&[]);
        for (row, name) in ROWS {
            for (i, cell) in cells(&matrix, name).iter().enumerate() {
                let want = if row.has(COLUMNS[i].0) { "not run" } else { "-" };
                assert_eq!(cell, want, "{name} column {i}: {matrix}");
            }
        }
        let matrix = render(&[
            outcome(SUITE, "suite::hot_warm_quic::restart", true),
            // The router's tests outside the suite name no deployment.
            outcome(SUITE, "config::parses", true),
            outcome(SUITE, "sentinel::failover", true),
        ]);
        assert!(matrix.contains("in no cell (add them to xtask's EVIDENCE): hot_warm_quic\n"), "{matrix}");
        assert_eq!(cells(&matrix, "hot+warm")[8], "not run");
        assert_eq!(cells(&matrix, "hot+warm")[6], "ok 1");
    }

    #[test]
    fn every_suite_module_of_the_router_has_a_cell() {
        let suite = include_str!("../../crates/tier-router/tests/it/suite.rs");
        let modules: Vec<&str> = suite
            .lines()
            .filter_map(|l| l.trim().split_once(" => ("))
            .map(|(module, _)| module.trim())
            .filter(|m| m.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .collect();
        assert!(modules.len() >= 10, "{modules:?}");
        for module in modules {
            let test = format!("{SUITE_PREFIX}{module}::restart_continues_offsets");
            assert!(EVIDENCE.iter().any(|e| e.covers(SUITE, &test)), "suite module {module} has no cell");
        }
    }
}
