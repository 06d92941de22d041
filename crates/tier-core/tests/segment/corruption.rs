//! Every single-bit flip is detected; every truncation is handled without panicking.

use bytes::Bytes;
use tier_core::ReadLimit;
use tier_core::segment::{RecoveryPolicy, SealedSegment, scan_unsealed};

use crate::common;

#[test]
fn every_single_bit_flip_is_detected_by_open_or_a_full_read() {
    let (bytes, model) = common::sample();
    let seg = SealedSegment::open(bytes.clone()).unwrap();
    assert_eq!(seg.read(0, u64::MAX, ReadLimit::unbounded()).unwrap(), model);
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut b = bytes.to_vec();
            b[i] ^= 1 << bit;
            let Ok(seg) = SealedSegment::open(Bytes::from(b)) else { continue };
            let read = seg.read(0, u64::MAX, ReadLimit::unbounded());
            assert!(read.is_err(), "flip of bit {bit} of byte {i} went unnoticed: {read:?}");
            assert!(seg.verify().is_err(), "verify missed bit {bit} of byte {i}");
        }
    }
}

/// (position, end offset) at the end of each batch of the sample.
fn batch_ends(seg: &SealedSegment) -> Vec<(u64, u64)> {
    seg.batches().map(|b| b.unwrap()).map(|(pos, b)| (pos + b.encoded_len() as u64, b.end_offset())).collect()
}

#[test]
fn truncation_at_every_byte_fails_open_and_recovers_the_last_complete_batch() {
    let (bytes, _) = common::sample();
    let seg = SealedSegment::open(bytes.clone()).unwrap();
    let header_len = seg.trailer().header_len as usize;
    let ends = batch_ends(&seg);
    let batches: Vec<_> = seg.batches().map(|b| b.unwrap().1).collect();
    for cut in 0..bytes.len() {
        let part = &bytes[..cut];
        assert!(SealedSegment::open(Bytes::copy_from_slice(part)).is_err(), "open accepted a cut at {cut}");
        let scanned = scan_unsealed(part, RecoveryPolicy::TruncateTornTail);
        if cut < header_len {
            assert!(scanned.is_err(), "cut {cut} inside the header");
            continue;
        }
        let out = scanned.unwrap();
        assert!(out.sealed.is_none());
        let complete = ends.iter().filter(|&&(end, _)| end <= cut as u64).count();
        let (data_end, next) = if complete == 0 { (header_len as u64, 100) } else { ends[complete - 1] };
        assert_eq!(out.data_end, data_end, "cut {cut}");
        assert_eq!(out.state.next_offset(), next, "cut {cut}");
        assert_eq!(out.state.size(), data_end);
        assert_eq!(
            out.torn_tail.as_ref().map(|t| t.0),
            (data_end != cut as u64).then_some(data_end),
            "cut {cut}"
        );
        let refused = scan_unsealed(part, RecoveryPolicy::Refuse);
        assert_eq!(refused.is_err(), data_end != cut as u64, "cut {cut}");

        // Continuing from the recovered state and sealing gives the original segment.
        let mut state = out.state;
        let mut rebuilt = part[..data_end as usize].to_vec();
        for b in &batches[complete..] {
            state.note_batch(b, rebuilt.len() as u64).unwrap();
            b.write_to(&mut rebuilt);
        }
        rebuilt.extend_from_slice(&state.footer_bytes());
        assert_eq!(rebuilt, bytes.to_vec(), "cut {cut}");
    }
}
