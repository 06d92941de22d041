//! [`ValkeyPair`]: a private Valkey (or Redis) primary with one replica.

use std::path::PathBuf;

use tempfile::TempDir;

use super::{
    HarnessError, PORT_CLASH_RETRIES, VALKEY_READY_TIMEOUT,
    link::LinkProxy,
    locate::ValkeyBinary,
    poll::{poll_until, primary_and_replica_tails, retry, wait_until_answering},
    process::{ServerProcess, free_port, log_shows_port_clash, spawn_valkey, temp_dir, valkey_args},
    resp,
};

/// A Valkey primary and a replica of it on free 127.0.0.1 ports, started from a
/// temporary directory that holds their `--dir` and log files.
///
/// Both processes are killed (SIGKILL by PID) and reaped when the pair is dropped. Use
/// this directly in tests that stop or restart servers; other tests use
/// [`SharedValkey`](super::SharedValkey).
///
/// [`start_primary_only`](Self::start_primary_only) starts a primary without a replica
/// (one is added by [`start_replica`](Self::start_replica));
/// [`start_with_link_proxy`](Self::start_with_link_proxy) runs the replication link
/// through a proxy that [`cut_replication_link`](Self::cut_replication_link) cuts.
#[derive(Debug)]
pub struct ValkeyPair {
    binary: ValkeyBinary,
    primary: Option<ServerProcess>,
    replica: Option<ServerProcess>,
    primary_port: u16,
    /// 0 until a replica was started.
    replica_port: u16,
    /// The proxy the replica reaches the primary through, when started with one.
    link: Option<LinkProxy>,
    // Declared last: removed after the processes are killed.
    dir: TempDir,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Primary,
    Replica,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Primary => "primary",
            Role::Replica => "replica",
        }
    }
}

impl ValkeyPair {
    /// Locates the server binary, starts a primary and a replica, and waits until the
    /// primary answers `PING` and the replica's link to it is up (so `WAIT 1` works).
    pub async fn start() -> Result<Self, HarnessError> {
        let mut pair = Self::start_primary_only().await?;
        pair.start_replica().await?;
        Ok(pair)
    }

    /// Locates the server binary and starts a primary with no replica (it has never had
    /// one: `INFO replication` reports `connected_slaves:0` and `repl_backlog_active:0`).
    /// [`start_replica`](Self::start_replica) adds one.
    pub async fn start_primary_only() -> Result<Self, HarnessError> {
        let binary = ValkeyBinary::locate()?;
        let dir = temp_dir("tierlog-valkey-", "Valkey")?;
        let mut pair =
            Self { binary, primary: None, replica: None, primary_port: 0, replica_port: 0, link: None, dir };
        let (primary, port) = pair.launch(Role::Primary, None).await?;
        pair.primary = Some(primary);
        pair.primary_port = port;
        Ok(pair)
    }

    /// [`start`](Self::start), with the replica reaching the primary through a proxy on
    /// its own port, so that a test can cut the replication link
    /// ([`cut_replication_link`](Self::cut_replication_link)) while both servers run.
    /// The proxy runs on the calling Tokio runtime.
    pub async fn start_with_link_proxy() -> Result<Self, HarnessError> {
        let mut pair = Self::start_primary_only().await?;
        pair.link = Some(LinkProxy::start(pair.primary_port).await?);
        pair.start_replica().await?;
        Ok(pair)
    }

    /// Cuts the replication link of a pair started by
    /// [`start_with_link_proxy`](Self::start_with_link_proxy): both servers keep an
    /// open connection that carries nothing, as in a partition TCP has not noticed. The
    /// primary goes on counting the replica as connected (until `repl-timeout`, 60 s),
    /// but the replica receives no write made from now on and acknowledges none, so a
    /// `WAIT 1` for such a write returns 0.
    pub fn cut_replication_link(&self) -> Result<(), HarnessError> {
        self.link_proxy()?.cut();
        Ok(())
    }

    /// Undoes [`cut_replication_link`](Self::cut_replication_link): what was held back is
    /// delivered, in order.
    pub fn restore_replication_link(&self) -> Result<(), HarnessError> {
        self.link_proxy()?.restore();
        Ok(())
    }

    fn link_proxy(&self) -> Result<&LinkProxy, HarnessError> {
        self.link.as_ref().ok_or_else(|| {
            HarnessError::request("valkey replication link", "the pair was not started with a link proxy")
        })
    }

