//! The client against `tierlog-server` serving a store in this process (the binary's
//! tests, `crates/tierlog/tests/serve`, run the real `tierlog serve`).

use std::time::Duration;

use futures::StreamExt;
use tier_router::{StoreConfig, TieredStore};
use tierlog_client::{Client, ErrorKind, NewRecordJson, Start, Tier};
use tierlog_server::{Server, ServerConfig, Token};

#[tokio::test]
async fn append_follow_and_drain_against_an_embedded_server() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = TieredStore::open(StoreConfig::hot_only(dir.path().join("wal"))).await.expect("store");
    let config = ServerConfig { tokens: vec![Token::new("t0ken")], ..ServerConfig::default() };
    let server = Server::new(store.clone(), &config, None).expect("server");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let shutdown = server.shutdown_handle();
    let serving = tokio::spawn(server.serve(listener));

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
    let server = Server::new(store.clone(), &ServerConfig::default(), None).expect("server");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let shutdown = server.shutdown_handle();
    let serving = tokio::spawn(server.serve(listener));
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

/// The next item of `follow`, within 30 s.
async fn next(
    follow: &mut tierlog_client::FollowStream,
) -> Option<Result<tierlog_client::FollowEvent, tierlog_client::Error>> {
    tokio::time::timeout(Duration::from_secs(30), follow.next()).await.expect("in time")
}
