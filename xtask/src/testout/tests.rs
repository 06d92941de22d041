use super::*;

fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_owned).collect()
}

#[test]
fn nextest_counts_per_binary_and_ignores_the_repeat_after_the_summary() {
    let out = lines(
        "    Finished `test` profile [unoptimized + debuginfo] target(s) in 2m 03s
────────────
 Nextest run ID d71b28ff with nextest profile: default
    Starting 5 tests across 2 binaries
        PASS [   0.005s] (1/5) tier-core batch::tests::golden_bytes
        PASS [   0.004s] (2/5) tier-core batch::tests::every_truncation_is_an_error
        FAIL [   0.010s] (3/5) tier-core::fuzz_decoders fuzz_decoders
  stdout ───
    PASS [ not a status line
       START             (4/5) tier-warm::it conformance::runs_the_suite
     SIGSEGV [   0.100s] (4/5) tier-warm::it conformance::runs_the_suite
        PASS [   1.000s] tier-warm::it conformance::older_format_without_counter
        PASS [   0.010s] (  1/151) tier-cold cache::tests::padded_counter
────────────
     Summary [   1.051s] 5 tests run: 3 passed, 2 failed, 0 skipped
        FAIL [   0.010s] (3/5) tier-core::fuzz_decoders fuzz_decoders
     SIGSEGV [   0.100s] (4/5) tier-warm::it conformance::runs_the_suite
error: test run failed",
    );
    let tally = parse_nextest(&out);
    assert_eq!(
        tally.binaries,
        [
            BinaryCounts { name: "tier-core".into(), passed: 2, failed: 0 },
            BinaryCounts { name: "tier-core::fuzz_decoders".into(), passed: 0, failed: 1 },
            BinaryCounts { name: "tier-warm::it".into(), passed: 1, failed: 1 },
            BinaryCounts { name: "tier-cold".into(), passed: 1, failed: 0 },
        ]
    );
    assert_eq!((tally.passed(), tally.failed()), (4, 2));
    assert_eq!(
        tally.failures,
        ["tier-core::fuzz_decoders fuzz_decoders", "tier-warm::it conformance::runs_the_suite"]
    );
}

#[test]
fn nextest_retries_count_once_by_their_final_status() {
    let out = lines(
        "   TRY 1 FAIL [   0.010s] (1/1) tier-hot flaky_test
  TRY 2 PASS [   0.010s] (1/1) tier-hot flaky_test
       FLAKY 2/2 [   0.020s] (1/1) tier-hot flaky_test",
    );
    let tally = parse_nextest(&out);
    assert_eq!((tally.passed(), tally.failed()), (1, 0));
}

#[test]
fn cargo_test_credits_each_result_line_to_its_binary() {
    let out = lines(
        "     Running unittests src/lib.rs (target/debug/deps/tier_core-1a2b3c4d5e6f7a8b)
running 2 tests
test batch::tests::golden_bytes ... ok
test batch::tests::broken ... FAILED
test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s
     Running tests/fuzz_decoders.rs (target/release/deps/fuzz_decoders-00ff00ff00ff00ff)
test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 10.00s
   Doc-tests tier_core
test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.50s",
    );
    let tally = parse_cargo_test(&out);
    assert_eq!(
        tally.binaries,
        [
            BinaryCounts { name: "tier_core unittests src/lib.rs".into(), passed: 1, failed: 1 },
            BinaryCounts { name: "fuzz_decoders tests/fuzz_decoders.rs".into(), passed: 1, failed: 0 },
            BinaryCounts { name: "tier_core doctests".into(), passed: 3, failed: 0 },
        ]
    );
    assert_eq!(tally.failures, ["tier_core unittests src/lib.rs batch::tests::broken"]);
    assert_eq!((tally.passed(), tally.failed()), (5, 1));
}

#[test]
fn numbers_before_words() {
    assert_eq!(count_before("5 tests run: 3 passed, 2 failed, 0 skipped", "failed"), Some(2));
    assert_eq!(count_before("test result: ok. 12 passed; 0 failed;", "passed"), Some(12));
    assert_eq!(count_before("nothing passed here", "passed"), None);
    assert_eq!(parse_number("1_234,"), Some(1234));
    assert_eq!(parse_number("12,345"), Some(12345));
    assert_eq!(parse_number("(1/5)"), None);
    assert_eq!(parse_number("abc"), None);
    assert_eq!(parse_number("seed=42"), None);
}

#[test]
fn the_router_suite_becomes_a_deployment_matrix() {
    let nextest = lines(
        "        PASS [   0.100s] (1/7) tier-router::it suite::hot::restart
        FAIL [   0.100s] (2/7) tier-router::it suite::hot_cold_s3::restart
        PASS [   0.100s] (3/7) tier-router::it suite::hot_cold_s3::live_tail
        PASS [   0.100s] (4/7) tier-router::it config::parses
        PASS [   0.100s] (5/7) tier-router::it sentinel::failover_under_fail
        PASS [   0.100s] (6/7) tier-router suite::unit_test_named_like_the_suite
        PASS [   0.100s] (7/7) tier-cold::it suite::hot::not_the_router",
    );
    let tally = parse_nextest(&nextest);
    assert_eq!(tally.deployments.len(), 3, "{:?}", tally.deployments);
    assert_eq!((tally.passed(), tally.failed()), (6, 1));
    let matrix = tally.deployment_matrix();
    let rows: Vec<&str> = matrix.lines().collect();
    assert_eq!(rows[0].split_whitespace().collect::<Vec<_>>(), ["deployment", "t1", "t2"]);
    assert_eq!(rows[1].split_whitespace().collect::<Vec<_>>(), ["hot", "-", "ok"]);
    assert_eq!(rows[2].split_whitespace().collect::<Vec<_>>(), ["hot_cold_s3", "ok", "FAIL"]);
    assert_eq!(&rows[3..], ["t1 = live_tail", "t2 = restart"]);

    let libtest = lines(
        "     Running unittests src/lib.rs (target/debug/deps/tier_router-0b3e95364faa38e6)
test suite::unit_test_named_like_the_suite ... ok
     Running tests/it/main.rs (target/debug/deps/it-0b3e95364faa38e6)
test config::parses ... ok
test suite::hot::restart ... ok
test sentinel::failover_under_fail ... ok
test suite::hot_cold_s3::restart ... FAILED",
    );
    let tally = parse_cargo_test(&libtest);
    assert_eq!(tally.outcomes[1], ("it tests/it/main.rs".to_owned(), "config::parses".to_owned(), true));
    assert_eq!(
        tally.deployments,
        [
            ("hot".to_owned(), "restart".to_owned(), true),
            ("hot_cold_s3".to_owned(), "restart".to_owned(), false)
        ]
    );
    assert!(parse_nextest(&lines("PASS [ 0.1s] tier-core x::y")).deployment_matrix().is_empty());
}

#[test]
fn a_test_of_the_routers_it_binary_outside_the_suite_is_no_deployment() {
    let nextest = lines(
        "        PASS [   0.100s] (1/2) tier-router::it conformance::paged_cold
        FAIL [   0.100s] (2/2) tier-router::it sentinel_behind::failover_to_the_replica_behind",
    );
    let tally = parse_nextest(&nextest);
    assert_eq!(tally.binaries, [BinaryCounts { name: "tier-router::it".into(), passed: 1, failed: 1 }]);
    assert_eq!(tally.outcomes.len(), 2);
    assert!(tally.deployments.is_empty(), "{:?}", tally.deployments);
    assert!(tally.deployment_matrix().is_empty());
}
