//! The server's bounds on connections: `server.max_connections`, and running out of file
//! descriptors.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{serve_with_env, serve_with_fd_limit, workdir};
use crate::within;

/// A connection to `address` that started a request and holds it unfinished: the server
/// keeps the connection (and its place among `max_connections`) until the header ends.
async fn held(address: &str) -> TcpStream {
    let mut socket = TcpStream::connect(address).await.expect("connect");
    socket.write_all(b"GET /healthz HTTP/1.1\r\n").await.expect("request line");
    socket
}

/// Finishes the request `held` started, asking the server to close, and returns the
/// response's status and body.
async fn finish(mut socket: TcpStream, address: &str) -> (u16, String) {
    let rest = format!("Host: {address}\r\nConnection: close\r\n\r\n");
    socket.write_all(rest.as_bytes()).await.expect("header");
    let mut response = Vec::new();
    socket.read_to_end(&mut response).await.expect("response");
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, text)
}

/// `GET /healthz` on a new connection: its status and the whole response.
async fn healthz(address: &str) -> (u16, String) {
    let socket = held(address).await;
    finish(socket, address).await
}

/// The value of metric `name` (no labels) in the server's `/metrics`.
async fn metric(address: &str, name: &str) -> f64 {
    let mut socket = TcpStream::connect(address).await.expect("connect");
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    socket.write_all(request.as_bytes()).await.expect("request");
    let mut response = Vec::new();
    socket.read_to_end(&mut response).await.expect("response");
    let text = String::from_utf8_lossy(&response).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} in {text}"))
}

/// Polls `/healthz` on new connections until the server answers `200`.
async fn until_served(address: &str) {
    within("a connection to be served", async {
        while healthz(address).await.0 != 200 {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_connection_past_max_connections_gets_503_and_one_after_a_close_is_served() {
    let dir = workdir();
    let server = serve_with_env(dir.path(), &[], &[("TIERLOG_SERVER__MAX_CONNECTIONS", "2")]);
    let address = server.url.trim_start_matches("http://").to_owned();
    let first = held(&address).await;
    let second = held(&address).await;
    let (status, response) = healthz(&address).await;
    assert_eq!(status, 503, "{response}");
    assert!(
        response.contains("\"unavailable\"") && response.contains("maximum of 2 connections"),
        "{response}"
    );
    assert!(response.to_ascii_lowercase().contains("retry-after: 1"), "{response}");
    // The held requests are still answered; once one connection closes, a new one is served.
    let (status, response) = finish(first, &address).await;
    assert_eq!(status, 200, "{response}");
    until_served(&address).await;
    drop(second);
    assert!(metric(&address, "tierlog_server_connections_refused_total").await >= 1.0);
    // Once the closed connections' tasks end, the scrape's own connection is the one served.
    within("the connections gauge to come down to the scrape's own", async {
        while metric(&address, "tierlog_server_connections").await != 1.0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(server.terminate().success());
}

/// Out of file descriptors, `accept` fails for as long as connections wait in the backlog.
/// Before, the accept loop retried at once and logged every failure — a busy loop writing
/// thousands of lines a second; now it waits for a connection to close (or a second),
/// says so once, and serves again once descriptors are free.
#[tokio::test]
async fn out_of_file_descriptors_the_server_waits_says_so_once_and_serves_again() {
    let dir = workdir();
    let server = serve_with_fd_limit(dir.path(), 64);
    let address = server.url.trim_start_matches("http://").to_owned();
    let mut sockets = Vec::new();
    for _ in 0..100 {
        sockets.push(held(&address).await);
    }
    let failures =
        |log: &str| log.lines().filter(|l| l.contains("accepting") && l.contains("failed")).count();
    within("the server to run out of descriptors", async {
        while failures(&server.log_text()) == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    drop(sockets);
    until_served(&address).await;
    let log = server.log_text();
    let failures = failures(&log);
    assert_eq!(failures, 1, "one line for the whole episode:\n{}", &log[..log.len().min(4000)]);
    assert!(log.contains("accepting connections again"), "{log}");
    assert!(metric(&address, "tierlog_server_accept_errors_total").await >= 1.0);
    assert!(server.terminate().success());
}

#[test]
fn max_connections_of_zero_is_refused_at_start() {
    let dir = workdir();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_tierlog"));
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("TIERLOG_") && k.contains("__")) {
        cmd.env_remove(k);
    }
    let out = cmd
        .current_dir(dir.path())
        .args(["--data-dir", "data", "serve", "--listen", "127.0.0.1:0"])
        .env("TIERLOG_SERVER__MAX_CONNECTIONS", "0")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("tierlog runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("server.max_connections must be at least 1"), "{err}");
}
