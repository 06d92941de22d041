//! MemoryTier passes the conformance suite, and the suite catches broken tiers.

use std::panic::AssertUnwindSafe;

use async_trait::async_trait;
use futures::FutureExt;
use tier_core::{
    ErrorKind, Offset, OffsetRange, ReadLimit, RecordBatch, Tier, TierError, TierExt, TierKind, Timestamp,
    TopicName,
};
use tier_testkit::{
    MemoryTier, SuiteConfig,
    conformance::{self, batch_of, sample_records},
    run_all,
};

#[tokio::test]
async fn memory_tier_passes_the_conformance_suite() {
    let tier = MemoryTier::new();
    run_all(&tier, &SuiteConfig::new("mem-")).await;
    assert!(tier.topics().len() >= 10, "the suite wrote its own topics: {:?}", tier.topics());
}

#[tokio::test]
async fn memory_tier_kind_is_memory() {
    assert_eq!(MemoryTier::new().kind(), TierKind::Memory);
}

#[tokio::test]
async fn trim_before_drops_whole_batches_only() {
    let tier = MemoryTier::new();
    let topic = TopicName::new("trim").unwrap();
    let records = sample_records(0, 10, 1);
    tier.append(&topic, batch_of(&records[..4])).await.unwrap();
    tier.append(&topic, batch_of(&records[4..7])).await.unwrap();
    tier.append(&topic, batch_of(&records[7..])).await.unwrap();

    assert_eq!(tier.trim_before(&topic, 3), OffsetRange::new(0, 10), "offset 3 is inside the first batch");
    assert_eq!(tier.trim_before(&topic, 5), OffsetRange::new(4, 10));
    assert_eq!(tier.range(&topic).await.unwrap(), OffsetRange::new(4, 10));
    assert_eq!(tier.batches(&topic).len(), 2);
    let got = tier.read(&topic, 4, 100, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(got, records[4..]);
    let err = tier.read(&topic, 3, 100, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed);
    assert_eq!(tier.offset_for_timestamp(&topic, 0).await.unwrap(), Some(4));

    assert_eq!(
        tier.trim_before(&topic, 10),
        OffsetRange::new(10, 10),
        "everything trimmed: empty at the end"
    );
    assert_eq!(tier.read(&topic, 10, 20, ReadLimit::unbounded()).await.unwrap(), vec![]);
    let err = tier.append(&topic, batch_of(&sample_records(5, 1, 1))).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "offsets below the end are never reused");
    tier.append(&topic, batch_of(&sample_records(10, 2, 1))).await.unwrap();
    assert_eq!(tier.range(&topic).await.unwrap(), OffsetRange::new(10, 12));

    let unknown = TopicName::new("never").unwrap();
    assert_eq!(tier.trim_before(&unknown, 5), OffsetRange::new(0, 0));
}

/// Ways to break a MemoryTier.
#[derive(Debug, Clone, Copy)]
enum Breakage {
    /// Every non-empty batch read loses its last batch.
    DropLastBatchOfReads,
    /// `range` reports an end one short.
    RangeOneShort,
    /// `offset_for_timestamp` assumes timestamps increase: one past the last record
    /// with a timestamp below t.
    AssumesSortedTimestamps,
    /// Appends accept a gap after the end.
    AcceptsGaps,
    /// Reports `idempotent_append` but answers every append inside the held range with
    /// `Fenced`, identical or not.
    ClaimsIdempotentAppends,
}

#[derive(Debug)]
struct BrokenTier {
    inner: MemoryTier,
    breakage: Breakage,
}

#[async_trait]
impl Tier for BrokenTier {
    fn kind(&self) -> TierKind {
        self.inner.kind()
    }

    fn capabilities(&self) -> tier_core::Capabilities {
        self.inner.capabilities()
    }

    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        let r = self.inner.range(topic).await?;
        match self.breakage {
            Breakage::RangeOneShort if !r.is_empty() => Ok(OffsetRange::new(r.start, r.end - 1)),
            _ => Ok(r),
        }
    }

    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        if let Breakage::AcceptsGaps = self.breakage {
            let end = self.inner.range(topic).await?.end;
            if batch.base_offset() > end && end > 0 {
                return Ok(());
            }
        }
        if let Breakage::ClaimsIdempotentAppends = self.breakage
            && self.inner.range(topic).await?.contains(batch.base_offset())
        {
            return Err(TierError::fenced(
                tier_core::ErrorContext::tier(TierKind::Memory).topic(topic),
                "offset already held",
            ));
        }
        self.inner.append(topic, batch).await
    }

    async fn read_batches(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, TierError> {
        let mut batches = self.inner.read_batches(topic, from, to, max_bytes).await?;
        if let Breakage::DropLastBatchOfReads = self.breakage {
            batches.pop();
        }
        Ok(batches)
    }

    async fn offset_for_timestamp(
        &self,
        topic: &TopicName,
        timestamp: Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        if let Breakage::AssumesSortedTimestamps = self.breakage {
            let range = self.inner.range(topic).await?;
            let all = self.inner.read(topic, range.start, u64::MAX, ReadLimit::unbounded()).await?;
            let next =
                all.iter().rev().find(|r| r.timestamp < timestamp).map_or(range.start, |r| r.offset + 1);
            return Ok((next < range.end).then_some(next));
        }
        self.inner.offset_for_timestamp(topic, timestamp).await
    }
}

