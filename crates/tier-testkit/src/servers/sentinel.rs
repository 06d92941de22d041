//! [`ValkeySentinel`]: a Valkey primary with two replicas, watched by three sentinels
//! that fail it over.

use std::{collections::HashMap, future::Future, time::Duration};

use tempfile::TempDir;

use super::{
    HarnessError, VALKEY_READY_TIMEOUT,
    link::LinkProxy,
    locate::ValkeyBinary,
    poll::{file_name, labelled_tails, poll_until},
    process::{ServerProcess, free_port, spawn_valkey, temp_dir, valkey_args},
    resp::{self, Reply},
};

/// The service name the sentinels monitor.
pub const SENTINEL_SERVICE: &str = "tierlog";

/// How long a sentinel waits before it calls an unanswering primary down.
const DOWN_AFTER: Duration = Duration::from_millis(1000);

/// The sentinels' `failover-timeout`: how long a failover may run, and twice it the
/// pause before a sentinel tries again one that failed.
const SENTINEL_FAILOVER_TIMEOUT: Duration = Duration::from_secs(10);

/// The sentinels' `failover-timeout` while a deployment with a link proxy has its
/// primary. A sentinel re-points a replica whose configured primary address is not the
/// one it monitors (`+fix-slave-config`, Valkey's `sentinel.c`) once that configuration
/// is `failover-timeout` old: the proxied replica would then replicate directly, past the
/// cut. Set back to
/// [`SENTINEL_FAILOVER_TIMEOUT`] when the primary is killed (a re-pointing after that
/// delivers nothing: the primary is gone).
const PROXIED_FAILOVER_TIMEOUT: Duration = Duration::from_secs(3600);

/// How long a failover may take, from the kill to a promoted replica that the sentinels
/// name and that answers as a primary.
pub const FAILOVER_TIMEOUT: Duration = Duration::from_secs(30);

/// A primary, two replicas and three sentinels (quorum 2) on free 127.0.0.1 ports, from
/// a temporary directory holding their data directories, sentinel configuration files
/// and logs. Every process is killed (SIGKILL by PID) when this is dropped.
///
/// A sentinel calls the primary down after 1 s without an answer and the three elect
/// one of them to promote the replica with the most replicated data
/// ([`kill_primary`](Self::kill_primary), [`wait_failover`](Self::wait_failover)), or
/// the only one allowed ([`restrict_promotion_to`](Self::restrict_promotion_to)).
///
/// [`start_with_link_proxy`](Self::start_with_link_proxy) runs the second replica's
/// replication link through a proxy that [`cut_replica_link`](Self::cut_replica_link)
/// cuts: with `WAIT 1` met by the first replica, a failover to the second then loses
/// writes `WAIT` confirmed.
#[derive(Debug)]
pub struct ValkeySentinel {
    binary: ValkeyBinary,
    /// Data servers by port (the primary first at start); `None` once killed.
    servers: Vec<(u16, Option<ServerProcess>)>,
    sentinels: Vec<(u16, ServerProcess)>,
    /// The second replica's port and the proxy it reaches the first primary through,
    /// when started with one.
    link: Option<(u16, LinkProxy)>,
    // Declared last: removed after the processes are killed.
    dir: TempDir,
}

impl ValkeySentinel {
    /// Starts the servers and the sentinels, and waits until both replicas acknowledge
    /// the primary's writes and every sentinel knows both replicas and the two other
    /// sentinels (so that a failover can be agreed on).
    pub async fn start() -> Result<Self, HarnessError> {
        Self::launch(false).await
    }

    /// [`start`](Self::start), with the second replica reaching the primary through a
    /// proxy on its own port, so that a test can cut that replica's replication link
    /// ([`cut_replica_link`](Self::cut_replica_link)) while every server runs. The proxy
    /// runs on the calling Tokio runtime.
    pub async fn start_with_link_proxy() -> Result<Self, HarnessError> {
        Self::launch(true).await
    }

