//! The shared test servers (one Valkey primary + replica, one moto S3 server) started
//! through tier-testkit's harness, for `cargo xtask test` and `cargo xtask servers`.

use anyhow::{Context, Result};
use tier_testkit::servers::{SharedServers, start_shared_servers_for_xtask};

/// Starts the shared servers; they run until the returned value is dropped (which kills
/// each by its PID).
pub(crate) fn start() -> Result<SharedServers> {
    start_shared_servers_for_xtask().context("starting the shared Valkey pair and S3 server")
}

/// One line per server: kind, address, PID.
pub(crate) fn describe(servers: &SharedServers) -> Vec<String> {
    let pid = |p: Option<u32>| p.map_or_else(|| "?".to_owned(), |p| p.to_string());
    vec![
        format!(
            "{}: primary {} (pid {}), replica {} (pid {})",
            servers.valkey.server_kind(),
            servers.valkey.primary_url(),
            pid(servers.valkey.primary_pid()),
            servers.valkey.replica_url(),
            pid(servers.valkey.replica_pid()),
        ),
        format!("moto S3: {} (pid {})", servers.s3.endpoint(), pid(servers.s3.pid())),
    ]
}

/// `export NAME='value'` lines a developer can paste into a shell.
pub(crate) fn exports(servers: &SharedServers) -> Vec<String> {
    servers.env_vars().into_iter().map(|(name, value)| format!("export {name}='{value}'")).collect()
}

/// `cargo xtask servers`: start, print, wait for Ctrl-C, stop.
pub(crate) fn run() -> Result<()> {
    let servers = start()?;
    for line in describe(&servers) {
        println!("{line}");
    }
    println!("\n# paste into another shell to run tests against these servers:");
    for line in exports(&servers) {
        println!("{line}");
    }
    println!("\nPress Ctrl-C to stop the servers.");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building a Tokio runtime to wait for Ctrl-C")?;
    runtime.block_on(tokio::signal::ctrl_c()).context("waiting for Ctrl-C")?;
    drop(servers);
    println!("servers stopped");
    Ok(())
}
