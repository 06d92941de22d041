//! `tierlog serve`: opens the store the configuration describes, with its background
//! export, retention and warm trim running, and serves the HTTP API of
//! `tierlog-server` (`docs/server.md`) until SIGTERM or SIGINT; then drains (no new
//! connections, follow streams ended, in-flight appends finished), closes the store
//! (which flushes, seals and exports per configuration) and exits 0. A second signal
//! during the drain exits 1 at once, leaving the store to recovery at the next start.
//!
//! The first line on stdout is the URL the server listens on (`http://127.0.0.1:PORT`,
//! `https://…` with TLS), printed once the store is open and the port bound, so a
//! script or test starting it with `--listen 127.0.0.1:0` learns the port.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tierlog_server::{DEFAULT_LISTEN, Server, ServerConfig};
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use tracing::info;

use crate::cmd::{Ctx, inspect};
use crate::{exit, store};

/// `tierlog serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on (default: server.listen, else 127.0.0.1:7171; port 0 picks a
    /// free port). The URL is printed as the first line on stdout.
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<SocketAddr>,
    /// TLS certificate chain (PEM); with --tls-key the listener speaks HTTPS.
    #[arg(long, value_name = "PATH", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    #[arg(long, value_name = "PATH", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
    /// File of bearer tokens, one per line: every request but /healthz and /readyz then
    /// needs `Authorization: Bearer <token>`. A file holding no token (blank lines and #
    /// comments only) is refused.
    #[arg(long, value_name = "PATH")]
    pub(crate) token_file: Option<PathBuf>,
}

/// The `[server]` table with the flags applied.
fn effective(mut config: ServerConfig, args: ServeArgs) -> ServerConfig {
    if let Some(listen) = args.listen {
        config.listen = Some(listen);
    }
    if let (Some(cert), Some(key)) = (args.tls_cert, args.tls_key) {
        config.tls_cert = Some(cert);
        config.tls_key = Some(key);
    }
    if let Some(file) = args.token_file {
        config.token_file = Some(file);
    }
    config
}

/// Runs the command.
pub(crate) async fn run(ctx: &Ctx, args: ServeArgs) -> anyhow::Result<u8> {
    let server_config = effective(ctx.loaded.server.clone(), args);
    // Everything that can be wrong with the server's own settings fails before the store
    // is opened: the tokens and the TLS files are read, the address bound.
    server_config.all_tokens()?;
    if let (Some(cert), Some(key)) = (&server_config.tls_cert, &server_config.tls_key) {
        tierlog_server::load_tls(cert, key)?;
    }
    let addr = match server_config.listen {
        Some(addr) => addr,
        None => DEFAULT_LISTEN.parse().expect("the default address parses"),
    };
    let listener = TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr().context("the listener's address")?;
    let metrics = crate::metrics::install()?;

    let config = ctx.config();
    let mut topics = inspect::wal_topics(&config.hot.data_dir)?;
    if let Some(cold) = &config.cold {
        topics.extend(inspect::cold_topics(&store::open_cold(cold).await?).await?);
    }
    topics.sort();
    topics.dedup();
    let store = store::open(config, topics, true).await?;
    let server = match Server::new(store.clone(), &server_config, Some(metrics)) {
        Ok(server) => server,
        Err(e) => {
            store.close().await;
            return Err(e);
        }
    };
    // The handlers are in place before the URL is printed: a signal sent as soon as the
    // line is read drains.
    let mut terminate = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let scheme = if server.is_tls() { "https" } else { "http" };
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{scheme}://{local}").and_then(|()| stdout.flush()).context("writing to stdout")?;
    }
    info!(%local, "serving");
    let handle = server.shutdown_handle();
    tokio::spawn(async move {
        tokio::select! {
            _ = terminate.recv() => info!("SIGTERM: draining"),
            _ = interrupt.recv() => info!("SIGINT: draining"),
        }
        handle.shutdown();
        // A second signal during the drain (a client holding a response, up to
        // server.drain_timeout) stops at once, as a crash would: the next start recovers.
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        eprintln!("error: a second signal during the drain: exiting without closing the store");
        std::process::exit(i32::from(exit::ERROR));
    });
    let served = server.serve(listener).await;
    store.close().await;
    info!("drained; the store is closed");
    served?;
    Ok(exit::OK)
}
