//! Reading a sealed segment: records, limits, timestamp lookups, index semantics.

use bytes::Bytes;
use tier_core::segment::{SealedSegment, SegmentHeader, SegmentWriter, SegmentWriterState};
use tier_core::{ErrorKind, ReadLimit, Timestamp};

use crate::common::{self, SAMPLE_BASE};

#[test]
fn sample_opens_with_the_expected_metadata() {
    let (bytes, model) = common::sample();
    let seg = SealedSegment::open(bytes.clone()).unwrap();
    assert_eq!(seg.header().topic, common::topic());
    assert_eq!(seg.header().base_offset, SAMPLE_BASE);
    let t = seg.trailer();
    assert_eq!(seg.offset_range().start, SAMPLE_BASE);
    assert_eq!(seg.offset_range().end, SAMPLE_BASE + model.len() as u64);
    assert_eq!(t.record_count, model.len() as u64);
    assert_eq!(t.batch_count, 6);
    assert_eq!(t.min_timestamp, 1000);
    assert_eq!(t.max_timestamp, 1060);
    assert_eq!(t.segment_len(), bytes.len() as u64);
    assert!(seg.index().entries().len() >= 3, "{:?}", seg.index().entries());
    seg.verify().unwrap();
}

#[test]
fn index_entries_follow_the_documented_rule() {
    let (bytes, model) = common::sample();
    let seg = SealedSegment::open(bytes).unwrap();
    let batches: Vec<_> = seg.batches().map(|b| b.unwrap()).collect();
    let entries = seg.index().entries();
    // An entry starts at the first batch and at each batch starting >= interval bytes
    // after the current entry.
    let mut expected = vec![];
    for (pos, b) in &batches {
        if expected.last().is_none_or(|&(p, _)| pos - p >= u64::from(common::SAMPLE_INTERVAL)) {
            expected.push((*pos, b.base_offset()));
        }
    }
    let got: Vec<_> = entries.iter().map(|e| (e.position, e.offset)).collect();
    assert_eq!(got, expected);
    // max_timestamp = running maximum at the interval's last record.
    for (i, e) in entries.iter().enumerate() {
        let end = entries.get(i + 1).map_or(seg.offset_range().end, |n| n.offset);
        let want = model.iter().filter(|r| r.offset < end).map(|r| r.timestamp).max().unwrap();
        assert_eq!(e.max_timestamp, want, "entry {i}");
    }
}

#[test]
fn reads_match_the_model_from_every_offset_with_limits() {
    let (bytes, model) = common::sample();
    let seg = SealedSegment::open(bytes).unwrap();
    let end = seg.offset_range().end;
    for from in SAMPLE_BASE..=end {
        for to in [from, from + 1, from + 3, end, u64::MAX] {
            for max_records in [1, 2, 5, usize::MAX] {
                let got = seg.read(from, to, ReadLimit::records(max_records)).unwrap();
                let want: Vec<_> = model
                    .iter()
                    .filter(|r| r.offset >= from && r.offset < to)
                    .take(max_records)
                    .cloned()
                    .collect();
                assert_eq!(got, want, "from {from} to {to} max {max_records}");
            }
        }
    }
    // Before the segment: starts at its first record.
    assert_eq!(seg.read(0, SAMPLE_BASE + 1, ReadLimit::unbounded()).unwrap(), model[..1].to_vec());
}

#[test]
fn byte_limit_stops_before_the_record_that_would_exceed_it_but_returns_one() {
    let (bytes, model) = common::sample();
    let seg = SealedSegment::open(bytes).unwrap();
    let one = seg.read(SAMPLE_BASE, u64::MAX, ReadLimit { max_records: 100, max_bytes: 1 }).unwrap();
    assert_eq!(one, model[..1].to_vec());
    // "first" (5) + key "k0" (2) + header (2) = 9; then an empty payload (0) = 9; then
    // "late one" (8) would make 17.
    let got = seg.read(SAMPLE_BASE, u64::MAX, ReadLimit { max_records: 100, max_bytes: 16 }).unwrap();
    assert_eq!(got, model[..2].to_vec());
    let got = seg.read(SAMPLE_BASE, u64::MAX, ReadLimit { max_records: 100, max_bytes: 17 }).unwrap();
    assert_eq!(got, model[..3].to_vec());
}

