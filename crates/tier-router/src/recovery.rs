//! Crash recovery of one topic when the store opens it.
//!
//! The WAL is the source of truth while it exists and can be trusted. The topic continues
//! at the end of everything any tier or state file holds: `max(WAL end, warm end, cold
//! end, checkpointed commit point)`, and — when the WAL cannot vouch for its own end — the
//! durable offset reservation (see the writer) beyond that. Warm batches beyond the WAL's
//! end (and cold's end) are replayed into an empty WAL; offsets no tier can serve are
//! reported in [`RecoveryReport::lost`] (known acknowledged) or
//! [`RecoveryReport::maybe_lost`] (possibly acknowledged) — never renumbered, and recorded
//! as a gap in cold when the WAL takes over above cold's end, so the export continues.
//!
//! The WAL vouches for its end when it holds the topic, opening it cut nothing back (no
//! torn tail, see [`HotTier::cut_back_at_open`](tier_hot::HotTier::cut_back_at_open)), and
//! every acknowledged append was fsynced first (`fsync = always`) or the OS has not
//! restarted since the reservation was written (its page cache kept every write): see
//! [`ReservationFile::wal_is_exact`](crate::state::ReservationFile::wal_is_exact).
//!
//! When no state file survived, the WAL holds nothing and another tier holds records —
//! or cold's topic marker says the topic existed (written before its first offset was
//! handed out) — the whole data directory was lost and nothing bounds what was
//! acknowledged: the topic
//! opens for reads but refuses appends ([`RecoveryReport::end_unknown`]) until an operator
//! says where to continue ([`TieredStore::resume_topic`](crate::TieredStore::resume_topic)).
//!
//! Under [`WarmFailurePolicy::Fail`] the commit point restarts at the last one known (the
//! checkpoint): the WAL's batches after it are sent to warm again (an identical re-append
//! only waits for the replicas) and become readable once warm confirms them, so a batch
//! warm refused — or whose confirmation fell short — is never served after a restart
//! before warm holds it. Warm batches it lacks are sent from the WAL, or from cold for
//! offsets the WAL no longer holds, as stored (never rebuilt from records).

use futures::StreamExt;
use tier_core::{
    ErrorContext, ErrorKind, Offset, OffsetRange, RecordBatch, Tier, TierError, TierKind, TopicName,
};
use tracing::{error, info, warn};

use crate::config::WarmFailurePolicy;
use crate::state::{
    Checkpoint, PendingLosses, ReservationFile, read_checkpoint, read_fence, read_losses, read_reservation,
    read_unacked_copies, unacked_union, write_checkpoint, write_fence, write_losses, write_unacked_copies,
};
use crate::tiers::Tiers;

/// What opening a topic found and did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// The topic.
    pub topic: TopicName,
    /// What the WAL held when opened.
    pub hot: OffsetRange,
    /// What warm held (`None`: warm disabled).
    pub warm: Option<OffsetRange>,
    /// What cold held (`None`: cold disabled).
    pub cold: Option<OffsetRange>,
    /// Warm batches replayed into the WAL.
    pub replayed: Option<OffsetRange>,
    /// Records queued for warm because warm did not hold them (or, under `fail`, held
    /// them without a confirmation known to have succeeded).
    pub warm_backfill: Option<OffsetRange>,
    /// Offsets that were acknowledged but that no tier holds: known from the tiers'
    /// ends and the last checkpointed commit point.
    pub lost: Vec<OffsetRange>,
    /// Offsets that *may* have been acknowledged but that no tier holds: from what is
    /// known to the offset reservation, when the WAL cannot vouch for its end (it was
    /// lost, or a power cut may have taken an unsynced tail), or the range an operator
    /// skipped with [`TieredStore::resume_topic`](crate::TieredStore::resume_topic).
    /// They are never reused. Empty after a clean shutdown.
    pub maybe_lost: Vec<OffsetRange>,
    /// Warm could not be reached during recovery and the policy is
    /// [`WarmFailurePolicy::Degrade`]: the topic
    /// opened from the WAL (and cold) alone, `warm` is `None` (its end unknown), and
    /// the writer back-fills warm from its actual end once it answers.
    pub warm_unreachable: bool,
    /// Offsets skipped because warm was unreachable (`warm_unreachable`): its end was
    /// unknown, and it may hold records from the WAL's end up to the offset reservation
    /// that the WAL never stored — batches the WAL refused, or that a crash kept from it,
    /// never acknowledged (every acknowledgement under `degrade` waits for the WAL, whose
    /// end was exact). They are not lost; they are never used, and warm is restarted past
    /// them once it answers (`docs/router.md`, "Warm's end unknown at open").
    pub skipped: Option<OffsetRange>,
    /// Nothing that survived bounds the offsets acknowledged: the WAL holds nothing of the
    /// topic, no state file survived, and another tier holds records. Appends are refused
    /// (`Fenced`) until [`TieredStore::resume_topic`](crate::TieredStore::resume_topic)
    /// names the offset to continue at; reads work.
    pub end_unknown: bool,
    /// The offset the next append gets.
    pub next_offset: Offset,
}

impl RecoveryReport {
    /// True when nothing was (or may have been) lost and the topic accepts appends.
    pub fn is_clean(&self) -> bool {
        self.lost.is_empty() && self.maybe_lost.is_empty() && !self.end_unknown
    }
}

/// The outcome the writer starts from.
#[derive(Debug)]
pub(crate) struct Recovered {
    pub(crate) report: RecoveryReport,
    /// Batches warm must be sent (it lacks them, or their confirmation is unknown), in order.
    pub(crate) backlog: Vec<RecordBatch>,
    /// The commit point to start from: every offset below it is committed.
    pub(crate) committed: Offset,
    /// The durable offset reservation found.
    pub(crate) reservation: Option<ReservationFile>,
    /// Warm's batches from here on may lack a confirmation (the checkpoint's record of
    /// it; 0 when none survived): a writer that opened without warm confirms them again
    /// once warm answers.
    pub(crate) warm_confirmed_from: Offset,
    /// Offsets degraded opens skipped where warm may still hold never-acknowledged
    /// records (`<topic>.unacked`, see [`read_unacked`]): what a writer whose warm end is
    /// unknown must restart warm past once it answers.
    pub(crate) unacked: Vec<OffsetRange>,
}

