//! `WarmBackend::append_group` on a real Valkey primary and replica: a group that
//! continues the stream is one `EVAL` (the script's `XADD`s) and one `WAIT`; a group that
//! starts with a retry, or meets a conflict, takes the one-batch-at-a-time path and answers
//! as `append` would.

// Helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used)]

use crate::common;

use common::{batch, config, raw_client, topic};
use fred::prelude::{Client, ClientLike, StreamsInterface};
use fred::types::{ClusterHash, CustomCommand, Value};
use tier_core::position::WarmBackend;
use tier_core::{ErrorKind, OffsetRange, RecordBatch, Tier};
use tier_testkit::servers::ValkeyPair;
use tier_warm::WarmTier;

/// Calls of `command` since the last `CONFIG RESETSTAT` (`INFO commandstats`).
async fn calls(raw: &Client, command: &str) -> u64 {
    let info: String = raw.info(Some(fred::types::InfoKind::CommandStats)).await.unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

/// `CONFIG RESETSTAT`: the command counts start again from 0.
async fn reset_stats(raw: &Client) {
    let cmd = CustomCommand::new("CONFIG", ClusterHash::Random, false);
    let _: Value = raw.custom(cmd, vec!["RESETSTAT"]).await.unwrap();
}

/// The IDs and batch bytes of stream `key`.
async fn entries(raw: &Client, key: &str) -> Vec<(String, Vec<u8>)> {
    let reply: Value = raw.xrange(key, "-", "+", None).await.unwrap();
    let Value::Array(items) = reply else { panic!("XRANGE answered {reply:?}") };
    items
        .into_iter()
        .map(|item| {
            let Value::Array(mut pair) = item else { panic!("entry {item:?}") };
            let fields = pair.pop().unwrap();
            let id = pair.pop().unwrap().as_string().unwrap();
            let Value::Array(mut fv) = fields else { panic!("fields {fields:?}") };
            let value = fv.pop().unwrap();
            (id, value.as_bytes().unwrap().to_vec())
        })
        .collect()
}

fn stored(batches: &[RecordBatch]) -> Vec<(String, Vec<u8>)> {
    batches.iter().map(|b| (format!("{}-1", b.base_offset()), b.to_bytes().to_vec())).collect()
}

#[tokio::test]
async fn a_group_is_one_script_and_one_wait_and_a_retry_or_conflict_answers_as_append() {
    let pair = ValkeyPair::start().await.expect("a Valkey primary and replica");
    let mut cfg = config(&pair.primary_url(), "group:");
    cfg.wait_replicas = 1;
    let tier = WarmTier::connect(cfg).await.unwrap();
    let raw = raw_client(&pair.primary_url()).await;
    let t = topic("grouped");
    let key = "group:grouped";

    // The first batch on its own: one XADD, and the tier knows the stream's end.
    let first = batch(0, 5, "a");
    tier.append(&t, first.clone()).await.unwrap();
    reset_stats(&raw).await;

    let group = vec![batch(5, 3, "b"), batch(8, 4, "c"), batch(12, 2, "d")];
    let (held, result) = WarmBackend::append_group(&tier, &t, group.clone()).await;
    result.unwrap();
    assert_eq!(held, 3);
    assert_eq!(calls(&raw, "eval").await, 1, "one script for the group");
    assert_eq!(calls(&raw, "xadd").await, 3, "the script's XADDs, one per batch");
    assert_eq!(calls(&raw, "wait").await, 1, "one WAIT for the group");
    let mut all = vec![first.clone()];
    all.extend(group.iter().cloned());
    assert_eq!(entries(&raw, key).await, stored(&all), "each batch its own entry, as encoded");
    assert_eq!(tier.range(&t).await.unwrap(), OffsetRange::new(0, 14));

    // An identical retry of the last two, then a new batch: every one held (the retried
    // ones resolved as identical, the new one added), as one append after the other.
    reset_stats(&raw).await;
    let next = batch(14, 3, "e");
    let retry = vec![group[1].clone(), group[2].clone(), next.clone()];
    let (held, result) = WarmBackend::append_group(&tier, &t, retry).await;
    result.unwrap();
    assert_eq!(held, 3);
    assert_eq!(calls(&raw, "eval").await, 1, "a group starting below the end takes append's path");
    assert_eq!(calls(&raw, "xadd").await, 1, "only the new batch is written (its own script)");
    all.push(next);
    assert_eq!(entries(&raw, key).await, stored(&all));

    // Another writer adds a different batch at the end behind the tier's back (leaving the
    // next key alone): the script's first XADD is refused, append's path finds the
    // different batch, and the group answers Fenced with nothing held.
    let intruder = batch(17, 2, "intruder");
    let _: String = raw.xadd(key, false, None::<()>, "17-1", vec![("b", intruder.to_bytes())]).await.unwrap();
    reset_stats(&raw).await;
    let mine = vec![batch(17, 2, "f"), batch(19, 2, "g")];
    let (held, result) = WarmBackend::append_group(&tier, &t, mine).await;
    assert_eq!(held, 0);
    assert_eq!(result.unwrap_err().kind(), ErrorKind::Fenced);
    assert_eq!(calls(&raw, "eval").await, 2, "the group's script, then append's, each stopped at its XADD");
    all.push(intruder);
    assert_eq!(entries(&raw, key).await, stored(&all), "nothing of the refused group is in the stream");
    tier.close().await;
}
