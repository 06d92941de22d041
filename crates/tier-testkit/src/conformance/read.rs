//! Checks of reads, limits, timestamp lookup and concurrency (invariants 6–8).

use futures::future::join_all;
use tier_core::{ErrorKind, Offset, OffsetRange, ReadLimit, Record, RecordBatch, Tier, TierError, TierExt};

use super::{
    Check, SuiteConfig,
    data::{append, append_in_batches, batch_of, sample_records},
};

/// `read_batches` answers the verified batches holding `from..to` exactly as appended:
/// the first holds `from` (starting before it when `from` is mid-batch), each starts
/// where the previous ended, none starts at or past `to`; `max_bytes` bounds the total
/// encoded length except for the first batch; empty at the end and for `from >= to`;
/// `Trimmed` (naming the range held) outside the range (invariant 6).
pub async fn check_read_batches(tier: &dyn Tier, caps: &SuiteConfig) {
    let check = Check::new("read_batches", tier);
    let topic = caps.fresh_topic("batches");
    let all = sample_records(0, 14, 9);
    let mut appended = Vec::new();
    for (start, end) in [(0, 4), (4, 7), (7, 12), (12, 14)] {
        let batch = batch_of(&all[start..end]);
        check.ok(4, "append", tier.append(&topic, batch.clone()).await);
        appended.push(batch);
    }
    let read = |from, to, max_bytes| tier.read_batches(&topic, from, to, max_bytes);
    let len = |i: usize| appended[i].encoded_len();
    let cases: [(Offset, Offset, usize, std::ops::Range<usize>); 13] = [
        (0, u64::MAX, usize::MAX, 0..4),
        (5, u64::MAX, usize::MAX, 1..4),
        (11, 13, usize::MAX, 2..4),
        (0, 7, usize::MAX, 0..2),
        (0, 8, usize::MAX, 0..3),
        (5, 6, usize::MAX, 1..2),
        (13, 1000, usize::MAX, 3..4),
        (0, u64::MAX, len(0) + len(1), 0..2),
        (0, u64::MAX, len(0) + len(1) - 1, 0..1),
        (0, u64::MAX, 1, 0..1),
        (6, u64::MAX, 0, 1..2),
        (14, 20, usize::MAX, 0..0),
        (3, 3, usize::MAX, 0..0),
    ];
    for (from, to, max_bytes, want) in cases {
        let what = format!("read_batches {from}..{to} with max_bytes {max_bytes}");
        let got = check.ok(6, &what, read(from, to, max_bytes).await);
        check_batches(&check, &what, from, &got, &appended[want]);
    }
    let what = "read_batches 6..4";
    check_batches(&check, what, 6, &check.ok(6, what, read(6, 4, usize::MAX).await), &[]);
    for from in [15, u64::MAX / 2] {
        let err = check.err(
            6,
            &format!("read_batches from {from} past the end"),
            &[ErrorKind::Trimmed],
            read(from, u64::MAX, usize::MAX).await,
        );
        check_trimmed(&check, &err, from, OffsetRange::new(0, 14));
    }
    let fresh = caps.fresh_topic("batches-empty");
    let what = "read_batches 0.. of an empty topic";
    let empty = check.ok(6, what, tier.read_batches(&fresh, 0, 10, usize::MAX).await);
    check_batches(&check, what, 0, &empty, &[]);
    let err = check.err(
        6,
        "read_batches from 1 of an empty topic",
        &[ErrorKind::Trimmed],
        tier.read_batches(&fresh, 1, 10, usize::MAX).await,
    );
    check_trimmed(&check, &err, 1, OffsetRange::new(0, 0));
    let high = caps.fresh_topic("batches-high");
    append(&check, 3, &high, &sample_records(500, 5, 9)).await;
    let err = check.err(
        6,
        "read_batches from 499 below the start 500",
        &[ErrorKind::Trimmed],
        tier.read_batches(&high, 499, 1000, usize::MAX).await,
    );
    check_trimmed(&check, &err, 499, OffsetRange::new(500, 505));
}