fn ctx(topic: &TopicName) -> ErrorContext {
    ErrorContext::tier(TierKind::Router).topic(topic)
}

/// Recovers `topic` (see the module docs), in a `recovery` tracing span (topic, the
/// commit point and next offset found), and sets its export-lag gauge.
#[tracing::instrument(
    name = "recovery",
    skip_all,
    fields(topic = %topic, committed = tracing::field::Empty, next_offset = tracing::field::Empty)
)]
pub(crate) async fn recover_topic(
    tiers: &Tiers,
    state_dir: &std::path::Path,
    topic: &TopicName,
) -> Result<Recovered, TierError> {
    let recovered = recover(tiers, state_dir, topic).await?;
    let span = tracing::Span::current();
    span.record("committed", recovered.committed);
    span.record("next_offset", recovered.report.next_offset);
    if let Some(cold) = recovered.report.cold {
        crate::metrics::export_lag(topic, recovered.committed, cold);
    }
    Ok(recovered)
}

/// The body of [`recover_topic`].
async fn recover(
    tiers: &Tiers,
    state_dir: &std::path::Path,
    topic: &TopicName,
) -> Result<Recovered, TierError> {
    let hot = tiers.hot.range(topic).await?;
    let checkpoint_file = read_checkpoint(state_dir, topic)?;
    let checkpoint = checkpoint_file.map(|c| c.end);
    // Where warm's confirmed batches ended at the checkpoint (see `Checkpoint::warm`).
    let warm_confirmed = checkpoint_file.and_then(|c| c.warm);
    let reservation = read_reservation(state_dir, topic)?;
    let fence = read_fence(state_dir, topic)?;
    let pending = read_losses(state_dir, topic)?;
    // Offsets earlier degraded opens skipped: warm may hold records there that were
    // never acknowledged (see `RecoveryReport::skipped`). Kept in the state directory and
    // in the WAL's directory: either may have been lost, and what either says holds.
    let (unacked_state, unacked_wal) = read_unacked_copies(&tiers.hot.config().data_dir, state_dir, topic)?;
    let unacked_found = unacked_union(unacked_state.clone(), unacked_wal.clone());
    // The WAL holds nothing of the topic: it was lost (or the topic is new).
    let wal_lost = hot.end == 0;
    // An earlier recovery was rebuilding the WAL from warm and did not finish: what the
    // WAL holds says nothing of what was acknowledged, and the marker, in the WAL's own
    // directory, survives the state directory (see `HotTier::mark_rebuilt`).
    let rebuilt = tiers.hot.rebuilt(topic)?;
    // Whether the WAL carries the rebuilt marker now (found, or written before a replay below).
    let mut rebuilding = rebuilt.is_some();
    // A WAL that holds the topic while no state file survived, written without an fsync
    // per append: a power cut may have taken acknowledged records, and no reservation
    // says how many.
    let wal_unvouched = !wal_lost
        && checkpoint.is_none()
        && reservation.is_none()
        && tiers.hot.config().fsync != tier_hot::FsyncPolicy::Always;
    // The WAL cannot vouch for its end (see the module docs): offsets past it up to the
    // reservation may have been acknowledged, and warm may hold them. Nor can it without
    // a state file (above), or once a recovery fenced the topic.
    // Nor when it ends before the checkpointed commit point (it lost its tail: every
    // committed batch was in it), or an earlier recovery left losses unreported (its open
    // failed, possibly after replaying part of warm into the WAL).
    let wal_unsure = reservation.as_ref().is_some_and(|res| {
        res.offset > hot.end && (!res.wal_is_exact(&tiers.boot_id) || tiers.hot.cut_back_at_open(topic))
    }) || wal_unvouched
        || fence.is_some()
        || checkpoint.is_some_and(|cp| cp > hot.end)
        || !pending.lost.is_empty()
        || !pending.maybe_lost.is_empty()
        || rebuilt.is_some();
    let (cold, cold_continues) = match &tiers.cold {
        // Where cold's log continues: past offsets it recorded lost after its last
        // segment (a trailing gap, which its range does not count).
        Some(c) => (Some(c.range(topic).await?), c.continuation(topic).await?),
        None => (None, 0),
    };
    // Offsets warm must hold no record of: those earlier degraded opens skipped, and cold's
    // trailing gap — recorded lost or skipped, never served by cold, never replayed (below).
    // Warm may hold records there that were never acknowledged, and with the state
    // directory lost, the gap is the only evidence left of them (their `.unacked` file is
    // gone): a read below the WAL's start must not take them from warm while cold answers
    // the same offsets as lost.
    let mut not_in_warm = unacked_found.clone();
    if let Some(c) = cold
        && cold_continues > c.end
    {
        not_in_warm.push(OffsetRange::new(c.end, cold_continues));
    }
    let mut warm_unreachable = false;
    let warm = match &tiers.warm {
        // Warm answers: first, it must hold none of the never-acknowledged records.
        Some(w) => match w.range(topic).await {
            Ok(r) => Some(drop_unacked(tiers, topic, r, &not_in_warm).await?),
            Err(e) if e.kind() == ErrorKind::Unavailable => {
                warm_unreachable = degraded_open(tiers, topic, hot, wal_unsure, reservation.is_some(), e)?;
                None
            }
            Err(e) => return Err(e),
        },
        None => None,
    };
    let mut report = RecoveryReport {
        topic: topic.clone(),
        hot,
        warm,
        cold,
        replayed: None,
        warm_backfill: None,
        // Reported again: an earlier recovery found them and its open did not complete.
        lost: pending.lost,
        maybe_lost: pending.maybe_lost,
        warm_unreachable,
        skipped: None,
        end_unknown: false,
        next_offset: hot.end,
    };
    let warm_r = warm.unwrap_or_default();
    let cold_r = cold.unwrap_or_default();
    // Neither the WAL nor a state file survived: nothing local bounds the offsets handed out.
    let no_local_evidence = wal_lost && checkpoint.is_none() && reservation.is_none();
    // Under `fail` a non-empty warm tier bounds what was acknowledged (every
    // acknowledgement waited for it).
    let warm_bounds_acks = tiers.config.warm_failure_policy == WarmFailurePolicy::Fail && !warm_r.is_empty();
    // A WAL an earlier recovery was rebuilding when nothing local bounded the acknowledged
    // offsets, and still no state file: as if the WAL were lost.
    let rebuilt_unbounded =
        rebuilt.is_some_and(|r| r.bound.is_none()) && checkpoint.is_none() && reservation.is_none();
    let mut replayed_unconfirmed: Vec<RecordBatch> = Vec::new();

    if !wal_lost && hot.end < cold_r.end {
        return Err(TierError::corruption(
            ctx(topic).offset(hot.end),
            format!("the WAL ends at {} but cold already holds offsets up to {}", hot.end, cold_r.end),
        ));
    }
    if !warm_r.is_empty() && warm_r.end > hot.end {
        // Warm is ahead of the WAL: replay what the WAL lacks.
        let mut from = hot.end;
        if wal_lost {
            // Into an empty WAL from where cold's log continues: past its segments and
            // the offsets it recorded lost after them (an earlier recovery declared them
            // lost or skipped; cold never takes records there, so the WAL must not hold
            // them either).
            from = from.max(cold_r.end).max(cold_continues);
        }
        if warm_r.start > from {
            if !wal_lost {
                return Err(TierError::corruption(
                    ctx(topic).offset(hot.end),
                    format!(
                        "the WAL ends at {} but warm starts at {}: offsets {} are held by no tier and the WAL \
                         cannot continue past them",
                        hot.end,
                        warm_r.start,
                        OffsetRange::new(hot.end, warm_r.start)
                    ),
                ));
            }
            report.lost.push(OffsetRange::new(from, warm_r.start));
            from = warm_r.start;
        }
        if from < warm_r.end {
            // Warm's batches after the last point known confirmed may lack their
            // confirmation (a `WAIT` that fell short lands the entry on the primary): keep
            // them, as warm stores them, to confirm again (an identical re-append). Under
            // `fail` that point is the checkpoint, under `degrade` the warm floor the
            // checkpoint recorded; without one, only what warm trimmed away is known
            // confirmed: keep every batch warm holds.
            let keep_after = match tiers.config.warm_failure_policy {
                WarmFailurePolicy::Fail => Some(checkpoint.unwrap_or(warm_r.start)),
                WarmFailurePolicy::Degrade => Some(warm_confirmed.unwrap_or(warm_r.start)),
            };
            // Replaying puts records in the WAL: the next recovery would see it hold the
            // topic. The losses found so far are kept first, and a topic that nothing local
            // vouches for is fenced first (below, the fence is written again at the end
            // found): an open that fails after the replay must not leave a WAL that passes
            // for local evidence of where the acknowledged offsets end. Nor, for a lost
            // WAL, pass for one that vouches for its end (under `fsync = always` it would):
            // the offsets up to the reservation past what the tiers hold are kept as maybe
            // lost too, and bound the next recovery if this open fails after the replay.
            let mut kept = PendingLosses { lost: report.lost.clone(), maybe_lost: report.maybe_lost.clone() };
            if wal_lost
                && !warm_bounds_acks
                && let Some(res) = &reservation
            {
                let held = warm_r.end.max(cold_r.end).max(cold_continues).max(checkpoint.unwrap_or(0));
                if res.offset > held {
                    kept.maybe_lost.push(OffsetRange::new(held, res.offset));
                }
            }
            write_losses(state_dir, topic, &kept)?;
            if no_local_evidence && !warm_bounds_acks && fence.is_none() {
                write_fence(state_dir, topic, warm_r.end.max(cold_r.end))?;
            }
            // The same evidence in the WAL's own directory, which survives the state
            // directory: until this recovery completes, the WAL's end vouches for nothing,
            // and offsets up to the bound may have been acknowledged (unknown when nothing
            // local bounded them).
            let bound = ((!no_local_evidence && !rebuilt_unbounded) || warm_bounds_acks).then(|| {
                let losses = kept.lost.iter().chain(&kept.maybe_lost).map(|r| r.end);
                [hot.end, warm_r.end, cold_r.end, cold_continues, checkpoint.unwrap_or(0)]
                    .into_iter()
                    .chain(reservation.as_ref().map(|r| r.offset))
                    .chain(rebuilt.and_then(|r| r.bound))
                    .chain(fence)
                    .chain(losses)
                    .max()
                    .unwrap_or(0)
            });
            tiers.hot.mark_rebuilt(topic, bound)?;
            rebuilding = true;
            // Warm's records in offsets a degraded open skipped are never replayed (it still
            // holds them only when it could not be restarted past them): the WAL skips them.
            let (range, kept) = replay(tiers, topic, from, &unacked_found, hot, keep_after).await?;
            report.replayed = Some(range);
            replayed_unconfirmed = kept;
        }
    }
    // A lost WAL and a warm stream that is empty but starts above cold's end (it was
    // trimmed or restarted past offsets the WAL held then): no tier holds those offsets.
    if wal_lost && warm_r.is_empty() && warm_r.start > cold_r.end {
        report.lost.push(OffsetRange::new(cold_r.end, warm_r.start));
    }
    // Offsets are never reused: continue after everything any tier holds.
    let mut next = hot.end.max(warm_r.end).max(cold_r.end);

    // A checkpointed commit point beyond what the tiers hold: those offsets were handed
    // out and acknowledged; they are lost, and never reused.
    if let Some(cp) = checkpoint
        && cp > next
    {
        report.lost.push(OffsetRange::new(next, cp));
        next = cp;
    }

    // No offset was ever handed out, as far as the local state tells.
    let unborn = wal_lost && reservation.is_none() && checkpoint.unwrap_or(0) == 0;
    let marked = TopicMarkers { cold: cold_r, warm, no_local: no_local_evidence, unborn }
        .check(tiers, state_dir, topic)
        .await?;
    // Warm's end counts even for an empty stream: it handed those offsets out once.
    let other_tier_holds = warm_r.end > 0 || !cold_r.is_empty() || marked;

    // A WAL that cannot vouch for its end (lost, cut back at open — media damage or a torn
    // write — or a power cut may have taken an unsynced tail): offsets up to the
    // reservation may have been acknowledged after the last checkpoint. Report them and
    // never reuse them.
    // Under `fail` a non-empty warm tier bounds what was acknowledged (every acknowledgement
    // waited for it), so its end — already in `next` — is exact and nothing is skipped
    // (skipping would leave warm unable to continue).
    if let Some(res) = &reservation
        && res.offset > next
        && !warm_bounds_acks
        && (wal_lost
            || rebuilt.is_some()
            || !res.wal_is_exact(&tiers.boot_id)
            || tiers.hot.cut_back_at_open(topic))
    {
        report.maybe_lost.push(OffsetRange::new(next, res.offset));
        next = res.offset;
    }
    // The same from the marker of a WAL an earlier recovery was rebuilding (it kept the
    // reservation's bound there; the reservation may be gone with the state directory).
    if let Some(bound) = rebuilt.and_then(|r| r.bound)
        && bound > next
        && !warm_bounds_acks
    {
        report.maybe_lost.push(OffsetRange::new(next, bound));
        next = bound;
    }

    // Warm was unreachable (`degraded_open` let the topic open: the WAL vouches for its
    // end): under `degrade` the writer sends each batch to warm and the WAL at once, so
    // warm may hold batches past the WAL's end — refused by the WAL, or kept from it by a
    // crash — up to the reservation (every batch is numbered below it before either tier
    // sees it). None was acknowledged, but continuing at the WAL's end would hand their
    // offsets out again while warm holds other records there. Continue at the
    // reservation; warm is restarted past the skipped offsets once it answers.
    let mut unacked = unacked_found.clone();
    if warm_unreachable
        && let Some(res) = &reservation
        && res.offset > next
    {
        let skipped = OffsetRange::new(next, res.offset);
        report.skipped = Some(skipped);
        unacked.push(skipped);
        next = res.offset;
    }
    // Offsets earlier degraded opens skipped are never used either.
    if let Some(end) = unacked.iter().map(|r| r.end).max()
        && end > next
    {
        next = end;
    }

    // Cold recorded offsets lost after its last segment (a trailing gap): the log
    // continues after them, never inside them. They were reported when they were recorded;
    // they are reported again (a report may not have reached anyone: the open that
    // recorded them may have failed after it).
    if cold_continues > next {
        report.maybe_lost.push(OffsetRange::new(next, cold_continues));
        next = cold_continues;
    }

    // Losses an earlier recovery found and could not finish recording (its open failed
    // later): their offsets are never reused, whatever the tiers hold now — a WAL that
    // recovery replayed from warm since does not vouch for its end.
    if let Some(end) = report.lost.iter().chain(&report.maybe_lost).map(|r| r.end).max()
        && end > next
    {
        next = end;
    }

    // Nothing survived that bounds the acknowledged end: the WAL and the state files are
    // gone while another tier says the topic existed, or the state files are gone and the
    // WAL cannot vouch for its end (`wal_unvouched`). Or an earlier recovery found that
    // and no operator has resumed the topic since (its fence file).
    if let Some(at_least) = fence
        && at_least > next
    {
        // The tiers held up to `at_least` when the topic was fenced; they hold less now.
        report.maybe_lost.push(OffsetRange::new(next, at_least));
        next = at_least;
    }
    if fence.is_some()
        || ((no_local_evidence && other_tier_holds) || wal_unvouched || rebuilt_unbounded)
            && !warm_bounds_acks
    {
        report.end_unknown = true;
        error!(
            topic = %topic, next,
            "recovery: the WAL cannot vouch for its end and the router's state files are gone: nothing bounds \
             the offsets acknowledged beyond {next}; appends are refused until an operator resumes the topic \
             (tierlog recover --resume-at)"
        );
        if fence.is_none() {
            // The evidence that made this decision may not survive the next restart
            // (an unsynced WAL tail): the fence must.
            keep_losses(state_dir, topic, &report)?;
            write_fence(state_dir, topic, next)?;
        }
    }

    // What the WAL holds once it continues at `next` (recorded at the end, below).
    let wal = tiers.hot.range(topic).await?;
    // Offsets between cold's end and the WAL's first one that warm does not hold either
    // (the WAL was replayed from warm above cold's end by an earlier recovery whose report
    // is gone with the state directory): no tier holds them.
    if tiers.cold.is_some() && !wal.is_empty() {
        let warm_covers = !warm_r.is_empty() && warm_r.start <= wal.start && warm_r.end >= wal.start;
        let held_from = if warm_covers { warm_r.start } else { wal.start };
        // Cold's log continues past the gaps it recorded (those were reported then).
        let cold_end = cold_continues.max(cold_r.end);
        if cold_end < held_from {
            report.lost.push(OffsetRange::new(cold_end, held_from));
        }
    }
    let skip_wal = !report.end_unknown && wal.end < next;
    let wal_now = match (skip_wal, wal.is_empty()) {
        (false, _) => wal,
        (true, true) => OffsetRange::empty_at(next),
        (true, false) => OffsetRange::new(wal.start, next),
    };

    // What warm must be sent, and the commit point to start from.
    let degrade = tiers.config.warm_failure_policy == WarmFailurePolicy::Degrade;
    let mut committed = next;
    let mut backlog = Vec::new();
    if let Some(w) = warm {
        // Warm must continue where the WAL ends (or, empty, where it takes over).
        let target = wal_now.end.max(if wal_lost { next } else { 0 });
        // Under `fail`, only what is known committed stays committed: the checkpoint, or,
        // without one, where warm starts (below it warm trimmed, so those were committed).
        // Warm may hold a batch whose confirmation fell short — a `WAIT` that timed out
        // lands the entry on the primary — so what it holds after that point is confirmed
        // again (an identical re-append only waits for the replicas), whether the WAL
        // survived or was replayed from warm.
        // Under `degrade` the commit point runs ahead of warm: what warm confirmed is the
        // warm floor the checkpoint recorded. Everything after it is confirmed again
        // before WAL retention may delete the WAL's copy (the commit point stays).
        let confirmed_mark = if degrade { warm_confirmed } else { checkpoint };
        let checkpointed = match confirmed_mark {
            Some(cp) => cp,
            None if !w.is_empty() => w.start,
            None if wal_lost => target,
            None => hot.start,
        };
        // Also committed: what cold holds (only committed offsets are exported) and what
        // warm trimmed away (it held it; a batch below its start cannot be confirmed again)
        // — an empty stream too: one that starts above 0 trimmed (or restarted past) the
        // offsets below its start, and warm cannot take them back.
        let known = checkpointed.max(cold_r.end).max(w.start);
        let unconfirmed = known.clamp(wal_now.start.min(target), target);
        let from = if w.is_empty() { unconfirmed } else { w.end.min(unconfirmed) };
        if let Some(first) = replayed_unconfirmed.first() {
            // Warm was ahead of the WAL: the replayed batches after the checkpoint, as warm
            // holds them (warm holds everything replayed, so nothing else is missing), and,
            // under `fail`, warm's batches before them from the last point known committed.
            let first_base = first.base_offset();
            let mut start = first_base.max(from);
            if from < first_base {
                warm_batches(tiers, topic, from, first_base, &mut backlog).await?;
                start = from;
            }
            report.warm_backfill = Some(OffsetRange::new(start, target));
            backlog.append(&mut replayed_unconfirmed);
        } else if from < target {
            // What warm holds is confirmed again as warm stores it (the WAL's copy of a
            // batch straddling cold's end was cut at a replay, and warm would refuse it as
            // a different batch); what it lacks comes from the WAL or cold.
            // Never-acknowledged records warm still holds are not confirmed again.
            let held_to = if w.is_empty() { from } else { w.end.min(target) };
            let held_to = held_to.min(crate::tiers::first_unacked(&unacked, from));
            let reached = if from < held_to {
                warm_batches(tiers, topic, from, held_to, &mut backlog).await?
            } else {
                from
            };
            if reached < target {
                backlog.extend(batches_for_warm(tiers, topic, OffsetRange::new(reached, target)).await?);
            }
            report.warm_backfill = Some(OffsetRange::new(from, target));
        }
        if !degrade && unconfirmed < target {
            committed = unconfirmed;
        }
    }

    // The WAL continues at `next`: record the skipped offsets so reads name them and the
    // export continues across them — in cold first, then in the WAL, whose gap marker or
    // new segment file at `next` is itself evidence of the end: once it is written, a
    // later recovery no longer sees these offsets as lost, so it is the last thing that
    // can fail (a failed open reports nothing; the next one must find the same losses).
    // Not for a topic whose end is unknown: that evidence would lift its fence
    // (`resume_topic` records them).
    if !report.end_unknown {
        keep_losses(state_dir, topic, &report)?;
        // Warm answered and holds none of the skipped offsets' records (`drop_unacked`):
        // nothing needs them remembered any more. Otherwise they are kept before the WAL
        // skips them, so that the next recovery knows what warm's records there are.
        let warm_clean = warm.is_some_and(|w| !unacked.iter().any(|r| overlaps(*r, w)));
        if warm_clean {
            unacked.clear();
        }
        if unacked != unacked_state || unacked != unacked_wal {
            write_unacked_copies(&tiers.hot, state_dir, topic, &unacked)?;
        }
        let wal_first = if wal.is_empty() { next } else { wal.start };
        record_gap_in_cold(tiers, topic, cold_r, wal_first).await?;
        if skip_wal {
            skip_wal_to(tiers, topic, next).await?;
        }
        // The WAL continues past every offset that may have been acknowledged: its end
        // vouches again.
        if rebuilding {
            tiers.hot.clear_rebuilt(topic)?;
        }
    }

    report.next_offset = next;
    dedup(&mut report.lost);
    dedup(&mut report.maybe_lost);
    for range in &report.lost {
        error!(topic = %topic, lost = %range, "recovery: these offsets are held by no tier and are lost");
    }
    for range in &report.maybe_lost {
        error!(
            topic = %topic, maybe_lost = %range,
            "recovery: these offsets may have been acknowledged after the last checkpoint; no tier holds them"
        );
    }
    if report.replayed.is_some() || report.warm_backfill.is_some() {
        info!(topic = %topic, report = ?report, "recovered topic");
    }
    // For a degraded open (warm unreachable): where warm's batches must be confirmed
    // again from once it answers.
    let warm_confirmed_from = if degrade { warm_confirmed } else { checkpoint }.unwrap_or(0);
    Ok(Recovered { report, backlog, committed, reservation, warm_confirmed_from, unacked })
}

