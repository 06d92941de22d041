//! produce → consume, status, export, recover, config and demo.

use std::io::Write;

use crate::support::{lines_file, ok, run, spawn_piped, stderr, tierlog, workdir};

#[test]
fn produce_and_consume_round_trip_100k_lines_through_pipes() {
    let dir = workdir();
    let mut input = Vec::new();
    for i in 0..100_000u32 {
        // Some lines are not UTF-8 and some are empty: raw output must give them back.
        match i % 1000 {
            7 => input.extend_from_slice(b"\xff\xfe binary\n"),
            8 => input.push(b'\n'),
            _ => input.extend_from_slice(format!("message {i}\n").as_bytes()),
        }
    }
    let mut producer = spawn_piped(dir.path(), &["produce", "orders", "--batch", "5000"]);
    let mut stdin = producer.stdin.take().expect("stdin");
    let data = input.clone();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = producer.wait_with_output().expect("produce finishes");
    writer.join().expect("writer thread").expect("written to the pipe");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("produced 100000 records"));

    let out = tierlog(dir.path()).args(["consume", "orders"]).output().expect("consume runs");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(out.stdout.len(), input.len());
    assert!(out.stdout == input, "consumed bytes differ from the produced lines");
}

#[test]
fn consume_positions_json_output_and_files() {
    let dir = workdir();
    lines_file(dir.path(), "in.txt", 10);
    ok(dir.path(), &["produce", "t", "--file", "in.txt", "--key", "k1"]);
    let json = ok(dir.path(), &["consume", "t", "--from", "3", "--max", "2", "--output", "json"]);
    let rows: Vec<serde_json::Value> =
        json.lines().map(|l| serde_json::from_str(l).expect("json line")).collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["offset"], 3);
    assert_eq!(rows[1]["offset"], 4);
    assert_eq!(rows[0]["payload"], "line 3 yyy");
    assert_eq!(rows[0]["key"], "k1");
    assert!(rows[0]["timestamp"].as_i64().expect("timestamp") > 1_600_000_000_000);

    // Time positions: before everything → all; far in the future → nothing.
    assert_eq!(ok(dir.path(), &["consume", "t", "--at", "0"]).lines().count(), 10);
    assert_eq!(ok(dir.path(), &["consume", "t", "--at", "2999-01-01T00:00:00Z"]), "");
    assert_eq!(ok(dir.path(), &["consume", "t", "--from", "latest"]), "");
    assert_eq!(ok(dir.path(), &["consume", "t", "--from", "10"]), "");

    let said = ok(dir.path(), &["consume", "t", "--out", "out.txt"]);
    assert!(said.contains("consumed 10 records"), "{said}");
    let written = std::fs::read(dir.path().join("out.txt")).expect("out file");
    assert_eq!(written, std::fs::read(dir.path().join("in.txt")).expect("in file"));

    // Synthetic records with a size.
    let said = ok(dir.path(), &["produce", "synth", "--count", "50", "--size", "1KiB", "--batch", "7"]);
    assert!(said.contains("produced 50 records"), "{said}");
    let out = ok(dir.path(), &["consume", "synth", "--from", "49"]);
    assert_eq!(out.len(), 1025);
    assert!(out.starts_with("record-49 "));
}

#[test]
fn status_export_and_recover_after_losing_the_wal() {
    let dir = workdir();
    lines_file(dir.path(), "in.txt", 1000);
    ok(dir.path(), &["produce", "t", "--file", "in.txt", "--batch", "100"]);

    let status: serde_json::Value =
        serde_json::from_str(&ok(dir.path(), &["status", "--json"])).expect("json");
    assert_eq!(status[0]["topic"], "t");
    assert_eq!(status[0]["committed"], 1000);
    assert_eq!(status[0]["hot"]["end"], 1000);
    assert_eq!(status[0]["cold"]["end"], 0);
    assert_eq!(status[0]["export_lag"], 1000);

    let said = ok(dir.path(), &["export"]);
    assert!(said.contains("t: exported 1 segment,"), "{said}");
    let table = ok(dir.path(), &["status"]);
    let row = table.lines().find(|l| l.starts_with("t ")).expect("a row for t");
    assert!(row.contains("[0, 1000)") && row.trim_end().ends_with(" 0"), "{table}");

    // Lose the WAL: recovery continues from cold at the same offsets.
    std::fs::remove_dir_all(dir.path().join("data/hot")).expect("remove the WAL");
    // Without --topic, recover finds the topic in the state directory and cold.
    let said = ok(dir.path(), &["recover"]);
    assert!(said.contains("t: WAL") && said.contains("next offset 1000"), "{said}");
    assert_eq!(ok(dir.path(), &["consume", "t"]).lines().count(), 1000);
}

