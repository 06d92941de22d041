//! A full disk: `produce` says what was stored, and the refused batch's offsets are
//! described truthfully (it holds none: the next records get them).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{ok, run, stderr, workdir};

/// A 1 MiB tmpfs mounted at a directory, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Creates directory `dir` and mounts the tmpfs there.
    fn mount_at(dir: &Path) -> Self {
        std::fs::create_dir(dir).expect("mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(dir)
            .status()
            .expect("mount runs (this test needs root to mount a tmpfs)");
        assert!(status.success(), "mounting a tmpfs at {} failed: this test needs root", dir.display());
        Self(dir.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_says_what_was_stored_and_that_the_refused_batch_holds_no_offsets() {
    let dir = workdir();
    let _mounted = Tmpfs::mount_at(&dir.path().join("disk"));
    let out = run(dir.path(), &["--data-dir", "disk", "produce", "t", "--count", "20000", "--batch", "1000"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let error = err.lines().find(|l| l.starts_with("error: ")).expect("an error line");
    let stored = error
        .strip_prefix("error: ")
        .and_then(|e| e.split(" records acknowledged at offsets [0, ").nth(1))
        .and_then(|e| e.split(')').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("says what was stored: {error}"));
    assert!(stored > 0 && stored < 20_000, "{error}");
    assert!(!error.contains("keep offsets"), "{error}");
    assert!(
        error.contains(&format!("offsets [{stored}, {}) go to the next records written", stored + 1000)),
        "{error}"
    );
    let consumed = ok(dir.path(), &["--data-dir", "disk", "consume", "t"]);
    assert_eq!(consumed.lines().count() as u64, stored);
    // As said: the next record gets the first refused offset.
    let again = ok(dir.path(), &["--data-dir", "disk", "produce", "t", "--count", "1", "--size", "1"]);
    assert!(again.contains(&format!("at offsets [{stored}, {})", stored + 1)), "{again}");
}

/// The same with `--json`: the summary is still printed, on stdout, with the error and
/// what is known of the refused batch's outcome (nothing of it was written: no offsets it
/// may be committed at), and the exit code is still 1.
#[test]
fn a_full_disk_under_json_prints_the_summary_with_the_error() {
    let dir = workdir();
    let _mounted = Tmpfs::mount_at(&dir.path().join("disk"));
    let out = run(
        dir.path(),
        &["--data-dir", "disk", "produce", "t", "--count", "20000", "--batch", "1000", "--json"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object on stdout");
    let records = summary["records"].as_u64().expect("records");
    assert!(records > 0 && records < 20_000, "{summary}");
    assert_eq!((summary["start"].as_u64(), summary["end"].as_u64()), (Some(0), Some(records)), "{summary}");
    let error = summary["error"].as_str().expect("error");
    assert!(
        error.contains(&format!("{records} records acknowledged at offsets [0, {records})")),
        "{summary}"
    );
    assert!(error.contains("go to the next records written"), "{summary}");
    assert_eq!(summary["may_commit"], serde_json::Value::Null, "{summary}");
    assert_eq!(summary["outcome_unknown"], false, "{summary}");
    assert!(stderr(&out).contains(&format!("error: {error}")), "{}", stderr(&out));
}
