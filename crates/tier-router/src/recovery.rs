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
//!
//! Recovery gathers this evidence first ([`Evidence`]), decides with pure functions
//! ([`plan::plan_replay`], then [`plan::plan`] once the replay and the topic markers are
//! done) and applies the plan's effects in order; `docs/router.md`, "Crash recovery",
//! lists the rules the plan's tests check over every combination of the evidence.

use std::collections::BTreeMap;
use std::ops::Range;

use futures::StreamExt;
use tier_core::position::NodeId;
use tier_core::{
    ErrorContext, ErrorKind, Offset, OffsetRange, RecordBatch, Tier, TierError, TierKind, TopicName,
};
use tracing::{error, info, warn};

use crate::state::{
    Checkpoint, PendingLosses, ReservationFile, read_checkpoint, read_fence, read_losses_copies,
    read_reservation, read_unacked_copies, write_checkpoint, write_fence, write_losses_copies,
    write_unacked_copies,
};
use crate::tiers::Tiers;

mod plan;

use plan::{AfterReplay, Backfill, Effect, Evidence, WarmSeen};

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
    /// Under [`WarmFailurePolicy::Degrade`](crate::WarmFailurePolicy::Degrade) also the
    /// offsets opening the WAL cut off (a power cut) that only warm's copy holds past the
    /// point known confirmed: served and confirmed again, but a failover before the
    /// confirmation would take them. They are never reused. Empty after a clean shutdown.
    pub maybe_lost: Vec<OffsetRange>,
    /// Warm could not be reached during recovery and the policy is
    /// [`WarmFailurePolicy::Degrade`](crate::WarmFailurePolicy::Degrade): the topic
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
    /// The reported losses no tier holds ([`plan::Plan::holes`]).
    pub(crate) holes: Vec<OffsetRange>,
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

/// The body of [`recover_topic`]: gathers the [`Evidence`], plans the replay step
/// ([`plan::plan_replay`]) and applies it, gathers what only exists after it (the WAL's
/// range, the topic markers), plans the rest ([`plan::plan`]) and applies its effects in
/// order.
async fn recover(
    tiers: &Tiers,
    state_dir: &std::path::Path,
    topic: &TopicName,
) -> Result<Recovered, TierError> {
    let (evidence, reservation) = gather(tiers, state_dir, topic).await?;
    let hot = evidence.hot;
    let step = plan::plan_replay(&evidence)
        .map_err(|i| TierError::corruption(ctx(topic).offset(i.offset), i.message))?;
    let mut replayed = None;
    let mut replayed_unconfirmed: Vec<RecordBatch> = Vec::new();
    if let Some(r) = &step.replay {
        // The losses found so far, the fence and the WAL's rebuilt marker come first: an
        // open that fails after the replay must not leave a WAL that passes for local
        // evidence of where the acknowledged offsets end (see `plan::plan_replay`).
        write_losses_copies(&tiers.hot, state_dir, topic, &pending(&r.kept))?;
        if let Some(at) = r.fence {
            write_fence(state_dir, topic, at)?;
        }
        tiers.hot.mark_rebuilt(topic, r.rebuilt_bound)?;
        // Warm's records in offsets a degraded open skipped are never replayed (it still
        // holds them only when it could not be restarted past them): the WAL skips them.
        let (range, kept) =
            replay(tiers, topic, r.from, &evidence.unacked_found(), hot, r.keep_after).await?;
        replayed = Some(range);
        replayed_unconfirmed = kept;
    }
    let marked = TopicMarkers {
        cold: evidence.cold.unwrap_or_default(),
        warm: evidence.warm_range(),
        no_local: evidence.no_local_evidence(),
        unborn: evidence.unborn(),
    }
    .check(tiers, state_dir, topic)
    .await?;
    let after = AfterReplay {
        first_kept: replayed_unconfirmed.first().map(RecordBatch::base_offset),
        marked,
        wal: tiers.hot.range(topic).await?,
    };
    let plan = plan::plan(&evidence, &step, &after);

    let report = RecoveryReport {
        topic: topic.clone(),
        hot,
        warm: evidence.warm_range(),
        cold: evidence.cold,
        replayed,
        warm_backfill: plan.warm_backfill,
        lost: plan.lost,
        maybe_lost: plan.maybe_lost,
        warm_unreachable: evidence.warm == WarmSeen::Unreachable,
        skipped: plan.skipped,
        end_unknown: plan.end_unknown,
        next_offset: plan.next_offset,
    };
    if report.end_unknown {
        error!(
            topic = %topic, next = plan.next_offset,
            "recovery: the WAL cannot vouch for its end and the router's state files are gone: nothing bounds \
             the offsets acknowledged beyond {}; appends are refused until an operator resumes the topic \
             (tierlog recover --resume-at)",
            plan.next_offset
        );
    }
    tiers.torn_in_warm.lock().insert(topic.clone(), plan.torn_in_warm);
    let mut backlog = Vec::new();
    for effect in plan.effects {
        apply(tiers, state_dir, topic, effect, &mut backlog, &mut replayed_unconfirmed).await?;
    }
    // The plan judged the WAL's cut and its effects recorded the result (losses kept,
    // offsets skipped, or the topic fenced): the WAL need not keep the evidence. Until
    // here a failed recovery leaves it for the next one (`HotTier::cut_back_at_open`).
    // Under `fail`, not while the commit point is below the WAL's start: the cut may have
    // raised the start past batches warm never confirmed (`plan::plan`), and a later
    // recovery must not take that start for committed before warm confirms them.
    let settled = evidence.policy != crate::WarmFailurePolicy::Fail || plan.committed >= after.wal.start;
    if settled {
        tiers.hot.cut_recorded(topic)?;
    }

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
    Ok(Recovered {
        report,
        backlog,
        committed: plan.committed,
        reservation,
        warm_confirmed_from: plan.warm_confirmed_from,
        unacked: plan.unacked,
        holes: plan.holes,
    })
}

