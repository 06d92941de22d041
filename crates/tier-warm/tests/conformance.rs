//! tier-testkit's conformance suite against the warm tier on a real Valkey primary with
//! one replica (`WAIT 1`).

mod common;

use tier_testkit::conformance::{Capabilities, run_all};

#[tokio::test]
async fn warm_tier_passes_the_conformance_suite() {
    let (_valkey, tier) = common::shared_tier().await;
    let mut caps = Capabilities::new("conf-");
    caps.idempotent_append = true;
    run_all(&tier, &caps).await;
}

#[tokio::test]
async fn warm_tier_passes_the_warm_position_conformance_suite() {
    let (_valkey, tier) = common::shared_tier().await;
    tier_testkit::conformance::warm_backend(&tier, &Capabilities::new("conf-pos-")).await;
}
