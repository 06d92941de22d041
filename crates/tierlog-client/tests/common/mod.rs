//! What the client's tests share: a store served in this process.

use tier_router::TieredStore;
use tierlog_server::{Server, ServerConfig, ShutdownHandle};

/// `store` served on a free 127.0.0.1 port: its URL, the handle that drains it and the
/// serving task.
pub(crate) async fn serve(
    store: &TieredStore,
    config: &ServerConfig,
) -> (String, ShutdownHandle, tokio::task::JoinHandle<anyhow::Result<()>>) {
    let server = Server::new(store.clone(), config, None).expect("server");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let shutdown = server.shutdown_handle();
    (url, shutdown, tokio::spawn(server.serve(listener)))
}
