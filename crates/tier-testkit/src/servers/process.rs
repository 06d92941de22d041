//! A child server process with its log file, killed and reaped by PID on drop.

use std::{
    fs::{File, OpenOptions},
    io::{Read, Seek, SeekFrom},
    net::{Ipv4Addr, TcpListener},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use tempfile::TempDir;

use super::{HarnessError, locate::ValkeyBinary};

/// A running server. Dropping it kills the process (SIGKILL to its PID) and waits for it.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    name: String,
    child: Child,
    log: PathBuf,
}

impl ServerProcess {
    /// Starts `program args…`, appending its stdout and stderr to `log`.
    pub(crate) fn spawn(
        name: impl Into<String>,
        program: &Path,
        args: &[String],
        cwd: &Path,
        log: PathBuf,
    ) -> Result<Self, HarnessError> {
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| HarnessError::io(format!("opening log file {}", log.display()), e))?;
        let err = out.try_clone().map_err(|e| HarnessError::io("duplicating a log file handle", e))?;
        let child = Command::new(program)
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|source| HarnessError::Spawn { program: program.to_owned(), source })?;
        Ok(Self { name: name.into(), child, log })
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The log file.
    pub(crate) fn log(&self) -> &Path {
        &self.log
    }

    /// `Some(description)` when the process has exited.
    pub(crate) fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(format!("{} (pid {}) exited: {status}", self.name, self.child.id())),
            Ok(None) => None,
            Err(e) => Some(format!("{} (pid {}) cannot be waited for: {e}", self.name, self.child.id())),
        }
    }

    /// Kills the process and waits for it to exit.
    pub(crate) fn kill(mut self) {
        self.kill_in_place();
    }

    fn kill_in_place(&mut self) {
        // SIGKILL by the child's own PID; an error means it already exited.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill_in_place();
    }
}

/// Starts `binary` with `args` in `dir` as the server `<flavor> <name>`, logging to
/// `dir/<name>.log`.
pub(crate) fn spawn_valkey(
    binary: &ValkeyBinary,
    name: &str,
    args: &[String],
    dir: &Path,
) -> Result<ServerProcess, HarnessError> {
    let log = dir.join(format!("{name}.log"));
    ServerProcess::spawn(format!("{} {name}", binary.flavor), &binary.path, args, dir, log)
}

/// The arguments of every `valkey-server` the harness starts: listen on
/// `127.0.0.1:<port>` (`0`: on no plain TCP port), keep nothing on disk (`--save ""`,
/// `--appendonly no`), sync a replica without delay, stay in the foreground, and use
/// `dir/<name>` (created here) as `--dir`.
pub(crate) fn valkey_args(port: u16, dir: &Path, name: &str) -> Result<Vec<String>, HarnessError> {
    let data_dir = dir.join(name);
    std::fs::create_dir_all(&data_dir)
        .map_err(|e| HarnessError::io("creating a Valkey data directory", e))?;
    let port = port.to_string();
    let mut args: Vec<String> = [
        "--port",
        &port,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--repl-diskless-sync-delay",
        "0",
        "--daemonize",
        "no",
        "--dir",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(data_dir.to_string_lossy().into_owned());
    Ok(args)
}

/// A new temporary directory named `<prefix>…` for the data directories and logs of
/// `what`'s processes; removed when dropped.
pub(crate) fn temp_dir(prefix: &str, what: &str) -> Result<TempDir, HarnessError> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| HarnessError::io(format!("creating a temporary directory for {what}"), e))
}

/// A port that was free a moment ago: bound on 127.0.0.1:0, read, released.
pub(crate) fn free_port() -> Result<u16, HarnessError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| HarnessError::io("binding 127.0.0.1:0 to find a free port", e))?;
    let port = listener.local_addr().map_err(|e| HarnessError::io("reading a bound address", e))?.port();
    drop(listener);
    Ok(port)
}

/// The last `lines` lines of `path` (at most 16 KiB are read), for error messages.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    const MAX: u64 = 16 << 10;
    let Ok(mut file) = File::open(path) else {
        return format!("(log {} cannot be opened)", path.display());
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(MAX)));
    let mut buf = Vec::new();
    let _ = file.take(MAX).read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Starts a server with `launch` on a free port, and on another one while its log (at
/// `log`) says another process took the port first (up to `PORT_CLASH_RETRIES` tries):
/// the process and its port.
pub(crate) async fn launch_on_a_free_port<F, Fut>(
    log: &Path,
    mut launch: F,
) -> Result<(ServerProcess, u16), HarnessError>
where
    F: FnMut(u16) -> Fut,
    Fut: std::future::Future<Output = Result<ServerProcess, HarnessError>>,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        let port = free_port()?;
        match launch(port).await {
            Ok(process) => return Ok((process, port)),
            Err(e) => {
                if !(log_shows_port_clash(log) && attempt < super::PORT_CLASH_RETRIES) {
                    return Err(e);
                }
            }
        }
    }
}

/// True when a server's log says it could not bind its port (another process took it).
pub(crate) fn log_shows_port_clash(path: &Path) -> bool {
    let tail = log_tail(path, 50);
    tail.contains("Address already in use") || tail.contains("address already in use")
}
