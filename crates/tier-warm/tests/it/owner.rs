//! Owner epochs: a writer that claimed a topic (`WarmTier::claim_owner`) is fenced, in
//! the append script, once another writer claims it after it — the stale writer's
//! appends (one batch or a group) are `Fenced` naming both epochs and write nothing,
//! and the new owner continues the stream where it ends. Each claim records its claimer
//! with the epoch, in the same script step, and the claimers of skipped epochs read back
//! (`WarmTier::claimers`).

// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeMap;

use common::{batch, config, raw_client, shared_tier, topic};
use fred::prelude::KeysInterface;
use tier_core::position::{NodeId, WarmBackend};
use tier_core::{ErrorKind, OffsetRange, ReadLimit, Tier, TierExt};
use tier_warm::WarmTier;

/// Two nodes' ids.
const A: NodeId = NodeId::from_u128(0xa);
const B: NodeId = NodeId::from_u128(0xb);

#[tokio::test]
async fn a_writer_whose_topic_was_claimed_after_it_is_fenced_and_writes_nothing() {
    let (valkey, old) = shared_tier().await;
    let new = WarmTier::connect(config(valkey.primary_url(), valkey.key_prefix())).await.unwrap();
    let t = topic("owned");
    let first = old.claim_owner(&t, A).await.unwrap();
    assert_eq!(old.owner_epoch(&t), Some(first));
    old.append(&t, batch(0, 3, "old")).await.unwrap();

    let second = new.claim_owner(&t, B).await.unwrap();
    assert_eq!(second, first + 1, "each claim takes the next epoch");

    // The stale writer, its cache saying the stream continues at 3: refused by the script.
    let err = old.append(&t, batch(3, 2, "zombie")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{}", err.report());
    let message = err.to_string();
    assert!(
        message.contains(&format!("owned by epoch {second}"))
            && message.contains(&format!("holds epoch {first}")),
        "{message}"
    );
    let (held, result) =
        WarmBackend::append_group(&old, &t, vec![batch(3, 2, "zombie"), batch(5, 2, "zombie")]).await;
    assert_eq!(held, 0);
    assert_eq!(result.unwrap_err().kind(), ErrorKind::Fenced);

    // The new owner continues where the stream ends; nothing of the stale writer's is there.
    new.append(&t, batch(3, 2, "new")).await.unwrap();
    assert_eq!(new.range(&t).await.unwrap(), OffsetRange::new(0, 5));
    let records = new.read(&t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    let payloads: Vec<String> =
        records.iter().map(|r| String::from_utf8_lossy(&r.payload).into_owned()).collect();
    assert_eq!(payloads, ["old-0", "old-1", "old-2", "new-3", "new-4"]);

    // A writer that never claimed is not checked (no epoch to compare).
    let unclaimed = WarmTier::connect(config(valkey.primary_url(), valkey.key_prefix())).await.unwrap();
    unclaimed.append(&t, batch(5, 1, "unclaimed")).await.unwrap();
    assert_eq!(unclaimed.owner_epoch(&t), None);
}

/// A stale owner's trim and restart are refused in the same script step as its appends:
/// they would remove batches the new owner still needs (it replays a lost WAL from them,
/// and exports them). Nothing is removed and the next key stays where the new owner left
/// it; the new owner's own trim and restart go through.
#[tokio::test]
async fn a_stale_owner_can_neither_trim_nor_restart_the_stream() {
    let (valkey, old) = shared_tier().await;
    let new = WarmTier::connect(config(valkey.primary_url(), valkey.key_prefix())).await.unwrap();
    let t = topic("owned-trim");
    old.claim_owner(&t, A).await.unwrap();
    old.append(&t, batch(0, 3, "old")).await.unwrap();
    old.append(&t, batch(3, 3, "old")).await.unwrap();
    let second = new.claim_owner(&t, B).await.unwrap();
    new.append(&t, batch(6, 2, "new")).await.unwrap();

    let err = old.trim_before(&t, 6).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{}", err.report());
    assert!(err.to_string().contains(&format!("owned by epoch {second}")), "{err}");
    // Past everything the stream holds: as a zombie whose pending batch lies beyond the
    // new owner's end would restart it.
    let err = old.restart_at(&t, 20).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{}", err.report());
    assert_eq!(new.range(&t).await.unwrap(), OffsetRange::new(0, 8), "nothing removed");
    new.append(&t, batch(8, 1, "new")).await.expect("the next key still names the new owner's end");

    // The owner's own trim keeps the batch holding the offset, as without epochs.
    assert_eq!(new.trim_before(&t, 4).await.unwrap(), 1);
    assert_eq!(new.range(&t).await.unwrap(), OffsetRange::new(3, 9));
    // A restart below the stream's end is refused by the next key, inside the script too.
    let fresh = WarmTier::connect(config(valkey.primary_url(), valkey.key_prefix())).await.unwrap();
    let third = fresh.claim_owner(&t, A).await.unwrap();
    assert_eq!(third, second + 1);
    let err = fresh.restart_at(&t, 9).await;
    assert!(err.is_ok(), "at the stream's end: {err:?}");
    assert_eq!(fresh.range(&t).await.unwrap(), OffsetRange::empty_at(9));
    fresh.append(&t, batch(9, 1, "fresh")).await.unwrap();
    assert_eq!(fresh.range(&t).await.unwrap(), OffsetRange::new(9, 10));
}

/// A claim whose `WAIT` falls short (more replicas asked for than the server has) is
/// `Unavailable`, yet the `INCR` applied on the primary: the tier holds the epoch, and a
/// writer that claimed before it is fenced all the same.
#[tokio::test]
async fn a_claim_the_replicas_did_not_confirm_still_holds_on_the_primary() {
    let (valkey, old) = shared_tier().await;
    let mut short = config(valkey.primary_url(), valkey.key_prefix());
    short.wait_replicas = 2;
    short.wait_timeout = std::time::Duration::from_millis(50);
    // Opening checks the replica count; the claim's WAIT is what falls short here.
    let new = match WarmTier::connect(short).await {
        Ok(tier) => tier,
        Err(e) => panic!("connect: {}", e.report()),
    };
    let t = topic("owned-short");
    let first = old.claim_owner(&t, A).await.unwrap();
    old.append(&t, batch(0, 2, "old")).await.unwrap();
    let err = new.claim_owner(&t, B).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{}", err.report());
    assert_eq!(new.owner_epoch(&t), Some(first + 1), "the epoch the primary gave");
    let err = old.append(&t, batch(2, 1, "zombie")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{}", err.report());
}

/// Each claim records its claimer with its epoch: node A claims, B claims, A claims twice
/// more (as when an answer was lost), B once more. The claimers of the epochs between two
/// of A's claims read back by epoch — what a node asks to tell its own lost claims from
/// another node's — and an epoch without a record is absent: one a plain `INCR` made,
/// as a server refusing the script does, and one never claimed.
#[tokio::test]
async fn a_claim_records_its_claimer_and_the_claimers_of_skipped_epochs_read_back() {
    let (valkey, a) = shared_tier().await;
    let b = WarmTier::connect(config(valkey.primary_url(), valkey.key_prefix())).await.unwrap();
    let t = topic("claimers");
    let first = a.claim_owner(&t, A).await.unwrap();
    let second = b.claim_owner(&t, B).await.unwrap();
    let third = a.claim_owner(&t, A).await.unwrap();
    let fourth = a.claim_owner(&t, A).await.unwrap();
    assert_eq!([second, third, fourth], [first + 1, first + 2, first + 3], "one epoch per claim");

    assert_eq!(
        a.claimers(&t, first + 1..fourth).await.unwrap(),
        BTreeMap::from([(second, B), (third, A)]),
        "the epochs A's claim of {fourth} skipped since its claim of {first}"
    );
    assert_eq!(b.claimers(&t, first..fourth + 1).await.unwrap().len(), 4, "any client reads them");
    assert_eq!(a.claimers(&t, fourth..fourth).await.unwrap(), BTreeMap::new(), "no epoch asked");

    // The record lives beside the owner key, in the stream's hash slot.
    assert_eq!(a.claimers_key(&t), format!("{}:claimers", a.stream_key(&t)));
    let raw = raw_client(valkey.primary_url()).await;
    let held: Option<String> = raw.get(a.owner_key(&t)).await.unwrap();
    assert_eq!(held, Some(fourth.to_string()));

    // An epoch claimed by a plain `INCR` (a server that refuses scripts) has no claimer.
    let plain: u64 = raw.incr(a.owner_key(&t)).await.unwrap();
    let fifth = b.claim_owner(&t, B).await.unwrap();
    assert_eq!(fifth, plain + 1);
    assert_eq!(
        a.claimers(&t, fourth..fifth + 2).await.unwrap(),
        BTreeMap::from([(fourth, A), (fifth, B)]),
        "the epoch of the plain INCR and the one not yet claimed are absent"
    );
}
