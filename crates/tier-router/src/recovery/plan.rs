//! Recovery's decisions as data: the evidence a recovery gathers ([`Evidence`]) and the
//! pure functions that turn it into what recovery does — [`plan_replay`] (whether and
//! from where the WAL is rebuilt from warm, and what is recorded before it) and [`plan`]
//! (the next offset, the lost / maybe-lost / skipped ranges, warm's back-fill, the commit
//! point, and the ordered durable effects). `recover` gathers, plans and applies the
//! effects in order; the rules are tested over every combination of the evidence
//! (`tests`).

use tier_core::{Offset, OffsetRange};

use crate::config::WarmFailurePolicy;

/// Losses recorded in the state directory (`<topic>.losses`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Losses {
    /// Offsets known acknowledged that no tier holds.
    pub(crate) lost: Vec<OffsetRange>,
    /// Offsets that may have been acknowledged that no tier holds.
    pub(crate) maybe_lost: Vec<OffsetRange>,
}

/// What warm answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WarmSeen {
    /// No warm tier.
    Disabled,
    /// Warm could not be reached (`Unavailable`).
    Unreachable,
    /// Warm's range (after it was restarted past never-acknowledged records, if it was).
    Holds(OffsetRange),
}

/// Everything recovery reads before it decides (see `recover`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Evidence {
    /// `router.warm_failure_policy`.
    pub(crate) policy: WarmFailurePolicy,
    /// The WAL fsyncs every append before it is acknowledged (`fsync = always`).
    pub(crate) fsync_always: bool,
    /// What the WAL holds.
    pub(crate) hot: OffsetRange,
    /// Opening the WAL cut its tail back (a torn write or media damage).
    pub(crate) cut_back: bool,
    /// The torn points the WAL records as gaps: a seal a power cut cut short lost the
    /// sealed segment's unsynced tail, and an open of the WAL recorded the lost offsets as
    /// a gap (`docs/hot.md`, Recovery). tier-hot does not say which open recorded which;
    /// [`Evidence::torn_points`] says which recovery reports.
    pub(crate) wal_gaps: Vec<OffsetRange>,
    /// The checkpointed commit point.
    pub(crate) checkpoint: Option<Offset>,
    /// Where warm's confirmed batches ended at the checkpoint.
    pub(crate) warm_confirmed: Option<Offset>,
    /// The durable offset reservation.
    pub(crate) reservation: Option<Offset>,
    /// The reservation says the WAL holds every offset acknowledged below it
    /// (`ReservationFile::wal_is_exact`).
    pub(crate) reservation_exact: bool,
    /// The fence file (the end the tiers held when the topic was fenced).
    pub(crate) fence: Option<Offset>,
    /// Losses an earlier recovery kept and did not finish recording.
    pub(crate) pending: Losses,
    /// The skipped offsets recorded in the state directory.
    pub(crate) unacked_state: Vec<OffsetRange>,
    /// The skipped offsets recorded in the WAL's directory.
    pub(crate) unacked_wal: Vec<OffsetRange>,
    /// The WAL's rebuilt marker (`Some(bound)`) if it has one.
    pub(crate) rebuilt: Option<Option<Offset>>,
    /// What cold holds (`None`: no cold tier).
    pub(crate) cold: Option<OffsetRange>,
    /// Where cold's log continues (past a trailing gap); 0 without cold.
    pub(crate) cold_continues: Offset,
    /// What warm answered.
    pub(crate) warm: WarmSeen,
}

/// Evidence that exists only after the replay step: what the WAL holds then, what was
/// replayed, and whether a topic marker was found with no local evidence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AfterReplay {
    /// The base offset of the first replayed batch kept to confirm again, if any.
    pub(crate) first_kept: Option<Offset>,
    /// A topic marker said the topic existed while nothing local did.
    pub(crate) marked: bool,
    /// What the WAL holds after the replay.
    pub(crate) wal: OffsetRange,
}

/// The evidence contradicts itself: recovery fails (`Corruption`) at `offset`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Inconsistent {
    pub(crate) offset: Offset,
    pub(crate) message: String,
}

/// The replay step: warm is ahead of the WAL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ReplayPlan {
    /// Offsets no tier holds below warm's start (a lost WAL).
    pub(crate) lost: Option<OffsetRange>,
    /// What is replayed, and what is written before it; `None`: nothing to replay.
    pub(crate) replay: Option<Replay>,
}

