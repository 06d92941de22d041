//! Read-only commands write nothing and run no recovery: after a lost disk `status`
//! shows what the tiers hold and leaves recovery to `recover`, which finds the topic
//! in cold by itself.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::{ok, run, stderr, workdir};

/// Every file under `dir` with its content.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let content = std::fs::read(&path).expect("read a file");
                files.insert(path.strip_prefix(dir).expect("under dir").display().to_string(), content);
            }
        }
    }
    files
}

#[test]
fn status_verify_and_consume_after_a_lost_disk_write_nothing_and_recover_finds_the_topic() {
    let dir = workdir();
    let d = dir.path();
    ok(d, &["produce", "t", "--count", "500", "--size", "50"]);
    ok(d, &["export"]);
    std::fs::remove_dir_all(d.join("data/hot")).expect("lose the WAL");
    std::fs::remove_dir_all(d.join("data/router")).expect("lose the state directory");
    let before = snapshot(&d.join("data"));

    let status = ok(d, &["status", "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&status).expect("JSON");
    assert_eq!(rows[0]["topic"], "t", "{status}");
    assert_eq!((rows[0]["cold"]["start"].clone(), rows[0]["cold"]["end"].clone()), (0.into(), 500.into()));
    assert_eq!(rows[0]["hot"]["segments"], 0, "{status}");
    let table = ok(d, &["status"]);
    let row = table.lines().find(|l| l.starts_with("t ")).expect("a row for t");
    assert!(row.contains("empty, next 500") && !row.contains('@'), "the empty WAL in words: {table}");
    let out = run(d, &["verify"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // consume leaves recovery to `recover` and says so.
    let out = run(d, &["consume", "t"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("run `tierlog recover` first"), "{}", stderr(&out));
    // Only the WAL's lock file may appear.
    let after: BTreeMap<_, _> =
        snapshot(&d.join("data")).into_iter().filter(|(k, _)| k != "hot/.lock").collect();
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "status, verify or consume wrote files"
    );
    assert!(after == before, "status, verify or consume changed a file");

    // With the state directory gone too, the topic's end is unknown: recover says so
    // (exit 3) instead of "no topics to recover".
    let out = run(d, &["recover"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{said} {}", stderr(&out));
    assert!(said.contains("t: WAL") && said.contains("next offset 500"), "{said}");
    assert!(stderr(&out).contains("END UNKNOWN: t"), "{}", stderr(&out));
}

/// Every file under `dir` with its modification time.
fn mtimes(dir: &Path) -> BTreeMap<String, std::time::SystemTime> {
    snapshot(dir)
        .into_keys()
        .map(|k| {
            let modified = std::fs::metadata(dir.join(&k)).and_then(|m| m.modified()).expect("mtime");
            (k, modified)
        })
        .collect()
}

#[test]
fn consume_rewrites_no_state_file() {
    let dir = workdir();
    let d = dir.path();
    for t in ["t", "u"] {
        ok(d, &["produce", t, "--count", "100", "--size", "10"]);
    }
    let before = (snapshot(&d.join("data")), mtimes(&d.join("data")));
    assert_eq!(ok(d, &["consume", "t"]).lines().count(), 100);
    let after = (snapshot(&d.join("data")), mtimes(&d.join("data")));
    assert!(after.0 == before.0, "consume changed a file");
    assert_eq!(after.1, before.1, "consume rewrote a file");
}

/// What a topic's files say its next recovery acts on — losses a recovery found without
/// finishing, offsets a degraded open skipped, a WAL rebuilt from warm in part — `status`
/// shows (text and JSON) without acting on it: no file changes. The files are written as
/// the router and the WAL write them (`<state_dir>/<topic>.losses`, `.unacked`,
/// `<hot>/<topic>/rebuilt`).
#[test]
fn status_shows_what_the_next_recovery_acts_on_and_changes_nothing() {
    let dir = workdir();
    let d = dir.path();
    ok(d, &["produce", "t", "--count", "100", "--size", "10"]);
    ok(d, &["produce", "u", "--count", "100", "--size", "10"]);
    std::fs::write(d.join("data/router/t.losses"), "lost 10 20\nmaybe 20 30\n").expect("losses");
    std::fs::write(d.join("data/router/t.unacked"), "40 50\n").expect("unacked");
    std::fs::write(d.join("data/hot/t/rebuilt"), "60\n").expect("rebuilt marker");
    let before = snapshot(&d.join("data"));

    let table = ok(d, &["status"]);
    for said in [
        "t: a recovery found lost [10, 20), maybe lost [20, 30) and did not finish",
        "t: offsets [40, 50) were skipped while warm was unreachable",
        "t: a recovery rebuilding the WAL from warm did not finish; records may have been acknowledged up to 60",
    ] {
        assert!(table.contains(said), "{said:?} in {table}");
    }
    assert!(!table.contains("u: "), "nothing pending for u: {table}");
    let json: serde_json::Value = serde_json::from_str(&ok(d, &["status", "--json"])).expect("JSON");
    let pending = &json[0]["pending"];
    assert_eq!(pending["lost"], serde_json::json!([[10, 20]]), "{json}");
    assert_eq!(pending["maybe_lost"], serde_json::json!([[20, 30]]), "{json}");
    assert_eq!(pending["skipped"], serde_json::json!([[40, 50]]), "{json}");
    assert_eq!(pending["rebuilding"]["acknowledged_up_to"], 60, "{json}");
    assert!(pending.get("resume_at_least").is_none(), "{json}");
    assert!(json[1].get("pending").is_none(), "{json}");
    assert!(snapshot(&d.join("data")) == before, "status changed a file");
}
