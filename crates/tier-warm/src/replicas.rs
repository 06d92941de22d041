//! The replica check when the warm tier opens: can the deployment confirm an append
//! with `WAIT <wait_replicas>` at all?
//!
//! The evidence is each primary's `INFO replication`; [`judge`] reduces it to a
//! [`ReplicaCheck`] (a pure function, tested over every case), and
//! [`WarmTier::open`](crate::WarmTier::open) applies it.

use std::fmt;

use fred::{
    prelude::{Client, ClientLike},
    types::InfoKind,
};
use tier_core::{ErrorContext, TierError};

use crate::client::bounded;
use crate::config::Mode;

/// What one primary's `INFO replication` says about its replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PrimaryReplicas {
    /// Which server answered (`host:port`).
    pub(crate) server: String,
    /// Replicas it lists with `state=online` (those `WAIT` can count).
    pub(crate) online: u32,
    /// `repl_backlog_active:1`: a replica has been attached since the server started,
    /// recently enough that the backlog kept for it (`repl-backlog-ttl`, one hour by
    /// default) was not freed; or the server restored it from its persistence file.
    pub(crate) had_replica: bool,
}

impl PrimaryReplicas {
    /// Reads the evidence from the text of `INFO replication`.
    pub(crate) fn parse(server: impl Into<String>, info: &str) -> Self {
        let mut online = 0;
        let mut had_replica = false;
        for line in info.lines().map(str::trim) {
            let Some((name, value)) = line.split_once(':') else { continue };
            let numbered_replica = name
                .strip_prefix("slave")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if numbered_replica && value.split(',').any(|field| field == "state=online") {
                online += 1;
            } else if name == "repl_backlog_active" {
                had_replica = value == "1";
            }
        }
        Self { server: server.into(), online, had_replica }
    }
}

/// Whether the primaries have the replicas `wait_replicas` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplicaCheck {
    /// `wait_replicas` is 0, or every primary has at least that many replicas online.
    Enough,
    /// A primary has fewer replicas online than wanted but has had one: they may be
    /// restarting or reconnecting. Appends are not confirmed until enough are back.
    Fewer {
        /// One line naming the primary, the counts and what to do.
        message: String,
    },
    /// A primary has no replica and has had none: no append can be confirmed until a
    /// replica is started or `wait_replicas` is lowered.
    NoReplication {
        /// One line naming the primary and what to set.
        message: String,
    },
}

impl ReplicaCheck {
    /// The line describing a shortfall; `None` for [`Enough`](Self::Enough).
    pub fn message(&self) -> Option<&str> {
        match self {
            ReplicaCheck::Enough => None,
            ReplicaCheck::Fewer { message } | ReplicaCheck::NoReplication { message } => Some(message),
        }
    }
}

impl fmt::Display for ReplicaCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message().unwrap_or("enough replicas"))
    }
}

/// What [`WarmTier::open`](crate::WarmTier::open) does when a primary has never had a
/// replica while `wait_replicas > 0` ([`ReplicaCheck::NoReplication`]). Fewer replicas
/// than wanted on a primary that has had one is a warning either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WithoutReplicas {
    /// Fail with `InvalidInput`: every append would fail its `WAIT`.
    Refuse,
    /// Log a warning and open: the caller accepts appends warm does not confirm
    /// (the router's `degrade` policy).
    Warn,
}

/// The verdict on `primaries` for `wanted` replicas per write: the worst primary's
/// (no replication at all, then fewer than wanted, then enough). No primary known
/// means nothing contradicts the configuration: `Enough`.
pub(crate) fn judge(wanted: u32, primaries: &[PrimaryReplicas]) -> ReplicaCheck {
    if wanted == 0 {
        return ReplicaCheck::Enough;
    }
    let replicas = |n: u32| if n == 1 { "1 replica".to_owned() } else { format!("{n} replicas") };
    if let Some(p) = primaries.iter().find(|p| p.online == 0 && !p.had_replica) {
        return ReplicaCheck::NoReplication {
            message: format!(
                "warm.wait_replicas = {wanted} but the Valkey primary {} has no replica and has had none \
                 (INFO replication: no replica online, repl_backlog_active:0), so no append can be confirmed: \
                 start a replica of it, or set `warm.wait_replicas = 0` in tierlog.toml to accept appends \
                 the primary alone holds",
                p.server
            ),
        };
    }
    if let Some(p) = primaries.iter().find(|p| p.online < wanted) {
        return ReplicaCheck::Fewer {
            message: format!(
                "warm.wait_replicas = {wanted} but the Valkey primary {} has {} online: appends are not \
                 confirmed until {} acknowledge them (start or reconnect its replicas, or lower \
                 warm.wait_replicas in tierlog.toml)",
                p.server,
                replicas(p.online),
                replicas(wanted)
            ),
        };
    }
    ReplicaCheck::Enough
}

