//! A time-boxed fuzz harness for every decoder of the batch and segment formats.
//!
//! Feeds random byte strings and mutations of valid segments (bit flips, truncations,
//! splices, random length fields, base offsets moved near `u64::MAX`, with and without
//! fixed-up CRCs so the checks behind the CRCs are reached too) to every decoder,
//! asserting none panics and none makes an allocation the input cannot justify. Runs for `TIERLOG_FUZZ_SECS` seconds (default 2;
//! `cargo xtask fuzz` runs it for 60 in release mode). The seed is printed; set
//! `TIERLOG_FUZZ_SEED` to replay one.

// A counting global allocator needs `unsafe impl GlobalAlloc`; it only forwards to the
// system allocator.
#![allow(unsafe_code)]
// Test helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

#[path = "common/mod.rs"]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::XorShift;
use tier_core::batch::BatchPrefix;
use tier_core::segment::{
    IndexEntry, RangedSegment, RecoveryPolicy, SealedSegment, SegmentHeader, SegmentIndex, TRAILER_LEN,
    Trailer, scan_unsealed,
};
use tier_core::{ReadLimit, RecordBatch};

/// Forwards to the system allocator, remembering the largest single request.
struct MaxAlloc;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

/// How many inputs opened as sealed segments, verified, and scanned as unsealed: shows
/// the mutations reach past the first checks.
static OPENED: AtomicUsize = AtomicUsize::new(0);
static VERIFIED: AtomicUsize = AtomicUsize::new(0);
static SCANNED: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for MaxAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: MaxAlloc = MaxAlloc;

fn corpus() -> Vec<Vec<u8>> {
    let (sample, _) = common::sample();
    let (every_batch, _) = common::build(0, &common::sample_batches(), 0);
    let (one, _) = common::build(u64::MAX / 2, &[vec![(i64::MIN, None, vec![], vec![])]], 64);
    let (empty, _) = common::build(9, &[], 64);
    // A valid segment whose last offset is u64::MAX - 1: the edge of the offset space.
    let top = u64::MAX - 13;
    let (edge, edge_records) = common::build(top, &common::sample_batches(), common::SAMPLE_INTERVAL);
    assert_eq!(edge_records.last().unwrap().offset, u64::MAX - 1);
    let unsealed =
        sample[..SealedSegment::open(sample.clone()).unwrap().trailer().index_position as usize].to_vec();
    vec![sample.to_vec(), every_batch.to_vec(), one.to_vec(), empty.to_vec(), unsealed, edge.to_vec()]
}

/// Offsets near the top of the offset space, where `base + count` overflows.
fn near_max(rng: &mut XorShift) -> u64 {
    u64::MAX - rng.below(64) as u64
}