#[test]
fn timestamp_lookup_matches_the_running_maximum_model() {
    let (bytes, model) = common::sample();
    let seg = SealedSegment::open(bytes).unwrap();
    for t in (900..1100).chain([Timestamp::MIN, Timestamp::MAX]) {
        assert_eq!(
            seg.offset_for_timestamp(t).unwrap(),
            common::model_offset_for_timestamp(&model, t),
            "t = {t}"
        );
    }
    // 1004: offset 101 has ts 1005 (running max 1005) although offset 102 (1003) comes
    // later; 1012: the record at 1015 follows 1020, so the answer is 1020's offset.
    assert_eq!(seg.offset_for_timestamp(1004).unwrap(), Some(101));
    assert_eq!(seg.offset_for_timestamp(1012).unwrap(), Some(105));
}

#[test]
fn batches_from_an_index_position_continue_to_the_end() {
    let (bytes, model) = common::sample();
    let seg = SealedSegment::open(bytes).unwrap();
    let e = seg.index().entries()[1];
    let records: Vec<_> = seg
        .batches_from(e.position)
        .unwrap()
        .flat_map(|b| b.unwrap().1.records().collect::<Vec<_>>())
        .collect();
    assert_eq!(records, model[(e.offset - SAMPLE_BASE) as usize..].to_vec());
    assert!(seg.batches_from(3).is_err());
    assert!(seg.batches_from(seg.trailer().index_position + 1).is_err());
    // A position inside a batch is caught when decoding.
    assert!(seg.batches_from(e.position + 1).unwrap().any(|b| b.is_err()));
}

#[test]
fn an_empty_segment_seals_and_reads_as_empty() {
    let header = SegmentHeader::new(common::topic(), 42, 5);
    let bytes = Bytes::from(SegmentWriter::new(Vec::new(), &header).unwrap().seal().unwrap());
    let seg = SealedSegment::open(bytes).unwrap();
    assert!(seg.offset_range().is_empty());
    assert_eq!(seg.offset_range().start, 42);
    assert!(seg.index().entries().is_empty());
    assert_eq!(seg.read(42, 100, ReadLimit::unbounded()).unwrap(), vec![]);
    assert_eq!(seg.offset_for_timestamp(Timestamp::MIN).unwrap(), None);
    seg.verify().unwrap();
}

#[test]
fn writer_state_rejects_gaps_and_misplaced_batches_without_changing() {
    let header = SegmentHeader::new(common::topic(), 10, 0);
    let mut state = SegmentWriterState::new(&header);
    let b = common::batch(10, &[(5, None, vec![], b"x".to_vec())]);
    let err = state.note_batch(&b.clone().with_base_offset(11), state.size()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = state.note_batch(&b, state.size() + 1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert_eq!(state, SegmentWriterState::new(&header));
    state.note_batch(&b, state.size()).unwrap();
    assert_eq!(state.next_offset(), 11);
    assert_eq!(state.size(), header.encoded_len() as u64 + b.encoded_len() as u64);
    assert_eq!((state.min_timestamp(), state.max_timestamp()), (Some(5), Some(5)));
    assert_eq!(state.sealed_len(), state.size() + 24 + 88);

    let mut w = SegmentWriter::new(Vec::new(), &header).unwrap();
    assert!(w.append(&b.clone().with_base_offset(12)).is_err());
    w.append(&b).unwrap();
    let bytes = w.seal().unwrap();
    assert_eq!(bytes.len() as u64, state.sealed_len());
}