/// Records the losses found so far (those of an earlier recovery that did not complete
/// included: the report starts with them) in the state directory before recovery writes
/// anything that would hide them from the next one; the store removes the file once the
/// topic is open.
fn keep_losses(
    state_dir: &std::path::Path,
    topic: &TopicName,
    report: &RecoveryReport,
) -> Result<(), TierError> {
    let losses = PendingLosses { lost: report.lost.clone(), maybe_lost: report.maybe_lost.clone() };
    write_losses(state_dir, topic, &losses)
}

/// Drops repeated ranges (one found again by a recovery after the one that kept it), in
/// order.
fn dedup(ranges: &mut Vec<OffsetRange>) {
    let mut seen = Vec::with_capacity(ranges.len());
    ranges.retain(|r| {
        let new = !seen.contains(r);
        seen.push(*r);
        new
    });
}

/// The topic markers ([`ColdBackend::record_topic`](crate::ColdBackend::record_topic),
/// [`WarmBackend::record_topic`](crate::WarmBackend::record_topic)): each tier that holds
/// nothing of a topic (cold no segment, warm's stream never a record) records it before
/// any offset of it is handed out, so that a lost data directory is told apart from a new
/// topic — under `degrade` a topic may have acknowledged records neither tier holds (warm
/// down, or a `WAIT` that fell short before a failover, and no export yet).
struct TopicMarkers {
    cold: OffsetRange,
    /// Warm's range; `None` while warm is unreachable (a degraded open, which needs the
    /// WAL) or absent.
    warm: Option<OffsetRange>,
    /// No WAL and no state file: a marker found means the data directory was lost.
    no_local: bool,
    /// No offset was handed out as far as the local state tells: writing a missing marker
    /// must succeed (replicas included) before the topic opens. Otherwise (a topic created
    /// before markers existed) a failure is only logged, and the next open tries again.
    unborn: bool,
}