/// Replaying warm into the WAL, in order: keep the losses, fence, mark the WAL rebuilt,
/// replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Replay {
    /// Replay warm's batches from the one holding this offset.
    pub(crate) from: Offset,
    /// Keep (to confirm again) the replayed batches ending after this offset.
    pub(crate) keep_after: Option<Offset>,
    /// Losses kept before the replay.
    pub(crate) kept: Losses,
    /// Fence the topic at this offset before the replay.
    pub(crate) fence: Option<Offset>,
    /// The rebuilt marker's bound.
    pub(crate) rebuilt_bound: Option<Offset>,
}

/// What warm is sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Backfill {
    /// After a replay: warm's batches `[from, to)` (if any), then the replayed batches kept.
    Replayed { warm_from: Option<(Offset, Offset)> },
    /// Warm's batches `[from, held_to)` as warm stores them, then the rest up to `target`
    /// from the WAL or cold.
    Fill { from: Offset, held_to: Offset, target: Offset },
}

/// A durable effect (or, `CollectBackfill`, a read that may fail), applied in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Write `<topic>.losses`.
    KeepLosses(Losses),
    /// Write the fence file at the offset.
    WriteFence(Offset),
    /// Read the batches warm is sent.
    CollectBackfill(Backfill),
    /// Write both copies of the skipped offsets.
    WriteUnacked(Vec<OffsetRange>),
    /// Record `[cold.end, wal_first)` lost in cold.
    RecordGapInCold { cold: OffsetRange, wal_first: Offset },
    /// Make the WAL continue at the offset.
    SkipWal(Offset),
    /// Remove the WAL's rebuilt marker.
    ClearRebuilt,
}

/// What recovery reports and the writer starts from, and the effects that make it so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) lost: Vec<OffsetRange>,
    pub(crate) maybe_lost: Vec<OffsetRange>,
    pub(crate) skipped: Option<OffsetRange>,
    pub(crate) end_unknown: bool,
    pub(crate) next_offset: Offset,
    pub(crate) committed: Offset,
    pub(crate) warm_backfill: Option<OffsetRange>,
    pub(crate) unacked: Vec<OffsetRange>,
    pub(crate) warm_confirmed_from: Offset,
    /// The offsets of torn points recovery reports ([`Evidence::torn_points`]) that warm
    /// holds (outside offsets a degraded open skipped): acknowledged records only warm
    /// holds now, which the exporter stores in cold from warm.
    pub(crate) torn_in_warm: Vec<OffsetRange>,
    /// The offsets reported lost or maybe lost that no tier holds (no record is there):
    /// the commit point passes them as it passes the WAL's gaps — also those the WAL
    /// records no gap for (below its first offset, where a cut took its first segments).
    pub(crate) holes: Vec<OffsetRange>,
    pub(crate) effects: Vec<Effect>,
}

fn overlaps(a: OffsetRange, b: OffsetRange) -> bool {
    a.start < b.end && b.start < a.end
}

/// The parts of `range` outside every range of `held`, in order.
pub(crate) fn outside(range: OffsetRange, held: &[OffsetRange]) -> Vec<OffsetRange> {
    let mut out = vec![range];
    for h in held.iter().filter(|h| !h.is_empty()) {
        out = out
            .into_iter()
            .flat_map(|p| {
                if !overlaps(p, *h) {
                    return vec![p];
                }
                [OffsetRange::new(p.start, h.start.max(p.start)), OffsetRange::new(h.end.min(p.end), p.end)]
                    .into_iter()
                    .filter(|x| !x.is_empty())
                    .collect()
            })
            .collect();
    }
    out
}

impl Evidence {
    /// What warm holds (`None`: disabled or unreachable).
    pub(crate) fn warm_range(&self) -> Option<OffsetRange> {
        match self.warm {
            WarmSeen::Holds(r) => Some(r),
            _ => None,
        }
    }

    /// No state file that bounds the offsets handed out survived: no checkpoint, no
    /// reservation (the state directory was lost, or the topic is new).
    pub(crate) fn state_lost(&self) -> bool {
        self.checkpoint.is_none() && self.reservation.is_none()
    }

    /// The WAL holds nothing of the topic: it was lost (or the topic is new).
    pub(crate) fn wal_lost(&self) -> bool {
        self.hot.end == 0
    }

    /// The offsets earlier degraded opens skipped, from either copy.
    pub(crate) fn unacked_found(&self) -> Vec<OffsetRange> {
        crate::state::unacked_union(self.unacked_state.clone(), self.unacked_wal.clone())
    }

