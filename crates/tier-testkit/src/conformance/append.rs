//! Checks of appends, ranges and errors (invariants 1–5 and 9).

use bytes::Bytes;
use tier_core::{ErrorKind, Header, OffsetRange, ReadLimit, Record, Tier, TierExt, TopicName};

use super::{
    Check, SuiteConfig,
    data::{append, batch_of, sample_records},
};

async fn read_all(check: &Check<'_>, topic: &TopicName, from: u64) -> Vec<Record> {
    check.ok(6, "unbounded read", check.tier.read(topic, from, u64::MAX, ReadLimit::unbounded()).await)
}

async fn range(check: &Check<'_>, topic: &TopicName) -> OffsetRange {
    check.ok(1, "range", check.tier.range(topic).await)
}

/// Records come back exactly as appended, every field: no key vs an empty key,
/// headers (empty names and values, order), empty and large payloads, negative and
/// out-of-order timestamps (invariants 4, 6).
pub async fn check_append_read_round_trip(tier: &dyn Tier, caps: &SuiteConfig) {
    let check = Check::new("append_read_round_trip", tier);
    let topic = caps.fresh_topic("roundtrip");
    let rec = |offset, timestamp, key: Option<&'static [u8]>, headers: Vec<Header>, payload: Bytes| Record {
        offset,
        timestamp,
        key: key.map(Bytes::from_static),
        headers,
        payload,
    };
    let first = vec![
        rec(0, 1_700_000_000_000, None, vec![], Bytes::from_static(b"plain")),
        rec(1, 1_700_000_000_005, Some(b""), vec![], Bytes::from_static(b"empty key")),
        rec(2, -5, Some(b"k"), vec![Header::new("a", "1"), Header::new("a", "2")], Bytes::new()),
        rec(3, 0, None, vec![Header::new("", ""), Header::new("n", "")], Bytes::from(vec![7u8; 100_000])),
    ];
    append(&check, 4, &topic, &first).await;
    let second = vec![rec(
        4,
        42,
        Some(b"\x00\xff"),
        vec![Header::new(&b"\x00"[..], &b"\xff"[..])],
        Bytes::from_static(b"\x00"),
    )];
    append(&check, 4, &topic, &second).await;
    let want: Vec<Record> = first.iter().chain(&second).cloned().collect();
    check.records(6, "read of everything appended", &read_all(&check, &topic, 0).await, &want);
    let sampled = sample_records(5, caps.max_batch_records.clamp(1, 64), 1);
    append(&check, 4, &topic, &sampled).await;
    check.records(6, "read of sampled records", &read_all(&check, &topic, 5).await, &sampled);
}

/// A new topic's range is `0..0` and grows by each batch's size (invariants 1–3).
pub async fn check_range_after_appends(tier: &dyn Tier, caps: &SuiteConfig) {
    let check = Check::new("range_after_appends", tier);
    let topic = caps.fresh_topic("range");
    check.eq(1, "range of a topic never written", range(&check, &topic).await, OffsetRange::new(0, 0));
    let mut end = 0;
    for size in [1, 3, caps.max_batch_records.max(1), 2] {
        append(&check, 3, &topic, &sample_records(end, size, 2)).await;
        end += size as u64;
        check.eq(
            2,
            &format!("range after a batch of {size}"),
            range(&check, &topic).await,
            OffsetRange::new(0, end),
        );
    }
    let got = read_all(&check, &topic, 0).await;
    check.eq(1, "records held", got.iter().map(|r| r.offset).collect(), (0..end).collect::<Vec<_>>());
}

/// An append that does not continue the log is `InvalidInput` and writes nothing
/// (invariant 3).
pub async fn check_wrong_base_offset_is_rejected(tier: &dyn Tier, caps: &SuiteConfig) {
    let check = Check::new("wrong_base_offset_is_rejected", tier);
    let topic = caps.fresh_topic("wrongbase");
    let held = sample_records(0, 5, 3);
    append(&check, 3, &topic, &held).await;
    for base in [6, 7, 1000] {
        let gap = batch_of(&sample_records(base, 2, 3));
        check.err(
            3,
            &format!("append at {base} past end 5"),
            &[ErrorKind::InvalidInput],
            tier.append(&topic, gap).await,
        );
    }
    // Below the end: a conflict with held offsets. Tiers with idempotent appends must
    // fence it (checked elsewhere); any tier must refuse it.
    let overlap = batch_of(&sample_records(3, 4, 99));
    check.err(
        3,
        "append at 3 below end 5",
        &[ErrorKind::InvalidInput, ErrorKind::Fenced],
        tier.append(&topic, overlap).await,
    );
    check.eq(3, "range after rejected appends", range(&check, &topic).await, OffsetRange::new(0, 5));
    check.records(3, "records after rejected appends", &read_all(&check, &topic, 0).await, &held);
    append(&check, 3, &topic, &sample_records(5, 1, 3)).await;
    check.eq(3, "range after a correct append", range(&check, &topic).await, OffsetRange::new(0, 6));
}