/// Moves the segment's base offset (header, first batch, trailer) and every batch's
/// base offset near `u64::MAX`, keeping them consistent with each other so decoding
/// gets past the continuity checks to the offset arithmetic.
fn rebase_near_max(rng: &mut XorShift, b: &mut [u8]) {
    let shift = near_max(rng);
    let mut add = |at: usize| {
        if let Some(field) = b.get_mut(at..at + 8) {
            let v = u64::from_le_bytes(field.try_into().unwrap()).wrapping_add(shift);
            field.copy_from_slice(&v.to_le_bytes());
        }
    };
    // Header base offset.
    add(16);
    let len = b.len();
    if len < 34 {
        return;
    }
    let header_len = 38 + u16::from_le_bytes([b[32], b[33]]) as usize;
    let mut data_end = len;
    if len >= header_len + TRAILER_LEN {
        let t = len - TRAILER_LEN;
        let index_pos = u64::from_le_bytes(b[t..t + 8].try_into().unwrap());
        if index_pos <= t as u64 && index_pos >= header_len as u64 {
            data_end = index_pos as usize;
            // Trailer base and end offsets, then each index entry's offset.
            for at in [t + 8, t + 16] {
                let v = u64::from_le_bytes(b[at..at + 8].try_into().unwrap()).wrapping_add(shift);
                b[at..at + 8].copy_from_slice(&v.to_le_bytes());
            }
            let mut e = data_end;
            while e + 24 <= t {
                let v = u64::from_le_bytes(b[e..e + 8].try_into().unwrap()).wrapping_add(shift);
                b[e..e + 8].copy_from_slice(&v.to_le_bytes());
                e += 24;
            }
        }
    }
    let mut pos = header_len;
    while pos + 16 <= data_end {
        let Ok(prefix) = BatchPrefix::parse(&b[pos..]) else { break };
        let v = u64::from_le_bytes(b[pos..pos + 8].try_into().unwrap()).wrapping_add(shift);
        b[pos..pos + 8].copy_from_slice(&v.to_le_bytes());
        pos += prefix.encoded_len;
    }
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    if at + 4 <= buf.len() {
        buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
}

/// Recomputes whatever CRCs the (mutated) bytes still let us find, so decoding gets
/// past them and exercises the checks behind.
fn fix_crcs(buf: &mut [u8]) {
    let len = buf.len();
    let mut header_len = 0;
    if len >= 34 {
        let n = u16::from_le_bytes([buf[32], buf[33]]) as usize;
        if 38 + n <= len {
            header_len = 38 + n;
            let crc = crc32c::crc32c(&buf[..34 + n]);
            put_u32(buf, 34 + n, crc);
        }
    }
    let mut data_end = len;
    if len >= TRAILER_LEN {
        let t = len - TRAILER_LEN;
        let index_pos = u64::from_le_bytes(buf[t..t + 8].try_into().unwrap());
        let count = u32::from_le_bytes(buf[t + 60..t + 64].try_into().unwrap()) as u64;
        if let Some(index_end) = index_pos.checked_add(count * 24)
            && index_end <= t as u64
        {
            data_end = index_pos as usize;
            let crc = crc32c::crc32c(&buf[index_pos as usize..index_end as usize]);
            put_u32(buf, t + 68, crc);
        }
        let crc = crc32c::crc32c(&buf[t..t + 76]);
        put_u32(buf, t + 76, crc);
    }
    let mut pos = header_len.max(1);
    while header_len > 0 && pos + 16 <= data_end {
        let Ok(prefix) = BatchPrefix::parse(&buf[pos..]) else { break };
        if pos + prefix.encoded_len > data_end {
            break;
        }
        let crc = crc32c::crc32c(&buf[pos + 16..pos + prefix.encoded_len]);
        put_u32(buf, pos + 12, crc);
        pos += prefix.encoded_len;
    }
}

fn mutate(rng: &mut XorShift, corpus: &[Vec<u8>]) -> Vec<u8> {
    if rng.below(10) == 0 {
        let len = rng.below(600);
        return (0..len).map(|_| rng.next_u64() as u8).collect();
    }
    let mut b = corpus[rng.below(corpus.len())].clone();
    for _ in 0..1 + rng.below(3) {
        if b.is_empty() {
            break;
        }
        match rng.below(8) {
            0 => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            1 => b.truncate(rng.below(b.len() + 1)),
            2 => {
                // Splice a chunk of another corpus entry in at a random place.
                let other = &corpus[rng.below(corpus.len())];
                let from = rng.below(other.len());
                let n = rng.below(other.len() - from + 1);
                let at = rng.below(b.len() + 1);
                b.splice(at..at, other[from..from + n].iter().copied());
            }
            3 => {
                let from = rng.below(b.len());
                let to = from + rng.below(b.len() - from + 1);
                b.drain(from..to);
            }
            6 => rebase_near_max(rng, &mut b),
            7 => {
                // A base offset near u64::MAX in one offset field: the header's, a
                // batch's (the segment's first batch, or anywhere), the trailer's.
                let len = b.len();
                let header_len =
                    if len >= 34 { 38 + u16::from_le_bytes([b[32], b[33]]) as usize } else { 16 };
                let t = len.saturating_sub(TRAILER_LEN);
                let at = [16, header_len, rng.below(len), t + 8, t + 16][rng.below(5)];
                let v = near_max(rng).to_le_bytes();
                let end = (at + 8).min(len);
                if at < end {
                    b[at..end].copy_from_slice(&v[..end - at]);
                }
            }
            _ => {
                // A random "length" (or offset, position, count) field.
                let width = [2, 4, 8][rng.below(3)];
                let at = rng.below(b.len());
                let interesting = [
                    0,
                    1,
                    0x7f,
                    0xff,
                    b.len() as u64,
                    u64::MAX,
                    u64::MAX - 1,
                    u64::MAX - 4,
                    u64::from(u32::MAX),
                    rng.next_u64(),
                ];
                let v =
                    interesting[rng.below(interesting.len())].wrapping_add(rng.below(3) as u64).to_le_bytes();
                let end = (at + width).min(b.len());
                b[at..end].copy_from_slice(&v[..end - at]);
            }
        }
    }
    if rng.below(2) == 0 {
        fix_crcs(&mut b);
    }
    b
}

/// Runs every decoder on `input`.
fn decode_everything(input: &[u8], rt: &tokio::runtime::Runtime) {
    let bytes = Bytes::copy_from_slice(input);
    LARGEST.store(0, Ordering::Relaxed);
    let _ = SegmentHeader::decode(input);
    let _ = Trailer::decode(input);
    let _ = IndexEntry::decode(input);
    let _ = BatchPrefix::parse(input);
    let _ = RecordBatch::decode(&bytes);
    for start in [34usize, 40, 44, 48, 60] {
        if start <= bytes.len() {
            let _ = RecordBatch::decode(&bytes.slice(start..));
        }
    }
    if let Ok(trailer) = Trailer::decode(input) {
        let end = input.len() - TRAILER_LEN;
        let _ = SegmentIndex::decode(&input[end.saturating_sub(trailer.index_len() as usize)..end], &trailer);
        let _ = SegmentIndex::decode(input, &trailer);
    }
    if let Ok(seg) = SealedSegment::open(bytes.clone()) {
        let all = seg.read(0, u64::MAX, ReadLimit::unbounded());
        OPENED.fetch_add(1, Ordering::Relaxed);
        let verified = seg.verify();
        if verified.is_ok() {
            VERIFIED.fetch_add(1, Ordering::Relaxed);
            let all = all.expect("a verified segment reads");
            assert_eq!(all.len() as u64, seg.trailer().record_count);
        }
        for t in [i64::MIN, -1, 0, 1000, 1010, 1050, i64::MAX] {
            let _ = seg.offset_for_timestamp(t);
        }
        let _ = seg.read(seg.offset_range().start.saturating_add(3), u64::MAX, ReadLimit::records(2));
        for e in seg.index().entries().iter().take(4) {
            let _ = seg.batches_from(e.position).map(|it| it.count());
            let _ = seg.batches_from(e.position + 1).map(|it| it.count());
        }
    }
    for policy in [RecoveryPolicy::TruncateTornTail, RecoveryPolicy::Refuse] {
        if let Ok(out) = scan_unsealed(input, policy) {
            SCANNED.fetch_add(1, Ordering::Relaxed);
            assert!(out.data_end <= input.len() as u64);
            let _ = out.state.footer_bytes();
        }
    }
    rt.block_on(async {
        if let Ok(seg) = RangedSegment::open(bytes.clone(), bytes.len() as u64, 64).await {
            let _ = seg.read(0, u64::MAX, ReadLimit::unbounded()).await;
            let _ = seg.offset_for_timestamp(1012).await;
        }
    });
    let largest = LARGEST.load(Ordering::Relaxed);
    let bound = 64 * input.len() + (1 << 20);
    assert!(largest <= bound, "an allocation of {largest} bytes for {} bytes of input", input.len());
}

#[test]
fn decoders_survive_random_and_mutated_input() {
    let secs: f64 = std::env::var("TIERLOG_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let seed: u64 =
        std::env::var("TIERLOG_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
    println!("fuzz_decoders: seed {seed} (replay with TIERLOG_FUZZ_SEED={seed}), {secs} s");
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let corpus = corpus();
    let mut rng = XorShift::new(seed);
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut inputs = 0u64;
    for c in &corpus {
        decode_everything(c, &rt);
        inputs += 1;
    }
    while Instant::now() < deadline {
        let input = mutate(&mut rng, &corpus);
        decode_everything(&input, &rt);
        inputs += 1;
    }
    println!(
        "fuzz_decoders: ran {inputs} inputs (seed {seed}): {} opened as sealed, {} verified, {} scanned",
        OPENED.load(Ordering::Relaxed),
        VERIFIED.load(Ordering::Relaxed),
        SCANNED.load(Ordering::Relaxed)
    );
    assert!(inputs > corpus.len() as u64);
}
