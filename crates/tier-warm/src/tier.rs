//! [`WarmTier`]: the [`Tier`] implementation over Valkey/Redis Streams.

use std::{
    collections::{BTreeMap, HashMap},
    fmt,
    ops::Range,
};

use async_trait::async_trait;
use fred::{
    clients::Pipeline,
    error::Error as FredError,
    prelude::Options,
    prelude::{Client, ClientLike, EventInterface, KeysInterface, ServerInterface, StreamsInterface},
    types::{
        ClusterHash, ClusterStateChange, CustomCommand, Value, config::Server, streams::XCapKind,
        streams::XCapTrim,
    },
    util::redis_keyslot,
};
use futures::stream::BoxStream;
use parking_lot::Mutex;
use tier_core::metrics::{OUTCOME, WARM_WAIT};
use tier_core::position::NodeId;
use tier_core::{
    ErrorContext, ErrorKind, Offset, OffsetRange, RecordBatch, Tier, TierError, TierKind, Timestamp,
    TopicName,
};
use tokio::sync::broadcast;

use crate::{
    client::{bounded, connect},
    config::{Mode, WarmConfig},
    entry::{BATCH_FIELD, entry_id, parse_entries},
    pager::StreamHandle,
    read,
    replicas::{self, ReplicaCheck, WithoutReplicas},
};

/// The script of every append ([`WarmTier::append_group`], one batch or several): the
/// conditional append. `KEYS[1]` is the stream, `KEYS[2]` the topic's *next* key (the
/// offset at which the stream's next batch must start, see [`WarmTier::next_key`]),
/// `KEYS[3]` its *owner* key ([`WarmTier::owner_key`]). `ARGV[1]` is the field, `ARGV[2]`
/// the first batch's base offset, `ARGV[3]` is `1` when the next key must exist,
/// `ARGV[4]` the writer's owner epoch (empty for a writer that claimed none), then one
/// `(ID, batch, end offset)` triple per batch.
///
/// It refuses (`{0, 'OWNER <epoch>'}`, no write) when the writer holds an owner epoch and
/// the owner key names a later one ([`WarmTier::claim_owner`]: a node that took the topic
/// over since). An owner key that is missing or names an earlier epoch — a failover to a
/// replica that lacks the writer's claim — is set to the writer's epoch: epochs only grow,
/// and the writer that claimed last keeps the topic.
///
/// It refuses (`{0, 'NEXT <next>'}`, no write) unless the next key names the first
/// batch's base, or the key does not exist and either the caller allows that (a topic
/// the stream never held) or the base is 0 (which passes over nothing). Then it `XADD`s each batch in order, stopping at the first the
/// server refuses (an ID at or below the stream's top, which would otherwise let the
/// later ones through and leave a hole), and sets the next key to the end of the last one
/// added. Returns how many it added and the refusal's message (empty when none). A script
/// runs atomically and is replicated as its effects, in one transaction: no command sees
/// part of a group, and a replica that holds an entry holds the next key written with it.
///
/// The check is what keeps a stream a failover emptied from taking a batch past the
/// batches it lost: an emptied stream cannot be told from one [`restart_at`]
/// (WarmTier::restart_at) emptied by its entries alone, so the offset it must continue
/// at is stored beside them.
const CONDITIONAL_XADD: &str = r"if ARGV[4] ~= '' then
  local owner = redis.call('GET', KEYS[3])
  if owner and tonumber(owner) > tonumber(ARGV[4]) then
    return {0, 'OWNER ' .. owner}
  end
  if owner ~= ARGV[4] then
    redis.call('SET', KEYS[3], ARGV[4])
  end
end
local next = redis.call('GET', KEYS[2])
if next then
  if next ~= ARGV[2] then
    return {0, 'NEXT ' .. next}
  end
elseif ARGV[3] == '1' and ARGV[2] ~= '0' then
  return {0, 'NEXT none'}
end
local n = 0
local last = false
for i = 5, #ARGV, 3 do
  local r = redis.pcall('XADD', KEYS[1], ARGV[i], ARGV[1], ARGV[i + 1])
  if type(r) == 'table' and r['err'] then
    if last then
      redis.call('SET', KEYS[2], last)
    end
    return {n, r['err']}
  end
  n = n + 1
  last = ARGV[i + 2]
end
if last then
  redis.call('SET', KEYS[2], last)
end
return {n, ''}";

/// The script of a trim or a restart by a writer that holds an owner epoch
/// ([`WarmTier::claim_owner`]): `KEYS[1]` the stream, `KEYS[2]` its next key, `KEYS[3]` its
/// owner key; `ARGV[1]` the writer's epoch, `ARGV[2]` the lowest entry ID kept, `ARGV[3]`
/// the offset the stream restarts at (empty for a trim). It refuses (`{0, 'OWNER
/// <epoch>'}`, nothing removed) when the owner key names a later epoch — a writer that
/// lost the topic must not remove what the new owner still needs (a missing or earlier
/// one is set to the writer's, as in [`CONDITIONAL_XADD`]) — and a restart
/// (`{0, 'NEXT <next>'}`) when the next key is past the restart offset (the stream holds
/// batches beyond it). Else `XTRIM MINID` and, for a restart, `SET` the next key, in one
/// step; returns `{1, <entries removed>}`.
const OWNED_TRIM: &str = r"local owner = redis.call('GET', KEYS[3])
if owner and tonumber(owner) > tonumber(ARGV[1]) then
  return {0, 'OWNER ' .. owner}
end
if owner ~= ARGV[1] then
  redis.call('SET', KEYS[3], ARGV[1])
end
if ARGV[3] ~= '' then
  local next = redis.call('GET', KEYS[2])
  if next and tonumber(next) > tonumber(ARGV[3]) then
    return {0, 'NEXT ' .. next}
  end
end
local removed = redis.call('XTRIM', KEYS[1], 'MINID', ARGV[2])
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[2], ARGV[3])
end
return {1, removed}";

/// The script of a claim ([`WarmTier::claim_owner`]): `KEYS[1]` the topic's owner key,
/// `KEYS[2]` its claimers key ([`WarmTier::claimers_key`]); `ARGV[1]` the claimer's node
/// id, `ARGV[2]` how many epochs' claimers the hash keeps ([`CLAIMERS_KEPT`]). `INCR`s the
/// owner key, sets the new epoch's field of the claimers hash to the claimer, and drops
/// the field of the epoch `ARGV[2]` below it, in one step; returns the new epoch. A script
/// runs atomically and is replicated as its effects in one transaction: a replica holds an
/// epoch's claimer exactly when it holds the `INCR` that made the epoch, so a failover
/// loses both or neither. Every field names an epoch no later than the owner key (the
/// append and trim scripts only ever raise it), so each `INCR` gives an epoch no field
/// names yet: a record, once written, is never overwritten by another claim.
const CLAIM: &str = r"local epoch = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[2], string.format('%d', epoch), ARGV[1])
redis.call('HDEL', KEYS[2], string.format('%d', epoch - tonumber(ARGV[2])))
return epoch";

/// How many of a topic's latest epochs keep their claimer in the claimers hash
/// ([`CLAIM`]): the hash stays bounded however often the topic moves. An older epoch's
/// claimer is unknown, as a missing record is.
const CLAIMERS_KEPT: u64 = 1024;

/// The prefix of [`CONDITIONAL_XADD`]'s refusal when the stream does not continue at the
/// first batch's base.
const NEXT_REFUSAL: &str = "NEXT ";

/// The prefix of [`CONDITIONAL_XADD`]'s refusal when another owner holds the topic.
const OWNER_REFUSAL: &str = "OWNER ";

