//! Metrics: the Prometheus recorder and a minimal HTTP endpoint serving `GET /metrics`.
//!
//! The library records every metric where the work happens (the router, tier-warm and
//! tier-cold, through the `metrics` facade; names in [`tier_router::metrics`]); the
//! program only installs the recorder, registers the descriptions and serves them. The
//! names and their meaning are documented in `docs/metrics.md`.

use std::net::SocketAddr;
use std::sync::OnceLock;

use anyhow::Context;
use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tier_router::metrics::{
    APPEND_BYTES, APPEND_ERRORS, APPEND_RECORDS, APPEND_SECONDS, DELETED_BYTES, DELETED_SEGMENTS,
    EXPORT_BYTES, EXPORT_ERRORS, EXPORT_SEGMENTS, READ_BYTES, READ_RECORDS, SEEK_BYTES, SEEK_REQUESTS,
    SEEK_SECONDS, SERVER_ACCEPT_ERRORS, SERVER_CONNECTIONS, SERVER_REFUSED, TIER_READS, WARM_WAIT,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, warn};

/// Largest request head the endpoint reads.
const MAX_REQUEST: usize = 8 * 1024;

/// The recorder's handle, once installed.
static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the Prometheus recorder (once per process: later calls return the same
/// handle), describes every metric and registers each at zero (so every name is served
/// from the start).
pub(crate) fn install() -> anyhow::Result<PrometheusHandle> {
    if let Some(handle) = HANDLE.get() {
        return Ok(handle.clone());
    }
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).context("installing the metrics recorder")?;
    tier_router::metrics::describe();
    register_zeroes();
    Ok(HANDLE.get_or_init(|| handle).clone())
}

/// Installs the recorder ([`install`]) and serves `GET /metrics` on `addr`.
pub(crate) async fn serve(addr: SocketAddr) -> anyhow::Result<()> {
    let listener =
        TcpListener::bind(addr).await.with_context(|| format!("cannot listen for metrics on {addr}"))?;
    let handle = install()?;
    tokio::spawn(accept_loop(listener, handle));
    Ok(())
}

fn register_zeroes() {
    for name in [
        APPEND_RECORDS,
        APPEND_BYTES,
        APPEND_ERRORS,
        TIER_READS,
        EXPORT_SEGMENTS,
        EXPORT_BYTES,
        EXPORT_ERRORS,
        SEEK_BYTES,
        DELETED_SEGMENTS,
        DELETED_BYTES,
        SERVER_REFUSED,
        SERVER_ACCEPT_ERRORS,
    ] {
        counter!(name).absolute(0);
    }
    for tier in ["cold", "warm", "hot", "live"] {
        counter!(READ_RECORDS, "tier" => tier).absolute(0);
        counter!(READ_BYTES, "tier" => tier).absolute(0);
    }
    for outcome in ["ok", "failed"] {
        counter!(WARM_WAIT, "outcome" => outcome).absolute(0);
    }
    counter!(SEEK_REQUESTS, "by" => "earliest").absolute(0);
    gauge!(SERVER_CONNECTIONS).set(0.0);
    // Histograms appear once they hold a sample; touch them so their names exist.
    let _ = histogram!(APPEND_SECONDS);
    let _ = histogram!(SEEK_SECONDS);
}

async fn accept_loop(listener: TcpListener, handle: PrometheusHandle) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let handle = handle.clone();
                tokio::spawn(async move {
                    if let Err(e) = respond(stream, &handle).await {
                        debug!(%peer, error = %e, "metrics request failed");
                    }
                });
            }
            Err(e) => warn!(error = %e, "accepting a metrics connection failed"),
        }
    }
}

/// Answers one HTTP/1.x request and closes the connection.
async fn respond(mut stream: TcpStream, handle: &PrometheusHandle) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_REQUEST {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = buf.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, content_type, body) =
        if method == "GET" && (path == "/metrics" || path.starts_with("/metrics?")) {
            ("200 OK", "text/plain; version=0.0.4", handle.render())
        } else {
            ("404 Not Found", "text/plain", "only GET /metrics is served\n".to_owned())
        };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    if method != "HEAD" {
        stream.write_all(body.as_bytes()).await?;
    }
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use tier_router::metrics::ALL;

    #[test]
    fn docs_metrics_lists_exactly_the_recorded_names() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md"))
            .expect("docs");
        let mut documented: Vec<&str> = doc
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .filter(|n| n.starts_with("tierlog_"))
            .collect();
        documented.sort_unstable();
        let mut names = ALL.to_vec();
        names.sort_unstable();
        assert_eq!(documented, names);
    }
}
