//! Conformance of the warm and cold **positions** ([`WarmBackend`], [`ColdBackend`] in
//! `tier_core::position`): what a tier must do besides the [`Tier`](tier_core::Tier)
//! contract to serve as the router's warm or cold tier. Every warm backend and wrapper
//! runs [`warm_backend`], every cold one [`cold_backend`], against a real instance.
//!
//! A failure names the check and the method whose contract it broke, e.g.
//! `conformance check warm_trim_before (WarmBackend::trim_before) failed on memory tier: …`.

use std::path::Path;
use std::sync::Arc;

use futures::StreamExt;
use tier_core::position::{ColdBackend, WarmBackend};
use tier_core::segment::{SegmentHeader, SegmentWriter};
use tier_core::{ErrorKind, Offset, OffsetRange, Record, RecordBatch, TierError, TierKind, TopicName};

use super::SuiteConfig;
use super::data::{batch_of, sample_records};

/// One running check of a position contract.
struct Check {
    name: &'static str,
    kind: TierKind,
}

impl Check {
    fn fail(&self, method: &str, message: impl std::fmt::Display) -> ! {
        panic!("conformance check {} ({method}) failed on {} tier: {message}", self.name, self.kind)
    }

    fn ok<T>(&self, method: &str, result: Result<T, TierError>) -> T {
        result.unwrap_or_else(|e| self.fail(method, format_args!("unexpected error: {}", e.report())))
    }

    fn eq<T: PartialEq + std::fmt::Debug>(&self, method: &str, what: &str, got: T, want: T) {
        if got != want {
            self.fail(method, format_args!("{what}: got {got:?}, want {want:?}"));
        }
    }

    /// `result` is an error of kind `want`; `what` names the case.
    fn kind_is<T: std::fmt::Debug>(
        &self,
        method: &str,
        what: &str,
        result: Result<T, TierError>,
        want: ErrorKind,
    ) {
        match result {
            Err(e) if e.kind() == want => {}
            other => self.fail(method, format_args!("{what} answered {other:?}, want {want:?}")),
        }
    }

    /// `tier`'s range of `topic` is `want` (`what` names the moment).
    async fn range_is(
        &self,
        method: &str,
        what: &str,
        tier: &dyn WarmBackend,
        topic: &TopicName,
        want: OffsetRange,
    ) {
        let got = self.ok("Tier::range", tier.range(topic).await);
        self.eq(method, what, got, want);
    }
}

/// The records of `batches` from `from` on (the records a reader from `from` gets).
fn records_from(batches: &[RecordBatch], from: Offset) -> Vec<Record> {
    batches.iter().flat_map(|b| b.records_from(from)).collect()
}

/// Checks that `batches` continue each other from the one holding `from`.
fn continuous(check: &Check, method: &str, batches: &[RecordBatch], from: Offset) {
    let mut next = from;
    for (i, b) in batches.iter().enumerate() {
        let ok =
            if i == 0 { b.base_offset() <= next && next < b.end_offset() } else { b.base_offset() == next };
        if !ok {
            check.fail(
                method,
                format_args!("batch {i} holds {} where it should continue at {next}", b.offset_range()),
            );
        }
        next = b.end_offset();
    }
}

/// Runs every warm-position check on `tier`, panicking on the first violation.
pub async fn warm_backend(tier: &dyn WarmBackend, caps: &SuiteConfig) {
    check_warm_append_group(tier, caps).await;
    check_warm_batches_from(tier, caps).await;
    check_warm_trim_before(tier, caps).await;
    check_warm_restart_at(tier, caps).await;
    check_warm_topic_marker(tier, caps).await;
}

/// Appends batches of `sizes` records from 0 to `topic`; returns the batches.
async fn append_batches(
    check: &Check,
    tier: &dyn WarmBackend,
    topic: &TopicName,
    sizes: &[usize],
) -> Vec<RecordBatch> {
    let mut next = 0;
    let mut batches = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        let batch = batch_of(&sample_records(next, n, i as u64));
        check.ok("Tier::append", tier.append(topic, batch.clone()).await);
        next = batch.end_offset();
        batches.push(batch);
    }
    batches
}

