//! tier-testkit's conformance suite against the cold tier on a local directory and on a
//! real S3 server (moto).

use crate::common;

use tier_cold::{ColdConfig, ColdTier};
use tier_testkit::servers::SharedS3;
use tier_testkit::{SuiteConfig, run_all};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_on_a_local_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tier = ColdTier::open(ColdConfig::local(dir.path().join("cold"))).expect("open");
    let mut caps = SuiteConfig::new("local-");
    caps.many_batches = 120;
    run_all(&tier, &caps).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_on_s3() {
    let s3 = SharedS3::get().await.expect("S3 server (moto) for tests");
    let tier = ColdTier::open(common::s3_config(&s3)).expect("open");
    let mut caps = SuiteConfig::new("s3-");
    // One object per append: keep the many-batch check short against a Python server.
    caps.many_batches = 40;
    run_all(&tier, &caps).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cold_position_conformance_suite_on_a_local_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tier = std::sync::Arc::new(ColdTier::open(ColdConfig::local(dir.path().join("cold"))).expect("open"));
    tier_testkit::conformance::cold_backend(tier, dir.path(), &SuiteConfig::new("local-pos-")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cold_position_conformance_suite_on_s3() {
    let s3 = SharedS3::get().await.expect("S3 server (moto) for tests");
    let dir = tempfile::tempdir().expect("tempdir");
    let tier = std::sync::Arc::new(ColdTier::open(common::s3_config(&s3)).expect("open"));
    tier_testkit::conformance::cold_backend(tier, dir.path(), &SuiteConfig::new("s3-pos-")).await;
}
