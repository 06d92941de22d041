//! The recovery scan's policies and its handling of sealed files.

use tier_core::{
    OffsetRange,
    segment::{
        DecodeError, DroppedIntact, PAGE, RecoveryPolicy, SECTOR, SealedSegment, SegmentHeader, Unsynced,
        header_unwritten, hole_is_torn, scan_unsealed, scan_unsealed_with,
    },
};

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

/// A header and 30 batches of 3 records from offset 100; returns the file and each
/// batch's position.
fn thirty_batches() -> (Vec<u8>, Vec<u64>) {
    let mut file = SegmentHeader::new(common::topic(), 100, 0).encode();
    let mut positions = Vec::new();
    for i in 0..30u64 {
        positions.push(file.len() as u64);
        let spec = (1000 + i as i64, None, vec![], vec![i as u8 + 1; 200]);
        common::batch(100 + 3 * i, &vec![spec; 3]).write_to(&mut file);
    }
    (file, positions)
}

#[test]
fn a_hole_before_intact_batches_is_a_torn_tail_only_where_no_fsync_covered_it() {
    let (mut file, at) = thirty_batches();
    let len = file.len() as u64;
    // A zeroed sector inside batch 4 and, further on, from batch 20 to 22: unwritten
    // pages.
    let sector =
        |p: u64| (p.next_multiple_of(SECTOR) as usize, (p.next_multiple_of(SECTOR) + SECTOR) as usize);
    let (a, b) = sector(at[4]);
    assert!(b as u64 <= at[6], "the zeroed sector lies in batches 4 and 5");
    file[a..b].fill(0);
    let (c, d) = sector(at[20]);
    file[c..d].fill(0);
    assert!((d as u64) < at[24]);
    let refused = scan_unsealed(&file, RecoveryPolicy::TruncateTornTail).unwrap_err();
    assert_eq!(refused.position(), at[4]);
    assert!(refused.to_string().contains("not a torn tail"), "{refused}");

    let torn = |unsynced| scan_unsealed_with(&file, RecoveryPolicy::TruncateTornTail, unsynced);
    let out = torn(Unsynced::Anything).unwrap();
    assert_eq!(out.data_end, at[4]);
    assert_eq!(out.state.next_offset(), 112);
    assert!(matches!(out.torn_tail, Some((p, DecodeError::Crc { .. })) if p == at[4]));
    let first_intact = *at.iter().find(|&&p| p >= b as u64).unwrap();
    let dropped = DroppedIntact { position: first_intact, offsets: OffsetRange::new(112, 190) };
    assert_eq!(out.dropped_intact, Some(dropped), "past the second hole to the last batch");

    // Under `always`: torn when everything from the hole to the end fits in one write.
    let span = len - at[4];
    assert_eq!(torn(Unsynced::LastWrite(span)).unwrap().dropped_intact, Some(dropped));
    let damage = torn(Unsynced::LastWrite(span - 1)).unwrap_err();
    assert_eq!(damage.position(), at[4]);
    assert!(torn(Unsynced::Nothing).is_err());
    for unsynced in [Unsynced::Anything, Unsynced::LastWrite(span), Unsynced::Nothing] {
        let err = scan_unsealed_with(&file, RecoveryPolicy::Refuse, unsynced).unwrap_err();
        assert_eq!(err.position(), at[4], "refuse: {unsynced:?}");
    }
}

/// A page written back only in its durable first part: zeros from where the last valid
/// batch ends (inside a sector) to the page's end — fewer than a whole aligned sector —
/// then intact batches in the next pages. The shape a power cut leaves when the durable
/// point falls late in a page (simulation seed 61000709).
#[test]
fn a_hole_from_inside_a_sector_to_the_end_of_its_page_is_a_torn_tail() {
    let (mut file, at) = thirty_batches();
    // The first batch that ends less than a sector before a page boundary: the bytes
    // after it up to the boundary hold no whole aligned sector.
    let i = (1..28)
        .find(|&i| {
            let end = at[i + 1];
            let page_end = end.next_multiple_of(PAGE);
            page_end - end < SECTOR && end % SECTOR != 0 && at[i + 3] > page_end
        })
        .expect("a batch ending just before a page boundary");
    let hole = at[i + 1] as usize;
    let page_end = at[i + 1].next_multiple_of(PAGE) as usize;
    file[hole..page_end].fill(0);
    let out = scan_unsealed_with(&file, RecoveryPolicy::TruncateTornTail, Unsynced::Anything).unwrap();
    assert_eq!(out.data_end, at[i + 1], "cut where the unwritten page begins");
    assert!(out.dropped_intact.is_some(), "the intact batches after the page are dropped with the tail");
    let refused = scan_unsealed_with(&file, RecoveryPolicy::TruncateTornTail, Unsynced::Nothing).unwrap_err();
    assert_eq!(refused.position(), at[i + 1], "below the durable point it is damage");
}

