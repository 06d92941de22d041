//! FaultyTier forwards everything and injects exactly the faults it is told to.

use std::time::Duration;

use tier_core::{ErrorKind, OffsetRange, ReadLimit, Tier, TierExt, TierKind, TopicName};
use tier_testkit::{
    FaultyTier, MemoryTier, SuiteConfig,
    conformance::{batch_of, sample_records},
    faults::Op,
    run_all,
};

fn topic(name: &str) -> TopicName {
    TopicName::new(name).expect("test topic names are valid")
}

#[tokio::test]
async fn without_faults_it_forwards_every_method_and_passes_the_suite() {
    let tier = FaultyTier::new(MemoryTier::new());
    assert_eq!(tier.kind(), TierKind::Memory);
    run_all(&tier, &SuiteConfig::new("faulty-")).await;
    assert!(tier.calls() > 100, "calls went through the wrapper: {}", tier.calls());
    assert_eq!(tier.injected_failures(), 0);
    assert!(!tier.inner().topics().is_empty(), "writes reached the inner tier");
}

#[tokio::test]
async fn fail_next_fails_exactly_n_calls_with_unavailable_and_context() {
    let tier = FaultyTier::new(MemoryTier::new());
    let t = topic("next");
    tier.fail_next(2);
    for _ in 0..2 {
        let err = tier.append(&t, batch_of(&sample_records(0, 2, 1))).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert!(err.is_retryable());
        assert_eq!(err.context().tier, Some(TierKind::Memory));
        assert_eq!(err.context().topic.as_ref(), Some(&t));
        assert_eq!(err.context().offset, Some(0));
    }
    assert_eq!(tier.inner().range(&t).await.unwrap(), OffsetRange::new(0, 0), "failed appends wrote nothing");
    tier.append(&t, batch_of(&sample_records(0, 2, 1))).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 2));
    assert_eq!(tier.injected_failures(), 2);
}

#[tokio::test]
async fn fail_next_after_lets_calls_through_then_fails_the_ones_after() {
    let tier = FaultyTier::new(MemoryTier::new());
    let t = topic("after");
    tier.fail_fraction(1.0);
    tier.fail_next_after(2, 1);
    // Let through although every other call fails by fraction.
    tier.append(&t, batch_of(&sample_records(0, 1, 1))).await.unwrap();
    tier.append(&t, batch_of(&sample_records(1, 1, 1))).await.unwrap();
    tier.fail_fraction(0.0);
    let err = tier.append(&t, batch_of(&sample_records(2, 1, 1))).await.unwrap_err();
    assert_eq!((err.kind(), err.context().offset), (ErrorKind::Unavailable, Some(2)));
    tier.append(&t, batch_of(&sample_records(2, 1, 1))).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 3));
    assert_eq!(tier.injected_failures(), 1);
}

#[tokio::test]
async fn targets_limit_faults_to_chosen_methods() {
    let tier = FaultyTier::new(MemoryTier::new());
    let t = topic("targets");
    tier.append(&t, batch_of(&sample_records(0, 3, 1))).await.unwrap();
    tier.target(&[Op::Read]);
    tier.fail_fraction(1.0);
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 3));
    assert_eq!(tier.offset_for_timestamp(&t, 0).await.unwrap(), Some(0));
    tier.append(&t, batch_of(&sample_records(3, 1, 1))).await.unwrap();
    let err = tier.read(&t, 0, 10, ReadLimit::unbounded()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert_eq!(err.context().offset, Some(0));
    tier.target(&[Op::Range, Op::OffsetForTimestamp]);
    assert_eq!(tier.range(&t).await.unwrap_err().kind(), ErrorKind::Unavailable);
    assert_eq!(tier.offset_for_timestamp(&t, 0).await.unwrap_err().kind(), ErrorKind::Unavailable);
    tier.clear();
    assert_eq!(tier.read(&t, 0, 10, ReadLimit::unbounded()).await.unwrap().len(), 4);
    assert_eq!(tier.injected_failures(), 3);
}

/// The pattern of failures for 400 range calls.
async fn failure_pattern(seed: u64, fraction: f64) -> Vec<bool> {
    let tier = FaultyTier::with_seed(MemoryTier::new(), seed);
    tier.fail_fraction(fraction);
    let t = topic("fraction");
    let mut pattern = Vec::new();
    for _ in 0..400 {
        pattern.push(tier.range(&t).await.is_err());
    }
    pattern
}

#[tokio::test]
async fn fail_fraction_is_seeded_and_close_to_the_fraction() {
    let a = failure_pattern(7, 0.25).await;
    assert_eq!(a, failure_pattern(7, 0.25).await, "same seed, same failures");
    assert_ne!(a, failure_pattern(8, 0.25).await, "another seed, other failures");
    let failed = a.iter().filter(|&&f| f).count();
    assert!((60..=140).contains(&failed), "{failed} of 400 failed at a fraction of 0.25");
    assert!(failure_pattern(7, 0.0).await.iter().all(|&f| !f));
    assert!(failure_pattern(7, 1.0).await.iter().all(|&f| f));
}

#[tokio::test]
async fn fail_after_append_lands_the_write_but_reports_unavailable() {
    let tier = FaultyTier::new(MemoryTier::new());
    let t = topic("after");
    let batch = batch_of(&sample_records(0, 3, 1));
    tier.fail_after_append(true);
    tier.fail_next(1);
    let err = tier.append(&t, batch.clone()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 3), "the write landed");
    tier.append(&t, batch).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 3), "the retry is idempotent");
}

#[tokio::test(start_paused = true)]
async fn latency_delays_targeted_calls_only() {
    let tier = FaultyTier::new(MemoryTier::new());
    let t = topic("latency");
    tier.set_latency(Duration::from_millis(250));
    tier.target(&[Op::Range]);
    let start = tokio::time::Instant::now();
    tier.range(&t).await.unwrap();
    assert!(start.elapsed() >= Duration::from_millis(250), "{:?}", start.elapsed());
    let start = tokio::time::Instant::now();
    tier.read(&t, 0, 1, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(start.elapsed(), Duration::ZERO, "reads are not targeted");
    assert_eq!(tier.injected_failures(), 0, "latency alone fails nothing");
}
