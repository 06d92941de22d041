//! [`ValkeyCluster`]: a Valkey Cluster of three primaries with one replica each, which
//! fails a primary over to its replica.

use std::{collections::HashMap, future::Future, path::PathBuf, time::Duration};

use tempfile::TempDir;

use super::{
    FAILOVER_TIMEOUT, HarnessError, PORT_CLASH_RETRIES, VALKEY_READY_TIMEOUT,
    locate::ValkeyBinary,
    poll::{file_name, labelled_tails, poll_until, wait_until_answering},
    process::{ServerProcess, free_port, log_shows_port_clash, spawn_valkey, temp_dir, valkey_args},
    resp::{self, Reply},
};

/// `cluster-node-timeout` of every node: how long a primary may not answer before the
/// others flag it failed and its replica starts an election.
pub const CLUSTER_NODE_TIMEOUT: Duration = Duration::from_millis(1000);

/// The hash slots of a cluster (`0..16384`).
const SLOTS: u32 = 16384;

/// The slot ranges the three primaries are given, in order.
const SHARD_SLOTS: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

/// One `valkey-server` of the cluster.
#[derive(Debug)]
struct Node {
    name: String,
    port: u16,
    /// The cluster bus port (`--cluster-port`).
    bus_port: u16,
    /// `None` once killed.
    process: Option<ServerProcess>,
}

/// What one line of `CLUSTER NODES` says about a node.
#[derive(Clone, Debug, PartialEq, Eq)]
struct NodeView {
    id: String,
    port: u16,
    primary: bool,
    /// Flagged `fail` (or `fail?`, `noaddr`, `handshake`): not a working member.
    failing: bool,
    /// The id of the primary it replicates, for a replica.
    primary_id: Option<String>,
    /// Slot ranges it serves (inclusive), for a primary.
    slots: Vec<(u16, u16)>,
}

/// Six `valkey-server` processes with `cluster-enabled yes` on free 127.0.0.1 ports (each
/// with its own cluster bus port and `nodes.conf`), from a temporary directory holding
/// their data directories and logs: three primaries sharing the 16384 hash slots and a
/// replica of each. Every process is killed (SIGKILL by PID) when this is dropped.
///
/// A node that has not answered for [`CLUSTER_NODE_TIMEOUT`] is flagged failed, and the
/// replica of a failed primary takes its slots
/// ([`kill_primary_of`](Self::kill_primary_of), [`wait_failover`](Self::wait_failover)).
#[derive(Debug)]
pub struct ValkeyCluster {
    binary: ValkeyBinary,
    /// The primaries first (in the order of [`SHARD_SLOTS`]), then their replicas.
    nodes: Vec<Node>,
    /// Slot ranges of the primaries [`kill`](Self::kill) killed, by port.
    killed_slots: HashMap<u16, Vec<(u16, u16)>>,
    // Declared last: removed after the processes are killed.
    dir: TempDir,
}

