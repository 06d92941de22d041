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
