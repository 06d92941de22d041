//! A running `chaos-producer` child process: spawned on a data directory, killed with
//! SIGKILL (by PID, through `Child::start_kill`) or stopped gracefully by closing its
//! stdin, with every acknowledgement line it printed collected.

use std::{
    path::{Path, PathBuf},
    process::{ExitStatus, Stdio},
    time::Duration,
};

use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, ChildStdin, Command},
    task::JoinHandle,
};

use crate::{ChaosError, ack::Ack};

/// How long a graceful stop may take before the producer is killed instead.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// How to run one producer.
#[derive(Clone, Debug)]
pub struct ProducerSpec {
    /// The `chaos-producer` binary.
    pub binary: PathBuf,
    /// The store configuration file (TOML).
    pub config: PathBuf,
    /// The topic to write.
    pub topic: String,
    /// A number unique to this start on this data directory (names the writers).
    pub incarnation: u64,
    /// Concurrent appending tasks.
    pub writers: u64,
    /// Most records per append.
    pub max_batch: u64,
}

/// What a producer printed before it ended.
#[derive(Debug, Default)]
pub struct ProducerOutput {
    /// Every acknowledged append, in the order printed.
    pub acks: Vec<Ack>,
    /// `ERR` lines (failed appends; never acknowledged).
    pub errors: Vec<String>,
    /// Whether it printed `READY` (opened the store).
    pub ready: bool,
    /// Whether it printed `CLOSED` (closed the store gracefully).
    pub closed: bool,
    /// Its exit status.
    pub status: Option<ExitStatus>,
}

/// A running producer.
#[derive(Debug)]
pub struct ProducerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: JoinHandle<Vec<String>>,
}

/// The path of a binary built beside the running one (cargo puts a package's binaries in
/// one directory).
pub fn sibling_binary(name: &str) -> Result<PathBuf, ChaosError> {
    let me = std::env::current_exe().map_err(|e| ChaosError::io("locating the running binary", e))?;
    let dir = me.parent().unwrap_or(Path::new("."));
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(ChaosError::Other(format!(
            "{} not found: build it with `cargo build -p tier-chaos --bins -p tierlog --bin tierlog`",
            path.display()
        )))
    }
}

impl ProducerProcess {
    /// Starts the producer; its stdout is collected until it exits.
    pub fn spawn(spec: &ProducerSpec) -> Result<Self, ChaosError> {
        let mut child = Command::new(&spec.binary)
            .arg("--config")
            .arg(&spec.config)
            .args(["--topic", &spec.topic])
            .args(["--incarnation", &spec.incarnation.to_string()])
            .args(["--writers", &spec.writers.to_string()])
            .args(["--max-batch", &spec.max_batch.to_string()])
            .env("RUST_LOG", "off")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ChaosError::io(format!("spawning {}", spec.binary.display()), e))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or_else(|| ChaosError::Other("producer has no stdout".into()))?;
        let lines = tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            let mut all = Vec::new();
            while let Ok(Some(line)) = reader.next_line().await {
                all.push(line);
            }
            all
        });
        Ok(Self { child, stdin, lines })
    }

    /// The child's PID.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// SIGKILL now, then collect what it printed.
    pub async fn kill(mut self) -> Result<ProducerOutput, ChaosError> {
        self.child.start_kill().map_err(|e| ChaosError::io("killing the producer", e))?;
        self.finish().await
    }

    /// Closes its stdin (the producer then stops appending, closes the store and exits);
    /// killed if that takes longer than 10 s.
    pub async fn stop(mut self) -> Result<ProducerOutput, ChaosError> {
        self.stdin.take();
        if tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await.is_err() {
            self.child.start_kill().map_err(|e| ChaosError::io("killing the producer", e))?;
        }
        self.finish().await
    }

    async fn finish(mut self) -> Result<ProducerOutput, ChaosError> {
        let status = self.child.wait().await.map_err(|e| ChaosError::io("waiting for the producer", e))?;
        let lines = self.lines.await.map_err(|e| ChaosError::Other(format!("stdout reader: {e}")))?;
        let mut out = ProducerOutput { status: Some(status), ..ProducerOutput::default() };
        for line in lines {
            if let Some(ack) = Ack::parse(&line) {
                out.acks.push(ack);
            } else if line == "READY" {
                out.ready = true;
            } else if line == "CLOSED" {
                out.closed = true;
            } else if line.starts_with("ERR") {
                out.errors.push(line);
            }
        }
        Ok(out)
    }
}
