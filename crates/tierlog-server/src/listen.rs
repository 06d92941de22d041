//! The accept loop: HTTP/1.1 on plain TCP or rustls, one task per connection, and the
//! drain (stop accepting, let connections finish their requests and append streams
//! answer what they took, bounded by a timeout).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::http::header;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tierlog_api::ErrorKind;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use crate::error::HttpError;

/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A rustls acceptor from a PEM certificate chain and a PEM private key (HTTP/1.1 only).
pub fn load_tls(cert: &Path, key: &Path) -> anyhow::Result<TlsAcceptor> {
    let certs = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("cannot read the TLS certificate {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("cannot read the TLS certificate {}", cert.display()))?;
    if certs.is_empty() {
        anyhow::bail!("the TLS certificate file {} holds no certificate", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("cannot read the TLS key {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the TLS certificate and key do not make a valid pair")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The tasks a drain waits for: connections, and the append streams upgraded from them
/// (an upgraded connection is no longer hyper's to drain).
#[derive(Clone, Debug)]
pub(crate) struct Tasks(Arc<Counted>);

#[derive(Debug)]
struct Counted {
    running: watch::Sender<usize>,
    /// The gauge that shows the count, if any.
    gauge: Option<&'static str>,
}

/// One task counted by [`Tasks`] until dropped.
#[derive(Debug)]
pub(crate) struct TaskGuard(Arc<Counted>);

impl Counted {
    fn add(&self, delta: isize) {
        self.running.send_modify(|n| *n = n.saturating_add_signed(delta));
        if let Some(name) = self.gauge {
            metrics::gauge!(name).set(*self.running.borrow() as f64);
        }
    }
}

impl Tasks {
    /// A count the `tierlog_server_connections` gauge shows.
    pub(crate) fn new() -> Self {
        Self::with_gauge(Some(tier_core::metrics::SERVER_CONNECTIONS))
    }

    fn with_gauge(gauge: Option<&'static str>) -> Self {
        Self(Arc::new(Counted { running: watch::Sender::new(0), gauge }))
    }

    /// Counts a task until the guard is dropped.
    pub(crate) fn enter(&self) -> TaskGuard {
        self.0.add(1);
        TaskGuard(Arc::clone(&self.0))
    }

    /// Tasks running now.
    fn count(&self) -> usize {
        *self.0.running.borrow()
    }

    /// Returns once no task runs.
    async fn idle(&self) {
        self.fewer_than(1).await;
    }

    /// Returns once fewer than `n` tasks run (never for `n` = 0).
    async fn fewer_than(&self, n: usize) {
        let mut count = self.0.running.subscribe();
        // The sender lives in `self`: `wait_for` cannot fail.
        let _ = count.wait_for(|running| *running < n).await;
    }
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.add(-1);
    }
}

/// Returns once `shutdown` is true (or its sender is gone).
pub(crate) async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// Serves one connection (HTTP/1.1, upgrades allowed) until it ends; once `shutdown`
/// turns true it finishes the request in progress and closes.
async fn serve_connection<I>(
    io: I,
    service: TowerToHyperService<axum::Router>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), hyper::Error>
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    // Also the longest a kept-alive connection waits idle for its next request
    // (tierlog-client's pool drops idle connections after 20 s).
    builder.timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(30));
    let mut conn = std::pin::pin!(builder.serve_connection(TokioIo::new(io), service).with_upgrades());
    tokio::select! {
        result = conn.as_mut() => result,
        () = stopped(&mut shutdown) => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    }
}

/// What bounds the accept loop and the drain.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// How long the drain waits for requests and append streams in flight.
    pub(crate) drain_timeout: Duration,
    /// Connections (and append streams) served at once; one past it is answered `503`.
    pub(crate) max_connections: usize,
}

/// Connections past `max_connections` answered `503` at once; more are closed unanswered.
const MAX_REFUSING: usize = 64;

/// How long the accept loop waits after a failure that is not one connection's (out of
/// file descriptors, say) before it tries again — unless a connection closes first.
const ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// At most one warning about failing accepts this often: at the limit, every closed
/// connection lets one accept through and the next may fail again.
const ACCEPT_REPORT_EVERY: Duration = Duration::from_secs(10);

