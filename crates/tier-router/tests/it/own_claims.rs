//! Owner epochs skipped by this node's own claims. A claim records its claimer — the node
//! id of the store's state directory — with the epoch, and an open under `fail` whose claim
//! finds epochs skipped since its WAL was written keeps the WAL when this node claimed
//! every one of them (claims whose answers it lost), and discards it when another node
//! claimed one, or when its claimer is unknown (`docs/ownership.md`, "Who claimed an
//! epoch"). In memory, with a failover to a replica behind that took records warm had
//! confirmed (the simulation's regression schedule 280001450), and on a real Valkey with a
//! second store taking the topic over.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(feature = "warm")]
// Tests use the real clock: deadlines for real servers.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use common::{ColdOn, Deployment, Tiers, r, rec, warm_config};
use futures::StreamExt;
use futures::stream::BoxStream;
use parking_lot::Mutex;
use tier_core::position::NodeId;
use tier_core::{
    ErrorContext, Offset, OffsetRange, RecordBatch, StartPosition, Tier, TierError, TierKind, Timestamp,
    TopicName,
};
use tier_router::testing::Repair;
use tier_router::{RecoveryReport, TieredStore, WarmBackend, WarmFailurePolicy};
use tier_testkit::MemoryTier;
use tier_testkit::servers::SharedValkey;
use tier_warm::WarmTier;

const T: &str = "t";

fn topic() -> TopicName {
    TopicName::new(T).unwrap()
}

/// `Tier` for a wrapper, every method forwarded to its field `$inner`.
macro_rules! forward_tier {
    ($wrapper:ty, $inner:ident) => {
        #[async_trait]
        impl Tier for $wrapper {
            fn kind(&self) -> TierKind {
                self.$inner.kind()
            }
            fn capabilities(&self) -> tier_core::Capabilities {
                self.$inner.capabilities()
            }
            async fn range(&self, topic: &TopicName) -> Result<OffsetRange, TierError> {
                self.$inner.range(topic).await
            }
            async fn append(&self, topic: &TopicName, batch: RecordBatch) -> Result<(), TierError> {
                self.$inner.append(topic, batch).await
            }
            async fn read_batches(
                &self,
                topic: &TopicName,
                from: Offset,
                to: Offset,
                max_bytes: usize,
            ) -> Result<Vec<RecordBatch>, TierError> {
                self.$inner.read_batches(topic, from, to, max_bytes).await
            }
            async fn offset_for_timestamp(
                &self,
                topic: &TopicName,
                timestamp: Timestamp,
            ) -> Result<Option<Offset>, TierError> {
                self.$inner.offset_for_timestamp(topic, timestamp).await
            }
        }
    };
}

/// The lost answer of a claim the server applied.
fn answer_lost() -> TierError {
    TierError::unavailable(ErrorContext::tier(TierKind::Warm), "the claim's answer was lost")
}

/// A warm tier keeping owner epochs in memory, over a [`MemoryTier`]'s streams: each
/// topic's epoch and the claimer recorded with each (as tier-warm's claim script does),
/// and the epoch the client holds (tier-warm's cached one, forgotten by
/// [`new_process`](Self::new_process)). It fences nothing: what is tested is the
/// router's decision on its WAL. The next claims can lose their answers (the epoch and its
/// claimer recorded all the same).
#[derive(Debug, Default)]
struct EpochWarm {
    memory: MemoryTier,
    epochs: Mutex<Epochs>,
}

#[derive(Debug, Default)]
struct Epochs {
    owner: BTreeMap<TopicName, u64>,
    claimers: BTreeMap<(TopicName, u64), NodeId>,
    held: BTreeMap<TopicName, u64>,
    answers_to_lose: usize,
}

impl EpochWarm {
    /// A new process's client: it holds no epoch.
    fn new_process(&self) {
        self.epochs.lock().held.clear();
    }

    /// The answer of the next claim is lost (the server applied it).
    fn lose_next_answer(&self) {
        self.epochs.lock().answers_to_lose += 1;
    }

    /// A claim of another node's, `claimer` (`None`: a claim that recorded no claimer, as
    /// on a server refusing scripts); returns its epoch.
    fn claim_elsewhere(&self, claimer: Option<NodeId>) -> u64 {
        let mut e = self.epochs.lock();
        let epoch = e.owner.get(&topic()).copied().unwrap_or(0) + 1;
        e.owner.insert(topic(), epoch);
        if let Some(claimer) = claimer {
            e.claimers.insert((topic(), epoch), claimer);
        }
        epoch
    }
}

forward_tier!(EpochWarm, memory);

