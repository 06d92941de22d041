//! The one rule by which both verifies — the online one (`GET /v1/topics/{topic}/verify`)
//! and the offline, file-by-file `tierlog verify` — judge a topic's continuity: offsets
//! between the oldest held and the newest that no tier holds are a problem, said as a
//! **recorded loss** where a gap marker (the WAL's `<from>-<to>.gap` file, cold's
//! `<topic>/<from>-<to>.gap` object, `docs/format.md`) records them lost, and as a
//! **hole** — offsets lost without a record, which nothing explains — everywhere else.
//! Both are problems (acknowledged records no tier holds); only the wording differs, so
//! that a loss recovery reported once is named as such on every later check instead of
//! looking like new damage.

use std::fmt;

use tier_core::segment::parse_gap_marker_name;
use tier_router::{OffsetRange, TierError};

/// Offsets a tier recorded lost: the range and the marker recording it (a file path or
/// an object key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedLoss {
    /// The offsets recorded lost.
    pub range: OffsetRange,
    /// The gap marker's path or key.
    pub marker: String,
}

impl RecordedLoss {
    /// The loss the gap marker at `marker` records, when its last path segment is a gap
    /// marker's name (`<from:020>-<to:020>.gap`); `None` for anything else.
    pub fn of_marker(marker: &str) -> Option<Self> {
        let name = marker.rsplit(['/', '\\']).next()?;
        parse_gap_marker_name(name).map(|range| Self { range, marker: marker.to_owned() })
    }

    /// The recorded loss a read error names: the WAL and cold answer a read inside a
    /// recorded gap with `NotFound` whose location is the gap marker (checked through the
    /// error's causes). `None` for any other error.
    pub fn of_read_error(error: &TierError) -> Option<Self> {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(e) = cause {
            if let Some(tier) = e.downcast_ref::<TierError>()
                && tier.kind() == tier_router::ErrorKind::NotFound
                && let Some(loss) = tier.context().location.as_deref().and_then(Self::of_marker)
            {
                return Some(loss);
            }
            cause = e.source();
        }
        None
    }
}

/// A break in a topic's continuity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Discontinuity {
    /// Offsets no tier holds and no marker records lost.
    Hole(OffsetRange),
    /// Offsets no tier holds that the markers named record lost.
    Lost {
        /// The offsets.
        range: OffsetRange,
        /// The markers recording them (the WAL's and cold's, when both do).
        markers: Vec<String>,
    },
}

impl Discontinuity {
    /// The recorded loss `loss`, as one problem.
    pub fn lost(loss: &RecordedLoss) -> Self {
        Self::Lost { range: loss.range, markers: vec![loss.marker.clone()] }
    }

    /// The first offset it concerns.
    pub fn start(&self) -> u64 {
        match self {
            Self::Hole(range) | Self::Lost { range, .. } => range.start,
        }
    }
}

impl fmt::Display for Discontinuity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Hole(range) => write!(f, "offsets {range} are held by no tier"),
            Self::Lost { range, markers } => {
                write!(f, "offsets {range} were lost, recorded by {}", markers.join(" and "))
            }
        }
    }
}

