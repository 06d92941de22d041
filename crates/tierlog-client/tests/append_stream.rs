//! Append streams (`Client::append_stream`) against `tierlog-server` serving a store in
//! this process: order, refusals that do not end the stream, the drain's close frame, and
//! a connection cut under a batch (through a TCP relay this test cuts).

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use common::serve;
use futures::StreamExt;
use tier_router::{StoreConfig, TieredStore};
use tierlog_client::{Client, Error, ErrorKind, Record, SERVER_CLOCK, Start};
use tierlog_server::{ServerConfig, Token};

/// Longest wait for what must happen (a hang detector, not synchronisation).
const WAIT: Duration = Duration::from_secs(30);

fn records(tag: &str, n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| Record {
            offset: 0,
            timestamp: SERVER_CLOCK,
            key: Some(Bytes::from(tag.to_owned())),
            headers: Vec::new(),
            payload: Bytes::from(format!("{tag}-{i}")),
        })
        .collect()
}

#[tokio::test]
async fn a_stream_answers_each_batch_with_its_offsets_in_the_order_they_were_sent() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = TieredStore::open(StoreConfig::hot_only(dir.path().join("wal"))).await.expect("store");
    let config = ServerConfig {
        tokens: vec![Token::new("t0ken")],
        max_body_bytes: Some(64 << 10),
        ..ServerConfig::default()
    };
    let (url, shutdown, serving) = serve(&store, &config).await;

    let anonymous = Client::new(&url).expect("client");
    let refused = anonymous.append_stream("s").await.expect_err("no token");
    assert_eq!(refused.kind(), Some(ErrorKind::Unauthorized));
    let client = Client::builder(&url).token("t0ken").build().expect("client");
    let bad = client.append_stream("no/such").await.expect_err("a bad topic name");
    assert_eq!(bad.kind(), Some(ErrorKind::InvalidInput), "{bad}");
    assert!(client.topics().await.expect("topics").is_empty(), "opening a stream creates no topic");

    // Eight tasks share one stream, each appending 40 batches one after another: a task's
    // batches are answered in its order, and together they tile the offsets.
    let stream = client.append_stream("s").await.expect("stream");
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let stream = stream.clone();
            tokio::spawn(async move {
                let mut answers = Vec::new();
                for b in 0..40 {
                    let tag = format!("t{t}b{b}");
                    let answer = stream.append(&records(&tag, 1 + (t + b) % 5)).await.expect("append");
                    answers.push((answer.start, answer.end, tag));
                }
                answers
            })
        })
        .collect();
    let mut by_offset = BTreeMap::new();
    for task in tasks {
        let answers = tokio::time::timeout(WAIT, task).await.expect("in time").expect("join");
        assert!(answers.windows(2).all(|w| w[0].1 <= w[1].0), "a task's batches in its order: {answers:?}");
        for (start, end, tag) in answers {
            by_offset.insert(start, (end, tag));
        }
    }
    let mut next = 0;
    for (&start, (end, _)) in &by_offset {
        assert_eq!(start, next, "the batches tile the offsets");
        next = *end;
    }

    // Refusals answer their batch and the stream goes on: an empty batch, one over the
    // body limit.
    let empty = stream.append(&[]).await.expect_err("no records");
    assert_eq!(empty.kind(), Some(ErrorKind::InvalidInput), "{empty}");
    let mut big = records("big", 1);
    big[0].payload = Bytes::from(vec![b'x'; 70 << 10]);
    let too_large = stream.append(&big).await.expect_err("over the limit");
    assert_eq!(too_large.kind(), Some(ErrorKind::TooLarge), "{too_large}");
    let after = stream.append(&records("after", 2)).await.expect("the stream goes on");
    assert_eq!((after.start, after.end), (next, next + 2), "refused batches took no offsets");

    // Every record is where its batch was answered.
    let read = client.read_with("s", Start::Earliest, false, None).await.expect("read");
    let got: Vec<_> = read.map(|r| r.expect("a record")).collect().await;
    assert_eq!(got.len() as u64, next + 2);
    for (&start, (end, tag)) in &by_offset {
        for offset in start..*end {
            let r = &got[offset as usize];
            let i = offset - start;
            assert_eq!((r.offset, &r.payload[..]), (offset, format!("{tag}-{i}").as_bytes()));
        }
    }

    // A request to the endpoint that does not ask for the upgrade is told how.
    let plain = reqwest::Client::new()
        .post(format!("{url}/v1/topics/s/append-stream"))
        .bearer_auth("t0ken")
        .send()
        .await
        .expect("answer");
    assert_eq!(plain.status(), 400);
    assert!(plain.text().await.expect("body").contains("Upgrade: tierlog-append/1"));

    drop(stream);
    shutdown.shutdown();
    tokio::time::timeout(WAIT, serving).await.expect("in time").expect("join").expect("drained");
    store.close().await;
}

