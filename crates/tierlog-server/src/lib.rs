//! tierlog's HTTP server: the versioned log API (`/v1/…`, described in `docs/server.md`)
//! over an open [`TieredStore`], served by axum on hyper.
//!
//! - [`Server::new`] takes the store (opened by the caller, with its background export,
//!   retention and trim running) and a [`ServerConfig`]; [`Server::serve`] answers on a
//!   bound listener until a shutdown signal, then drains: it stops accepting, ends
//!   follow streams, lets in-flight requests (appends) finish and returns. Closing the
//!   store is the caller's last step ([`TieredStore::close`]).
//! - Bearer tokens ([`ServerConfig::tokens`]): every endpoint but `/healthz` and
//!   `/readyz` then needs `Authorization: Bearer <token>`; [`Token`] never shows its
//!   value in `Debug` or logs.
//! - TLS ([`ServerConfig::tls_cert`], [`ServerConfig::tls_key`]): rustls, PEM files.
//! - [`continuity`]: the rule by which the online verify and the offline `tierlog
//!   verify` judge a topic's continuity (holes, recorded losses), shared by both.
//!
//! The program `tierlog serve` (crate `tierlog`) wires the configuration file and flags
//! to this crate; an embedding can serve its own store the same way.

mod append;
mod auth;
pub mod continuity;
mod error;
mod listen;
mod page;
mod read;
mod routes;
mod stream;

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use metrics_exporter_prometheus::PrometheusHandle;
use serde::{Deserialize, Serialize};
use tier_core::Secret;
use tier_router::TieredStore;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use crate::listen::load_tls;

/// Where `tierlog serve` listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7171";

/// How long a drain waits for in-flight requests by default.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The largest request body accepted by default (an append): 64 MiB, the largest record
/// batch.
pub const MAX_BODY_BYTES: usize = 64 << 20;

/// How many connections (and append streams) a server serves at once by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// The `[server]` table of tierlog's configuration (`docs/server.md`).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address to listen on (default [`DEFAULT_LISTEN`]).
    pub listen: Option<SocketAddr>,
    /// Bearer tokens accepted; none (and no `token_file`) means no authentication.
    pub tokens: Vec<Token>,
    /// A file of bearer tokens, one per line (blank lines and `#` comments skipped); one
    /// that holds no token is refused ([`all_tokens`](Self::all_tokens)).
    pub token_file: Option<PathBuf>,
    /// TLS certificate chain (PEM); with `tls_key`, the listener speaks HTTPS.
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    pub tls_key: Option<PathBuf>,
    /// How long a drain waits for in-flight requests before closing their connections
    /// (default 30 s).
    #[serde(default, with = "humantime_opt")]
    pub drain_timeout: Option<Duration>,
    /// The largest request body, in bytes (default [`MAX_BODY_BYTES`]); larger appends
    /// get `413`.
    pub max_body_bytes: Option<usize>,
    /// How many connections (and append streams) are served at once (default
    /// [`DEFAULT_MAX_CONNECTIONS`]); a connection past it is answered `503` and closed.
    pub max_connections: Option<usize>,
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerConfig")
            .field("listen", &self.listen)
            .field("tokens", &self.tokens)
            .field("token_file", &self.token_file)
            .field("tls_cert", &self.tls_cert)
            .field("tls_key", &self.tls_key)
            .field("drain_timeout", &self.drain_timeout)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_connections", &self.max_connections)
            .finish()
    }
}

impl ServerConfig {
    /// This configuration with the defaults of the keys it leaves out filled in: what a
    /// [`Server`] uses (`listen`, `drain_timeout`, `max_body_bytes`, `max_connections`).
    pub fn with_defaults(&self) -> Self {
        let mut config = self.clone();
        config.listen.get_or_insert_with(|| DEFAULT_LISTEN.parse().expect("the default address parses"));
        config.drain_timeout.get_or_insert(DEFAULT_DRAIN_TIMEOUT);
        config.max_body_bytes.get_or_insert(MAX_BODY_BYTES);
        config.max_connections.get_or_insert(DEFAULT_MAX_CONNECTIONS);
        config
    }

    /// Every token: [`tokens`](Self::tokens) and the lines of
    /// [`token_file`](Self::token_file).
    ///
    /// A token file that holds no token (empty, or blank lines and `#` comments only) is
    /// an error naming it: a server given a token file must refuse requests without a
    /// token, and one without any token would let every request in.
    pub fn all_tokens(&self) -> anyhow::Result<Vec<Token>> {
        let mut tokens = self.tokens.clone();
        if let Some(path) = &self.token_file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the token file {}", path.display()))?;
            let from_file: Vec<Token> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(|l| Token::new(l.to_owned()))
                .collect();
            if from_file.is_empty() {
                anyhow::bail!(
                    "the token file {} holds no token (only blank lines and # comments): a server with it would \
                     let every request in; write one token per line, or leave the token file out to serve \
                     without authentication",
                    path.display()
                );
            }
            tokens.extend(from_file);
        }
        if tokens.iter().any(|t| t.expose().is_empty()) {
            anyhow::bail!("server.tokens: a token is empty");
        }
        Ok(tokens)
    }
}