/// Applies one of a plan's effects; a back-fill's batches go to `backlog` (after a
/// replay, with the replayed batches kept to confirm again, `replayed`).
async fn apply(
    tiers: &Tiers,
    state_dir: &std::path::Path,
    topic: &TopicName,
    effect: Effect,
    backlog: &mut Vec<RecordBatch>,
    replayed: &mut Vec<RecordBatch>,
) -> Result<(), TierError> {
    match effect {
        Effect::KeepLosses(losses) => write_losses_copies(&tiers.hot, state_dir, topic, &pending(&losses)),
        Effect::WriteFence(at) => write_fence(state_dir, topic, at),
        Effect::CollectBackfill(Backfill::Replayed { warm_from }) => {
            if let Some((from, to)) = warm_from {
                warm_batches(tiers, topic, from, to, backlog).await?;
            }
            backlog.append(replayed);
            Ok(())
        }
        Effect::CollectBackfill(Backfill::Fill { from, held_to, target }) => {
            let reached =
                if from < held_to { warm_batches(tiers, topic, from, held_to, backlog).await? } else { from };
            if reached < target {
                backlog.extend(batches_for_warm(tiers, topic, OffsetRange::new(reached, target)).await?);
            }
            Ok(())
        }
        Effect::WriteUnacked(unacked) => write_unacked_copies(&tiers.hot, state_dir, topic, &unacked),
        Effect::RecordGapInCold { cold, wal_first } => {
            record_gap_in_cold(tiers, topic, cold, wal_first).await
        }
        Effect::SkipWal(next) => skip_wal_to(tiers, topic, next).await,
        Effect::ClearRebuilt => tiers.hot.clear_rebuilt(topic),
    }
}

/// Records the offsets a fenced topic skips when it resumes at `at` (see
/// [`plan::resume`]); `wal` is what the WAL holds.
pub(crate) async fn resume_at(
    tiers: &Tiers,
    state_dir: &std::path::Path,
    topic: &TopicName,
    wal: OffsetRange,
    at: Offset,
) -> Result<(), TierError> {
    let cold = match &tiers.cold {
        Some(c) => Some(c.range(topic).await?),
        None => None,
    };
    // Warm may hold records below the WAL's first offset that cold lacks (a WAL rebuilt
    // from warm and then cut by a power cut): they are not skipped. A warm tier that
    // cannot be asked fails the resume (`Unavailable`): it is retried.
    let warm = match (&tiers.warm, &tiers.cold) {
        (Some(w), Some(_)) => Some(w.range(topic).await?),
        _ => None,
    };
    for effect in plan::resume(wal, cold, warm, at) {
        apply(tiers, state_dir, topic, effect, &mut Vec::new(), &mut Vec::new()).await?;
    }
    Ok(())
}