/// The breaks between the offsets `held` (by any tier, in any order, overlapping or not)
/// from the oldest held offset to the newest held or recorded lost: each run no range
/// holds, split where `recorded` losses cover part of it. A recorded loss below the oldest
/// held offset (a marker retention has not removed yet) or inside held offsets (another
/// tier kept the records) is no problem.
pub fn discontinuities(held: &[OffsetRange], recorded: &[RecordedLoss]) -> Vec<Discontinuity> {
    let mut held: Vec<OffsetRange> = held.iter().copied().filter(|r| !r.is_empty()).collect();
    held.sort_by_key(|r| (r.start, r.end));
    let Some(first) = held.first().map(|r| r.start) else { return Vec::new() };
    let newest =
        held.iter().map(|r| r.end).chain(recorded.iter().map(|l| l.range.end)).max().unwrap_or(first);
    // The runs no held range covers, from `first` to `newest`.
    let mut missing = Vec::new();
    let mut covered = first;
    for r in &held {
        if r.start > covered {
            missing.push(OffsetRange::new(covered, r.start));
        }
        covered = covered.max(r.end);
    }
    if newest > covered {
        missing.push(OffsetRange::new(covered, newest));
    }
    let mut out = Vec::new();
    for run in missing {
        let mut at = run.start;
        while at < run.end {
            let covering: Vec<&RecordedLoss> = recorded.iter().filter(|l| l.range.contains(at)).collect();
            if covering.is_empty() {
                // Unexplained up to the next recorded loss starting inside the run.
                let end = recorded
                    .iter()
                    .map(|l| l.range.start)
                    .filter(|&s| s > at && s < run.end)
                    .min()
                    .unwrap_or(run.end);
                out.push(Discontinuity::Hole(OffsetRange::new(at, end)));
                at = end;
            } else {
                let end = covering.iter().map(|l| l.range.end).min().unwrap_or(run.end).min(run.end);
                let mut markers: Vec<String> = covering.iter().map(|l| l.marker.clone()).collect();
                markers.sort();
                markers.dedup();
                out.push(Discontinuity::Lost { range: OffsetRange::new(at, end), markers });
                at = end;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: u64, end: u64) -> OffsetRange {
        OffsetRange::new(start, end)
    }

    fn loss(start: u64, end: u64, marker: &str) -> RecordedLoss {
        RecordedLoss { range: r(start, end), marker: marker.to_owned() }
    }

    #[test]
    fn a_hole_a_marker_records_is_a_recorded_loss_naming_every_marker() {
        let held = [r(0, 50), r(50, 90), r(100, 120), r(0, 120)];
        assert!(discontinuities(&held, &[]).is_empty(), "one tier holding everything leaves no hole");
        let held = [r(0, 50), r(50, 90), r(100, 120)];
        assert_eq!(discontinuities(&held, &[]), vec![Discontinuity::Hole(r(90, 100))]);
        let recorded = [loss(90, 100, "hot/t/x.gap"), loss(90, 100, "t/x.gap")];
        let found = discontinuities(&held, &recorded);
        assert_eq!(
            found,
            vec![Discontinuity::Lost {
                range: r(90, 100),
                markers: vec!["hot/t/x.gap".into(), "t/x.gap".into()]
            }]
        );
        assert_eq!(found[0].to_string(), "offsets [90, 100) were lost, recorded by hot/t/x.gap and t/x.gap");
    }

    #[test]
    fn only_the_part_a_marker_covers_is_recorded_the_rest_is_a_hole() {
        let held = [r(0, 10), r(40, 50)];
        let found = discontinuities(&held, &[loss(20, 30, "m")]);
        assert_eq!(
            found,
            vec![
                Discontinuity::Hole(r(10, 20)),
                Discontinuity::Lost { range: r(20, 30), markers: vec!["m".into()] },
                Discontinuity::Hole(r(30, 40)),
            ]
        );
    }

    #[test]
    fn markers_below_the_oldest_or_inside_held_offsets_are_no_problem_and_a_trailing_one_is() {
        let held = [r(100, 200)];
        assert!(discontinuities(&held, &[loss(10, 20, "old"), loss(150, 160, "held")]).is_empty());
        assert_eq!(
            discontinuities(&held, &[loss(200, 210, "tail")]),
            vec![Discontinuity::Lost { range: r(200, 210), markers: vec!["tail".into()] }]
        );
        assert!(discontinuities(&[], &[loss(0, 5, "m")]).is_empty(), "nothing held: nothing to check");
    }

    #[test]
    fn a_marker_name_is_parsed_from_a_path_or_key() {
        let name = "00000000000000000090-00000000000000000100.gap";
        assert_eq!(RecordedLoss::of_marker(&format!("data/hot/t/{name}")).map(|l| l.range), Some(r(90, 100)));
        assert_eq!(RecordedLoss::of_marker(&format!("t/{name}")).map(|l| l.range), Some(r(90, 100)));
        assert_eq!(RecordedLoss::of_marker("t/00000000000000000090-00000000000000000099.seg"), None);
    }
}
