//! Reads that start inside an index interval or inside a batch: batches before the
//! wanted offset are stepped over by their fixed fields, the batch a previous read
//! ended in is reused, and neither hides damage in what a read returns.

use bytes::Bytes;
use tier_core::segment::{DecodeError, SealedSegment};
use tier_core::{ReadLimit, Record};

use crate::common::{self, SAMPLE_BASE};

/// The sample batches in one index interval (so every read walks from the first).
fn one_interval() -> (Bytes, Vec<Record>) {
    common::build(SAMPLE_BASE, &common::sample_batches(), 1 << 20)
}

/// Byte position of each batch (after the header) and its offsets, from a full walk.
fn batch_positions(seg: &SealedSegment) -> Vec<(u64, u64, u64)> {
    seg.batches()
        .map(|item| {
            let (pos, b) = item.unwrap();
            (pos, b.base_offset(), b.end_offset())
        })
        .collect()
}

#[test]
fn sequential_small_reads_resume_where_the_last_one_ended() {
    let (bytes, model) = one_interval();
    for max_records in 1..=4 {
        let seg = SealedSegment::open(bytes.clone()).unwrap();
        let limit = ReadLimit { max_records, ..ReadLimit::default() };
        let mut next = SAMPLE_BASE;
        let mut got = Vec::new();
        loop {
            let records = seg.read(next, u64::MAX, limit).unwrap();
            if records.is_empty() {
                break;
            }
            assert!(records.len() <= max_records);
            next = records.last().unwrap().offset + 1;
            got.extend(records);
        }
        assert_eq!(got, model, "reads of {max_records} records");
    }
    // Every start offset, on a fresh segment and after a read that ended elsewhere.
    let seg = SealedSegment::open(bytes).unwrap();
    for from in SAMPLE_BASE..SAMPLE_BASE + model.len() as u64 {
        let want = &model[(from - SAMPLE_BASE) as usize..];
        assert_eq!(seg.read(from, u64::MAX, ReadLimit::unbounded()).unwrap(), want, "from {from}");
        let _ = seg.read(SAMPLE_BASE + 5, SAMPLE_BASE + 6, ReadLimit::unbounded()).unwrap();
    }
}

#[test]
fn a_damaged_batch_before_the_start_goes_unread_or_is_reported() {
    let (bytes, model) = one_interval();
    let seg = SealedSegment::open(bytes.clone()).unwrap();
    let batches = batch_positions(&seg);
    let (first_pos, _, first_end) = batches[0];
    let (second_pos, _, _) = batches[1];

    // A flipped payload byte (CRC mismatch) in the first batch: a read starting after
    // it never needs it and returns exactly the model; one starting in it fails.
    let mut b = bytes.to_vec();
    b[second_pos as usize - 1] ^= 0x40;
    let seg = SealedSegment::open(Bytes::from(b)).unwrap();
    let want = &model[(first_end - SAMPLE_BASE) as usize..];
    assert_eq!(seg.read(first_end, u64::MAX, ReadLimit::unbounded()).unwrap(), want);
    let err = seg.read(SAMPLE_BASE, u64::MAX, ReadLimit::unbounded()).unwrap_err();
    assert!(matches!(err, DecodeError::Crc { .. }), "{err}");

    // A wrong base offset or record count in the first batch breaks the chain of
    // offsets the stepped-over batches give: reported, not silently re-numbered.
    for field in [first_pos as usize, first_pos as usize + 16] {
        let mut b = bytes.to_vec();
        b[field] ^= 0x01;
        let seg = SealedSegment::open(Bytes::from(b)).unwrap();
        let read = seg.read(first_end, u64::MAX, ReadLimit::unbounded());
        assert!(read.is_err(), "damage at byte {field} went unnoticed: {read:?}");
    }

    // A length pointing elsewhere lands on bytes that are not the next batch.
    let mut b = bytes.to_vec();
    b[first_pos as usize + 8] ^= 0x04;
    let seg = SealedSegment::open(Bytes::from(b)).unwrap();
    let read = seg.read(first_end, u64::MAX, ReadLimit::unbounded());
    assert!(read.is_err(), "a damaged batch length went unnoticed: {read:?}");
}

#[test]
fn verify_checks_every_batch_even_after_reads() {
    let (bytes, _) = one_interval();
    let seg = SealedSegment::open(bytes).unwrap();
    let _ = seg.read(SAMPLE_BASE + 1, SAMPLE_BASE + 2, ReadLimit::unbounded()).unwrap();
    seg.verify().unwrap();
    assert_eq!(batch_positions(&seg).len(), common::sample_batches().len());
}