#[test]
fn a_flipped_byte_before_intact_batches_is_damage_whatever_was_fsynced() {
    let (mut file, at) = thirty_batches();
    file[at[4] as usize + 40] ^= 0x10;
    let len = file.len() as u64;
    for unsynced in [Unsynced::Anything, Unsynced::LastWrite(len), Unsynced::Nothing] {
        let err = scan_unsealed_with(&file, RecoveryPolicy::TruncateTornTail, unsynced).unwrap_err();
        assert_eq!(err.position(), at[4], "{unsynced:?}: {err}");
        assert!(
            err.to_string().contains("neither a sector of it nor the rest of its page reads as zeros"),
            "{err}"
        );
    }
}

#[test]
fn a_torn_tail_with_nothing_intact_after_it_drops_no_intact_batch() {
    let (mut file, at) = thirty_batches();
    file[at[29] as usize + 40..].fill(0);
    let out = scan_unsealed_with(&file, RecoveryPolicy::TruncateTornTail, Unsynced::Nothing).unwrap();
    assert_eq!(out.data_end, at[29]);
    assert!(out.torn_tail.is_some() && out.dropped_intact.is_none());
}

#[test]
fn a_hole_is_torn_by_its_zeros_and_how_far_the_bytes_after_it_reach() {
    // (data_end, file_len, a zeroed sector, unsynced) -> torn
    let cases = [
        (100, 200, true, Unsynced::Nothing, false),
        (100, 1 << 40, true, Unsynced::Anything, true),
        (100, 1 << 40, false, Unsynced::Anything, false),
        (100, 200, true, Unsynced::LastWrite(100), true),
        (100, 201, true, Unsynced::LastWrite(100), false),
        (100, 200, false, Unsynced::LastWrite(100), false),
    ];
    for (data_end, file_len, unwritten, unsynced, torn) in cases {
        assert_eq!(
            hole_is_torn(data_end, file_len, unwritten, unsynced),
            torn,
            "{data_end} {file_len} {unwritten} {unsynced:?}"
        );
    }
}

#[test]
fn a_header_that_never_reached_the_disk_reads_as_zeros_where_its_bytes_should_be() {
    let topic = common::topic();
    let header = SegmentHeader::new(topic.clone(), 5, 1_700_000_000_000).encode();
    let unwritten = |bytes: &[u8]| header_unwritten(bytes, &topic, 5);
    assert!(unwritten(&vec![0; header.len()]), "all zeros");
    assert!(unwritten(&vec![0; 4096]), "a zeroed page");
    assert!(unwritten(&[0; 20]), "a length shorter than the header");
    let mut tail = header.clone();
    tail[20..].fill(0);
    assert!(unwritten(&tail), "a written start, the rest zeros");
    let mut head = header.clone();
    head[..16].fill(0);
    assert!(unwritten(&head), "zeros, then the rest");

    assert!(!unwritten(&[]), "nothing at all is a torn header, not zeros");
    assert!(!unwritten(&header), "a whole header was written");
    let other_base = SegmentHeader::new(topic.clone(), 0, 1).encode();
    assert!(!unwritten(&other_base), "a whole header of another base offset was written");
    let mut magic = tail.clone();
    magic[0] = b'X';
    assert!(!unwritten(&magic), "a wrong non-zero magic");
    let mut other = SegmentHeader::new(tier_core::TopicName::new("other-topic").unwrap(), 5, 1).encode();
    other[40..].fill(0);
    assert!(!unwritten(&other), "another topic's header");
    let mut created = header.clone();
    created[26] ^= 0xFF;
    assert!(!unwritten(&created), "a damaged creation time: every fixed byte is right");
    let mut flipped = tail.clone();
    flipped[17] = 9;
    assert!(!unwritten(&flipped), "a wrong base offset byte");
}