    /// A WAL that holds the topic — or that opening cut back to nothing, which held it —
    /// while no state file survived, written without an fsync per append: a power cut (or
    /// a failed fsync) may have taken acknowledged records.
    pub(crate) fn wal_unvouched(&self) -> bool {
        (!self.wal_lost() || self.cut_back) && self.state_lost() && !self.fsync_always
    }

    /// The WAL cannot vouch for its end (see the module docs of `recovery`).
    pub(crate) fn wal_unsure(&self) -> bool {
        self.reservation.is_some_and(|res| res > self.hot.end && (!self.reservation_exact || self.cut_back))
            || self.wal_unvouched()
            || self.fence.is_some()
            || self.checkpoint.is_some_and(|cp| cp > self.hot.end)
            || !self.pending.lost.is_empty()
            || !self.pending.maybe_lost.is_empty()
            || self.rebuilt.is_some()
    }

    /// The torn points this recovery reports (see [`Evidence::wal_gaps`]): all of them
    /// when opening cut the log back (a torn point may have been recorded at this open;
    /// one an earlier recovery recorded is reported again), or when the state directory
    /// was lost (no checkpoint, no reservation) — the earlier recovery's report of them
    /// lived there until its open succeeded, and an open that failed on another topic
    /// never gave it (simulation seed 140000660); none otherwise: the recovery that
    /// recorded them reported them, and its kept losses say so until its open succeeds.
    pub(crate) fn torn_points(&self) -> &[OffsetRange] {
        if self.cut_back || self.state_lost() { &self.wal_gaps } else { &[] }
    }

    /// Offsets warm must hold no record of: those earlier degraded opens skipped, and
    /// cold's trailing gap.
    pub(crate) fn not_in_warm(&self) -> Vec<OffsetRange> {
        let mut out = self.unacked_found();
        if let Some(c) = self.cold
            && self.cold_continues > c.end
        {
            out.push(OffsetRange::new(c.end, self.cold_continues));
        }
        out
    }

    /// Why an unreachable warm tier fails recovery; `None`: the topic opens degraded.
    pub(crate) fn degraded_refusal(&self) -> Option<&'static str> {
        if self.policy != WarmFailurePolicy::Degrade {
            Some("router.warm_failure_policy is `fail`")
        } else if self.hot.end == 0 {
            // An empty WAL that never held the topic: warm may hold records the WAL lacks
            // (a lost disk), and continuing without knowing its end could reuse offsets.
            Some("the WAL holds nothing of the topic, so recovery needs warm's records")
        } else if self.wal_unsure() {
            // A power cut may have taken the WAL's unsynced tail: warm may hold those
            // acknowledged records. Opening without it would declare them maybe lost and
            // continue past them, leaving warm unable to take the next batch.
            Some(
                "the WAL cannot vouch for its end (a power cut may have taken its tail, it ends before the last \
                 checkpoint, or an earlier recovery did not finish), so recovery needs warm's records",
            )
        } else if self.reservation.is_none() {
            // Each batch goes to warm and the WAL at once: warm may hold never-acknowledged
            // batches past the WAL's end, up to the reservation — the state files are gone, so
            // nothing says how far, and continuing at the WAL's end could hand their offsets
            // out again.
            Some(
                "the router's state files are gone (no reservation), so nothing bounds the batches warm may hold \
                 past the WAL's end, and recovery needs warm's range",
            )
        } else {
            None
        }
    }

    /// Neither the WAL nor a state file survived: nothing local bounds the offsets handed out.
    pub(crate) fn no_local_evidence(&self) -> bool {
        self.wal_lost() && self.state_lost()
    }

    /// No offset was ever handed out, as far as the local state tells.
    pub(crate) fn unborn(&self) -> bool {
        self.wal_lost() && self.reservation.is_none() && self.checkpoint.unwrap_or(0) == 0
    }

    /// Under `fail` a non-empty warm tier bounds what was acknowledged (every
    /// acknowledgement waited for it).
    fn warm_bounds_acks(&self) -> bool {
        self.policy == WarmFailurePolicy::Fail && !self.warm_range().unwrap_or_default().is_empty()
    }

    /// A WAL an earlier recovery was rebuilding when nothing local bounded the acknowledged
    /// offsets, and still no state file: as if the WAL were lost.
    fn rebuilt_unbounded(&self) -> bool {
        self.rebuilt.is_some_and(|b| b.is_none()) && self.state_lost()
    }
}

