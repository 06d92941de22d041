//! Seeded property tests: arbitrary batches into segments, read back by offset and by
//! timestamp (sealed and ranged), checked against a brute-force model.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use tier_core::segment::{RangedSegment, RecoveryPolicy, SealedSegment, scan_unsealed};
use tier_core::{ReadLimit, Timestamp};

use crate::common::{self, Spec};

fn spec() -> impl Strategy<Value = Spec> {
    let ts = prop_oneof![
        8 => -40i64..40,
        1 => Just(Timestamp::MIN),
        1 => Just(Timestamp::MAX),
        1 => any::<i64>(),
    ];
    let header = (prop::collection::vec(any::<u8>(), 0..8), prop::collection::vec(any::<u8>(), 0..600));
    (
        ts,
        prop::option::of(prop::collection::vec(any::<u8>(), 0..16)),
        prop::collection::vec(header, 0..3),
        prop_oneof![3 => prop::collection::vec(any::<u8>(), 0..40), 1 => prop::collection::vec(any::<u8>(), 0..3000)],
    )
}

fn segment_input() -> impl Strategy<Value = (u64, Vec<Vec<Spec>>, u32)> {
    (
        prop_oneof![Just(0u64), 0..1_000_000_000_000u64],
        prop::collection::vec(prop::collection::vec(spec(), 1..6), 0..30),
        prop_oneof![Just(0u32), Just(1), Just(64), Just(700), Just(4096), Just(65536)],
    )
}

fn config() -> Config {
    Config {
        cases: 200,
        rng_seed: RngSeed::Fixed(0x7165_726c_6f67),
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn segments_round_trip_and_lookups_match_the_model(
        (base, batches, interval) in segment_input(),
        picks in prop::collection::vec((any::<prop::sample::Index>(), 0usize..20, 0u64..30), 8),
    ) {
        let (bytes, model) = common::build(base, &batches, interval);
        let seg = SealedSegment::open(bytes.clone()).unwrap();
        seg.verify().unwrap();
        let end = base + model.len() as u64;
        prop_assert_eq!(seg.offset_range().end, end);
        prop_assert_eq!(seg.read(0, u64::MAX, ReadLimit::unbounded()).unwrap(), model.clone());

        // Index: every offset's range holds it.
        for o in base..end {
            let r = seg.index().locate_offset(o).unwrap();
            prop_assert!(r.first_offset <= o && o < r.end_offset);
        }
        prop_assert!(seg.index().locate_offset(end).is_none());

        // Reads from arbitrary offsets with arbitrary limits.
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let ranged = rt
            .block_on(RangedSegment::open(bytes.clone(), bytes.len() as u64, 256))
            .unwrap();
        for (idx, max_records, len) in &picks {
            if model.is_empty() { break; }
            let from = base + idx.index(model.len()) as u64;
            let to = from + len;
            let limit = ReadLimit::records(*max_records);
            let want: Vec<_> = model.iter().filter(|r| r.offset >= from && r.offset < to).take(*max_records).cloned().collect();
            prop_assert_eq!(seg.read(from, to, limit).unwrap(), want.clone());
            prop_assert_eq!(rt.block_on(ranged.read(from, to, limit)).unwrap(), want);
        }

        // Timestamp lookups against the running-maximum model.
        let mut probes: Vec<Timestamp> = vec![Timestamp::MIN, Timestamp::MAX, 0];
        for r in &model {
            probes.extend([r.timestamp.saturating_sub(1), r.timestamp, r.timestamp.saturating_add(1)]);
        }
        for t in probes {
            let want = common::model_offset_for_timestamp(&model, t);
            prop_assert_eq!(seg.offset_for_timestamp(t).unwrap(), want, "t = {}", t);
            prop_assert_eq!(rt.block_on(ranged.offset_for_timestamp(t)).unwrap(), want, "ranged t = {}", t);
        }

        // The unsealed prefix scans back to the same state.
        let data_end = seg.trailer().index_position as usize;
        let scanned = scan_unsealed(&bytes[..data_end], RecoveryPolicy::Refuse).unwrap();
        prop_assert_eq!(scanned.state.footer_bytes(), bytes[data_end..].to_vec());
    }
}