    /// Promotes the replica (`REPLICAOF NO ONE`) and waits until it reports
    /// `role:master`. It keeps what it had received; the old primary, if it runs, is left
    /// alone.
    pub async fn promote_replica(&mut self) -> Result<(), HarnessError> {
        let what = "promoting the valkey replica";
        if self.replica.is_none() {
            return Err(HarnessError::request(what, "the replica is not running"));
        }
        match resp::command(self.replica_port, &["REPLICAOF", "NO", "ONE"]).await {
            Ok(resp::Reply::Simple(_)) => {}
            Ok(other) => {
                return Err(HarnessError::request(what, format!("REPLICAOF NO ONE answered {other:?}")));
            }
            Err(e) => return Err(HarnessError::request(what, e)),
        }
        let port = self.replica_port;
        self.poll(what, move || async move {
            let info = resp::info(port, "replication").await?;
            if info.lines().any(|l| l.trim() == "role:master") {
                Ok(())
            } else {
                Err("the replica does not report role:master yet".to_owned())
            }
        })
        .await
    }

    /// Waits until the primary's `INFO replication` reports exactly `n` connected
    /// replicas (`connected_slaves:<n>`): after [`stop_replica`](Self::stop_replica) the
    /// primary notices the closed connection a moment later.
    pub async fn wait_connected_replicas(&self, n: usize) -> Result<(), HarnessError> {
        let port = self.primary_port;
        let wanted = format!("connected_slaves:{n}");
        self.poll("counting the primary's replicas", move || {
            let wanted = wanted.clone();
            async move {
                let info = resp::info(port, "replication").await?;
                if info.lines().any(|l| l.trim() == wanted) {
                    Ok(())
                } else {
                    Err(format!("the primary does not report {wanted} yet"))
                }
            }
        })
        .await
    }