/// Reads the evidence recovery decides from (see [`Evidence`]). Warm is asked for its
/// range last and, when it holds records in offsets that must hold none (see
/// [`Evidence::not_in_warm`]), restarted past them first ([`drop_unacked`]); an
/// unreachable warm tier fails recovery unless the evidence lets the topic open degraded
/// ([`Evidence::degraded_refusal`]).
async fn gather(
    tiers: &Tiers,
    state_dir: &std::path::Path,
    topic: &TopicName,
) -> Result<(Evidence, Option<ReservationFile>), TierError> {
    // The topic is taken over first (its owner epoch, where warm has them): a writer that
    // held it before writes nothing into warm after this, so what recovery reads next is
    // all the old writer ever added there; and a WAL written before another owner's
    // claim is not the log past it.
    if let Some(w) = &tiers.warm
        && let Some(epoch) = claim(w.as_ref(), topic, state_dir).await?
    {
        take_ownership(tiers, state_dir, topic, epoch).await?;
    }
    let hot = tiers.hot.range(topic).await?;
    let checkpoint = read_checkpoint(state_dir, topic)?;
    let reservation = read_reservation(state_dir, topic)?;
    let fence = read_fence(state_dir, topic)?;
    // Losses an earlier recovery kept: in the state directory and in the WAL's directory.
    let pending = read_losses_copies(&tiers.hot.config().data_dir, state_dir, topic)?;
    // Offsets earlier degraded opens skipped: kept in the state directory and in the WAL's
    // directory: either may have been lost, and what either says holds.
    let (unacked_state, unacked_wal) = read_unacked_copies(&tiers.hot.config().data_dir, state_dir, topic)?;
    // The WAL's rebuilt marker, in the WAL's own directory, survives the state directory
    // (see `HotTier::mark_rebuilt`).
    let rebuilt = tiers.hot.rebuilt(topic)?.map(|r| r.bound);
    let (cold, cold_continues) = match &tiers.cold {
        // Where cold's log continues: past offsets it recorded lost after its last
        // segment (a trailing gap, which its range does not count).
        Some(c) => (Some(c.range(topic).await?), c.continuation(topic).await?),
        None => (None, 0),
    };
    let cut_back = tiers.hot.cut_back_at_open(topic);
    let mut evidence = Evidence {
        policy: tiers.config.warm_failure_policy,
        fsync_always: tiers.hot.config().fsync == tier_hot::FsyncPolicy::Always,
        hot,
        cut_back,
        wal_gaps: tiers.hot.gaps(topic),
        checkpoint: checkpoint.map(|c| c.end),
        warm_confirmed: checkpoint.and_then(|c| c.warm),
        reservation: reservation.as_ref().map(|r| r.offset),
        reservation_exact: reservation.as_ref().is_some_and(|r| r.wal_is_exact(&tiers.boot_id)),
        fence,
        pending: plan::Losses { lost: pending.lost, maybe_lost: pending.maybe_lost },
        unacked_state,
        unacked_wal,
        rebuilt,
        cold,
        cold_continues,
        warm: WarmSeen::Disabled,
    };
    if let Some(w) = &tiers.warm {
        evidence.warm = match w.range(topic).await {
            // Warm answers: first, it must hold none of the never-acknowledged records.
            Ok(r) => WarmSeen::Holds(drop_unacked(tiers, topic, r, &evidence.not_in_warm()).await?),
            Err(e) if e.kind() == ErrorKind::Unavailable => {
                if let Some(why) = evidence.degraded_refusal() {
                    return Err(TierError::unavailable(
                        ErrorContext::tier(TierKind::Warm).topic(topic),
                        format!("cannot recover the topic: the warm tier is unreachable and {why}"),
                    )
                    .with_source(e));
                }
                warn!(
                    topic = %topic, error = %e.report(),
                    "recovery: the warm tier is unreachable; opening degraded from the WAL, warm is back-filled once it answers"
                );
                WarmSeen::Unreachable
            }
            Err(e) => return Err(e),
        };
    }
    Ok((evidence, reservation))
}