/// Runs the suite against a broken tier and returns its panic message.
async fn suite_failure(breakage: Breakage) -> String {
    let tier = BrokenTier { inner: MemoryTier::new(), breakage };
    let caps = SuiteConfig::new("broken-");
    let outcome = AssertUnwindSafe(run_all(&tier, &caps)).catch_unwind().await;
    let payload = outcome.expect_err("the suite must reject a broken tier");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .expect("panic message is a string")
}

#[tokio::test]
async fn suite_rejects_a_tier_that_drops_the_last_batch_of_reads() {
    let msg = suite_failure(Breakage::DropLastBatchOfReads).await;
    assert!(msg.starts_with("conformance check append_read_round_trip (invariant 6)"), "{msg}");
    assert!(msg.contains("memory tier"), "{msg}");
}

#[tokio::test]
async fn suite_rejects_a_tier_whose_range_is_one_short() {
    let msg = suite_failure(Breakage::RangeOneShort).await;
    assert!(msg.starts_with("conformance check range_after_appends (invariant 2)"), "{msg}");
}

#[tokio::test]
async fn suite_rejects_a_tier_that_assumes_sorted_timestamps() {
    let msg = suite_failure(Breakage::AssumesSortedTimestamps).await;
    assert!(msg.starts_with("conformance check timestamp_lookup (invariant 7)"), "{msg}");
    assert!(msg.contains("out-of-order"), "{msg}");
}

#[tokio::test]
async fn suite_rejects_a_tier_that_accepts_gaps() {
    let msg = suite_failure(Breakage::AcceptsGaps).await;
    assert!(msg.starts_with("conformance check wrong_base_offset_is_rejected (invariant 3)"), "{msg}");
}

/// The suite checks what a tier reports of itself: a tier whose capabilities claim
/// idempotent appends must take an identical re-append.
#[tokio::test]
async fn suite_rejects_a_tier_whose_capabilities_claim_idempotent_appends_it_lacks() {
    let msg = suite_failure(Breakage::ClaimsIdempotentAppends).await;
    assert!(msg.starts_with("conformance check idempotent_and_fenced_append (invariant 5)"), "{msg}");
}

#[tokio::test]
async fn single_checks_can_run_alone() {
    let tier = BrokenTier { inner: MemoryTier::new(), breakage: Breakage::DropLastBatchOfReads };
    let caps = SuiteConfig::new("alone-");
    let outcome = AssertUnwindSafe(conformance::check_read_limits(&tier, &caps)).catch_unwind().await;
    assert!(outcome.is_err(), "check_read_limits catches dropped records");
    // A check the breakage does not touch passes.
    conformance::check_range_after_appends(&MemoryTier::new(), &caps).await;
}

#[tokio::test]
async fn memory_tier_passes_the_position_conformance_suites() {
    let tier = std::sync::Arc::new(MemoryTier::new());
    conformance::warm_backend(tier.as_ref(), &SuiteConfig::new("mem-warm-")).await;
    let dir = tempfile::tempdir().expect("tempdir");
    conformance::cold_backend(tier, dir.path(), &SuiteConfig::new("mem-cold-")).await;
}

#[tokio::test]
async fn a_faulty_tier_without_faults_passes_the_position_conformance_suites() {
    let tier = std::sync::Arc::new(tier_testkit::FaultyTier::new(MemoryTier::new()));
    conformance::warm_backend(tier.as_ref(), &SuiteConfig::new("faulty-warm-")).await;
    let dir = tempfile::tempdir().expect("tempdir");
    conformance::cold_backend(tier, dir.path(), &SuiteConfig::new("faulty-cold-")).await;
}

/// A tier that counts the encoded bytes of the batches `read_batches` hands out.
#[derive(Debug)]
struct Fetched {
    inner: MemoryTier,
    bytes: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl Tier for Fetched {
    fn kind(&self) -> TierKind {
        self.inner.kind()
    }

    fn capabilities(&self) -> tier_core::Capabilities {
        self.inner.capabilities()
    }

    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        self.inner.range(topic).await
    }

    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        self.inner.append(topic, batch).await
    }

    async fn read_batches(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, TierError> {
        let batches = self.inner.read_batches(topic, from, to, max_bytes).await?;
        let bytes: usize = batches.iter().map(RecordBatch::encoded_len).sum();
        self.bytes.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
        Ok(batches)
    }

    async fn offset_for_timestamp(
        &self,
        topic: &TopicName,
        ts: Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        self.inner.offset_for_timestamp(topic, ts).await
    }
}

#[tokio::test]
async fn a_record_read_fetches_only_the_batches_holding_its_records() {
    // 100 batches of 100 records; a read of 1,000 records needs 10 of them, and gets just
    // those. The record read used to ask for 4 MiB of batches a time whatever the limit.
    let tier = Fetched { inner: MemoryTier::new(), bytes: Default::default() };
    let topic = TopicName::new("paged").unwrap();
    let mut sizes = Vec::new();
    for i in 0..100 {
        let batch = batch_of(&sample_records(i * 100, 100, 1));
        sizes.push(batch.encoded_len());
        tier.append(&topic, batch).await.unwrap();
    }
    let first_ten: usize = sizes[..10].iter().sum();
    let records = tier.read(&topic, 0, 10_000, ReadLimit::records(1000)).await.unwrap();
    assert_eq!(records.len(), 1000);
    assert_eq!(records, sample_records(0, 1000, 1));
    let fetched = tier.bytes.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        fetched, first_ten,
        "fetched {fetched} bytes; the 10 batches holding the records: {first_ten}"
    );
    // Reading everything still gets everything, in pages.
    let all = tier.read(&topic, 0, 10_000, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(all, sample_records(0, 10_000, 1));
}
