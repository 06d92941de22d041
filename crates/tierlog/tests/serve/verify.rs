//! The offline `tierlog verify` beside a server: it needs the data directory to itself,
//! and it names a recorded loss as the online verify (`--server`) does.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tierlog_client::{Client, NewRecordJson};

use crate::support::{serve, workdir};

/// Runs `tierlog --data-dir data ARGS…` in `dir`.
fn cli(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tierlog"));
    cmd.current_dir(dir).args(["--data-dir", "data"]).args(args).stdin(Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("TIERLOG_") && k.contains("__") {
            cmd.env_remove(k);
        }
    }
    cmd.output().expect("tierlog runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn offline_verify_refuses_a_data_directory_a_server_holds() {
    let dir = workdir();
    let server = serve(dir.path(), &[]);
    let client = Client::new(&server.url).expect("client");
    for i in 0..20 {
        client
            .append("busy", vec![NewRecordJson::new(format!("record {i}").as_str())])
            .await
            .expect("append");
    }
    let out = cli(dir.path(), &["verify"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "verify must refuse: stdout {stdout:?}, stderr {stderr:?}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains("in use") && stderr.contains("--server"),
        "the error says the directory is in use and points at --server: {stderr}"
    );
    assert!(!stdout.contains("held by no tier") && !stdout.contains("no problems"), "{stdout}");
    // Through the server the same check runs online.
    let online = Command::new(env!("CARGO_BIN_EXE_tierlog"))
        .current_dir(dir.path())
        .args(["--server", &server.url, "verify", "busy"])
        .stdin(Stdio::null())
        .output()
        .expect("tierlog runs");
    assert!(online.status.success(), "{}", text(&online.stderr));
    assert!(server.terminate().success());
    // Once the server is gone, the offline verify runs.
    let out = cli(dir.path(), &["verify"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("no problems"), "{}", text(&out.stdout));
}

/// The last segment file of `topic`'s WAL directory under `dir/data/hot`.
fn active_segment(dir: &Path, topic: &str) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("data/hot").join(topic))
        .expect("the topic's WAL directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    files.sort();
    files.pop().expect("a segment file")
}

#[tokio::test]
async fn offline_and_online_verify_name_a_recorded_loss_alike() {
    let dir = workdir();
    let produce = |count: &str| {
        let out = cli(dir.path(), &["produce", "t", "--count", count, "--size", "20", "--batch", "10"]);
        assert!(out.status.success(), "produce: {}", text(&out.stderr));
    };
    // [0, 50) sealed and in cold, [50, 100) in the active segment, the checkpoint at 100.
    produce("50");
    assert!(cli(dir.path(), &["export"]).status.success());
    produce("50");
    // Acknowledged records lost off the WAL's tail: the last batch (90..100) loses bytes.
    let active = active_segment(dir.path(), "t");
    let len = std::fs::metadata(&active).expect("metadata").len();
    std::fs::OpenOptions::new().write(true).open(&active).expect("open").set_len(len - 5).expect("truncate");
    // Recovery reports the loss and records it in the WAL; the export records it in
    // cold before the segment after it.
    let recovered = cli(dir.path(), &["recover"]);
    assert_eq!(recovered.status.code(), Some(3), "{}", text(&recovered.stderr));
    assert!(text(&recovered.stderr).contains("LOST: t: offsets [90, 100)"), "{}", text(&recovered.stderr));
    produce("20");
    assert!(cli(dir.path(), &["export"]).status.success());
    let gap = "00000000000000000090-00000000000000000100.gap";
    assert!(dir.path().join("data/hot/t").join(gap).exists(), "the WAL's gap marker");
    assert!(dir.path().join("data/cold/t").join(gap).exists(), "cold's gap marker");

    let offline = cli(dir.path(), &["verify"]);
    let server = serve(dir.path(), &[]);
    let online = Command::new(env!("CARGO_BIN_EXE_tierlog"))
        .current_dir(dir.path())
        .args(["--server", &server.url, "verify"])
        .stdin(Stdio::null())
        .output()
        .expect("tierlog runs");
    assert!(server.terminate().success());

    for (how, out) in [("offline", &offline), ("online", &online)] {
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(3), "{how} verify: {stdout} {}", text(&out.stderr));
        let lines: Vec<&str> = stdout.lines().filter(|l| !l.starts_with("verified")).collect();
        assert_eq!(lines.len(), 1, "{how} verify reports the loss once: {stdout}");
        assert!(
            lines[0].contains("offsets [90, 100) were lost, recorded by") && lines[0].contains(gap),
            "{how} verify names the recorded loss and its marker: {stdout}"
        );
        assert!(
            !stdout.contains("held by no tier"),
            "{how}: a recorded loss is no unexplained hole: {stdout}"
        );
    }
    // The online check goes on after the loss: every record on both sides is read.
    let summary = text(&online.stderr);
    assert!(summary.contains("110 records"), "{summary}");
}
