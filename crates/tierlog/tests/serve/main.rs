//! `tierlog serve` as a real process: the built binary on 127.0.0.1 port 0, driven by the
//! client crate and by raw HTTP requests (reqwest), stopped by its PID.

mod limits;
mod page;
mod reads;
mod remote;
mod security;
mod servers;
mod support;
mod verify;

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use support::{serve, serve_with_env, tree, workdir};
use tierlog_api::frame::{Decoder, Frame};
use tierlog_api::{ApiError, RecordJson};
use tierlog_client::{Client, Data, ErrorKind, HeaderJson, NewRecordJson, Record, SERVER_CLOCK, Start};

/// The longest any single awaited event may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// Every record of `topic` up to its commit point, read in the binary framing.
async fn read_all(client: &Client, topic: &str) -> Vec<Record> {
    let read = client.read_with(topic, Start::Earliest, false, None).await.expect("read");
    read.map(|r| r.expect("a record")).collect().await
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, f)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within {PATIENCE:?}"))
}

#[tokio::test]
async fn append_and_read_round_trip_in_every_format() {
    let dir = workdir();
    let server = serve(dir.path(), &[]);
    let client = Client::new(&server.url).expect("client");

    // JSON: text, a key, headers, a binary payload, an explicit timestamp.
    let json = client
        .append(
            "orders",
            vec![
                NewRecordJson::new("first"),
                NewRecordJson {
                    payload: Data::from_bytes(&[0, 159, 146, 150]),
                    key: Some(Data::from("k1")),
                    headers: vec![HeaderJson { name: "h".into(), value: "v".into() }],
                    timestamp: Some(1_700_000_000_000),
                },
            ],
        )
        .await
        .expect("JSON append");
    assert_eq!((json.start, json.end), (0, 2));
    // Lines: one record per line.
    let lines = client.append_lines("orders", "alpha\nbeta\r\ngamma\n").await.expect("line append");
    assert_eq!((lines.start, lines.end), (2, 5));
    // Binary framing.
    let binary = client
        .append_binary(
            "orders",
            &[Record {
                offset: 0,
                timestamp: SERVER_CLOCK,
                key: Some(Bytes::from_static(b"bk")),
                headers: vec![(Bytes::from_static(b"x"), Bytes::from_static(&[255]))],
                payload: Bytes::from_static(b"line\nbreak"),
            }],
        )
        .await
        .expect("binary append");
    assert_eq!((binary.start, binary.end), (5, 6));

    // Binary read (the client): every field as appended.
    let records = read_all(&client, "orders").await;
    let payloads: Vec<&[u8]> = records.iter().map(|r| &r.payload[..]).collect();
    assert_eq!(
        payloads,
        [&b"first"[..], &[0, 159, 146, 150], b"alpha", b"beta", b"gamma", b"line\nbreak"],
        "payloads in offset order"
    );
    assert_eq!(records.iter().map(|r| r.offset).collect::<Vec<_>>(), (0..6).collect::<Vec<_>>());
    assert_eq!(records[1].key.as_deref(), Some(&b"k1"[..]));
    assert_eq!(records[1].timestamp, 1_700_000_000_000);
    assert_eq!(records[1].headers, vec![(Bytes::from_static(b"h"), Bytes::from_static(b"v"))]);
    assert_eq!(records[5].key.as_deref(), Some(&b"bk"[..]));
    assert_eq!(records[5].headers, vec![(Bytes::from_static(b"x"), Bytes::from_static(&[255]))]);
    assert!(records[5].timestamp > 1_700_000_000_000, "the server's clock stamped it");

    // Raw HTTP: NDJSON, lines, binary.
    let http = reqwest::Client::new();
    let url = format!("{}/v1/topics/orders/records", server.url);
    let ndjson = http.get(format!("{url}?from=offset:1&limit=2")).send().await.expect("GET json");
    assert_eq!(ndjson.headers()["content-type"], "application/x-ndjson");
    let text = ndjson.text().await.expect("body");
    let got: Vec<RecordJson> =
        text.lines().map(|l| serde_json::from_str(l).expect("a JSON record")).collect();
    assert_eq!(got.len(), 2, "limit=2: {text}");
    assert_eq!(got[0].offset, 1);
    assert_eq!(got[0].payload, Data::Base64 { base64: "AJ+Slg==".into() });
    assert_eq!(got[0].key, Some(Data::from("k1")));
    assert_eq!(got[1].payload, Data::from("alpha"));

    let lines = http.get(format!("{url}?format=lines&from=2")).send().await.expect("GET lines");
    assert_eq!(lines.headers()["content-type"], "text/plain");
    assert_eq!(lines.text().await.expect("body"), "alpha\nbeta\ngamma\nline\nbreak\n");

    let raw = http.get(format!("{url}?format=binary&from=offset:4")).send().await.expect("GET binary");
    assert_eq!(raw.headers()["content-type"], "application/x-tierlog-batch");
    let body = raw.bytes().await.expect("body");
    assert_eq!(&body[..4], b"TLB\x01");
    let mut decoder = Decoder::new();
    decoder.push(&body);
    let mut offsets = Vec::new();
    while let Some(Frame::Record(r)) = decoder.next_frame().expect("valid framing") {
        offsets.push(r.offset);
    }
    decoder.finish().expect("the body ends between frames");
    assert_eq!(offsets, [4, 5]);

    // A read starting at the commit point without follow is empty, not waiting.
    let empty = http.get(format!("{url}?from=latest")).send().await.expect("GET latest");
    assert_eq!(empty.text().await.expect("body"), "");

    // The ranges and commit point.
    let topics = client.topics().await.expect("topics");
    assert_eq!(topics.len(), 1);
    assert_eq!((topics[0].topic.as_str(), topics[0].committed, topics[0].hot.end), ("orders", 6, 6));
    assert!(topics[0].cold.is_some(), "the embedded defaults have a cold tier");
    assert_eq!(client.topic("orders").await.expect("topic").committed, 6);
    let exported = client.export("orders").await.expect("export");
    assert_eq!(exported.cold, Some(tierlog_api::RangeJson { start: 0, end: 6 }), "{exported:?}");
    assert_eq!(client.topic("orders").await.expect("topic").export_lag, Some(0));

    assert!(server.terminate().success());
}