    /// [`retry`] for at most [`VALKEY_READY_TIMEOUT`]; the error names what was awaited
    /// and the last probe's reason.
    async fn poll<F, Fut>(&self, what: &str, probe: F) -> Result<(), HarnessError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        retry(VALKEY_READY_TIMEOUT, probe).await.map_err(|reason| {
            HarnessError::request(what, format!("not done within {VALKEY_READY_TIMEOUT:?}: {reason}"))
        })
    }

    /// `redis://127.0.0.1:<primary port>`.
    pub fn primary_url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.primary_port)
    }

    /// `redis://127.0.0.1:<replica port>`.
    pub fn replica_url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.replica_port)
    }

    /// The primary's port (kept across [`restart_primary`](Self::restart_primary)).
    pub fn primary_port(&self) -> u16 {
        self.primary_port
    }

    /// The replica's port (kept across [`start_replica`](Self::start_replica)); 0 before
    /// a replica was first started.
    pub fn replica_port(&self) -> u16 {
        self.replica_port
    }

    /// Which server runs, e.g. `"valkey 8.0.1"` or `"redis 7.0.15"`.
    pub fn server_kind(&self) -> String {
        self.binary.kind()
    }

    /// The server binary in use.
    pub fn binary(&self) -> &ValkeyBinary {
        &self.binary
    }

    /// The primary's PID while it runs.
    pub fn primary_pid(&self) -> Option<u32> {
        self.primary.as_ref().map(ServerProcess::pid)
    }

    /// The replica's PID while it runs.
    pub fn replica_pid(&self) -> Option<u32> {
        self.replica.as_ref().map(ServerProcess::pid)
    }

    /// Kills the replica (SIGKILL by PID) and waits for it to exit. `WAIT 1 t` on the
    /// primary then returns 0.
    pub async fn stop_replica(&mut self) {
        if let Some(replica) = self.replica.take() {
            replica.kill();
        }
    }

    /// Starts the replica (again, on its port, when it ran before; on a free port the
    /// first time) and waits until its link to the primary is up. Does nothing but wait
    /// when it already runs.
    pub async fn start_replica(&mut self) -> Result<(), HarnessError> {
        if self.replica.is_none() {
            let port = (self.replica_port != 0).then_some(self.replica_port);
            let (replica, port) = self.launch(Role::Replica, port).await?;
            self.replica = Some(replica);
            self.replica_port = port;
        }
        if self.primary.is_some() { self.wait_link_up().await } else { Ok(()) }
    }

    /// Closes every client connection the primary has (`CLIENT KILL TYPE normal`), as a
    /// network blip would: clients carry on over new connections. Returns how many were
    /// closed.
    pub async fn kill_primary_clients(&self) -> Result<i64, HarnessError> {
        let what = "closing the valkey primary's client connections";
        match resp::command(self.primary_port, &["CLIENT", "KILL", "TYPE", "normal"]).await {
            Ok(resp::Reply::Integer(n)) => Ok(n),
            Ok(other) => Err(HarnessError::request(what, format!("CLIENT KILL answered {other:?}"))),
            Err(e) => Err(HarnessError::request(what, e)),
        }
    }

    /// Kills the primary (SIGKILL by PID: it loses everything, it has no persistence)
    /// and waits for it to exit.
    pub async fn stop_primary(&mut self) {
        if let Some(primary) = self.primary.take() {
            primary.kill();
        }
    }

    /// Stops the primary if it runs, starts it again on the same port (empty), and waits
    /// until it answers and, when the replica runs, the replica's link is up again.
    pub async fn restart_primary(&mut self) -> Result<(), HarnessError> {
        self.stop_primary().await;
        let (primary, _) = self.launch(Role::Primary, Some(self.primary_port)).await?;
        self.primary = Some(primary);
        if self.replica.is_some() { self.wait_link_up().await } else { Ok(()) }
    }

    /// Starts one server and waits until it answers `PING`. With `port: None` a free port
    /// is chosen, and a start that loses its port to another process is retried.
    async fn launch(&self, role: Role, port: Option<u16>) -> Result<(ServerProcess, u16), HarnessError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let chosen = match port {
                Some(p) => p,
                None => free_port()?,
            };
            let mut process = self.spawn(role, chosen)?;
            let what = format!("valkey {} on port {chosen}", role.name());
            let ping = || resp::ping(chosen);
            match wait_until_answering(&mut process, what, VALKEY_READY_TIMEOUT, ping).await {
                Ok(()) => return Ok((process, chosen)),
                Err(e) => {
                    let clash = log_shows_port_clash(process.log());
                    drop(process);
                    if !(clash && port.is_none() && attempt < PORT_CLASH_RETRIES) {
                        return Err(e);
                    }
                }
            }
        }
    }

    fn spawn(&self, role: Role, port: u16) -> Result<ServerProcess, HarnessError> {
        let mut args = valkey_args(port, self.dir.path(), role.name())?;
        if role == Role::Replica {
            let upstream = self.link.as_ref().map_or(self.primary_port, LinkProxy::port);
            args.extend(["--replicaof".into(), "127.0.0.1".into(), upstream.to_string()]);
        }
        spawn_valkey(&self.binary, role.name(), &args, self.dir.path())
    }

    fn log_path(&self, role: Role) -> PathBuf {
        self.dir.path().join(format!("{}.log", role.name()))
    }

    /// Waits until the replica reports `master_link_status:up` and the primary lists it
    /// as an online replica. A server that exited fails the probe (its exit is the
    /// reason) without ending the wait.
    async fn wait_link_up(&mut self) -> Result<(), HarnessError> {
        let what = format!("{} replication link", self.binary.kind());
        let log = self.log_path(Role::Replica);
        let dir = self.dir.path();
        let (primary, replica) = (&mut self.primary, &mut self.replica);
        let (primary_port, replica_port) = (self.primary_port, self.replica_port);
        let probe = || {
            let exited = primary.as_mut().and_then(ServerProcess::exited);
            let exited = exited.or_else(|| replica.as_mut().and_then(ServerProcess::exited));
            async move {
                match exited {
                    Some(exit) => Err(exit),
                    None => link_state(primary_port, replica_port).await,
                }
            }
        };
        poll_until(&what, VALKEY_READY_TIMEOUT, probe, &log, || primary_and_replica_tails(dir)).await
    }
}

/// `Ok` when the replica on `replica_port` reports its link up, the primary on
/// `primary_port` lists it online, and it acknowledges a write.
async fn link_state(primary_port: u16, replica_port: u16) -> Result<(), String> {
    let replica = resp::info(replica_port, "replication").await?;
    if !replica.lines().any(|l| l.trim() == "master_link_status:up") {
        return Err("replica's master_link_status is not up".into());
    }
    let primary = resp::info(primary_port, "replication").await?;
    let online = primary.lines().any(|l| {
        l.starts_with("slave") && l.contains(&format!("port={replica_port}")) && l.contains("state=online")
    });
    if !online {
        return Err("primary does not list the replica as online".into());
    }
    // `state=online` comes before the replica's first `REPLCONF ACK`, and `WAIT`
    // counts a replica only after it: prove a write is acknowledged.
    let probe = ["SET", "tierlog-harness:probe", "1"];
    match resp::pipeline(primary_port, &[&probe, &["WAIT", "1", "100"]]).await?.as_slice() {
        [_, resp::Reply::Integer(n)] if *n >= 1 => Ok(()),
        [_, other] => Err(format!("a probe write was not acknowledged by the replica (WAIT said {other:?})")),
        other => Err(format!("unexpected replies to SET+WAIT: {other:?}")),
    }
}