/// The warm tier: one Valkey/Redis stream per topic, one entry per record batch.
///
/// See the crate documentation for the stream layout and `docs/warm.md` for the full
/// semantics. The tier assumes it is the only writer and trimmer of its keys: it caches
/// each topic's range after the first look-up and keeps it current from its own
/// appends and trims. Another writer is still caught (Valkey's own ID ordering rejects
/// a stale append, which is then reported as [`TierError::Fenced`] or accepted as an
/// identical retry), but `range` may lag what another process did.
///
/// The cache is only trusted while nothing suggests the server moved under it: it is
/// dropped (and the next look-up asks the server) for a topic whose append failed (a
/// `WAIT` that fell short, a timeout or a lost connection leave the server's state
/// unknown), and for every topic when the client reconnects or the cluster changes
/// (a failover to a lagging replica, or a restart without persistence, can lose
/// entries the cache still counts). An append whose answer depends on the range (an
/// identical retry, a conflict, an out-of-place base offset) decides on a range just
/// read from the server, which replaces the cached one (shrinking it when entries were
/// lost), so the retry of a lost batch re-adds it instead of being refused.
pub struct WarmTier {
    client: Client,
    config: WarmConfig,
    /// Known range per topic, as last read from the server or updated by this tier.
    ranges: Mutex<Ranges>,
}

/// The cached ranges and the client events that invalidate them.
struct Ranges {
    topics: HashMap<TopicName, Cached>,
    /// Reconnections of the client: after one, no cached range is trusted.
    reconnects: broadcast::Receiver<Server>,
    /// Cluster topology changes (a failover moves slots to another primary).
    cluster_changes: broadcast::Receiver<Vec<ClusterStateChange>>,
}

/// One topic's cache entry.
#[derive(Clone, Copy, Debug, Default)]
struct Cached {
    /// The range, or `None` when it must be read from the server before use.
    range: Option<OffsetRange>,
    /// Bumped by every change this tier makes or learns of (append, trim,
    /// invalidation): a server reply read while it moved may be older than the cache.
    version: u64,
    /// The server held the topic's next key when this tier last looked, or this tier
    /// wrote it: from then on an append requires it (a stream and a next key that are
    /// both gone were lost, by a failover to a replica that never had them). Kept across
    /// invalidations.
    next_held: bool,
    /// The owner epoch this tier claimed for the topic ([`WarmTier::claim_owner`]): every
    /// append carries it and is refused once another writer claims a later one.
    owner: Option<u64>,
}

impl Ranges {
    /// Drops every cached range if the client reconnected or the cluster changed since
    /// the last look (a missed or closed event channel counts as a change).
    fn drain_events(&mut self) {
        let reconnected = drained(&mut self.reconnects);
        let changed = drained(&mut self.cluster_changes);
        if reconnected || changed {
            for cached in self.topics.values_mut() {
                cached.range = None;
                cached.version += 1;
            }
        }
    }
}

/// True when `rx` received anything (or lagged, or closed) since the last call.
fn drained<T: Clone>(rx: &mut broadcast::Receiver<T>) -> bool {
    let mut any = false;
    loop {
        match rx.try_recv() {
            Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) => any = true,
            Err(broadcast::error::TryRecvError::Empty) => return any,
            Err(broadcast::error::TryRecvError::Closed) => return true,
        }
    }
}

impl fmt::Debug for WarmTier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WarmTier").field("config", &self.config).finish_non_exhaustive()
    }
}

impl WarmTier {
    /// What the warm tier reports as its capabilities: an identical re-append is
    /// confirmed again (a write of the topic's marker and a `WAIT`, one pipeline), a
    /// different batch at a held offset is `Fenced`.
    pub const CAPABILITIES: tier_core::Capabilities =
        tier_core::Capabilities::none().with_idempotent_append(true);

    /// Connects to the configured server(s). Fails with `Unavailable` within
    /// `config.connect_timeout` when none answers, `InvalidInput` for a bad URL.
    pub async fn connect(config: WarmConfig) -> Result<Self, TierError> {
        let ctx = ErrorContext::tier(TierKind::Warm);
        if config.mode == Mode::Cluster && !topic_keys_share_a_slot(&config.key_prefix) {
            return Err(TierError::invalid(
                ctx,
                format!(
                    "warm.key_prefix {:?} holds an empty hash tag `{{}}`: in cluster mode a topic's keys would not share a hash slot; remove the braces",
                    config.key_prefix
                ),
            ));
        }
        let client = connect(&config, &ctx).await?;
        // Subscribed after the first connection: only later reconnections are events.
        let ranges = Ranges {
            topics: HashMap::new(),
            reconnects: client.reconnect_rx(),
            cluster_changes: client.cluster_change_rx(),
        };
        Ok(Self { client, config, ranges: Mutex::new(ranges) })
    }

    /// [`connect`](Self::connect), then [`check_replicas`](Self::check_replicas): what
    /// a writer opening the warm tier calls. A primary that has never had a replica while
    /// `wait_replicas > 0` ([`ReplicaCheck::NoReplication`]) fails with `InvalidInput`
    /// and one line saying what to set, unless `without_replicas` is
    /// [`Warn`](WithoutReplicas::Warn); fewer replicas online than wanted on a primary
    /// that has had one ([`ReplicaCheck::Fewer`]) is a warning (`tracing`), since
    /// replicas reconnect by themselves and appends are refused, not lost, meanwhile.
    pub async fn open(config: WarmConfig, without_replicas: WithoutReplicas) -> Result<Self, TierError> {
        // Boxed: a caller's future holds this one, and fred's connection future is large.
        let tier = Box::pin(Self::connect(config)).await?;
        let check = match Box::pin(tier.check_replicas()).await {
            Ok(check) => check,
            Err(e) => {
                tier.close().await;
                return Err(e);
            }
        };
        match check {
            ReplicaCheck::Enough => {}
            ReplicaCheck::NoReplication { message } if without_replicas == WithoutReplicas::Refuse => {
                tier.close().await;
                return Err(TierError::invalid(ErrorContext::tier(TierKind::Warm), message));
            }
            ReplicaCheck::NoReplication { message } | ReplicaCheck::Fewer { message } => {
                tracing::warn!("{message}");
            }
        }
        Ok(tier)
    }

    /// Whether the primaries have the replicas `wait_replicas` asks for, from each
    /// primary's `INFO replication` (every primary in cluster mode): replicas online, and
    /// whether it has had one (`repl_backlog_active`). Asks the server each time.
    pub async fn check_replicas(&self) -> Result<ReplicaCheck, TierError> {
        if self.config.wait_replicas == 0 {
            return Ok(ReplicaCheck::Enough);
        }
        let ctx = ErrorContext::tier(TierKind::Warm);
        let primaries =
            replicas::probe(&self.client, &self.config.mode, &ctx, self.config.command_timeout).await?;
        Ok(replicas::judge(self.config.wait_replicas, &primaries))
    }

    /// The configuration this tier was built from.
    pub fn config(&self) -> &WarmConfig {
        &self.config
    }

    /// The stream key of `topic`: `<key_prefix><topic>`, or in cluster mode
    /// `<key_prefix>{<topic>}`, whose hash tag puts every key of the topic in the
    /// stream's hash slot (see [`topic_key`](Self::topic_key)).
    pub fn stream_key(&self, topic: &TopicName) -> String {
        match self.config.mode {
            Mode::Cluster => format!("{}{{{}}}", self.config.key_prefix, topic),
            Mode::Standalone | Mode::Sentinel { .. } => format!("{}{}", self.config.key_prefix, topic),
        }
    }