async fn collect_batches(
    check: &Check,
    method: &str,
    stream: futures::stream::BoxStream<'_, Result<RecordBatch, TierError>>,
) -> Vec<RecordBatch> {
    let items: Vec<Result<RecordBatch, TierError>> = stream.collect().await;
    items.into_iter().map(|r| check.ok(method, r)).collect()
}

/// `append_group(batches)`: the batches held in order as appended one by one; a group
/// that starts with an identical retry of held batches holds them all; a group that
/// does not continue the tier is refused at its first batch that does not (`InvalidInput`),
/// with the ones before it held; a different batch where one is held is `Fenced`.
pub async fn check_warm_append_group(tier: &dyn WarmBackend, caps: &SuiteConfig) {
    let check = Check { name: "warm_append_group", kind: tier.kind() };
    let m = "WarmBackend::append_group";
    let topic = caps.fresh_topic("warm-group");
    let group: Vec<RecordBatch> =
        [(0, 5), (5, 7), (12, 8)].iter().map(|&(at, n)| batch_of(&sample_records(at, n, at))).collect();
    let (held, result) = tier.append_group(&topic, group.clone()).await;
    check.ok(m, result);
    check.eq(m, "batches held of a group of three", held, 3);
    check.range_is(m, "the range after the group", tier, &topic, OffsetRange::new(0, 20)).await;
    let stored = collect_batches(&check, "WarmBackend::batches_from", tier.batches_from(&topic, 0)).await;
    check.eq(m, "the records held", records_from(&stored, 0), records_from(&group, 0));

    // An identical retry of the last two, then two new batches.
    let next: Vec<RecordBatch> =
        [(20, 3), (23, 4)].iter().map(|&(at, n)| batch_of(&sample_records(at, n, at))).collect();
    let retry: Vec<RecordBatch> = group[1..].iter().chain(&next).cloned().collect();
    let (held, result) = tier.append_group(&topic, retry).await;
    check.ok(m, result);
    check.eq(m, "batches held of a retry followed by new batches", held, 4);
    check.range_is(m, "the range after the retry", tier, &topic, OffsetRange::new(0, 27)).await;

    // One batch continues, the next leaves a hole.
    let cont = batch_of(&sample_records(27, 3, 27));
    let hole = batch_of(&sample_records(40, 3, 40));
    let (held, result) = tier.append_group(&topic, vec![cont, hole]).await;
    check.kind_is(m, "a batch leaving a hole", result, ErrorKind::InvalidInput);
    check.eq(m, "batches held before the hole", held, 1);
    check.range_is(m, "the range after the hole", tier, &topic, OffsetRange::new(0, 30)).await;

    // A different batch at a held offset.
    let other = batch_of(&sample_records(5, 7, 99));
    let (held, result) = tier.append_group(&topic, vec![other]).await;
    check.kind_is(m, "a different batch at a held offset", result, ErrorKind::Fenced);
    check.eq(m, "batches held of a conflicting group", held, 0);
    let empty = tier.append_group(&topic, Vec::new()).await;
    check.eq(m, "batches held of an empty group", empty.0, 0);
    check.ok(m, empty.1);
}

/// `batches_from(from)`: every batch from the one holding `from`, in order, as appended
/// (a tier that rebuilds batches must at least keep them continuous and the records
/// identical).
pub async fn check_warm_batches_from(tier: &dyn WarmBackend, caps: &SuiteConfig) {
    let check = Check { name: "warm_batches_from", kind: tier.kind() };
    let m = "WarmBackend::batches_from";
    let topic = caps.fresh_topic("warm-batches");
    let appended = append_batches(&check, tier, &topic, &[5, 7, 8]).await;
    for from in [0, 3, 5, 7, 12, 19] {
        let got = collect_batches(&check, m, tier.batches_from(&topic, from)).await;
        continuous(&check, m, &got, from);
        check.eq(
            m,
            &format!("the end of the batches from {from}"),
            got.last().map(|b| b.end_offset()),
            Some(20),
        );
        check.eq(
            m,
            &format!("the records from {from}"),
            records_from(&got, from),
            records_from(&appended, from),
        );
    }
    let past = collect_batches(&check, m, tier.batches_from(&topic, 20)).await;
    check.eq(m, "batches from the end", past.len(), 0);
}