#[async_trait]
impl WarmBackend for EpochWarm {
    async fn append_group(
        &self,
        topic: &TopicName,
        batches: Vec<RecordBatch>,
    ) -> (usize, Result<(), TierError>) {
        WarmBackend::append_group(&self.memory, topic, batches).await
    }
    async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        WarmBackend::trim_before(&self.memory, topic, offset).await
    }
    fn batches_from(&self, topic: &TopicName, from: Offset) -> BoxStream<'_, Result<RecordBatch, TierError>> {
        WarmBackend::batches_from(&self.memory, topic, from)
    }
    async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        WarmBackend::restart_at(&self.memory, topic, offset).await
    }
    async fn claim_owner(&self, topic: &TopicName, claimer: NodeId) -> Result<Option<u64>, TierError> {
        let mut e = self.epochs.lock();
        let epoch = e.owner.get(topic).copied().unwrap_or(0) + 1;
        e.owner.insert(topic.clone(), epoch);
        e.claimers.insert((topic.clone(), epoch), claimer);
        if e.answers_to_lose > 0 {
            e.answers_to_lose -= 1;
            return Err(answer_lost());
        }
        e.held.insert(topic.clone(), epoch);
        Ok(Some(epoch))
    }
    fn claimed_owner(&self, topic: &TopicName) -> Option<u64> {
        self.epochs.lock().held.get(topic).copied()
    }
    async fn claimers(
        &self,
        topic: &TopicName,
        epochs: Range<u64>,
    ) -> Result<BTreeMap<u64, NodeId>, TierError> {
        let e = self.epochs.lock();
        Ok(epochs
            .filter_map(|epoch| e.claimers.get(&(topic.clone(), epoch)).map(|id| (epoch, *id)))
            .collect())
    }
    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        WarmBackend::record_topic(&self.memory, topic).await
    }
    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        WarmBackend::topic_recorded(&self.memory, topic).await
    }
}

/// A store on the WAL of `d` and the in-memory warm tier `warm`, under `fail`.
fn deployment_with(d: &mut Deployment, warm: &Arc<EpochWarm>) {
    d.tiers = Tiers::HotWarm;
    d.warm = Some(Arc::clone(warm) as Arc<dyn WarmBackend>);
    d.router.warm_failure_policy = WarmFailurePolicy::Fail;
}

/// The recovery report of the topic.
async fn report(store: &TieredStore) -> RecoveryReport {
    store.recovery_reports().await.into_iter().find(|r| r.topic == topic()).expect("the topic's report")
}

/// The payloads `store` serves from offset 0 to `end`, dense.
async fn served(store: &TieredStore, end: u64) -> Vec<String> {
    let topic = store.topic(T).await.unwrap();
    let mut reader = topic.reader(StartPosition::Offset(0)).await.unwrap();
    let mut out = Vec::new();
    while (out.len() as u64) < end {
        let record = reader.next().await.expect("a record").expect("readable");
        assert_eq!(record.offset, out.len() as u64, "dense");
        out.push(String::from_utf8_lossy(&record.payload).into_owned());
    }
    out
}

fn payloads(range: Range<u64>) -> Vec<String> {
    range.map(|o| format!("r{o}")).collect()
}

/// Records `range` in one append, acknowledged there.
async fn append(store: &TieredStore, range: Range<u64>) {
    let topic = store.topic(T).await.unwrap();
    assert_eq!(topic.append(range.clone().map(rec).collect()).await.unwrap(), r(range.start, range.end));
}

