//! Compound faults run from the CLI: a loss followed by more writes must never
//! wedge the export or reuse an offset.

use std::path::{Path, PathBuf};

use crate::support::{ok, run, stderr, workdir};

/// The active (newest) WAL segment of `topic`.
fn active_segment(dir: &Path, topic: &str) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("data/hot").join(topic))
        .expect("the topic's WAL directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    files.sort();
    files.pop().expect("an active segment")
}

/// A torn tail, recovery, one more record, export: the CLI's cold backend records the gap
/// (a `record_gap` that refused would fail the export on every try).
#[test]
fn export_continues_after_a_torn_tail_is_recovered() {
    let dir = workdir();
    let d = dir.path();
    ok(d, &["produce", "t", "--count", "2000", "--size", "100", "--batch", "100"]);
    let seg = active_segment(d, "t");
    let len = std::fs::metadata(&seg).expect("segment").len();
    let file = std::fs::OpenOptions::new().write(true).open(&seg).expect("open segment");
    file.set_len(len - 300).expect("cut the tail");
    drop(file);
    let out = run(d, &["recover", "--topic", "t"]);
    assert_eq!(out.status.code(), Some(3), "recover reports the lost tail: {}", stderr(&out));
    assert!(stderr(&out).contains("[1900, 2000)"), "{}", stderr(&out));
    ok(d, &["produce", "t", "--count", "1", "--size", "100"]);
    let out = run(d, &["export"]);
    assert!(out.status.success(), "export after the torn tail: {}", stderr(&out));
    // Every offset the store holds reads back; the lost ones are named, not served.
    let consumed = ok(d, &["consume", "t", "--from", "2000", "--output", "json"]);
    assert_eq!(consumed.lines().count(), 1, "{consumed}");
}

/// hot+cold, the WAL directory lost after an export, recovery, one more record, export: an
/// empty WAL taking over above cold's end without a gap marker would make cold refuse every
/// later segment.
#[test]
fn export_continues_after_a_lost_wal_is_recovered() {
    let dir = workdir();
    let d = dir.path();
    ok(d, &["produce", "t", "--count", "10000", "--size", "50", "--batch", "100"]);
    ok(d, &["export"]);
    // More records after the export: they live only in the WAL, which is then lost.
    ok(d, &["produce", "t", "--count", "500", "--size", "50", "--batch", "100"]);
    std::fs::remove_dir_all(d.join("data/hot")).expect("lose the WAL");
    let out = run(d, &["recover", "--topic", "t"]);
    assert_eq!(out.status.code(), Some(3), "recover reports the loss: {}", stderr(&out));
    assert!(stderr(&out).contains("[10000, 10500)"), "recover names the lost range: {}", stderr(&out));
    ok(d, &["produce", "t", "--count", "1", "--size", "50"]);
    let out = run(d, &["export"]);
    assert!(out.status.success(), "export after the lost WAL: {}", stderr(&out));
    let last = ok(d, &["consume", "t", "--from", "10500", "--output", "json"]);
    assert_eq!(last.lines().count(), 1, "the new record follows the lost range: {last}");
    let out = run(d, &["consume", "t", "--from", "10000", "--max", "1"]);
    assert!(!out.status.success(), "the lost range is not served");
}

