//! Which tier served which offsets of a read: consecutive offsets one source served, and
//! the table `demo` and `consume` print of them.

use tier_core::{Offset, OffsetRange};
use tier_router::Source;

use crate::cmd::status::render_table;

/// Consecutive offsets served by one source.
#[derive(Debug)]
pub(crate) struct Run {
    source: Source,
    range: OffsetRange,
}

/// Adds `offset`, served by `source`, to `runs`: to the last run when it continues it.
pub(crate) fn add_to_runs(runs: &mut Vec<Run>, source: Source, offset: Offset) {
    match runs.last_mut() {
        Some(run) if run.source == source && run.range.end == offset => run.range.end += 1,
        _ => runs.push(Run { source, range: OffsetRange::new(offset, offset + 1) }),
    }
}

/// `runs` as an indented table: tier, offsets, records.
pub(crate) fn render_runs(runs: &[Run]) -> String {
    let mut rows = vec![["tier".to_owned(), "offsets".to_owned(), "records".to_owned()]];
    for run in runs {
        rows.push([run.source.label().to_owned(), run.range.to_string(), run.range.len().to_string()]);
    }
    render_table(&rows).lines().map(|line| format!("  {line}\n")).collect()
}

/// Prints on stderr which tier served which offsets of a read of `count` records from
/// `topic` (stdout may be the records). A closed stderr is no reason to fail a read whose
/// records were delivered: the summary is then left out.
pub(crate) fn print_served(topic: &str, count: u64, runs: &[Run]) {
    use std::io::Write;
    if count == 0 || runs.is_empty() {
        return;
    }
    let text = format!("read {} from {topic}:\n{}", crate::units::count(count, "record"), render_runs(runs));
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}