#[test]
fn config_prints_the_effective_configuration_with_overrides() {
    let dir = workdir();
    let out = tierlog(dir.path())
        .args(["config"])
        .env("TIERLOG_HOT__SEGMENT_BYTES", "1MiB")
        .output()
        .expect("config runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(text.contains("segment_bytes = 1048576"), "{text}");
    assert!(text.contains("[cold"), "{text}");

    std::fs::write(
        dir.path().join("tierlog.toml"),
        "[hot]\nsegment_bytes = \"2MiB\"\n[warm]\nurls = [\"redis://u:pw123@127.0.0.1:1\"]\npassword = \"pw456\"\n",
    )
    .expect("write config");
    let text = ok(dir.path(), &["config"]);
    assert!(text.contains("segment_bytes = 2097152"), "{text}");
    assert!(!text.contains("pw123") && !text.contains("pw456"), "{text}");
    assert!(text.contains("tierlog.toml"), "{text}");
    // A file is the whole configuration: no [cold] table, no cold tier.
    assert!(!text.contains("[cold"), "{text}");
}

#[test]
fn config_prints_the_server_and_client_tables_without_their_tokens() {
    let dir = workdir();
    std::fs::write(dir.path().join("tokens"), "file-token-4b1d\n").expect("token file");
    std::fs::write(
        dir.path().join("tierlog.toml"),
        "[hot]\n\n[server]\nlisten = \"127.0.0.1:9000\"\ntokens = [\"server-token-7e3a\", \"server-token-9c2f\"]\n\
         token_file = \"tokens\"\n\n[client]\nserver = \"http://127.0.0.1:9000\"\ntoken = \"client-token-5d6e\"\n",
    )
    .expect("write config");
    let text = ok(dir.path(), &["config"]);
    for token in ["server-token-7e3a", "server-token-9c2f", "file-token-4b1d", "client-token-5d6e"] {
        assert!(!text.contains(token), "tierlog config printed a token:\n{text}");
    }
    let printed: toml::Table =
        toml::from_str(text.split_once('\n').expect("a comment line").1).expect("TOML");
    let server = printed["server"].as_table().unwrap_or_else(|| panic!("a [server] table:\n{text}"));
    assert_eq!(server["listen"].as_str(), Some("127.0.0.1:9000"), "{text}");
    assert_eq!(server["tokens"], toml::Value::Array(vec!["***".into(), "***".into()]), "{text}");
    assert_eq!(server["token_file"].as_str(), Some("tokens"), "the token file's path is shown:\n{text}");
    // The effective values of what the file leaves out.
    assert_eq!(server["drain_timeout"].as_str(), Some("30s"), "{text}");
    assert_eq!(server["max_body_bytes"].as_integer(), Some(64 << 20), "{text}");
    assert_eq!(server["max_connections"].as_integer(), Some(1024), "{text}");
    let client = printed["client"].as_table().unwrap_or_else(|| panic!("a [client] table:\n{text}"));
    assert_eq!(client["server"].as_str(), Some("http://127.0.0.1:9000"), "{text}");
    assert_eq!(client["token"].as_str(), Some("***"), "{text}");

    // The defaults: both tables, with what `serve` and the client would use.
    std::fs::remove_file(dir.path().join("tierlog.toml")).expect("remove config");
    let text = ok(dir.path(), &["config"]);
    let printed: toml::Table =
        toml::from_str(text.split_once('\n').expect("a comment line").1).expect("TOML");
    assert_eq!(printed["server"]["listen"].as_str(), Some("127.0.0.1:7171"), "{text}");
    assert!(printed["client"].as_table().is_some_and(toml::Table::is_empty), "{text}");
}

#[test]
fn demo_completes_and_prints_the_tier_table() {
    let dir = workdir();
    let out = run(dir.path(), &["demo"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("read from offset 0:"), "{text}");
    assert!(text.contains("read from timestamp"), "{text}");
    assert!(text.lines().any(|l| l.trim_start().starts_with("cold  [0, ")), "cold serves the oldest: {text}");
    let hot_row =
        text.lines().find(|l| l.trim_start().starts_with("hot ")).expect("the WAL served the newest");
    assert!(hot_row.contains(", 50000)"), "{text}");
    assert!(text.contains("50000 records,"), "{text}");
    assert!(text.contains("records/s"), "{text}");
    assert!(text.contains("(offset 25000)"), "{text}");
}

/// `demo` exports, trims and prunes its own topic only: a user topic's exported WAL
/// segments (due under the demo's small retention) stay where they are.
#[test]
fn demo_leaves_other_topics_alone() {
    let dir = workdir();
    let small = |args: &[&str]| {
        let out =
            tierlog(dir.path()).args(args).env("TIERLOG_HOT__SEGMENT_BYTES", "64KiB").output().expect("runs");
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    };
    small(&["produce", "user", "--count", "20000", "--size", "100"]);
    small(&["export", "user"]);
    let wal = || {
        let entries = std::fs::read_dir(dir.path().join("data/hot/user")).expect("user's WAL");
        entries.filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "seg"))).count()
    };
    let before = wal();
    assert!(before > 8, "enough segments for the demo's retention to want some: {before}");
    ok(dir.path(), &["demo", "--records", "2000"]);
    assert_eq!(wal(), before, "the demo deleted another topic's WAL segments");
    assert_eq!(ok(dir.path(), &["consume", "user", "--from", "0", "--max", "1"]).lines().count(), 1);
}

