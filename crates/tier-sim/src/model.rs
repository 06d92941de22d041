//! The reference model: what was acknowledged (offset → record), what was refused (outcome
//! unknown, never acknowledged), everything ever served, the ranges the store reported as
//! lost or maybe lost, and which copies the schedule destroyed. See `docs/simulation.md`
//! for the invariants and why each is stated as it is.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use bytes::Bytes;
use tier_core::{Offset, OffsetRange, Timestamp};

/// A record the simulation produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rec {
    /// Its payload (unique in the run).
    pub payload: Bytes,
    /// Its timestamp.
    pub timestamp: Timestamp,
}

/// An acknowledged record.
#[derive(Clone, Debug)]
pub struct Acked {
    /// The record.
    pub rec: Rec,
    /// How many WAL destructions had happened when it was acknowledged.
    pub epoch: usize,
}

/// A broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The invariant, a short fixed name (violations are grouped and shrunk by it).
    pub invariant: &'static str,
    /// What was seen.
    pub detail: String,
    /// The generation index of the step after which it was seen (`None`: final checks).
    pub step: Option<u32>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.step {
            Some(s) => write!(f, "{} (after step {s}): {}", self.invariant, self.detail),
            None => write!(f, "{} (final checks): {}", self.invariant, self.detail),
        }
    }
}

/// Invariant names.
pub mod inv {
    /// An offset was served (or acknowledged) with two different records.
    pub const TWO_CONTENTS: &str = "offset served with two contents";
    /// A record whose append failed was served although no write tier confirmed it.
    pub const UNACKED_SERVED: &str = "never-acknowledged record served";
    /// A record was served at an offset a degraded open skipped (warm may hold records
    /// there that were never acknowledged; no tier may serve one) while the store still
    /// kept a record of the skip (the WAL's directory or the state directory survived).
    pub const SKIPPED_SERVED: &str = "record served inside offsets a degraded open skipped";
    /// A record was served that the simulation never produced, or at two offsets.
    pub const FOREIGN: &str = "record served that was not appended there";
    /// An acknowledged record is missing (not served, not lost with every copy).
    pub const MISSING: &str = "acknowledged record missing";
    /// An acknowledged record is gone with every copy, but no report names it.
    pub const UNREPORTED: &str = "acknowledged record lost without a report";
    /// Under `fsync = always` an acknowledged record the schedule never destroyed a WAL
    /// copy of (it was fsynced before its answer) is gone, reported or not: the store
    /// dropped a durable record.
    pub const DURABLE_DROPPED: &str = "durable acknowledged record dropped";
    /// The reader failed inside the committed range where data exists.
    pub const READ_FAILED: &str = "read failed inside the committed range";
    /// The reader served offsets out of order or skipped some.
    pub const NOT_DENSE: &str = "reader not dense";
    /// Cold holds offsets beyond the commit point.
    pub const EXPORT_UNCOMMITTED: &str = "cold holds uncommitted offsets";
    /// The store did not open.
    pub const OPEN_FAILED: &str = "store failed to open";
    /// The store refused the topic as damaged (`Corruption` naming a file or object)
    /// though the schedule damaged nothing there: a power cut, a crash or a lost
    /// directory left a state its recovery does not accept (the topic is wedged).
    pub const REFUSED_UNDAMAGED: &str = "topic refused as damaged without damage";
    /// A step never finished.
    pub const HUNG: &str = "step hung";
    /// The live tail did not deliver an acknowledged record.
    pub const LIVE_TAIL: &str = "live tail missed an acknowledged record";
    /// After the faults stopped, cold did not reach the commit point.
    pub const LIVENESS_EXPORT: &str = "liveness: export does not reach the commit point";
    /// WAL retention deleted a segment sealed less than the retention time before its
    /// "now" (or after it: the clock went back), with the size limit out of reach.
    pub const YOUNG_DELETED: &str = "WAL retention deleted a young segment";
    /// After the faults stopped, the WAL kept segments retention should delete.
    pub const LIVENESS_RETENTION: &str = "liveness: WAL retention does not catch up";
    /// After the faults stopped, a flush still failed.
    pub const LIVENESS_FLUSH: &str = "liveness: flush keeps failing";
    /// A second store opened on the state directory this store wrote (their data
    /// directories are siblings, the state directory the default `<parent>/router`).
    pub const SHARED_STATE: &str = "a second store opened on another store's state directory";
    /// Warm refused a write of the store's by its owner check, with no other writer: the
    /// store wrote under an earlier epoch than a claim of its own (one whose answer it
    /// lost).
    pub const SELF_FENCED: &str = "the store fenced by its own claim";
}

