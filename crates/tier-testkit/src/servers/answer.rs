//! [`AnswerDropProxy`]: an HTTP proxy (TCP, byte for byte) in front of a test server that
//! can forward a request and lose its answer, as a timeout or a reset connection does
//! after the server acted.

use std::net::Ipv4Addr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{
        TcpListener, TcpStream,
        tcp::{OwnedReadHalf, OwnedWriteHalf},
    },
    task::{JoinHandle, JoinSet},
};

use super::{HarnessError, http};

/// Which answers to lose: those of the next `count` requests whose request line starts
/// with `method` and contains `path_contains`.
#[derive(Debug, Default)]
struct Rule {
    method: String,
    path_contains: String,
    count: usize,
    dropped: usize,
}

/// Forwards every connection accepted on its 127.0.0.1 port to an HTTP endpoint, byte for
/// byte in both directions, except the answers [`drop_answers`](Self::drop_answers)
/// names: such a request reaches the server in full and the server acts on it, but its
/// answer is discarded and the client's connection is closed before any byte of it
/// arrives (the client sees the connection end without a response: an ambiguous
/// failure).
///
/// It recognises a request by the request line at the start of a chunk the client
/// writes (HTTP/1.1 clients such as `object_store`'s write a request's head in one
/// write and send one request at a time per connection), so it is for tests, not a
/// general proxy. It runs on the Tokio runtime that started it; dropping it stops it and
/// closes its connections.
#[derive(Debug)]
pub struct AnswerDropProxy {
    port: u16,
    rule: Arc<Mutex<Rule>>,
    accept: JoinHandle<()>,
}

impl AnswerDropProxy {
    /// Listens on a free 127.0.0.1 port, forwarding to `endpoint` (`http://host:port`).
    pub async fn start(endpoint: &str) -> Result<Self, HarnessError> {
        let target = http::authority(endpoint)
            .map_err(|m| HarnessError::request("starting the answer-dropping proxy", m))?
            .to_owned();
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(|e| HarnessError::io("binding the answer-dropping proxy", e))?;
        let port =
            listener.local_addr().map_err(|e| HarnessError::io("reading the proxy's address", e))?.port();
        let rule = Arc::new(Mutex::new(Rule::default()));
        let shared = Arc::clone(&rule);
        let accept = tokio::spawn(async move {
            // Owned here: dropped (and every connection task aborted) with this task.
            let mut connections = JoinSet::new();
            while let Ok((inbound, _)) = listener.accept().await {
                let Ok(outbound) = TcpStream::connect(target.as_str()).await else {
                    continue;
                };
                let (in_read, in_write) = inbound.into_split();
                let (out_read, out_write) = outbound.into_split();
                // The request line being answered on this connection, and whether its
                // answer is to be lost.
                let pending = Arc::new(Mutex::new(false));
                connections.spawn(requests(in_read, out_write, Arc::clone(&shared), Arc::clone(&pending)));
                connections.spawn(answers(out_read, in_write, pending));
                while connections.try_join_next().is_some() {}
            }
        });
        Ok(Self { port, rule, accept })
    }

    /// The proxy's endpoint, `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Loses the answers of the next `count` requests whose method is `method` (`"PUT"`,
    /// `"DELETE"`, `"POST"`, ...) and whose request line contains `path_contains`.
    pub fn drop_answers(&self, method: &str, path_contains: &str, count: usize) {
        *self.rule.lock() =
            Rule { method: method.to_owned(), path_contains: path_contains.to_owned(), count, dropped: 0 };
    }

    /// Answers lost so far under the current rule.
    pub fn dropped(&self) -> usize {
        self.rule.lock().dropped
    }
}

impl Drop for AnswerDropProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Copies the client's bytes to the server, marking the connection's answer as one to
/// lose when a chunk starts with a request line the rule names.
async fn requests(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    rule: Arc<Mutex<Rule>>,
    pending: Arc<Mutex<bool>>,
) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = from.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        let line = buf[..n].split(|b| *b == b'\n').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        let is_request_line = line.trim_end().ends_with("HTTP/1.1");
        if is_request_line {
            let mut rule = rule.lock();
            let named = line.starts_with(&format!("{} ", rule.method)) && line.contains(&rule.path_contains);
            let lose = named && rule.dropped < rule.count;
            if lose {
                rule.dropped += 1;
            }
            *pending.lock() = lose;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// Copies the server's bytes to the client; when the answer is one to lose, discards it
/// and closes the client's side instead.
async fn answers(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, pending: Arc<Mutex<bool>>) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = from.read(&mut buf).await.unwrap_or(0);
        if n == 0 || *pending.lock() {
            break;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}
