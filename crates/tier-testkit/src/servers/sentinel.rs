//! [`ValkeySentinel`]: a Valkey primary with two replicas, watched by three sentinels
//! that fail it over.

use std::{future::Future, time::Duration};

use tempfile::TempDir;

use super::{
    HarnessError, VALKEY_READY_TIMEOUT,
    locate::ValkeyBinary,
    poll::{file_name, labelled_tails, poll_until},
    process::{ServerProcess, free_port, spawn_valkey, temp_dir, valkey_args},
    resp::{self, Reply},
};

/// The service name the sentinels monitor.
pub const SENTINEL_SERVICE: &str = "tierlog";

/// How long a sentinel waits before it calls an unanswering primary down.
const DOWN_AFTER: Duration = Duration::from_millis(1000);

/// How long a failover may take, from the kill to a promoted replica that the sentinels
/// name and that answers as a primary.
pub const FAILOVER_TIMEOUT: Duration = Duration::from_secs(30);

/// A primary, two replicas and three sentinels (quorum 2) on free 127.0.0.1 ports, from
/// a temporary directory holding their data directories, sentinel configuration files
/// and logs. Every process is killed (SIGKILL by PID) when this is dropped.
///
/// A sentinel calls the primary down after 1 s without an answer and the three elect
/// one of them to promote the replica with the most replicated data
/// ([`kill_primary`](Self::kill_primary), [`wait_failover`](Self::wait_failover)).
#[derive(Debug)]
pub struct ValkeySentinel {
    binary: ValkeyBinary,
    /// Data servers by port (the primary first at start); `None` once killed.
    servers: Vec<(u16, Option<ServerProcess>)>,
    sentinels: Vec<(u16, ServerProcess)>,
    // Declared last: removed after the processes are killed.
    dir: TempDir,
}

impl ValkeySentinel {
    /// Starts the servers and the sentinels, and waits until both replicas acknowledge
    /// the primary's writes and every sentinel knows both replicas and the two other
    /// sentinels (so that a failover can be agreed on).
    pub async fn start() -> Result<Self, HarnessError> {
        let binary = ValkeyBinary::locate()?;
        let dir = temp_dir("tierlog-sentinel-", "Valkey sentinel")?;
        let mut this = Self { binary, servers: Vec::new(), sentinels: Vec::new(), dir };
        let primary = this.spawn_server("primary", None)?;
        for name in ["replica-1", "replica-2"] {
            this.spawn_server(name, Some(primary))?;
        }
        this.wait_replicas_acknowledge(primary, 2).await?;
        for i in 1..=3 {
            this.spawn_sentinel(i, primary)?;
        }
        let ports: Vec<u16> = this.sentinels.iter().map(|(p, _)| *p).collect();
        for port in ports {
            this.poll(
                "a sentinel knowing both replicas and two other sentinels",
                VALKEY_READY_TIMEOUT * 3,
                || async move {
                    let replicas =
                        array_len(resp::command(port, &["SENTINEL", "REPLICAS", SENTINEL_SERVICE]).await?);
                    let others =
                        array_len(resp::command(port, &["SENTINEL", "SENTINELS", SENTINEL_SERVICE]).await?);
                    if replicas == 2 && others == 2 {
                        Ok(())
                    } else {
                        Err(format!(
                            "sentinel on {port} knows {replicas} replica(s) and {others} other sentinel(s)"
                        ))
                    }
                },
            )
            .await?;
        }
        Ok(this)
    }

