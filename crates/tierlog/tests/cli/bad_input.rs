//! Bad input gives one `error:` line on stderr and the documented exit code, never a
//! panic or a backtrace.

use std::process::Output;

use crate::support::{lines_file, ok, run, stderr, workdir};

fn assert_one_error_line(out: &Output, code: i32, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line on stderr: {err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(lines[0].contains(needle), "{needle:?} not in {err}");
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "{err}");
}

#[test]
fn a_missing_config_file_named_explicitly_is_an_error() {
    let dir = workdir();
    assert_one_error_line(&run(dir.path(), &["--config", "nope.toml", "status"]), 1, "nope.toml");
}

#[test]
fn bad_config_values_and_unknown_keys_name_the_key() {
    let dir = workdir();
    std::fs::write(dir.path().join("bad.toml"), "[hot]\nsegmnet_bytes = 5\n").expect("write");
    assert_one_error_line(&run(dir.path(), &["--config", "bad.toml", "config"]), 1, "segmnet_bytes");
    std::fs::write(dir.path().join("bad2.toml"), "[router]\nretention_interval = \"soon\"\n").expect("write");
    assert_one_error_line(
        &run(dir.path(), &["--config", "bad2.toml", "config"]),
        1,
        "router.retention_interval",
    );
    let out = crate::support::tierlog(dir.path())
        .args(["config"])
        .env("TIERLOG_HOT__CACHE_BYTES", "lots")
        .output()
        .expect("runs");
    assert_one_error_line(&out, 1, "hot.cache_bytes");
}

#[test]
fn an_invalid_topic_name_is_a_usage_error() {
    let dir = workdir();
    assert_one_error_line(&run(dir.path(), &["consume", "no/slashes"]), 2, "no/slashes");
    assert_one_error_line(&run(dir.path(), &["produce", "", "--count", "1"]), 2, "topic");
}

