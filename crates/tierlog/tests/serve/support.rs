//! A real `tierlog serve` process: started on 127.0.0.1 port 0, its URL read from the
//! first line of its stdout, stopped by its PID.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};

/// A running server. Dropping it kills the process (SIGKILL) if it still runs.
pub(crate) struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT` (or `https://`).
    pub(crate) url: String,
    /// The file its stderr goes to.
    pub(crate) log: PathBuf,
}

/// Starts `tierlog --data-dir DIR/data serve --listen 127.0.0.1:0 ARGS…` in `dir` and waits
/// for its first stdout line (the URL): the store is then open and the port bound.
pub(crate) fn serve(dir: &Path, args: &[&str]) -> Served {
    serve_with_env(dir, args, &[])
}

/// [`serve`] with environment overrides (`TIERLOG_…`).
pub(crate) fn serve_with_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Served {
    serve_on(dir, "127.0.0.1:0", args, env)
}

/// [`serve_with_env`] listening on `listen` (e.g. the address of a server stopped before,
/// to restart it where its clients look for it).
pub(crate) fn serve_on(dir: &Path, listen: &str, args: &[&str], env: &[(&str, &str)]) -> Served {
    start(Command::new(env!("CARGO_BIN_EXE_tierlog")), dir, listen, args, env)
}

/// [`serve`] with at most `files` file descriptors (`ulimit -n`, through `sh`).
pub(crate) fn serve_with_fd_limit(dir: &Path, files: u32) -> Served {
    let mut sh = Command::new("sh");
    sh.args(["-c", &format!("ulimit -n {files} && exec \"$0\" \"$@\""), env!("CARGO_BIN_EXE_tierlog")]);
    start(sh, dir, "127.0.0.1:0", &[], &[])
}

/// Runs `cmd` (the binary, or a shell that execs it with the arguments after it) as
/// `tierlog --data-dir data serve --listen LISTEN ARGS…` and waits for its URL.
fn start(mut cmd: Command, dir: &Path, listen: &str, args: &[&str], env: &[(&str, &str)]) -> Served {
    let log = unique(dir.join("server.log"));
    cmd.current_dir(dir)
        .args(["--data-dir", "data", "serve", "--listen", listen])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("the server's log file"))
        .env("RUST_LOG", "info");
    for (k, _) in std::env::vars() {
        if k.starts_with("TIERLOG_") && k.contains("__") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("the tierlog binary starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut first = String::new();
    BufReader::new(stdout).read_line(&mut first).expect("reading the server's stdout");
    let url = first.trim().to_owned();
    if !url.starts_with("http") {
        let _ = child.kill();
        let _ = child.wait();
        panic!("tierlog serve printed {first:?} instead of its URL; its log:\n{}", read(&log));
    }
    Served { child, url, log }
}

fn unique(mut path: PathBuf) -> PathBuf {
    let mut i = 0;
    while path.exists() {
        i += 1;
        path.set_extension(format!("{i}.log"));
    }
    path
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

impl Served {
    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`TERM`, `INT`) to the process by its PID.
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([format!("-{signal}"), self.pid().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} {} failed", self.pid());
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub(crate) fn terminate(self) -> ExitStatus {
        self.stop_with("TERM")
    }

    /// Sends `signal` (`TERM`, or `INT` as Ctrl-C does) and waits for the process to exit.
    pub(crate) fn stop_with(mut self, signal: &str) -> ExitStatus {
        self.signal(signal);
        self.child.wait().expect("waiting for the server")
    }

    /// What the server logged so far.
    pub(crate) fn log_text(&self) -> String {
        read(&self.log)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Every file and directory under `dir`, relative to it.
pub(crate) fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let path = e.path();
            out.push(path.strip_prefix(dir).expect("under dir").display().to_string());
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

/// A fresh working directory.
pub(crate) fn workdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}
