//! Commands that inspect or maintain topics never create one: only an append does. A
//! topic no tier holds is an error naming it (exit 1), and nothing is written for it.

use std::path::Path;

use crate::support::{ok, run, stderr, workdir};

/// Every file and directory under `dir`, relative to it.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            out.push(path.strip_prefix(dir).expect("under dir").display().to_string());
            if path.is_dir() {
                todo.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn export_maintain_recover_and_verify_of_an_unknown_topic_create_nothing() {
    let dir = workdir();
    let d = dir.path();
    ok(d, &["produce", "real", "--count", "20", "--size", "10"]);
    // Every command is run before anything is asserted, so that a failure lists each
    // command that misbehaves.
    let mut wrong = Vec::new();
    for (args, name) in [
        (&["export", "nosuch"][..], "nosuch"),
        (&["maintain", "typo"][..], "typo"),
        (&["recover", "--topic", "typo2"][..], "typo2"),
        (&["verify", "ghost"][..], "ghost"),
    ] {
        let out = run(d, args);
        let err = stderr(&out);
        let said = format!(
            "exit {:?}, stdout {:?}, stderr {err:?}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout)
        );
        if out.status.code() != Some(1)
            || !err.starts_with("error: ")
            || !err.contains(&format!("topic '{name}' does not exist"))
        {
            wrong.push(format!("tierlog {args:?}: {said}"));
        }
        let created: Vec<String> = tree(d).into_iter().filter(|p| p.contains(name)).collect();
        if !created.is_empty() {
            wrong.push(format!("tierlog {args:?} created {created:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let status = ok(d, &["status", "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&status).expect("JSON");
    let topics: Vec<&str> =
        rows.as_array().expect("rows").iter().filter_map(|r| r["topic"].as_str()).collect();
    assert_eq!(topics, ["real"], "{status}");
    // The topic that exists is still exported, maintained, recovered and verified.
    assert!(ok(d, &["export", "real"]).contains("real: exported"));
    assert!(ok(d, &["maintain", "real"]).contains("real: retention deleted"));
    assert!(ok(d, &["recover", "--topic", "real"]).contains("real: WAL"));
    assert!(ok(d, &["verify", "real"]).contains("no problems"));
}
