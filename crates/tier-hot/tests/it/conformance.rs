//! The hot tier passes tier-testkit's conformance suite, with the default settings and
//! with tiny segments and cache (so reads cross sealed segments, the active segment's
//! sparse index and the cache).

use tier_core::{Tier, TierKind};
use tier_hot::{FsyncPolicy, HotConfig, HotTier};
use tier_testkit::{SuiteConfig, run_all};

#[tokio::test]
async fn default_settings_pass_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let tier = HotTier::open(HotConfig::new(dir.path())).await.unwrap();
    assert_eq!(tier.kind(), TierKind::Hot);
    run_all(&tier, &SuiteConfig::new("hot-")).await;
    assert!(tier.topics().len() >= 10);
    tier.close().await;
}

#[tokio::test]
async fn tiny_segments_without_cache_pass_the_conformance_suite() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = HotConfig::new(dir.path()).with_fsync(FsyncPolicy::Never);
    config.segment_bytes = 8 * 1024;
    config.index_interval_bytes = 512;
    config.cache_bytes = 0;
    let tier = HotTier::open(config).await.unwrap();
    run_all(&tier, &SuiteConfig::new("tiny-")).await;
    let sealed: usize = tier.topics().iter().map(|t| tier.sealed_segments(t).len()).sum();
    assert!(sealed > 5, "tiny segments rotated: {sealed} sealed");
    tier.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopened_tier_passes_the_conformance_suite_on_recovered_topics() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = HotConfig::new(dir.path());
    config.segment_bytes = 16 * 1024;
    config.cache_bytes = 4096;
    let tier = HotTier::open(config.clone()).await.unwrap();
    run_all(&tier, &SuiteConfig::new("a-")).await;
    tier.close().await;
    let tier = HotTier::open(config).await.unwrap();
    run_all(&tier, &SuiteConfig::new("b-")).await;
    tier.close().await;
}