/// Takes `topic` over in `warm` ([`WarmBackend::claim_owner`](crate::WarmBackend::claim_owner))
/// as the node whose state directory is `state_dir` (its node id, recorded with the epoch:
/// [`node_id`](crate::state::node_id)) and returns the epoch claimed (`None` from a tier
/// without epochs, or when the first claim's answer was lost). A claim the replicas did
/// not confirm (`Unavailable`, the epoch answered) still holds on the primary and is only
/// logged: reading warm's range next tells whether warm answers at all.
///
/// A claim whose answer was lost while this writer holds an earlier epoch is
/// `Unavailable`: the server may have applied it, and the writes this writer would make
/// under the earlier epoch would then be refused by its own claim — the topic fenced with
/// no other writer, until it is reopened. The caller retries as when warm does not answer
/// (the writer at its next attempt to reach warm; an open fails and is retried). Every
/// lost answer may leave an epoch claimed under this node's id: a later claim that finds
/// epochs skipped tells them from other nodes' claims by that id ([`take_ownership`]).
pub(crate) async fn claim(
    warm: &dyn crate::WarmBackend,
    topic: &TopicName,
    state_dir: &std::path::Path,
) -> Result<Option<u64>, TierError> {
    let me = crate::state::node_id(state_dir)?;
    let held = warm.claimed_owner(topic);
    match warm.claim_owner(topic, me).await {
        Err(e) if e.kind() != ErrorKind::Unavailable => Err(e),
        Err(e) => {
            let now = warm.claimed_owner(topic);
            let unanswered = now == held && held.is_some();
            #[cfg(feature = "testkit")]
            let unanswered =
                unanswered && !crate::testing::reverted(state_dir, crate::testing::Repair::ClaimAnswered);
            #[cfg(not(feature = "testkit"))]
            let _ = state_dir;
            if unanswered {
                return Err(TierError::unavailable(
                    ErrorContext::tier(TierKind::Router).topic(topic),
                    "the claim of the topic's owner epoch got no answer, and this writer holds an earlier epoch",
                )
                .with_source(e));
            }
            warn!(topic = %topic, error = %e.report(), "the claim of the topic's owner epoch was not confirmed");
            Ok(now)
        }
        Ok(epoch) => Ok(epoch),
    }
}

/// Whether a WAL last written under owner epoch `wal` continues the log of `epoch`, just
/// claimed: it does when it records no epoch (a WAL written before epochs were recorded,
/// or none yet) or no epoch lies between the two ([`skipped_epochs`]).
pub(crate) fn wal_continues(wal: Option<u64>, epoch: u64) -> bool {
    skipped_epochs(wal, epoch).is_none()
}

/// The epochs claimed between the one a WAL was last written under (`wal`) and `epoch`,
/// just claimed — strictly between them; `None` when there are none (or the WAL records
/// no epoch, or a later one: a failover that lost claims).
fn skipped_epochs(wal: Option<u64>, epoch: u64) -> Option<Range<u64>> {
    let first = wal?.saturating_add(1);
    (first < epoch).then_some(first..epoch)
}

/// Whether every epoch of `skipped` was claimed by this node, `me`, as `claimers` (the
/// claimers warm recorded for them, [`WarmBackend::claimers`](crate::WarmBackend::claimers))
/// says: then no other node claimed the topic since this node's WAL was written, and the
/// skip is this node's own claims whose answers it lost. An epoch without a record — its
/// claimer unknown: a server without scripts recorded none, a write raised the owner key
/// to it after a failover lost its claim — counts as another node's.
fn own_claims(skipped: &Range<u64>, claimers: &BTreeMap<u64, NodeId>, me: NodeId) -> bool {
    let mine = claimers.range(skipped.clone()).filter(|(_, claimer)| **claimer == me).count();
    u64::try_from(mine).is_ok_and(|mine| mine == skipped.end - skipped.start)
}

