//! The verifier: reads a topic back through the store from its first offset to the
//! commit point and checks every acknowledged record is there exactly once, at its
//! acknowledged offset, with its payload intact, and that offsets are dense.

use std::collections::{BTreeMap, HashMap};

use futures::StreamExt;
use tier_core::{ErrorKind, Offset, OffsetRange, StartPosition};
use tier_router::Topic;

use crate::{
    ChaosError,
    ack::Ack,
    payload::{self, RecordId},
};

/// What reading a topic back found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verification {
    /// Acknowledged records checked.
    pub acked: u64,
    /// Acknowledged records not found at their offset with their payload (excluding
    /// offsets in an expected, reported loss).
    pub lost: u64,
    /// Records whose identity appeared more than once.
    pub duplicated: u64,
    /// Offsets missing from the dense sequence (a reader gap or a jump).
    pub gaps: u64,
    /// Records served with a payload that fails its checksum (undetected corruption).
    pub bad_payloads: u64,
    /// Records read.
    pub read: u64,
    /// Records read at offsets no acknowledgement names (appends that failed, or were
    /// never answered, and became committed later). Not a failure by itself: a scenario
    /// that must not serve them checks it.
    pub unacknowledged: u64,
    /// Problems in words (the first few).
    pub notes: Vec<String>,
    /// What each tier held when the check started (shows retention, trimming and
    /// export at work).
    pub tiers: String,
}

impl Verification {
    /// No loss, duplicate, gap or bad payload.
    pub fn is_clean(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.gaps == 0 && self.bad_payloads == 0
    }

    fn note(&mut self, text: String) {
        if self.notes.len() < 8 {
            self.notes.push(text);
        }
    }
}

/// Reads `topic` over `[from, commit point)`, skipping the `excused` ranges (losses
/// recovery reported, which no tier can serve), and checks it against `acks`.
pub async fn verify_topic(
    topic: &Topic,
    acks: &[Ack],
    from: Offset,
    excused: &[OffsetRange],
) -> Result<Verification, ChaosError> {
    verify_topic_around(topic, acks, from, excused, &[]).await
}

/// [`verify_topic`], also reading around `gaps` — offsets the store recorded as skipped
/// (a recovery that could not trust the WAL's end continues at its reservation) — which
/// excuses nothing: an acknowledged record inside one still counts as lost.
pub async fn verify_topic_around(
    topic: &Topic,
    acks: &[Ack],
    from: Offset,
    excused: &[OffsetRange],
    gaps: &[OffsetRange],
) -> Result<Verification, ChaosError> {
    let ranges = topic.ranges().await.map_err(|e| ChaosError::tier("reading the topic's ranges", e))?;
    let end = ranges.committed;
    let tiers = format!(
        "hot {:?}, warm {:?}, cold {:?}, committed {}",
        ranges.hot, ranges.warm, ranges.cold, ranges.committed
    );
    let mut expected: BTreeMap<Offset, RecordId> = BTreeMap::new();
    for ack in acks {
        expected.extend(ack.records());
    }
    let excused_at = |o: Offset| excused.iter().any(|r| r.start <= o && o < r.end);
    let mut v = Verification {
        acked: expected.keys().filter(|o| !excused_at(**o)).count() as u64,
        tiers,
        ..Verification::default()
    };
    let acked_end = expected.keys().next_back().map_or(0, |o| o + 1);
    if acked_end > end {
        v.note(format!("commit point {end} is below the last acknowledged offset {}", acked_end - 1));
    }
    let mut found: HashMap<Offset, RecordId> = HashMap::new();
    let mut seen: HashMap<RecordId, u32> = HashMap::new();
    let skipped: Vec<OffsetRange> = excused.iter().chain(gaps).copied().collect();
    for region in regions(from, end, &skipped) {
        read_region(topic, region, &mut v, &mut found, &mut seen).await?;
    }
    v.unacknowledged = found.keys().filter(|o| !expected.contains_key(o)).count() as u64;
    v.duplicated = seen.values().filter(|n| **n > 1).map(|n| u64::from(*n - 1)).sum();
    for (offset, id) in &expected {
        if excused_at(*offset) {
            continue;
        }
        if found.get(offset) != Some(id) {
            v.lost += 1;
            if v.lost <= 3 {
                let got = found.get(offset).copied();
                v.note(format!("acknowledged offset {offset} should hold {id:?}, read {got:?}"));
            }
        }
    }
    Ok(v)
}

/// The records `topic` serves over `[from, end)`, by offset (what a consumer has seen).
pub async fn served_records(
    topic: &Topic,
    from: Offset,
    end: Offset,
) -> Result<BTreeMap<Offset, RecordId>, ChaosError> {
    let mut v = Verification::default();
    let (mut found, mut seen) = (HashMap::new(), HashMap::new());
    if from < end {
        read_region(topic, OffsetRange { start: from, end }, &mut v, &mut found, &mut seen).await?;
    }
    Ok(found.into_iter().collect())
}

/// `[from, end)` minus the excused ranges.
fn regions(from: Offset, end: Offset, excused: &[OffsetRange]) -> Vec<OffsetRange> {
    let mut sorted: Vec<OffsetRange> = excused.to_vec();
    sorted.sort_by_key(|r| r.start);
    let mut out = Vec::new();
    let mut at = from;
    for r in sorted {
        if r.start > at {
            out.push(OffsetRange { start: at, end: r.start.min(end) });
        }
        at = at.max(r.end);
    }
    if at < end {
        out.push(OffsetRange { start: at, end });
    }
    out.retain(|r| r.start < r.end);
    out
}

async fn read_region(
    topic: &Topic,
    region: OffsetRange,
    v: &mut Verification,
    found: &mut HashMap<Offset, RecordId>,
    seen: &mut HashMap<RecordId, u32>,
) -> Result<(), ChaosError> {
    let mut reader = topic
        .reader(StartPosition::Offset(region.start))
        .await
        .map_err(|e| ChaosError::tier(format!("opening a reader at {}", region.start), e))?;
    let mut next = region.start;
    while next < region.end {
        let Some(item) = reader.next().await else {
            v.note(format!("the reader ended at {next} before {}", region.end));
            v.gaps += region.end - next;
            return Ok(());
        };
        let record = match item {
            Ok(record) => record,
            Err(e) => {
                if e.kind() == ErrorKind::Corruption {
                    v.bad_payloads += 1;
                }
                v.note(format!("reading at {next}: {e}"));
                v.gaps += region.end - next;
                return Ok(());
            }
        };
        if record.offset != next {
            v.note(format!("expected offset {next}, read {}", record.offset));
            v.gaps += record.offset.saturating_sub(next).max(1);
        }
        next = record.offset + 1;
        v.read += 1;
        match payload::decode(&record.payload) {
            Ok(id) => {
                found.insert(record.offset, id);
                *seen.entry(id).or_default() += 1;
            }
            Err(e) => {
                v.bad_payloads += 1;
                v.note(format!("offset {}: {e}", record.offset));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_skip_excused_ranges() {
        let r = |start, end| OffsetRange { start, end };
        assert_eq!(regions(0, 100, &[]), vec![r(0, 100)]);
        assert_eq!(regions(0, 100, &[r(10, 20), r(0, 5)]), vec![r(5, 10), r(20, 100)]);
        assert_eq!(regions(0, 100, &[r(0, 100)]), vec![]);
        assert_eq!(regions(0, 50, &[r(40, 80)]), vec![r(0, 40)]);
    }
}
