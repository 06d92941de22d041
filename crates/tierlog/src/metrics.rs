//! Metrics: the names tierlog records (through the `metrics` facade), the Prometheus
//! recorder, and a minimal HTTP endpoint serving `GET /metrics`.
//!
//! The tier crates emit no metrics themselves; everything here is recorded at call sites
//! the CLI controls: the metered tier wrappers ([`crate::metered`]) and the commands.
//! The names and their meaning are documented in `docs/metrics.md`.

use std::net::SocketAddr;

use anyhow::Context;
use metrics::{Unit, counter, describe_counter, describe_gauge, describe_histogram, histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, warn};

/// Records appended (counter).
pub(crate) const APPEND_RECORDS: &str = "tierlog_append_records_total";
/// Payload bytes appended (counter).
pub(crate) const APPEND_BYTES: &str = "tierlog_append_bytes_total";
/// Seconds from handing a batch to the store to its acknowledgement (histogram).
pub(crate) const APPEND_SECONDS: &str = "tierlog_append_seconds";
/// Failed appends (counter).
pub(crate) const APPEND_ERRORS: &str = "tierlog_append_errors_total";
/// Records read, by the part of the store that served them: `tier` = cold, warm, hot,
/// live (counter).
pub(crate) const READ_RECORDS: &str = "tierlog_read_records_total";
/// Payload bytes read, by `tier` (counter).
pub(crate) const READ_BYTES: &str = "tierlog_read_bytes_total";
/// Read requests made to a tier's backend, by `tier` = cold, warm (counter).
pub(crate) const TIER_READS: &str = "tierlog_tier_read_requests_total";
/// Segments uploaded to cold (counter).
pub(crate) const EXPORT_SEGMENTS: &str = "tierlog_export_segments_total";
/// Bytes of segments uploaded to cold (counter).
pub(crate) const EXPORT_BYTES: &str = "tierlog_export_bytes_total";
/// Failed segment uploads (counter).
pub(crate) const EXPORT_ERRORS: &str = "tierlog_export_errors_total";
/// Committed records cold does not hold yet, by `topic` (gauge).
pub(crate) const EXPORT_LAG: &str = "tierlog_export_lag_records";
/// Reader positionings, by `by` = earliest, latest, offset, timestamp (counter).
pub(crate) const SEEK_REQUESTS: &str = "tierlog_seek_requests_total";
/// Seconds from opening a reader to its first record (histogram).
pub(crate) const SEEK_SECONDS: &str = "tierlog_seek_seconds";
/// Bytes fetched from cold while positioning readers (counter).
pub(crate) const SEEK_BYTES: &str = "tierlog_seek_bytes_total";
/// Warm appends (XADD + WAIT), by `outcome` = ok, failed (counter).
pub(crate) const WARM_WAIT: &str = "tierlog_warm_wait_total";
/// WAL segments deleted by retention (counter).
pub(crate) const DELETED_SEGMENTS: &str = "tierlog_deleted_segments_total";
/// Bytes of WAL segments deleted by retention (counter).
pub(crate) const DELETED_BYTES: &str = "tierlog_deleted_bytes_total";

/// Every metric name, for documentation tests.
#[cfg(test)]
pub(crate) const ALL: &[&str] = &[
    APPEND_RECORDS,
    APPEND_BYTES,
    APPEND_SECONDS,
    APPEND_ERRORS,
    READ_RECORDS,
    READ_BYTES,
    TIER_READS,
    EXPORT_SEGMENTS,
    EXPORT_BYTES,
    EXPORT_ERRORS,
    EXPORT_LAG,
    SEEK_REQUESTS,
    SEEK_SECONDS,
    SEEK_BYTES,
    WARM_WAIT,
    DELETED_SEGMENTS,
    DELETED_BYTES,
];

/// Largest request head the endpoint reads.
const MAX_REQUEST: usize = 8 * 1024;

/// Installs the Prometheus recorder, describes every metric, registers each at zero (so
/// every name is served from the start) and serves `GET /metrics` on `addr`.
pub(crate) async fn serve(addr: SocketAddr) -> anyhow::Result<()> {
    let listener =
        TcpListener::bind(addr).await.with_context(|| format!("cannot listen for metrics on {addr}"))?;
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).context("installing the metrics recorder")?;
    describe_all();
    register_zeroes();
    tokio::spawn(accept_loop(listener, handle));
    Ok(())
}

fn describe_all() {
    describe_counter!(APPEND_RECORDS, Unit::Count, "Records appended");
    describe_counter!(APPEND_BYTES, Unit::Bytes, "Payload bytes appended");
    describe_histogram!(APPEND_SECONDS, Unit::Seconds, "Latency of an appended batch until acknowledged");
    describe_counter!(APPEND_ERRORS, Unit::Count, "Failed appends");
    describe_counter!(READ_RECORDS, Unit::Count, "Records read, by serving tier");
    describe_counter!(READ_BYTES, Unit::Bytes, "Payload bytes read, by serving tier");
    describe_counter!(TIER_READS, Unit::Count, "Read requests made to a tier backend");
    describe_counter!(EXPORT_SEGMENTS, Unit::Count, "Segments uploaded to cold");
    describe_counter!(EXPORT_BYTES, Unit::Bytes, "Bytes of segments uploaded to cold");
    describe_counter!(EXPORT_ERRORS, Unit::Count, "Failed segment uploads");
    describe_gauge!(EXPORT_LAG, Unit::Count, "Committed records cold does not hold yet");
    describe_counter!(SEEK_REQUESTS, Unit::Count, "Reader positionings, by start position kind");
    describe_histogram!(SEEK_SECONDS, Unit::Seconds, "Latency from opening a reader to its first record");
    describe_counter!(SEEK_BYTES, Unit::Bytes, "Bytes fetched from cold while positioning readers");
    describe_counter!(WARM_WAIT, Unit::Count, "Warm appends (XADD + WAIT), by outcome");
    describe_counter!(DELETED_SEGMENTS, Unit::Count, "WAL segments deleted by retention");
    describe_counter!(DELETED_BYTES, Unit::Bytes, "Bytes of WAL segments deleted by retention");
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
    use super::ALL;

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