/// Makes the WAL of `topic` the log of owner epoch `epoch`, just claimed, and records
/// `epoch` in the WAL's directory before anything is written under it.
///
/// The invariant, under `fail`: a WAL is kept only while no other node can have claimed
/// the topic since it was last written. It is when no epoch lies between the WAL's and
/// `epoch` ([`wal_continues`]), or when every epoch between them was claimed by this node
/// ([`own_claims`]: claims whose answers it lost, which wrote nothing). Otherwise — some
/// skipped epoch claimed by another node, or by a claimer unknown — the WAL is discarded
/// with the topic's state files: what it holds past that takeover is not the log, and
/// every acknowledgement waited for warm, so the topic continues from warm and cold. A
/// WAL discarded for an unknown claimer that was in fact this node's costs a rebuild from
/// warm, and loses the records warm confirmed that a failover to a replica behind took
/// since (`docs/reliability.md`, "Known limits"). Under `degrade`, where the WAL may hold
/// records acknowledged on it alone, a skip is only reported: a node with no evidence of
/// its own opens a topic fenced there until an operator resumes it past what the previous
/// owner acknowledged (`docs/ownership.md`).
async fn take_ownership(
    tiers: &Tiers,
    state_dir: &std::path::Path,
    topic: &TopicName,
    epoch: u64,
) -> Result<(), TierError> {
    let wal = tiers.hot.owner_epoch(topic)?;
    if let Some(skipped) = skipped_epochs(wal, epoch) {
        let wal = wal.unwrap_or_default();
        if tiers.config.warm_failure_policy == crate::WarmFailurePolicy::Fail {
            let me = crate::state::node_id(state_dir)?;
            let claimers = match &tiers.warm {
                Some(w) => w.claimers(topic, skipped.clone()).await?,
                None => BTreeMap::new(),
            };
            let own = own_claims(&skipped, &claimers, me);
            #[cfg(feature = "testkit")]
            let own = own && !crate::testing::reverted(state_dir, crate::testing::Repair::OwnClaimsKeepWal);
            if own {
                info!(
                    topic = %topic, wal_epoch = wal, epoch, skipped = ?skipped,
                    "the owner epochs claimed since the WAL was written are this node's own (claims whose answers were lost); the WAL is kept"
                );
            } else {
                warn!(
                    topic = %topic, wal_epoch = wal, epoch, skipped = ?skipped, claimers = ?claimers, node = %me,
                    "the WAL was written under an owner epoch another node's claim (or a claim of unknown claimer) followed; it is discarded and the topic continues from warm and cold"
                );
                crate::state::remove_topic_state(state_dir, topic)?;
                tiers.hot.discard_topic(topic).await?;
            }
        } else {
            warn!(
                topic = %topic, wal_epoch = wal, epoch,
                "the WAL was written under an owner epoch other claims followed; under degrade it is kept"
            );
        }
    }
    tiers.hot.record_owner_epoch(topic, epoch)
}

