//! The recovery scan's policies and its handling of sealed files.

use tier_core::segment::{DecodeError, RecoveryPolicy, SealedSegment, SegmentHeader, scan_unsealed};

use crate::common;

fn unsealed_sample() -> (Vec<u8>, u64) {
    let (bytes, _) = common::sample();
    let seg = SealedSegment::open(bytes.clone()).unwrap();
    let end = seg.trailer().index_position;
    (bytes[..end as usize].to_vec(), end)
}

#[test]
fn a_clean_unsealed_file_recovers_everything() {
    let (file, end) = unsealed_sample();
    for policy in [RecoveryPolicy::Refuse, RecoveryPolicy::TruncateTornTail] {
        let out = scan_unsealed(&file, policy).unwrap();
        assert_eq!(out.data_end, end);
        assert!(out.torn_tail.is_none() && out.sealed.is_none());
        assert_eq!(out.header.base_offset, common::SAMPLE_BASE);
        assert_eq!(out.state.record_count(), 13);
        assert_eq!(out.state.batch_count(), 6);
        assert_eq!((out.state.min_timestamp(), out.state.max_timestamp()), (Some(1000), Some(1060)));
    }
}

#[test]
fn preallocated_zeros_are_a_torn_tail_or_refused() {
    let (mut file, end) = unsealed_sample();
    file.extend_from_slice(&[0u8; 100]);
    let out = scan_unsealed(&file, RecoveryPolicy::TruncateTornTail).unwrap();
    assert_eq!(out.data_end, end);
    let (pos, err) = out.torn_tail.unwrap();
    assert_eq!(pos, end);
    assert!(err.to_string().contains("shorter than a batch header"), "{err}");
    assert!(scan_unsealed(&file, RecoveryPolicy::Refuse).is_err());
}

#[test]
fn a_valid_batch_that_breaks_continuity_is_a_torn_tail() {
    let (mut file, end) = unsealed_sample();
    common::batch(7, &[(1, None, vec![], b"stray".to_vec())]).write_to(&mut file);
    let out = scan_unsealed(&file, RecoveryPolicy::TruncateTornTail).unwrap();
    assert_eq!(out.data_end, end);
    assert!(matches!(out.torn_tail, Some((p, DecodeError::Invalid { .. })) if p == end));
    let err = scan_unsealed(&file, RecoveryPolicy::Refuse).unwrap_err();
    assert!(err.to_string().contains("offset"), "{err}");
}

#[test]
fn a_whole_batch_with_a_valid_crc_whose_offsets_pass_u64_max_is_refused_not_truncated() {
    // A segment at u64::MAX - 1 holding a 3-record batch there: the base offset is
    // outside the CRC, so the batch's CRC still matches.
    let base = u64::MAX - 1;
    let mut file = SegmentHeader::new(common::topic(), base, 0).encode();
    let mut encoded = common::batch(0, &vec![(1, None, vec![], b"a".to_vec()); 3]).to_bytes().to_vec();
    encoded[..8].copy_from_slice(&base.to_le_bytes());
    let at = file.len() as u64;
    file.extend_from_slice(&encoded);
    for policy in [RecoveryPolicy::TruncateTornTail, RecoveryPolicy::Refuse] {
        let err = scan_unsealed(&file, policy).unwrap_err();
        assert_eq!(err.position(), at, "{policy:?}: {err}");
        assert!(err.to_string().contains("overflows"), "{err}");
    }
    // The same batch with its CRC broken is what a torn write leaves: a torn tail.
    let last = file.len() - 1;
    file[last] ^= 1;
    let out = scan_unsealed(&file, RecoveryPolicy::TruncateTornTail).unwrap();
    assert_eq!(out.data_end, at);
    assert!(matches!(out.torn_tail, Some((p, DecodeError::Crc { .. })) if p == at));
}

#[test]
fn a_corrupt_middle_batch_with_intact_batches_after_it_is_refused_not_truncated() {
    let (mut file, _) = unsealed_sample();
    let seg = SealedSegment::open(common::sample().0).unwrap();
    let second = seg.index().entries()[1];
    file[second.position as usize + 30] ^= 0x10;
    for policy in [RecoveryPolicy::TruncateTornTail, RecoveryPolicy::Refuse] {
        let err = scan_unsealed(&file, policy).unwrap_err();
        assert_eq!(err.position(), second.position, "{policy:?}: {err}");
    }
    let err = scan_unsealed(&file, RecoveryPolicy::TruncateTornTail).unwrap_err();
    assert!(err.to_string().contains("not a torn tail"), "{err}");
}

#[test]
fn a_corrupt_last_batch_is_a_torn_tail() {
    let (mut file, end) = unsealed_sample();
    let seg = SealedSegment::open(common::sample().0).unwrap();
    let (last_pos, last) = seg.batches().map(Result::unwrap).last().unwrap();
    assert_eq!(last_pos + last.encoded_len() as u64, end);
    file[last_pos as usize + 30] ^= 0x10;
    let out = scan_unsealed(&file, RecoveryPolicy::TruncateTornTail).unwrap();
    assert_eq!(out.data_end, last_pos);
    assert_eq!(out.state.next_offset(), last.base_offset());
    assert!(matches!(out.torn_tail, Some((p, DecodeError::Crc { .. })) if p == last_pos));
}

#[test]
fn a_sealed_file_is_reported_sealed_and_its_corruption_is_an_error() {
    let (bytes, _) = common::sample();
    let seg = SealedSegment::open(bytes.clone()).unwrap();
    for policy in [RecoveryPolicy::Refuse, RecoveryPolicy::TruncateTornTail] {
        let out = scan_unsealed(&bytes, policy).unwrap();
        assert_eq!(out.sealed, Some(*seg.trailer()));
        assert_eq!(out.data_end, seg.trailer().index_position);
        assert_eq!(out.state.footer_bytes(), bytes[out.data_end as usize..].to_vec());
    }
    let mut bad = bytes.to_vec();
    bad[seg.index().entries()[1].position as usize + 30] ^= 1;
    assert!(scan_unsealed(&bad, RecoveryPolicy::TruncateTornTail).is_err());
}

#[test]
fn a_file_with_only_a_header_recovers_empty_and_a_partial_header_is_an_error() {
    let header = SegmentHeader::new(common::topic(), 5, 9);
    let bytes = header.encode();
    let out = scan_unsealed(&bytes, RecoveryPolicy::Refuse).unwrap();
    assert_eq!(out.data_end, bytes.len() as u64);
    assert_eq!(out.state.next_offset(), 5);
    assert_eq!(out.state.min_timestamp(), None);
    assert!(scan_unsealed(&bytes[..bytes.len() - 1], RecoveryPolicy::TruncateTornTail).is_err());
}
