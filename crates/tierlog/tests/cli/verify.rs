//! `tierlog verify` catches a flipped byte in a WAL file and in a cold object.

use std::path::{Path, PathBuf};

use crate::support::{lines_file, ok, run, workdir};

fn flip_middle_byte(path: &Path) {
    let mut bytes = std::fs::read(path).expect("read");
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(path, bytes).expect("write");
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn verify_names_the_corrupt_wal_file_and_cold_object() {
    let dir = workdir();
    lines_file(dir.path(), "in.txt", 3000);
    let produce = crate::support::tierlog(dir.path())
        .args(["produce", "t", "--file", "in.txt", "--batch", "200"])
        .env("TIERLOG_HOT__SEGMENT_BYTES", "16KiB")
        .output()
        .expect("produce");
    assert!(produce.status.success());
    ok(dir.path(), &["export"]);
    let said = ok(dir.path(), &["verify"]);
    assert!(said.contains("no problems"), "{said}");

    // A flipped byte in a sealed WAL file.
    let wal = files_in(&dir.path().join("data/hot/t"));
    assert!(wal.len() >= 3, "several segments: {wal:?}");
    let victim = &wal[1];
    let original = std::fs::read(victim).expect("read");
    flip_middle_byte(victim);
    let out = run(dir.path(), &["verify"]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    let name = victim.file_name().and_then(|n| n.to_str()).expect("name");
    let line =
        text.lines().find(|l| l.contains(name)).unwrap_or_else(|| panic!("no line names {name}: {text}"));
    assert!(line.contains('@'), "the position is given: {line}");
    std::fs::write(victim, original).expect("restore");
    assert!(ok(dir.path(), &["verify"]).contains("no problems"));

    // A flipped byte in a cold object.
    let cold = files_in(&dir.path().join("data/cold/t"));
    let victim = &cold[0];
    flip_middle_byte(victim);
    let out = run(dir.path(), &["verify"]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    let key = format!("t/{}", victim.file_name().and_then(|n| n.to_str()).expect("name"));
    let line =
        text.lines().find(|l| l.starts_with(&key)).unwrap_or_else(|| panic!("no line names {key}: {text}"));
    assert!(line.contains("CRC") || line.contains("invalid") || line.contains("truncated"), "{line}");
}
