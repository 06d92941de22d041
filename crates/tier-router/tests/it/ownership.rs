//! Owner epochs through the router, on a real Valkey: a store that opens a topic claims it
//! in warm (`WarmBackend::claim_owner`), and a store that opened it before — a node that
//! still believes it owns the topic — is fenced from then on: nothing it appends reaches
//! warm, and its appends are refused `Fenced`.

use crate::common;

use std::sync::Arc;

use common::{ColdOn, Deployment, Tiers, rec, warm_config};
use tier_core::{ErrorKind, OffsetRange, ReadLimit, TierExt};
use tier_router::{TieredStore, WarmFailurePolicy};
use tier_testkit::servers::SharedValkey;
use tier_warm::WarmTier;

/// A node: its own data directory, and its own connection to the shared warm tier
/// (`prefix` on `valkey`), as two `tierlog` processes on two machines would have.
async fn node(valkey: &SharedValkey, prefix: &str, policy: WarmFailurePolicy) -> (Deployment, Arc<WarmTier>) {
    let mut d = Deployment::new(Tiers::Hot, ColdOn::Local).await;
    let warm = Arc::new(WarmTier::connect(warm_config(valkey.primary_url(), prefix)).await.expect("connect"));
    d.tiers = Tiers::HotWarm;
    d.warm = Some(Arc::clone(&warm) as Arc<dyn tier_router::WarmBackend>);
    d.router.warm_failure_policy = policy;
    (d, warm)
}

fn payloads(records: &[tier_core::Record]) -> Vec<String> {
    records.iter().map(|r| String::from_utf8_lossy(&r.payload).into_owned()).collect()
}

/// Under `fail`: B opens the topic A writes. A's next append is refused `Fenced` naming
/// the takeover, and so is every one after it; B continues at A's last acknowledged end
/// with nothing lost, and warm holds nothing of A's after the takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_whose_topic_another_store_opened_is_fenced_under_fail() {
    let valkey = SharedValkey::get().await.expect("a Valkey server");
    let prefix = format!("{}own-fail-", valkey.key_prefix());
    let (a, _) = node(&valkey, &prefix, WarmFailurePolicy::Fail).await;
    let (b, warm_b) = node(&valkey, &prefix, WarmFailurePolicy::Fail).await;
    let store_a: TieredStore = a.open(&[]).await;
    let topic_a = store_a.topic("owned").await.unwrap();
    assert_eq!(topic_a.append((0..3).map(rec).collect()).await.unwrap(), OffsetRange::new(0, 3));

    let store_b = b.open(&[]).await;
    let topic_b = store_b.topic("owned").await.unwrap();

    let err = topic_a.append(vec![rec(3)]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{}", err.report());
    assert!(err.report().to_string().contains("another writer took the topic over"), "{}", err.report());
    let err = topic_a.append(vec![rec(3)]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "every later append: {}", err.report());
    assert!(err.report().to_string().contains("reopen the topic to take it back"), "{}", err.report());

    assert_eq!(topic_b.append(vec![rec(3), rec(4)]).await.unwrap(), OffsetRange::new(3, 5));
    let t = tier_core::TopicName::new("owned").unwrap();
    let held = warm_b.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(
        payloads(&held),
        ["r0", "r1", "r2", "r3", "r4"],
        "B's records after A's, none of A's zombie writes"
    );
    store_a.close().await;
    store_b.close().await;
}

/// Under `degrade` an append is acknowledged on the WAL alone, so the zombie learns of the
/// takeover at its next write to warm (its back-fill): from then on it is fenced, and warm
/// holds nothing it wrote after the takeover.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_whose_topic_another_store_opened_is_fenced_under_degrade() {
    let valkey = SharedValkey::get().await.expect("a Valkey server");
    let prefix = format!("{}own-degrade-", valkey.key_prefix());
    let (a, _) = node(&valkey, &prefix, WarmFailurePolicy::Degrade).await;
    let (b, warm_b) = node(&valkey, &prefix, WarmFailurePolicy::Degrade).await;
    let store_a = a.open(&[]).await;
    let topic_a = store_a.topic("owned").await.unwrap();
    assert_eq!(topic_a.append((0..3).map(rec).collect()).await.unwrap(), OffsetRange::new(0, 3));
    topic_a.flush().await.expect("warm holds [0, 3)");

    let store_b = b.open(&[]).await;
    store_b.topic("owned").await.unwrap();

    // Acknowledged on A's WAL alone (degrade); warm refuses it to A.
    let _ = topic_a.append(vec![rec(3)]).await;
    let err = topic_a.flush().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{}", err.report());
    let err = topic_a.append(vec![rec(4)]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{}", err.report());

    let t = tier_core::TopicName::new("owned").unwrap();
    let held = warm_b.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(payloads(&held), ["r0", "r1", "r2"], "nothing of A's after the takeover");
    store_a.close().await;
    store_b.close().await;
}

