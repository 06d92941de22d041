//! The simulation's warm stand-in honours the contracts the store relies on: the `Tier`
//! conformance suite and the warm position's (with no fault injected).

use tier_sim::warm::SimWarm;
use tier_testkit::Capabilities;
use tier_testkit::conformance::{run_all, warm_backend};

#[tokio::test]
async fn sim_warm_passes_the_conformance_suites() {
    let tier = SimWarm::new();
    run_all(&tier, &Capabilities::new("sim-")).await;
    warm_backend(&tier, &Capabilities::new("sim-pos-")).await;
}