impl ValkeyCluster {
    /// Starts the six nodes, assigns the slots to three of them (`CLUSTER ADDSLOTSRANGE`),
    /// joins them (`CLUSTER MEET`), makes each of the other three a replica of one primary
    /// (`CLUSTER REPLICATE`), and waits until every node says `cluster_state:ok`, sees
    /// three primaries serving every slot and three replicas, and each primary's replica
    /// acknowledges its writes (`WAIT 1`).
    pub async fn start() -> Result<Self, HarnessError> {
        let binary = ValkeyBinary::locate()?;
        let dir = temp_dir("tierlog-cluster-", "Valkey Cluster")?;
        let mut this = Self { binary, nodes: Vec::new(), killed_slots: HashMap::new(), dir };
        for name in ["primary-1", "primary-2", "primary-3", "replica-1", "replica-2", "replica-3"] {
            let node = this.launch(name).await?;
            this.nodes.push(node);
        }
        let ports = this.ports();
        let mut ids = Vec::with_capacity(ports.len());
        for &port in &ports {
            ids.push(this.node_id(port).await?);
        }
        for (&port, (lo, hi)) in ports.iter().zip(SHARD_SLOTS) {
            let (lo, hi) = (lo.to_string(), hi.to_string());
            expect_ok(port, &["CLUSTER", "ADDSLOTSRANGE", &lo, &hi]).await?;
        }
        let meets: Vec<(String, String)> =
            this.nodes[1..].iter().map(|n| (n.port.to_string(), n.bus_port.to_string())).collect();
        for (port, bus) in &meets {
            expect_ok(ports[0], &["CLUSTER", "MEET", "127.0.0.1", port, bus]).await?;
        }
        this.poll("every node knowing the five others", VALKEY_READY_TIMEOUT, || async {
            for &port in &ports {
                let known = cluster_nodes(port).await?;
                let joined = known.iter().filter(|n| !n.failing).count();
                if joined != ports.len() {
                    return Err(format!("node {port} knows {joined} of {} nodes", ports.len()));
                }
            }
            Ok(())
        })
        .await?;
        for (replica, primary_id) in ports[3..].iter().zip(&ids[..3]) {
            let replica = *replica;
            this.poll("a node becoming a replica", VALKEY_READY_TIMEOUT, || async move {
                expect_ok(replica, &["CLUSTER", "REPLICATE", primary_id]).await.map_err(|e| e.to_string())
            })
            .await?;
        }
        this.wait_settled().await?;
        Ok(this)
    }