/// Whether (and how) the WAL is rebuilt from warm: warm is ahead of the WAL. Fails when
/// the WAL survived but ends below cold's end or warm's start.
pub(crate) fn plan_replay(e: &Evidence) -> Result<ReplayPlan, Inconsistent> {
    let hot = e.hot;
    let wal_lost = e.wal_lost();
    let warm_r = e.warm_range().unwrap_or_default();
    let cold_r = e.cold.unwrap_or_default();
    let mut out = ReplayPlan::default();
    if !wal_lost && hot.end < cold_r.end {
        return Err(Inconsistent {
            offset: hot.end,
            message: format!(
                "the WAL ends at {} but cold already holds offsets up to {}",
                hot.end, cold_r.end
            ),
        });
    }
    if warm_r.is_empty() || warm_r.end <= hot.end {
        return Ok(out);
    }
    let mut from = hot.end;
    if wal_lost {
        // Into an empty WAL from where cold's log continues: past its segments and the
        // offsets it recorded lost after them (an earlier recovery declared them lost or
        // skipped; cold never takes records there, so the WAL must not hold them either).
        from = from.max(cold_r.end).max(e.cold_continues);
    }
    if warm_r.start > from {
        if !wal_lost {
            return Err(Inconsistent {
                offset: hot.end,
                message: format!(
                    "the WAL ends at {} but warm starts at {}: offsets {} are held by no tier and the WAL cannot \
                     continue past them",
                    hot.end,
                    warm_r.start,
                    OffsetRange::new(hot.end, warm_r.start)
                ),
            });
        }
        out.lost = Some(OffsetRange::new(from, warm_r.start));
        from = warm_r.start;
    }
    if from >= warm_r.end {
        return Ok(out);
    }
    // Warm's batches after the last point known confirmed may lack their confirmation (a
    // `WAIT` that fell short lands the entry on the primary): keep them, as warm stores
    // them, to confirm again (an identical re-append). Under `fail` that point is the
    // checkpoint, under `degrade` the warm floor the checkpoint recorded; without one,
    // only what warm trimmed away is known confirmed: keep every batch warm holds.
    let keep_after = match e.policy {
        WarmFailurePolicy::Fail => Some(e.checkpoint.unwrap_or(warm_r.start)),
        WarmFailurePolicy::Degrade => Some(e.warm_confirmed.unwrap_or(warm_r.start)),
    };
    // Replaying puts records in the WAL: the next recovery would see it hold the topic.
    // The losses found so far are kept first, and a topic that nothing local vouches for
    // is fenced first: an open that fails after the replay must not leave a WAL that
    // passes for local evidence of where the acknowledged offsets end. Nor, for a lost
    // WAL, pass for one that vouches for its end (under `fsync = always` it would): the
    // offsets up to the reservation past what the tiers hold are kept as maybe lost too,
    // and bound the next recovery if this open fails after the replay.
    let mut kept = e.pending.clone();
    kept.lost.extend(out.lost);
    let warm_bounds_acks = e.warm_bounds_acks();
    if wal_lost
        && !warm_bounds_acks
        && let Some(res) = e.reservation
    {
        let held = warm_r.end.max(cold_r.end).max(e.cold_continues).max(e.checkpoint.unwrap_or(0));
        if res > held {
            kept.maybe_lost.push(OffsetRange::new(held, res));
        }
    }
    let no_local = e.no_local_evidence();
    let fence = (no_local && !warm_bounds_acks && e.fence.is_none()).then_some(warm_r.end.max(cold_r.end));
    // The same evidence in the WAL's own directory, which survives the state directory:
    // until this recovery completes, the WAL's end vouches for nothing, and offsets up to
    // the bound may have been acknowledged (unknown when nothing local bounded them).
    let rebuilt_bound = ((!no_local && !e.rebuilt_unbounded()) || warm_bounds_acks).then(|| {
        let losses = kept.lost.iter().chain(&kept.maybe_lost).map(|r| r.end);
        [hot.end, warm_r.end, cold_r.end, e.cold_continues, e.checkpoint.unwrap_or(0)]
            .into_iter()
            .chain(e.reservation)
            .chain(e.rebuilt.flatten())
            .chain(e.fence)
            .chain(losses)
            .max()
            .unwrap_or(0)
    });
    out.replay = Some(Replay { from, keep_after, kept, fence, rebuilt_bound });
    Ok(out)
}