/// Asks every primary the client talks to for `INFO replication`: in cluster mode each
/// node it holds a connection to (fred connects to the primaries), otherwise the one
/// server.
pub(crate) async fn probe(
    client: &Client,
    mode: &Mode,
    ctx: &ErrorContext,
    limit: std::time::Duration,
) -> Result<Vec<PrimaryReplicas>, TierError> {
    let servers = client.active_connections();
    let name = |s: &fred::types::config::Server| format!("{}:{}", s.host, s.port);
    let doing = "INFO replication";
    if *mode != Mode::Cluster {
        let server = servers.first().map_or_else(|| "(unknown)".to_owned(), name);
        let info: String = bounded(ctx, doing, limit, client.info(Some(InfoKind::Replication))).await?;
        return Ok(vec![PrimaryReplicas::parse(server, &info)]);
    }
    let mut out = Vec::with_capacity(servers.len());
    for server in &servers {
        let node = client.with_cluster_node(server);
        let info: String = bounded(ctx, doing, limit, node.info(Some(InfoKind::Replication))).await?;
        out.push(PrimaryReplicas::parse(name(server), &info));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{PrimaryReplicas, ReplicaCheck, judge};

    const PRIMARY_WITH_ONE: &str = "# Replication\r\nrole:master\r\nconnected_slaves:1\r\n\
        slave0:ip=127.0.0.1,port=7001,state=online,offset=42,lag=0\r\nmaster_repl_offset:42\r\n\
        repl_backlog_active:1\r\nrepl_backlog_size:1048576\r\n";
    const PRIMARY_SYNCING: &str = "role:master\r\nconnected_slaves:1\r\n\
        slave0:ip=127.0.0.1,port=7001,state=wait_bgsave,offset=0,lag=0\r\nrepl_backlog_active:1\r\n";
    const PRIMARY_ALONE: &str = "role:master\r\nconnected_slaves:0\r\nrepl_backlog_active:0\r\n";
    const PRIMARY_LEFT: &str = "role:master\r\nconnected_slaves:0\r\nrepl_backlog_active:1\r\n";

    #[test]
    fn info_replication_is_read_into_online_replicas_and_history() {
        let p = |info| PrimaryReplicas::parse("s:1", info);
        assert_eq!((p(PRIMARY_WITH_ONE).online, p(PRIMARY_WITH_ONE).had_replica), (1, true));
        assert_eq!((p(PRIMARY_SYNCING).online, p(PRIMARY_SYNCING).had_replica), (0, true));
        assert_eq!((p(PRIMARY_ALONE).online, p(PRIMARY_ALONE).had_replica), (0, false));
        assert_eq!((p(PRIMARY_LEFT).online, p(PRIMARY_LEFT).had_replica), (0, true));
        // `slave_read_only`, `slave_repl_offset` and the like are not replicas.
        let replica = "role:slave\r\nslave_read_only:1\r\nslave_repl_offset:5\r\nconnected_slaves:0\r\n";
        assert_eq!(p(replica).online, 0);
    }

    /// Every combination of wanted replicas, replicas online and replication history.
    #[test]
    fn the_verdict_for_every_case() {
        for wanted in 0..=3u32 {
            for online in 0..=3u32 {
                for had_replica in [false, true] {
                    let primary = PrimaryReplicas { server: "s:1".into(), online, had_replica };
                    let verdict = judge(wanted, std::slice::from_ref(&primary));
                    let expected = match () {
                        () if wanted == 0 || online >= wanted => "enough",
                        () if online == 0 && !had_replica => "none",
                        () => "fewer",
                    };
                    let got = match &verdict {
                        ReplicaCheck::Enough => "enough",
                        ReplicaCheck::Fewer { .. } => "fewer",
                        ReplicaCheck::NoReplication { .. } => "none",
                    };
                    assert_eq!(got, expected, "wanted {wanted}, {primary:?}: {verdict}");
                }
            }
        }
    }

    #[test]
    fn the_worst_primary_decides_and_the_message_says_what_to_set() {
        let enough = PrimaryReplicas { server: "a:1".into(), online: 1, had_replica: true };
        let fewer = PrimaryReplicas { server: "b:2".into(), online: 0, had_replica: true };
        let none = PrimaryReplicas { server: "c:3".into(), online: 0, had_replica: false };
        let verdict = judge(1, &[enough.clone(), fewer.clone(), none]);
        let message = verdict.message().expect("a shortfall");
        assert!(matches!(verdict, ReplicaCheck::NoReplication { .. }), "{verdict}");
        assert!(message.contains("c:3") && message.contains("`warm.wait_replicas = 0`"), "{message}");
        assert!(!message.contains('\n'), "one line: {message}");
        let verdict = judge(2, &[enough.clone(), fewer]);
        assert!(matches!(verdict, ReplicaCheck::Fewer { .. }), "{verdict}");
        assert!(verdict.to_string().contains("a:1 has 1 replica online"), "{verdict}");
        assert_eq!(judge(1, &[enough]), ReplicaCheck::Enough);
        assert_eq!(judge(1, &[]), ReplicaCheck::Enough);
    }
}