    /// The key of `topic`'s marker: the [stream key](Self::stream_key) followed by
    /// `:topic` (a topic name holds no `:`, so no stream key is ever a marker key). In
    /// cluster mode it carries the stream key's hash tag, so it lives in the stream's slot,
    /// on the stream's primary.
    pub fn topic_key(&self, topic: &TopicName) -> String {
        format!("{}:topic", self.stream_key(topic))
    }

    /// The key of `topic`'s next offset: the [stream key](Self::stream_key) followed by
    /// `:next`, holding (as a decimal string) the offset at which the stream's next batch
    /// must start — the end of its last batch, or where [`restart_at`](Self::restart_at)
    /// restarted it. Written with each append in one server-side step
    /// (the append script), which refuses a batch starting anywhere else. In cluster
    /// mode it carries the stream key's hash tag.
    pub fn next_key(&self, topic: &TopicName) -> String {
        format!("{}:next", self.stream_key(topic))
    }

    /// The key of `topic`'s owner epoch: the [stream key](Self::stream_key) followed by
    /// `:owner`, an integer [`claim_owner`](Self::claim_owner) increments. In cluster mode
    /// it carries the stream key's hash tag.
    pub fn owner_key(&self, topic: &TopicName) -> String {
        format!("{}:owner", self.stream_key(topic))
    }

    /// The key of `topic`'s claimers: the [stream key](Self::stream_key) followed by
    /// `:claimers`, a hash whose field `<epoch>` holds the node id (32 hexadecimal digits)
    /// of the node that claimed that epoch ([`claim_owner`](Self::claim_owner)), for the
    /// latest epochs only. In cluster mode it carries the stream key's hash tag, so the
    /// claim script's two keys share a slot.
    pub fn claimers_key(&self, topic: &TopicName) -> String {
        format!("{}:claimers", self.stream_key(topic))
    }

    /// Takes `topic` over as its writer for the node `claimer`: increments its owner epoch
    /// and records `claimer` as the new epoch's claimer, in one script step (the claim script),
    /// then `WAIT`s like an append (one pipeline), and returns the new epoch, which every
    /// later append of this tier carries. From then on an append of a writer holding an
    /// earlier epoch — a node that still believes it owns the topic: paused, partitioned,
    /// a zombie — is refused by the append script, `Fenced` naming both epochs, and
    /// writes nothing. `Unavailable` when the replicas do not confirm the new epoch
    /// (claim again: epochs may skip); the tier holds the epoch all the same once the
    /// primary applied the script (its writes carry it, and an owner key a failover lost
    /// is set again by them: epochs only grow). A writer that never claims is not checked.
    ///
    /// A server that refuses the script itself (scripts disabled, `EVAL` not permitted)
    /// gets a plain `INCR` + `WAIT`: the epoch is claimed and its claimer is not recorded
    /// (unknown to [`claimers`](Self::claimers)). The owner check lives in the append
    /// script (and in the trim and restart script): such a server cannot fence, so once an
    /// epoch is claimed an append there fails `InvalidInput` instead of falling back to a
    /// plain `XADD`. A command the script calls that the ACL refuses fails the claim
    /// (`InvalidInput` naming it); the `INCR` may have run, an epoch with no claimer.
    pub async fn claim_owner(&self, topic: &TopicName, claimer: NodeId) -> Result<u64, TierError> {
        let key = self.owner_key(topic);
        let ctx = self.ctx(topic).location(key.clone());
        let (doing, reply, wait) = match self.claim_in_script(topic, &ctx, claimer).await? {
            Some((reply, wait)) => ("EVAL (claim)", reply, wait),
            None => {
                tracing::debug!(topic = %topic, "the claim script was refused; claiming with a plain INCR, which records no claimer");
                let pipeline = self.client.pipeline();
                let queued: Result<(), FredError> = pipeline.incr(key.as_str()).await;
                queued.map_err(|e| crate::client::map_fred(ctx.clone(), "INCR", e))?;
                let (reply, wait) = self.send_with_wait(&ctx, "INCR+WAIT", &key, pipeline).await?;
                ("INCR", reply.map_err(|e| crate::client::map_fred(ctx.clone(), "INCR", e))?, wait)
            }
        };
        let epoch = match reply {
            Value::Integer(n) => u64::try_from(n)
                .map_err(|_| TierError::internal(ctx.clone(), format!("{doing}: epoch {n} is negative")))?,
            other => return Err(TierError::internal(ctx, format!("{doing}: unexpected reply {other:?}"))),
        };
        self.ranges.lock().topics.entry(topic.clone()).or_default().owner = Some(epoch);
        if let Some(reply) = wait {
            self.check_wait(ctx, reply)?;
        }
        Ok(epoch)
    }

    /// [`CLAIM`] and `WAIT` in one pipeline: the script's reply and the `WAIT`'s (`None`
    /// without replicas to wait for); `Ok(None)` when the server refused the script itself
    /// (then it ran no command). A command inside it the ACL refuses, or no answer, is the
    /// error.
    async fn claim_in_script(
        &self,
        topic: &TopicName,
        ctx: &ErrorContext,
        claimer: NodeId,
    ) -> Result<Option<(Value, Option<Result<Value, FredError>>)>, TierError> {
        let key = self.owner_key(topic);
        let args: Vec<Value> = vec![
            Value::from(CLAIM),
            Value::from(2),
            Value::from(key.as_str()),
            Value::from(self.claimers_key(topic)),
            Value::from(claimer.to_string()),
            Value::from(CLAIMERS_KEPT.to_string()),
        ];
        let pipeline = self.client.pipeline();
        // Routed by the key's slot in cluster mode (see `conditional_append`).
        let eval = CustomCommand::new("EVAL", ClusterHash::Custom(redis_keyslot(key.as_bytes())), false);
        let queued: Result<(), FredError> = pipeline.custom(eval, args).await;
        queued.map_err(|e| crate::client::map_fred(ctx.clone(), "EVAL (claim)", e))?;
        let (reply, wait) = self.send_with_wait(ctx, "EVAL+WAIT", &key, pipeline).await?;
        match reply {
            Ok(reply) => Ok(Some((reply, wait))),
            Err(e) => {
                // A command the script calls refused by the ACL: the script ran (the
                // `INCR` may stand), and the error names the command to grant.
                let inside = e.details().contains("ACL failure in script");
                let e = crate::client::map_fred(ctx.clone(), "EVAL (claim)", e);
                if inside || e.kind() == ErrorKind::Unavailable {
                    return Err(e);
                }
                Ok(None)
            }
        }
    }

    /// The claimers [`claim_owner`](Self::claim_owner) recorded for `topic`'s epochs in
    /// `epochs`, by epoch (`HMGET <claimers key>`, one read, of the latest
    /// 1024 epochs of `epochs` at most: the hash holds no older record). An
    /// epoch without a record — claimed by a plain `INCR`, raised to by an append after a
    /// failover lost its claim, too old, or holding no node id — is absent.
    pub async fn claimers(
        &self,
        topic: &TopicName,
        epochs: Range<u64>,
    ) -> Result<BTreeMap<u64, NodeId>, TierError> {
        let asked = epochs.start.max(epochs.end.saturating_sub(CLAIMERS_KEPT))..epochs.end;
        if asked.is_empty() {
            return Ok(BTreeMap::new());
        }
        let key = self.claimers_key(topic);
        let ctx = self.ctx(topic).location(key.clone());
        let mut args = vec![Value::from(key.as_str())];
        args.extend(asked.clone().map(|e| Value::from(e.to_string())));
        // A custom command: fred's hash commands are not compiled in. Routed by the key's
        // slot in cluster mode (see `conditional_append`).
        let hmget = CustomCommand::new("HMGET", ClusterHash::Custom(redis_keyslot(key.as_bytes())), false);
        let reply: Value =
            bounded(&ctx, "HMGET", self.config.command_timeout, self.client.custom(hmget, args)).await?;
        let values = match reply {
            Value::Array(values) if values.len() as u64 == asked.end - asked.start => values,
            other => return Err(TierError::internal(ctx, format!("HMGET: unexpected reply {other:?}"))),
        };
        Ok(asked
            .zip(values)
            .filter_map(|(epoch, value)| {
                value.as_str().and_then(|text| NodeId::parse(&text)).map(|id| (epoch, id))
            })
            .collect())
    }