/// The model (see the module docs).
#[derive(Debug, Default)]
pub struct Model {
    /// Offset → acknowledged record.
    pub acked: BTreeMap<Offset, Acked>,
    /// Payload → acknowledged offset.
    pub acked_at: HashMap<Bytes, Offset>,
    /// Payloads whose append failed (never acknowledged).
    pub refused: HashMap<Bytes, Timestamp>,
    /// Of those, the ones refused while the WAL failed (its directory gone, or its fsync
    /// failing): warm may have taken them, or the WAL's file holds them unsynced, so their
    /// outcome is unknown (the refusal says recovery may commit them).
    pub refused_by_failing_wal: HashSet<Bytes>,
    /// Offsets the WAL wrote but could not fsync (a `WalFsyncFails` that fired), as it
    /// reported them: a refused record served at one of them was written before the
    /// failure.
    pub unsynced: Vec<OffsetRange>,
    /// Offset → payload of everything ever served or acknowledged.
    pub seen: HashMap<Offset, Bytes>,
    /// Ranges the store reported as lost or maybe lost.
    pub reported: Vec<OffsetRange>,
    /// Ranges degraded opens skipped (`RecoveryReport::skipped`): nothing acknowledged
    /// lies there; a reader moves past them as past a reported loss.
    pub skipped: Vec<OffsetRange>,
    /// How many of the first `skipped` ranges the store may no longer know of: the WAL's
    /// directory and the state directory (each keeps a copy of the skipped offsets) were
    /// both lost before an open recorded them again. A record served there is judged as
    /// any other never-acknowledged record.
    pub skipped_forgotten: usize,
    /// WAL destructions: the offsets whose WAL copy each destroyed (over-approximated).
    pub wal_destroyed: Vec<OffsetRange>,
    /// For each entry of `wal_destroyed`: true when it was byte damage (the store cannot
    /// know before reading), false for a lost directory or a power cut.
    pub wal_damage: Vec<bool>,
    /// For each entry of `wal_destroyed`: cold's end when it happened (offsets of a
    /// damaged segment at or beyond it can reach cold only as a copy of the damage).
    pub wal_cold_end: Vec<Offset>,
    /// Cold objects damaged: their offsets.
    pub cold_damaged: Vec<OffsetRange>,
    /// (offset, payload) → (whether the WAL held it then, `wal_destroyed.len()` then) of
    /// each record whose confirmed warm copy a failover to a replica behind took away
    /// (`SimWarm::fail_over_behind`).
    pub warm_lost: BTreeMap<(Offset, Bytes), (bool, usize)>,
    /// Violations found.
    pub violations: Vec<Violation>,
    /// Records checked by full checks (for the table).
    pub checked: u64,
}

impl Model {
    /// Records a violation (at most a few per invariant, to keep reports short).
    pub fn violate(&mut self, invariant: &'static str, detail: String, step: Option<u32>) {
        if self.violations.iter().filter(|v| v.invariant == invariant).count() < 3 {
            self.violations.push(Violation { invariant, detail, step });
        }
    }

    /// An append answered `Ok(range)` for `recs`.
    pub fn ack(&mut self, range: OffsetRange, recs: &[Rec], step: Option<u32>) {
        let epoch = self.wal_destroyed.len();
        for (i, rec) in recs.iter().enumerate() {
            let offset = range.start + i as u64;
            if let Some(prev) = self.seen.get(&offset)
                && *prev != rec.payload
            {
                let detail = format!(
                    "offset {offset} acknowledged for {:?} but earlier held {:?}",
                    lossy(&rec.payload),
                    lossy(prev)
                );
                self.violate(inv::TWO_CONTENTS, detail, step);
            }
            self.seen.insert(offset, rec.payload.clone());
            self.acked_at.insert(rec.payload.clone(), offset);
            self.acked.insert(offset, Acked { rec: rec.clone(), epoch });
        }
    }