    /// `redis://127.0.0.1:<port>` of every node started (the seed URLs of a warm tier in
    /// cluster mode).
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| format!("redis://127.0.0.1:{}", n.port)).collect()
    }

    /// Which server runs, e.g. `"valkey 8.0.1"`.
    pub fn server_kind(&self) -> String {
        self.binary.kind()
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`, hash tags included).
    pub async fn key_slot(&self, key: &str) -> Result<u16, HarnessError> {
        let port = self.any_running()?;
        match resp::command(port, &["CLUSTER", "KEYSLOT", key]).await {
            Ok(Reply::Integer(slot)) => u16::try_from(slot)
                .map_err(|_| HarnessError::request("CLUSTER KEYSLOT", format!("slot {slot} out of range"))),
            other => Err(HarnessError::request("CLUSTER KEYSLOT", format!("{other:?}"))),
        }
    }

    /// The port of the primary serving `key`'s hash slot now.
    pub async fn primary_for_key(&self, key: &str) -> Result<u16, HarnessError> {
        let slot = self.key_slot(key).await?;
        self.primary_for_slot(slot).await
    }

    /// The ports of the primaries serving slots now, in slot order.
    pub async fn primaries(&self) -> Result<Vec<u16>, HarnessError> {
        let mut owners: Vec<NodeView> = self
            .view()
            .await?
            .into_iter()
            .filter(|n| n.primary && !n.failing && !n.slots.is_empty())
            .collect();
        owners.sort_by_key(|n| n.slots.first().map(|s| s.0));
        Ok(owners.into_iter().map(|n| n.port).collect())
    }

    /// The ports of the working replicas of the primary on `primary`.
    pub async fn replicas_of(&self, primary: u16) -> Result<Vec<u16>, HarnessError> {
        let view = self.view().await?;
        let id =
            view.iter().find(|n| n.port == primary).map(|n| n.id.clone()).ok_or_else(|| {
                HarnessError::request("CLUSTER NODES", format!("no node on port {primary}"))
            })?;
        Ok(view
            .iter()
            .filter(|n| !n.failing && n.primary_id.as_deref() == Some(id.as_str()))
            .map(|n| n.port)
            .collect())
    }

    /// Kills the node on `port` (SIGKILL by PID: it keeps nothing, it has no
    /// persistence), remembering the slots it served for
    /// [`wait_failover`](Self::wait_failover).
    pub async fn kill(&mut self, port: u16) -> Result<(), HarnessError> {
        let slots =
            self.view().await?.into_iter().find(|n| n.port == port).map(|n| n.slots).unwrap_or_default();
        let node = self.nodes.iter_mut().find(|n| n.port == port);
        match node.and_then(|n| n.process.take()) {
            Some(process) => process.kill(),
            None => return Err(HarnessError::request("killing a node", format!("no node runs on {port}"))),
        }
        if !slots.is_empty() {
            self.killed_slots.insert(port, slots);
        }
        Ok(())
    }

    /// Kills the primary serving `key`'s slot; returns its port.
    pub async fn kill_primary_of(&mut self, key: &str) -> Result<u16, HarnessError> {
        let port = self.primary_for_key(key).await?;
        self.kill(port).await?;
        Ok(port)
    }

    /// Stops (kills by PID) the replica on `port`; an error when that node is not a
    /// working replica.
    pub async fn stop_replica(&mut self, port: u16) -> Result<(), HarnessError> {
        let view = self.view().await?;
        if !view.iter().any(|n| n.port == port && !n.primary && !n.failing) {
            return Err(HarnessError::request("stopping a replica", format!("node {port} is not a replica")));
        }
        self.kill(port).await
    }

    /// Waits until the primary on `port` lists `n` replicas online (`INFO replication`),
    /// within [`VALKEY_READY_TIMEOUT`].
    pub async fn wait_replicas_online(&self, port: u16, n: usize) -> Result<(), HarnessError> {
        self.poll("a primary's replicas going online or away", VALKEY_READY_TIMEOUT, || async move {
            let info = resp::info(port, "replication").await?;
            let online =
                info.lines().filter(|l| l.starts_with("slave") && l.contains("state=online")).count();
            if online == n { Ok(()) } else { Err(format!("primary {port} lists {online} replica(s) online")) }
        })
        .await
    }

    /// Hands `slot`, which must hold no key, to the primary on `to`: `CLUSTER SETSLOT
    /// <slot> NODE <id>` on every running primary (the new owner first), then waits until
    /// every running node names `to` as the slot's primary. Clients that read the slot map
    /// before are not told: their next command for the slot is answered `MOVED`.
    pub async fn move_empty_slot(&self, slot: u16, to: u16) -> Result<(), HarnessError> {
        let id = self.node_id(to).await?;
        let slot_text = slot.to_string();
        let mut primaries: Vec<u16> =
            self.view().await?.into_iter().filter(|n| n.primary && !n.failing).map(|n| n.port).collect();
        primaries.sort_by_key(|&p| p != to);
        for port in primaries {
            expect_ok(port, &["CLUSTER", "SETSLOT", &slot_text, "NODE", &id]).await?;
        }
        let running = self.running_ports();
        self.poll("every node seeing a slot's new primary", VALKEY_READY_TIMEOUT, || {
            let running = running.clone();
            async move {
                for &port in &running {
                    let named = owner_in(&cluster_nodes(port).await?, slot);
                    if named != Some(to) {
                        return Err(format!("node {port} names {named:?} as the primary of slot {slot}"));
                    }
                }
                Ok(())
            }
        })
        .await
    }

    /// Waits until the slots of the killed primary on `old` are served by another
    /// primary, every running node agrees on it and says `cluster_state:ok`, and the
    /// promoted node answers as a primary (`role:master`); returns its port. Within
    /// [`FAILOVER_TIMEOUT`].
    pub async fn wait_failover(&self, old: u16) -> Result<u16, HarnessError> {
        let slot =
            self.killed_slots.get(&old).and_then(|slots| slots.first()).map(|s| s.0).ok_or_else(|| {
                HarnessError::request("waiting for a failover", format!("no primary on {old} was killed"))
            })?;
        let running = self.running_ports();
        self.poll("a cluster failover", FAILOVER_TIMEOUT, || {
            let running = running.clone();
            async move {
                let mut owner = None;
                for &port in &running {
                    cluster_ok(port).await?;
                    let named = owner_in(&cluster_nodes(port).await?, slot)
                        .ok_or_else(|| format!("node {port} names no working primary for slot {slot}"))?;
                    if named == old || owner.is_some_and(|o| o != named) {
                        return Err(format!("node {port} names {named} as the primary of slot {slot}"));
                    }
                    owner = Some(named);
                }
                let named = owner.ok_or("no node runs")?;
                let info = resp::info(named, "replication").await?;
                if !info.lines().any(|l| l.trim() == "role:master") {
                    return Err(format!("the promoted node {named} is not a primary yet"));
                }
                Ok(named)
            }
        })
        .await
    }

    /// Waits until every running node says `cluster_state:ok` and sees every slot served
    /// by a working primary, and every primary with a running replica has it
    /// acknowledging writes.
    async fn wait_settled(&self) -> Result<(), HarnessError> {
        let running = self.running_ports();
        self.poll("the cluster settling", VALKEY_READY_TIMEOUT * 3, || {
            let running = running.clone();
            async move {
                let mut last = Vec::new();
                for &port in &running {
                    cluster_ok(port).await?;
                    let view = cluster_nodes(port).await?;
                    let served: u32 = view
                        .iter()
                        .filter(|n| n.primary && !n.failing)
                        .flat_map(|n| &n.slots)
                        .map(|(lo, hi)| u32::from(hi - lo) + 1)
                        .sum();
                    if served != SLOTS {
                        return Err(format!("node {port} sees {served} of {SLOTS} slots served"));
                    }
                    last = view;
                }
                for primary in last.iter().filter(|n| n.primary && !n.failing && !n.slots.is_empty()) {
                    let replicas = last
                        .iter()
                        .filter(|n| !n.failing && n.primary_id.as_deref() == Some(primary.id.as_str()))
                        .count();
                    if replicas == 0 {
                        return Err(format!("primary {} has no replica", primary.port));
                    }
                    wait_one_acknowledges(primary.port, &primary.slots).await?;
                }
                Ok(())
            }
        })
        .await
    }

    async fn primary_for_slot(&self, slot: u16) -> Result<u16, HarnessError> {
        owner_in(&self.view().await?, slot).ok_or_else(|| {
            HarnessError::request("CLUSTER NODES", format!("no working primary serves slot {slot}"))
        })
    }

    /// `CLUSTER NODES` as the first running node that answers sees it.
    async fn view(&self) -> Result<Vec<NodeView>, HarnessError> {
        let mut why = String::from("no node runs");
        for port in self.running_ports() {
            match cluster_nodes(port).await {
                Ok(view) => return Ok(view),
                Err(e) => why = e,
            }
        }
        Err(HarnessError::request("CLUSTER NODES", why))
    }

    async fn node_id(&self, port: u16) -> Result<String, HarnessError> {
        match resp::command(port, &["CLUSTER", "MYID"]).await {
            Ok(Reply::Bulk(Some(id))) => Ok(String::from_utf8_lossy(&id).into_owned()),
            other => Err(HarnessError::request(format!("CLUSTER MYID on {port}"), format!("{other:?}"))),
        }
    }

    fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    fn running_ports(&self) -> Vec<u16> {
        self.nodes.iter().filter(|n| n.process.is_some()).map(|n| n.port).collect()
    }

    fn any_running(&self) -> Result<u16, HarnessError> {
        self.running_ports().first().copied().ok_or_else(|| HarnessError::request("cluster", "no node runs"))
    }

    /// Starts one node on a free port (and a free cluster bus port) and waits until it
    /// answers `PING`; a start that loses a port to another process is retried.
    async fn launch(&self, name: &str) -> Result<Node, HarnessError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let (port, bus) = (free_port()?, free_port()?);
            let mut process = self.spawn(name, port, bus)?;
            let what = format!("valkey cluster node {name} on port {port}");
            match wait_until_answering(&mut process, what, VALKEY_READY_TIMEOUT, || resp::ping(port)).await {
                Ok(()) => {
                    return Ok(Node { name: name.to_owned(), port, bus_port: bus, process: Some(process) });
                }
                Err(e) => {
                    let clash = log_shows_port_clash(process.log());
                    drop(process);
                    if !(clash && attempt < PORT_CLASH_RETRIES) {
                        return Err(e);
                    }
                }
            }
        }
    }

    fn spawn(&self, name: &str, port: u16, bus: u16) -> Result<ServerProcess, HarnessError> {
        let mut args = valkey_args(port, self.dir.path(), name)?;
        let cluster = [
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            &bus.to_string(),
            "--cluster-node-timeout",
            &CLUSTER_NODE_TIMEOUT.as_millis().to_string(),
            // A replica whose primary failed may take over however long ago it last
            // heard from it (the harness kills primaries at any moment).
            "--cluster-replica-validity-factor",
            "0",
        ];
        args.extend(cluster.iter().map(|s| s.to_string()));
        let nodes_conf = self.dir.path().join(name).join("nodes.conf");
        args.extend(["--cluster-config-file".into(), nodes_conf.to_string_lossy().into_owned()]);
        spawn_valkey(&self.binary, name, &args, self.dir.path())
    }

    fn log_path(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.log"))
    }

    /// Runs `probe` until it succeeds, for at most `limit` ([`poll_until`]); the error
    /// names what was awaited and ends with the tail of every node's log.
    async fn poll<T, F, Fut>(&self, what: &str, limit: Duration, probe: F) -> Result<T, HarnessError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, String>>,
    {
        poll_until(what, limit, probe, self.dir.path(), || self.log_tails()).await
    }

    fn log_tails(&self) -> String {
        let logs = self.nodes.iter().map(|node| {
            let path = self.log_path(&node.name);
            (format!("{} on {}", file_name(&path), node.port), path)
        });
        labelled_tails(logs, 10)
    }
}