    /// The owner epoch this tier claimed for `topic`, if any.
    pub fn owner_epoch(&self, topic: &TopicName) -> Option<u64> {
        self.ranges.lock().topics.get(topic).and_then(|c| c.owner)
    }

    /// Records that `topic` exists (`SET <topic_key> 1`, then `WAIT` like an append): the
    /// evidence a router looks for when its data directory is lost before warm holds any
    /// record the replicas confirmed. `Unavailable` when the replicas do not confirm it.
    /// Idempotent.
    pub async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        let key = self.topic_key(topic);
        let ctx = self.ctx(topic).location(key.clone());
        let pipeline = self.client.pipeline();
        let queued: Result<(), FredError> = pipeline.set(key.as_str(), 1, None, None, false).await;
        queued.map_err(|e| crate::client::map_fred(ctx.clone(), "SET", e))?;
        let (reply, wait) = self.send_with_wait(&ctx, "SET+WAIT", &key, pipeline).await?;
        reply.map_err(|e| crate::client::map_fred(ctx.clone(), "SET", e))?;
        match wait {
            Some(reply) => self.check_wait(ctx, reply),
            None => Ok(()),
        }
    }

    /// Sends `pipeline`, a write queued on it, followed by a `WAIT` for the replicas when
    /// they are configured — one round trip, bounded by the command and wait timeouts, on
    /// the connection that took the write. Returns the write's reply and the `WAIT`'s
    /// (`None` without replicas to wait for, or when the write failed).
    ///
    /// The only place the tier sends `WAIT`. `WAIT` counts the replicas that acknowledged
    /// the calling connection's last write (Valkey tracks the replication offset per
    /// client), so it confirms something only right behind a write on the same
    /// connection; without one it answers at once with every connected replica. Hence
    /// the write in the same pipeline, and the reply ignored when that write failed
    /// (the connection's last write is then an older one). A pipeline goes out on one
    /// connection: fred's router writes a pipeline's commands one after another before
    /// it handles any other command or a reconnection (with one attempt per command, a
    /// command whose connection broke fails rather than being re-sent on a new one), and
    /// a standalone or sentinel client holds one connection to the primary; in cluster
    /// mode `key` routes the `WAIT` to the slot, hence the primary, of the write.
    async fn send_with_wait(
        &self,
        ctx: &ErrorContext,
        doing: &str,
        key: &str,
        pipeline: Pipeline<Client>,
    ) -> Result<(Result<Value, FredError>, Option<Result<Value, FredError>>), TierError> {
        let wait = self.config.wait_replicas > 0;
        let wait_options = self.wait_options(key);
        let (wait_replicas, wait_ms) = (i64::from(self.config.wait_replicas), self.wait_timeout_ms());
        let queue = async {
            if wait {
                let _: () = pipeline.with_options(&wait_options).wait(wait_replicas, wait_ms).await?;
            }
            Ok::<_, FredError>(pipeline.try_all::<Value>().await)
        };
        let limit = self.config.command_timeout + self.config.wait_timeout;
        let mut replies = bounded(ctx, doing, limit, queue).await?.into_iter();
        let missing =
            || TierError::internal(ctx.clone(), format!("{doing}: a reply is missing in the pipeline"));
        let write = replies.next().ok_or_else(missing)?;
        let wait = match (wait, &write) {
            // A failed write is the answer (its WAIT reply may be missing with it).
            (false, _) | (true, Err(_)) => None,
            (true, Ok(_)) => Some(replies.next().ok_or_else(missing)?),
        };
        Ok((write, wait))
    }

    /// True when [`record_topic`](Self::record_topic) recorded `topic` (`EXISTS`).
    pub async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        let key = self.topic_key(topic);
        let ctx = self.ctx(topic).location(key.clone());
        let n: i64 =
            bounded(&ctx, "EXISTS", self.config.command_timeout, self.client.exists(key.as_str())).await?;
        Ok(n > 0)
    }

    /// Closes the connection(s). Later calls fail with `Unavailable`.
    pub async fn close(&self) {
        let _ = tokio::time::timeout(self.config.command_timeout, self.client.quit()).await;
    }

    fn ctx(&self, topic: &TopicName) -> ErrorContext {
        ErrorContext::tier(TierKind::Warm).topic(topic)
    }

    pub(crate) fn handle(&self, topic: &TopicName) -> StreamHandle {
        StreamHandle {
            client: self.client.clone(),
            key: self.stream_key(topic),
            ctx: self.ctx(topic),
            command_timeout: self.config.command_timeout,
            page_size: self.config.page_size.max(1),
        }
    }

    /// The cached range of `topic`, if it is still trusted.
    fn cached_range(&self, topic: &TopicName) -> Option<OffsetRange> {
        let mut ranges = self.ranges.lock();
        ranges.drain_events();
        ranges.topics.get(topic).and_then(|c| c.range)
    }

    /// Forgets the cached range of `topic`: the next look-up reads it from the server.
    fn invalidate(&self, topic: &TopicName) {
        let mut ranges = self.ranges.lock();
        let cached = ranges.topics.entry(topic.clone()).or_default();
        cached.range = None;
        cached.version += 1;
    }

    /// Whether an append of `topic` requires the server's next key (see
    /// [`Cached::next_held`]).
    fn next_held(&self, topic: &TopicName) -> bool {
        self.ranges.lock().topics.get(topic).is_some_and(|c| c.next_held)
    }

    /// Records that `batch` is now the stream's newest entry.
    fn note_appended(&self, topic: &TopicName, batch: &RecordBatch) {
        let mut ranges = self.ranges.lock();
        let cached = ranges.topics.entry(topic.clone()).or_default();
        cached.version += 1;
        cached.next_held = true;
        match &mut cached.range {
            // Not known: stays unknown, the next look-up reads it.
            None => {}
            Some(range) if range.is_empty() => *range = batch.offset_range(),
            Some(range) => range.end = range.end.max(batch.end_offset()),
        }
    }

    /// Reads the range from the server and caches it. The server's answer replaces the
    /// cached range, shrinking it when entries were lost behind the tier's back,
    /// unless this tier appended or trimmed while the reply was on its way: that reply
    /// may be older than what the tier knows, so it is merged without moving a cached
    /// end or start backwards (or, when the cache was dropped meanwhile, not cached).
    ///
    /// One pipeline: `GET <next key>`, then `XINFO STREAM`, which reports the first
    /// entry, the last entry and the last-generated ID atomically (two separate reads
    /// could straddle an append). A stream holding nothing ends at its next key (where
    /// its next batch must start), or, without one, one past the last ID it generated.
    /// An append between the two replies only moves the stream's end past the next
    /// key's, and the end is the larger.
    pub(crate) async fn refresh_range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        let version_before = {
            let mut ranges = self.ranges.lock();
            ranges.drain_events();
            ranges.topics.get(topic).map_or(0, |c| c.version)
        };
        let handle = self.handle(topic);
        let next_key = self.next_key(topic);
        let pipeline = self.client.pipeline();
        let replies = bounded(&handle.ctx, "GET+XINFO STREAM", self.config.command_timeout, async {
            let _: () = pipeline.get(next_key.as_str()).await?;
            let _: () = pipeline.xinfo_stream(handle.key.as_str(), false, None).await?;
            Ok::<_, FredError>(pipeline.try_all::<Value>().await)
        })
        .await?;
        let mut replies = replies.into_iter();
        let missing = || TierError::internal(handle.ctx.clone(), "GET+XINFO STREAM: a reply is missing");
        let next = match replies.next().ok_or_else(missing)? {
            Ok(Value::Null) => None,
            Ok(value) => Some(parse_next(&handle, &value)?),
            Err(e) => return Err(crate::client::map_fred(handle.ctx.clone(), "GET", e)),
        };
        let info = match replies.next().ok_or_else(missing)? {
            Err(e) if e.details().contains("no such key") => Value::Null,
            Err(e) => return Err(crate::client::map_fred(handle.ctx.clone(), "XINFO STREAM", e)),
            Ok(info) => info,
        };
        let server = match info {
            Value::Null => OffsetRange::empty_at(next.unwrap_or(0)),
            info => {
                let info = StreamInfo::parse(&handle, info)?;
                match (info.first, info.last) {
                    (Some(first), Some(last)) => {
                        OffsetRange::new(first.base_offset(), last.end_offset().max(first.base_offset()))
                    }
                    // Emptied (by `restart_at`, or outside the tier): the true end is at
                    // least one past the last ID the stream generated.
                    _ => {
                        OffsetRange::empty_at(info.last_generated.map_or(0, |b| b + 1).max(next.unwrap_or(0)))
                    }
                }
            }
        };
        let mut ranges = self.ranges.lock();
        ranges.drain_events();
        let cached = ranges.topics.entry(topic.clone()).or_default();
        cached.next_held |= next.is_some();
        if cached.version == version_before {
            cached.range = Some(server);
            return Ok(server);
        }
        let Some(known) = cached.range else {
            // Dropped while the reply was on its way (a reconnection): the reply may come
            // from the server as it was before; answer it but do not cache it.
            return Ok(server);
        };
        let end = known.end.max(server.end);
        let start = if server.is_empty() && server.end < known.end {
            known.start
        } else {
            known.start.max(server.start)
        };
        let merged = OffsetRange::new(start.min(end), end);
        cached.range = Some(merged);
        Ok(merged)
    }

    /// Removes whole batches below `offset`: every batch whose base offset is smaller
    /// than that of the batch containing `offset` (`XTRIM key MINID <that batch's ID>`).
    /// The batch containing `offset` stays, so `range().start` becomes a batch boundary
    /// `<= offset`; when `offset >= range().end` the newest batch stays, so the stream
    /// always remembers where the log ends. Returns how many batches were removed. A
    /// writer holding an owner epoch trims in a script that first checks it is still the
    /// owner (`Fenced`, nothing removed, when another writer claimed the topic since).
    pub async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<u64, TierError> {
        let handle = self.handle(topic);
        let Some(keep) = handle.batch_at_or_before(offset).await? else {
            return Ok(0);
        };
        let removed = match self.owner_epoch(topic) {
            Some(epoch) => self.owned_trim(topic, epoch, keep.base_offset(), None).await?,
            None => self.trim_ids_below(&handle, keep.base_offset()).await?,
        };
        let mut ranges = self.ranges.lock();
        let cached = ranges.topics.entry(topic.clone()).or_default();
        cached.version += 1;
        if let Some(r) = &mut cached.range
            && r.start < keep.base_offset()
        {
            r.start = keep.base_offset().min(r.end);
        }
        Ok(removed)
    }

    /// Removes every entry of `topic`'s stream — all must lie below `offset` — so that the
    /// stream holds nothing and its next batch starts at `offset`: `XTRIM key MINID
    /// <offset>-1`, then `SET <next key> <offset>`. The stream key stays, so Valkey keeps
    /// refusing IDs at or below the last one generated. For a router continuing warm past
    /// offsets no tier holds (every record removed is also held elsewhere). `InvalidInput`
    /// when a batch ends beyond `offset`. Returns how many batches were removed.
    ///
    /// Without an owner epoch the two writes are not one step, and need not be: the trim
    /// first, so that a next key naming `offset` never sits beside entries ending below
    /// it; a restart stopped between them leaves the next key at the stream's old end,
    /// where a batch at `offset` is refused and the caller restarts again. A writer holding
    /// an epoch ([`claim_owner`](Self::claim_owner)) does both in one script step, refused
    /// (`Fenced`, nothing removed) once another writer claimed the topic, as
    /// [`trim_before`](Self::trim_before) is.
    pub async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<u64, TierError> {
        let range = self.refresh_range(topic).await?;
        if range.end > offset {
            return Err(TierError::invalid(
                self.ctx(topic).offset(offset),
                format!("cannot restart the stream at {offset}: it holds {range}"),
            ));
        }
        let removed = match self.owner_epoch(topic) {
            Some(epoch) => match self.owned_trim(topic, epoch, offset, Some(offset)).await {
                Ok(removed) => removed,
                Err(e) => {
                    self.invalidate(topic);
                    return Err(e);
                }
            },
            None => {
                let removed = self.trim_ids_below(&self.handle(topic), offset).await?;
                let next_key = self.next_key(topic);
                let ctx = self.ctx(topic).offset(offset).location(next_key.clone());
                let set =
                    self.client.set::<(), _, _>(next_key.as_str(), offset.to_string(), None, None, false);
                if let Err(e) = bounded(&ctx, "SET", self.config.command_timeout, set).await {
                    self.invalidate(topic);
                    return Err(e);
                }
                removed
            }
        };
        let mut ranges = self.ranges.lock();
        let cached = ranges.topics.entry(topic.clone()).or_default();
        cached.version += 1;
        cached.next_held = true;
        cached.range = Some(OffsetRange::empty_at(offset));
        Ok(removed)
    }

    /// [`OWNED_TRIM`]: removes every entry of batches below `below`, and with `restart`
    /// sets the next key, unless another owner took the topic over (`Fenced`, naming both
    /// epochs) or the stream holds batches past `restart` (`InvalidInput`); returns how
    /// many entries it removed.
    async fn owned_trim(
        &self,
        topic: &TopicName,
        epoch: u64,
        below: Offset,
        restart: Option<Offset>,
    ) -> Result<u64, TierError> {
        let handle = self.handle(topic);
        let key = handle.key.clone();
        let ctx = handle.ctx.clone().offset(below);
        let args: Vec<Value> = vec![
            Value::from(OWNED_TRIM),
            Value::from(3),
            Value::from(key.as_str()),
            Value::from(self.next_key(topic)),
            Value::from(self.owner_key(topic)),
            Value::from(epoch.to_string()),
            Value::from(entry_id(below)),
            Value::from(restart.map(|r| r.to_string()).unwrap_or_default()),
        ];
        // Routed by the key's slot in cluster mode (see `conditional_append`).
        let eval = CustomCommand::new("EVAL", ClusterHash::Custom(redis_keyslot(key.as_bytes())), false);
        let doing = if restart.is_some() { "EVAL (restart)" } else { "EVAL (trim)" };
        let reply: Value =
            bounded(&ctx, doing, self.config.command_timeout, self.client.custom(eval, args)).await?;
        let mut items = match reply {
            Value::Array(items) => items.into_iter(),
            _ => return Err(TierError::internal(ctx, format!("{doing}: unexpected reply"))),
        };
        let done = matches!(items.next(), Some(Value::Integer(1)));
        let detail = items.next();
        if done {
            return match detail {
                Some(Value::Integer(n)) => Ok(u64::try_from(n).unwrap_or(0)),
                _ => Err(TierError::internal(ctx, format!("{doing}: unexpected reply"))),
            };
        }
        let refusal = detail.and_then(|v| v.as_string()).unwrap_or_default();
        if let Some(owner) = refusal.strip_prefix(OWNER_REFUSAL) {
            return Err(TierError::fenced(
                ctx,
                format!(
                    "topic {topic} is owned by epoch {owner} in warm, and this writer holds epoch {epoch}: another writer took the topic over, so nothing is removed"
                ),
            ));
        }
        if let Some(next) = refusal.strip_prefix(NEXT_REFUSAL) {
            return Err(TierError::invalid(
                ctx,
                format!("cannot restart the stream at {below}: it continues at {next}"),
            ));
        }
        Err(TierError::internal(ctx, format!("{doing}: unexpected refusal {refusal:?}")))
    }

    /// `XTRIM key MINID <offset>-1` (the ID of a batch at `offset`): removes every entry
    /// of batches below `offset`; returns how many.
    async fn trim_ids_below(&self, handle: &StreamHandle, offset: Offset) -> Result<u64, TierError> {
        let min_id = entry_id(offset);
        bounded(
            &handle.ctx,
            "XTRIM",
            self.config.command_timeout,
            self.client.xtrim(handle.key.as_str(), (XCapKind::MinID, XCapTrim::Exact, min_id.as_str())),
        )
        .await
    }

    /// Every batch of `topic` from the one containing `from` on (all batches with base
    /// offset `>= from`, plus the batch containing `from`), in order, fetched a page at
    /// a time, checked for contiguity. For replaying into a fresh WAL after the local
    /// disk is lost. The stream is independent of `self`'s lifetime.
    pub fn recovery_stream(
        &self,
        topic: &TopicName,
        from: Offset,
    ) -> BoxStream<'static, Result<RecordBatch, TierError>> {
        read::recovery_stream(self.handle(topic), from)
    }

    /// [`Tier::append`] without the invalidation on failure. Decides on the cached
    /// range when the batch continues it; otherwise (an identical retry, a conflict,
    /// an out-of-place base offset) on the range just read from the server, so a batch
    /// whose entry the server lost since (a failover to a lagging replica, a restart
    /// without persistence) is added again rather than refused as a conflict with
    /// what the cache still counts. The server checks again, atomically with the write
    /// ([`CONDITIONAL_XADD`]).
    async fn append_checked(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        let base = batch.base_offset();
        let mut range = self.range(topic).await?;
        if !append_allowed(range, base, self.next_held(topic)) {
            // The cache may lag another writer or trimmer, or count entries the server
            // lost: decide on fresh data.
            range = self.refresh_range(topic).await?;
        }
        if range.contains(base) {
            // A retry of something already held, or a conflict: XADD would refuse the
            // ID either way; resolve_existing tells which.
            let handle = self.handle(topic);
            let bytes = batch.to_bytes();
            return self.resolve_existing(topic, &handle, &batch, &bytes).await;
        }
        if !append_allowed(range, base, self.next_held(topic)) {
            return Err(self.does_not_continue(topic, base, range));
        }
        self.xadd_and_wait(topic, &batch).await
    }

    /// The error of a batch at `base` that does not continue the stream's `range`.
    fn does_not_continue(&self, topic: &TopicName, base: Offset, range: OffsetRange) -> TierError {
        TierError::invalid(
            self.ctx(topic).offset(base),
            format!(
                "append at offset {base} but the warm tier holds {range}; the next batch must start at {}",
                range.end
            ),
        )
    }

    /// Appends one batch, assuming the position rules already passed:
    /// [`CONDITIONAL_XADD`] and `WAIT` in one pipeline. A refusal by the next key is
    /// `InvalidInput` (the stream lost batches or was restarted: it does not continue
    /// where the cache said), an ID at or below the stream's top is resolved as a retry
    /// or a conflict ([`resolve_existing`](Self::resolve_existing)). Where the server
    /// refuses scripts, a plain `XADD` + `WAIT` (the position then checked by the client
    /// alone, against the range it read).
    async fn xadd_and_wait(&self, topic: &TopicName, batch: &RecordBatch) -> Result<(), TierError> {
        let base = batch.base_offset();
        let refusal = match self.conditional_append(topic, std::slice::from_ref(batch)).await? {
            Appended::Script { added: 1, .. } => return Ok(()),
            Appended::Script { refusal, .. } => refusal,
            Appended::ScriptRefused => match self.owner_epoch(topic) {
                None => return self.plain_xadd_and_wait(topic, batch).await,
                Some(epoch) => {
                    return Err(TierError::invalid(
                        self.ctx(topic).offset(base),
                        format!(
                            "the server refused the append script, and this writer holds owner epoch {epoch}: a plain XADD would not be fenced; grant the warm tier's ACL user `+eval` (docs/warm.md)"
                        ),
                    ));
                }
            },
        };
        let handle = self.handle(topic);
        let ctx = handle.ctx.clone().offset(base).location(format!("{}@{}", handle.key, entry_id(base)));
        if let Some(owner) = refusal.strip_prefix(OWNER_REFUSAL) {
            return Err(TierError::fenced(
                ctx,
                format!(
                    "topic {topic} is owned by epoch {owner} in warm, and this writer holds epoch {}: another writer took the topic over",
                    self.owner_epoch(topic).map_or_else(|| "none".to_owned(), |e| e.to_string())
                ),
            ));
        }
        if refusal.starts_with(NEXT_REFUSAL) {
            let range = self.refresh_range(topic).await?;
            return Err(self.does_not_continue(topic, base, range));
        }
        if refusal.contains("equal or smaller") {
            let bytes = batch.to_bytes();
            return self.resolve_existing(topic, &handle, batch, &bytes).await;
        }
        Err(crate::client::map_fred(
            ctx,
            "XADD (in the append script)",
            FredError::new(fred::error::ErrorKind::Unknown, refusal),
        ))
    }

    /// `XADD` + `WAIT` in one pipeline, for a server that refuses scripts.
    async fn plain_xadd_and_wait(&self, topic: &TopicName, batch: &RecordBatch) -> Result<(), TierError> {
        let handle = self.handle(topic);
        let id = entry_id(batch.base_offset());
        // One copy of the batch: a stream field is a single bulk string, so the prefix
        // and body cannot be sent as two buffers.
        let bytes = batch.to_bytes();
        let key = handle.key.clone();
        let ctx = handle.ctx.clone().offset(batch.base_offset()).location(format!("{key}@{id}"));
        let pipeline = self.client.pipeline();
        let queued: Result<(), FredError> = pipeline
            .xadd(key.as_str(), false, None::<()>, id.as_str(), vec![(BATCH_FIELD, bytes.clone())])
            .await;
        queued.map_err(|e| crate::client::map_fred(ctx.clone(), "XADD", e))?;
        let (reply, wait) = self.send_with_wait(&handle.ctx, "XADD+WAIT", &key, pipeline).await?;
        match reply {
            Ok(_) => self.note_appended(topic, batch),
            Err(e) if e.details().contains("equal or smaller") => {
                return self.resolve_existing(topic, &handle, batch, &bytes).await;
            }
            Err(e) => return Err(crate::client::map_fred(ctx, "XADD", e)),
        }
        match wait {
            Some(reply) => self.check_wait(ctx, reply),
            None => Ok(()),
        }
    }

    /// Appends `batches` (each continuing the one before) as the router's group commit
    /// does: when the first continues the cached end, one script adds them in order and
    /// stops at the first `XADD` the server refuses, in one round trip with the `WAIT`
    /// after it ([`CONDITIONAL_XADD`]); the batches from a refused one on (a retry of what
    /// the stream holds, a conflict, a stream that does not continue where the cache
    /// said) and every other case take [`Tier::append`]'s path, one batch at a time.
    /// Returns how many batches from the first are held and the first refusal.
    pub(crate) async fn append_group(
        &self,
        topic: &TopicName,
        batches: Vec<RecordBatch>,
    ) -> (usize, Result<(), TierError>) {
        let contiguous = batches.windows(2).all(|w| w[0].end_offset() == w[1].base_offset());
        let continues = match (batches.first(), self.cached_range(topic)) {
            (Some(first), Some(range)) => {
                !range.contains(first.base_offset())
                    && append_allowed(range, first.base_offset(), self.next_held(topic))
            }
            _ => false,
        };
        let mut held = 0;
        if batches.len() > 1 && contiguous && continues {
            match self.conditional_append(topic, &batches).await {
                Ok(Appended::Script { added, .. }) => {
                    metrics::counter!(WARM_WAIT, OUTCOME => "ok").increment(added as u64);
                    held = added;
                }
                // The server refused the script itself (scripts disabled, not permitted):
                // nothing was added; one batch at a time then.
                Ok(Appended::ScriptRefused) => {}
                Err(e) => {
                    metrics::counter!(WARM_WAIT, OUTCOME => "failed").increment(1);
                    // As for a failed append: the server's state is no longer known.
                    self.invalidate(topic);
                    return (0, Err(e));
                }
            }
        }
        for batch in batches.into_iter().skip(held) {
            if let Err(e) = self.append(topic, batch).await {
                return (held, Err(e));
            }
            held += 1;
        }
        (held, Ok(()))
    }

    /// [`CONDITIONAL_XADD`] and `WAIT` in one pipeline: how many batches the stream took
    /// (all of them confirmed by `WAIT`, else the `WAIT`'s error), stopping at the first
    /// refused, with the refusal; [`Appended::ScriptRefused`] when the server refused the
    /// script itself (then it ran no command). A refusal by the next key drops the
    /// cached range: the stream is not where the cache said.
    async fn conditional_append(
        &self,
        topic: &TopicName,
        batches: &[RecordBatch],
    ) -> Result<Appended, TierError> {
        let handle = self.handle(topic);
        let key = handle.key.clone();
        let base = batches[0].base_offset();
        let ctx = handle.ctx.clone().offset(base).location(format!("{key}@{}", entry_id(base)));
        let mut args: Vec<Value> = Vec::with_capacity(9 + 3 * batches.len());
        args.push(Value::from(CONDITIONAL_XADD));
        args.push(Value::from(3));
        args.push(Value::from(key.as_str()));
        args.push(Value::from(self.next_key(topic)));
        args.push(Value::from(self.owner_key(topic)));
        args.push(Value::from(BATCH_FIELD));
        args.push(Value::from(base.to_string()));
        args.push(Value::from(if self.next_held(topic) { "1" } else { "0" }));
        args.push(Value::from(self.owner_epoch(topic).map(|e| e.to_string()).unwrap_or_default()));
        for batch in batches {
            args.push(Value::from(entry_id(batch.base_offset())));
            // One copy per batch, as for a single XADD.
            args.push(Value::Bytes(batch.to_bytes()));
            args.push(Value::from(batch.end_offset().to_string()));
        }
        let pipeline = self.client.pipeline();
        // Routed by the key's slot in cluster mode. fred honours only a `Custom` slot in a
        // `CustomCommand`: any other policy falls back to the first string argument, the
        // script, whose slot is not the key's (a `MOVED`, then a failed write).
        let eval = CustomCommand::new("EVAL", ClusterHash::Custom(redis_keyslot(key.as_bytes())), false);
        let queued: Result<(), FredError> = pipeline.custom(eval, args).await;
        queued.map_err(|e| crate::client::map_fred(ctx.clone(), "EVAL (append)", e))?;
        let (reply, wait) = self.send_with_wait(&handle.ctx, "EVAL+WAIT", &key, pipeline).await?;
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => {
                // A command the script calls refused by the ACL: the script ran (what it
                // wrote before stays), and the error names the command to grant.
                let inside = e.details().contains("ACL failure in script");
                let e = crate::client::map_fred(ctx, "EVAL (append)", e);
                if inside || e.kind() == ErrorKind::Unavailable {
                    return Err(e);
                }
                // Refused as a command (scripts disabled or not permitted): the
                // one-at-a-time path decides on what the stream holds, whatever ran.
                tracing::debug!(topic = %topic, error = %e.report(), "the append script was refused; appending with a plain XADD");
                return Ok(Appended::ScriptRefused);
            }
        };
        let (added, refusal) = match reply {
            Value::Array(items) => {
                let mut items = items.into_iter();
                let added = match items.next() {
                    Some(Value::Integer(n)) => usize::try_from(n).ok().filter(|&n| n <= batches.len()),
                    _ => None,
                };
                let refusal = items.next().and_then(|v| v.as_string()).unwrap_or_default();
                added.map(|a| (a, refusal))
            }
            _ => None,
        }
        .ok_or_else(|| TierError::internal(ctx.clone(), "EVAL (append): unexpected reply"))?;
        for batch in &batches[..added] {
            self.note_appended(topic, batch);
        }
        if added == 0 && refusal.starts_with(NEXT_REFUSAL) {
            tracing::debug!(topic = %topic, base, refusal = %refusal, "warm's stream does not continue at the batch");
            self.invalidate(topic);
        }
        if added > 0
            && let Some(reply) = wait
        {
            self.check_wait(ctx, reply)?;
        }
        Ok(Appended::Script { added, refusal })
    }

    /// XADD refused the ID because the stream already has an entry at or after it:
    /// Ok (after `WAIT`) when the same batch is stored there, `Fenced` otherwise.
    async fn resolve_existing(
        &self,
        topic: &TopicName,
        handle: &StreamHandle,
        batch: &RecordBatch,
        bytes: &bytes::Bytes,
    ) -> Result<(), TierError> {
        let id = entry_id(batch.base_offset());
        let ctx = handle.ctx.clone().offset(batch.base_offset()).location(format!("{}@{id}", handle.key));
        let existing = handle.entry_at(batch.base_offset()).await?;
        // Whatever the outcome, the cached range is behind the server: re-read it.
        self.refresh_range(topic).await?;
        match existing {
            Some(entry) => {
                if entry.batch_bytes(&handle.ctx, &handle.key)? == bytes {
                    self.confirm_held(ctx, topic).await
                } else {
                    Err(TierError::fenced(
                        ctx,
                        format!("stream {} already holds a different batch at ID {id}", handle.key),
                    ))
                }
            }
            None => Err(TierError::fenced(
                ctx,
                format!(
                    "stream {} already has entries past ID {id} and none starts at it; refusing to write below the stream's top",
                    handle.key
                ),
            )),
        }
    }

    /// Confirms that the replicas hold what the stream already holds, for an identical
    /// retry whose first attempt may not have been acknowledged: `SET <confirm key> 1`
    /// then `WAIT`, one pipeline ([`send_with_wait`](Self::send_with_wait)). The retry's
    /// `XADD` was refused, so without a write of its own the `WAIT` would count the
    /// replicas of whatever the connection wrote last, or of nothing on a fresh
    /// connection (every connected replica, at once). A `SET` always advances the
    /// replication offset, even when the value is unchanged, and replicas apply the
    /// stream in order: one that acknowledged the `SET` holds the entry written before it.
    /// The key written is the topic's marker ([`topic_key`](Self::topic_key); the stream
    /// holds a batch, so the topic exists), which lives on the stream's primary: the one
    /// server outside cluster mode, the stream's hash slot (its hash tag) in cluster mode.
    async fn confirm_held(&self, ctx: ErrorContext, topic: &TopicName) -> Result<(), TierError> {
        if self.config.wait_replicas == 0 {
            return Ok(());
        }
        let key = self.topic_key(topic);
        let pipeline = self.client.pipeline();
        let queued: Result<(), FredError> = pipeline.set(key.as_str(), 1, None, None, false).await;
        queued.map_err(|e| crate::client::map_fred(ctx.clone(), "SET", e))?;
        let (reply, wait) = self.send_with_wait(&ctx, "SET+WAIT", &key, pipeline).await?;
        reply.map_err(|e| crate::client::map_fred(ctx.clone(), "SET (before WAIT)", e))?;
        match wait {
            Some(reply) => self.check_wait(ctx, reply),
            None => Ok(()),
        }
    }

    fn check_wait(&self, ctx: ErrorContext, reply: Result<Value, FredError>) -> Result<(), TierError> {
        let wanted = self.config.wait_replicas;
        let acked = match reply {
            Ok(Value::Integer(n)) => n,
            Ok(other) => {
                return Err(TierError::internal(ctx, format!("WAIT: unexpected reply {other:?}")));
            }
            Err(e) => return Err(crate::client::map_fred(ctx, "WAIT", e)),
        };
        if acked < i64::from(wanted) {
            return Err(TierError::unavailable(
                ctx,
                format!(
                    "WAIT: only {acked} of {wanted} replicas acknowledged the write within {:?}; the batch is on the primary but not confirmed durable",
                    self.config.wait_timeout
                ),
            ));
        }
        Ok(())
    }

    fn wait_timeout_ms(&self) -> i64 {
        i64::try_from(self.config.wait_timeout.as_millis()).unwrap_or(i64::MAX).max(1)
    }

    /// In cluster mode, `WAIT` must run on the primary that took the write, on the
    /// connection that took it: `WAIT` has no key, and fred sends a keyless command to an
    /// arbitrary node (whose answer would count another primary's replicas). Routed by the
    /// hash slot of the written key, it goes where fred's slot map sends that write, in
    /// the same pipeline. A write its node answers `MOVED` (the slot moved since fred
    /// read the map) is not re-sent to the new owner, where the `WAIT` would not follow
    /// it: with one attempt per command (`max_command_attempts = 1`, set where the client
    /// is built), fred fails the redirected write ("Too many failed write attempts") after
    /// re-reading the map, so the caller's retry goes to the new owner.
    fn wait_options(&self, key: &str) -> Options {
        let mut options = Options::default();
        if self.config.mode == Mode::Cluster {
            options.cluster_hash = Some(ClusterHash::Custom(redis_keyslot(key.as_bytes())));
        }
        options
    }
}