/// `trim_before(offset)`: drops whole batches below `offset` (a batch holding it may
/// stay), never the newest batch.
pub async fn check_warm_trim_before(tier: &dyn WarmBackend, caps: &SuiteConfig) {
    let check = Check { name: "warm_trim_before", kind: tier.kind() };
    let m = "WarmBackend::trim_before";
    let topic = caps.fresh_topic("warm-trim");
    let appended = append_batches(&check, tier, &topic, &[5, 7, 8]).await;
    check.ok(m, tier.trim_before(&topic, 7).await);
    let range = check.ok("Tier::range", tier.range(&topic).await);
    if !(range.start <= 7 && range.end == 20) {
        check
            .fail(m, format_args!("after trimming below 7 the tier holds {range}, want [s, 20) with s <= 7"));
    }
    let got = collect_batches(&check, "WarmBackend::batches_from", tier.batches_from(&topic, 7)).await;
    check.eq(m, "the records kept", records_from(&got, 7), records_from(&appended, 7));
    check.ok(m, tier.trim_before(&topic, 1000).await);
    let range = check.ok("Tier::range", tier.range(&topic).await);
    if range.is_empty() || range.end != 20 {
        check.fail(m, format_args!("trimming past the end left {range}: the newest batch must stay"));
    }
}

/// `restart_at(offset)`: refused (`InvalidInput`) while a batch ends beyond `offset`;
/// otherwise the tier holds nothing and takes its next batch at `offset`.
pub async fn check_warm_restart_at(tier: &dyn WarmBackend, caps: &SuiteConfig) {
    let check = Check { name: "warm_restart_at", kind: tier.kind() };
    let m = "WarmBackend::restart_at";
    let topic = caps.fresh_topic("warm-restart");
    append_batches(&check, tier, &topic, &[5, 5]).await;
    match tier.restart_at(&topic, 7).await {
        Err(e) if e.kind() == ErrorKind::InvalidInput => {}
        other => check
            .fail(m, format_args!("a restart at 7 below the end 10 answered {other:?}, want InvalidInput")),
    }
    check.eq(
        m,
        "the range after a refused restart",
        check.ok("Tier::range", tier.range(&topic).await),
        OffsetRange::new(0, 10),
    );
    check.ok(m, tier.restart_at(&topic, 25).await);
    let range = check.ok("Tier::range", tier.range(&topic).await);
    if !range.is_empty() {
        check.fail(m, format_args!("after a restart at 25 the tier holds {range}, want nothing"));
    }
    let batch = batch_of(&sample_records(25, 4, 9));
    check.ok(m, tier.append(&topic, batch).await);
    check.eq(
        m,
        "the range after the next batch",
        check.ok("Tier::range", tier.range(&topic).await),
        OffsetRange::new(25, 29),
    );
}

/// `record_topic` / `topic_recorded`: false for a topic never recorded, true after
/// `record_topic` (idempotent).
pub async fn check_warm_topic_marker(tier: &dyn WarmBackend, caps: &SuiteConfig) {
    let check = Check { name: "warm_topic_marker", kind: tier.kind() };
    let m = "WarmBackend::record_topic";
    let topic = caps.fresh_topic("warm-marker");
    check.eq(m, "a topic never recorded", check.ok(m, tier.topic_recorded(&topic).await), false);
    check.ok(m, tier.record_topic(&topic).await);
    check.ok(m, tier.record_topic(&topic).await);
    check.eq(m, "a recorded topic", check.ok(m, tier.topic_recorded(&topic).await), true);
}