async fn expect_ok(port: u16, args: &[&str]) -> Result<(), HarnessError> {
    match resp::command(port, args).await {
        Ok(Reply::Simple(s)) if s == "OK" => Ok(()),
        other => Err(HarnessError::request(format!("{args:?} on {port}"), format!("{other:?}"))),
    }
}

/// `Ok` when the node on `port` says `cluster_state:ok`.
async fn cluster_ok(port: u16) -> Result<(), String> {
    match resp::command(port, &["CLUSTER", "INFO"]).await? {
        Reply::Bulk(Some(text))
            if String::from_utf8_lossy(&text).lines().any(|l| l.trim() == "cluster_state:ok") =>
        {
            Ok(())
        }
        Reply::Bulk(Some(_)) => Err(format!("node {port} does not say cluster_state:ok")),
        other => Err(format!("CLUSTER INFO on {port}: {other:?}")),
    }
}

/// The working primary serving `slot` in `view`.
fn owner_in(view: &[NodeView], slot: u16) -> Option<u16> {
    view.iter()
        .find(|n| n.primary && !n.failing && n.slots.iter().any(|&(lo, hi)| lo <= slot && slot <= hi))
        .map(|n| n.port)
}

/// Waits up to 100 ms for a replica of the primary on `port` to acknowledge a write of
/// a key in one of `slots` (found with `CLUSTER KEYSLOT`); an error when none does.
async fn wait_one_acknowledges(port: u16, slots: &[(u16, u16)]) -> Result<(), String> {
    let mut key = None;
    // A primary serves a third of the slots: a handful of candidates hits its range.
    for n in 0..256u32 {
        let candidate = format!("tierlog-harness:probe:{n}");
        if let Reply::Integer(slot) = resp::command(port, &["CLUSTER", "KEYSLOT", &candidate]).await?
            && slots.iter().any(|&(lo, hi)| (i64::from(lo)..=i64::from(hi)).contains(&slot))
        {
            key = Some(candidate);
            break;
        }
    }
    let key = key.ok_or_else(|| format!("no probe key hashes into the slots {slots:?} of {port}"))?;
    match resp::pipeline(port, &[&["SET", &key, "1"], &["WAIT", "1", "100"]]).await?.as_slice() {
        [Reply::Simple(_), Reply::Integer(n)] if *n >= 1 => Ok(()),
        other => {
            Err(format!("a probe write on primary {port} was not acknowledged by its replica: {other:?}"))
        }
    }
}