mod humantime_opt {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(value: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => s.serialize_str(&humantime::format_duration(*d).to_string()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map(Some).map_err(serde::de::Error::custom)
    }
}

/// A bearer token: tier-core's [`Secret`] — it serialises as itself (it is
/// configuration), but `Debug` and `Display` print `***`.
pub type Token = Secret;

/// Whether `candidate` is `token`, in time independent of where they differ.
fn token_matches(token: &Token, candidate: &[u8]) -> bool {
    let own = token.expose().as_bytes();
    own.len() == candidate.len() && own.iter().zip(candidate).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) store: TieredStore,
    pub(crate) metrics: Option<PrometheusHandle>,
    pub(crate) tokens: Arc<[Token]>,
    /// Set when the drain starts: `/readyz` answers 503, follow streams end.
    pub(crate) draining: Arc<AtomicBool>,
    pub(crate) shutdown: watch::Receiver<bool>,
    pub(crate) rates: Arc<page::Rates>,
    /// The largest request body (and batch of an append stream).
    pub(crate) max_body: usize,
    /// Connections and append streams, which the drain waits for.
    pub(crate) tasks: listen::Tasks,
}

impl fmt::Debug for AppState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AppState").field("tokens", &self.tokens.len()).finish_non_exhaustive()
    }
}

/// The HTTP server over one store.
pub struct Server {
    state: AppState,
    tls: Option<tokio_rustls::TlsAcceptor>,
    drain_timeout: Duration,
    max_connections: usize,
    shutdown_tx: watch::Sender<bool>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("state", &self.state)
            .field("tls", &self.tls.is_some())
            .field("drain_timeout", &self.drain_timeout)
            .field("max_connections", &self.max_connections)
            .finish_non_exhaustive()
    }
}

/// Tells a running [`Server`] to drain (from any task).
#[derive(Clone, Debug)]
pub struct ShutdownHandle {
    tx: watch::Sender<bool>,
    draining: Arc<AtomicBool>,
}

impl ShutdownHandle {
    /// Starts the drain: from now on `/readyz` answers 503 and no append stream opens.
    pub fn shutdown(&self) {
        self.draining.store(true, Ordering::SeqCst);
        let _ = self.tx.send(true);
    }
}

impl Server {
    /// A server over `store` as `config` says: tokens (read now, so a missing token file
    /// fails here) and TLS (the certificate and key are loaded now). `metrics` renders
    /// `GET /metrics` (404 without one).
    pub fn new(
        store: TieredStore,
        config: &ServerConfig,
        metrics: Option<PrometheusHandle>,
    ) -> anyhow::Result<Self> {
        let tokens: Arc<[Token]> = config.all_tokens()?.into();
        if config.max_connections == Some(0) {
            anyhow::bail!("server.max_connections must be at least 1");
        }
        let tls = match (&config.tls_cert, &config.tls_key) {
            (Some(cert), Some(key)) => Some(load_tls(cert, key)?),
            (None, None) => None,
            _ => anyhow::bail!("server.tls_cert and server.tls_key go together: give both or neither"),
        };
        let (shutdown_tx, shutdown) = watch::channel(false);
        let state = AppState {
            store,
            metrics,
            tokens,
            draining: Arc::new(AtomicBool::new(false)),
            shutdown,
            rates: Arc::new(page::Rates::default()),
            max_body: config.max_body_bytes.unwrap_or(MAX_BODY_BYTES),
            tasks: listen::Tasks::new(),
        };
        Ok(Self {
            state,
            tls,
            drain_timeout: config.drain_timeout.unwrap_or(DEFAULT_DRAIN_TIMEOUT),
            max_connections: config.max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS),
            shutdown_tx,
        })
    }

    /// Whether the listener speaks TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A handle that starts the drain.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle { tx: self.shutdown_tx.clone(), draining: Arc::clone(&self.state.draining) }
    }

    /// The application (routes and authentication), for serving by other means.
    pub fn router(&self) -> axum::Router {
        routes::router(self.state.clone())
    }

    /// Serves on `listener` until the shutdown handle fires, then drains: stops
    /// accepting, ends follow streams, waits (up to the drain timeout) for in-flight
    /// requests to finish. The store stays open: close it afterwards.
    pub async fn serve(self, listener: TcpListener) -> anyhow::Result<()> {
        let app = self.router();
        let shutdown = self.state.shutdown.clone();
        let limits =
            listen::Limits { drain_timeout: self.drain_timeout, max_connections: self.max_connections };
        listen::serve(listener, self.tls, app, shutdown, self.state.tasks.clone(), limits).await
    }
}

#[cfg(test)]
mod tests;