impl TopicMarkers {
    /// Records the missing markers; true when one was found with no local evidence.
    async fn check(
        &self,
        tiers: &Tiers,
        state_dir: &std::path::Path,
        topic: &TopicName,
    ) -> Result<bool, TierError> {
        let cold = tiers.cold.as_ref().filter(|_| self.cold.is_empty());
        let warm = tiers.warm.as_ref().filter(|_| self.warm.is_some_and(|w| w.end == 0));
        if cold.is_none() && warm.is_none() {
            return Ok(false);
        }
        if self.no_local {
            if let Some(c) = cold
                && c.topic_recorded(topic).await?
            {
                return Ok(true);
            }
            if let Some(w) = warm
                && w.topic_recorded(topic).await?
            {
                // Found on the primary, perhaps never confirmed (an open that failed on a
                // `WAIT` that fell short wrote it): confirm it before the topic opens, or
                // a failover could take it while offsets are handed out.
                w.record_topic(topic).await?;
                return Ok(true);
            }
            // A new topic. Local evidence first (a commit point of 0): should recording a
            // marker fail, the next open must not take the marker written for a lost
            // data directory's.
            write_checkpoint(state_dir, topic, Checkpoint { end: 0, warm: tiers.warm.as_ref().map(|_| 0) })?;
        }
        if let Some(c) = cold {
            self.recorded("cold", topic, c.record_topic(topic).await)?;
        }
        if let Some(w) = warm {
            self.recorded("warm", topic, w.record_topic(topic).await)?;
        }
        Ok(false)
    }