    async fn launch(proxied: bool) -> Result<Self, HarnessError> {
        let binary = ValkeyBinary::locate()?;
        let dir = temp_dir("tierlog-sentinel-", "Valkey sentinel")?;
        let mut this = Self { binary, servers: Vec::new(), sentinels: Vec::new(), link: None, dir };
        let primary = this.spawn_server("primary", None)?;
        this.spawn_server("replica-1", Some(primary))?;
        if proxied {
            let proxy = LinkProxy::start(primary).await?;
            let port = this.spawn_server("replica-2", Some(proxy.port()))?;
            this.link = Some((port, proxy));
        } else {
            this.spawn_server("replica-2", Some(primary))?;
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

    /// The port of the replica whose link runs through the proxy
    /// ([`start_with_link_proxy`](Self::start_with_link_proxy)).
    pub fn proxied_replica_port(&self) -> Result<u16, HarnessError> {
        Ok(self.link()?.0)
    }

    /// Cuts the proxied replica's replication link
    /// ([`start_with_link_proxy`](Self::start_with_link_proxy)): the primary and the
    /// replica keep an open connection that carries nothing, as in a partition TCP has
    /// not noticed. The primary goes on counting the replica as connected (until
    /// `repl-timeout`, 60 s) and the replica goes on reporting its link up, but it
    /// receives no write made from now on and acknowledges none. Unlike a stopped
    /// process, it does not receive them later: nothing is delivered until
    /// [`restore_replica_link`](Self::restore_replica_link).
    pub fn cut_replica_link(&self) -> Result<(), HarnessError> {
        self.link()?.1.cut();
        Ok(())
    }

    /// Undoes [`cut_replica_link`](Self::cut_replica_link): what was held back is
    /// delivered, in order.
    pub fn restore_replica_link(&self) -> Result<(), HarnessError> {
        self.link()?.1.restore();
        Ok(())
    }

    fn link(&self) -> Result<&(u16, LinkProxy), HarnessError> {
        self.link.as_ref().ok_or_else(|| {
            HarnessError::request(
                "sentinel replication link",
                "the deployment was not started with a link proxy",
            )
        })
    }

    /// Makes the replica on `port` the only one a failover may promote: sets
    /// `replica-priority 0` (never promoted) on every other running replica with
    /// `CONFIG SET`, and waits until every sentinel reports those priorities (a sentinel
    /// reads a replica's priority from its `INFO`, every 10 s while the primary is up).
    pub async fn restrict_promotion_to(&self, port: u16) -> Result<(), HarnessError> {
        let primary = self.primary_port().await?;
        let others: Vec<u16> = self
            .servers
            .iter()
            .filter(|(p, process)| process.is_some() && *p != primary && *p != port)
            .map(|(p, _)| *p)
            .collect();
        if !self.servers.iter().any(|(p, process)| *p == port && *p != primary && process.is_some()) {
            return Err(HarnessError::request("restricting promotion", format!("no replica runs on {port}")));
        }
        for other in &others {
            match resp::command(*other, &["CONFIG", "SET", "replica-priority", "0"]).await {
                Ok(Reply::Simple(_)) => {}
                Ok(other_reply) => {
                    return Err(HarnessError::request(
                        "setting replica-priority 0",
                        format!("CONFIG SET on {other} answered {other_reply:?}"),
                    ));
                }
                Err(e) => return Err(HarnessError::request("setting replica-priority 0", e)),
            }
        }
        let ports: Vec<u16> = self.sentinels.iter().map(|(p, _)| *p).collect();
        self.poll("every sentinel seeing the replicas' priorities", VALKEY_READY_TIMEOUT * 3, || {
            let (ports, others) = (ports.clone(), others.clone());
            async move {
                for sentinel in ports {
                    let reply = resp::command(sentinel, &["SENTINEL", "REPLICAS", SENTINEL_SERVICE]).await?;
                    for replica in field_maps(reply) {
                        let at = replica.get("port").and_then(|p| p.parse::<u16>().ok());
                        let priority = replica.get("slave-priority").map(String::as_str);
                        let zero = priority == Some("0");
                        if at.is_some_and(|at| others.contains(&at)) != zero {
                            return Err(format!(
                                "sentinel on {sentinel} reports replica {at:?} at priority {priority:?}"
                            ));
                        }
                    }
                }
                Ok(())
            }
        })
        .await
    }

    /// Which server runs, e.g. `"valkey 8.0.1"`.
    pub fn server_kind(&self) -> String {
        self.binary.kind()
    }

    /// Kills the current primary (SIGKILL by PID: it keeps nothing, it has no
    /// persistence). Returns its port. With a link proxy, then sets the sentinels'
    /// `failover-timeout` from an hour (which keeps them from re-pointing the proxied
    /// replica past the cut while the primary runs) to the 10 s of a deployment without.
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
        if self.failover_timeout() != SENTINEL_FAILOVER_TIMEOUT {
            let millis = SENTINEL_FAILOVER_TIMEOUT.as_millis().to_string();
            for (sentinel, _) in &self.sentinels {
                let set = ["SENTINEL", "SET", SENTINEL_SERVICE, "failover-timeout", millis.as_str()];
                match resp::command(*sentinel, &set).await {
                    Ok(Reply::Simple(_)) => {}
                    other => {
                        return Err(HarnessError::request(
                            "setting the sentinels' failover-timeout",
                            format!("the sentinel on {sentinel} answered {other:?}"),
                        ));
                    }
                }
            }
        }
        Ok(port)
    }

    /// The sentinels' `failover-timeout` while the first primary runs.
    fn failover_timeout(&self) -> Duration {
        if self.link.is_some() { PROXIED_FAILOVER_TIMEOUT } else { SENTINEL_FAILOVER_TIMEOUT }
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
             sentinel failover-timeout {SENTINEL_SERVICE} {failover}\n\
             sentinel parallel-syncs {SENTINEL_SERVICE} 1\n",
            dir = self.dir.path().display(),
            down = DOWN_AFTER.as_millis(),
            failover = self.failover_timeout().as_millis(),
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

/// The entries of a `SENTINEL REPLICAS` reply: each a flat array of field names and
/// values.
fn field_maps(reply: Reply) -> Vec<HashMap<String, String>> {
    let text = |item: &Reply| match item {
        Reply::Bulk(Some(bytes)) => Some(String::from_utf8_lossy(bytes).into_owned()),
        _ => None,
    };
    let Reply::Array(Some(entries)) = reply else { return Vec::new() };
    entries
        .iter()
        .filter_map(|entry| match entry {
            Reply::Array(Some(fields)) => Some(
                fields
                    .chunks_exact(2)
                    .filter_map(|kv| match kv {
                        [k, v] => Some((text(k)?, text(v)?)),
                        _ => None,
                    })
                    .collect(),
            ),
            _ => None,
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::{Reply, ValkeySentinel, field_maps, resp};

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(Some(s.as_bytes().to_vec()))
    }

    #[test]
    fn sentinel_replicas_replies_are_read_into_field_maps() {
        let reply = Reply::Array(Some(vec![
            Reply::Array(Some(vec![bulk("port"), bulk("7001"), bulk("slave-priority"), bulk("0")])),
            Reply::Array(Some(vec![bulk("port"), bulk("7002"), bulk("odd")])),
            Reply::Integer(3),
        ]));
        let maps = field_maps(reply);
        assert_eq!(maps.len(), 2);
        assert_eq!(maps[0].get("port").map(String::as_str), Some("7001"));
        assert_eq!(maps[0].get("slave-priority").map(String::as_str), Some("0"));
        assert_eq!(maps[1].len(), 1, "an unpaired trailing field is left out");
        assert!(field_maps(Reply::Array(None)).is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cut_replica_link_holds_the_primary_s_writes_until_restored() {
        let sentinel = ValkeySentinel::start_with_link_proxy().await.unwrap();
        let primary = sentinel.primary_port().await.unwrap();
        let proxied = sentinel.proxied_replica_port().unwrap();

        sentinel.cut_replica_link().unwrap();
        assert_eq!(resp::command(primary, &["SET", "k", "cut"]).await.unwrap(), Reply::Simple("OK".into()));
        // The other replica acknowledges the write (and the probe after it); the proxied
        // one has not received it.
        sentinel.wait_replicas_acknowledge(primary, 1).await.unwrap();
        assert_eq!(resp::command(proxied, &["GET", "k"]).await.unwrap(), Reply::Bulk(None));

        sentinel.restore_replica_link().unwrap();
        sentinel.wait_replicas_acknowledge(primary, 2).await.unwrap();
        assert_eq!(resp::command(proxied, &["GET", "k"]).await.unwrap(), bulk("cut"));
    }
}
