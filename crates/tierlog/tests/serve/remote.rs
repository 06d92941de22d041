//! `tierlog produce`, `consume`, `status`, `export` and `verify` through a running server
//! (`--server URL` or the `[client]` table): nothing is opened locally.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::support::{Served, serve, serve_on, serve_with_env, tree, workdir};

/// Runs the CLI in `dir` (not the server's directory) with `args`.
fn cli(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tierlog"));
    cmd.current_dir(dir).args(args).stdin(Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("TIERLOG_") && k.contains("__") {
            cmd.env_remove(k);
        }
    }
    cmd.output().expect("tierlog runs")
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = cli(dir, args);
    assert!(out.status.success(), "tierlog {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

#[tokio::test]
async fn produce_and_consume_through_a_server_open_nothing_locally() {
    let served = workdir();
    let server = serve(served.path(), &[]);
    let here = workdir();
    // CRLF lines lose their `\r` as in embedded mode; --acks gets one line per batch.
    std::fs::write(here.path().join("input"), "one\r\ntwo\nthree\r\nfour\nfive\n").expect("input");
    let url = server.url.as_str();
    let produced = ok(
        here.path(),
        &["--server", url, "produce", "remote", "--file", "input", "--batch", "2", "--acks", "acks"],
    );
    assert!(
        produced.starts_with("produced 5 records") && produced.contains("at offsets [0, 5)"),
        "{produced}"
    );
    // The server's cold tier (a local directory here) holds none of them yet: the active
    // segment is not sealed. The summary says so, as a local produce does.
    assert!(produced.contains("5 records not yet in cold"), "{produced}");
    let acks = std::fs::read_to_string(here.path().join("acks")).expect("acks file");
    assert_eq!(
        acks,
        "{\"start\":0,\"end\":2,\"count\":2}\n{\"start\":2,\"end\":4,\"count\":2}\n{\"start\":4,\"end\":5,\"count\":1}\n",
        "the fields in the documented order"
    );
    let synthetic = ok(
        here.path(),
        &["produce", "remote", "--count", "3", "--size", "12", "--key", "k", "--server", url],
    );
    assert!(synthetic.contains("at offsets [5, 8)"), "{synthetic}");

    let raw = ok(here.path(), &["--server", url, "consume", "remote", "--max", "5"]);
    assert_eq!(raw, "one\ntwo\nthree\nfour\nfive\n");
    let json = ok(here.path(), &["--server", url, "consume", "remote", "--from", "-2", "--output", "json"]);
    let lines: Vec<serde_json::Value> =
        json.lines().map(|l| serde_json::from_str(l).expect("json")).collect();
    assert_eq!(lines.len(), 2, "{json}");
    assert_eq!(lines[0]["offset"], 6);
    assert_eq!(lines[0]["key"], "k");
    assert_eq!(lines[1]["payload"], "record-2 xxx");

    // A follow from the end gets the record produced after it.
    let end = "8";
    let follower = Command::new(env!("CARGO_BIN_EXE_tierlog"))
        .current_dir(here.path())
        .args(["--server", url, "consume", "remote", "--from", end, "--follow", "--max", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("consume --follow");
    std::fs::write(here.path().join("late"), "late\n").expect("input");
    ok(here.path(), &["--server", url, "produce", "remote", "--file", "late"]);
    let followed = tokio::task::spawn_blocking(move || follower.wait_with_output())
        .await
        .expect("join")
        .expect("output");
    assert!(followed.status.success());
    assert_eq!(String::from_utf8_lossy(&followed.stdout), "late\n");

    let beyond = cli(here.path(), &["--server", url, "consume", "remote", "--from", "99"]);
    assert_eq!(beyond.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&beyond.stderr).contains("beyond the end"), "{beyond:?}");
    let ghost = cli(here.path(), &["--server", url, "consume", "ghost"]);
    assert_eq!(ghost.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&ghost.stderr).contains("not_found"), "{ghost:?}");
    // recover through the server reads its reports, opening nothing here.
    let reports = ok(here.path(), &["--server", url, "recover"]);
    assert!(reports.contains("remote: when the server opened it: replayed -, next offset 0"), "{reports}");
    for command in [&["maintain"][..], &["config"], &["demo"], &["serve"]] {
        let args: Vec<&str> = ["--server", url].iter().chain(command).copied().collect();
        let misuse = cli(here.path(), &args);
        assert_eq!(misuse.status.code(), Some(2), "--server {command:?} is a usage error: {misuse:?}");
        assert!(String::from_utf8_lossy(&misuse.stderr).contains("--server is taken by"), "{misuse:?}");
    }

    let local: Vec<String> =
        tree(here.path()).into_iter().filter(|p| !matches!(p.as_str(), "input" | "late" | "acks")).collect();
    assert!(local.is_empty(), "nothing is opened locally: {local:?}");
    assert!(server.terminate().success());
}

#[tokio::test]
async fn the_client_table_names_the_server_and_its_token() {
    let served = workdir();
    std::fs::write(served.path().join("tokens"), "client-token-1234\n").expect("tokens");
    let server = serve(served.path(), &["--token-file", "tokens"]);
    let here = workdir();
    std::fs::write(
        here.path().join("tierlog.toml"),
        format!(
            "[hot]\ndata_dir = \"unused\"\n\n[client]\nserver = \"{}\"\ntoken = \"client-token-1234\"\n",
            server.url
        ),
    )
    .expect("config");
    std::fs::write(here.path().join("input"), "configured\n").expect("input");
    let produced = ok(here.path(), &["produce", "t", "--file", "input"]);
    assert!(produced.contains("at offsets [0, 1)"), "{produced}");
    assert_eq!(ok(here.path(), &["consume", "t"]), "configured\n");
    assert!(!here.path().join("unused").exists(), "the local store was not opened");
    let printed = ok(here.path(), &["config"]);
    assert!(!printed.contains("client-token-1234"), "{printed}");
    assert!(server.terminate().success());
}

/// A server's directory, the server (default configuration) and a directory for the CLI.
fn served_and_here() -> (tempfile::TempDir, Served, tempfile::TempDir) {
    let served = workdir();
    let server = serve(served.path(), &[]);
    (served, server, workdir())
}

#[tokio::test]
async fn status_export_and_verify_through_a_server() {
    let (served, server, here) = served_and_here();
    let url = server.url.as_str();
    std::fs::write(here.path().join("input"), "a\nb\nc\nd\ne\n").expect("input");
    ok(here.path(), &["--server", url, "produce", "orders", "--file", "input"]);
    ok(here.path(), &["--server", url, "produce", "other", "--file", "input"]);

    // The local table's columns; what the API does not report is `-` and said so.
    let out = cli(here.path(), &["--server", url, "status"]);
    assert!(out.status.success(), "{out:?}");
    let table = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(
        lines[0].starts_with("topic") && lines[0].contains("hot segs") && lines[0].contains("export lag")
    );
    let row: Vec<&str> = lines[1].split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
    assert_eq!(row[..5], ["orders", "5", "[0, 5)", "-", "-"], "{table}");
    assert_eq!(row.last(), Some(&"5"), "export lag before export: {table}");
    assert!(lines[2].starts_with("other"), "{table}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("segment counts and sizes are not shown"),
        "{out:?}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&ok(here.path(), &["--server", url, "status", "orders", "--json"]))
            .expect("json");
    assert_eq!(json.as_array().map(Vec::len), Some(1), "{json}");
    assert_eq!(json[0]["topic"], "orders");
    assert_eq!(json[0]["committed"], 5);
    assert_eq!(json[0]["hot"], serde_json::json!({"start": 0, "end": 5}));
    assert_eq!(json[0]["warm"], serde_json::Value::Null);
    assert_eq!(json[0]["export_lag"], 5);
    let ghost = cli(here.path(), &["--server", url, "status", "ghost"]);
    assert_eq!(ghost.status.code(), Some(1), "{ghost:?}");
    assert!(String::from_utf8_lossy(&ghost.stderr).contains("not_found"), "{ghost:?}");

    // The background exporter may store the segment first (the answer then lists none).
    let exported = ok(here.path(), &["--server", url, "export", "orders"]);
    let by_export = "orders: exported 1 segment, cold holds offsets up to 5\n  orders [0, 5)\n\
                     uploaded 1 segment (through a server: sizes are not reported)\n";
    let by_exporter = "orders: exported 0 segments, cold holds offsets up to 5\n\
                       uploaded 0 segments (through a server: sizes are not reported)\n";
    assert!(exported == by_export || exported == by_exporter, "{exported}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(here.path(), &["--server", url, "status", "--json"])).expect("json");
    assert_eq!(json[0]["cold"], serde_json::json!({"start": 0, "end": 5}), "{json}");
    assert_eq!(json[0]["export_lag"], 0);
    let all = ok(here.path(), &["--server", url, "export"]);
    assert!(all.contains("orders: exported 0 segments, cold holds offsets up to 5\n"), "{all}");
    assert!(
        all.contains("other: exported ")
            && all.contains("other: exported 1 segment, cold holds offsets up to 5\n  other [0, 5)\n")
            || all.contains("other: exported 0 segments, cold holds offsets up to 5\n"),
        "{all}"
    );

    let verified = ok(here.path(), &["--server", url, "verify"]);
    assert!(verified.starts_with("verified 10 records in "), "{verified}");
    assert!(verified.trim_end().ends_with("of 2 topics online, below each topic's commit point (through a server: records read through the tiers, not WAL files and cold objects one by one): no problems"), "{verified}");
    let ghost = cli(here.path(), &["--server", url, "verify", "ghost"]);
    assert_eq!(ghost.status.code(), Some(1), "{ghost:?}");

    let local: Vec<String> = tree(here.path()).into_iter().filter(|p| p != "input").collect();
    assert!(local.is_empty(), "nothing is opened locally: {local:?}");
    assert!(server.terminate().success());

    // The local status takes a topic too.
    let table = ok(served.path(), &["--data-dir", "data", "status", "other"]);
    assert_eq!(table.lines().count(), 2, "{table}");
    assert!(table.lines().nth(1).is_some_and(|l| l.starts_with("other ")), "{table}");
    let ghost = cli(served.path(), &["--data-dir", "data", "status", "ghost"]);
    assert_eq!(ghost.status.code(), Some(1), "{ghost:?}");
    assert!(String::from_utf8_lossy(&ghost.stderr).contains("topic 'ghost' does not exist"), "{ghost:?}");
}

/// Starts `tierlog ARGS…` in `dir` with its stdout piped, and returns once its stderr
/// says it waits for the topic (the line is checked here).
fn spawn_waiting(dir: &Path, args: &[&str]) -> std::process::Child {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tierlog"))
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tierlog starts");
    let mut line = String::new();
    let stderr = child.stderr.take().expect("piped stderr");
    std::io::BufReader::new(stderr).read_line(&mut line).expect("its stderr");
    assert!(line.starts_with("waiting for topic ") && line.contains(" to exist"), "{line:?}");
    // The line is printed once the Ctrl-C handler is installed, after the first poll
    // found no topic: it waits instead of failing.
    assert!(child.try_wait().expect("try_wait").is_none(), "it waits for the topic instead of failing");
    child
}

#[tokio::test]
async fn consume_follow_wait_waits_for_the_topic_to_exist() {
    let (_served, server, here) = served_and_here();
    let url = server.url.as_str();

    let waiting = spawn_waiting(
        here.path(),
        &["--server", url, "consume", "fresh", "--follow", "--wait", "--max", "2"],
    );
    std::fs::write(here.path().join("input"), "first\nsecond\n").expect("input");
    ok(here.path(), &["--server", url, "produce", "fresh", "--file", "input"]);
    let out =
        tokio::task::spawn_blocking(move || waiting.wait_with_output()).await.expect("join").expect("output");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "first\nsecond\n", "followed from earliest");

    // Ctrl-C ends the wait, as it ends a follow.
    let never = spawn_waiting(here.path(), &["--server", url, "consume", "never", "--follow", "--wait"]);
    let status = Command::new("kill").args(["-INT", &never.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let out =
        tokio::task::spawn_blocking(move || never.wait_with_output()).await.expect("join").expect("output");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");

    // Without --wait an unknown topic stays an error, with --follow too.
    let ghost = cli(here.path(), &["--server", url, "consume", "never", "--follow"]);
    assert_eq!(ghost.status.code(), Some(1), "{ghost:?}");
    assert!(String::from_utf8_lossy(&ghost.stderr).contains("not_found"), "{ghost:?}");
    // --wait is for --follow, and over a server only: a local consume holds the data
    // directory's lock, so nothing else could create the topic.
    let alone = cli(here.path(), &["--server", url, "consume", "never", "--wait"]);
    assert_eq!(alone.status.code(), Some(2), "{alone:?}");
    let local = cli(here.path(), &["--data-dir", "data", "consume", "never", "--follow", "--wait"]);
    assert_eq!(local.status.code(), Some(2), "{local:?}");
    assert!(String::from_utf8_lossy(&local.stderr).contains("--wait needs --server"), "{local:?}");
    assert!(!here.path().join("data").exists(), "the refused local consume opened nothing");
    assert!(server.terminate().success());
}

#[tokio::test]
async fn verify_through_a_server_exits_3_on_damage_and_export_needs_cold() {
    // No WAL cache: the damage is read from the files.
    let served = workdir();
    let server = serve_with_env(served.path(), &[], &[("TIERLOG_HOT__CACHE_BYTES", "0")]);
    let url = server.url.as_str();
    let here = workdir();
    std::fs::write(here.path().join("input"), "payload-1\npayload-2\n").expect("input");
    ok(here.path(), &["--server", url, "produce", "damaged", "--file", "input"]);
    ok(here.path(), &["--server", url, "export", "damaged"]);
    // The second record's payload, in place, in the WAL's sealed segment and in cold.
    let mut damaged = 0;
    for file in tree(served.path()) {
        if file.contains("/damaged/") && file.ends_with(".seg") {
            let path = served.path().join(&file);
            let mut bytes = std::fs::read(&path).expect("segment");
            if let Some(at) = bytes.windows(9).position(|w| w == b"payload-2") {
                bytes[at] = b'P';
                let mut f = std::fs::OpenOptions::new().write(true).open(&path).expect("open");
                std::io::Write::write_all(&mut f, &bytes).expect("damage");
                damaged += 1;
            }
        }
    }
    assert_eq!(damaged, 2, "the WAL's segment and the cold object");
    let out = cli(here.path(), &["--server", url, "verify", "damaged"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("damaged: ") && stdout.contains("CRC mismatch"), "{out:?}");
    assert_eq!(stdout.lines().count(), 1, "one line per problem: {out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains(": 1 problem"), "{out:?}");
    assert!(server.terminate().success());

    // A server without cold: export says so, as the local command does.
    let hot_only = workdir();
    std::fs::write(hot_only.path().join("tierlog.toml"), "[hot]\n").expect("config");
    let server = serve(hot_only.path(), &[]);
    let url = server.url.as_str();
    ok(here.path(), &["--server", url, "produce", "t", "--file", "input"]);
    let out = cli(here.path(), &["--server", url, "export"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no cold tier"), "{out:?}");
    let table = ok(here.path(), &["--server", url, "status"]);
    assert!(table.lines().nth(1).is_some_and(|l| l.contains("disabled")), "{table}");
    assert!(server.terminate().success());
}

/// The `(offset, tier)` of each JSON line of a `consume --output json`.
fn tiers_of(json: &str) -> Vec<(u64, String)> {
    json.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON record");
            let tier = v["tier"].as_str().unwrap_or_else(|| panic!("no tier in {l}")).to_owned();
            (v["offset"].as_u64().expect("an offset"), tier)
        })
        .collect()
}

#[tokio::test]
async fn consume_json_through_a_server_says_which_tier_served_each_record() {
    // Offsets 0..10 in cold only (exported, then deleted from the WAL by retention),
    // 10..15 in the WAL.
    let served = workdir();
    std::fs::write(
        served.path().join("tierlog.toml"),
        "[hot]\ndata_dir = \"data/hot\"\nretention_bytes = 1\n\n\
         [cold]\nbackend = { kind = \"local\", path = \"data/cold\" }\n\n[router]\nstate_dir = \"data/router\"\n",
    )
    .expect("config");
    ok(served.path(), &["produce", "tiered", "--count", "10", "--size", "20"]);
    ok(served.path(), &["maintain", "tiered"]);
    ok(served.path(), &["produce", "tiered", "--count", "5", "--size", "20"]);
    let local = ok(served.path(), &["consume", "tiered", "--output", "json"]);
    let expected: Vec<(u64, String)> =
        (0..15).map(|o| (o, if o < 10 { "cold" } else { "hot" }.to_owned())).collect();
    assert_eq!(tiers_of(&local), expected, "the local consume: {local}");
    let summary = |out: Output| {
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let local_summary = summary(cli(served.path(), &["consume", "tiered"]));
    assert!(
        local_summary.contains("read 15 records from tiered:") && local_summary.contains("[0, 10)"),
        "{local_summary}"
    );

    let server = serve(served.path(), &[]);
    let url = server.url.as_str();
    let here = workdir();
    let remote = ok(here.path(), &["--server", url, "consume", "tiered", "--output", "json"]);
    assert_eq!(tiers_of(&remote), expected, "{remote}");
    // The same lines as the local consume, tier included.
    assert_eq!(remote, local);
    // A raw consume says on stderr which tier served which offsets, remotely as locally.
    let remote_summary = summary(cli(here.path(), &["--server", url, "consume", "tiered"]));
    assert_eq!(remote_summary, local_summary, "the remote summary is the local one");

    // A follow says `live` for a record it gets from the WAL's tail.
    let follower = Command::new(env!("CARGO_BIN_EXE_tierlog"))
        .current_dir(here.path())
        .args(["--server", url, "consume", "tiered", "--from", "13", "--follow", "--max", "3"])
        .args(["--output", "json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("consume --follow");
    ok(here.path(), &["--server", url, "produce", "tiered", "--count", "1"]);
    let followed = tokio::task::spawn_blocking(move || follower.wait_with_output())
        .await
        .expect("join")
        .expect("output");
    assert!(followed.status.success(), "{followed:?}");
    let tiers = tiers_of(&String::from_utf8_lossy(&followed.stdout));
    assert_eq!(tiers[..2], [(13, "hot".to_owned()), (14, "hot".to_owned())], "{tiers:?}");
    assert_eq!(tiers[2].0, 15);
    assert!(matches!(tiers[2].1.as_str(), "live" | "hot"), "{tiers:?}");
    assert!(server.terminate().success());
}

#[tokio::test]
async fn ctrl_c_on_a_remote_produce_reports_what_was_acknowledged_and_exits_130() {
    use std::io::{BufRead, BufReader, Read, Write};

    let (_served, server, here) = served_and_here();
    let url = server.url.as_str();
    let mut producer = Command::new(env!("CARGO_BIN_EXE_tierlog"))
        .current_dir(here.path())
        .args(["--server", url, "produce", "t", "--acks", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("produce");
    let mut stdin = producer.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(producer.stdout.take().expect("stdout"));
    stdin.write_all(b"a\nb\nc\n").expect("write lines");
    stdin.flush().expect("flush");
    // Wait until all three are acknowledged (lines read are sent without waiting for a
    // full batch); stdin stays open.
    let mut stdout = crate::within(
        "the acknowledgement of the three lines",
        tokio::task::spawn_blocking(move || {
            let mut acked = 0;
            while acked < 3 {
                let mut line = String::new();
                assert!(stdout.read_line(&mut line).expect("read an ack") > 0, "produce ended early");
                let ack: serde_json::Value = serde_json::from_str(&line).expect("a JSON ack");
                acked = ack["end"].as_u64().expect("end");
            }
            stdout
        }),
    )
    .await
    .expect("join");
    let status = Command::new("kill").args(["-INT", &producer.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let out = tokio::task::spawn_blocking(move || producer.wait_with_output())
        .await
        .expect("join")
        .expect("produce ends");
    drop(stdin);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted: 3 records acknowledged at offsets [0, 3)"), "{err}");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("the rest of stdout");
    assert!(rest.contains("produced 3 records") && rest.contains("at offsets [0, 3)"), "{rest}");
    assert_eq!(ok(here.path(), &["--server", url, "consume", "t"]), "a\nb\nc\n");
    assert!(server.terminate().success());
}

#[tokio::test]
async fn a_remote_follower_resumes_after_the_server_drains_and_restarts() {
    follower_survives_a_restart("TERM").await;
}

#[tokio::test]
async fn a_remote_follower_resumes_after_the_server_is_killed_and_restarts() {
    follower_survives_a_restart("KILL").await;
}

/// The README's "One server, many clients" walkthrough: a server, a producer, a follower in
/// another terminal, the status page, Ctrl-C on the server (SIGINT: a drain, exit 0), the
/// server started again, more records: the follower prints every record once, in order.
#[tokio::test]
async fn the_readme_walkthrough_ctrl_c_on_the_server_and_a_restart_lose_nothing() {
    follower_survives_a_restart("INT").await;
}

/// A `consume --follow` through a server that `signal` stops and that restarts on the
/// same address and data prints every record once, in order, and says it reconnected.
/// Before the stop the status page shows the topic.
async fn follower_survives_a_restart(signal: &'static str) {
    use std::io::{BufRead, BufReader, Read};

    let (served, server, here) = served_and_here();
    let url = server.url.clone();
    let (before, after) = (40, 25);
    let lines = |prefix: &str, n: usize| (0..n).map(|i| format!("{prefix}-{i}\n")).collect::<String>();
    std::fs::write(here.path().join("before"), lines("before", before)).expect("input");
    std::fs::write(here.path().join("after"), lines("after", after)).expect("input");
    let acks = ok(
        here.path(),
        &["--server", &url, "produce", "t", "--file", "before", "--batch", "7", "--acks", "-"],
    );
    assert!(
        acks.lines().next() == Some(r#"{"start":0,"end":7,"count":7}"#)
            && acks.contains(r#"{"start":35,"end":40,"count":5}"#),
        "each batch's offsets as it is acknowledged: {acks}"
    );

    let total = (before + after).to_string();
    let mut follower = Command::new(env!("CARGO_BIN_EXE_tierlog"))
        .current_dir(here.path())
        .args(["--server", &url, "consume", "t", "--follow", "--max", &total])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("consume --follow");
    // Every record produced so far is printed before the server goes away.
    let mut stdout = BufReader::new(follower.stdout.take().expect("stdout"));
    let (stdout, mut printed) = crate::within(
        "the follower printing the first records",
        tokio::task::spawn_blocking(move || {
            let mut printed = String::new();
            for _ in 0..before {
                assert!(stdout.read_line(&mut printed).expect("a line") > 0, "the follower ended early");
            }
            (stdout, printed)
        }),
    )
    .await
    .expect("join");
    assert_eq!(printed, lines("before", before));

    // The status page shows the topic (a real browser renders it in page.rs).
    let page =
        reqwest::get(format!("{url}/")).await.expect("the status page").text().await.expect("its text");
    assert!(
        page.contains("data-topic=\"t\"") && page.contains("WAL [0, 40)"),
        "the page shows topic t's WAL range: {page}"
    );

    // A drain ends the follow with `closed`, a kill cuts its connection; either way the
    // follower waits for the server to come back at the same address, over the same data.
    let listen = url.trim_start_matches("http://").to_owned();
    if signal == "TERM" || signal == "INT" {
        let status = tokio::task::spawn_blocking(move || server.stop_with(signal)).await.expect("join");
        assert!(status.success(), "{status:?}");
    } else {
        server.signal(signal);
        tokio::task::spawn_blocking(move || drop(server)).await.expect("join");
    }
    let server = serve_on(served.path(), &listen, &[], &[]);
    assert_eq!(server.url, url);
    ok(here.path(), &["--server", &url, "produce", "t", "--file", "after", "--batch", "4"]);

    let out = crate::within(
        "the follower printing every record and ending at --max",
        tokio::task::spawn_blocking(move || {
            let mut stdout = stdout;
            stdout.read_to_string(&mut printed).expect("the rest of stdout");
            let out = follower.wait_with_output().expect("the follower ends");
            (printed, out)
        }),
    )
    .await
    .expect("join");
    let (printed, out) = out;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(printed, lines("before", before) + &lines("after", after), "no record lost or printed twice");
    assert!(stderr.contains("reconnecting") && stderr.contains("resuming at offset 40"), "{stderr}");
    if signal == "TERM" || signal == "INT" {
        // The drain's error ended a read whose answer had begun: said as such, not as an
        // HTTP status.
        assert!(
            stderr.contains("the server ended the read: closed") && !stderr.contains("answered 200"),
            "{stderr}"
        );
    }
    assert!(server.terminate().success());
}

#[tokio::test]
async fn large_records_are_sent_in_batches_the_server_accepts() {
    // 1,000 records of 1 MiB per batch (the default --batch) would be a 1,000 MiB body,
    // over the server's 64 MiB limit: remote produce cuts batches by bytes too.
    let served = workdir();
    let server = serve(served.path(), &[]);
    let here = workdir();
    let url = server.url.as_str();
    let out = ok(
        here.path(),
        &["--server", url, "produce", "big", "--count", "80", "--size", "1MiB", "--acks", "acks"],
    );
    assert!(out.contains("produced 80 records") && out.contains("at offsets [0, 80)"), "{out}");
    let acks = std::fs::read_to_string(here.path().join("acks")).expect("acks file");
    assert!(acks.lines().count() > 1, "{acks}");
    let mut input = Vec::new();
    for i in 0..80u8 {
        input.extend(std::iter::repeat_n(b'a' + i % 26, 1 << 20));
        input.push(b'\n');
    }
    std::fs::write(here.path().join("input"), &input).expect("input");
    let out = ok(here.path(), &["--server", url, "produce", "lines", "--file", "input"]);
    assert!(out.contains("produced 80 records"), "{out}");
    let read = cli(here.path(), &["--server", url, "consume", "lines"]);
    assert!(read.status.success());
    assert!(read.stdout == input, "every line back, with its bytes");
}

/// A remote produce keeps several batches in flight on its append stream: a batch the
/// server refuses stops the run, the error names that batch's records and every offset
/// acknowledged — the batches under way after it were stored, and `--acks` lists them.
#[tokio::test]
async fn a_refused_batch_stops_a_remote_produce_and_its_error_names_it() {
    let served = workdir();
    let server = serve_with_env(served.path(), &[], &[("TIERLOG_SERVER__MAX_BODY_BYTES", "65536")]);
    let here = workdir();
    let mut input = b"a\nb\n".to_vec();
    input.extend(std::iter::repeat_n(b'x', 100 << 10));
    input.extend_from_slice(b"\nc\nd\n");
    std::fs::write(here.path().join("input"), &input).expect("input");
    let url = server.url.as_str();
    let out = cli(
        here.path(),
        &["--server", url, "produce", "t", "--file", "input", "--batch", "1", "--acks", "acks"],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("records 3 to 3 (counting from 1) was refused"), "{stderr}");
    assert!(stderr.contains("too_large"), "{stderr}");
    let acks = std::fs::read_to_string(here.path().join("acks")).expect("acks file");
    let acked: Vec<&str> = acks.lines().collect();
    // What the error says was acknowledged is what --acks holds and what the topic holds.
    let stored = format!("{} records acknowledged at offsets [0, {})", acked.len(), acked.len());
    assert!(stderr.contains(&stored), "{stderr} / {acks}");
    assert!(acked.len() >= 2, "a and b were answered before the refused batch: {acks}");
    let read = ok(here.path(), &["--server", url, "consume", "t"]);
    let lines: Vec<&str> = read.lines().collect();
    assert_eq!(lines.len(), acked.len(), "{read}");
    assert_eq!(&lines[..2], ["a", "b"]);
    assert!(lines[2..].iter().all(|l| ["c", "d"].contains(l)), "{read}");
    // With --json the summary still comes, carrying the error: the refused batch stored
    // nothing (the server said so: no offsets it may be committed at).
    let out =
        cli(here.path(), &["--server", url, "produce", "u", "--file", "input", "--batch", "1", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let summary: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("one JSON object on stdout: {e}"));
    assert!(summary["error"].as_str().is_some_and(|e| e.contains("was refused")), "{summary}");
    assert_eq!(
        (&summary["may_commit"], &summary["outcome_unknown"]),
        (&serde_json::Value::Null, &false.into())
    );
    assert!(summary["records"].as_u64().is_some_and(|n| n >= 2), "{summary}");
    assert!(server.terminate().success());
}

/// A served topic whose acknowledged end is unknown (the WAL and the state directory lost,
/// cold kept) is resumed online: `recover --server` reports it (END UNKNOWN, exit 3),
/// appends are refused until `recover --server --topic T --resume-at OFFSET` decides,
/// an offset below what the tiers hold is refused, and after the resume the topic takes
/// appends at the offset chosen — all without stopping the server. Before, `--server` was
/// refused for `recover`, and the local command cannot open a data directory a server holds.
#[tokio::test]
async fn a_served_topic_whose_end_is_unknown_is_resumed_online() {
    let served = workdir();
    let d = served.path();
    let local = |args: &[&str]| {
        let mut all = vec!["--data-dir", "data"];
        all.extend_from_slice(args);
        ok(d, &all)
    };
    local(&["produce", "t", "--count", "1000", "--size", "20"]);
    local(&["export"]);
    local(&["produce", "t", "--count", "400", "--size", "20"]);
    std::fs::remove_dir_all(d.join("data/hot")).expect("lose the WAL");
    std::fs::remove_dir_all(d.join("data/router")).expect("lose the state directory");
    let server = serve(d, &[]);
    let url = server.url.as_str();
    let here = workdir();

    let out = cli(here.path(), &["--server", url, "recover"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("END UNKNOWN: t") && err.contains("up to 1000"), "{err}");
    let out = cli(here.path(), &["--server", url, "produce", "t", "--count", "1"]);
    assert!(!out.status.success(), "appends wait for the decision");
    let shown = ok(here.path(), &["--server", url, "status", "t"]);
    assert!(shown.contains("t: appends refused") && shown.contains("at or past 1000"), "{shown}");
    let out = cli(here.path(), &["--server", url, "recover", "--topic", "t", "--resume-at", "999"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot resume at 999"), "{out:?}");

    let out =
        cli(here.path(), &["--server", url, "recover", "--topic", "t", "--resume-at", "1400", "--json"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("RESUMED: t continues at offset 1400"), "{err}");
    assert!(err.contains("MAYBE LOST: t: offsets [1000, 1400)"), "the skipped offsets are reported: {err}");
    let reports: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the API's reports");
    assert_eq!((&reports[0]["end_unknown"], &reports[0]["next_offset"]), (&false.into(), &1400.into()));
    let produced = ok(here.path(), &["--server", url, "produce", "t", "--count", "1"]);
    assert!(produced.contains("at offsets [1400, 1401)"), "{produced}");
    let shown = ok(here.path(), &["--server", url, "status", "t", "--json"]);
    assert!(!shown.contains("pending"), "nothing awaited once resumed: {shown}");
    assert!(server.terminate().success());
}
