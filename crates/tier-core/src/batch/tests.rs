use super::*;

fn sample() -> RecordBatch {
    let mut b = RecordBatchBuilder::new();
    b.push(1000, Some(b"k1"), &[Header::new("h", "v")], b"hello").unwrap();
    b.push(999, None, &[], b"").unwrap();
    b.push(1002, Some(b""), &[], b"world").unwrap();
    b.build(7).unwrap()
}

#[test]
fn round_trips_records_and_metadata() {
    let batch = sample();
    assert_eq!(batch.base_offset(), 7);
    assert_eq!(batch.record_count(), 3);
    assert_eq!(batch.offset_range(), OffsetRange::new(7, 10));
    assert_eq!(batch.first_timestamp(), 1000);
    assert_eq!(batch.max_timestamp(), 1002);
    assert_eq!(batch.min_timestamp(), 999);
    let decoded = RecordBatch::decode(&batch.to_bytes()).unwrap();
    assert_eq!(decoded, batch);
    let recs: Vec<Record> = decoded.records().collect();
    assert_eq!(recs.len(), 3);
    assert_eq!(recs[0].offset, 7);
    assert_eq!(recs[0].key.as_deref(), Some(&b"k1"[..]));
    assert_eq!(recs[0].headers, vec![Header::new("h", "v")]);
    assert_eq!(recs[0].payload, Bytes::from_static(b"hello"));
    assert_eq!(recs[1].timestamp, 999);
    assert_eq!(recs[1].key, None);
    assert_eq!(recs[2].offset, 9);
    assert_eq!(recs[2].key.as_deref(), Some(&b""[..]));
}

/// CRC-32C of the golden body, pinned so a change to the checksum is caught too.
const GOLDEN_CRC: u32 = 0xc3bf_9955;

#[test]
fn golden_bytes() {
    let mut b = RecordBatchBuilder::new();
    b.push(5, Some(b"k"), &[], b"ab").unwrap();
    let batch = b.build(0x0102).unwrap();
    let bytes = batch.to_bytes();
    #[rustfmt::skip]
    let expected: Vec<u8> = [
        &[0x02, 0x01, 0, 0, 0, 0, 0, 0][..], // base offset 0x102
        &[0x23, 0, 0, 0],                    // length 35 = 4 crc + 24 head + 7 record
        &batch.crc().to_le_bytes(),          // crc (checked below)
        &[1, 0, 0, 0],                       // record count
        &[0, 0, 0, 0],                       // attributes
        &[5, 0, 0, 0, 0, 0, 0, 0],           // first timestamp
        &[5, 0, 0, 0, 0, 0, 0, 0],           // max timestamp
        &[6, 0, 2, b'k', 0, b'a', b'b'],     // len 6, delta 0, key len+1 = 2, "k", 0 headers, "ab"
    ]
    .concat();
    assert_eq!(&bytes[..], &expected[..]);
    assert_eq!(batch.crc(), crc32c::crc32c(&expected[16..]));
    assert_eq!(batch.crc(), GOLDEN_CRC, "crc {:#010x}", batch.crc());
}

#[test]
fn rebase_is_free_and_keeps_crc_valid() {
    let batch = sample().with_base_offset(1_000_000);
    let decoded = RecordBatch::decode(&batch.to_bytes()).unwrap();
    assert_eq!(decoded.base_offset(), 1_000_000);
    assert_eq!(decoded.records().last().unwrap().offset, 1_000_002);
}

#[test]
fn every_bit_flip_in_the_body_is_detected() {
    let bytes = sample().to_bytes();
    for i in 8..bytes.len() {
        for bit in 0..8 {
            let mut copy = bytes.to_vec();
            copy[i] ^= 1 << bit;
            assert!(RecordBatch::decode(&Bytes::from(copy)).is_err(), "flip at byte {i} bit {bit}");
        }
    }
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = sample().to_bytes();
    for cut in 0..bytes.len() {
        let err = RecordBatch::decode(&bytes.slice(..cut)).unwrap_err();
        assert!(matches!(err, DecodeError::Truncated { .. }), "cut {cut}: {err}");
    }
}

#[test]
fn empty_builder_and_oversized_records_are_refused() {
    assert!(RecordBatchBuilder::new().build(0).is_err());
    let mut b = RecordBatchBuilder::new();
    let big = vec![0u8; MAX_BATCH_LEN];
    let err = b.push(0, None, &[], &big).unwrap_err();
    assert!(err.to_string().contains("does not fit"), "{err}");
    assert!(b.is_empty());
}