/// The WAL and the router's state directory beside it lost, cold kept. Nothing
/// bounds what producers were acknowledged (cold holds [0, 10000) of 10400), so the CLI
/// must not hand out offset 10000 again: `produce` is refused naming the decision, and
/// `recover --resume-at` takes it.
#[test]
fn a_lost_wal_and_state_directory_need_an_operator_decision() {
    let dir = workdir();
    let d = dir.path();
    ok(d, &["produce", "t", "--count", "10000", "--size", "50", "--batch", "100"]);
    ok(d, &["export"]);
    ok(d, &["produce", "t", "--count", "400", "--size", "50", "--batch", "100"]);
    std::fs::remove_dir_all(d.join("data/hot")).expect("lose the WAL");
    std::fs::remove_dir_all(d.join("data/router")).expect("lose the state directory");

    let out = run(d, &["recover", "--topic", "t"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("END UNKNOWN"), "{}", stderr(&out));
    let out = run(d, &["produce", "t", "--count", "1", "--size", "50"]);
    assert!(!out.status.success(), "an offset cold does not hold may have been acknowledged");
    assert!(stderr(&out).contains("--resume-at"), "the error names the decision: {}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(": refused: ") && !err.contains("fenced"), "plain words, not jargon: {err}");
    // `status` shows the decision the topic waits for, as text and JSON.
    let shown = ok(d, &["status", "t"]);
    assert!(shown.contains("t: appends refused") && shown.contains("--resume-at"), "{shown}");
    let json: serde_json::Value = serde_json::from_str(&ok(d, &["status", "t", "--json"])).expect("JSON");
    assert_eq!(json[0]["pending"]["resume_at_least"], 10000, "{json}");
    let out = run(d, &["recover", "--topic", "t", "--resume-at", "9999"]);
    assert!(!out.status.success(), "below what cold holds: {}", stderr(&out));

    let out = run(d, &["recover", "--topic", "t", "--resume-at", "10400"]);
    assert!(stderr(&out).contains("RESUMED"), "{}", stderr(&out));
    assert!(stderr(&out).contains("[10000, 10400)"), "the skipped range is reported: {}", stderr(&out));
    ok(d, &["produce", "t", "--count", "1", "--size", "50"]);
    let last = ok(d, &["consume", "t", "--from", "10400", "--output", "json"]);
    assert_eq!(last.lines().count(), 1, "{last}");
    assert!(last.contains("\"offset\":10400"), "{last}");
    ok(d, &["export"]);
    let json: serde_json::Value = serde_json::from_str(&ok(d, &["status", "t", "--json"])).expect("JSON");
    assert!(json[0].get("pending").is_none(), "nothing pending once resumed: {json}");
}

/// One flipped footer byte in one sealed segment of topic `a` must not make every command
/// on every topic fail ("opening the store: … corruption"). The damaged topic is
/// reported and isolated; `b` is produced, consumed, exported and shown.
#[test]
fn a_damaged_topic_does_not_block_the_others() {
    let dir = workdir();
    let d = dir.path();
    let small = |args: &[&str]| {
        let out = crate::support::tierlog(d).env("TIERLOG_HOT__SEGMENT_BYTES", "64KiB").args(args).output();
        out.expect("the tierlog binary runs")
    };
    for t in ["a", "b"] {
        let out = small(&["produce", t, "--count", "3000", "--size", "100", "--batch", "100"]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let mut sealed: Vec<PathBuf> = std::fs::read_dir(d.join("data/hot/a"))
        .expect("a's WAL")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    sealed.sort();
    assert!(sealed.len() >= 2, "a has a sealed segment: {sealed:?}");
    let mut bytes = std::fs::read(&sealed[0]).expect("segment");
    let at = bytes.len() - 20;
    bytes[at] ^= 0x40;
    std::fs::write(&sealed[0], bytes).expect("damage the footer");

    ok(d, &["produce", "b", "--count", "1", "--size", "100"]);
    let last = ok(d, &["consume", "b", "--from", "3000", "--output", "json"]);
    assert_eq!(last.lines().count(), 1, "{last}");
    let out = run(d, &["status"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains('b'), "b is shown");
    assert!(stderr(&out).contains("DAMAGED: a"), "{}", stderr(&out));
    let out = run(d, &["export"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("b: exported"), "b is exported");
    assert!(stderr(&out).contains("exporting a"), "{}", stderr(&out));
    let out = run(d, &["consume", "a"]);
    assert!(!out.status.success(), "the damaged topic answers its error");
    assert!(stderr(&out).contains("orruption"), "{}", stderr(&out));
}
