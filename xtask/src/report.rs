//! The summary table `cargo xtask test` prints at the end: step | result | duration | details.

use std::{fmt::Write as _, time::Duration};

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It ran and succeeded.
    Passed,
    /// It ran and failed.
    Failed,
    /// It did not run (an earlier step failed).
    Skipped,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Passed => "ok",
            Outcome::Failed => "FAILED",
            Outcome::Skipped => "skipped",
        }
    }
}

/// One row of the summary (plus continuation rows for extra detail lines).
#[derive(Debug, Clone)]
pub(crate) struct StepReport {
    /// Short step name, e.g. `clippy`.
    pub(crate) name: String,
    /// How it ended.
    pub(crate) outcome: Outcome,
    /// How long it took (zero when skipped).
    pub(crate) duration: Duration,
    /// Detail lines: counts, versions, the reason for a failure.
    pub(crate) details: Vec<String>,
}

impl StepReport {
    /// A step that did not run.
    pub(crate) fn skipped(name: &str, why: &str) -> Self {
        Self {
            name: name.into(),
            outcome: Outcome::Skipped,
            duration: Duration::ZERO,
            details: vec![why.into()],
        }
    }
}

/// `0.4s`, `12.3s`, `2m 03s`.
pub(crate) fn format_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.1}s")
    } else {
        let whole = d.as_secs();
        format!("{}m {:02}s", whole / 60, whole % 60)
    }
}

/// The table as text, one line per row, columns padded to their widest cell.
pub(crate) fn render_table(steps: &[StepReport]) -> String {
    let header = ["step", "result", "duration", "details"];
    let mut rows: Vec<[String; 4]> = Vec::new();
    for step in steps {
        let duration =
            if step.outcome == Outcome::Skipped { "-".to_owned() } else { format_duration(step.duration) };
        let mut details = step.details.iter();
        let first = details.next().cloned().unwrap_or_default();
        rows.push([step.name.clone(), step.outcome.label().to_owned(), duration, first]);
        for more in details {
            rows.push([String::new(), String::new(), String::new(), more.clone()]);
        }
    }
    let width = |col: usize| {
        rows.iter().map(|r| r[col].chars().count()).chain([header[col].len()]).max().unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2)];
    let mut out = String::new();
    let mut line = |cells: [&str; 4]| {
        let text = format!(
            "{:<w0$} | {:<w1$} | {:>w2$} | {}",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(header);
    line([&"-".repeat(widths[0]), &"-".repeat(widths[1]), &"-".repeat(widths[2]), "-------"]);
    for row in &rows {
        line([&row[0], &row[1], &row[2], &row[3]]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration(Duration::from_millis(420)), "0.4s");
        assert_eq!(format_duration(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(format_duration(Duration::from_secs(123)), "2m 03s");
    }

    #[test]
    fn table_aligns_columns_and_continues_details_on_new_rows() {
        let steps = [
            StepReport {
                name: "fmt".into(),
                outcome: Outcome::Passed,
                duration: Duration::from_millis(1500),
                details: vec![],
            },
            StepReport {
                name: "tests".into(),
                outcome: Outcome::Failed,
                duration: Duration::from_secs(75),
                details: vec!["tier-core: 9 passed, 1 failed".into(), "valkey 8.0.1".into()],
            },
            StepReport::skipped("fuzz", "an earlier step failed"),
        ];
        let table = render_table(&steps);
        let expected = "\
step  | result  | duration | details
----- | ------- | -------- | -------
fmt   | ok      |     1.5s |
tests | FAILED  |   1m 15s | tier-core: 9 passed, 1 failed
      |         |          | valkey 8.0.1
fuzz  | skipped |        - | an earlier step failed
";
        assert_eq!(table, expected);
    }
}
