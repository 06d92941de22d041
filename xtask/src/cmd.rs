//! Running child commands: echo what runs, check exit statuses, and capture output while
//! still showing it live.

use std::{
    env,
    ffi::OsStr,
    io::{BufRead, BufReader, Read, Write},
    path::{Path, PathBuf},
    process::{Command, ExitStatus, Stdio},
    sync::mpsc,
    thread,
};

use anyhow::{Context, Result, bail};

/// A `cargo` command without the package variables `cargo run` set for xtask itself.
///
/// `cargo xtask` runs under `cargo run`, which exports xtask's `CARGO_PKG_*`,
/// `CARGO_MANIFEST_*` and `CARGO_CRATE_NAME`; build scripts that watch them (ring's)
/// would otherwise rebuild, with everything after them, on every switch between a
/// nested cargo and a plain one.
pub(crate) fn cargo() -> Command {
    let mut cargo = Command::new("cargo");
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_") || name.starts_with("CARGO_MANIFEST_") || name == "CARGO_CRATE_NAME"
        {
            cargo.env_remove(name.as_ref());
        }
    }
    cargo
}

/// Builds every binary and example of the workspace (dev profile) from `root`.
///
/// One build over the whole workspace resolves features as the workspace test build does,
/// so after the tests it reuses their artifacts (seconds); a per-package build
/// (`-p tier-sim`) unifies features differently and recompiles the shared dependencies
/// (over a minute each for the simulation, the chaos runner and the examples in CI).
pub(crate) fn build_workspace_bins(root: &Path) -> Result<()> {
    run(cargo().current_dir(root).args(["build", "--workspace", "--bins", "--examples"]))?;
    Ok(())
}

/// The build's target directory: `CARGO_TARGET_DIR`, else `<root>/target`.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

/// A command line as a user would type it (arguments with spaces or quotes are quoted).
pub(crate) fn display(cmd: &Command) -> String {
    let mut parts = vec![quote(cmd.get_program())];
    parts.extend(cmd.get_args().map(quote));
    parts.join(" ")
}

fn quote(arg: &OsStr) -> String {
    let s = arg.to_string_lossy();
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:@+,".contains(c)) {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Runs `cmd` with inherited stdio after echoing it; an error when it cannot start or
/// exits non-zero.
pub(crate) fn run(cmd: &mut Command) -> Result<()> {
    let line = display(cmd);
    println!("$ {line}");
    let status = cmd.status().with_context(|| format!("could not start `{line}`"))?;
    if !status.success() {
        bail!("`{line}` failed: {status}");
    }
    Ok(())
}

/// True when `cmd` starts and exits zero; its output is discarded.
pub(crate) fn succeeds_quietly(cmd: &mut Command) -> bool {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The first line of `cmd`'s stdout when it starts and exits zero.
pub(crate) fn first_line_of(cmd: &mut Command) -> Option<String> {
    let out = cmd.stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout).lines().next().map(|l| l.trim().to_owned())
}

/// What a captured command printed, in arrival order (stdout and stderr interleaved).
#[derive(Debug)]
pub(crate) struct Captured {
    /// How the command exited.
    pub(crate) status: ExitStatus,
    /// Every line it printed, without line endings.
    pub(crate) lines: Vec<String>,
}

/// Runs `cmd` after echoing it, passing its stdout and stderr through to ours line by
/// line while also collecting them.
pub(crate) fn run_tee(cmd: &mut Command) -> Result<Captured> {
    let line = display(cmd);
    println!("$ {line}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start `{line}`"))?;
    let stdout = child.stdout.take().context("child stdout was not piped")?;
    let stderr = child.stderr.take().context("child stderr was not piped")?;
    let (tx, rx) = mpsc::channel::<String>();
    let err_tx = tx.clone();
    let out_thread = thread::spawn(move || forward_lines(stdout, false, &tx));
    let err_thread = thread::spawn(move || forward_lines(stderr, true, &err_tx));
    let lines: Vec<String> = rx.iter().collect();
    let _ = out_thread.join();
    let _ = err_thread.join();
    let status = child.wait().with_context(|| format!("waiting for `{line}`"))?;
    Ok(Captured { status, lines })
}

/// Copies `from` line by line to our stdout or stderr and into `to`, until end of input.
fn forward_lines(from: impl Read, to_stderr: bool, to: &mpsc::Sender<String>) {
    let mut reader = BufReader::new(from);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim_end_matches(['\n', '\r']);
        // A closed terminal must not stop the child's output from being collected.
        if to_stderr {
            let _ = writeln!(std::io::stderr().lock(), "{text}");
        } else {
            let _ = writeln!(std::io::stdout().lock(), "{text}");
        }
        if to.send(text.to_owned()).is_err() {
            return;
        }
    }
}

/// The first executable file called `name` in the directories of `PATH`.
pub(crate) fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path).map(|dir| dir.join(name)).find(|p| is_executable(p))
}

/// True for a regular file with an execute bit.
pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_quotes_only_what_a_shell_would_split() {
        let mut cmd = Command::new("pip");
        cmd.args(["install", "--quiet", "moto[server]", "it's"]);
        assert_eq!(display(&cmd), r"pip install --quiet 'moto[server]' 'it'\''s'");
    }

    #[test]
    fn run_tee_collects_both_streams_and_the_status() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out1; echo err1 >&2; printf 'no-newline'; exit 3"]);
        let captured = run_tee(&mut cmd).expect("sh runs");
        assert_eq!(captured.status.code(), Some(3));
        let mut lines = captured.lines.clone();
        lines.sort();
        assert_eq!(lines, ["err1", "no-newline", "out1"]);
    }

    #[test]
    fn run_reports_a_failing_command() {
        let err = run(Command::new("false").arg("--flag")).expect_err("false fails");
        assert!(err.to_string().contains("`false --flag` failed"), "{err}");
    }
}