/// The drain ends a stream with a close frame after answering every batch it took: the
/// batches it answered are stored, the others were not appended (`closed`), and an append
/// on the ended stream is not sent. The store holds exactly the batches answered.
#[tokio::test]
async fn a_draining_server_answers_what_it_took_and_appended_nothing_else() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = StoreConfig::hot_only(dir.path().join("wal"));
    let store = TieredStore::open(config.clone()).await.expect("store");
    let (url, shutdown, serving) = serve(&store, &ServerConfig::default()).await;
    let client = Client::new(&url).expect("client");
    let stream = client.append_stream("d").await.expect("stream");
    stream.append(&records("first", 3)).await.expect("append");

    // Producers keep appending while the server drains.
    let producers: Vec<_> = (0..4)
        .map(|t| {
            let stream = stream.clone();
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                for b in 0.. {
                    let tag = format!("p{t}b{b}");
                    match stream.append(&records(&tag, 10)).await {
                        Ok(answer) => outcomes.push((answer.start, answer.end, tag)),
                        Err(e) => return (outcomes, e),
                    }
                }
                unreachable!("the drain ends every producer")
            })
        })
        .collect();
    // Let the producers get going, then drain.
    let watch = client.clone();
    tokio::time::timeout(WAIT, async {
        while watch.topic("d").await.map_or(0, |t| t.committed) < 200 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the producers append");
    shutdown.shutdown();
    let mut acknowledged = vec![(0, 3, "first".to_owned())];
    for producer in producers {
        let (outcomes, error) = tokio::time::timeout(WAIT, producer).await.expect("in time").expect("join");
        match &error {
            Error::Api { error, .. } => assert_eq!(error.kind(), ErrorKind::Closed, "{error}"),
            other => panic!("the drain's close frame, not {other:?}"),
        }
        acknowledged.extend(outcomes);
    }
    let late = stream.append(&records("late", 1)).await.expect_err("the stream has ended");
    assert_eq!(late.kind(), Some(ErrorKind::Closed), "{late}");
    tokio::time::timeout(WAIT, serving).await.expect("in time").expect("join").expect("drained");
    store.close().await;

    // Reopened: exactly the batches answered, each at its offsets.
    acknowledged.sort();
    let store = TieredStore::open(config).await.expect("store");
    let topic = store.topic("d").await.expect("topic");
    let end = acknowledged.last().expect("batches").1;
    assert_eq!(topic.high_watermark(), end, "nothing but the answered batches was appended");
    let mut reader = topic.reader(tier_router::StartPosition::Earliest).await.expect("reader");
    let mut next = 0;
    for (start, end, tag) in &acknowledged {
        assert_eq!(*start, next, "the answered batches tile the offsets");
        for i in 0..end - start {
            let r = reader.next().await.expect("a record").expect("a record");
            assert_eq!((r.offset, &r.payload[..]), (start + i, format!("{tag}-{i}").as_bytes()));
        }
        next = *end;
    }
    store.close().await;
}

/// A connection cut while the server holds a batch: the caller is told the batch may have
/// been appended (and it was, once the WAL went on); a batch after the cut is not sent.
#[tokio::test]
async fn a_connection_cut_under_a_batch_leaves_its_outcome_unknown() {
    use tier_hot::faults::{self, FaultPoint};
    use tier_router::{FsyncPolicy, HotConfig};

    let dir = tempfile::tempdir().expect("a temporary directory");
    let wal = dir.path().join("wal");
    let config = StoreConfig::default().with_hot(HotConfig::new(&wal).with_fsync(FsyncPolicy::Always));
    let store = TieredStore::open(config).await.expect("store");
    let (url, shutdown, serving) = serve(&store, &ServerConfig::default()).await;
    let relay = Relay::start(&url).await;
    let client = Client::new(&relay.url).expect("client");
    let stream = client.append_stream("c").await.expect("stream");
    stream.append(&records("first", 2)).await.expect("append");

    faults::hold(&wal, FaultPoint::Fsync);
    let held = tokio::spawn({
        let stream = stream.clone();
        async move { stream.append(&records("held", 3)).await }
    });
    let w = wal.clone();
    tokio::time::timeout(WAIT, tokio::task::spawn_blocking(move || faults::wait_held(&w, FaultPoint::Fsync)))
        .await
        .expect("the batch reaches the WAL's fsync")
        .expect("join");
    relay.cut();
    let cut = tokio::time::timeout(WAIT, held).await.expect("in time").expect("join").expect_err("cut");
    assert!(matches!(cut, Error::Stream { outcome_unknown: true, .. }), "{cut:?}");
    let unsent = stream.append(&records("unsent", 1)).await.expect_err("the stream is broken");
    assert!(matches!(unsent, Error::Stream { outcome_unknown: false, .. }), "{unsent:?}");
    faults::release(&wal, FaultPoint::Fsync);

    // The held batch was appended after all: "may have been appended" was the truth. (Its
    // fsync finishes on the WAL's thread after the release: follow until it is there.)
    let direct = Client::new(&url).expect("client");
    let read = direct.read_with("c", Start::Earliest, true, None).await.expect("read");
    let got: Vec<_> =
        tokio::time::timeout(WAIT, read.map(|r| r.expect("a record").payload).take(5).collect())
            .await
            .expect("the held batch is committed in time");
    assert_eq!(got, ["first-0", "first-1", "held-0", "held-1", "held-2"].map(|p| Bytes::from(p.to_owned())));
    // And nothing else: the batch sent after the cut was not.
    let read = direct.read_with("c", Start::Earliest, false, None).await.expect("read");
    let all: Vec<_> = read.map(|r| r.expect("a record").payload).collect().await;
    assert_eq!(all, got);
    shutdown.shutdown();
    tokio::time::timeout(WAIT, serving).await.expect("in time").expect("join").expect("drained");
    store.close().await;
}

/// A TCP relay from a free 127.0.0.1 port to a server; [`cut`](Self::cut) closes every
/// connection through it.
struct Relay {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    async fn start(server_url: &str) -> Self {
        let upstream = server_url.trim_start_matches("http://").to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let task = tokio::spawn(async move {
            let mut pairs = tokio::task::JoinSet::new();
            loop {
                let (mut inbound, _) = listener.accept().await.expect("accept");
                let mut outbound = tokio::net::TcpStream::connect(&upstream).await.expect("connect");
                pairs.spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
            }
        });
        Self { url, task }
    }

    /// Closes every connection through the relay (the tasks holding them are aborted,
    /// their sockets dropped).
    fn cut(&self) {
        self.task.abort();
    }
}
