//! The simulation's warm stand-in honours the contracts the store relies on: the `Tier`
//! conformance suite and the warm position's (with no fault injected).

use tier_sim::warm::SimWarm;
use tier_testkit::SuiteConfig;
use tier_testkit::conformance::{run_all, warm_backend};

#[tokio::test]
async fn sim_warm_passes_the_conformance_suites() {
    let tier = SimWarm::new();
    run_all(&tier, &SuiteConfig::new("sim-")).await;
    warm_backend(&tier, &SuiteConfig::new("sim-pos-")).await;
}
