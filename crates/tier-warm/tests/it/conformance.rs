//! tier-testkit's conformance suite against the warm tier on a real Valkey primary with
//! one replica (`WAIT 1`).

use crate::common;

use tier_core::Tier;
use tier_testkit::conformance::{SuiteConfig, run_all};

#[tokio::test]
async fn warm_tier_passes_the_conformance_suite() {
    let (_valkey, tier) = common::shared_tier().await;
    assert!(tier.capabilities().idempotent_append, "the router's warm position needs idempotent appends");
    run_all(&tier, &SuiteConfig::new("conf-")).await;
}

#[tokio::test]
async fn warm_tier_passes_the_warm_position_conformance_suite() {
    let (_valkey, tier) = common::shared_tier().await;
    tier_testkit::conformance::warm_backend(&tier, &SuiteConfig::new("conf-pos-")).await;
}