/// Drops repeated ranges, in order.
fn dedup(ranges: &mut Vec<OffsetRange>) {
    let mut seen = Vec::with_capacity(ranges.len());
    ranges.retain(|r| {
        let new = !seen.contains(r);
        seen.push(*r);
        new
    });
}

/// Where the topic continues and what recovery records, given the evidence, the replay
/// step planned from it ([`plan_replay`]) and what the replay left.
pub(crate) fn plan(e: &Evidence, replay: &ReplayPlan, after: &AfterReplay) -> Plan {
    let hot = e.hot;
    let wal_lost = e.wal_lost();
    let warm = e.warm_range();
    let warm_r = warm.unwrap_or_default();
    let cold_r = e.cold.unwrap_or_default();
    let warm_bounds_acks = e.warm_bounds_acks();
    let degrade = e.policy == WarmFailurePolicy::Degrade;
    let mut effects = Vec::new();
    // Reported again: an earlier recovery found them and its open did not complete.
    let mut lost = e.pending.lost.clone();
    let mut maybe_lost = e.pending.maybe_lost.clone();
    lost.extend(replay.lost);

    // A lost WAL and a warm stream that is empty but starts above cold's end (it was
    // trimmed or restarted past offsets the WAL held then): no tier holds those offsets.
    if wal_lost && warm_r.is_empty() && warm_r.start > cold_r.end {
        lost.push(OffsetRange::new(cold_r.end, warm_r.start));
    }
    // Offsets are never reused: continue after everything any tier holds.
    let mut next = hot.end.max(warm_r.end).max(cold_r.end);
    // A checkpointed commit point beyond what the tiers hold: those offsets were handed
    // out and acknowledged; they are lost, and never reused.
    if let Some(cp) = e.checkpoint
        && cp > next
    {
        lost.push(OffsetRange::new(next, cp));
        next = cp;
    }
    // A torn point the WAL recorded at open: a seal cut short lost acknowledged records
    // the WAL no longer holds. The offsets warm or cold holds are served from them (and
    // the exporter stores warm's copy in cold rather than a gap); the rest are reported —
    // lost below the checkpoint (acknowledged), maybe lost above it — except offsets a
    // degraded open skipped, which hold nothing acknowledged.
    let mut held_elsewhere = vec![warm_r, cold_r];
    held_elsewhere.extend(e.unacked_found());
    let mut torn_in_warm = Vec::new();
    for gap in e.torn_points() {
        let (from, to) = (gap.start.max(warm_r.start), gap.end.min(warm_r.end));
        if from < to {
            torn_in_warm.extend(outside(OffsetRange::new(from, to), &e.unacked_found()));
        }
        for piece in outside(*gap, &held_elsewhere) {
            let known = e.checkpoint.unwrap_or(0).clamp(piece.start, piece.end);
            lost.extend(Some(OffsetRange::new(piece.start, known)).filter(|x| !x.is_empty()));
            maybe_lost.extend(Some(OffsetRange::new(known, piece.end)).filter(|x| !x.is_empty()));
        }
    }
    // Warm's end counts even for an empty stream: it handed those offsets out once.
    let other_tier_holds = warm_r.end > 0 || !cold_r.is_empty() || after.marked;

    // A WAL that cannot vouch for its end (lost, rebuilt, cut back at open, or a power cut
    // may have taken an unsynced tail): offsets up to the reservation may have been
    // acknowledged after the last checkpoint. Under `fail` a non-empty warm tier bounds
    // what was acknowledged, so its end — already in `next` — is exact.
    if let Some(res) = e.reservation
        && res > next
        && !warm_bounds_acks
        && (wal_lost || e.rebuilt.is_some() || !e.reservation_exact || e.cut_back)
    {
        maybe_lost.push(OffsetRange::new(next, res));
        next = res;
    }
    // The same from the marker of a WAL an earlier recovery was rebuilding.
    if let Some(bound) = e.rebuilt.flatten()
        && bound > next
        && !warm_bounds_acks
    {
        maybe_lost.push(OffsetRange::new(next, bound));
        next = bound;
    }
    // Warm was unreachable (the topic opened degraded: the WAL vouches for its end): warm
    // may hold never-acknowledged batches past the WAL's end up to the reservation.
    // Continue at the reservation; warm is restarted past the skipped offsets once it
    // answers.
    let mut skipped = None;
    let mut unacked = e.unacked_found();
    if e.warm == WarmSeen::Unreachable
        && let Some(res) = e.reservation
        && res > next
    {
        let s = OffsetRange::new(next, res);
        skipped = Some(s);
        unacked.push(s);
        next = res;
    }
    // Offsets earlier degraded opens skipped are never used either.
    if let Some(end) = unacked.iter().map(|r| r.end).max()
        && end > next
    {
        next = end;
    }
    // Cold's trailing gap, recorded by an earlier recovery (or the exporter) as held by no
    // tier. With the WAL lost or being rebuilt, or the state directory lost (no
    // checkpoint, no reservation), the open that found those offsets lost may not have
    // completed (its gap marker written, its answer lost) and its record of them (the
    // state directory's losses, the WAL's gap marker) may be gone: cold's is then the
    // only evidence left, and what no tier holds of it is reported again.
    if (wal_lost || e.rebuilt.is_some() || e.state_lost()) && e.cold_continues > cold_r.end {
        let mut known: Vec<OffsetRange> = vec![hot, warm_r, after.wal];
        known.extend(lost.iter().chain(&maybe_lost).copied());
        known.extend(unacked.iter().copied());
        maybe_lost.extend(outside(OffsetRange::new(cold_r.end, e.cold_continues), &known));
    }
    // Cold's trailing gap: the log continues after it, never inside it; reported again.
    if e.cold_continues > next {
        maybe_lost.push(OffsetRange::new(next, e.cold_continues));
        next = e.cold_continues;
    }
    // Losses an earlier recovery found: never reused, whatever the tiers hold now.
    if let Some(end) = lost.iter().chain(&maybe_lost).map(|r| r.end).max()
        && end > next
    {
        next = end;
    }
    // Nothing survived that bounds the acknowledged end, or an earlier recovery found
    // that and no operator has resumed the topic since (its fence file).
    if let Some(at_least) = e.fence
        && at_least > next
    {
        maybe_lost.push(OffsetRange::new(next, at_least));
        next = at_least;
    }
    // With the WAL lost or being rebuilt, what lies below `next` past cold's log is held by
    // warm or the replay alone. An offset there that no tier holds and no report names
    // is reported maybe lost: the report that named it may be gone (an earlier recovery
    // saw warm's copy, unconfirmed under `degrade`, then a failover took it) (simulation
    // seed 130015493).
    if wal_lost || e.rebuilt.is_some() {
        let mut known = vec![warm_r, after.wal];
        known.extend(lost.iter().chain(&maybe_lost).chain(&unacked).copied());
        let from = cold_r.end.max(e.cold_continues);
        if from < next {
            maybe_lost.extend(outside(OffsetRange::new(from, next), &known));
        }
    }
    let end_unknown = e.fence.is_some()
        || ((e.no_local_evidence() && other_tier_holds) || e.wal_unvouched() || e.rebuilt_unbounded())
            && !warm_bounds_acks;
    if end_unknown && e.fence.is_none() {
        // The evidence that made this decision may not survive the next restart (an
        // unsynced WAL tail): the fence must.
        effects.push(Effect::KeepLosses(Losses { lost: lost.clone(), maybe_lost: maybe_lost.clone() }));
        effects.push(Effect::WriteFence(next));
    }

    // What the WAL holds once it continues at `next`.
    let wal = after.wal;
    // Offsets between cold's end and the WAL's first one that warm does not hold either:
    // no tier holds them.
    let warm_covers = !warm_r.is_empty() && warm_r.start <= wal.start && warm_r.end >= wal.start;
    let held_from = if warm_covers { warm_r.start } else { wal.start };
    let cold_end = e.cold_continues.max(cold_r.end);
    // Where what the tiers hold below the WAL's first offset starts: cold's end with cold;
    // without it, warm's start (the WAL's retention deletes only what warm holds, and
    // warm's trim only what the WAL holds).
    let below_wal_from = if e.cold.is_some() { Some(cold_end) } else { warm.map(|w| w.start) };
    if e.cold.is_some() && !wal.is_empty() {
        if cold_end < held_from {
            lost.push(OffsetRange::new(cold_end, held_from));
        }
    } else if let Some(floor) = below_wal_from
        && !e.wal_lost()
        && e.cut_back
        && floor < held_from
    {
        // The same below a WAL that opening cut back (a torn point at its start: its
        // first segments never reached the disk) — to nothing past cold's end, or, without
        // cold, past warm's end: acknowledged below the checkpoint, maybe acknowledged
        // above it.
        for piece in outside(OffsetRange::new(floor, held_from), &held_elsewhere) {
            let known = e.checkpoint.unwrap_or(0).clamp(piece.start, piece.end);
            lost.extend(Some(OffsetRange::new(piece.start, known)).filter(|x| !x.is_empty()));
            maybe_lost.extend(Some(OffsetRange::new(known, piece.end)).filter(|x| !x.is_empty()));
        }
    }
    // Under `degrade` an acknowledgement waited for the WAL alone: of what opening cut off
    // the WAL (its torn points, and below its first offset), warm's copy past the point
    // known confirmed may lack its confirmation (a `WAIT` that fell short), and a failover
    // to a replica would take the only copy of acknowledged records. It is served and
    // confirmed again, and reported maybe lost (the torn points as long as they are
    // reported, [`Evidence::torn_points`]; what lies below the WAL at the open that cut it).
    if degrade
        && !e.wal_lost()
        && let Some(w) = warm
    {
        let confirmed = e.warm_confirmed.unwrap_or(w.start).clamp(w.start, w.end);
        let unconfirmed = OffsetRange::new(confirmed, w.end);
        let below_wal = below_wal_from
            .filter(|_| e.cut_back)
            .map(|floor| OffsetRange::new(floor.min(wal.start), wal.start));
        let mut held_durably = vec![cold_r];
        held_durably.extend(e.unacked_found());
        for taken in e.torn_points().iter().copied().chain(below_wal) {
            let (from, to) = (taken.start.max(unconfirmed.start), taken.end.min(unconfirmed.end));
            if from < to {
                maybe_lost.extend(outside(OffsetRange::new(from, to), &held_durably));
            }
        }
    }
    let skip_wal = !end_unknown && wal.end < next;
    let wal_now = match (skip_wal, wal.is_empty()) {
        (false, _) => wal,
        (true, true) => OffsetRange::empty_at(next),
        (true, false) => OffsetRange::new(wal.start, next),
    };

    // What warm must be sent, and the commit point to start from.
    let mut committed = next;
    let mut warm_backfill = None;
    if let Some(w) = warm {
        // Warm must continue where the WAL ends (or, empty, where it takes over).
        let target = wal_now.end.max(if wal_lost { next } else { 0 });
        // Only what is known confirmed stays confirmed: under `fail` the checkpoint,
        // under `degrade` the warm floor it recorded; without one, where warm starts.
        let confirmed_mark = if degrade { e.warm_confirmed } else { e.checkpoint };
        let checkpointed = match confirmed_mark {
            Some(cp) => cp,
            None if !w.is_empty() => w.start,
            None if wal_lost => target,
            None => hot.start,
        };
        // Also committed: what cold holds and what warm trimmed away — and what the WAL
        // no longer holds below its start, which retention deletes only once committed.
        // Not when opening cut the WAL back and warm holds everything from the known
        // point to the WAL's start — nor, under `fail`, when warm holds batches past that
        // point and ends below the start: the cut (a first segment that lost every batch)
        // may have raised the start past batches warm never confirmed, which are confirmed
        // again as warm stores them before they are served. Past warm's end, the offsets up
        // to the WAL's start are held by no tier (reported above): the commit point stops
        // there until the writer passes them.
        let known = checkpointed.max(cold_r.end).max(w.start);
        let wal_start = wal_now.start.min(target);
        let start_is_evidence =
            !(e.cut_back && w.start <= known && (w.end >= wal_start || (!degrade && w.end > known)));
        let unconfirmed = if start_is_evidence { known.clamp(wal_start, target) } else { known.min(target) };
        let from = if w.is_empty() { unconfirmed } else { w.end.min(unconfirmed) };
        if let Some(first_base) = after.first_kept {
            // Warm was ahead of the WAL: the replayed batches after the checkpoint, as warm
            // holds them, and warm's batches before them from the last point known committed.
            let mut start = first_base.max(from);
            let mut warm_from = None;
            if from < first_base {
                warm_from = Some((from, first_base));
                start = from;
            }
            warm_backfill = Some(OffsetRange::new(start, target));
            effects.push(Effect::CollectBackfill(Backfill::Replayed { warm_from }));
        } else if from < target {
            // What warm holds is confirmed again as warm stores it; what it lacks comes from
            // the WAL or cold. Never-acknowledged records warm still holds are not.
            let held_to = if w.is_empty() { from } else { w.end.min(target) };
            let held_to = held_to.min(crate::tiers::first_unacked(&unacked, from));
            effects.push(Effect::CollectBackfill(Backfill::Fill { from, held_to, target }));
            warm_backfill = Some(OffsetRange::new(from, target));
        }
        if !degrade && unconfirmed < target {
            committed = unconfirmed;
        }
    }

    // The WAL continues at `next`: record the skipped offsets — in cold first, then in the
    // WAL, whose gap marker or new segment file at `next` is itself evidence of the end,
    // so it is the last thing that can fail. Not for a topic whose end is unknown: that
    // evidence would lift its fence (`resume_topic` records them).
    if !end_unknown {
        effects.push(Effect::KeepLosses(Losses { lost: lost.clone(), maybe_lost: maybe_lost.clone() }));
        // Warm answered and holds none of the skipped offsets' records: nothing needs them
        // remembered any more. Otherwise they are kept before the WAL skips them.
        if warm.is_some_and(|w| !unacked.iter().any(|r| overlaps(*r, w))) {
            unacked.clear();
        }
        if unacked != e.unacked_state || unacked != e.unacked_wal {
            effects.push(Effect::WriteUnacked(unacked.clone()));
        }
        let wal_first = if wal.is_empty() { next } else { wal.start };
        // Not what warm holds below the WAL's first offset: the exporter stores warm's
        // copy there (a torn point at the WAL's start lost records warm still holds) —
        // also when warm's copy ends before the WAL's first offset (a cut took the WAL's
        // first segment and the WAL continues past offsets no tier holds).
        let warm_below = !warm_r.is_empty() && warm_r.start <= wal_first && warm_r.end > cold_r.end;
        let wal_first = if warm_below { warm_r.start.max(cold_r.end).min(wal_first) } else { wal_first };
        if e.cold.is_some() && !cold_r.is_empty() && cold_r.end < wal_first {
            effects.push(Effect::RecordGapInCold { cold: cold_r, wal_first });
        }
        if skip_wal {
            effects.push(Effect::SkipWal(next));
        }
        // The WAL continues past every offset that may have been acknowledged: its end
        // vouches again.
        if e.rebuilt.is_some() || replay.replay.is_some() {
            effects.push(Effect::ClearRebuilt);
        }
    }
    dedup(&mut lost);
    dedup(&mut maybe_lost);
    let mut held = vec![warm_r, cold_r, wal_now];
    held.extend(unacked.iter().copied());
    let mut holes: Vec<OffsetRange> =
        lost.iter().chain(&maybe_lost).flat_map(|r| outside(*r, &held)).collect();
    dedup(&mut holes);
    let warm_confirmed_from = if degrade { e.warm_confirmed } else { e.checkpoint }.unwrap_or(0);
    Plan {
        lost,
        maybe_lost,
        skipped,
        end_unknown,
        next_offset: next,
        committed,
        warm_backfill,
        unacked,
        warm_confirmed_from,
        torn_in_warm,
        holes,
        effects,
    }
}