/// The open after a restart claims the topic and loses the answer (the server applied the
/// claim: epoch 2, this node's); the WAL still records epoch 1. [3, 7) is acknowledged and
/// warm confirms it; a failover to a replica behind takes [3, 7) from warm, the WAL holding
/// the only other copy. The next open claims epoch 3 and finds epoch 2 skipped — claimed by
/// this node — and keeps its WAL: every acknowledged record is served, warm gets [3, 7)
/// back, and the next offset is 7. With the repair reverted (any skip discards the WAL)
/// the same steps lose [3, 7) and hand out offset 3 again: the test sees the bug.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_fail_a_wal_is_kept_across_an_epoch_this_node_claimed_and_lost_the_answer_of() {
    for revert in [false, true] {
        let mut d = Deployment::new(Tiers::Hot, ColdOn::Local).await;
        let warm = Arc::new(EpochWarm::default());
        deployment_with(&mut d, &warm);
        let state_dir = d.router.state_dir_for(&d.hot_dir());
        if revert {
            tier_router::testing::revert(&state_dir, Repair::OwnClaimsKeepWal);
        }
        let store = d.open(&[T]).await;
        append(&store, 0..3).await;
        store.close().await;

        warm.new_process();
        warm.lose_next_answer();
        let store = d.open(&[T]).await;
        append(&store, 3..7).await;
        store.close().await;
        assert_eq!(warm.memory.lose_after(&topic(), 3), r(0, 3), "the failover took [3, 7)");

        warm.new_process();
        let store = d.open(&[T]).await;
        let found = report(&store).await;
        let topic_handle = store.topic(T).await.unwrap();
        if revert {
            assert!(found.hot.is_empty(), "the WAL was discarded: {found:?}");
            assert_eq!(served(&store, 3).await, payloads(0..3));
            let reused = topic_handle.append(vec![rec(100)]).await.unwrap();
            assert_eq!(reused, r(3, 4), "offset 3, acknowledged before, handed out again");
            tier_router::testing::restore(&state_dir);
        } else {
            assert_eq!(found.hot, r(0, 7), "the WAL was kept: {found:?}");
            assert!(found.is_clean(), "{found:?}");
            assert_eq!(served(&store, 7).await, payloads(0..7));
            assert_eq!(topic_handle.append(vec![rec(7)]).await.unwrap(), r(7, 8));
            topic_handle.flush().await.expect("warm confirms the WAL's records");
            let held: Vec<OffsetRange> =
                warm.memory.batches(&topic()).iter().map(RecordBatch::offset_range).collect();
            assert_eq!(held.last().map(|b| b.end), Some(8), "warm got [3, 7) back: {held:?}");
        }
        drop(topic_handle);
        store.close().await;
    }
}

/// The WAL records epoch 1; before the next open claims epoch 3, epoch 2 was claimed by
/// another node, or by a claimer no record names (a server refusing scripts, a failover
/// that lost the record). The WAL is discarded: what it holds past that takeover is not
/// the log. The topic continues from warm, which holds every acknowledged record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_fail_a_wal_is_discarded_when_another_or_an_unknown_node_claimed_in_between() {
    for claimer in [Some(NodeId::from_u128(u128::MAX)), None] {
        let mut d = Deployment::new(Tiers::Hot, ColdOn::Local).await;
        let warm = Arc::new(EpochWarm::default());
        deployment_with(&mut d, &warm);
        let store = d.open(&[T]).await;
        append(&store, 0..5).await;
        store.close().await;

        assert_eq!(warm.claim_elsewhere(claimer), 2);
        warm.new_process();
        let store = d.open(&[T]).await;
        let found = report(&store).await;
        assert!(found.hot.is_empty(), "claimer {claimer:?}: the WAL was discarded: {found:?}");
        assert_eq!(found.replayed, Some(r(0, 5)), "rebuilt from warm: {found:?}");
        assert_eq!(served(&store, 5).await, payloads(0..5));
        let topic_handle = store.topic(T).await.unwrap();
        assert_eq!(topic_handle.append(vec![rec(5)]).await.unwrap(), r(5, 6));
        drop(topic_handle);
        store.close().await;
    }
}

/// A warm tier on a real Valkey that loses the answer of its next claims: the claim goes
/// through a second connection, so the server applies it (the epoch and its claimer) and
/// this connection never learns the epoch. Every other call goes to `tier`. Records the
/// claimer each claim was made for.
struct LosesClaimAnswers {
    tier: WarmTier,
    side: WarmTier,
    to_lose: Mutex<usize>,
    claimers: Mutex<Vec<NodeId>>,
}

impl LosesClaimAnswers {
    async fn connect(valkey: &SharedValkey, prefix: &str, to_lose: usize) -> Arc<Self> {
        let connect =
            || async { WarmTier::connect(warm_config(valkey.primary_url(), prefix)).await.unwrap() };
        Arc::new(Self {
            tier: connect().await,
            side: connect().await,
            to_lose: Mutex::new(to_lose),
            claimers: Mutex::new(Vec::new()),
        })
    }
}

impl std::fmt::Debug for LosesClaimAnswers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LosesClaimAnswers").finish_non_exhaustive()
    }
}

forward_tier!(LosesClaimAnswers, tier);

