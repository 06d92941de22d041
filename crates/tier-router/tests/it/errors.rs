//! What a caller can act on: a closed store answers `Closed` (never retryable) on every
//! path, and an error that crosses the writer keeps its cause's kind and the cause itself
//! as its source, printed once.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns
#![cfg(all(feature = "warm", feature = "cold"))]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{append_range, rec};
use futures::StreamExt;
use tier_core::{ErrorKind, RecordBatchBuilder, StartPosition, Tier, TierError, TopicName};
use tier_hot::{FsyncPolicy, HotConfig};
use tier_router::{TieredStore, Topic};
use tier_testkit::MemoryTier;

fn hot(dir: &tempfile::TempDir) -> HotConfig {
    HotConfig::new(dir.path().join("hot")).with_fsync(FsyncPolicy::Never)
}

async fn open(dir: &tempfile::TempDir, warm: Option<Arc<MemoryTier>>) -> (TieredStore, Topic) {
    let mut builder = TieredStore::builder().hot(hot(dir)).background(false);
    if let Some(warm) = warm {
        builder = builder.warm(warm);
    }
    let store = builder.open().await.unwrap();
    let topic = store.topic("t").await.unwrap();
    (store, topic)
}

/// `what` answered `Closed`, which no retry loop retries.
#[track_caller]
fn assert_closed<T>(what: &str, answer: Result<T, TierError>) {
    let Err(e) = answer else { panic!("{what}: succeeded after close") };
    assert!(!e.is_retryable(), "{what}: {e} is retryable");
    assert_eq!(e.kind(), ErrorKind::Closed, "{what}: {e}");
    assert!(e.to_string().contains("closed"), "{what}: {e}");
}

/// After `close()`, every operation of the store and of a topic handle taken before it —
/// append, flush, reader and batch reader creation, `topic`, `recover_topic`,
/// `resume_topic`, `checkpoint` — answers `Closed`, and so do a record reader and a batch
/// reader that were waiting at the live tail.
#[tokio::test]
async fn after_close_every_operation_answers_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (store, topic) = open(&dir, None).await;
    append_range(&topic, 0, 5, 5).await;
    let mut records = topic.reader(StartPosition::Offset(0)).await.unwrap();
    let mut batches = topic.batch_reader(StartPosition::Offset(0)).await.unwrap();
    for _ in 0..5 {
        records.next().await.unwrap().unwrap();
    }
    assert_eq!(batches.next().await.unwrap().unwrap().batch.end_offset(), 5);
    // Both readers are at the commit point, waiting for records that will not come.
    let waiting_records = tokio::spawn(async move { records.next().await });
    let waiting_batches = tokio::spawn(async move { batches.next().await });

    store.close().await;

    let item = tokio::time::timeout(Duration::from_secs(20), waiting_records).await.unwrap().unwrap();
    assert_closed("a waiting record reader's next item", item.expect("an error, not the end"));
    let item = tokio::time::timeout(Duration::from_secs(20), waiting_batches).await.unwrap().unwrap();
    assert_closed("a waiting batch reader's next item", item.expect("an error, not the end"));

    assert_closed("append", topic.append(vec![rec(5)]).await);
    let mut builder = RecordBatchBuilder::new();
    builder.push(1, None, &[], b"x").unwrap();
    assert_closed("append_batch", topic.append_batch(builder).await);
    assert_closed("flush", topic.flush().await);
    assert_closed("reader", topic.reader(StartPosition::Offset(0)).await.map(drop));
    assert_closed("reader_with_source", topic.reader_with_source(StartPosition::Earliest).await.map(drop));
    assert_closed("batch_reader", topic.batch_reader(StartPosition::Offset(0)).await.map(drop));
    assert_closed("topic", store.topic("t").await);
    assert_closed("topic (a new one)", store.topic("other").await);
    assert_closed("recover_topic", store.recover_topic("t").await);
    assert_closed("resume_topic", store.resume_topic("t", 100).await);
    assert_closed("checkpoint", store.checkpoint().await);
}

/// After `abort()` (a crash, for tests), appends and new readers answer `Closed` as well.
#[tokio::test]
async fn after_abort_appends_and_readers_answer_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (store, topic) = open(&dir, None).await;
    append_range(&topic, 0, 3, 3).await;
    store.abort().await;
    assert_closed("append", topic.append(vec![rec(3)]).await);
    assert_closed("flush", topic.flush().await);
    assert_closed("reader", topic.reader(StartPosition::Offset(0)).await.map(drop));
    assert_closed("topic", store.topic("t").await);
}

/// Each cause in a report, in order, with how often its text appears.
fn report(e: &TierError) -> String {
    e.report().to_string()
}

/// An append warm refuses because another writer's batch already holds the offset keeps
/// warm's kind (`Fenced`: stop writing, not `Unavailable`: retry) and carries warm's error
/// as its source; the report (the error and its sources) says warm's reason once.
#[tokio::test]
async fn a_refused_append_keeps_the_kind_and_source_of_warms_failure() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(MemoryTier::new());
    let (store, topic) = open(&dir, Some(Arc::clone(&warm))).await;
    append_range(&topic, 0, 3, 3).await;
    // Another writer appends its own batch at offset 3 straight into warm.
    let name = TopicName::new("t").unwrap();
    let mut other = RecordBatchBuilder::new();
    other.push(7, None, &[], b"another writer").unwrap();
    warm.append(&name, other.build(3).unwrap()).await.unwrap();

    let err = topic.append(vec![rec(3)]).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Fenced, "{}", report(&err));
    assert!(!err.is_retryable());
    let source = std::error::Error::source(&err).expect("warm's error is the source");
    let warm_error = source.to_string();
    assert!(warm_error.contains("a different batch already holds offset 3"), "{warm_error}");
    let text = report(&err);
    assert_eq!(text.matches("a different batch already holds offset 3").count(), 1, "{text}");
    assert!(text.contains("not acknowledged"), "{text}");
    store.close().await;
}