    /// An append failed for `recs`; `wal_failing`: while the WAL failed (its directory
    /// gone, or an fsync failure).
    pub fn refuse(&mut self, recs: &[Rec], wal_failing: bool) {
        for rec in recs {
            self.refused.insert(rec.payload.clone(), rec.timestamp);
            if wal_failing {
                self.refused_by_failing_wal.insert(rec.payload.clone());
            }
        }
    }

    /// A degraded open skipped `range` as holding nothing acknowledged: an acknowledged
    /// record there is one the store no longer counts.
    pub fn skip(&mut self, range: OffsetRange, step: Option<u32>) {
        if let Some((offset, _)) = self.acked.range(range.start..range.end).next() {
            let detail =
                format!("offset {offset} was acknowledged, and a degraded open skipped {range} as unused");
            self.violate(inv::UNREPORTED, detail, step);
        }
        if !range.is_empty() && !self.skipped.contains(&range) {
            self.skipped.push(range);
        }
    }

    /// The skipped range holding `offset` that the store still keeps a record of.
    pub fn skipped_known(&self, offset: Offset) -> Option<OffsetRange> {
        self.skipped.iter().skip(self.skipped_forgotten).find(|r| r.contains(offset)).copied()
    }

    /// The store reported `range` lost or maybe lost.
    pub fn report(&mut self, range: OffsetRange) {
        if !range.is_empty() && !self.reported.contains(&range) {
            self.reported.push(range);
        }
    }

    /// True when a report names `offset`.
    pub fn reported(&self, offset: Offset) -> bool {
        self.reported.iter().any(|r| r.contains(offset))
    }

    /// The end of the reported range holding `offset`.
    pub fn reported_end(&self, offset: Offset) -> Option<Offset> {
        self.reported.iter().filter(|r| r.contains(offset)).map(|r| r.end).max()
    }

    /// True when the schedule destroyed the WAL copy of the acknowledged record at
    /// `offset` after it was acknowledged.
    pub fn wal_copy_destroyed(&self, offset: Offset, a: &Acked) -> bool {
        self.wal_destroyed.iter().skip(a.epoch).any(|r| r.contains(offset))
    }

    /// True when the schedule damaged the cold object holding `offset`, or the WAL
    /// segment it was exported from after the damage (an export uploads the file as it
    /// is).
    pub fn cold_copy_damaged(&self, offset: Offset) -> bool {
        self.cold_damaged.iter().any(|r| r.contains(offset)) || self.exported_damaged(offset)
    }

    /// True when the WAL segment holding `offset` was damaged before cold held it: an
    /// export uploads the file as it is, so cold's copy (if any) is damaged too.
    pub fn exported_damaged(&self, offset: Offset) -> bool {
        self.wal_destroyed
            .iter()
            .zip(&self.wal_damage)
            .zip(&self.wal_cold_end)
            .any(|((r, damage), cold_end)| *damage && r.contains(offset) && offset >= *cold_end)
    }

    /// The offsets of the damaged cold object holding `offset`, if the schedule damaged
    /// one.
    pub fn damaged_object(&self, offset: Offset) -> Option<OffsetRange> {
        self.cold_damaged.iter().find(|r| r.contains(offset)).copied()
    }

    /// Records a WAL destruction of `range` (`damage`: byte damage, else a loss), with
    /// cold's end at the time.
    pub fn destroy_wal(&mut self, range: OffsetRange, damage: bool, cold_end: Offset) {
        self.wal_destroyed.push(range);
        self.wal_damage.push(damage);
        self.wal_cold_end.push(cold_end);
    }
}

/// A payload for messages.
pub fn lossy(b: &Bytes) -> String {
    String::from_utf8_lossy(&b[..b.len().min(24)]).into_owned()
}