/// Reports failing accepts: the first failure of a while as a warning (with how many
/// failed unreported since the last), the next success once after it.
#[derive(Debug, Default)]
struct AcceptReport {
    /// When the last warning was logged.
    warned: Option<std::time::Instant>,
    /// Failures since it.
    unreported: u64,
    /// A warning was logged and no success since.
    failing: bool,
}

impl AcceptReport {
    fn failed(&mut self, e: &std::io::Error, connections: usize) {
        if self.warned.is_some_and(|at| at.elapsed() < ACCEPT_REPORT_EVERY) {
            self.unreported += 1;
            return;
        }
        warn!(
            error = %e, connections, unreported_since_the_last_warning = self.unreported,
            "accepting connections failed (out of file descriptors?): waiting for a connection to close, or \
             1 s, before trying again"
        );
        // Spacing out log warnings, in real time; it steers nothing
        #[allow(clippy::disallowed_methods)]
        let now = std::time::Instant::now();
        self.warned = Some(now);
        self.unreported = 0;
        self.failing = true;
    }

    fn accepted(&mut self, connections: usize) {
        if std::mem::take(&mut self.failing) {
            info!(connections, "accepting connections again");
        }
    }
}

/// Whether an accept error is about the one connection (it went away before it was
/// accepted): the next accept may succeed at once.
fn one_connections(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(e.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset)
}

/// What a connection past `max_connections` is answered: `503 unavailable`, then closed.
fn refusal(max_connections: usize) -> axum::Router {
    let message = format!(
        "the server serves its maximum of {max_connections} connections (server.max_connections); retry later"
    );
    axum::Router::new().fallback(move || {
        let error = HttpError::new(ErrorKind::Unavailable, message.clone());
        async move { ([(header::CONNECTION, "close")], error) }
    })
}

/// Serves `app` on `listener` until `shutdown` turns true, then drains: stops accepting,
/// lets connections finish their requests and append streams answer what they took,
/// for at most `limits.drain_timeout`. At most `limits.max_connections` connections and
/// append streams are served at once: one more is answered `503` and closed. When
/// accepting fails for want of resources (file descriptors), the loop waits for a
/// connection to close (or [`ACCEPT_BACKOFF`]) instead of retrying at once, and says so
/// at most every [`ACCEPT_REPORT_EVERY`], not once per retry.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: axum::Router,
    shutdown: watch::Receiver<bool>,
    tasks: Tasks,
    limits: Limits,
) -> anyhow::Result<()> {
    let mut signal = shutdown.clone();
    let refusal = refusal(limits.max_connections);
    let refusing = Tasks::with_gauge(None);
    let mut report = AcceptReport::default();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stopped(&mut signal) => break,
        };
        let (tcp, peer) = match accepted {
            Ok(conn) => conn,
            Err(e) if one_connections(&e) => continue,
            Err(e) => {
                metrics::counter!(tier_core::metrics::SERVER_ACCEPT_ERRORS).increment(1);
                let open = tasks.count();
                report.failed(&e, open);
                tokio::select! {
                    () = tasks.fewer_than(open) => {}
                    () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                    () = stopped(&mut signal) => break,
                }
                continue;
            }
        };
        let open = tasks.count();
        report.accepted(open);
        let _ = tcp.set_nodelay(true);
        let (service, guard) = if open < limits.max_connections {
            (app.clone(), tasks.enter())
        } else {
            metrics::counter!(tier_core::metrics::SERVER_REFUSED).increment(1);
            if refusing.count() >= MAX_REFUSING {
                debug!(%peer, "closing a connection past server.max_connections unanswered");
                continue;
            }
            debug!(%peer, max = limits.max_connections, "refusing a connection past server.max_connections");
            (refusal.clone(), refusing.enter())
        };
        let service = TowerToHyperService::new(service);
        let shutdown = shutdown.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _guard = guard;
            let result = match tls {
                None => serve_connection(tcp, service, shutdown).await,
                Some(acceptor) => match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => serve_connection(stream, service, shutdown).await,
                    Ok(Err(e)) => {
                        debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                },
            };
            if let Err(e) = result {
                debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    info!(
        tasks = tasks.count(),
        "draining: no new connections; waiting for requests and append streams in flight"
    );
    if tokio::time::timeout(limits.drain_timeout, tasks.idle()).await.is_err() {
        warn!(timeout = ?limits.drain_timeout, "drain timed out: closing the remaining connections");
    }
    Ok(())
}
