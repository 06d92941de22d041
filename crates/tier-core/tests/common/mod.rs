//! Helpers shared by the segment test binaries: building segments and their models.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use bytes::Bytes;
use tier_core::segment::{SegmentHeader, SegmentWriter};
use tier_core::{Header, Offset, Record, RecordBatch, RecordBatchBuilder, Timestamp, TopicName};

/// One record to put in a test batch: timestamp, key, headers, payload.
pub type Spec = (Timestamp, Option<Vec<u8>>, Vec<(Vec<u8>, Vec<u8>)>, Vec<u8>);

pub fn topic() -> TopicName {
    TopicName::new("orders.v1").unwrap()
}

/// A batch of `specs` starting at `base`.
pub fn batch(base: Offset, specs: &[Spec]) -> RecordBatch {
    let mut b = RecordBatchBuilder::new();
    for (ts, key, headers, payload) in specs {
        let headers: Vec<Header> = headers
            .iter()
            .map(|(n, v)| Header::new(Bytes::from(n.clone()), Bytes::from(v.clone())))
            .collect();
        b.push(*ts, key.as_deref(), &headers, payload).unwrap();
    }
    b.build(base).unwrap()
}

/// A sealed segment holding `batches` (lists of record specs) from `base`, with
/// `interval` bytes between index entries, and the records it must return.
pub fn build(base: Offset, batches: &[Vec<Spec>], interval: u32) -> (Bytes, Vec<Record>) {
    let header = SegmentHeader::new(topic(), base, 1_700_000_000_000).with_index_interval_bytes(interval);
    let mut w = SegmentWriter::new(Vec::new(), &header).unwrap();
    let mut next = base;
    let mut model = Vec::new();
    for specs in batches {
        let b = batch(next, specs);
        model.extend(b.records());
        next = b.end_offset();
        w.append(&b).unwrap();
    }
    (Bytes::from(w.seal().unwrap()), model)
}

/// The small sample segment: 6 batches, keys, headers, empty payloads, out-of-order
/// timestamps, an index entry every 120 bytes (so several intervals).
pub fn sample_batches() -> Vec<Vec<Spec>> {
    let rec = |ts: Timestamp, payload: &str| -> Spec { (ts, None, vec![], payload.as_bytes().to_vec()) };
    vec![
        vec![
            (1000, Some(b"k0".to_vec()), vec![(b"h".to_vec(), b"v".to_vec())], b"first".to_vec()),
            rec(1005, ""),
        ],
        vec![rec(1003, "late one"), rec(1010, "ten"), rec(1008, "eight")],
        vec![rec(1020, "twenty")],
        vec![rec(1015, "out of order"), rec(1030, "thirty"), rec(1025, ""), rec(1040, "forty")],
        vec![(1050, Some(Vec::new()), vec![], b"empty key".to_vec())],
        vec![rec(1045, "x"), rec(1060, "y")],
    ]
}

pub const SAMPLE_BASE: Offset = 100;
pub const SAMPLE_INTERVAL: u32 = 120;

pub fn sample() -> (Bytes, Vec<Record>) {
    build(SAMPLE_BASE, &sample_batches(), SAMPLE_INTERVAL)
}

/// Brute force: the first offset whose running maximum timestamp is >= t.
pub fn model_offset_for_timestamp(model: &[Record], t: Timestamp) -> Option<Offset> {
    let mut running = Timestamp::MIN;
    for r in model {
        running = running.max(r.timestamp);
        if running >= t {
            return Some(r.offset);
        }
    }
    None
}

/// A tiny xorshift64* generator, seeded, for fuzzing and mutation tests.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform-ish in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}