/// Runs every cold-position check on `tier`, writing sealed segment files under `dir`,
/// panicking on the first violation.
pub async fn cold_backend(tier: Arc<dyn ColdBackend>, dir: &Path, caps: &SuiteConfig) {
    check_cold_store_segment(Arc::clone(&tier), dir, caps).await;
    check_cold_batches_bounds(Arc::clone(&tier), dir, caps).await;
    check_cold_gap_and_continuation(Arc::clone(&tier), dir, caps).await;
    check_cold_topic_marker(tier, dir, caps).await;
}

/// Writes a sealed segment of `topic` holding batches of `sizes` records from `base`;
/// returns its path and batches.
fn sealed_segment(
    dir: &Path,
    topic: &TopicName,
    base: Offset,
    sizes: &[usize],
) -> (std::path::PathBuf, Vec<RecordBatch>) {
    let path = dir.join(format!("{topic}-{base:020}.seg"));
    let header = SegmentHeader::new(topic.clone(), base, 1000 + 10 * base as i64);
    let file = std::fs::File::create(&path).expect("conformance: creating a segment file");
    let mut writer = SegmentWriter::new(std::io::BufWriter::new(file), &header).expect("segment header");
    let mut next = base;
    let mut batches = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        let batch = batch_of(&sample_records(next, n, i as u64));
        writer.append(&batch).expect("segment batch");
        next = batch.end_offset();
        batches.push(batch);
    }
    let out = writer.seal().expect("sealing the segment");
    out.into_inner().expect("flushing the segment").sync_all().expect("syncing the segment");
    (path, batches)
}

async fn read_cold(
    check: &Check,
    tier: &Arc<dyn ColdBackend>,
    topic: &TopicName,
    from: Offset,
    to: Offset,
) -> Vec<RecordBatch> {
    let stream = Arc::clone(tier).record_batches_from(topic, from, to);
    collect_batches(check, "ColdBackend::record_batches_from", stream).await
}

/// `store_segment`: stores a sealed segment, idempotently, and returns its offsets; the
/// stored records read back.
pub async fn check_cold_store_segment(tier: Arc<dyn ColdBackend>, dir: &Path, caps: &SuiteConfig) {
    let check = Check { name: "cold_store_segment", kind: tier.kind() };
    let m = "ColdBackend::store_segment";
    let topic = caps.fresh_topic("cold-store");
    let (path, batches) = sealed_segment(dir, &topic, 0, &[5, 7, 8]);
    check.eq(
        m,
        "the offsets stored",
        check.ok(m, tier.store_segment(&topic, &path).await),
        OffsetRange::new(0, 20),
    );
    check.eq(
        m,
        "storing it again",
        check.ok(m, tier.store_segment(&topic, &path).await),
        OffsetRange::new(0, 20),
    );
    check.eq(m, "the range", check.ok("Tier::range", tier.range(&topic).await), OffsetRange::new(0, 20));
    let got = read_cold(&check, &tier, &topic, 0, 20).await;
    continuous(&check, "ColdBackend::record_batches_from", &got, 0);
    check.eq(m, "the records stored", records_from(&got, 0), records_from(&batches, 0));
}