#[tokio::test]
async fn bad_requests_get_json_errors_with_their_status() {
    let dir = workdir();
    let server = serve(dir.path(), &[]);
    let http = reqwest::Client::new();
    let url = format!("{}/v1/topics/t/records", server.url);
    let cases: Vec<(reqwest::RequestBuilder, u16, ErrorKind)> = vec![
        (
            http.post(&url).header("content-type", "application/json").body("{\"records\": ["),
            400,
            ErrorKind::InvalidInput,
        ),
        (
            http.post(&url).header("content-type", "application/json").body("{\"records\": []}"),
            400,
            ErrorKind::InvalidInput,
        ),
        (
            http.post(&url).header("content-type", "application/x-tierlog-batch").body("TLB\x02"),
            400,
            ErrorKind::InvalidInput,
        ),
        (http.post(&url).header("content-type", "image/png").body("x"), 415, ErrorKind::UnsupportedMediaType),
        (
            http.post(format!("{}/v1/topics/bad%20name/records", server.url))
                .header("content-type", "text/plain")
                .body("x"),
            400,
            ErrorKind::InvalidInput,
        ),
        (http.get(format!("{url}?from=yesterday")), 400, ErrorKind::InvalidInput),
        (http.get(format!("{url}?format=xml")), 400, ErrorKind::InvalidInput),
        (http.get(format!("{}/v1/nothing", server.url)), 404, ErrorKind::NotFound),
    ];
    for (request, status, kind) in cases {
        let response = request.send().await.expect("request");
        assert_eq!(response.status().as_u16(), status);
        let body = response.text().await.expect("body");
        let error: ApiError =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{body:?} is not an error body: {e}"));
        assert_eq!(error.kind(), kind, "{body}");
    }
    assert!(!dir.path().join("data/hot/t").exists(), "no refused append created the topic");
    assert!(server.terminate().success());
}

