//! The accept loop: HTTP/1.1 on plain TCP or rustls, one task per connection, and the
//! drain (stop accepting, let connections finish their requests, bounded by a timeout).

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
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

/// Serves `app` on `listener` until `signal` completes, then drains.
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    app: axum::Router,
    signal: impl Future<Output = ()>,
    drain_timeout: Duration,
) -> anyhow::Result<()> {
    let graceful = GracefulShutdown::new();
    tokio::pin!(signal);
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
            () = &mut signal => break,
        };
        let _ = tcp.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let watcher = graceful.watcher();
        let tls = tls.clone();
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            // Also the longest a kept-alive connection waits idle for its next request
            // (tierlog-client's pool drops idle connections after 20 s).
            builder.timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(30));
            let result = match tls {
                None => watcher.watch(builder.serve_connection(TokioIo::new(tcp), service)).await,
                Some(acceptor) => match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                    Ok(Ok(stream)) => {
                        watcher.watch(builder.serve_connection(TokioIo::new(stream), service)).await
                    }
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
    info!(connections = graceful.count(), "draining: no new connections; waiting for requests in flight");
    if tokio::time::timeout(drain_timeout, graceful.shutdown()).await.is_err() {
        warn!(timeout = ?drain_timeout, "drain timed out: closing the remaining connections");
    }
    Ok(())
}
