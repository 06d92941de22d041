//! Entries the server loses behind the tier's back: a failover to a
//! lagging replica or a restart without persistence. The tier's cached range must not
//! outlive them: the identical retry of a lost batch adds it again instead of being
//! answered `Fenced` forever, and `range` comes back to what the server holds.
// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]
// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use crate::common;

use std::time::{Duration, Instant};

use common::{batch, config, raw_client, shared_tier, topic};
use fred::prelude::{Client, KeysInterface, StreamsInterface};
use tier_core::{ErrorKind, OffsetRange, ReadLimit, RecordBatch, Tier, TierError, TierExt, TopicName};
use tier_testkit::servers::ValkeyPair;
use tier_warm::WarmTier;

/// Leaves `t`'s keys as a replica that never received the writes after `kept` would
/// hold them: the stream with only `kept`, the last generated ID `kept`'s (so Valkey
/// accepts the lost IDs again, as the promoted replica would), and the next key written
/// with the last of `kept` (none when `kept` is empty: the replica never had the topic).
async fn lose_entries_after(raw: &Client, tier: &WarmTier, t: &TopicName, kept: &[RecordBatch]) {
    let (key, next_key) = (tier.stream_key(t), tier.next_key(t));
    let _: i64 = raw.del(vec![key.as_str(), next_key.as_str()]).await.unwrap();
    for b in kept {
        let id = format!("{}-1", b.base_offset());
        let _: String =
            raw.xadd(key.as_str(), false, None::<()>, id.as_str(), vec![("b", b.to_bytes())]).await.unwrap();
    }
    if let Some(last) = kept.last() {
        let _: () =
            raw.set(next_key.as_str(), last.end_offset().to_string(), None, None, false).await.unwrap();
    }
}

/// Retries `op` until it succeeds or `limit` passes, returning the last error then.
async fn eventually<T, F, Fut>(limit: Duration, mut op: F) -> Result<T, TierError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, TierError>>,
{
    let deadline = Instant::now() + limit;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

async fn offsets_and_payloads(tier: &WarmTier, t: &TopicName) -> Vec<(u64, String)> {
    let records = tier.read(t, 0, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    records.iter().map(|r| (r.offset, String::from_utf8_lossy(&r.payload).into_owned())).collect()
}

fn expected(parts: &[(u64, u64, &str)]) -> Vec<(u64, String)> {
    parts
        .iter()
        .flat_map(|&(base, count, tag)| (base..base + count).map(move |o| (o, format!("{tag}-{o}"))))
        .collect()
}

#[tokio::test]
async fn the_identical_retry_of_a_lost_batch_adds_it_again() {
    let (valkey, tier) = shared_tier().await;
    let raw = raw_client(valkey.primary_url()).await;
    let t = topic("lost-retry");
    let key = tier.stream_key(&t);
    let (a, b) = (batch(0, 3, "a"), batch(3, 2, "b"));
    tier.append(&t, a.clone()).await.unwrap();
    tier.append(&t, b.clone()).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 5));

    // Failover to a replica that had only `a`.
    lose_entries_after(&raw, &tier, &t, std::slice::from_ref(&a)).await;

    // The router retries `b` (its first append's answer was lost): it lands again.
    tier.append(&t, b.clone()).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 5));
    assert_eq!(offsets_and_payloads(&tier, &t).await, expected(&[(0, 3, "a"), (3, 2, "b")]));
    let len: u64 = raw.xlen(key.as_str()).await.unwrap();
    assert_eq!(len, 2, "one entry per batch");

    // Real conflicts are still fenced: a different batch at a held offset.
    let err = tier.append(&t, batch(3, 2, "other")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{err}");
    // And the tier goes on from the end.
    tier.append(&t, batch(5, 1, "c")).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 6));
}

/// A stream the server lost with its next key (a failover to a replica that never had
/// the topic) is not taken for a new topic by a tier that saw the key: it refuses a batch
/// past the offsets it lost and takes the log again from 0. A tier that never saw the
/// topic (a new process) cannot tell, and takes over at any offset (tier invariant 3);
/// the router's recovery compares it with the WAL.
#[tokio::test]
async fn a_stream_the_server_lost_entirely_takes_no_batch_past_what_it_lost() {
    let (valkey, tier) = shared_tier().await;
    let raw = raw_client(valkey.primary_url()).await;
    let t = topic("lost-all");
    let a = batch(0, 3, "a");
    tier.append(&t, a.clone()).await.unwrap();
    let b = batch(3, 2, "b");
    tier.append(&t, b.clone()).await.unwrap();

    lose_entries_after(&raw, &tier, &t, &[]).await;

    let err = tier.append(&t, b.clone()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{}", err.report());
    assert!(err.to_string().contains("the next batch must start at 0"), "{err}");
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::empty_at(0), "range says what it holds");
    tier.append(&t, a).await.unwrap();
    tier.append(&t, b.clone()).await.unwrap();
    assert_eq!(offsets_and_payloads(&tier, &t).await, expected(&[(0, 3, "a"), (3, 2, "b")]));

    lose_entries_after(&raw, &tier, &t, &[]).await;
    let fresh = WarmTier::connect(config(valkey.primary_url(), valkey.key_prefix())).await.unwrap();
    fresh.append(&t, b).await.unwrap();
    assert_eq!(fresh.range(&t).await.unwrap(), OffsetRange::new(3, 5));
    let records = fresh.read(&t, 3, u64::MAX, ReadLimit::unbounded()).await.unwrap();
    assert_eq!(records.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![3, 4]);
}