#[tokio::test]
async fn an_oversized_append_is_413_and_writes_nothing() {
    let dir = workdir();
    let server = serve_with_env(dir.path(), &[], &[("TIERLOG_SERVER__MAX_BODY_BYTES", "1024")]);
    let http = reqwest::Client::new();
    let url = format!("{}/v1/topics/big/records", server.url);
    let response = http
        .post(&url)
        .header("content-type", "text/plain")
        .body("x".repeat(1025))
        .send()
        .await
        .expect("post");
    assert_eq!(response.status().as_u16(), 413);
    let error: ApiError = response.json().await.expect("an error body");
    assert_eq!(error.kind(), ErrorKind::TooLarge);
    assert!(error.error.message.contains("1024"), "{}", error.error.message);
    assert!(!dir.path().join("data/hot/big").exists(), "the refused append created nothing");
    let fits = http
        .post(&url)
        .header("content-type", "text/plain")
        .body("x".repeat(1024))
        .send()
        .await
        .expect("post");
    assert_eq!(fits.status().as_u16(), 200);
    assert!(server.terminate().success());
}

#[tokio::test]
async fn a_batch_over_the_largest_record_batch_is_refused_and_creates_no_topic() {
    let dir = workdir();
    // A body limit above the 64 MiB batch limit: the body is read, and the batch it
    // holds is what gets refused.
    let server = serve_with_env(dir.path(), &[], &[("TIERLOG_SERVER__MAX_BODY_BYTES", "104857600")]);
    let http = reqwest::Client::new();
    let line = format!("{}\n", "x".repeat((1 << 20) - 1));
    let response = http
        .post(format!("{}/v1/topics/oversized/records", server.url))
        .header("content-type", "text/plain")
        .body(line.repeat(65))
        .send()
        .await
        .expect("post");
    assert_eq!(response.status().as_u16(), 413);
    let error: ApiError = response.json().await.expect("an error body");
    assert_eq!(error.kind(), ErrorKind::TooLarge);
    let message = &error.error.message;
    assert!(message.contains("oversized") && message.contains("67108864 bytes"), "{message}");
    let stray: Vec<String> = tree(dir.path()).into_iter().filter(|p| p.contains("oversized")).collect();
    assert!(stray.is_empty(), "the refused append left files for the topic: {stray:?}");
    let client = Client::new(&server.url).expect("client");
    assert_eq!(client.topic("oversized").await.err().and_then(|e| e.kind()), Some(ErrorKind::NotFound));
    // The refusal is a failed append in the metrics, as the router counts its own.
    let metrics = http.get(format!("{}/metrics", server.url)).send().await.expect("metrics");
    let text = metrics.text().await.expect("metrics text");
    assert!(text.lines().any(|l| l == "tierlog_append_errors_total 1"), "{text}");
    assert!(server.terminate().success());
}

#[tokio::test]
async fn a_follow_receives_a_record_appended_after_it_started() {
    let dir = workdir();
    let server = serve(dir.path(), &[]);
    let client = Client::new(&server.url).expect("client");
    client.append("live", vec![NewRecordJson::new("before")]).await.expect("append");
    // The read resolves its start before answering: once `read` returns, it is at the
    // commit point (1), and the append below is after it.
    let mut follow = client.read("live", Start::Latest).await.expect("follow");
    let mut raw = reqwest::Client::new()
        .get(format!("{}/v1/topics/live/records?from=latest&follow=true", server.url))
        .send()
        .await
        .expect("raw follow")
        .bytes_stream();
    let appended = client.append("live", vec![NewRecordJson::new("after")]).await.expect("append");
    assert_eq!(appended.start, 1);
    let record =
        within("the followed record", follow.next()).await.expect("the stream goes on").expect("a record");
    assert_eq!((record.offset, &record.payload[..]), (1, &b"after"[..]));
    let chunk =
        within("the raw follow's chunk", raw.next()).await.expect("the body goes on").expect("a chunk");
    let line: RecordJson =
        serde_json::from_slice(chunk.strip_suffix(b"\n").expect("one line")).expect("JSON");
    assert_eq!((line.offset, line.payload), (1, Data::from("after")));

    // The drain ends follow streams with an error naming it, after what they delivered.
    server.signal("TERM");
    let end = within("the follow's end", follow.next()).await.expect("an error item");
    assert_eq!(end.expect_err("the drain ends the read").kind(), Some(ErrorKind::Closed));
    assert!(within("the stream's end", follow.next()).await.is_none());
    let _ = server.terminate();
}