#[async_trait]
impl WarmBackend for LosesClaimAnswers {
    async fn append_group(
        &self,
        topic: &TopicName,
        batches: Vec<RecordBatch>,
    ) -> (usize, Result<(), TierError>) {
        WarmBackend::append_group(&self.tier, topic, batches).await
    }
    async fn trim_before(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        WarmBackend::trim_before(&self.tier, topic, offset).await
    }
    fn batches_from(&self, topic: &TopicName, from: Offset) -> BoxStream<'_, Result<RecordBatch, TierError>> {
        WarmBackend::batches_from(&self.tier, topic, from)
    }
    async fn restart_at(&self, topic: &TopicName, offset: Offset) -> Result<(), TierError> {
        WarmBackend::restart_at(&self.tier, topic, offset).await
    }
    async fn claim_owner(&self, topic: &TopicName, claimer: NodeId) -> Result<Option<u64>, TierError> {
        self.claimers.lock().push(claimer);
        let lose = {
            let mut to_lose = self.to_lose.lock();
            let lose = *to_lose > 0;
            *to_lose = to_lose.saturating_sub(1);
            lose
        };
        if lose {
            self.side.claim_owner(topic, claimer).await?;
            return Err(answer_lost());
        }
        WarmBackend::claim_owner(&self.tier, topic, claimer).await
    }
    fn claimed_owner(&self, topic: &TopicName) -> Option<u64> {
        WarmBackend::claimed_owner(&self.tier, topic)
    }
    async fn claimers(
        &self,
        topic: &TopicName,
        epochs: Range<u64>,
    ) -> Result<BTreeMap<u64, NodeId>, TierError> {
        WarmBackend::claimers(&self.tier, topic, epochs).await
    }
    async fn record_topic(&self, topic: &TopicName) -> Result<(), TierError> {
        WarmBackend::record_topic(&self.tier, topic).await
    }
    async fn topic_recorded(&self, topic: &TopicName) -> Result<bool, TierError> {
        WarmBackend::topic_recorded(&self.tier, topic).await
    }
}

/// Opens `d`'s store as a new process would: a warm connection of its own (holding no
/// epoch), losing the answer of its first `to_lose` claims.
async fn open_as_process(
    d: &mut Deployment,
    valkey: &SharedValkey,
    prefix: &str,
    to_lose: usize,
) -> (TieredStore, Arc<LosesClaimAnswers>) {
    let warm = LosesClaimAnswers::connect(valkey, prefix, to_lose).await;
    d.tiers = Tiers::HotWarm;
    d.warm = Some(Arc::clone(&warm) as Arc<dyn WarmBackend>);
    d.router.warm_failure_policy = WarmFailurePolicy::Fail;
    (d.open(&[T]).await, warm)
}

/// On a real Valkey, under `fail`: node A's open loses its claim's answer; its next open
/// finds that epoch skipped, recorded as A's own, and keeps the WAL. Then node B opens the
/// topic and appends; A's next open finds B's epoch skipped and discards its WAL, serving
/// B's records from warm.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_valkey_a_wal_is_kept_across_its_own_lost_claim_and_discarded_after_another_node_s() {
    let valkey = SharedValkey::get().await.expect("a Valkey server (install valkey-server)");
    let prefix = format!("{}own-claims-", valkey.key_prefix());
    let mut a = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    let mut b = Deployment::new(Tiers::Hot, ColdOn::Local).await;

    let (store, _) = open_as_process(&mut a, &valkey, &prefix, 0).await;
    append(&store, 0..3).await;
    store.close().await;
    let (store, lost) = open_as_process(&mut a, &valkey, &prefix, 1).await;
    assert_eq!(report(&store).await.hot, r(0, 3));
    store.close().await;
    let me = lost.claimers.lock()[0];

    let (store, warm) = open_as_process(&mut a, &valkey, &prefix, 0).await;
    let found = report(&store).await;
    assert_eq!((found.hot, found.replayed), (r(0, 3), None), "A's WAL was kept: {found:?}");
    let epoch = warm.tier.owner_epoch(&topic()).expect("claimed");
    assert_eq!(
        warm.tier.claimers(&topic(), epoch - 1..epoch + 1).await.unwrap(),
        BTreeMap::from([(epoch - 1, me), (epoch, me)]),
        "the skipped epoch and the one claimed, both A's"
    );
    append(&store, 3..5).await;
    store.close().await;

    let (store, _) = open_as_process(&mut b, &valkey, &prefix, 0).await;
    assert_eq!(served(&store, 5).await, payloads(0..5));
    let topic_b = store.topic(T).await.unwrap();
    assert_eq!(topic_b.append(vec![rec(105), rec(106)]).await.unwrap(), r(5, 7));
    drop(topic_b);
    store.close().await;

    let (store, _) = open_as_process(&mut a, &valkey, &prefix, 0).await;
    let found = report(&store).await;
    assert!(found.hot.is_empty(), "A's WAL was discarded: {found:?}");
    assert_eq!(found.replayed, Some(r(0, 7)), "rebuilt from warm: {found:?}");
    let mut want = payloads(0..5);
    want.extend(["r105".to_owned(), "r106".to_owned()]);
    assert_eq!(served(&store, 7).await, want);
    store.close().await;
}