/// Resuming a fenced topic at `at` (`TieredStore::resume_topic`), given what the WAL and
/// cold hold: the skipped offsets are recorded in cold first (from its end to the WAL's
/// first offset), then in the WAL — last, as its gap marker or segment file at `at` is
/// itself evidence of the end — and the rebuilt marker is removed: the operator said
/// where the topic continues.
pub(crate) fn resume(
    wal: OffsetRange,
    cold: Option<OffsetRange>,
    warm: Option<OffsetRange>,
    at: Offset,
) -> Vec<Effect> {
    let mut effects = Vec::new();
    let wal_first = if wal.is_empty() { at } else { wal.start };
    if let Some(c) = cold
        && !c.is_empty()
        && c.end < wal_first
    {
        // Not what warm holds below the WAL's first offset (as at recovery): the exporter
        // stores warm's copy there. Only what no tier holds is skipped.
        let wal_first = match warm {
            Some(w) if !w.is_empty() && w.start <= wal_first && w.end > c.end => w.start.max(c.end),
            _ => wal_first,
        };
        if c.end < wal_first {
            effects.push(Effect::RecordGapInCold { cold: c, wal_first });
        }
    }
    if wal.end < at {
        effects.push(Effect::SkipWal(at));
    }
    effects.push(Effect::ClearRebuilt);
    effects
}

#[cfg(test)]
mod tests;