/// `CLUSTER NODES` of the node on `port`, parsed.
async fn cluster_nodes(port: u16) -> Result<Vec<NodeView>, String> {
    match resp::command(port, &["CLUSTER", "NODES"]).await? {
        Reply::Bulk(Some(text)) => parse_cluster_nodes(&String::from_utf8_lossy(&text)),
        other => Err(format!("CLUSTER NODES on {port}: {other:?}")),
    }
}

/// Parses `CLUSTER NODES`: `<id> <ip:port@cport[,hostname]> <flags> <primary> <ping-sent>
/// <pong-recv> <config-epoch> <link-state> <slot>…`, a slot being `n`, `lo-hi` or a
/// bracketed migration entry (skipped).
fn parse_cluster_nodes(text: &str) -> Result<Vec<NodeView>, String> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [id, addr, flags, primary, _, _, _, _, slots @ ..] = fields.as_slice() else {
            return Err(format!("unexpected CLUSTER NODES line {line:?}"));
        };
        let port = addr
            .split('@')
            .next()
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("no port in {addr:?}"))?;
        let flags: Vec<&str> = flags.split(',').collect();
        let failing = flags.iter().any(|f| matches!(*f, "fail" | "fail?" | "noaddr" | "handshake"));
        let mut ranges = Vec::new();
        for slot in slots.iter().filter(|s| !s.starts_with('[')) {
            let (lo, hi) = slot.split_once('-').unwrap_or((slot, slot));
            let parse = |s: &str| s.parse::<u16>().map_err(|e| format!("bad slot {slot:?}: {e}"));
            ranges.push((parse(lo)?, parse(hi)?));
        }
        out.push(NodeView {
            id: (*id).to_owned(),
            port,
            primary: flags.contains(&"master"),
            failing,
            primary_id: (*primary != "-").then(|| (*primary).to_owned()),
            slots: ranges,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{NodeView, owner_in, parse_cluster_nodes};

    #[test]
    fn cluster_nodes_lines_are_read_into_roles_failures_and_slots() {
        let text = "\
07c37dfe 127.0.0.1:30004@31004 slave e7d1eecc 0 1426238317239 4 connected\n\
67ed2db8 127.0.0.1:30002@31002,host master - 0 1426238316232 2 connected 5461-10922\n\
292f8b36 127.0.0.1:30003@31003 master - 0 1426238318243 3 connected 10923-16383 17 [18->-abc]\n\
6ec23923 127.0.0.1:30005@31005 master,fail - 0 1426238316232 5 disconnected\n\
e7d1eecc 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460\n";
        let view = parse_cluster_nodes(text).unwrap();
        assert_eq!(view.len(), 5);
        assert_eq!(
            view[0],
            NodeView {
                id: "07c37dfe".into(),
                port: 30004,
                primary: false,
                failing: false,
                primary_id: Some("e7d1eecc".into()),
                slots: vec![],
            }
        );
        assert_eq!(view[1].port, 30002);
        assert_eq!(view[2].slots, vec![(10923, 16383), (17, 17)]);
        assert!(view[3].failing && view[3].primary);
        assert!(view[4].primary && !view[4].failing);
        assert_eq!(owner_in(&view, 0), Some(30001));
        assert_eq!(owner_in(&view, 17), Some(30003));
        assert_eq!(owner_in(&view, 10922), Some(30002));
        assert!(parse_cluster_nodes("garbage").is_err());
    }
}