    /// `redis://127.0.0.1:<port>` of each sentinel: the seed URLs of a warm tier in
    /// sentinel mode.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(|(port, _)| format!("redis://127.0.0.1:{port}")).collect()
    }

    /// The primary's port as the sentinels name it now.
    pub async fn primary_port(&self) -> Result<u16, HarnessError> {
        let (port, _) =
            self.sentinels.first().ok_or_else(|| HarnessError::request("sentinel", "none runs"))?;
        primary_named_by(*port)
            .await
            .map_err(|e| HarnessError::request("asking a sentinel for the primary", e))
    }

    /// Which server runs, e.g. `"valkey 8.0.1"`.
    pub fn server_kind(&self) -> String {
        self.binary.kind()
    }

    /// Kills the current primary (SIGKILL by PID: it keeps nothing, it has no
    /// persistence). Returns its port.
    pub async fn kill_primary(&mut self) -> Result<u16, HarnessError> {
        let port = self.primary_port().await?;
        let slot = self.servers.iter_mut().find(|(p, _)| *p == port);
        match slot.and_then(|(_, process)| process.take()) {
            Some(process) => process.kill(),
            None => {
                return Err(HarnessError::request(
                    "killing the primary",
                    format!("no server runs on {port}"),
                ));
            }
        }
        Ok(port)
    }

    /// Waits until the sentinels name a primary other than `old` and it answers as one
    /// (`role:master`); returns its port. Within [`FAILOVER_TIMEOUT`].
    pub async fn wait_failover(&self, old: u16) -> Result<u16, HarnessError> {
        let ports: Vec<u16> = self.sentinels.iter().map(|(p, _)| *p).collect();
        self.poll("a sentinel failover", FAILOVER_TIMEOUT, || {
            let ports = ports.clone();
            async move {
                for port in ports {
                    let named = primary_named_by(port).await?;
                    if named != old {
                        let info = resp::info(named, "replication").await?;
                        if info.lines().any(|l| l.trim() == "role:master") {
                            return Ok(named);
                        }
                    }
                }
                Err(format!("the sentinels still name {old}, or the promoted replica is not a primary yet"))
            }
        })
        .await
    }

    /// Waits until `n` replicas acknowledge a write on the primary on `port` (`WAIT n`).
    pub async fn wait_replicas_acknowledge(&self, port: u16, n: usize) -> Result<(), HarnessError> {
        let wanted = n.to_string();
        self.poll("replicas acknowledging the primary's writes", VALKEY_READY_TIMEOUT * 3, || {
            let wanted = wanted.clone();
            async move {
                let probe = ["SET", "tierlog-harness:probe", "1"];
                match resp::pipeline(port, &[&probe, &["WAIT", wanted.as_str(), "100"]]).await?.as_slice() {
                    [_, Reply::Integer(got)] if usize::try_from(*got).is_ok_and(|got| got >= n) => Ok(()),
                    other => Err(format!("WAIT {wanted} on {port}: {other:?}")),
                }
            }
        })
        .await
    }

    fn spawn_server(&mut self, name: &str, replica_of: Option<u16>) -> Result<u16, HarnessError> {
        let port = free_port()?;
        let mut args = valkey_args(port, self.dir.path(), name)?;
        if let Some(primary) = replica_of {
            args.extend(["--replicaof".into(), "127.0.0.1".into(), primary.to_string()]);
        }
        let process = spawn_valkey(&self.binary, name, &args, self.dir.path())?;
        self.servers.push((port, Some(process)));
        Ok(port)
    }

    fn spawn_sentinel(&mut self, i: usize, primary: u16) -> Result<(), HarnessError> {
        let port = free_port()?;
        let conf = self.dir.path().join(format!("sentinel-{i}.conf"));
        let text = format!(
            "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {dir}\n\
             sentinel monitor {SENTINEL_SERVICE} 127.0.0.1 {primary} 2\n\
             sentinel down-after-milliseconds {SENTINEL_SERVICE} {down}\n\
             sentinel failover-timeout {SENTINEL_SERVICE} 10000\n\
             sentinel parallel-syncs {SENTINEL_SERVICE} 1\n",
            dir = self.dir.path().display(),
            down = DOWN_AFTER.as_millis(),
        );
        std::fs::write(&conf, text).map_err(|e| HarnessError::io("writing a sentinel configuration", e))?;
        let args = vec![conf.to_string_lossy().into_owned(), "--sentinel".to_owned()];
        let process = spawn_valkey(&self.binary, &format!("sentinel-{i}"), &args, self.dir.path())?;
        self.sentinels.push((port, process));
        Ok(())
    }

    /// Runs `probe` until it succeeds, for at most `limit` ([`poll_until`]); the error
    /// names what was awaited and ends with the tail of every log.
    async fn poll<T, F, Fut>(&self, what: &str, limit: Duration, probe: F) -> Result<T, HarnessError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, String>>,
    {
        poll_until(what, limit, probe, self.dir.path(), || self.log_tails()).await
    }

    fn log_tails(&self) -> String {
        let logs = std::fs::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|e| e == "log"))
            .map(|path| (file_name(&path), path));
        labelled_tails(logs, 10)
    }
}

fn array_len(reply: Reply) -> usize {
    match reply {
        Reply::Array(Some(items)) => items.len(),
        _ => 0,
    }
}

/// The primary's port as the sentinel on `sentinel` names it.
async fn primary_named_by(sentinel: u16) -> Result<u16, String> {
    match resp::command(sentinel, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_SERVICE]).await? {
        Reply::Array(Some(items)) => match items.as_slice() {
            [_, Reply::Bulk(Some(port))] => String::from_utf8_lossy(port)
                .parse()
                .map_err(|e| format!("the sentinel named port {port:?}: {e}")),
            other => Err(format!("unexpected address {other:?}")),
        },
        other => Err(format!("unexpected answer {other:?}")),
    }
}