/// `record_batches_from(from, to)`: the batches holding `from..to`, the first holding
/// `from`, continuous, none starting at or past `to`.
pub async fn check_cold_batches_bounds(tier: Arc<dyn ColdBackend>, dir: &Path, caps: &SuiteConfig) {
    let check = Check { name: "cold_batches_bounds", kind: tier.kind() };
    let m = "ColdBackend::record_batches_from";
    let topic = caps.fresh_topic("cold-bounds");
    let (first, mut all) = sealed_segment(dir, &topic, 0, &[5, 7, 8]);
    let (second, more) = sealed_segment(dir, &topic, 20, &[6, 4, 10]);
    all.extend(more);
    check.ok("ColdBackend::store_segment", tier.store_segment(&topic, &first).await);
    check.ok("ColdBackend::store_segment", tier.store_segment(&topic, &second).await);
    for (from, to) in [(0, 40), (3, 9), (7, 26), (19, 21), (25, 30), (39, 40), (12, 1000)] {
        let got = read_cold(&check, &tier, &topic, from, to).await;
        continuous(&check, m, &got, from);
        if let Some(b) = got.iter().find(|b| b.base_offset() >= to) {
            check.fail(
                m,
                format_args!(
                    "a read of [{from}, {to}) yielded the batch {} starting at or past its end",
                    b.offset_range()
                ),
            );
        }
        let reached = got.last().map_or(from, RecordBatch::end_offset);
        if reached < to.min(40) {
            check.fail(m, format_args!("a read of [{from}, {to}) ended at {reached}"));
        }
        let want: Vec<Record> = records_from(&all, from).into_iter().filter(|r| r.offset < to).collect();
        let have: Vec<Record> = records_from(&got, from).into_iter().filter(|r| r.offset < to).collect();
        check.eq(m, &format!("the records of [{from}, {to})"), have, want);
    }
}

/// `record_gap` and `continuation`: a tier that records a gap continues after it (the
/// next segment may start there); one that cannot answers `InvalidInput` and continues
/// at its end. A fresh topic continues at 0.
pub async fn check_cold_gap_and_continuation(tier: Arc<dyn ColdBackend>, dir: &Path, caps: &SuiteConfig) {
    let check = Check { name: "cold_gap_and_continuation", kind: tier.kind() };
    let m = "ColdBackend::continuation";
    let topic = caps.fresh_topic("cold-gap");
    check.eq(m, "a fresh topic", check.ok(m, tier.continuation(&topic).await), 0);
    let (path, _) = sealed_segment(dir, &topic, 0, &[10]);
    check.ok("ColdBackend::store_segment", tier.store_segment(&topic, &path).await);
    check.eq(m, "after [0, 10)", check.ok(m, tier.continuation(&topic).await), 10);
    let gap = OffsetRange::new(10, 15);
    match tier.record_gap(&topic, gap).await {
        Ok(()) => {
            check.ok("ColdBackend::record_gap", tier.record_gap(&topic, gap).await);
            check.eq(m, "after the gap [10, 15)", check.ok(m, tier.continuation(&topic).await), 15);
            let (after, _) = sealed_segment(dir, &topic, 15, &[5]);
            check.eq(
                "ColdBackend::store_segment",
                "the segment after the gap",
                check.ok("ColdBackend::store_segment", tier.store_segment(&topic, &after).await),
                OffsetRange::new(15, 20),
            );
            check.eq(m, "after the segment past the gap", check.ok(m, tier.continuation(&topic).await), 20);
        }
        Err(e) if e.kind() == ErrorKind::InvalidInput => {
            check.eq(m, "after a refused gap", check.ok(m, tier.continuation(&topic).await), 10);
        }
        Err(e) => check.fail("ColdBackend::record_gap", format_args!("answered {}", e.report())),
    }
}

/// `record_topic` / `topic_recorded`: false for a fresh topic; `record_topic` is
/// idempotent; a topic holding records is recorded (a tier without markers answers
/// whether it holds records).
pub async fn check_cold_topic_marker(tier: Arc<dyn ColdBackend>, dir: &Path, caps: &SuiteConfig) {
    let check = Check { name: "cold_topic_marker", kind: tier.kind() };
    let m = "ColdBackend::topic_recorded";
    let topic = caps.fresh_topic("cold-marker");
    check.eq(m, "a fresh topic", check.ok(m, tier.topic_recorded(&topic).await), false);
    check.ok("ColdBackend::record_topic", tier.record_topic(&topic).await);
    check.ok("ColdBackend::record_topic", tier.record_topic(&topic).await);
    let (path, _) = sealed_segment(dir, &topic, 0, &[3]);
    check.ok("ColdBackend::store_segment", tier.store_segment(&topic, &path).await);
    check.eq(m, "a topic holding records", check.ok(m, tier.topic_recorded(&topic).await), true);
}