/// Without a server nothing ran retention from the CLI: `maintain` exports, prunes the
/// WAL and trims once, then exits; every record stays readable (from cold).
#[test]
fn maintain_prunes_the_wal_once_and_consume_names_the_serving_tier() {
    let dir = workdir();
    let small = |args: &[&str]| {
        let out = tierlog(dir.path())
            .args(args)
            .env("TIERLOG_HOT__SEGMENT_BYTES", "64KiB")
            .env("TIERLOG_HOT__RETENTION_BYTES", "128KiB")
            .output()
            .expect("runs");
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        String::from_utf8(out.stdout).expect("utf-8")
    };
    let produced = small(&["produce", "user", "--count", "20000", "--size", "100"]);
    // The active segment is never exported by the background exporter.
    assert!(produced.contains("records not yet in cold"), "{produced}");
    let wal_bytes = || -> u64 {
        let files = std::fs::read_dir(dir.path().join("data/hot/user")).expect("user's WAL");
        files.map(|f| f.expect("entry").metadata().expect("metadata").len()).sum()
    };
    let before = wal_bytes();
    assert!(before > 1 << 20, "{before}");
    let out = small(&["maintain", "user"]);
    assert!(out.contains("user: exported "), "{out}");
    assert!(out.contains("user: retention deleted "), "{out}");
    // Retention keeps 128 KiB, plus the active segment and one it could not split.
    assert!(wal_bytes() <= 256 << 10, "the WAL was pruned to its retention: {} bytes: {out}", wal_bytes());
    assert_eq!(ok(dir.path(), &["consume", "user"]).lines().count(), 20_000);

    // Each JSON record names the tier that served it, and stderr sums them up per tier.
    let out = run(dir.path(), &["consume", "user", "--output", "json"]);
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!((rows[0]["tier"].as_str(), rows[19_999]["tier"].as_str()), (Some("cold"), Some("hot")));
    let err = stderr(&out);
    assert!(err.starts_with("read 20000 records from user:\n"), "{err}");
    let tiers: Vec<&str> = err.lines().skip(2).filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(tiers, ["cold", "hot"], "{err}");
}