/// Reads the whole topic through `store`.
async fn read_all(store: &TieredStore, topic: &str, end: u64) -> Vec<String> {
    use futures::StreamExt;
    let topic = store.topic(topic).await.expect("the topic");
    let mut reader = topic.reader(tier_core::StartPosition::Offset(0)).await.expect("a reader");
    let mut out = Vec::new();
    while (out.len() as u64) < end {
        let r = reader.next().await.expect("a record").expect("readable");
        assert_eq!(r.offset, out.len() as u64, "dense");
        out.push(String::from_utf8_lossy(&r.payload).into_owned());
    }
    out
}

/// The topic comes back to a node that lost it: A was fenced with a refused batch in its
/// WAL at offset 3, B wrote its own records at 3 and 4 and closed, A reopens. A's WAL was
/// written under an epoch another owner followed: what it holds past the takeover is not
/// the log. A serves B's records at 3 and 4 and continues at 5.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_takes_its_topic_back_serves_the_other_owners_records_not_its_stale_wal() {
    let valkey = SharedValkey::get().await.expect("a Valkey server");
    let prefix = format!("{}own-back-", valkey.key_prefix());
    let (a, _) = node(&valkey, &prefix, WarmFailurePolicy::Fail).await;
    let (b, _) = node(&valkey, &prefix, WarmFailurePolicy::Fail).await;
    let store_a = a.open(&[]).await;
    let topic_a = store_a.topic("back").await.unwrap();
    assert_eq!(topic_a.append((0..3).map(rec).collect()).await.unwrap(), OffsetRange::new(0, 3));

    let store_b = b.open(&[]).await;
    let topic_b = store_b.topic("back").await.unwrap();
    let err = topic_a.append(vec![rec(3)]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{}", err.report());
    assert_eq!(topic_b.append(vec![rec(103), rec(104)]).await.unwrap(), OffsetRange::new(3, 5));
    drop(topic_b);
    store_b.close().await;
    drop(topic_a);
    store_a.close().await;

    let store_a = a.open(&[]).await;
    assert_eq!(read_all(&store_a, "back", 5).await, ["r0", "r1", "r2", "r103", "r104"]);
    let topic_a = store_a.topic("back").await.unwrap();
    assert_eq!(
        topic_a.append(vec![rec(5)]).await.unwrap(),
        OffsetRange::new(5, 6),
        "continues after B's end"
    );
    drop(topic_a);
    store_a.close().await;
}

/// As above under `degrade`, where A may have acknowledged a record on its WAL alone
/// after B's takeover. B, a node with no evidence of its own, opens the topic fenced
/// (nothing bounds what A acknowledged on its WAL alone) until the operator resumes it
/// past A's last acknowledged offset; B appends there. When A takes the topic back, its
/// WAL is not the log past B's claim: A serves B's records, and hands out no offset A or
/// B handed out before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_degrade_a_store_that_takes_its_topic_back_serves_the_other_owners_records() {
    let valkey = SharedValkey::get().await.expect("a Valkey server");
    let prefix = format!("{}own-back-degrade-", valkey.key_prefix());
    let (a, _) = node(&valkey, &prefix, WarmFailurePolicy::Degrade).await;
    let (b, _) = node(&valkey, &prefix, WarmFailurePolicy::Degrade).await;
    let store_a = a.open(&[]).await;
    let topic_a = store_a.topic("back").await.unwrap();
    assert_eq!(topic_a.append((0..3).map(rec).collect()).await.unwrap(), OffsetRange::new(0, 3));
    topic_a.flush().await.expect("warm holds [0, 3)");

    let store_b = b.open(&[]).await;
    let topic_b = store_b.topic("back").await.unwrap();
    // Acknowledged on A's WAL alone, or refused: either way not the log.
    let _ = topic_a.append(vec![rec(3)]).await;
    assert_eq!(topic_a.flush().await.unwrap_err().kind(), ErrorKind::Fenced);
    assert_eq!(
        topic_b.append(vec![rec(104)]).await.unwrap_err().kind(),
        ErrorKind::Fenced,
        "B waits for the operator"
    );
    store_b.resume_topic("back", 4).await.expect("the operator resumes B past A's last acknowledged offset");
    assert_eq!(topic_b.append(vec![rec(104), rec(105)]).await.unwrap(), OffsetRange::new(4, 6));
    topic_b.flush().await.expect("warm holds B's records");
    drop(topic_b);
    store_b.close().await;
    drop(topic_a);
    store_a.close().await;

    let store_a = a.open(&[]).await;
    let topic_a = store_a.topic("back").await.unwrap();
    {
        use futures::StreamExt;
        let mut reader = topic_a.reader(tier_core::StartPosition::Offset(4)).await.unwrap();
        for want in ["r104", "r105"] {
            let r = reader.next().await.expect("a record").expect("readable");
            assert_eq!(String::from_utf8_lossy(&r.payload), want);
        }
    }
    let next = topic_a.append(vec![rec(6)]).await.unwrap().start;
    assert!(next >= 6, "continues after B's end: {next}");
    drop(topic_a);
    store_a.close().await;
}
