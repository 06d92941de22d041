//! Deterministic records for the checks.

use bytes::Bytes;
use tier_core::{Header, Offset, Record, RecordBatch, TopicName};

use super::Check;

/// `count` records with offsets `base..`, timestamps `1000 + 10 * offset`, and shapes
/// that vary with the offset and `seed`: no key, an empty key, a short key; zero to
/// three headers (some with empty names or values); empty, small and 4 KiB payloads.
pub fn sample_records(base: Offset, count: usize, seed: u64) -> Vec<Record> {
    (0..count as u64)
        .map(|i| {
            let offset = base + i;
            let v = offset.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seed;
            let key = match v % 3 {
                0 => None,
                1 => Some(Bytes::new()),
                _ => Some(Bytes::from(format!("key-{offset}"))),
            };
            let headers = (0..(v >> 8) % 4)
                .map(|h| match h {
                    1 => Header::new(Bytes::new(), Bytes::from(format!("v{offset}"))),
                    2 => Header::new(format!("h{offset}"), Bytes::new()),
                    _ => Header::new(format!("name-{h}"), format!("value-{offset}-{h}")),
                })
                .collect();
            let payload = match (v >> 16) % 5 {
                0 => Bytes::new(),
                4 => Bytes::from(vec![(offset % 251) as u8; 4096]),
                n => Bytes::from(format!("payload {offset} {}", "x".repeat(n as usize * 7))),
            };
            Record { offset, timestamp: 1000 + 10 * offset as i64, key, headers, payload }
        })
        .collect()
}

/// The batch holding `records`, based at the first record's offset.
///
/// # Panics
/// If `records` is empty or does not fit in one batch.
pub fn batch_of(records: &[Record]) -> RecordBatch {
    let base = records.first().map_or(0, |r| r.offset);
    RecordBatch::from_records(base, records).expect("test records fit in one batch")
}

/// Appends `records` as one batch; a failure fails the check under `invariant`.
pub(crate) async fn append(check: &Check<'_>, invariant: u8, topic: &TopicName, records: &[Record]) {
    let what = format!("append of {} records at {}", records.len(), records.first().map_or(0, |r| r.offset));
    check.ok(invariant, &what, check.tier.append(topic, batch_of(records)).await);
}

/// Appends `records` in batches whose sizes cycle through `sizes`; returns the batch
/// boundaries (the end offset after each batch).
pub(crate) async fn append_in_batches(
    check: &Check<'_>,
    topic: &TopicName,
    records: &[Record],
    sizes: &[usize],
) -> Vec<Offset> {
    let mut ends = Vec::new();
    let mut rest = records;
    for &size in sizes.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (batch, tail) = rest.split_at(size.clamp(1, rest.len()));
        append(check, 4, topic, batch).await;
        ends.push(batch[batch.len() - 1].offset + 1);
        rest = tail;
    }
    ends
}