    fn recorded(
        &self,
        tier: &str,
        topic: &TopicName,
        result: Result<(), TierError>,
    ) -> Result<(), TierError> {
        match result {
            Err(e) if !self.unborn => {
                warn!(topic = %topic, error = %e.report(), "could not record the topic in {tier}; retried when it opens again");
                Ok(())
            }
            other => other,
        }
    }
}

/// Pushes onto `out` warm's batches holding `[from, to)`, as warm stores them (the first
/// may start before `from`); returns where they end (`to`, or sooner if warm ends sooner).
pub(crate) async fn warm_batches(
    tiers: &Tiers,
    topic: &TopicName,
    from: Offset,
    to: Offset,
    out: &mut Vec<RecordBatch>,
) -> Result<Offset, TierError> {
    let Some(warm) = &tiers.warm else { return Ok(from) };
    let mut stream = warm.batches_from(topic, from);
    let mut reached = from;
    while reached < to {
        let Some(batch) = stream.next().await else { break };
        let batch = batch?;
        if batch.end_offset() <= reached {
            continue;
        }
        if batch.base_offset() > reached {
            return Err(TierError::corruption(
                ctx(topic).offset(reached),
                format!("warm's batch at {} does not hold offset {reached}", batch.base_offset()),
            ));
        }
        reached = batch.end_offset();
        out.push(batch);
    }
    Ok(reached)
}