/// True when every key `<prefix>{<topic>}…` of one topic hashes to one slot: the
/// server hashes the text between a key's first `{` and the next `}`, which lies within
/// `<prefix>{<topic>}` unless that text is empty (a prefix whose first `{` is followed
/// at once by `}`): then it hashes the whole key, and a topic's keys spread over slots.
fn topic_keys_share_a_slot(prefix: &str) -> bool {
    match prefix.find('{') {
        None => true,
        Some(open) => !prefix[open + 1..].starts_with('}'),
    }
}

/// What `XINFO STREAM` says about a stream's ends.
struct StreamInfo {
    first: Option<RecordBatch>,
    last: Option<RecordBatch>,
    last_generated: Option<Offset>,
}

impl StreamInfo {
    fn parse(handle: &StreamHandle, info: Value) -> Result<Self, TierError> {
        let bad = || TierError::internal(handle.ctx.clone(), "unexpected XINFO STREAM reply");
        let pairs: Vec<(String, Value)> = match info {
            Value::Map(m) => m
                .inner()
                .into_iter()
                .map(|(k, v)| Some((k.as_str()?.to_owned(), v)))
                .collect::<Option<_>>()
                .ok_or_else(bad)?,
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len() / 2);
                let mut it = items.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    out.push((k.as_str().ok_or_else(bad)?.into_owned(), v));
                }
                out
            }
            _ => return Err(bad()),
        };
        let mut info = StreamInfo { first: None, last: None, last_generated: None };
        for (name, value) in pairs {
            match name.as_str() {
                "first-entry" | "last-entry" if value != Value::Null => {
                    let entries = parse_entries(&handle.ctx, Value::Array(vec![value]))?;
                    let batch = entries.first().map(|e| e.decode(&handle.ctx, &handle.key)).transpose()?;
                    if name == "first-entry" {
                        info.first = batch;
                    } else {
                        info.last = batch;
                    }
                }
                "last-generated-id" => {
                    info.last_generated =
                        value.as_str().and_then(|id| id.split_once('-').and_then(|(ms, _)| ms.parse().ok()));
                }
                _ => {}
            }
        }
        Ok(info)
    }
}

