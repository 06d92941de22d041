//! Exit codes and the one-line error report.
//!
//! `0` success, `1` error, `2` usage (clap's errors, bad arguments, invalid topic
//! names), `3` problems found by `tierlog verify` (and others), `130` `produce` interrupted. Documented in `--help` and
//! `docs/cli.md`.

use std::fmt;

/// Success.
pub(crate) const OK: u8 = 0;
/// Any error that is not a usage error.
pub(crate) const ERROR: u8 = 1;
/// Bad command line.
pub(crate) const USAGE: u8 = 2;
/// `verify` found problems.
pub(crate) const PROBLEMS: u8 = 3;
/// `produce` stopped by Ctrl-C (128 + SIGINT, as shells report it).
pub(crate) const INTERRUPTED: u8 = 130;

/// An error in the command line's arguments (exit code 2).
#[derive(Debug)]
pub(crate) struct UsageError(String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A usage error carrying `message`.
pub(crate) fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(message.into()))
}

/// The exit code for `error`.
pub(crate) fn code_for(error: &anyhow::Error) -> u8 {
    if error.chain().any(|e| e.is::<UsageError>()) { USAGE } else { ERROR }
}

/// `error` with its causes as one line: `error: what: why: root cause`.
pub(crate) fn one_line(error: &anyhow::Error) -> String {
    format!("error: {}", message(error))
}

/// [`one_line`] without the `error: ` before it.
pub(crate) fn message(error: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in error.chain() {
        let text = plain(cause).split_whitespace().collect::<Vec<_>>().join(" ");
        // Skip a cause the previous message already quotes in full.
        if !parts.last().is_some_and(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}

/// A cause's text, with the library's `fenced:` (its error kind for "another writer or
/// other data holds this position, or the topic refuses writes until an operator
/// decides") said as `refused:`.
fn plain(cause: &(dyn std::error::Error + 'static)) -> String {
    let text = cause.to_string();
    match cause.downcast_ref::<tier_core::TierError>() {
        Some(e) if e.kind() == tier_core::ErrorKind::Fenced => text.replacen(": fenced: ", ": refused: ", 1),
        _ => text,
    }
}