/// `got` is contiguous from the batch holding `from` and byte-for-byte `want`.
fn check_batches(check: &Check<'_>, what: &str, from: Offset, got: &[RecordBatch], want: &[RecordBatch]) {
    if let Some(first) = got.first()
        && !first.offset_range().contains(from)
    {
        check
            .fail(6, format_args!("{what}: the first batch {:?} does not hold {from}", first.offset_range()));
    }
    for pair in got.windows(2) {
        if pair[1].base_offset() != pair[0].end_offset() {
            check.fail(
                6,
                format_args!(
                    "{what}: batch {:?} follows {:?}",
                    pair[1].offset_range(),
                    pair[0].offset_range()
                ),
            );
        }
    }
    let ranges = |b: &[RecordBatch]| b.iter().map(RecordBatch::offset_range).collect::<Vec<_>>();
    check.eq(6, &format!("{what}: batches"), ranges(got), ranges(want));
    for (g, w) in got.iter().zip(want) {
        if g.to_bytes() != w.to_bytes() {
            check.fail(6, format_args!("{what}: batch {:?} differs from the one appended", g.offset_range()));
        }
    }
}

/// Reads respect `from..to`, clamp `to` at the end, return nothing at the end, and
/// answer `Trimmed` (naming the range held) outside it (invariant 6).
pub async fn check_read_bounds(tier: &dyn Tier, caps: &SuiteConfig) {
    let check = Check::new("read_bounds", tier);
    let topic = caps.fresh_topic("bounds");
    let all = sample_records(0, 10, 7);
    append(&check, 4, &topic, &all[..4]).await;
    append(&check, 4, &topic, &all[4..]).await;
    let read = |from, to| tier.read(&topic, from, to, ReadLimit::unbounded());
    check.records(6, "read 2..5", &check.ok(6, "read 2..5", read(2, 5).await), &all[2..5]);
    check.records(
        6,
        "read 3..7 across a batch boundary",
        &check.ok(6, "read 3..7", read(3, 7).await),
        &all[3..7],
    );
    check.records(
        6,
        "read 5..1000 clamps at the end",
        &check.ok(6, "read 5..1000", read(5, 1000).await),
        &all[5..],
    );
    check.records(6, "read 0..10", &check.ok(6, "read 0..10", read(0, 10).await), &all);
    check.records(6, "read 10..20 at the end", &check.ok(6, "read 10..20", read(10, 20).await), &[]);
    check.records(6, "read 3..3", &check.ok(6, "read 3..3", read(3, 3).await), &[]);
    check.records(6, "read 6..4", &check.ok(6, "read 6..4", read(6, 4).await), &[]);
    for from in [11, 12, u64::MAX / 2] {
        let err = check.err(
            6,
            &format!("read from {from} past the end"),
            &[ErrorKind::Trimmed],
            read(from, u64::MAX).await,
        );
        check_trimmed(&check, &err, from, OffsetRange::new(0, 10));
    }
    let fresh = caps.fresh_topic("bounds-empty");
    let empty =
        check.ok(6, "read 0.. of an empty topic", tier.read(&fresh, 0, 10, ReadLimit::unbounded()).await);
    check.records(6, "read of an empty topic", &empty, &[]);
    let err = check.err(
        6,
        "read from 1 of an empty topic",
        &[ErrorKind::Trimmed],
        tier.read(&fresh, 1, 10, ReadLimit::unbounded()).await,
    );
    check_trimmed(&check, &err, 1, OffsetRange::new(0, 0));

    let high = caps.fresh_topic("bounds-high");
    let upper = sample_records(500, 5, 7);
    append(&check, 3, &high, &upper).await;
    for from in [0, 499] {
        let err = check.err(
            6,
            &format!("read from {from} below the start 500"),
            &[ErrorKind::Trimmed],
            tier.read(&high, from, 1000, ReadLimit::unbounded()).await,
        );
        check_trimmed(&check, &err, from, OffsetRange::new(500, 505));
    }
}

fn check_trimmed(check: &Check<'_>, err: &TierError, from: u64, held: OffsetRange) {
    match err {
        TierError::Trimmed { requested, held: got, .. } => {
            check.eq(6, "offset named by Trimmed", *requested, from);
            check.eq(6, "range named by Trimmed", *got, held);
        }
        other => check.fail(6, format_args!("expected Trimmed, got {other}")),
    }
}