#[test]
fn usage_errors_exit_with_2() {
    let dir = workdir();
    let out = run(dir.path(), &["consume"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(dir.path(), &["consume", "t", "--from", "yesterday"]);
    assert_one_error_line(&out, 2, "--from");
    let out = run(dir.path(), &["consume", "t", "--at", "noon"]);
    assert_one_error_line(&out, 2, "--at");
    let help = ok(dir.path(), &["--help"]);
    assert!(help.contains("Exit codes:") && help.contains("3  `tierlog verify` found problems"), "{help}");
}

#[test]
fn an_offset_beyond_the_end_is_an_error() {
    let dir = workdir();
    lines_file(dir.path(), "in.txt", 5);
    ok(dir.path(), &["produce", "t", "--file", "in.txt"]);
    assert_one_error_line(&run(dir.path(), &["consume", "t", "--from", "6"]), 1, "beyond the end");
}

#[test]
fn a_data_directory_that_cannot_be_created_names_what_failed_and_why_once() {
    let dir = workdir();
    // A file where the data directory (of the local cold tier, created first) must go:
    // the message says what was being done, its source why, and the line says both once.
    std::fs::write(dir.path().join("data"), "in the way").expect("write");
    let io = std::fs::create_dir_all(dir.path().join("data").join("cold")).expect_err("blocked").to_string();
    let out = run(dir.path(), &["--data-dir", "data", "produce", "t", "--count", "1"]);
    assert_one_error_line(&out, 1, "creating the cold directory");
    let err = stderr(&out);
    assert_eq!(err.matches(&io).count(), 1, "{io:?} once in {err}");
}

#[test]
fn an_unreachable_valkey_is_one_clear_error() {
    let dir = workdir();
    std::fs::write(
        dir.path().join("warm.toml"),
        "[hot]\n[warm]\nurls = [\"redis://127.0.0.1:1\"]\nconnect_timeout = \"500ms\"\n[warm.reconnect]\nmax_attempts = 1\n",
    )
    .expect("write");
    assert_one_error_line(
        &run(dir.path(), &["--config", "warm.toml", "produce", "t", "--count", "1"]),
        1,
        "warm",
    );
}

#[test]
fn a_refused_valkey_connection_names_the_url_without_its_password() {
    let dir = workdir();
    std::fs::write(
        dir.path().join("warm.toml"),
        "[hot]\n[warm]\nurls = [\"redis://:hunter2@127.0.0.1:1\"]\nconnect_timeout = \"500ms\"\n\
         [warm.reconnect]\nmax_attempts = 1\n",
    )
    .expect("write");
    let out = run(dir.path(), &["--config", "warm.toml", "produce", "t", "--count", "1"]);
    assert_one_error_line(&out, 1, "connecting to redis://:***@127.0.0.1:1: connection refused");
    let err = stderr(&out);
    assert!(!err.contains("hunter2") && !err.contains("Os {"), "{err}");
}

#[test]
fn global_options_have_their_own_help_heading() {
    let dir = workdir();
    let help = ok(dir.path(), &["produce", "--help"]);
    let (own, global) = help.split_once("Global options:").expect("a Global options heading");
    assert!(own.contains("--acks") && !own.contains("--data-dir") && !own.contains("--config"), "{help}");
    assert!(!own.contains("--server"), "--server is global too: {help}");
    assert!(global.contains("--data-dir") && global.contains("--no-progress"), "{help}");
    assert!(global.contains("--server"), "{help}");
}

/// Under `warm_failure_policy = "degrade"` an unreachable Valkey does not stop the
/// program, as it does not stop the library: the store opens degraded (the WAL alone
/// acknowledges; warm is back-filled once it answers) and the records are read back.
/// The WAL holds the topic already (a fresh topic needs warm's word that it holds
/// nothing, in the library too).
#[test]
fn an_unreachable_valkey_under_degrade_produces_degraded() {
    let dir = workdir();
    std::fs::write(dir.path().join("wal.toml"), "[hot]\n").expect("write");
    ok(dir.path(), &["--config", "wal.toml", "produce", "t", "--count", "5"]);
    std::fs::write(
        dir.path().join("degrade.toml"),
        "[hot]\n[warm]\nurls = [\"redis://127.0.0.1:1\"]\nconnect_timeout = \"500ms\"\n[warm.reconnect]\n\
         max_attempts = 1\n[router]\nwarm_failure_policy = \"degrade\"\n",
    )
    .expect("write");
    let out = ok(dir.path(), &["--config", "degrade.toml", "produce", "t", "--count", "10"]);
    assert!(out.contains("produced 10 records") && out.contains("at offsets [5, 15)"), "{out}");
    let read = ok(dir.path(), &["--config", "degrade.toml", "consume", "t", "--from", "0"]);
    assert_eq!(read.lines().count(), 15, "{read}");
}

#[test]
fn an_unreachable_s3_is_one_clear_error() {
    let dir = workdir();
    std::fs::write(
        dir.path().join("s3.toml"),
        "[hot]\n[cold]\nbackend = { kind = \"s3\", bucket = \"b\", endpoint = \"http://127.0.0.1:1\", \
         allow_http = true, access_key_id = \"a\", secret_access_key = \"s\" }\n",
    )
    .expect("write");
    assert_one_error_line(&run(dir.path(), &["--config", "s3.toml", "status"]), 1, "unreachable");
}

#[test]
fn a_config_file_with_a_huge_number_names_the_line_and_the_limit() {
    let dir = crate::support::workdir();
    std::fs::write(dir.path().join("t.toml"), "[hot]\nsegment_bytes = 123456789012345678901\n")
        .expect("write");
    let out = crate::support::run(dir.path(), &["--config", "t.toml", "config"]);
    assert!(!out.status.success());
    let err = crate::support::stderr(&out);
    assert!(err.contains("line 2") && err.contains("too large for a setting"), "{err}");
}

#[test]
fn consume_from_minus_n_reads_the_last_n_records() {
    let dir = crate::support::workdir();
    crate::support::lines_file(dir.path(), "in.txt", 20);
    crate::support::ok(dir.path(), &["produce", "t", "--file", "in.txt"]);
    let out = crate::support::ok(dir.path(), &["consume", "t", "--from", "-5", "--output", "json"]);
    let offsets: Vec<u64> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("json")["offset"].as_u64().expect("offset")
        })
        .collect();
    assert_eq!(offsets, vec![15, 16, 17, 18, 19]);
    let out = crate::support::ok(dir.path(), &["consume", "t", "--from", "-500", "--output", "json"]);
    assert_eq!(out.lines().count(), 20, "more than the topic holds: everything");
}
