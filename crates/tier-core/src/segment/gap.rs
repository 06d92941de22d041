//! The name of a *gap marker*: a file (WAL) or object (cold) recording that a range of
//! offsets was lost and the log continues after it. Both tiers use this one grammar,
//! `<from:020>-<to:020>.gap` with `to` exclusive, so a gap reads the same everywhere.

use crate::{Offset, OffsetRange};

/// The suffix of gap marker names.
pub const GAP_SUFFIX: &str = ".gap";

/// `<from:020>-<to:020>.gap` for the lost offsets `range` (non-empty; `to` exclusive).
pub fn gap_marker_name(range: OffsetRange) -> String {
    format!("{:020}-{:020}{GAP_SUFFIX}", range.start, range.end)
}

/// The lost range a gap marker name names, or `None` for any other name (wrong widths,
/// non-digits, an empty or reversed range).
pub fn parse_gap_marker_name(name: &str) -> Option<OffsetRange> {
    let (from, to) = name.strip_suffix(GAP_SUFFIX)?.split_once('-')?;
    let digits = |d: &str| d.len() == 20 && d.bytes().all(|b| b.is_ascii_digit());
    if !digits(from) || !digits(to) {
        return None;
    }
    let (from, to): (Offset, Offset) = (from.parse().ok()?, to.parse().ok()?);
    (from < to).then(|| OffsetRange::new(from, to))
}