#[tokio::test]
async fn an_unknown_topic_is_404_and_writes_nothing() {
    let dir = workdir();
    let server = serve(dir.path(), &[]);
    let client = Client::new(&server.url).expect("client");
    client.append("real", vec![NewRecordJson::new("x")]).await.expect("append");
    let before = tree(dir.path());
    let http = reqwest::Client::new();
    for (method, path) in [
        ("GET", "/v1/topics/ghost/records"),
        ("GET", "/v1/topics/ghost/records?follow=true&from=latest"),
        ("GET", "/v1/topics/ghost"),
        ("GET", "/v1/topics/ghost/verify"),
        ("POST", "/v1/topics/ghost/export"),
    ] {
        let request = if method == "GET" {
            http.get(format!("{}{path}", server.url))
        } else {
            http.post(format!("{}{path}", server.url))
        };
        let response = request.send().await.expect("request");
        assert_eq!(response.status().as_u16(), 404, "{method} {path}");
        let error: ApiError = response.json().await.expect("an error body");
        assert_eq!(error.kind(), ErrorKind::NotFound, "{method} {path}");
        assert!(error.error.message.contains("ghost"), "{}", error.error.message);
    }
    let err = client.read("ghost", Start::Earliest).await.err().expect("404");
    assert_eq!(err.kind(), Some(ErrorKind::NotFound));
    let after = tree(dir.path());
    let ghost: Vec<&String> = after.iter().filter(|p| p.contains("ghost")).collect();
    assert!(ghost.is_empty(), "files created for an unknown topic: {ghost:?}");
    // Only the server's log may have grown; no data file appeared.
    let new: Vec<&String> = after.iter().filter(|p| !before.contains(p)).collect();
    assert!(new.is_empty(), "new files: {new:?}");
    assert!(client.topics().await.expect("topics").iter().all(|t| t.topic != "ghost"));
    assert!(server.terminate().success());
}