/// An empty tier takes over a log at any base offset; its range then starts there
/// (invariant 3), and reads below it are `Trimmed` (invariant 6).
pub async fn check_first_append_at_nonzero_base(tier: &dyn Tier, caps: &SuiteConfig) {
    let check = Check::new("first_append_at_nonzero_base", tier);
    let topic = caps.fresh_topic("nonzero");
    let first = sample_records(1000, 4, 4);
    append(&check, 3, &topic, &first).await;
    check.eq(
        3,
        "range after the first append at 1000",
        range(&check, &topic).await,
        OffsetRange::new(1000, 1004),
    );
    check.records(6, "read from 1000", &read_all(&check, &topic, 1000).await, &first);
    let err = check.err(
        6,
        "read from 0",
        &[ErrorKind::Trimmed],
        tier.read(&topic, 0, 2000, ReadLimit::unbounded()).await,
    );
    if let tier_core::TierError::Trimmed { held, .. } = &err {
        check.eq(6, "range named by Trimmed", *held, OffsetRange::new(1000, 1004));
    }
    check.err(
        3,
        "append at 0 below the start",
        &[ErrorKind::InvalidInput, ErrorKind::Fenced],
        tier.append(&topic, batch_of(&sample_records(0, 1, 4))).await,
    );
    append(&check, 3, &topic, &sample_records(1004, 2, 4)).await;
    check.eq(3, "range after the second append", range(&check, &topic).await, OffsetRange::new(1000, 1006));
}

/// Re-appending an identical batch is `Ok` and stores nothing twice; a different batch
/// at a held offset is `Fenced` (invariant 5), for a tier whose
/// [`capabilities`](Tier::capabilities) report `idempotent_append`. Without it, both
/// must fail and write nothing.
pub async fn check_idempotent_and_fenced_append(tier: &dyn Tier, caps: &SuiteConfig) {
    let check = Check::new("idempotent_and_fenced_append", tier);
    let topic = caps.fresh_topic("idempotent");
    let a = sample_records(0, 3, 5);
    let b = sample_records(3, 4, 5);
    append(&check, 5, &topic, &a).await;
    append(&check, 5, &topic, &b).await;
    let want: Vec<Record> = a.iter().chain(&b).cloned().collect();
    let conflicting = |base, seed| batch_of(&sample_records(base, 2, seed));
    if tier.capabilities().idempotent_append {
        check.ok(5, "re-append of the identical batch at 0", tier.append(&topic, batch_of(&a)).await);
        check.ok(5, "re-append of the identical batch at 3", tier.append(&topic, batch_of(&b)).await);
        for (base, what) in [(0, "at 0"), (3, "at 3"), (4, "inside the batch at 3")] {
            check.err(
                5,
                &format!("different batch {what}"),
                &[ErrorKind::Fenced],
                tier.append(&topic, conflicting(base, 77)).await,
            );
        }
    } else {
        for base in [0, 3, 4] {
            check.err(
                5,
                &format!("conflicting append at {base}"),
                &[ErrorKind::Fenced, ErrorKind::InvalidInput],
                tier.append(&topic, conflicting(base, 77)).await,
            );
        }
    }
    check.eq(5, "range after re-appends and conflicts", range(&check, &topic).await, OffsetRange::new(0, 7));
    check.records(5, "records after re-appends and conflicts", &read_all(&check, &topic, 0).await, &want);
}

/// Errors name the tier and the topic in their context (invariant 9).
pub async fn check_errors_carry_context(tier: &dyn Tier, caps: &SuiteConfig) {
    let check = Check::new("errors_carry_context", tier);
    let topic = caps.fresh_topic("errctx");
    append(&check, 9, &topic, &sample_records(0, 3, 6)).await;
    let errors = [
        check.err(
            9,
            "read past the end",
            &[ErrorKind::Trimmed],
            tier.read(&topic, 4, 10, ReadLimit::unbounded()).await,
        ),
        check.err(
            9,
            "append past the end",
            &[ErrorKind::InvalidInput],
            tier.append(&topic, batch_of(&sample_records(9, 1, 6))).await,
        ),
        check.err(
            9,
            "conflicting append",
            &[ErrorKind::Fenced, ErrorKind::InvalidInput],
            tier.append(&topic, batch_of(&sample_records(1, 1, 66))).await,
        ),
    ];
    for err in errors {
        let ctx = err.context();
        check.eq(9, &format!("tier in the context of {err}"), ctx.tier, Some(tier.kind()));
        check.eq(9, &format!("topic in the context of {err}"), ctx.topic.as_ref(), Some(&topic));
        if !err.to_string().contains(topic.as_str()) {
            check.fail(9, format_args!("error message {err} does not name topic {topic}"));
        }
    }
}
