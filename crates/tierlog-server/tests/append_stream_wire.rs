//! An append stream spoken byte by byte, as `docs/server.md` ("Append streams") documents
//! it, over a plain TCP socket: the upgrade, the answer's bytes, and the close frame a
//! malformed frame gets.

use std::time::Duration;

use futures::StreamExt;
use tier_router::{StartPosition, StoreConfig, TieredStore};
use tierlog_server::{Server, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest wait for what must happen (a hang detector, not synchronisation).
const WAIT: Duration = Duration::from_secs(30);

/// Reads until `stream` has sent `n` bytes (or ends: fewer are returned).
async fn read_n(stream: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut buf = vec![0; n];
    let mut got = 0;
    while got < n {
        let read =
            tokio::time::timeout(WAIT, stream.read(&mut buf[got..])).await.expect("in time").expect("read");
        if read == 0 {
            break;
        }
        got += read;
    }
    buf.truncate(got);
    buf
}

#[tokio::test]
async fn an_append_stream_has_the_documented_bytes() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = TieredStore::open(StoreConfig::hot_only(dir.path().join("wal"))).await.expect("store");
    let server = Server::new(store.clone(), &ServerConfig::default(), None).expect("server");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let shutdown = server.shutdown_handle();
    let serving = tokio::spawn(server.serve(listener));

    let mut tcp = TcpStream::connect(address).await.expect("connect");
    tcp.write_all(
        b"POST /v1/topics/wire/append-stream HTTP/1.1\r\nHost: tierlog\r\nConnection: upgrade\r\n\
          Upgrade: tierlog-append/1\r\nContent-Length: 0\r\n\r\n",
    )
    .await
    .expect("send the upgrade");
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let byte = read_n(&mut tcp, 1).await;
        assert_eq!(byte.len(), 1, "the answer's head ends: {}", String::from_utf8_lossy(&head));
        head.extend(byte);
    }
    let head = String::from_utf8(head).expect("ASCII").to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101 switching protocols\r\n"), "{head}");
    assert!(head.contains("upgrade: tierlog-append/1\r\n"), "{head}");

    // The docs' record (offset 7, which an append ignores; key `k`; header `h: v`;
    // payload `hello`), then an end frame: one batch.
    let mut batch = b"TLB\x01".to_vec();
    batch.extend_from_slice(&[0, 0, 0, 0x29, 0]);
    batch.extend_from_slice(&7u64.to_be_bytes());
    batch.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
    batch.extend_from_slice(b"\x00\x00\x00\x01k\x00\x00\x00\x01\x00\x00\x00\x01h\x00\x00\x00\x01vhello");
    batch.extend_from_slice(b"\x00\x00\x00\x01\x03");
    tcp.write_all(&batch).await.expect("send the batch");
    let mut appended = b"TLB\x01\x00\x00\x00\x11\x04".to_vec();
    appended.extend_from_slice(&0u64.to_be_bytes());
    appended.extend_from_slice(&1u64.to_be_bytes());
    assert_eq!(read_n(&mut tcp, appended.len()).await, appended, "magic, then appended 0..1");

    // A frame of an unknown kind ends the stream: a close frame saying why, then the end
    // of the connection.
    tcp.write_all(b"\x00\x00\x00\x01\x09").await.expect("send");
    let rest = read_n(&mut tcp, 1 << 16).await;
    assert_eq!(rest[4], 5, "a close frame: {rest:?}");
    let len = u32::from_be_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
    assert_eq!(rest.len(), 4 + len, "nothing after the close frame");
    let error: tierlog_api::ApiError = serde_json::from_slice(&rest[5..]).expect("an error's JSON");
    assert_eq!(error.kind(), tierlog_api::ErrorKind::InvalidInput, "{error}");
    assert!(error.to_string().contains("unknown frame kind 9"), "{error}");

    // The record as framed: the client's time, key and header.
    let topic = store.existing_topic("wire").await.expect("the batch created the topic");
    let mut reader = topic.reader(StartPosition::Earliest).await.expect("reader");
    let r = tokio::time::timeout(WAIT, reader.next()).await.expect("in time").expect("a record").expect("ok");
    assert_eq!((r.offset, r.timestamp, r.key.as_deref()), (0, 1_700_000_000_000, Some(&b"k"[..])));
    assert_eq!(
        (&r.headers[0].name[..], &r.headers[0].value[..], &r.payload[..]),
        (&b"h"[..], &b"v"[..], &b"hello"[..])
    );
    shutdown.shutdown();
    tokio::time::timeout(WAIT, serving).await.expect("in time").expect("join").expect("drained");
    store.close().await;
}