/// Records offsets `[cold end, wal_first)` as lost in cold when the WAL takes over above
/// cold's end (they were reported lost or maybe lost), so cold accepts the segments that
/// follow. A cold tier that cannot hold a gap is left as it is (logged): its export stops
/// at the gap.
pub(crate) async fn record_gap_in_cold(
    tiers: &Tiers,
    topic: &TopicName,
    cold: OffsetRange,
    wal_first: Offset,
) -> Result<(), TierError> {
    let Some(c) = &tiers.cold else { return Ok(()) };
    if cold.is_empty() || cold.end >= wal_first {
        return Ok(());
    }
    let gap = OffsetRange::new(cold.end, wal_first);
    match c.record_gap(topic, gap).await {
        Ok(()) => {
            warn!(topic = %topic, lost = %gap, "recorded the lost offsets in cold; the export continues after them");
            Ok(())
        }
        Err(e) if e.kind() == ErrorKind::InvalidInput => {
            error!(topic = %topic, lost = %gap, error = %e.report(), "the cold tier cannot record lost offsets; its export stops there");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Decides what an unreachable warm tier (`err`) at recovery means: under `degrade`,
/// with a WAL that knows the topic and vouches for its end, and a reservation file
/// (`reserved`) that bounds how far warm may hold batches past it, the topic opens
/// without warm (`Ok(true)`); otherwise recovery fails with an `Unavailable` error naming
/// warm.
fn degraded_open(
    tiers: &Tiers,
    topic: &TopicName,
    hot: OffsetRange,
    wal_unsure: bool,
    reserved: bool,
    err: TierError,
) -> Result<bool, TierError> {
    let why = if tiers.config.warm_failure_policy != WarmFailurePolicy::Degrade {
        "router.warm_failure_policy is `fail`"
    } else if hot.end == 0 {
        // An empty WAL that never held the topic: warm may hold records the WAL lacks
        // (a lost disk), and continuing without knowing its end could reuse offsets.
        "the WAL holds nothing of the topic, so recovery needs warm's records"
    } else if wal_unsure {
        // A power cut may have taken the WAL's unsynced tail: warm may hold those
        // acknowledged records. Opening without it would declare them maybe lost and
        // continue past them, leaving warm unable to take the next batch.
        "the WAL cannot vouch for its end (a power cut may have taken its tail, it ends before the last \
         checkpoint, or an earlier recovery did not finish), so recovery needs warm's records"
    } else if !reserved {
        // Each batch goes to warm and the WAL at once: warm may hold never-acknowledged
        // batches past the WAL's end, up to the reservation — the state files are gone, so
        // nothing says how far, and continuing at the WAL's end could hand their offsets
        // out again.
        "the router's state files are gone (no reservation), so nothing bounds the batches warm may hold past \
         the WAL's end, and recovery needs warm's range"
    } else {
        warn!(
            topic = %topic, error = %err.report(),
            "recovery: the warm tier is unreachable; opening degraded from the WAL, warm is back-filled once it answers"
        );
        return Ok(true);
    };
    Err(TierError::unavailable(
        ErrorContext::tier(TierKind::Warm).topic(topic),
        format!("cannot recover the topic: the warm tier is unreachable and {why}"),
    )
    .with_source(err))
}

/// Whether `a` and `b` share an offset.
pub(crate) fn overlaps(a: OffsetRange, b: OffsetRange) -> bool {
    a.start < b.end && b.start < a.end
}

/// Restarts warm ([`WarmBackend::restart_at`](crate::WarmBackend::restart_at)) past the
/// offsets degraded opens skipped (`unacked`, see [`RecoveryReport::skipped`]; at recovery
/// also cold's recorded trailing gap) when `held` (what warm holds) reaches into them: its
/// records there were never acknowledged (or were declared lost) and must never be
/// served, replayed or confirmed. Only when the WAL or cold holds every record of
/// warm below them ([`only_in_warm`]); otherwise (a lost WAL) warm is left as it is and the
/// callers stop before those records. Returns what warm holds after.
pub(crate) async fn drop_unacked(
    tiers: &Tiers,
    topic: &TopicName,
    held: OffsetRange,
    unacked: &[OffsetRange],
) -> Result<OffsetRange, TierError> {
    let Some(warm) = &tiers.warm else { return Ok(held) };
    let inside: Vec<OffsetRange> = unacked.iter().copied().filter(|r| overlaps(*r, held)).collect();
    let (Some(first), Some(past)) =
        (inside.iter().map(|r| r.start).min(), inside.iter().map(|r| r.end).max())
    else {
        return Ok(held);
    };
    // Warm continues past skipped offsets only through a restart, which drops what it
    // held there: a stream ending beyond them is not one this writes.
    let below = OffsetRange::new(held.start, first.max(held.start));
    let only = only_in_warm(tiers, topic, below).await?;
    if only.is_some() || held.end > past {
        error!(
            topic = %topic, warm = %held, unacked = %OffsetRange::new(first, past), only_in_warm = ?only,
            "warm holds records that were never acknowledged, in offsets a degraded open skipped or cold recorded \
             lost, and cannot be \
             restarted past them (no other tier holds some of its records below them, or it holds records past \
             them); they are never replayed or confirmed, nor read in place of the WAL's gap"
        );
        return Ok(held);
    }
    warm.restart_at(topic, past).await?;
    warn!(
        topic = %topic, dropped = %held, at = past,
        "restarted warm past offsets a degraded open skipped or cold recorded lost: it held records there \
         that were never acknowledged; the WAL or cold holds every other record it held"
    );
    Ok(OffsetRange::empty_at(past))
}

/// The part of `held` (what warm holds) that neither the WAL nor cold holds, if any.
/// Below the WAL's start without cold, records are past the WAL's retention (which
/// deletes only what warm holds) and count as held elsewhere no longer needed.
pub(crate) async fn only_in_warm(
    tiers: &Tiers,
    topic: &TopicName,
    held: OffsetRange,
) -> Result<Option<OffsetRange>, TierError> {
    let wal = tiers.hot.range(topic).await?;
    let upper = OffsetRange::new(held.start.max(wal.start).min(held.end), held.end);
    let gaps = tiers.hot.gaps(topic);
    if !upper.is_empty()
        && (upper.end > wal.end || gaps.iter().any(|g| overlaps(*g, upper)))
        // An empty WAL (lost) holds none of them; cold may hold them all.
        && (!wal.is_empty() || !cold_holds(tiers, topic, upper).await?)
    {
        return Ok(Some(upper));
    }
    let lower = OffsetRange::new(held.start, held.end.min(wal.start).max(held.start));
    if lower.is_empty() || tiers.cold.is_none() {
        return Ok(None);
    }
    Ok((!cold_holds(tiers, topic, lower).await?).then_some(lower))
}

/// Whether cold holds every offset of `range` (false without cold).
async fn cold_holds(tiers: &Tiers, topic: &TopicName, range: OffsetRange) -> Result<bool, TierError> {
    let Some(cold) = &tiers.cold else { return Ok(false) };
    let c = cold.range(topic).await?;
    Ok(!c.is_empty() && c.start <= range.start && c.end >= range.end)
}

/// Makes the WAL continue at `next` (the offsets before it were lost or never used):
/// a non-empty WAL records the gap durably (`HotTier::skip_to`) so the topic accepts
/// appends at `next` and reads into the gap fail naming it; an empty one starts its
/// segment file at `next`, which records durably where the topic continues.
pub(crate) async fn skip_wal_to(tiers: &Tiers, topic: &TopicName, next: Offset) -> Result<(), TierError> {
    let held = tiers.hot.range(topic).await?;
    if held.end >= next {
        return Ok(());
    }
    // An empty WAL takes over at `next` (no gap marker, nothing on either side), and its
    // new segment file says so durably: it is then evidence of where the topic continues
    // even if the state directory is lost next.
    let gap = tiers.hot.skip_to(topic, next).await?;
    if !held.is_empty() {
        warn!(topic = %topic, lost = %gap, "recorded the lost offsets in the WAL; it continues after them");
    }
    Ok(())
}

/// Appends warm's batches from the one holding `from` to the WAL, except those inside the
/// offsets degraded opens skipped (`unacked`: never acknowledged), which the WAL records
/// as a gap instead; a batch straddling such a range's bounds ends the replay. Returns the
/// offsets replayed and, as warm holds them, the batches ending after `keep_after`. Into
/// an empty WAL, a first batch starting before `from` (a batch that straddles cold's end)
/// is cut to start at `from`.
async fn replay(
    tiers: &Tiers,
    topic: &TopicName,
    from: Offset,
    unacked: &[OffsetRange],
    hot: OffsetRange,
    keep_after: Option<Offset>,
) -> Result<(OffsetRange, Vec<RecordBatch>), TierError> {
    let Some(warm) = &tiers.warm else {
        return Ok((OffsetRange::empty_at(from), Vec::new()));
    };
    let mut stream = warm.batches_from(topic, from);
    let mut first = None;
    let mut end = from;
    let mut kept = Vec::new();
    while let Some(batch) = stream.next().await {
        let mut batch = batch?;
        if batch.end_offset() <= from {
            continue;
        }
        let range = batch.offset_range();
        match unacked.iter().find(|r| overlaps(**r, range)) {
            Some(r) if r.start <= range.start && range.end <= r.end => {
                // Never acknowledged: the WAL continues after the skipped offsets.
                skip_wal_to(tiers, topic, r.end).await?;
                end = end.max(r.end);
                continue;
            }
            Some(_) => break,
            None => {}
        }
        if keep_after.is_some_and(|cp| batch.end_offset() > cp) {
            kept.push(batch.clone());
        }
        if batch.base_offset() < from {
            batch = cut_before(&batch, from)?;
        }
        if !hot.is_empty() && batch.base_offset() != end {
            return Err(TierError::corruption(
                ctx(topic).offset(end),
                format!("warm batch at {} does not continue the WAL at {end}", batch.base_offset()),
            ));
        }
        let (base, batch_end) = (batch.base_offset(), batch.end_offset());
        tiers.hot.append(topic, batch).await?;
        first.get_or_insert(base);
        end = batch_end;
    }
    Ok((OffsetRange::new(first.unwrap_or(from).min(end), end), kept))
}

/// The records of `batch` from `from` on, as a batch starting at `from`.
fn cut_before(batch: &RecordBatch, from: Offset) -> Result<RecordBatch, TierError> {
    let records: Vec<_> = batch.records_from(from).collect();
    RecordBatch::from_records(from, &records)
}

/// The batches holding `range`, as stored — by the WAL where it holds them, by cold below
/// the WAL's start — for warm's back-fill. A first batch starting before `range.start` (a
/// warm tier back-filled with rebuilt batches by an older version) is cut to start there.
pub(crate) async fn batches_for_warm(
    tiers: &Tiers,
    topic: &TopicName,
    range: OffsetRange,
) -> Result<Vec<RecordBatch>, TierError> {
    let mut out = Vec::new();
    let reached = match collect_for_warm(tiers, topic, range, &mut out).await {
        Ok(reached) => reached,
        // Not now: the caller retries (recovery fails `Unavailable`, the writer later).
        Err(e) if e.kind() == ErrorKind::Unavailable => return Err(e),
        // No tier can give those offsets (lost, damaged, trimmed): warm gets what comes
        // before them; it cannot be continued past them.
        Err(e) => {
            let at = out.last().map_or(range.start, RecordBatch::end_offset);
            error!(
                topic = %topic, at, error = %e.report(),
                "warm cannot be caught up past this offset: no tier can give it the records; \
                 it refuses the batches after them (docs/reliability.md, 'Warm that cannot be continued')"
            );
            at
        }
    };
    if reached < range.end {
        warn!(topic = %topic, range = %range, reached, "warm's back-fill stops short of the WAL's end");
    }
    if !out.is_empty() {
        warn!(topic = %topic, range = %range, "warm lacks these records; queued them for warm");
    }
    Ok(out)
}

/// Pushes onto `out` the batches holding `range` (see [`batches_for_warm`]) up to the first
/// offset no tier can give; returns where it stopped.
async fn collect_for_warm(
    tiers: &Tiers,
    topic: &TopicName,
    range: OffsetRange,
    out: &mut Vec<RecordBatch>,
) -> Result<Offset, TierError> {
    let mut next = range.start;
    let wal = tiers.hot.range(topic).await?;
    // An empty WAL holds nothing below its end.
    let wal_start = if wal.is_empty() { wal.end.max(range.end) } else { wal.start };
    if next < wal_start.min(range.end) {
        let cold_to = wal_start.min(range.end);
        let Some(cold) = tiers.cold.clone() else {
            return Err(TierError::trimmed(ctx(topic), next, wal));
        };
        let mut stream = cold.record_batches_from(topic, next, cold_to);
        while next < cold_to {
            let Some(batch) = stream.next().await else {
                return Err(TierError::not_found(
                    ctx(topic).offset(next),
                    format!("cold ended at {next} inside the range {range} warm lacks"),
                ));
            };
            next = push_from(out, batch?, next)?;
        }
    }
    // Offsets the WAL declared lost cannot be sent: stop before the first gap.
    let wal_to =
        tiers.hot.gaps(topic).iter().find(|g| g.end > next).map_or(range.end, |g| g.start.min(range.end));
    while next < wal_to {
        let batches = tiers.hot.read_batches(topic, next, wal_to, tiers.config.read_batch_bytes).await?;
        if batches.is_empty() {
            return Err(TierError::corruption(
                ctx(topic).offset(next),
                "the WAL returned no batch inside its range",
            ));
        }
        for batch in batches {
            if next >= wal_to {
                break;
            }
            next = push_from(out, batch, next)?;
        }
    }
    Ok(next)
}

/// Pushes `batch` (which must hold `next`) onto `out`, cut to start at `next`; returns its
/// end.
fn push_from(out: &mut Vec<RecordBatch>, batch: RecordBatch, next: Offset) -> Result<Offset, TierError> {
    if batch.end_offset() <= next || batch.base_offset() > next {
        return Err(TierError::corruption(
            ErrorContext::tier(TierKind::Router).offset(next),
            format!(
                "a batch at [{}, {}) does not hold offset {next}",
                batch.base_offset(),
                batch.end_offset()
            ),
        ));
    }
    let batch = if batch.base_offset() < next { cut_before(&batch, next)? } else { batch };
    let end = batch.end_offset();
    out.push(batch);
    Ok(end)
}