/// The state file's form of `losses`.
fn pending(losses: &plan::Losses) -> PendingLosses {
    PendingLosses { lost: losses.lost.clone(), maybe_lost: losses.maybe_lost.clone() }
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
            // A new topic — unless cold holds segments of it or warm's stream ever held a
            // record (the other tier's marker alone is missing: a failover to a replica
            // that had none of it), when the plan fences it, its acknowledged end
            // unknown. For a new topic, local evidence first (a commit point of 0): should
            // recording a marker fail, the next open must not take the marker written for
            // a lost data directory's. Never for a topic a tier holds: that checkpoint
            // would pass for a surviving state directory, and the next open would
            // continue at the tiers' end, past what only the lost WAL held.
            let held = !self.cold.is_empty() || self.warm.is_some_and(|w| w.end > 0);
            #[cfg(feature = "testkit")]
            let held = held
                && !crate::testing::reverted(state_dir, crate::testing::Repair::NewTopicOnlyWhenNoTierHolds);
            if !held {
                write_checkpoint(
                    state_dir,
                    topic,
                    Checkpoint { end: 0, warm: tiers.warm.as_ref().map(|_| 0) },
                )?;
            }
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
async fn record_gap_in_cold(
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
    if !upper.is_empty() && (upper.end > wal.end || gaps.iter().any(|g| overlaps(*g, upper))) {
        // An empty WAL (lost) holds none of them; cold may hold them all.
        if wal.is_empty() {
            if !cold_holds(tiers, topic, upper).await? {
                return Ok(Some(upper));
            }
        } else {
            // What the WAL lacks of them — its gaps (a torn point warm's copy fills) and
            // past its end — cold may hold as records, stored from warm's copy by the
            // exporter; a gap cold recorded holds none.
            let mut lacking: Vec<OffsetRange> = gaps
                .iter()
                .filter(|g| overlaps(**g, upper))
                .map(|g| OffsetRange::new(g.start.max(upper.start), g.end.min(upper.end)))
                .collect();
            if upper.end > wal.end {
                lacking.push(OffsetRange::new(wal.end.max(upper.start), upper.end));
            }
            for piece in lacking {
                if !cold_gives(tiers, topic, piece).await? {
                    return Ok(Some(upper));
                }
            }
        }
    }
    let lower = OffsetRange::new(held.start, held.end.min(wal.start).max(held.start));
    if lower.is_empty() || tiers.cold.is_none() {
        return Ok(None);
    }
    Ok((!cold_holds(tiers, topic, lower).await?).then_some(lower))
}

/// Whether cold gives a record at every offset of `range` (false without cold, and where
/// cold recorded offsets lost or cannot be read now).
async fn cold_gives(tiers: &Tiers, topic: &TopicName, range: OffsetRange) -> Result<bool, TierError> {
    let Some(cold) = tiers.cold.clone() else { return Ok(false) };
    let mut stream = cold.record_batches_from(topic, range.start, range.end);
    let mut next = range.start;
    while next < range.end {
        match stream.next().await {
            Some(Ok(batch)) if batch.base_offset() <= next && batch.end_offset() > next => {
                next = batch.end_offset()
            }
            Some(Err(e)) if e.kind() == ErrorKind::Unavailable => return Err(e),
            _ => return Ok(false),
        }
    }
    Ok(true)
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
async fn skip_wal_to(tiers: &Tiers, topic: &TopicName, next: Offset) -> Result<(), TierError> {
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
                 it refuses the batches after them (docs/reliability.md, known limits: 'a never-confirmed WAL batch that is then damaged blocks the topic')"
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every WAL epoch and claimed epoch up to 6, every assignment of the skipped epochs'
    /// claimers to this node, another node or none: the WAL continues or is this node's
    /// own exactly when no skipped epoch is another node's or unknown.
    #[test]
    fn a_skip_is_this_node_s_own_only_when_it_claimed_every_skipped_epoch() {
        let (me, other) = (NodeId::from_u128(1), NodeId::from_u128(2));
        for epoch in 1..=6_u64 {
            for wal in [None, Some(0), Some(1), Some(2), Some(3), Some(4), Some(5), Some(6), Some(9)] {
                let Some(skipped) = skipped_epochs(wal, epoch) else {
                    assert!(wal_continues(wal, epoch));
                    assert!(wal.is_none_or(|w| w + 1 >= epoch), "{wal:?} {epoch}");
                    continue;
                };
                assert!(!wal_continues(wal, epoch));
                assert_eq!(skipped, wal.expect("a skip needs the WAL's epoch") + 1..epoch);
                let n = u32::try_from(skipped.end - skipped.start).expect("few");
                // Each skipped epoch: 0 this node's, 1 another node's, 2 no record.
                for code in 0..3_u32.pow(n) {
                    let mut claimers = BTreeMap::new();
                    let mut all_mine = true;
                    for (i, e) in skipped.clone().enumerate() {
                        match code / 3_u32.pow(u32::try_from(i).expect("few")) % 3 {
                            0 => {
                                claimers.insert(e, me);
                            }
                            1 => {
                                claimers.insert(e, other);
                                all_mine = false;
                            }
                            _ => all_mine = false,
                        }
                    }
                    // Records outside the skip say nothing of it.
                    claimers.insert(skipped.start - 1, other);
                    claimers.insert(epoch, other);
                    assert_eq!(own_claims(&skipped, &claimers, me), all_mine, "{skipped:?} {claimers:?}");
                }
            }
        }
    }
}
