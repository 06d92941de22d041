//! Running the binary.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A command running the built `tierlog` in `dir`, with no TIERLOG_ overrides inherited.
pub(crate) fn tierlog(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tierlog"));
    cmd.current_dir(dir).stdin(Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("TIERLOG_") && k.contains("__") {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// Runs `tierlog args…` in `dir` and returns its output.
pub(crate) fn run(dir: &Path, args: &[&str]) -> Output {
    tierlog(dir).args(args).output().expect("the tierlog binary runs")
}

/// Runs and asserts success; returns stdout.
pub(crate) fn ok(dir: &Path, args: &[&str]) -> String {
    let out = run(dir, args);
    assert!(out.status.success(), "tierlog {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// Stderr as text.
pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A fresh working directory.
pub(crate) fn workdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

/// Writes `n` numbered lines to `dir/name` and returns the content.
pub(crate) fn lines_file(dir: &Path, name: &str, n: usize) -> Vec<u8> {
    let text: String = (0..n).map(|i| format!("line {i} {}\n", "y".repeat(i % 50))).collect();
    std::fs::write(dir.join(name), &text).expect("write input");
    text.into_bytes()
}

/// Spawns `tierlog args…` in `dir` with stdin, stdout and stderr piped.
pub(crate) fn spawn_piped(dir: &Path, args: &[&str]) -> std::process::Child {
    tierlog(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tierlog")
}
