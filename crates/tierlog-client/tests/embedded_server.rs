//! The client against `tierlog-server` serving a store in this process (the binary's
//! tests, `crates/tierlog/tests/serve`, run the real `tierlog serve`).

mod common;

use std::time::Duration;

use common::serve;
use futures::StreamExt;
use tier_router::{StoreConfig, TieredStore};
use tierlog_client::{Client, ErrorKind, NewRecordJson, Start, Tier};
use tierlog_server::{ServerConfig, Token};

#[tokio::test]
async fn append_follow_and_drain_against_an_embedded_server() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = TieredStore::open(StoreConfig::hot_only(dir.path().join("wal"))).await.expect("store");
    let config = ServerConfig { tokens: vec![Token::new("t0ken")], ..ServerConfig::default() };
    let (url, shutdown, serving) = serve(&store, &config).await;

    let anonymous = Client::new(&url).expect("client");
    let refused = anonymous.append("t", vec![NewRecordJson::new("x")]).await.expect_err("no token");
    assert_eq!(refused.kind(), Some(ErrorKind::Unauthorized));

    let client = Client::builder(&url).token("t0ken").build().expect("client");
    let missing = client.read("t", Start::Earliest).await.err().expect("no topic yet");
    assert_eq!(missing.kind(), Some(ErrorKind::NotFound));
    let first =
        client.append("t", vec![NewRecordJson::new("a"), NewRecordJson::new("b")]).await.expect("append");
    assert_eq!((first.start, first.end), (0, 2));
    let mut follow = client.read("t", Start::Earliest).await.expect("follow");
    for (offset, payload) in [(0, "a"), (1, "b")] {
        let r = follow.next().await.expect("a record").expect("a record");
        assert_eq!((r.offset, &r.payload[..]), (offset, payload.as_bytes()));
    }
    client.append_lines("t", "c\n").await.expect("append");
    let r =
        tokio::time::timeout(Duration::from_secs(30), follow.next()).await.expect("in time").expect("item");
    assert_eq!(&r.expect("a record").payload[..], b"c");
    // A JSON read says which tier served each record: the WAL, all of it here.
    let served: Vec<_> = client
        .read_with_tiers("t", Start::Earliest, false, None)
        .await
        .expect("read")
        .map(|r| r.expect("a record"))
        .collect()
        .await;
    let got: Vec<_> = served.iter().map(|s| (s.record.offset, &s.record.payload[..], s.tier)).collect();
    assert_eq!(
        got,
        [(0, &b"a"[..], Some(Tier::Hot)), (1, b"b", Some(Tier::Hot)), (2, b"c", Some(Tier::Hot))]
    );
    let topics = client.topics().await.expect("topics");
    assert_eq!((topics.len(), topics[0].committed, topics[0].cold), (1, 3, None));
    let verify = client.verify("t").await.expect("verify");
    assert_eq!((verify.records, verify.problems.len()), (3, 0));
    let no_cold = client.export("t").await.expect_err("hot only: nothing to export to");
    assert_eq!(no_cold.kind(), Some(ErrorKind::InvalidInput));
    // A resume is for a topic whose end is unknown; without a token it is not even asked.
    let known = client.resume("t", 10).await.expect_err("its end is known");
    assert_eq!(known.kind(), Some(ErrorKind::InvalidInput));
    assert!(known.to_string().contains("needs no resume"), "{known}");
    let anonymous_resume = anonymous.resume("t", 10).await.expect_err("no token");
    assert_eq!(anonymous_resume.kind(), Some(ErrorKind::Unauthorized));

    shutdown.shutdown();
    let end = tokio::time::timeout(Duration::from_secs(30), follow.next()).await.expect("in time");
    assert_eq!(end.expect("the drain's error item").expect_err("closed").kind(), Some(ErrorKind::Closed));
    serving.await.expect("join").expect("the server drained");
    store.close().await;
}