/// Every message of `e`'s chain — its `Display`, then each `source()`'s — one per line:
/// what a report that walks the chain prints, without any de-duplication.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut lines = vec![e.to_string()];
    let mut cause = e.source();
    while let Some(c) = cause {
        lines.push(c.to_string());
        cause = c.source();
    }
    lines.join("\n")
}

/// A WAL that cannot create its data directory (a file is in the way) answers an error
/// whose message says what it was doing and whose source is the I/O error: the chain
/// names the I/O failure once (it appeared twice when the message also quoted it).
#[tokio::test]
async fn a_hot_tier_failure_names_its_io_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let in_the_way = dir.path().join("hot");
    std::fs::write(&in_the_way, b"not a directory").unwrap();
    let io = std::fs::create_dir_all(in_the_way.join("x")).unwrap_err().to_string();
    let err = TieredStore::builder()
        .hot(HotConfig::new(in_the_way.join("x")))
        .background(false)
        .open()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    let chain = chain(&err);
    assert_eq!(chain.matches(&io).count(), 1, "{io:?} once in:\n{chain}");
    assert!(chain.contains("creating the data directory"), "{chain}");
    assert_eq!(report(&err).matches(&io).count(), 1, "{}", report(&err));
}

/// A topic whose recovery failed answers `topic()` with the failure's kind and the kept
/// failure itself as its source (it was re-created from the message, without a source).
#[tokio::test]
async fn a_failed_recovery_answers_its_kind_with_the_kept_failure_as_source() {
    let dir = tempfile::tempdir().unwrap();
    let warm = Arc::new(MemoryTier::new());
    let (store, topic) = open(&dir, Some(Arc::clone(&warm))).await;
    append_range(&topic, 0, 3, 3).await;
    store.close().await;
    drop((store, topic));
    // The router's reservation file is damaged: recovery of "t" fails `Corruption`.
    let state = dir.path().join("router");
    let reservation = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("reserved"))
        .expect("a reservation file");
    std::fs::write(&reservation, b"not a number\n").unwrap();
    let store = TieredStore::builder().hot(hot(&dir)).warm(warm).background(false).open().await.unwrap();
    let err = store.topic("t").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption, "{}", report(&err));
    let kept = store.failed_topics();
    assert_eq!(kept.len(), 1);
    let source = std::error::Error::source(&err).expect("the kept failure is the source");
    assert_eq!(source.to_string(), kept[0].1.to_string());
    let chain = chain(&err);
    assert_eq!(chain.matches("invalid digit").count(), 1, "{chain}");
    store.close().await;
}

/// One way to name a topic: every method that names one takes `impl IntoTopicName` — a
/// string or a `TopicName` — and an invalid string is `InvalidInput` naming what is wrong,
/// wherever it is given (the builder's `topics` fails the open).
#[tokio::test]
async fn a_topic_is_named_the_same_way_everywhere_and_a_bad_name_is_invalid_input() {
    let dir = tempfile::tempdir().unwrap();
    let (store, topic) = open(&dir, None).await;
    append_range(&topic, 0, 10, 5).await;
    let name = TopicName::new("t").unwrap();
    let owned = String::from("t");
    assert_eq!(store.topic(&name).await.unwrap().name(), &name);
    assert_eq!(store.topic(owned.clone()).await.unwrap().name(), &name);
    assert_eq!(store.recover_topic(&owned).await.unwrap().topic, name);
    assert_eq!(store.wal().range("t").await.unwrap(), store.wal().range(&name).await.unwrap());
    store.wal().rotate("t").await.unwrap();
    assert_eq!(store.wal().sealed_segments("t"), store.wal().sealed_segments(&name));
    assert_eq!(store.wal().sealed_segments("t").len(), 1);

    let bad = "no/slashes";
    let errors = [
        store.topic(bad).await.map(|_| ()).unwrap_err(),
        store.recover_topic(bad).await.map(|_| ()).unwrap_err(),
        store.resume_topic(bad, 0).await.map(|_| ()).unwrap_err(),
        store.export_now(bad).await.map(|_| ()).unwrap_err(),
        store.wal().range(bad).await.map(|_| ()).unwrap_err(),
        store.wal().rotate(bad).await.map(|_| ()).unwrap_err(),
    ];
    for e in errors {
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().contains("invalid topic name \"no/slashes\""), "{e}");
    }
    assert!(store.wal().sealed_segments(bad).is_empty(), "no topic has an invalid name");
    store.close().await;

    let other = tempfile::tempdir().unwrap();
    let refused = TieredStore::builder()
        .hot(hot(&other))
        .topics(["fine", bad])
        .background(false)
        .open()
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidInput, "{refused}");
    assert!(!other.path().join("hot").exists(), "nothing was written");
}
