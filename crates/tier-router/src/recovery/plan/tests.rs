//! The recovery rules, checked on the plan for every combination of the evidence's
//! discrete dimensions (small offsets; warm's batches two offsets long).

use super::*;

fn r(start: Offset, end: Offset) -> OffsetRange {
    OffsetRange::new(start, end)
}

/// Whether opening the WAL cut `hot` back, and the torn points the WAL records: none, or
/// one — after a sealed segment, ending where the next segment starts (at the WAL's end
/// when that segment holds nothing) — recorded at this open (cut back) or an earlier one.
fn torn_points(hot: OffsetRange) -> Vec<(bool, Vec<OffsetRange>)> {
    let mut out = vec![(false, vec![])];
    if hot.is_empty() {
        return out;
    }
    out.push((true, vec![]));
    for gap in [r(1, 3), r(2, 4), r(3, 4)] {
        if hot.start < gap.start && gap.end <= hot.end {
            out.push((true, vec![gap]));
            out.push((false, vec![gap]));
        }
    }
    out
}

/// The WAL's torn points an earlier recovery recorded and reported: opening did not cut
/// the log back this time, and the state directory that kept the report survived.
fn reported_earlier(e: &Evidence) -> &[OffsetRange] {
    if !e.cut_back && (e.checkpoint.is_some() || e.reservation.is_some()) { &e.wal_gaps } else { &[] }
}

