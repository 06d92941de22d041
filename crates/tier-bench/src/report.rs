//! Result rows, the markdown table printed on stdout and the JSON files under
//! `target/bench/`.

use std::{fmt::Write as _, path::Path};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// One measured case: a throughput beside its baseline, or a measurement described in
/// `detail` (latencies, request counts, peak memory).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Row {
    /// Workload number and name, e.g. `1 hot append`.
    pub(crate) workload: String,
    /// What varies inside the workload, e.g. `1 KiB x100 fsync=always`.
    pub(crate) case: String,
    /// Records per second through tierlog.
    pub(crate) records_per_s: Option<f64>,
    /// Payload megabytes (10^6 bytes) per second through tierlog.
    pub(crate) mb_per_s: Option<f64>,
    /// Payload megabytes per second of the baseline on the same bytes.
    pub(crate) baseline_mb_per_s: Option<f64>,
    /// tierlog throughput / baseline throughput (or the measured value / its reference).
    pub(crate) ratio: Option<f64>,
    /// The target, in words (`>= 0.8x raw`), empty when there is none.
    pub(crate) target: String,
    /// `met`, `MISSED` or empty.
    pub(crate) verdict: String,
    /// Anything else measured (latencies, requests, peak RSS, why not measured).
    pub(crate) detail: String,
}

impl Row {
    /// A row of `workload`/`case` with nothing measured yet.
    pub(crate) fn new(workload: &str, case: impl Into<String>) -> Self {
        Self { workload: workload.to_owned(), case: case.into(), ..Self::default() }
    }

    /// Fills the throughput columns from `records` records of `bytes` payload bytes
    /// done in `secs` by tierlog and `baseline_secs` by the baseline.
    pub(crate) fn throughput(
        mut self,
        records: u64,
        bytes: u64,
        secs: f64,
        baseline_secs: Option<f64>,
    ) -> Self {
        let secs = secs.max(1e-9);
        self.records_per_s = Some(records as f64 / secs);
        self.mb_per_s = Some(bytes as f64 / 1e6 / secs);
        if let Some(b) = baseline_secs {
            let b = b.max(1e-9);
            self.baseline_mb_per_s = Some(bytes as f64 / 1e6 / b);
            self.ratio = Some(b / secs);
        }
        self
    }

    /// Sets the target: the ratio must be at least `min`.
    pub(crate) fn target_at_least(mut self, min: f64, words: &str) -> Self {
        self.target = words.to_owned();
        if let Some(r) = self.ratio {
            self.verdict = if r >= min { "met" } else { "MISSED" }.to_owned();
        }
        self
    }

    /// Sets a target checked by the caller.
    pub(crate) fn target_checked(mut self, words: &str, met: bool) -> Self {
        self.target = words.to_owned();
        self.verdict = if met { "met" } else { "MISSED" }.to_owned();
        self
    }

    /// Sets the detail column.
    pub(crate) fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }

    /// Adds a clause to the detail (a floor measured beside the row).
    pub(crate) fn with_floor(mut self, clause: impl AsRef<str>) -> Self {
        self.detail = format!("{}; {}", self.detail, clause.as_ref());
        self
    }
}

fn num(v: Option<f64>) -> String {
    match v {
        None => String::new(),
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) if v >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    }
}

/// The rows as one markdown table.
pub(crate) fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| workload | case | records/s | MB/s | baseline MB/s | ratio | target | | detail |\n\
         |---|---|---:|---:|---:|---:|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.workload,
            r.case,
            num(r.records_per_s),
            num(r.mb_per_s),
            num(r.baseline_mb_per_s),
            r.ratio.map(|v| format!("{v:.2}x")).unwrap_or_default(),
            r.target,
            r.verdict,
            r.detail.replace('|', "\\|")
        );
    }
    out
}

/// The whole run as written to JSON.
#[derive(Debug, Serialize)]
pub(crate) struct RunReport<'a> {
    /// Unix time the run started, seconds.
    pub(crate) started_unix: u64,
    /// Whether `--quick` was given.
    pub(crate) quick: bool,
    /// Logical CPUs.
    pub(crate) cpus: usize,
    /// Total wall time of the run, seconds.
    pub(crate) wall_secs: f64,
    /// Every row.
    pub(crate) rows: &'a [Row],
}

/// Writes `report` to `dir/<started_unix>.json` and `dir/latest.json`.
pub(crate) fn write_json(dir: &Path, report: &RunReport<'_>) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = serde_json::to_string_pretty(report)?;
    for name in [format!("{}.json", report.started_unix), "latest.json".to_owned()] {
        let path = dir.join(name);
        std::fs::write(&path, &json).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_ratio_is_baseline_time_over_tier_time() {
        let row = Row::new("w", "c").throughput(1000, 2_000_000, 2.0, Some(1.0));
        assert_eq!(row.records_per_s, Some(500.0));
        assert_eq!(row.mb_per_s, Some(1.0));
        assert_eq!(row.baseline_mb_per_s, Some(2.0));
        assert_eq!(row.ratio, Some(0.5));
    }

    #[test]
    fn verdict_follows_the_ratio() {
        let slow = Row::new("w", "c").throughput(1, 1, 2.0, Some(1.0)).target_at_least(0.8, "x");
        assert_eq!(slow.verdict, "MISSED");
        let fast = Row::new("w", "c").throughput(1, 1, 1.0, Some(1.0)).target_at_least(0.8, "x");
        assert_eq!(fast.verdict, "met");
        let none = Row::new("w", "c").target_at_least(0.8, "x");
        assert_eq!(none.verdict, "", "no ratio, no verdict");
    }

    #[test]
    fn markdown_has_one_line_per_row_with_every_column() {
        let rows = vec![
            Row::new("1 a", "first").throughput(10, 10, 1.0, Some(1.0)),
            Row::new("2 b", "second").detail("x | y"),
        ];
        let table = markdown(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[2].starts_with("| 1 a | first | 10.0 |"), "{}", lines[2]);
        assert!(lines[2].contains("| 1.00x |"), "{}", lines[2]);
        assert!(lines[3].ends_with("| x \\| y |"), "a pipe inside a cell is escaped: {}", lines[3]);
    }

    #[test]
    fn json_files_are_written_and_parse_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rows = vec![Row::new("1 a", "c").throughput(1, 1, 1.0, None)];
        let report = RunReport { started_unix: 42, quick: true, cpus: 2, wall_secs: 1.5, rows: &rows };
        write_json(dir.path(), &report).expect("write");
        for name in ["42.json", "latest.json"] {
            let text = std::fs::read_to_string(dir.path().join(name)).expect("read");
            let value: serde_json::Value = serde_json::from_str(&text).expect("json");
            assert_eq!(value["rows"][0]["case"], "c");
            assert_eq!(value["quick"], true);
        }
    }
}