/// `max_records` and `max_bytes` bound a read; a read returns at least one record even
/// when that record alone exceeds `max_bytes` (invariant 6).
pub async fn check_read_limits(tier: &dyn Tier, caps: &SuiteConfig) {
    let check = Check::new("read_limits", tier);
    let topic = caps.fresh_topic("limits");
    let records: Vec<Record> = (0..10u64)
        .map(|offset| Record {
            offset,
            timestamp: offset as i64,
            key: None,
            headers: vec![],
            payload: bytes::Bytes::from(vec![b'a' + offset as u8; 100]),
        })
        .collect();
    append(&check, 4, &topic, &records[..6]).await;
    append(&check, 4, &topic, &records[6..]).await;
    let read = |from, limit| tier.read(&topic, from, 100, limit);
    for (from, max_records, want) in [(0, 3, 0..3), (4, 3, 4..7), (8, 5, 8..10), (0, 1, 0..1)] {
        let what = format!("read from {from} with max_records {max_records}");
        let got = check.ok(6, &what, read(from, ReadLimit::records(max_records)).await);
        check.records(6, &what, &got, &records[want]);
    }
    let bytes_limit = |max_bytes| ReadLimit { max_records: usize::MAX, max_bytes };
    for (from, max_bytes, want) in
        [(0, 250, 0..2), (0, 300, 0..3), (0, 299, 0..2), (2, 1, 2..3), (9, 1, 9..10), (5, 10_000, 5..10)]
    {
        let what = format!("read from {from} with max_bytes {max_bytes} (records of 100 bytes)");
        let got = check.ok(6, &what, read(from, bytes_limit(max_bytes)).await);
        check.records(6, &what, &got, &records[want]);
    }
    let both = ReadLimit { max_records: 2, max_bytes: 1000 };
    check.records(
        6,
        "max_records 2 with room for 10",
        &check.ok(6, "read", read(3, both).await),
        &records[3..5],
    );
}

/// Many batches of varied sizes read back whole, from and to offsets in the middle of
/// batches, and paged by small limits (invariant 6).
pub async fn check_reads_span_many_batches(tier: &dyn Tier, caps: &SuiteConfig) {
    let check = Check::new("reads_span_many_batches", tier);
    let topic = caps.fresh_topic("many");
    let sizes: Vec<usize> =
        [1, 5, 2, 9, 3, 17, 4].iter().map(|&s: &usize| s.min(caps.max_batch_records.max(1))).collect();
    let count: usize = sizes.iter().cycle().take(caps.many_batches.max(2)).sum();
    let all = sample_records(0, count, 8);
    let ends = append_in_batches(&check, &topic, &all, &sizes).await;
    check.eq(
        1,
        "range after many batches",
        check.ok(1, "range", tier.range(&topic).await),
        OffsetRange::new(0, count as u64),
    );
    let whole = check.ok(6, "read everything", tier.read(&topic, 0, u64::MAX, ReadLimit::unbounded()).await);
    check.records(6, "read everything", &whole, &all);
    let n = count as u64;
    for (from, to) in [(1, n - 1), (ends[0] + 1, ends[ends.len() / 2] + 2), (n / 3, n / 3 + 40), (n - 2, n)] {
        let to = to.min(n);
        let what = format!("read {from}..{to}");
        let got = check.ok(6, &what, tier.read(&topic, from, to, ReadLimit::unbounded()).await);
        check.records(6, &what, &got, &all[from as usize..to as usize]);
    }
    for page in [1, 7, 37] {
        let mut collected = Vec::new();
        let mut from = 0;
        while from < n {
            let what = format!("page of {page} from {from}");
            let got = check.ok(6, &what, tier.read(&topic, from, n, ReadLimit::records(page)).await);
            let want_len = page.min((n - from) as usize);
            check.eq(6, &format!("length of {what}"), got.len(), want_len);
            from += got.len() as u64;
            collected.extend(got);
        }
        check.records(6, &format!("pages of {page} joined"), &collected, &all);
    }
}