/// Every combination of the evidence's dimensions, passed to `f`.
fn each_evidence(mut f: impl FnMut(&Evidence)) {
    let hots = [OffsetRange::empty_at(0), r(0, 4), r(2, 4)];
    let checkpoints = [None, Some(2), Some(4), Some(6)];
    let confirmed = [None, Some(2)];
    let reservations = [(None, false), (Some(4), false), (Some(4), true), (Some(8), false), (Some(8), true)];
    let fences = [None, Some(4), Some(8)];
    let pendings = [
        Losses::default(),
        Losses { lost: vec![r(2, 4)], maybe_lost: vec![] },
        Losses { lost: vec![], maybe_lost: vec![r(6, 8)] },
    ];
    let unackeds: [(Vec<OffsetRange>, Vec<OffsetRange>); 3] =
        [(vec![], vec![]), (vec![r(4, 6)], vec![r(4, 6)]), (vec![r(6, 8)], vec![])];
    let rebuilts = [None, Some(None), Some(Some(8))];
    let colds = [
        (None, 0),
        (Some(OffsetRange::empty_at(0)), 0),
        (Some(r(0, 2)), 2),
        (Some(r(0, 2)), 4),
        (Some(r(0, 4)), 4),
    ];
    let warms = [
        WarmSeen::Disabled,
        WarmSeen::Unreachable,
        WarmSeen::Holds(OffsetRange::empty_at(0)),
        WarmSeen::Holds(OffsetRange::empty_at(2)),
        WarmSeen::Holds(r(0, 4)),
        WarmSeen::Holds(r(2, 6)),
        WarmSeen::Holds(r(4, 8)),
    ];
    for policy in [WarmFailurePolicy::Fail, WarmFailurePolicy::Degrade] {
        for fsync_always in [false, true] {
            for hot in hots {
                for (cut_back, wal_gaps) in torn_points(hot) {
                    for checkpoint in checkpoints {
                        for warm_confirmed in confirmed {
                            for (reservation, reservation_exact) in reservations {
                                for fence in fences {
                                    for pending in &pendings {
                                        for (unacked_state, unacked_wal) in &unackeds {
                                            for rebuilt in rebuilts {
                                                for (cold, cold_continues) in colds {
                                                    for warm in warms {
                                                        f(&Evidence {
                                                            policy,
                                                            fsync_always,
                                                            hot,
                                                            cut_back,
                                                            wal_gaps: wal_gaps.clone(),
                                                            checkpoint,
                                                            warm_confirmed,
                                                            reservation,
                                                            reservation_exact,
                                                            fence,
                                                            pending: pending.clone(),
                                                            unacked_state: unacked_state.clone(),
                                                            unacked_wal: unacked_wal.clone(),
                                                            rebuilt,
                                                            cold,
                                                            cold_continues,
                                                            warm,
                                                        });
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// What `replay` leaves, with warm's batches `[2k, 2k + 2)`: the WAL's range and the base
/// of the first batch kept to confirm again.
fn replayed(e: &Evidence, step: &ReplayPlan) -> (OffsetRange, Option<Offset>) {
    let Some(rp) = &step.replay else { return (e.hot, None) };
    let warm = e.warm_range().unwrap_or_default();
    let unacked = e.unacked_found();
    let mut wal = e.hot;
    let mut first_kept = None;
    let mut base = rp.from - rp.from % 2;
    while base < warm.end {
        let batch = r(base, base + 2);
        base += 2;
        match unacked.iter().find(|u| overlaps(**u, batch)) {
            Some(u) if u.start <= batch.start && batch.end <= u.end => {
                if wal.end < u.end {
                    wal = if wal.is_empty() { OffsetRange::empty_at(u.end) } else { r(wal.start, u.end) };
                }
                continue;
            }
            Some(_) => break,
            None => {}
        }
        if rp.keep_after.is_some_and(|k| batch.end > k) {
            first_kept.get_or_insert(batch.start);
        }
        wal = if wal.is_empty() { r(batch.start.max(rp.from), batch.end) } else { r(wal.start, batch.end) };
    }
    (wal, first_kept)
}

/// False for evidence no history leaves: the skipped offsets are written only by an open
/// that continued past them — in the state directory next to a reservation at least as
/// far, in the WAL's directory next to a WAL that continues past them (unless it lost
/// its tail since); a recovery keeps
/// losses in the state directory next to the reservation that bounds them, or fences the
/// topic right after, and they continue from what the tiers held (tiers that lost
/// records since, a second fault, are outside this table).
fn possible(e: &Evidence) -> bool {
    let reserved = e.reservation.unwrap_or(0);
    let held =
        [e.hot.end, e.warm_range().unwrap_or_default().end, e.cold_continues, e.checkpoint.unwrap_or(0)];
    let held = held.into_iter().max().unwrap_or(0);
    let mut kept = e.pending.lost.iter().chain(&e.pending.maybe_lost);
    // A WAL that vouches for its end continued past every skipped range.
    let wal_past = |u: &OffsetRange| {
        e.hot.end >= u.end || e.wal_lost() || !e.reservation_exact || e.cut_back || e.rebuilt.is_some()
    };
    e.unacked_state.iter().all(|u| u.end <= reserved && wal_past(u))
        && e.unacked_wal.iter().all(|u| !e.wal_lost() && wal_past(u))
        && kept.all(|l| l.start <= held && (e.fence.is_some() || l.end <= reserved))
}

/// Known exception, left as the code decides it: under `fail` a non-empty warm tier is
/// taken to bound the acknowledgements, but skipped offsets prove an open under `degrade`
/// (the policy changed since), whose acknowledgements did not wait for warm. The offsets
/// between warm's end and the skipped ones are not reported, and once the skipped ones
/// are forgotten (warm holds none of them) a crash before the WAL is skipped past them
/// lets the next recovery continue at warm's end.
fn degraded_then_fail(e: &Evidence) -> bool {
    e.policy == WarmFailurePolicy::Fail
        && !e.warm_range().unwrap_or_default().is_empty()
        && !e.unacked_found().is_empty()
}

/// Every plan for every combination, with what the replay left (and, where a topic marker
/// could be found, both answers): `f(evidence, replay step, after, plan)`.
fn each_plan(mut f: impl FnMut(&Evidence, &ReplayPlan, &AfterReplay, &Plan)) -> usize {
    let mut n = 0;
    each_evidence(|e| {
        if (e.warm == WarmSeen::Unreachable && e.degraded_refusal().is_some()) || !possible(e) {
            return;
        }
        let Ok(step) = plan_replay(e) else { return };
        let (wal, first_kept) = replayed(e, &step);
        let cold_r = e.cold.unwrap_or_default();
        let markable = e.no_local_evidence()
            && ((e.cold.is_some() && cold_r.is_empty()) || e.warm_range().is_some_and(|w| w.end == 0));
        for marked in [false, true] {
            if marked && !markable {
                continue;
            }
            let after = AfterReplay { first_kept, marked, wal };
            let p = plan(e, &step, &after);
            f(e, &step, &after, &p);
            n += 1;
        }
    });
    n
}

fn covered(ranges: &[&[OffsetRange]], o: Offset) -> bool {
    ranges.iter().any(|rs| rs.iter().any(|x| x.start <= o && o < x.end))
}

/// The end of every offset the evidence says may have been acknowledged (the
/// reservation's when the WAL cannot vouch for its end, unless under `fail` a non-empty
/// warm tier bounds the acknowledgements), or skipped by a degraded open.
fn may_be_acknowledged(e: &Evidence) -> Offset {
    let warm = e.warm_range().unwrap_or_default();
    let cold = e.cold.unwrap_or_default();
    let warm_bounds = e.policy == WarmFailurePolicy::Fail && !warm.is_empty();
    let mut must = vec![e.hot.end, warm.end, cold.end, e.cold_continues, e.checkpoint.unwrap_or(0)];
    must.extend(e.fence);
    must.extend(e.pending.lost.iter().chain(&e.pending.maybe_lost).map(|x| x.end));
    must.extend(e.unacked_found().iter().map(|x| x.end));
    if !warm_bounds {
        must.extend(e.rebuilt.flatten());
        if e.wal_lost() || e.rebuilt.is_some() || !e.reservation_exact || e.cut_back {
            must.extend(e.reservation);
        }
    }
    if e.warm == WarmSeen::Unreachable {
        must.extend(e.reservation);
    }
    must.into_iter().max().unwrap_or(0)
}

/// Offsets that may have been acknowledged are never handed out again: the next offset is
/// past every end the evidence knows of.
#[test]
fn no_acknowledged_offset_reused() {
    let n = each_plan(|e, _, _, p| {
        let bound = may_be_acknowledged(e);
        assert!(p.next_offset >= bound, "next {} below {bound}: {e:?} -> {p:?}", p.next_offset);
    });
    assert!(n > 100_000, "only {n} plans");
}

/// One step of recovery's durable writes, as the evidence the next recovery reads.
#[derive(Clone, Debug)]
enum Step {
    Replay(Replay, OffsetRange),
    RecordTopic,
    Effect(Effect),
}

/// `e` once `step` is durable.
fn apply(e: &mut Evidence, marked: &mut bool, step: &Step) {
    match step {
        Step::Replay(rp, wal) => {
            e.pending = rp.kept.clone();
            if let Some(at) = rp.fence {
                e.fence = Some(at);
            }
            e.rebuilt = Some(rp.rebuilt_bound);
            e.hot = *wal;
        }
        Step::RecordTopic => {
            if !*marked {
                e.checkpoint = Some(0);
            }
            *marked = true;
        }
        Step::Effect(Effect::KeepLosses(l)) => e.pending = l.clone(),
        Step::Effect(Effect::WriteFence(at)) => e.fence = Some(*at),
        Step::Effect(Effect::CollectBackfill(_)) => {}
        Step::Effect(Effect::WriteUnacked(u)) => {
            e.unacked_state = u.clone();
            e.unacked_wal = u.clone();
        }
        Step::Effect(Effect::RecordGapInCold { wal_first, .. }) => e.cold_continues = *wal_first,
        Step::Effect(Effect::SkipWal(n)) => {
            e.hot = if e.hot.is_empty() { OffsetRange::empty_at(*n) } else { r(e.hot.start, *n) };
        }
        Step::Effect(Effect::ClearRebuilt) => e.rebuilt = None,
    }
}

/// Recovery planned again from `e` (`None`: it refuses the evidence).
fn replan(e: &Evidence, marked: bool) -> Option<Plan> {
    let step = plan_replay(e).ok()?;
    let (wal, first_kept) = replayed(e, &step);
    Some(plan(e, &step, &AfterReplay { first_kept, marked, wal }))
}

/// Every crash prefix is safe: a recovery that stops after any of its durable writes
/// leaves evidence from which the next recovery still continues past every offset that
/// may have been acknowledged (or refuses appends), and a topic found with an unknown end
/// stays refused.
#[test]
fn every_crash_prefix_is_safe() {
    each_plan(|e, step, after, p| {
        if degraded_then_fail(e) {
            return;
        }
        let mut steps = Vec::new();
        if let Some(rp) = &step.replay {
            steps.push(Step::Replay(rp.clone(), after.wal));
        }
        let cold_r = e.cold.unwrap_or_default();
        if e.no_local_evidence()
            && ((e.cold.is_some() && cold_r.is_empty()) || e.warm_range().is_some_and(|w| w.end == 0))
        {
            // Known exception, left as the code decides it: no marker found while other
            // evidence says offsets were handed out (another tier's end — a topic older
            // than the markers, or cold enabled since — or an unbounded rebuilt marker):
            // the checkpoint of 0 written for a new topic comes before the fence, and a
            // crash between them lifts it.
            if !after.marked && p.end_unknown {
                return;
            }
            steps.push(Step::RecordTopic);
        }
        steps.extend(p.effects.iter().cloned().map(Step::Effect));
        let bound = may_be_acknowledged(e).max(if p.end_unknown { 0 } else { p.next_offset });
        let mut crashed = e.clone();
        let mut marked = after.marked;
        for (i, s) in steps.iter().enumerate() {
            apply(&mut crashed, &mut marked, s);
            let again = replan(&crashed, marked)
                .unwrap_or_else(|| panic!("refused after step {i} {s:?}: {crashed:?}; first {e:?} -> {p:?}"));
            if p.end_unknown {
                assert!(
                    again.end_unknown,
                    "fence lifted after step {i} {s:?}: {crashed:?} -> {again:?}; first {e:?} -> {p:?}"
                );
            } else if !again.end_unknown {
                assert!(
                    again.next_offset >= bound,
                    "after step {i} {s:?} next {} below {bound}: {crashed:?} -> {again:?}; first {e:?} -> {p:?}",
                    again.next_offset
                );
            }
        }
    });
}

/// No offset is skipped silently: every offset below the next one that no tier holds
/// after recovery (above what retention trimmed) is reported lost, maybe lost or skipped,
/// or was skipped by an earlier degraded open, or is a gap cold recorded (reads name it).
/// A topic whose end is unknown takes no next offset (`resume_topic` reports the offsets
/// it skips).
#[test]
fn every_offset_no_tier_holds_is_reported() {
    each_plan(|e, _, after, p| {
        if p.end_unknown {
            return;
        }
        let warm = e.warm_range().unwrap_or_default();
        let cold = e.cold.unwrap_or_default();
        if degraded_then_fail(e) {
            return;
        }
        // The WAL does not hold the offsets of a torn point it recorded.
        let wal = outside(after.wal, &e.wal_gaps);
        let floor = [after.wal, warm, cold].iter().filter(|x| !x.is_empty()).map(|x| x.start).min();
        let floor = floor.unwrap_or(p.next_offset);
        let held: Vec<OffsetRange> = wal.into_iter().chain([warm, cold]).filter(|x| !x.is_empty()).collect();
        let skipped: Vec<OffsetRange> = p.skipped.into_iter().collect();
        let found = e.unacked_found();
        let cold_gap = [r(cold.end, e.cold_continues.max(cold.end))];
        let earlier = reported_earlier(e);
        for o in floor..p.next_offset {
            assert!(
                covered(
                    &[&held, &p.lost, &p.maybe_lost, &skipped, &found, &p.unacked, &cold_gap, earlier],
                    o
                ),
                "offset {o} is held by no tier and not reported: {e:?} {after:?} -> {p:?}"
            );
        }
    });
}

/// A torn point the WAL recorded, at this open or at one whose report was kept in a
/// state directory since lost, is reported exactly where no other tier holds it and no
/// degraded open skipped it: lost below the checkpoint (acknowledged), maybe
/// lost above; the offsets warm or cold holds are not reported (they are served from
/// there) — except, under `degrade`, warm's copy past the point known confirmed and not
/// in cold, which a failover may take: maybe lost.
#[test]
fn a_torn_point_is_reported_where_no_other_tier_holds_it() {
    let n = each_plan(|e, _, _, p| {
        let Some(gap) = e.wal_gaps.first() else { return };
        if !reported_earlier(e).is_empty() {
            return;
        }
        let warm = e.warm_range().unwrap_or_default();
        let cold = e.cold.unwrap_or_default();
        let found = e.unacked_found();
        let confirmed = e.warm_confirmed.unwrap_or(warm.start).clamp(warm.start, warm.end);
        for o in gap.start..gap.end {
            if covered(&[&e.pending.lost, &e.pending.maybe_lost], o) {
                continue;
            }
            let ctx = format!("offset {o}: {e:?} -> {p:?}");
            let warm_copy = warm.contains(o) && !covered(&[&found], o);
            assert_eq!(covered(&[&p.torn_in_warm], o), warm_copy, "warm's copy to export: {ctx}");
            let unconfirmed = e.policy == WarmFailurePolicy::Degrade && warm_copy && o >= confirmed;
            if unconfirmed && !cold.contains(o) {
                assert!(
                    covered(&[&p.maybe_lost], o),
                    "warm's unconfirmed copy not reported maybe lost: {ctx}"
                );
            } else if covered(&[&[warm, cold], &found], o) {
                assert!(!covered(&[&p.lost, &p.maybe_lost], o), "reported although held: {ctx}");
            } else if e.checkpoint.is_some_and(|cp| o < cp) {
                assert!(covered(&[&p.lost], o), "acknowledged and not reported lost: {ctx}");
            } else {
                assert!(covered(&[&p.maybe_lost], o), "not reported maybe lost: {ctx}");
            }
        }
    });
    assert!(n > 100_000, "only {n} plans");
}

/// The plan for evidence whose replay step replays nothing (the WAL stays as it is).
fn plan_unreplayed(e: &Evidence) -> Plan {
    let step = plan_replay(e).unwrap();
    plan(e, &step, &AfterReplay { first_kept: None, marked: false, wal: e.hot })
}

fn torn_point_evidence(warm: WarmSeen, cold: Option<OffsetRange>) -> Evidence {
    Evidence {
        policy: WarmFailurePolicy::Degrade,
        fsync_always: false,
        hot: r(0, 24),
        cut_back: true,
        wal_gaps: vec![r(14, 24)],
        checkpoint: Some(14),
        warm_confirmed: None,
        reservation: Some(1038),
        reservation_exact: false,
        fence: None,
        pending: Losses::default(),
        unacked_state: vec![],
        unacked_wal: vec![],
        rebuilt: None,
        cold,
        cold_continues: 0,
        warm,
    }
}

/// The shape the simulation found (seed 60000004): hot+cold, a seal cut short lost
/// [14, 24) at a torn point, the reservation at 1038: both ranges are maybe lost. With
/// warm holding the torn point's records, confirmed, only the reservation's range is; with
/// warm's copy past the point known confirmed (seed 80004094: under `degrade` a `WAIT`
/// that fell short, then a failover took it), the torn point is maybe lost as well.
#[test]
fn a_torn_point_below_the_wals_end_is_reported_unless_warm_holds_it_confirmed() {
    let mut outcomes = Vec::new();
    for (warm, confirmed) in [
        (WarmSeen::Disabled, None),
        (WarmSeen::Holds(r(0, 24)), Some(24)),
        (WarmSeen::Holds(r(0, 24)), Some(14)),
    ] {
        let mut e = torn_point_evidence(warm, Some(OffsetRange::empty_at(0)));
        e.warm_confirmed = confirmed;
        let p = plan_unreplayed(&e);
        assert_eq!(p.next_offset, 1038, "{p:?}");
        assert!(p.lost.is_empty(), "{p:?}");
        outcomes.push((p.maybe_lost, p.torn_in_warm));
    }
    assert_eq!(
        outcomes,
        [
            (vec![r(14, 24), r(24, 1038)], vec![]),
            (vec![r(24, 1038)], vec![r(14, 24)]),
            (vec![r(24, 1038), r(14, 24)], vec![r(14, 24)]),
        ]
    );
}

/// The shape the simulation found (seed 80000357): hot+warm under `degrade`, a power cut
/// took the WAL's first segment (acknowledged [0, 9)) and left it starting, empty, at 9;
/// warm holds [0, 3), confirmed, and the reservation is at 1033. The offsets between warm's
/// end and the WAL's start are held by no tier: maybe lost above the checkpoint.
#[test]
fn without_cold_a_cut_wal_starting_past_warms_end_reports_the_offsets_between() {
    let e = Evidence {
        policy: WarmFailurePolicy::Degrade,
        fsync_always: false,
        hot: OffsetRange::empty_at(9),
        cut_back: true,
        wal_gaps: vec![],
        checkpoint: Some(3),
        warm_confirmed: Some(3),
        reservation: Some(1033),
        reservation_exact: false,
        fence: None,
        pending: Losses::default(),
        unacked_state: vec![],
        unacked_wal: vec![],
        rebuilt: None,
        cold: None,
        cold_continues: 0,
        warm: WarmSeen::Holds(r(0, 3)),
    };
    let p = plan_unreplayed(&e);
    assert_eq!(p.next_offset, 1033, "{p:?}");
    assert!(p.lost.is_empty(), "{p:?}");
    assert_eq!(p.maybe_lost, [r(9, 1033), r(3, 9)], "{p:?}");
    // Under `fail` the same offsets are reported (above the checkpoint: maybe lost).
    let fail = Evidence { policy: WarmFailurePolicy::Fail, ..e.clone() };
    let p = plan(
        &fail,
        &plan_replay(&fail).unwrap(),
        &AfterReplay { first_kept: None, marked: false, wal: e.hot },
    );
    assert!(covered(&[&p.maybe_lost], 3) && covered(&[&p.maybe_lost], 8), "{p:?}");
    // Warm's copy reaching the WAL's start: nothing between to report.
    let reaches =
        Evidence { warm: WarmSeen::Holds(r(0, 9)), warm_confirmed: Some(9), checkpoint: Some(9), ..e };
    let p = plan(
        &reaches,
        &plan_replay(&reaches).unwrap(),
        &AfterReplay { first_kept: None, marked: false, wal: reaches.hot },
    );
    assert_eq!(p.maybe_lost, [r(9, 1033)], "{p:?}");
}

/// The shape the simulation found (seed 74002404): hot+warm+cold under `degrade`, a `WAIT`
/// that fell short, acknowledged [0, 12) on the WAL alone; a power cut took the WAL's first
/// segment and left it starting, empty, at 12; warm holds [0, 4) with no confirmation
/// known. Warm's copy is the only one, and a failover may take it: [0, 4) is maybe lost
/// like [4, 12), which no tier holds. Known confirmed (the checkpoint's warm floor at 4),
/// it is not reported.
#[test]
fn under_degrade_warms_unconfirmed_copy_below_a_cut_wals_start_is_maybe_lost() {
    let e = Evidence {
        policy: WarmFailurePolicy::Degrade,
        fsync_always: false,
        hot: OffsetRange::empty_at(12),
        cut_back: true,
        wal_gaps: vec![],
        checkpoint: None,
        warm_confirmed: None,
        reservation: Some(1036),
        reservation_exact: false,
        fence: None,
        pending: Losses::default(),
        unacked_state: vec![],
        unacked_wal: vec![],
        rebuilt: None,
        cold: Some(OffsetRange::empty_at(0)),
        cold_continues: 0,
        warm: WarmSeen::Holds(r(0, 4)),
    };
    let after = AfterReplay { first_kept: None, marked: false, wal: e.hot };
    let p = plan(&e, &plan_replay(&e).unwrap(), &after);
    assert!(p.lost.is_empty(), "{p:?}");
    assert_eq!(p.maybe_lost, [r(12, 1036), r(4, 12), r(0, 4)], "{p:?}");
    let confirmed = Evidence { checkpoint: Some(4), warm_confirmed: Some(4), ..e };
    let p = plan(&confirmed, &plan_replay(&confirmed).unwrap(), &after);
    assert_eq!(p.maybe_lost, [r(12, 1036), r(4, 12)], "{p:?}");
}

/// A WAL that opening cut back to nothing (a failed fsync lost its pages, or a power cut
/// took them, under `never`/`interval`) held acknowledged records: with no state file to
/// bound them, the topic's end is unknown — it is fenced, not restarted at 0 as a topic
/// never written (simulation seed 5000114, generator 8: offset 0 served with two
/// contents). Under `always` nothing acknowledged was past an fsync.
#[test]
fn a_wal_cut_back_to_nothing_without_state_files_fences_the_topic() {
    for fsync_always in [false, true] {
        let e = Evidence {
            policy: WarmFailurePolicy::Fail,
            fsync_always,
            hot: OffsetRange::empty_at(0),
            wal_gaps: vec![],
            checkpoint: None,
            reservation: None,
            warm: WarmSeen::Disabled,
            cold: None,
            ..torn_point_evidence(WarmSeen::Disabled, None)
        };
        let p = plan_unreplayed(&e);
        assert_eq!(p.end_unknown, !fsync_always, "fsync always {fsync_always}: {p:?}");
    }
}

/// The shape the simulation found (seed 67000580): an open replaying warm into a lost
/// WAL recorded [12, 1036) lost in cold and failed; the state directory (its kept losses)
/// was lost after it. The next open finds the WAL rebuilt from warm's [1036, 1051), no
/// state file, and cold holding [0, 12) with its trailing gap to 1036: that gap is the
/// only evidence left of the loss, which no report has carried yet.
#[test]
fn cold_trailing_gap_is_reported_again_while_the_wal_is_rebuilt() {
    let e = Evidence {
        hot: r(1036, 1051),
        cut_back: false,
        wal_gaps: vec![],
        checkpoint: None,
        reservation: None,
        rebuilt: Some(Some(1084)),
        cold: Some(r(0, 12)),
        cold_continues: 1036,
        warm: WarmSeen::Holds(r(1036, 1051)),
        ..torn_point_evidence(WarmSeen::Disabled, None)
    };
    let p = plan_unreplayed(&e);
    for o in [12, 500, 1035] {
        assert!(covered(&[&p.lost, &p.maybe_lost], o), "offset {o} unreported: {p:?}");
    }
    assert!(!covered(&[&p.lost, &p.maybe_lost], 1036), "warm and the WAL hold 1036: {p:?}");
}

/// The shape the simulation found (seed 98001912): hot+cold, a power cut before a seal
/// took the segment [18, 43); the open that found it recorded [18, 43) lost in cold (the
/// gap marker's PUT applied, its answer lost) and failed; the state directory was lost
/// after it. The next open finds the WAL at [43, 47), no state file, and cold holding
/// [0, 18) with its trailing gap to 43: reported again, as with a lost WAL.
#[test]
fn cold_trailing_gap_is_reported_again_after_the_state_directory_is_lost() {
    let e = Evidence {
        hot: r(43, 47),
        cut_back: false,
        wal_gaps: vec![],
        checkpoint: None,
        reservation: None,
        rebuilt: None,
        cold: Some(r(0, 18)),
        cold_continues: 43,
        warm: WarmSeen::Disabled,
        ..torn_point_evidence(WarmSeen::Disabled, None)
    };
    let p = plan_unreplayed(&e);
    for o in [18, 30, 42] {
        assert!(covered(&[&p.lost, &p.maybe_lost], o), "offset {o} unreported: {p:?}");
    }
    assert!(!covered(&[&p.lost, &p.maybe_lost], 43), "the WAL holds 43: {p:?}");
}

/// A torn point an earlier open recorded in the WAL is reported again once the state
/// directory is lost: that open's report was kept there until the open succeeded, and
/// an open that failed on another topic never gave it (simulation seed 140000660: cold's
/// trailing gap inside the WAL's range, which the WAL counted as held).
#[test]
fn a_torn_point_the_wal_recorded_is_reported_again_after_the_state_directory_is_lost() {
    let e = Evidence {
        hot: r(0, 47),
        cut_back: false,
        wal_gaps: vec![r(30, 41)],
        checkpoint: None,
        reservation: None,
        rebuilt: None,
        cold: Some(r(0, 30)),
        cold_continues: 41,
        warm: WarmSeen::Disabled,
        ..torn_point_evidence(WarmSeen::Disabled, None)
    };
    let p = plan_unreplayed(&e);
    for o in 30..41 {
        assert!(covered(&[&p.lost, &p.maybe_lost], o), "offset {o} unreported: {p:?}");
    }
    assert!(!covered(&[&p.lost, &p.maybe_lost], 41), "the WAL holds 41: {p:?}");
    // With the state directory, the recovery that recorded it reported it.
    let kept = Evidence { checkpoint: Some(47), reservation: Some(47), ..e };
    let p = plan_unreplayed(&kept);
    assert!(!covered(&[&p.lost, &p.maybe_lost], 30), "reported a second time: {p:?}");
}

/// Never wedged: a topic with local evidence of its end (a checkpoint or a reservation)
/// and no fence accepts appends, and the evidence is refused only when it contradicts
/// itself (a surviving WAL below cold's end, or below warm's start with warm ahead).
#[test]
fn never_wedged() {
    each_evidence(|e| {
        if e.warm == WarmSeen::Unreachable && e.degraded_refusal().is_some() {
            return;
        }
        let warm = e.warm_range().unwrap_or_default();
        let contradicts = !e.wal_lost()
            && (e.hot.end < e.cold.unwrap_or_default().end
                || (!warm.is_empty() && warm.end > e.hot.end && warm.start > e.hot.end));
        assert_eq!(plan_replay(e).is_err(), contradicts, "{e:?}");
    });
    each_plan(|e, _, _, p| {
        if p.end_unknown {
            assert!(
                e.fence.is_some() || (e.checkpoint.is_none() && e.reservation.is_none()),
                "refused appends with local evidence of the end: {e:?} -> {p:?}"
            );
        }
    });
}

/// The WAL and warm both continue at the next offset: the WAL is skipped to it, and warm,
/// when it holds records, either ends there or is sent everything from its end on.
#[test]
fn tiers_continue_at_next_offset() {
    each_plan(|e, _, after, p| {
        if p.end_unknown {
            return;
        }
        let skips = p.effects.iter().any(|x| matches!(x, Effect::SkipWal(_)));
        assert_eq!(skips, after.wal.end < p.next_offset, "{e:?} {after:?} -> {p:?}");
        if let Some(w) = e.warm_range()
            && !w.is_empty()
            && w.end != p.next_offset
        {
            let b = p.warm_backfill.unwrap_or_else(|| panic!("warm left behind: {e:?} -> {p:?}"));
            assert!(b.start <= w.end && b.end == p.next_offset, "{e:?} -> {p:?}");
        }
    });
}

/// Effects are ordered so that every crash prefix is safe: the losses are kept before
/// anything that hides them (cold's gap, the WAL's skip, the rebuilt marker's removal),
/// the skipped offsets before the WAL skips them, the fence after the losses it
/// reports, the rebuilt marker removed last; a topic whose end is unknown writes nothing
/// that would pass for evidence of its end.
#[test]
fn effects_in_crash_safe_order() {
    each_plan(|e, _, _, p| {
        let at = |f: &dyn Fn(&Effect) -> bool| p.effects.iter().position(f);
        let keep = at(&|x| matches!(x, Effect::KeepLosses(_)));
        let fence = at(&|x| matches!(x, Effect::WriteFence(_)));
        let unacked = at(&|x| matches!(x, Effect::WriteUnacked(_)));
        let gap = at(&|x| matches!(x, Effect::RecordGapInCold { .. }));
        let skip = at(&|x| matches!(x, Effect::SkipWal(_)));
        let clear = at(&|x| matches!(x, Effect::ClearRebuilt));
        let ctx = format!("{e:?} -> {p:?}");
        for hides in [gap, skip, clear].into_iter().flatten() {
            assert!(keep.is_some_and(|k| k < hides), "{ctx}");
        }
        if let (Some(u), Some(s)) = (unacked, skip) {
            assert!(u < s, "{ctx}");
        }
        if let Some(f) = fence {
            assert!(keep.is_some_and(|k| k < f), "{ctx}");
        }
        if let Some(c) = clear {
            assert_eq!(c, p.effects.len() - 1, "{ctx}");
        }
        if p.end_unknown {
            assert!(gap.is_none() && skip.is_none() && clear.is_none(), "{ctx}");
        }
    });
}

/// Nothing unacknowledged is served: under `fail`, the commit point does not run past the
/// last point known confirmed (checkpoint, or warm's start; cold's end) within what warm
/// must be sent — those batches become readable once warm confirms them.
#[test]
fn fail_commits_only_what_is_known_confirmed() {
    each_plan(|e, _, after, p| {
        if e.policy != WarmFailurePolicy::Fail || p.end_unknown {
            return;
        }
        let Some(w) = e.warm_range() else { return };
        let known = e.checkpoint.unwrap_or(w.start).max(e.cold.unwrap_or_default().end).max(w.start);
        if let Some(b) = p.warm_backfill {
            assert!(
                p.committed <= known.max(after.wal.start.min(b.end)) || p.committed == p.next_offset,
                "{e:?} {after:?} -> {p:?}"
            );
            assert!(p.committed <= b.start.max(known) || p.committed == p.next_offset, "{e:?} -> {p:?}");
        }
    });
}

/// Under `fail`, a WAL that opening cut back may start above the last point known
/// confirmed because the cut removed its first segment, not because retention trimmed
/// committed records: its start is no evidence of commitment. Warm's batches from that
/// point up to the WAL's start are confirmed again before they are served (simulation seed
/// 64001801: refused batches, kept on the primary by a `WAIT` that fell short, served
/// after a power cut took the WAL's first segment).
#[test]
fn fail_does_not_commit_below_the_start_of_a_cut_wal() {
    each_plan(|e, _, after, p| {
        if e.policy != WarmFailurePolicy::Fail || p.end_unknown || !e.cut_back {
            return;
        }
        let Some(w) = e.warm_range() else { return };
        let known = e.checkpoint.unwrap_or(w.start).max(e.cold.unwrap_or_default().end).max(w.start);
        // Warm holds batches past the known point, which may lack their confirmation.
        if known < after.wal.start && w.start <= known && (w.end >= after.wal.start || w.end > known) {
            assert!(p.committed <= known, "{e:?} {after:?} -> {p:?}");
        }
    });
}

/// The same when warm ends below the cut WAL's start (simulation seeds 80018257, 80039024,
/// 73003675): under `fail`, refused batches [10, 13) kept on the primary by a `WAIT` that
/// fell short, a power cut took the WAL's first segment and left it starting, empty, at 16.
/// The commit point stays at the checkpoint (10) and warm's [10, 13) is confirmed again
/// before it is served; [13, 16) is held by no tier and reported. Taking the start for
/// committed served the refused batches, and once a failover took them and the data
/// directory was lost, their offsets were handed out again.
/// A power cut took the WAL's first segments: it starts, empty, at 16 (the reservation),
/// past warm's end 13; the checkpoint says 10; cold is empty.
fn cut_wal_at_16_past_warm(policy: WarmFailurePolicy) -> Evidence {
    Evidence {
        policy,
        fsync_always: false,
        hot: OffsetRange::empty_at(16),
        cut_back: true,
        wal_gaps: vec![],
        checkpoint: Some(10),
        warm_confirmed: None,
        reservation: Some(16),
        reservation_exact: false,
        fence: None,
        pending: Losses::default(),
        unacked_state: vec![],
        unacked_wal: vec![],
        rebuilt: None,
        cold: Some(OffsetRange::empty_at(0)),
        cold_continues: 0,
        warm: WarmSeen::Holds(r(0, 13)),
    }
}

#[test]
fn fail_does_not_commit_warms_unconfirmed_batches_below_a_cut_wal_past_its_end() {
    let e = cut_wal_at_16_past_warm(WarmFailurePolicy::Fail);
    let after = AfterReplay { first_kept: None, marked: false, wal: e.hot };
    let p = plan(&e, &plan_replay(&e).unwrap(), &after);
    assert_eq!((p.committed, p.next_offset), (10, 16), "{p:?}");
    assert_eq!(p.warm_backfill, Some(r(10, 16)), "{p:?}");
    assert!(
        p.effects.contains(&Effect::CollectBackfill(Backfill::Fill { from: 10, held_to: 13, target: 16 })),
        "{p:?}"
    );
    assert_eq!(p.maybe_lost, [r(13, 16)], "{p:?}");
    // No tier holds [13, 16) and the WAL records no gap there (it starts past them): the
    // commit point passes them as a hole once warm confirmed its copy below.
    assert_eq!(p.holes, [r(13, 16)], "{p:?}");
    // Warm holding nothing past the checkpoint: nothing unconfirmed to serve, and the
    // commit point is not held below offsets no tier holds.
    let confirmed = Evidence { warm: WarmSeen::Holds(r(0, 10)), ..e };
    let p = plan(&confirmed, &plan_replay(&confirmed).unwrap(), &after);
    assert_eq!(p.committed, 16, "{p:?}");
}

/// The shape the simulation found (seed 73001098): a WAL rebuilt from warm and then cut
/// by a power cut starts at 45; cold ends at 12, warm holds [0, 46). Resuming the fenced
/// topic must not record [12, 45) lost in cold: warm holds those acknowledged records, and
/// the exporter stores them. What warm lacks below the WAL (here nothing) is skipped.
#[test]
fn resume_skips_in_cold_only_what_warm_does_not_hold() {
    let (wal, cold) = (r(45, 1070), Some(r(0, 12)));
    let effects = resume(wal, cold, Some(r(0, 46)), 1070);
    assert!(!effects.iter().any(|x| matches!(x, Effect::RecordGapInCold { .. })), "{effects:?}");
    let effects = resume(wal, cold, Some(r(20, 46)), 1070);
    assert!(effects.contains(&Effect::RecordGapInCold { cold: r(0, 12), wal_first: 20 }), "{effects:?}");
    let effects = resume(wal, cold, Some(OffsetRange::empty_at(46)), 1070);
    assert!(effects.contains(&Effect::RecordGapInCold { cold: r(0, 12), wal_first: 45 }), "{effects:?}");
}

/// Resuming records the skipped offsets in cold before the WAL (whose file at the resume
/// offset is itself evidence of the end), and removes the rebuilt marker last.
#[test]
fn resume_records_cold_then_the_wal_then_clears_the_rebuilt_marker() {
    let colds = [None, Some(OffsetRange::empty_at(0)), Some(r(0, 2)), Some(r(0, 4))];
    for wal in [OffsetRange::empty_at(0), r(0, 4), r(2, 4), r(4, 6)] {
        for cold in colds {
            for at in [4, 6, 8] {
                if wal.end > at {
                    continue;
                }
                let effects = resume(wal, cold, None, at);
                let ctx = format!("{wal:?} {cold:?} {at} -> {effects:?}");
                let gap = effects.iter().position(|x| matches!(x, Effect::RecordGapInCold { .. }));
                let skip = effects.iter().position(|x| matches!(x, Effect::SkipWal(_)));
                assert_eq!(effects.last(), Some(&Effect::ClearRebuilt), "{ctx}");
                assert_eq!(skip.is_some(), wal.end < at, "{ctx}");
                let wal_first = if wal.is_empty() { at } else { wal.start };
                let c = cold.unwrap_or_default();
                assert_eq!(gap.is_some(), !c.is_empty() && c.end < wal_first, "{ctx}");
                if let (Some(g), Some(s)) = (gap, skip) {
                    assert!(g < s, "{ctx}");
                }
            }
        }
    }
}

/// A reported loss is a hole only where no tier holds it: under `degrade`, warm's
/// unconfirmed copy below a cut WAL's start is reported maybe lost and served from warm,
/// so the commit point must not pass it as empty.
#[test]
fn holes_are_the_reported_losses_no_tier_holds() {
    let e = Evidence { warm_confirmed: Some(10), ..cut_wal_at_16_past_warm(WarmFailurePolicy::Degrade) };
    let after = AfterReplay { first_kept: None, marked: false, wal: e.hot };
    let p = plan(&e, &plan_replay(&e).unwrap(), &after);
    assert!(
        p.maybe_lost.iter().any(|m| m.start < 13 && m.end > 10),
        "warm's unconfirmed copy is reported: {p:?}"
    );
    assert!(p.holes.iter().all(|h| h.start >= 13), "no hole inside warm's copy: {p:?}");
    assert!(p.holes.iter().any(|h| h.start == 13 && h.end == 16), "what no tier holds is a hole: {p:?}");
}