#[tokio::test]
async fn sigterm_drains_exits_0_and_the_data_is_readable_after_a_restart() {
    let dir = workdir();
    let server = serve(dir.path(), &[]);
    let client = Client::new(&server.url).expect("client");
    // Producers keep appending while the signal comes: every append answered OK must be
    // readable after the restart, with the offsets it was told.
    let mut producers = Vec::new();
    for p in 0..3 {
        let client = client.clone();
        producers.push(tokio::spawn(async move {
            let mut acked = BTreeMap::new();
            for i in 0.. {
                let payload = format!("p{p}-{i}");
                match client.append("drain", vec![NewRecordJson::new(payload.as_str())]).await {
                    Ok(offsets) => {
                        acked.insert(offsets.start, payload);
                    }
                    Err(_) => break,
                }
            }
            acked
        }));
    }
    // Wait until the producers are running (some appends acknowledged).
    within("the first appends", async {
        while client.topic("drain").await.map_or(0, |t| t.committed) < 30 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    let status = tokio::task::spawn_blocking(move || server.terminate()).await.expect("join");
    assert!(status.success(), "tierlog serve exits 0 after SIGTERM: {status:?}");
    let mut acked = BTreeMap::new();
    for p in producers {
        acked.extend(p.await.expect("producer"));
    }
    assert!(acked.len() >= 30, "{} appends acknowledged", acked.len());

    let server = serve(dir.path(), &[]);
    let client = Client::new(&server.url).expect("client");
    let records = read_all(&client, "drain").await;
    let read: BTreeMap<u64, String> = records
        .into_iter()
        .map(|r| (r.offset, String::from_utf8(r.payload.to_vec()).expect("utf-8")))
        .collect();
    for (offset, payload) in &acked {
        assert_eq!(read.get(offset), Some(payload), "acknowledged offset {offset} after the restart");
    }
    assert!(server.log_text().contains("serving") || !server.log_text().is_empty());
    assert!(server.terminate().success());
}

/// A task appending batches of `records` records of about `size` bytes to `topic` until
/// the flag is set; it returns the number of batches.
fn keep_appending(
    client: &Client,
    topic: &'static str,
    records: usize,
    size: usize,
) -> (std::sync::Arc<std::sync::atomic::AtomicBool>, tokio::task::JoinHandle<u64>) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (client, flag) = (client.clone(), stop.clone());
    let task = tokio::spawn(async move {
        let mut n = 0u64;
        while !flag.load(std::sync::atomic::Ordering::SeqCst) {
            let batch = (0..records)
                .map(|i| NewRecordJson::new(format!("record {n} {i} {}", "x".repeat(size)).as_str()))
                .collect();
            client.append(topic, batch).await.expect("append while verifying");
            n += 1;
        }
        n
    });
    (stop, task)
}

#[tokio::test]
async fn verify_while_a_producer_writes_reports_no_holes() {
    let dir = workdir();
    // Small segments: rotation and the background export run while verify reads.
    let server = serve_with_env(
        dir.path(),
        &[],
        &[("TIERLOG_HOT__SEGMENT_BYTES", "4KiB"), ("TIERLOG_ROUTER__EXPORT_SWEEP_INTERVAL", "\"50ms\"")],
    );
    let client = Client::new(&server.url).expect("client");
    client.append("busy", vec![NewRecordJson::new("seed")]).await.expect("append");
    let (stop, producer) = keep_appending(&client, "busy", 20, 40);
    // Verify over and over while the producer appends, until it has written across
    // several segments (so rotation and the background export ran during the checks).
    let mut last = 0;
    let mut verifies = 0;
    within("verifies across 2000 appended records", async {
        while verifies < 15 || last < 2000 {
            let report = client.verify("busy").await.expect("verify");
            assert!(report.problems.is_empty(), "verify found problems while a producer writes: {report:?}");
            assert_eq!(report.checked.end, report.snapshot);
            assert_eq!(report.records, report.checked.end - report.checked.start, "{report:?}");
            assert!(report.snapshot >= last, "the snapshot never goes back");
            last = report.snapshot;
            verifies += 1;
        }
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let batches = producer.await.expect("producer");
    assert!(batches >= 100, "the producer appended while verify ran: {batches} batches");
    within("the background export", async {
        while client.topic("busy").await.expect("topic").cold.is_none_or(|c| c.end == 0) {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(server.terminate().success());
}

#[tokio::test]
async fn verify_while_retention_deletes_the_oldest_offsets_reports_no_holes() {
    let dir = workdir();
    // The WAL alone, small segments and a small retention: retention deletes the oldest
    // segments while verify reads them, and nothing else holds them.
    std::fs::write(
        dir.path().join("tierlog.toml"),
        "[hot]\ndata_dir = \"wal\"\nsegment_bytes = \"2KiB\"\nretention_bytes = \"8KiB\"\n\n\
         [router]\nstate_dir = \"state\"\nretention_interval = \"10ms\"\n",
    )
    .expect("config");
    let server = serve(dir.path(), &[]);
    let client = Client::new(&server.url).expect("client");
    client.append("aging", vec![NewRecordJson::new("seed")]).await.expect("append");
    let (stop, producer) = keep_appending(&client, "aging", 10, 60);
    let mut aged = false;
    within("verifies while retention runs", async {
        let mut verifies = 0;
        while verifies < 15 || !aged {
            let report = client.verify("aging").await.expect("verify");
            assert!(report.problems.is_empty(), "verify reported retention as a hole: {report:?}");
            aged |= report.checked.start > 0;
            verifies += 1;
        }
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    producer.await.expect("producer");
    assert!(aged, "retention deleted the oldest offsets during the checks");
    assert!(server.terminate().success());
}

/// Records read from the tiers so far (`tierlog_read_records_total`, every tier).
async fn records_read(http: &reqwest::Client, url: &str) -> u64 {
    let text = http.get(format!("{url}/metrics")).send().await.expect("metrics").text().await.expect("body");
    text.lines()
        .filter(|l| l.starts_with("tierlog_read_records_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Appends `batches` batches of 1000 records of `size` bytes to `topic`.
async fn fill(client: &Client, topic: &str, batches: u64, size: usize) {
    let payload = "f".repeat(size);
    for _ in 0..batches {
        client
            .append(topic, (0..1000).map(|_| NewRecordJson::new(payload.as_str())).collect())
            .await
            .expect("append");
    }
}

/// Sends `GET path` on a raw connection and returns it unread: the server's response
/// stalls once the socket buffers are full.
async fn unread_request(url: &str, path: &str) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;

    let address = url.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(address).await.expect("connect");
    socket
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: {address}\r\n\r\n").as_bytes())
        .await
        .expect("request");
    socket
}

#[tokio::test]
async fn a_client_that_does_not_read_holds_the_read_back() {
    use tokio::io::AsyncReadExt;

    let dir = workdir();
    let server = serve(dir.path(), &[]);
    let client = Client::new(&server.url).expect("client");
    // 48 MiB of records: far more than the socket buffers between server and client.
    let total = 24_000u64;
    fill(&client, "big", total / 1000, 2048).await;
    let mut socket = unread_request(&server.url, "/v1/topics/big/records?format=binary").await;
    // The client reads nothing: once the socket buffers are full the server stops reading
    // the tiers. Wait (bounded) until its count of records read stops moving.
    let http = reqwest::Client::new();
    let mut seen = Vec::new();
    within("the read to stall", async {
        loop {
            seen.push(records_read(&http, &server.url).await);
            let n = seen.len();
            if n >= 5 && seen[n - 5..].iter().all(|v| *v == seen[n - 1]) && seen[n - 1] > 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    let stalled = seen[seen.len() - 1];
    assert!(stalled < total / 2, "the server read {stalled} of {total} records for a client that read none");
    // Reading on delivers everything.
    let mut body = Vec::new();
    within("the whole body", async {
        let mut chunk = vec![0u8; 1 << 20];
        // The chunked body ends with its empty last chunk.
        while !body.ends_with(b"\r\n0\r\n\r\n") {
            let n = socket.read(&mut chunk).await.expect("read");
            assert!(n > 0, "the server closed the connection early");
            body.extend_from_slice(&chunk[..n]);
        }
    })
    .await;
    assert!(body.len() as u64 > total * 2048, "{} bytes", body.len());
    assert!(records_read(&http, &server.url).await >= total);
    assert!(server.terminate().success());
}

#[tokio::test]
async fn a_second_signal_during_a_stalled_drain_exits_at_once_and_the_data_survives() {
    let dir = workdir();
    let server = serve_with_env(dir.path(), &[], &[("TIERLOG_SERVER__DRAIN_TIMEOUT", "10m")]);
    let client = Client::new(&server.url).expect("client");
    fill(&client, "stall", 8, 4096).await;
    // A read no one takes: its response cannot finish, so the drain would wait 10 minutes.
    let socket = unread_request(&server.url, "/v1/topics/stall/records").await;
    let http = reqwest::Client::new();
    within("the read to start", async {
        while records_read(&http, &server.url).await == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    server.signal("TERM");
    // The drain started when /readyz says so (or the listener is gone).
    within("the drain to start", async {
        while http.get(format!("{}/readyz", server.url)).send().await.is_ok_and(|r| r.status().is_success()) {
            tokio::task::yield_now().await;
        }
    })
    .await;
    let status = tokio::task::spawn_blocking(move || {
        let status = server.terminate();
        drop(socket);
        status
    })
    .await
    .expect("join");
    assert_eq!(status.code(), Some(1), "a second signal exits 1 at once");
    let server = serve(dir.path(), &[]);
    let client = Client::new(&server.url).expect("client");
    assert_eq!(
        client.topic("stall").await.expect("topic").committed,
        8000,
        "every acknowledged record survives"
    );
    assert!(server.terminate().success());
}

#[tokio::test]
async fn probes_metrics_and_recovery_are_served() {
    let dir = workdir();
    let server = serve(dir.path(), &[]);
    let client = Client::new(&server.url).expect("client");
    client.append("m", vec![NewRecordJson::new("x")]).await.expect("append");
    let http = reqwest::Client::new();
    for (path, needle) in
        [("/healthz", "ok"), ("/readyz", "ready"), ("/metrics", "tierlog_append_records_total 1")]
    {
        let response = http.get(format!("{}{path}", server.url)).send().await.expect(path);
        assert_eq!(response.status().as_u16(), 200, "{path}");
        let body = response.text().await.expect("body");
        assert!(body.contains(needle), "{path}: {body}");
    }
    let recovery = client.recovery().await.expect("recovery");
    assert!(recovery.topics.iter().all(|t| t.lost.is_empty() && t.failed.is_none()), "{recovery:?}");
    assert!(server.terminate().success());
}