/// A stream a failover emptied — its batches were its only entries after a restart —
/// keeps the next key the replica had: it refuses a batch past the batches it lost, where
/// the stream alone (empty, its last ID below) would have taken it.
#[tokio::test]
async fn an_emptied_stream_takes_no_batch_past_the_batches_it_lost() {
    let (valkey, tier) = shared_tier().await;
    let raw = raw_client(valkey.primary_url()).await;
    let t = topic("emptied");
    tier.append(&t, batch(0, 3, "a")).await.unwrap();
    tier.restart_at(&t, 10).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::empty_at(10));
    let err = tier.append(&t, batch(12, 1, "past")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "a restarted stream takes its next batch at 10 only");
    let (b, c) = (batch(10, 2, "b"), batch(12, 2, "c"));
    tier.append(&t, b).await.unwrap();

    // The replica promoted had `a` and the restart (the stream emptied, its last ID
    // `a`'s; the next key 10), not `b`.
    lose_entries_after(&raw, &tier, &t, &[batch(0, 3, "a")]).await;
    let key = tier.stream_key(&t);
    let _: u64 = raw.xtrim(key.as_str(), ("MINID", "=", "10-1")).await.unwrap();
    let _: () = raw.set(tier.next_key(&t).as_str(), "10", None, None, false).await.unwrap();

    let err = tier.append(&t, c).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{}", err.report());
    assert!(err.to_string().contains("the next batch must start at 10"), "{err}");
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::empty_at(10));
}

/// The scenario of the issue: XADD lands, WAIT falls short (the append fails), then the
/// primary loses the entry. `range` reports the loss and the retry succeeds once the
/// replica is back.
#[tokio::test]
async fn after_a_short_wait_and_a_lost_entry_range_tells_the_truth_and_the_retry_lands() {
    let mut pair = ValkeyPair::start().await.expect("a Valkey primary and replica");
    eprintln!("running against {}", pair.server_kind());
    let tier = WarmTier::connect(config(&pair.primary_url(), "lost:")).await.unwrap();
    let raw = raw_client(&pair.primary_url()).await;
    let t = topic("short-wait");
    let a = batch(0, 3, "a");
    tier.append(&t, a.clone()).await.unwrap();

    pair.stop_replica().await;
    let b = batch(3, 2, "b");
    let err = tier.append(&t, b.clone()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    assert!(err.to_string().contains("only 0 of 1 replicas acknowledged"), "{err}");

    // The primary loses it: the replica it fails over to never had it.
    lose_entries_after(&raw, &tier, &t, std::slice::from_ref(&a)).await;
    // The failed append left the cached range unknown: range asks the server.
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 3), "range reports the loss");

    pair.start_replica().await.expect("replica restarts");
    eventually(Duration::from_secs(15), || tier.append(&t, b.clone())).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 5));
    assert_eq!(offsets_and_payloads(&tier, &t).await, expected(&[(0, 3, "a"), (3, 2, "b")]));
}

/// A primary restarted without persistence: the tier's connection drops and comes back,
/// and from then on `range` reports the empty stream instead of the cached range.
#[tokio::test]
async fn after_a_reconnection_range_reports_what_the_restarted_server_holds() {
    let mut pair = ValkeyPair::start().await.expect("a Valkey primary and replica");
    eprintln!("running against {}", pair.server_kind());
    let tier = WarmTier::connect(config(&pair.primary_url(), "lost:")).await.unwrap();
    let t = topic("restart");
    tier.append(&t, batch(0, 3, "a")).await.unwrap();
    tier.append(&t, batch(3, 2, "b")).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 5));

    pair.restart_primary().await.expect("primary restarts");
    // The client notices the dropped connection and reconnects by itself; once it has,
    // the cached range is dropped. Poll until then (bounded).
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut last = None;
    while Instant::now() < deadline {
        match tier.range(&t).await {
            Ok(r) if r == OffsetRange::empty_at(0) => {
                last = Some(r);
                break;
            }
            other => last = other.ok(),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(last, Some(OffsetRange::empty_at(0)), "range after the restart");

    // The re-appended log starts where the router resumes it.
    tier.append(&t, batch(0, 3, "a")).await.unwrap();
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 3));
}