#[test]
fn varints_round_trip_and_reject_overflow() {
    for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
        let mut buf = Vec::new();
        put_varint(&mut buf, v);
        assert_eq!(buf.len(), varint_len(v));
        assert_eq!(get_varint(&buf, 0).unwrap(), (v, buf.len()));
    }
    assert!(get_varint(&[0xff; 10], 0).is_err());
    assert!(get_varint(&[0x80; 11], 0).is_err());
    for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
        assert_eq!(unzigzag(zigzag(v)), v);
    }
}

/// `sample()`'s encoding (3 records) with its base offset patched to `base`: the base
/// offset is outside the CRC, so a crafted file can carry any value there.
fn sample_bytes_at(base: Offset) -> Bytes {
    let mut bytes = sample().to_bytes().to_vec();
    bytes[..8].copy_from_slice(&base.to_le_bytes());
    Bytes::from(bytes)
}

#[test]
fn a_batch_whose_offsets_overflow_u64_is_corruption() {
    for base in [u64::MAX - 2, u64::MAX - 1, u64::MAX] {
        let err = RecordBatch::decode(&sample_bytes_at(base)).unwrap_err();
        assert!(matches!(err, DecodeError::Invalid { position: 0, .. }), "base {base}: {err}");
        assert!(err.to_string().contains("overflow"), "{err}");
        let tier_err = err.into_tier_error(ErrorContext::default());
        assert_eq!(tier_err.kind(), crate::ErrorKind::Corruption);
    }
    // The last offset a batch can hold is u64::MAX - 1: its end is u64::MAX.
    let last = RecordBatch::decode(&sample_bytes_at(u64::MAX - 3)).unwrap();
    assert_eq!(last.offset_range(), OffsetRange::new(u64::MAX - 3, u64::MAX));
    assert_eq!(last.records().last().unwrap().offset, u64::MAX - 1);
}

#[test]
fn builders_and_rebasing_refuse_offsets_past_u64_max() {
    let mut b = RecordBatchBuilder::new();
    b.push(1, None, &[], b"a").unwrap();
    b.push(2, None, &[], b"b").unwrap();
    let err = b.build(u64::MAX - 1).unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{err}");
    let err = sample().try_with_base_offset(u64::MAX - 2).unwrap_err();
    assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{err}");
    let fits = sample().try_with_base_offset(u64::MAX - 3).unwrap();
    assert_eq!(fits.end_offset(), u64::MAX);
    assert_eq!(sample().checked_end_offset(), Some(10));
    // The unchecked rebase cannot wrap: the end saturates, no record offset wraps, and
    // a segment writer refuses the batch.
    let wrapped = sample().with_base_offset(u64::MAX - 1);
    assert_eq!(wrapped.checked_end_offset(), None);
    assert_eq!(wrapped.end_offset(), u64::MAX);
    assert!(wrapped.records().all(|r| r.offset >= u64::MAX - 1));
}

#[test]
fn a_built_batch_owns_its_bytes_and_a_decoded_one_until_compacted() {
    let built = sample();
    assert!(built.owns_buffer());
    let body = built.body().as_ptr();
    let same = built.clone().compacted();
    assert_eq!(same.body().as_ptr(), body, "compacting a batch that owns its bytes copies nothing");

    // A batch decoded from a buffer holding more than it.
    let mut buf = built.to_bytes().to_vec();
    buf.extend_from_slice(&[0; 100]);
    let buf = Bytes::from(buf);
    let decoded = RecordBatch::decode(&buf).unwrap();
    assert!(!decoded.owns_buffer(), "a decoded batch is a slice of the buffer");
    assert_eq!(decoded.body().as_ptr(), buf[BATCH_PREFIX_LEN..].as_ptr());
    let compacted = decoded.clone().compacted();
    assert!(compacted.owns_buffer());
    assert_ne!(compacted.body().as_ptr(), decoded.body().as_ptr(), "the body was copied out of the buffer");
    assert_eq!(compacted.body().len(), built.body().len());
    assert_eq!(compacted, decoded, "== compares the batches, not where their bytes live");
    assert_eq!(compacted, built);
    assert_eq!(compacted.records().collect::<Vec<_>>(), built.records().collect::<Vec<_>>());
}

#[test]
fn the_builder_counts_payload_bytes_only() {
    let mut b = RecordBatchBuilder::new();
    assert_eq!(b.payload_bytes(), 0);
    b.push(1, Some(b"key"), &[Header::new("h", "value")], b"hello").unwrap();
    b.push(2, None, &[], b"").unwrap();
    b.push(3, None, &[], b"abc").unwrap();
    assert_eq!(b.payload_bytes(), 8);
    // A refused record changes nothing.
    assert!(b.push(4, None, &[], &vec![0u8; MAX_BATCH_LEN]).is_err());
    assert_eq!(b.payload_bytes(), 8);
}