/// `offset_for_timestamp` finds the first offset whose running maximum timestamp
/// reaches `t`, with increasing and with out-of-order timestamps (invariant 7).
pub async fn check_timestamp_lookup(tier: &dyn Tier, caps: &SuiteConfig) {
    let check = Check::new("timestamp_lookup", tier);
    let lookup = |topic, t| async move {
        let what = format!("offset_for_timestamp({t})");
        check.ok(7, &what, tier.offset_for_timestamp(topic, t).await)
    };
    let empty = caps.fresh_topic("ts-empty");
    check.eq(7, "lookup on an empty topic", lookup(&empty, 0).await, None);

    // Increasing timestamps 1000 + 10 * offset, offsets 100..130 (the log starts at 100).
    let mono = caps.fresh_topic("ts-mono");
    let records = sample_records(100, 30, 9);
    append(&check, 4, &mono, &records[..10]).await;
    append(&check, 4, &mono, &records[10..11]).await;
    append(&check, 4, &mono, &records[11..]).await;
    for (t, want) in [
        (i64::MIN, Some(100)),
        (0, Some(100)),
        (2000, Some(100)),
        (2001, Some(101)),
        (2095, Some(110)),
        (2100, Some(110)),
        (2101, Some(111)),
        (2290, Some(129)),
        (2291, None),
        (i64::MAX, None),
    ] {
        check.eq(7, &format!("increasing timestamps: lookup of {t}"), lookup(&mono, t).await, want);
    }

    // Out of order: running maximum 10 50 50 50 60 60 | 60 90 | 90.
    let mixed = caps.fresh_topic("ts-mixed");
    let ts: [i64; 9] = [10, 50, 20, 30, 60, 40, 5, 90, 70];
    let mut records = sample_records(0, ts.len(), 10);
    for (r, t) in records.iter_mut().zip(ts) {
        r.timestamp = t;
    }
    append(&check, 4, &mixed, &records[..6]).await;
    append(&check, 4, &mixed, &records[6..8]).await;
    append(&check, 4, &mixed, &records[8..]).await;
    for (t, want) in [
        (1, Some(0)),
        (10, Some(0)),
        (11, Some(1)),
        (20, Some(1)),
        (50, Some(1)),
        (55, Some(4)),
        (61, Some(7)),
        (70, Some(7)),
        (90, Some(7)),
        (91, None),
    ] {
        check.eq(7, &format!("out-of-order timestamps {ts:?}: lookup of {t}"), lookup(&mixed, t).await, want);
    }
    let back =
        check.ok(6, "read of out-of-order records", tier.read(&mixed, 0, 100, ReadLimit::unbounded()).await);
    check.records(6, "read of out-of-order records", &back, &records);
}

/// Readers running while a writer appends each see a dense prefix of the log that ends
/// at a batch boundary (invariant 8).
pub async fn check_concurrent_reads_during_appends(tier: &dyn Tier, caps: &SuiteConfig) {
    let check = Check::new("concurrent_reads_during_appends", tier);
    let topic = caps.fresh_topic("concurrent");
    let sizes = [3usize, 1, 4, 1, 5, 9, 2, 6];
    let batches = 40;
    let count: usize = sizes.iter().cycle().take(batches).sum();
    let all = sample_records(0, count, 11);
    let mut boundaries = vec![0u64];
    let mut end = 0u64;
    for s in sizes.iter().cycle().take(batches) {
        end += *s as u64;
        boundaries.push(end);
    }
    let topic = &topic;
    // Yields between appends so readers interleave even with a tier whose calls never
    // suspend.
    let writer = async {
        let mut from = 0;
        for window in boundaries.windows(2) {
            let to = window[1] as usize;
            append(&check, 8, topic, &all[from..to]).await;
            from = to;
            tokio::task::yield_now().await;
        }
    };
    let reader = |id: usize| {
        let (all, boundaries, check) = (&all, &boundaries, &check);
        async move {
            let mut last_len = 0;
            let mut reads = 0;
            while last_len < count {
                let what = format!("reader {id}, read {reads}");
                let got = check.ok(8, &what, tier.read(topic, 0, u64::MAX, ReadLimit::unbounded()).await);
                check.records(8, &format!("{what}: a prefix of the log"), &got, &all[..got.len()]);
                if !boundaries.contains(&(got.len() as u64)) {
                    check.fail(8, format_args!("{what}: saw {} records, not a batch boundary", got.len()));
                }
                if got.len() < last_len {
                    check.fail(8, format_args!("{what}: saw {} records after seeing {last_len}", got.len()));
                }
                last_len = got.len();
                reads += 1;
                tokio::task::yield_now().await;
            }
        }
    };
    let readers = join_all((0..4).map(reader));
    futures::join!(writer, readers);
}
