//! The simulation's verdicts as tests.
//!
//! - Every regression schedule (`tier_sim::REGRESSION_SEEDS`) must pass: each breaks the
//!   invariant it names while the bug its `case` describes is present.
//! - A few hundred short benign schedules (no data-destroying or warm faults) from a fixed
//!   seed set must pass: a quick sample of what `cargo xtask test` runs for a minute. The
//!   full fault mix is what `cargo xtask sim` runs (`docs/simulation.md`).

use tier_sim::{REGRESSION_SEEDS, Schedule, run, run_reverting};

#[test]
fn every_regression_schedule_passes() {
    let mut failing = Vec::new();
    for r in REGRESSION_SEEDS {
        let outcome = run(&r.schedule(), false);
        if let Some(v) = outcome.violations.first() {
            failing.push(format!("seed {} --keep {:?} ({}): {v}", r.seed, r.keep, r.case));
        }
    }
    assert!(failing.is_empty(), "{} regression schedule(s) fail:\n{}", failing.len(), failing.join("\n"));
}

/// A repaired behaviour put back behind its switch (`tier_sim::Revert`: the WAL's
/// `tier_hot::faults::Revert`, or the warm stand-in's protocol) is found again by the
/// regression schedule that found it: the simulation sees that bug class.
#[test]
fn each_reverted_repair_is_found_by_its_regression_schedule() {
    use tier_hot::faults::Revert as Hot;
    use tier_router::testing::Repair;
    use tier_sim::Revert;
    let cases = [
        (64000015, Revert::Hot(Hot::ForgetCuts)),
        (9000092, Revert::WarmWaitAlone),
        (9000139, Revert::WarmIgnoresNext),
        (1796426533093494512, Revert::Hot(Hot::TrustFailedFsyncs)),
        (60000000, Revert::Hot(Hot::HolesAreDamage)),
        (120000015, Revert::SharedStateDir),
        (220023971, Revert::Router(Repair::LossesInWal)),
        (220092267, Revert::Router(Repair::NewTopicOnlyWhenNoTierHolds)),
        (230048725, Revert::Router(Repair::WarmContinuesItsHold)),
        (5100210, Revert::Router(Repair::ClaimAnswered)),
        (280001450, Revert::Router(Repair::OwnClaimsKeepWal)),
    ];
    for (seed, behaviour) in cases {
        let r = REGRESSION_SEEDS.iter().find(|r| r.seed == seed).expect("a regression schedule");
        assert!(run(&r.schedule(), false).violations.is_empty(), "seed {seed} passes with the repair");
        let outcome = run_reverting(&r.schedule(), false, &[behaviour]);
        assert!(
            outcome.violations.iter().any(|v| v.to_string().contains(r.invariant)),
            "seed {seed} with {behaviour:?} reverted breaks {:?}: {:?}",
            r.invariant,
            outcome.violations
        );
    }
}

