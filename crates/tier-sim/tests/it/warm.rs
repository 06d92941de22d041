//! The warm stand-in's connections and replication, against the protocol tier-warm
//! follows: a `WAIT` counts the replica acknowledgements of its own connection's writes,
//! so an identical retry after a reconnect confirms a batch only through a write of its own
//! (`confirm_held`); `WAIT` alone there (the reverted protocol) confirms a batch the replica
//! never got, which a failover then takes away.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use bytes::Bytes;
use tier_core::{ErrorKind, Record, RecordBatch, Tier, TopicName};
use tier_sim::warm::SimWarm;

fn batch(base: u64, payload: &'static str) -> RecordBatch {
    let record = Record {
        offset: base,
        timestamp: 1,
        key: None,
        headers: Vec::new(),
        payload: Bytes::from_static(payload.as_bytes()),
    };
    RecordBatch::from_records(base, &[record]).unwrap()
}

fn topic() -> TopicName {
    TopicName::new("t").unwrap()
}

/// The replica's link is cut; a batch lands on the primary and its `WAIT` falls short; the
/// connection is reset. The identical retry on the fresh connection must not be
/// confirmed (its `SET` is a write the replica lacks); a failover then loses a batch
/// nobody was told was confirmed.
#[tokio::test]
async fn an_identical_retry_on_a_fresh_connection_confirms_nothing_the_replica_lacks() {
    let warm = SimWarm::new();
    let t = topic();
    warm.append(&t, batch(0, "a")).await.unwrap();
    warm.set_wait_short(true);
    let err = warm.append(&t, batch(1, "b")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(warm.landed(&t, 1).is_some(), "the entry is on the primary");
    warm.reconnect();
    let err = warm.append(&t, batch(1, "b")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "the retry's WAIT counts its own SET: {err}");
    assert!(warm.confirmed(&t, 1).is_none(), "never confirmed");
    assert_eq!(warm.fail_over(), vec![tier_core::OffsetRange::new(1, 2)]);
    assert!(warm.confirmed(&t, 0).is_some() && warm.holds(&t, 0).is_some(), "the confirmed batch survives");
}

/// The same with the reverted protocol (`WAIT` alone on the retry): the `WAIT` of a fresh
/// connection is met at once, the batch is confirmed, and the failover takes it away —
/// the bug the switch puts back, which the simulation must find.
#[tokio::test]
async fn wait_alone_on_a_fresh_connection_confirms_a_batch_the_replica_never_got() {
    let warm = SimWarm::new();
    warm.set_wait_alone(true);
    let t = topic();
    warm.set_wait_short(true);
    assert!(warm.append(&t, batch(0, "a")).await.is_err());
    // On the same connection the WAIT still counts the XADD: short.
    assert!(warm.append(&t, batch(0, "a")).await.is_err());
    warm.reconnect();
    warm.append(&t, batch(0, "a")).await.unwrap();
    assert!(warm.confirmed(&t, 0).is_some(), "confirmed by a WAIT that counted nothing");
    assert_eq!(warm.fail_over(), vec![tier_core::OffsetRange::new(0, 1)], "the replica never held it");
}

/// An answer lost after the server applied the pipeline: the caller gets `Unavailable`,
/// the entry is on the primary (and, with the link up, on the replica), and the identical
/// retry on the next connection is confirmed.
#[tokio::test]
async fn a_lost_answer_leaves_the_entry_and_its_retry_is_confirmed() {
    let warm = SimWarm::new();
    let t = topic();
    warm.set_answers_lost(Some(1));
    let err = warm.append(&t, batch(0, "a")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(warm.holds(&t, 0).is_some() && warm.confirmed(&t, 0).is_none());
    warm.set_answers_lost(None);
    warm.append(&t, batch(0, "a")).await.unwrap();
    assert!(warm.confirmed(&t, 0).is_some());
    assert!(warm.fail_over().is_empty(), "the replica held it");
}

/// A failover to a replica behind takes confirmed writes away and names them; a `WAIT`
/// that confirms them again (the batch re-appended) clears that.
#[tokio::test]
async fn a_failover_to_a_replica_behind_names_the_confirmed_records_it_took() {
    let warm = SimWarm::new();
    let t = topic();
    warm.append(&t, batch(0, "a")).await.unwrap();
    warm.append(&t, batch(1, "b")).await.unwrap();
    let (lost, confirmed) = warm.fail_over_behind(1, &t);
    assert_eq!(lost, vec![tier_core::OffsetRange::new(1, 2)]);
    assert_eq!(confirmed, vec![(1, Bytes::from_static(b"b"))]);
    assert!(warm.confirmed_copy_lost(&t, 1, b"b"));
    warm.append(&t, batch(1, "b")).await.unwrap();
    assert!(!warm.confirmed_copy_lost(&t, 1, b"b"), "confirmed again");
}
