//! The accept loop: HTTP/1.1 on plain TCP or rustls, one task per connection, and the
//! drain (stop accepting, let connections finish their requests and append streams
//! answer what they took, bounded by a timeout).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

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
pub(crate) struct Tasks(Arc<watch::Sender<usize>>);

/// One task counted by [`Tasks`] until dropped.
#[derive(Debug)]
pub(crate) struct TaskGuard(Arc<watch::Sender<usize>>);

impl Tasks {
    pub(crate) fn new() -> Self {
        Self(Arc::new(watch::Sender::new(0)))
    }

    /// Counts a task until the guard is dropped.
    pub(crate) fn enter(&self) -> TaskGuard {
        self.0.send_modify(|n| *n += 1);
        TaskGuard(Arc::clone(&self.0))
    }

    /// Tasks running now.
    fn count(&self) -> usize {
        *self.0.borrow()
    }

    /// Returns once no task runs.
    async fn idle(&self) {
        let mut count = self.0.subscribe();
        // The sender lives in `self`: `wait_for` cannot fail.
        let _ = count.wait_for(|n| *n == 0).await;
    }
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
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

/// Serves `app` on `listener` until `shutdown` turns true, then drains: stops accepting,
/// lets connections finish their requests and append streams answer what they took,
/// for at most `drain_timeout`.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: axum::Router,
    shutdown: watch::Receiver<bool>,
    tasks: Tasks,
    drain_timeout: Duration,
) -> anyhow::Result<()> {
    let mut signal = shutdown.clone();
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // Out of file descriptors and the like: keep serving the others.
                    warn!(error = %e, "accepting a connection failed");
                    continue;
                }
            },
            () = stopped(&mut signal) => break,
        };
        let _ = tcp.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let guard = tasks.enter();
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
    if tokio::time::timeout(drain_timeout, tasks.idle()).await.is_err() {
        warn!(timeout = ?drain_timeout, "drain timed out: closing the remaining connections");
    }
    Ok(())
}