#[test]
fn three_hundred_short_benign_schedules_pass() {
    let mut failing = Vec::new();
    for seed in 0..300u64 {
        let outcome = run(&Schedule::generate(seed, 40).benign(), false);
        if let Some(v) = outcome.violations.first() {
            failing.push(format!("seed {seed} (40 steps): {v}"));
        }
    }
    assert!(
        failing.is_empty(),
        "{} of 300 schedules fail (replay one with `cargo xtask sim --benign --seed S --steps 40`):\n{}",
        failing.len(),
        failing.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// Version 2 of the step generator differs from version 1 only where version 1 made a
/// `Heal`, which became `LoseWalRunning`; version 3 differs from version 2 only in the
/// appends a `LoseWalRunning` makes; version 4 from version 3 only where a `Heal` became
/// `WalFsyncFails`; version 5 from version 4 from its first warm-outage burst on (which
/// replaces a `Heal`); version 6 from version 5 where a `Heal` became a
/// `PowerCutBeforeSeal`, in its power-cut model and, for half the seeds, its segment size
/// and age; version 7 from version 6 only in failed fsyncs losing their pages; version 8
/// from version 7 where a `Heal` became an object-store fault (cold deployed); version 9
/// from version 8 where a `Heal` became a warm connection or failover fault (warm
/// deployed); version 10 from version 9 where a `Heal` became a `ClockBack`; version 11 from
/// version 10 only in what a power cut leaves (directory operations undone); version 12
/// from version 11 where a `Heal` became a `Neighbour`; version 13 from version 12 only in
/// its second topic. Regression
/// schedules replay with the version they were found with, so their steps and power cuts
/// never change.
#[test]
fn the_generator_versions_differ_only_where_a_heal_became_a_running_disk_loss() {
    use tier_sim::disk::CutModel;
    use tier_sim::schedule::{GENERATOR, LATEST, ReadFrom, Step};
    let mut running = 0;
    let mut appending = 0;
    for seed in 0..200 {
        let (v1, v2, v3) = (
            Schedule::generate_with(1, seed, 200),
            Schedule::generate_with(2, seed, 200),
            Schedule::generate_with(3, seed, 200),
        );
        assert_eq!(v1.config.to_string(), v2.config.to_string(), "seed {seed}");
        assert_eq!(v2.config.to_string(), v3.config.to_string(), "seed {seed}");
        for (((i, a), (_, b)), (_, c)) in v1.steps.iter().zip(&v2.steps).zip(&v3.steps) {
            if a != b {
                assert_eq!(
                    (*a, *b),
                    (Step::Heal, Step::LoseWalRunning { producers: 0, records: 0 }),
                    "seed {seed} step {i}"
                );
                running += 1;
                match *c {
                    Step::LoseWalRunning { producers, records } => {
                        assert!(
                            (2..=4).contains(&producers) && (3..=11).contains(&records),
                            "seed {seed} step {i}: {c:?}"
                        );
                        appending += 1;
                    }
                    other => {
                        panic!("seed {seed} step {i}: version 3 made {other:?} where version 2 made {b:?}")
                    }
                }
            } else {
                assert_eq!(b, c, "seed {seed} step {i}");
            }
        }
        assert!(!v1.steps.iter().any(|(_, s)| matches!(s, Step::LoseWalRunning { .. })), "seed {seed}");
    }
    assert!(running > 0, "version 2 generates running disk losses");
    assert_eq!(appending, running, "version 3 appends in every running disk loss");
    // Version 4 differs from version 3 only where a heal became a WAL fsync failure.
    let mut fsync_failures = 0;
    for seed in 0..200 {
        let (v3, v4) = (Schedule::generate_with(3, seed, 200), Schedule::generate_with(4, seed, 200));
        assert_eq!(v3.config.to_string(), v4.config.to_string(), "seed {seed}");
        for ((i, a), (_, b)) in v3.steps.iter().zip(&v4.steps) {
            if a != b {
                assert_eq!((*a, *b), (Step::Heal, Step::WalFsyncFails), "seed {seed} step {i}");
                fsync_failures += 1;
            }
        }
    }
    assert!(fsync_failures > 0, "version 4 generates WAL fsync failures");
    // Version 5 is version 4 up to the first warm-outage burst, which starts where version
    // 4 made a heal (with warm deployed) and runs warm down .. a restart .. warm back, a
    // read from the start.
    let mut bursts = 0;
    for seed in 0..200 {
        let (v4, v5) = (Schedule::generate_with(4, seed, 200), Schedule::generate_with(5, seed, 200));
        assert_eq!(v4.config.to_string(), v5.config.to_string(), "seed {seed}");
        let Some(k) = v4.steps.iter().zip(&v5.steps).position(|(a, b)| a != b) else { continue };
        assert_eq!(
            (v4.steps[k].1, v5.steps[k].1),
            (Step::Heal, Step::WarmOutage(true)),
            "seed {seed} step {k}"
        );
        assert!(v5.config.deployment.warm(), "seed {seed}: a burst needs warm");
        let rest: Vec<Step> = v5.steps[k..].iter().map(|(_, s)| *s).take(10).collect();
        if let Some(read) = rest.iter().position(|s| *s == Step::Read { from: ReadFrom::Earliest, max: 200 })
        {
            assert_eq!(rest[read - 1], Step::WarmOutage(false), "seed {seed}: {rest:?}");
            assert!(rest[..read].iter().any(|s| matches!(s, Step::Crash { .. })), "seed {seed}: {rest:?}");
            bursts += 1;
        } else {
            assert!(k + 10 > 200, "seed {seed}: a burst not cut short by the schedule's end: {rest:?}");
        }
    }
    assert!(bursts > 0, "version 5 generates warm-outage bursts");
    // Version 6 cuts power by page, gives half the schedules segments of several pages,
    // and differs from version 5's steps only where a heal became a power cut before a
    // seal's fsync.
    let (mut cuts_before_seal, mut paged) = (0, 0);
    for seed in 0..200 {
        let (v5, v6) = (Schedule::generate_with(5, seed, 200), Schedule::generate_with(6, seed, 200));
        assert_eq!(v5.config.cuts, CutModel::Bytes, "seed {seed}");
        assert_eq!(v6.config.cuts, CutModel::Pages, "seed {seed}");
        let mut scaled = v5.config.clone();
        (scaled.cuts, scaled.segment_bytes, scaled.segment_age) =
            (CutModel::Pages, v6.config.segment_bytes, v5.config.segment_age * 5);
        if v6.config.segment_bytes != v5.config.segment_bytes {
            assert!((8192..=24576).contains(&v6.config.segment_bytes), "seed {seed}: {}", v6.config);
            assert_eq!(v6.config.to_string(), scaled.to_string(), "seed {seed}");
            paged += 1;
        } else {
            scaled.segment_age = v5.config.segment_age;
            assert_eq!(v6.config.to_string(), scaled.to_string(), "seed {seed}");
        }
        for ((i, a), (_, b)) in v5.steps.iter().zip(&v6.steps) {
            if a != b {
                assert!(
                    *a == Step::Heal && matches!(b, Step::PowerCutBeforeSeal { records: 1..=5 }),
                    "seed {seed} step {i}: {a:?} became {b:?}"
                );
                cuts_before_seal += 1;
            }
        }
    }
    assert!(cuts_before_seal > 0, "version 6 generates power cuts before a seal's fsync");
    assert!((50..150).contains(&paged), "about half the schedules get segments of several pages: {paged}");
    // Version 7 is version 6 with failed fsyncs losing their pages: the same steps.
    for seed in 0..200 {
        let (v6, v7) = (Schedule::generate_with(6, seed, 200), Schedule::generate_with(7, seed, 200));
        assert!(!v6.config.fsync_loses_pages && v7.config.fsync_loses_pages, "seed {seed}");
        assert_eq!(v6.steps, v7.steps, "seed {seed}");
        let mut v7_as_6 = v7.config.clone();
        v7_as_6.fsync_loses_pages = false;
        assert_eq!(v6.config.to_string(), v7_as_6.to_string(), "seed {seed}");
    }
    // Version 8 is version 7 where a heal became an object-store fault (cold deployed).
    let mut cold_faults = 0;
    for seed in 0..200 {
        let (v7, v8) = (Schedule::generate_with(7, seed, 200), Schedule::generate_with(8, seed, 200));
        assert_eq!(v7.config.to_string(), v8.config.to_string(), "seed {seed}");
        for ((i, a), (_, b)) in v7.steps.iter().zip(&v8.steps) {
            if a != b {
                assert!(
                    *a == Step::Heal
                        && v8.config.deployment.cold()
                        && matches!(
                            b,
                            Step::ColdAmbiguous { every: 2..=4, .. } | Step::ColdListLag { lists: 1..=3 }
                        ),
                    "seed {seed} step {i}: {a:?} became {b:?}"
                );
                cold_faults += 1;
            }
        }
    }
    assert!(cold_faults > 0, "version 8 generates object-store faults");
    // Version 9 is version 8 where a heal became a warm fault of a connection or a
    // failover (warm deployed).
    let mut warm_faults = 0;
    for seed in 0..200 {
        let (v8, v9) = (Schedule::generate_with(8, seed, 200), Schedule::generate_with(9, seed, 200));
        assert_eq!(v8.config.to_string(), v9.config.to_string(), "seed {seed}");
        assert!(!v8.config.warm_group_script && v9.config.warm_group_script, "seed {seed}");
        for ((i, a), (_, b)) in v8.steps.iter().zip(&v9.steps) {
            if a != b {
                assert!(
                    *a == Step::Heal
                        && v9.config.deployment.warm()
                        && matches!(
                            b,
                            Step::WarmAnswersLost { every: 2..=4 }
                                | Step::WarmReconnect
                                | Step::WarmFailoverBehind { writes: 1..=4 }
                        ),
                    "seed {seed} step {i}: {a:?} became {b:?}"
                );
                warm_faults += 1;
            }
        }
    }
    assert!(warm_faults > 0, "version 9 generates warm connection and failover faults");
    // Version 10 is version 9 where a heal became the store's clock going back.
    let mut clock_backs = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let (v9, v10) = (Schedule::generate_with(9, seed, 200), Schedule::generate_with(10, seed, 200));
        assert_eq!(v9.config.to_string(), v10.config.to_string(), "seed {seed}");
        for ((i, a), (_, b)) in v9.steps.iter().zip(&v10.steps) {
            if a != b {
                match (*a, *b) {
                    (Step::Heal, Step::ClockBack { minutes }) => {
                        clock_backs.insert(minutes);
                    }
                    _ => panic!("seed {seed} step {i}: {a:?} became {b:?}"),
                }
            }
        }
    }
    assert_eq!(
        clock_backs.into_iter().collect::<Vec<_>>(),
        tier_sim::schedule::CLOCK_BACK_MINUTES.to_vec(),
        "version 10 moves the clock back by every amount"
    );
    // Version 11 is version 10 but for what a power cut leaves: the same steps.
    for seed in 0..50 {
        let (v10, v11) = (Schedule::generate_with(10, seed, 200), Schedule::generate_with(11, seed, 200));
        assert_eq!(v10.steps, v11.steps, "seed {seed}");
        assert_eq!(v11.config.cuts, CutModel::PagesAndDirs);
    }
    // Version 12 is version 11 where a heal became a store beside this one.
    let mut neighbours = 0;
    for seed in 0..200 {
        let (v11, v12) = (Schedule::generate_with(11, seed, 200), Schedule::generate_with(12, seed, 200));
        assert_eq!(v11.config.to_string(), v12.config.to_string(), "seed {seed}");
        for ((i, a), (_, b)) in v11.steps.iter().zip(&v12.steps) {
            if a != b {
                assert!(
                    *a == Step::Heal && matches!(b, Step::Neighbour { records: 1..=8 }),
                    "seed {seed} step {i}: {a:?} became {b:?}"
                );
                neighbours += 1;
            }
        }
    }
    assert!(neighbours > 0, "version 12 generates stores beside the store");
    // Version 13 is version 12 with a second topic: the same steps.
    for seed in 0..50 {
        let (v12, v13) = (Schedule::generate_with(12, seed, 200), Schedule::generate_with(13, seed, 200));
        assert_eq!(v12.steps, v13.steps, "seed {seed}");
        assert!(!v12.config.second_topic && v13.config.second_topic, "seed {seed}");
    }
    // Version 14 is version 13 with warm's owner epochs: the same steps.
    for seed in 0..50 {
        let (v13, v14) = (Schedule::generate_with(13, seed, 200), Schedule::generate_with(14, seed, 200));
        assert_eq!(v13.steps, v14.steps, "seed {seed}");
        assert!(!v13.config.warm_owner_epochs && v14.config.warm_owner_epochs, "seed {seed}");
    }
    assert_eq!((GENERATOR, LATEST), (14, 14), "version 14 is the newest and the default");
    for r in REGRESSION_SEEDS {
        assert_eq!(r.schedule().steps.len(), r.keep.len(), "seed {}: every kept step is generated", r.seed);
    }
}

/// Generator 13's second topic is written by every append step and read back by every
/// full check: the schedule's log shows its records acknowledged and read, and none of
/// the first topic's among them (the run passes).
#[test]
fn the_second_topic_is_written_and_read_back() {
    let (mut acked, mut read) = (0, 0);
    for seed in 0..4 {
        let schedule = Schedule::generate_with(13, seed, 80).benign();
        let outcome = run(&schedule, true);
        assert!(outcome.violations.is_empty(), "seed {seed}: {:?}", outcome.violations);
        acked += outcome.log.iter().filter(|l| l.starts_with("  u: acked")).count();
        read += outcome
            .log
            .iter()
            .filter_map(|l| l.strip_prefix("  u: ")?.strip_suffix(" record(s) read")?.parse::<u64>().ok())
            .sum::<u64>();
    }
    assert!(
        acked > 0 && read > 0,
        "the second topic was written ({acked} batches) and read ({read} records)"
    );
}