#[async_trait]
impl Tier for WarmTier {
    fn kind(&self) -> TierKind {
        TierKind::Warm
    }

    fn capabilities(&self) -> tier_core::Capabilities {
        Self::CAPABILITIES
    }

    async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
        match self.cached_range(topic) {
            Some(range) => Ok(range),
            None => self.refresh_range(topic).await,
        }
    }

    /// Counts each append in `tierlog_warm_wait_total` by outcome
    /// ([`tier_core::metrics::WARM_WAIT`]).
    async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
        let result = self.append_checked(topic, batch).await;
        let outcome = if result.is_ok() { "ok" } else { "failed" };
        metrics::counter!(WARM_WAIT, OUTCOME => outcome).increment(1);
        if result.is_err() {
            // The XADD may or may not have landed, the WAIT may have fallen short, the
            // server may have moved: whatever the cache says is no longer known.
            self.invalidate(topic);
        }
        result
    }

    async fn read_batches(
        &self,
        topic: &TopicName,
        from: Offset,
        to: Offset,
        max_bytes: usize,
    ) -> Result<Vec<RecordBatch>, TierError> {
        read::read_batches(self, topic, from, to, max_bytes).await
    }

    async fn offset_for_timestamp(
        &self,
        topic: &TopicName,
        timestamp: Timestamp,
    ) -> Result<Option<Offset>, TierError> {
        read::offset_for_timestamp(self.handle(topic), timestamp).await
    }
}

/// Invariant 3: the next batch starts at `end`; when nothing is held and the server
/// keeps no next key for the topic (a topic the stream never held), anywhere at or past
/// `end`.
fn append_allowed(range: OffsetRange, base: Offset, next_held: bool) -> bool {
    base == range.end || (!next_held && range.is_empty() && base >= range.end)
}

/// What [`WarmTier::conditional_append`] did.
enum Appended {
    /// The script ran: it added the first `added` batches, and `refusal` is the message
    /// it stopped at (empty when it added all).
    Script { added: usize, refusal: String },
    /// The server refused the script itself; nothing ran.
    ScriptRefused,
}

/// The offset a next key holds (a decimal string).
fn parse_next(handle: &StreamHandle, value: &Value) -> Result<Offset, TierError> {
    value.as_str().and_then(|s| s.parse().ok()).ok_or_else(|| {
        TierError::internal(
            handle.ctx.clone(),
            format!("the next key of {} holds {value:?}, not an offset", handle.key),
        )
    })
}