#[tokio::test]
async fn a_follow_reconnects_while_the_server_is_away_and_gives_up_in_time() {
    use tierlog_client::{Error, FollowEvent, Reconnect};

    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = TieredStore::open(StoreConfig::hot_only(dir.path().join("wal"))).await.expect("store");
    let (url, shutdown, serving) = serve(&store, &ServerConfig::default()).await;
    let client = Client::new(&url).expect("client");
    client.append("t", vec![NewRecordJson::new("a")]).await.expect("append");

    let reconnect = Reconnect {
        first_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        give_up_after: Duration::from_millis(300),
    };
    let missing = client.follow("ghost", Start::Earliest, None, false, reconnect).await.err();
    assert_eq!(missing.and_then(|e| e.kind()), Some(ErrorKind::NotFound), "not retried");
    let mut follow = client.follow("t", Start::Earliest, None, true, reconnect).await.expect("follow");
    match next(&mut follow).await {
        Some(Ok(FollowEvent::Record(r))) => assert_eq!((r.record.offset, r.tier), (0, Some(Tier::Hot))),
        other => panic!("the first record, not {other:?}"),
    }
    // The drain ends the read: the follow says so and reconnects; the server never comes
    // back, so it gives up after `give_up_after`.
    shutdown.shutdown();
    serving.await.expect("join").expect("the server drained");
    match next(&mut follow).await {
        Some(Ok(FollowEvent::Disconnected { error, next, .. })) => {
            assert_eq!((error.kind(), next), (Some(ErrorKind::Closed), 1));
        }
        other => panic!("the drain's disconnection, not {other:?}"),
    }
    match next(&mut follow).await {
        Some(Err(Error::GaveUp { waited, source })) => {
            assert!(waited >= reconnect.give_up_after, "{waited:?}");
            assert!(matches!(*source, Error::Http(_)), "connection refused: {source:?}");
        }
        other => panic!("giving up, not {other:?}"),
    }
    assert!(next(&mut follow).await.is_none(), "the follow ends after giving up");
    store.close().await;
}

/// An append refused with its outcome unknown carries, in the error the client gets, the
/// offsets its records may still be committed at (here the WAL wrote them but its fsync
/// failed: the WAL cuts them off, yet a crash before the cut is durable may leave what of
/// them reached the disk, so appending them again may store them twice); a refusal after
/// which nothing of the append lasts carries none.
#[tokio::test]
async fn a_refused_append_says_where_its_records_may_still_be_committed() {
    use tier_hot::faults::{self, FaultPoint};
    use tier_router::{FsyncPolicy, HotConfig};

    let dir = tempfile::tempdir().expect("a temporary directory");
    let wal = dir.path().join("wal");
    let config = StoreConfig::default().with_hot(HotConfig::new(&wal).with_fsync(FsyncPolicy::Always));
    let store = TieredStore::open(config.clone()).await.expect("store");
    let (url, shutdown, serving) = serve(&store, &ServerConfig::default()).await;
    let client = Client::new(&url).expect("client");
    let records =
        |tag: &str, n: usize| (0..n).map(|i| NewRecordJson::new(format!("{tag}-{i}").as_str())).collect();
    client.append("t", records("first", 2)).await.expect("append");

    faults::fail_nth(&wal, FaultPoint::Fsync, 1, std::io::ErrorKind::Other);
    let unknown = client.append("t", records("unsynced", 3)).await.expect_err("the fsync failed");
    assert_eq!(unknown.kind(), Some(ErrorKind::Unavailable), "{unknown}");
    assert_eq!(unknown.may_commit(), Some(tierlog_client::RangeJson { start: 2, end: 5 }), "{unknown}");
    // The WAL refuses every append until the store reopens; those store nothing.
    let refused = client.append("t", records("refused", 1)).await.expect_err("the WAL is failing");
    faults::clear(&wal);
    assert_eq!(refused.may_commit(), None, "{refused}");

    shutdown.shutdown();
    serving.await.expect("join").expect("the server drained");
    store.close().await;
    // Reopened in the same boot, the store does not serve them (the WAL cut them off when
    // the fsync failed, see docs/hot.md "Failed fsyncs"): the next records take the offsets.
    let store = TieredStore::open(config).await.expect("store");
    let topic = store.topic("t").await.expect("topic");
    let next = topic.append(vec![tier_router::NewRecord::new(0, "next")]).await.expect("append");
    assert_eq!((next.start, next.end), (2, 3));
    let reader = topic.reader(tier_router::StartPosition::Offset(2)).await.expect("reader");
    let payloads: Vec<_> = reader.take(1).map(|r| r.expect("a record").payload).collect().await;
    assert_eq!(payloads, [bytes::Bytes::from_static(b"next")]);
    store.close().await;
}

/// The next item of `follow`, within 30 s.
async fn next(
    follow: &mut tierlog_client::FollowStream,
) -> Option<Result<tierlog_client::FollowEvent, tierlog_client::Error>> {
    tokio::time::timeout(Duration::from_secs(30), follow.next()).await.expect("in time")
}
