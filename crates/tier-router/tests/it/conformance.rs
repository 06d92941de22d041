//! tier-testkit's conformance suites against the router's own position wrapper:
//! `PagedCold` (a cold backend in the shape of a custom tier with nothing better) over a
//! cold tier on a local directory, on moto S3, and over a memory tier.
#![cfg(feature = "cold")]

use crate::common;

use std::sync::Arc;

use tier_cold::{ColdConfig, ColdTier};
use tier_router::PagedCold;
use tier_testkit::conformance::{cold_backend, run_all};
use tier_testkit::servers::SharedS3;
use tier_testkit::{MemoryTier, SuiteConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paged_cold_over_a_local_cold_tier_passes_the_suites() {
    let dir = tempfile::tempdir().unwrap();
    let tier =
        Arc::new(PagedCold(Arc::new(ColdTier::open(ColdConfig::local(dir.path().join("cold"))).unwrap())));
    let mut caps = SuiteConfig::new("paged-local-");
    caps.many_batches = 40;
    run_all(tier.as_ref(), &caps).await;
    cold_backend(tier, dir.path(), &SuiteConfig::new("paged-local-pos-")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paged_cold_over_s3_passes_the_cold_position_suite() {
    let s3 = SharedS3::get().await.expect("S3 server (moto) for tests");
    let mut config = common::s3_cold_config(&s3);
    config.prefix = "paged-conf".into();
    let dir = tempfile::tempdir().unwrap();
    let tier = Arc::new(PagedCold(Arc::new(ColdTier::open(config).unwrap())));
    cold_backend(tier, dir.path(), &SuiteConfig::new("paged-s3-pos-")).await;
}

#[tokio::test]
async fn paged_cold_over_a_memory_tier_passes_the_cold_position_suite() {
    let dir = tempfile::tempdir().unwrap();
    let tier = Arc::new(PagedCold(Arc::new(MemoryTier::new())));
    cold_backend(tier, dir.path(), &SuiteConfig::new("paged-mem-pos-")).await;
}
