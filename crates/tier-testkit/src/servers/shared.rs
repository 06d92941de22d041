//! Servers shared by a whole test run (`cargo xtask test`) or, when a crate's tests run
//! alone, private servers shared by the tests of one process that overlap in time.

use std::{
    env,
    sync::{
        Arc, OnceLock, Weak,
        atomic::{AtomicU64, Ordering},
    },
    time::{SystemTime, UNIX_EPOCH},
};

use tokio::sync::Mutex;

use super::{HarnessError, S3Server, S3Settings, ValkeyPair};

/// URL of the shared Valkey primary (`redis://127.0.0.1:P`), set by `cargo xtask test`.
pub const ENV_VALKEY_PRIMARY: &str = "TIERLOG_TEST_VALKEY_PRIMARY";
/// URL of the shared primary's replica.
pub const ENV_VALKEY_REPLICA: &str = "TIERLOG_TEST_VALKEY_REPLICA";
/// Which server the shared pair runs, e.g. `valkey 8.0.1`.
pub const ENV_VALKEY_KIND: &str = "TIERLOG_TEST_VALKEY_KIND";
/// Endpoint of the shared moto server (`http://127.0.0.1:P`).
pub const ENV_S3_ENDPOINT: &str = "TIERLOG_TEST_S3_ENDPOINT";

/// Private servers of this process, alive while some guard holds them.
static PRIVATE_VALKEY: Mutex<Weak<ValkeyPair>> = Mutex::const_new(Weak::new());
static PRIVATE_S3: Mutex<Weak<S3Server>> = Mutex::const_new(Weak::new());

/// A unique name part: this process, its start time and a counter. Only ASCII lowercase
/// letters, digits and `-`, so it fits key prefixes, topic names and bucket names.
fn unique_suffix() -> String {
    static STARTED: OnceLock<u128> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // A name part unique across test processes, not a time the store sees
    #[allow(clippy::disallowed_methods)]
    let started = *STARTED
        .get_or_init(|| SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{}-{:x}-{n}", std::process::id(), started % (1 << 48))
}

/// A Valkey pair to test against, with a key prefix no other caller uses.
///
/// From the `TIERLOG_TEST_VALKEY_*` variables when `cargo xtask test` set them, else
/// a private [`ValkeyPair`] owned by this guard (and shared with other guards of the
/// process alive at the same time). Never stop or restart these servers: tests that do
/// start their own [`ValkeyPair`].
#[derive(Debug)]
pub struct SharedValkey {
    primary_url: String,
    replica_url: String,
    server_kind: String,
    key_prefix: String,
    private: Option<Arc<ValkeyPair>>,
}

impl SharedValkey {
    /// Settings from the environment, or private servers started now.
    pub async fn get() -> Result<Self, HarnessError> {
        Self::get_with(|name| env::var(name).ok()).await
    }

    /// [`get`](Self::get) with the `TIERLOG_TEST_*` variables read through `lookup`
    /// instead of the process environment.
    pub async fn get_with(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, HarnessError> {
        let key_prefix = format!("t{}-", unique_suffix());
        if let Some(primary_url) = lookup(ENV_VALKEY_PRIMARY).filter(|s| !s.is_empty()) {
            let replica_url = lookup(ENV_VALKEY_REPLICA).ok_or_else(|| HarnessError::NotInstalled {
                message: format!("{ENV_VALKEY_PRIMARY} is set but {ENV_VALKEY_REPLICA} is not"),
            })?;
            let server_kind = lookup(ENV_VALKEY_KIND).unwrap_or_else(|| "unknown".into());
            return Ok(Self { primary_url, replica_url, server_kind, key_prefix, private: None });
        }
        let mut slot = PRIVATE_VALKEY.lock().await;
        let pair = match slot.upgrade() {
            Some(pair) => pair,
            None => {
                let pair = Arc::new(ValkeyPair::start().await?);
                *slot = Arc::downgrade(&pair);
                pair
            }
        };
        Ok(Self {
            primary_url: pair.primary_url(),
            replica_url: pair.replica_url(),
            server_kind: pair.server_kind(),
            key_prefix,
            private: Some(pair),
        })
    }

    /// `redis://127.0.0.1:P` of the primary.
    pub fn primary_url(&self) -> &str {
        &self.primary_url
    }

    /// `redis://127.0.0.1:P` of the replica.
    pub fn replica_url(&self) -> &str {
        &self.replica_url
    }

    /// e.g. `valkey 8.0.1`.
    pub fn server_kind(&self) -> &str {
        &self.server_kind
    }

    /// A prefix for every key (or topic) this caller creates, unique to it: ASCII
    /// lowercase letters, digits and `-`, ending in `-`.
    pub fn key_prefix(&self) -> &str {
        &self.key_prefix
    }

    /// True when the servers were started by this process rather than by xtask.
    pub fn is_private(&self) -> bool {
        self.private.is_some()
    }
}

/// An S3 endpoint to test against, with a fresh bucket already created for this caller.
///
/// From `TIERLOG_TEST_S3_ENDPOINT` when `cargo xtask test` set it, else a private
/// [`S3Server`] owned by this guard (and shared with other guards of the process alive
/// at the same time). Never reset, stop or restart it: tests that do start their own.
#[derive(Debug)]
pub struct SharedS3 {
    settings: S3Settings,
    bucket: String,
    private: Option<Arc<S3Server>>,
}

impl SharedS3 {
    /// Settings from the environment, or a private server started now; then creates a
    /// bucket no other caller uses.
    pub async fn get() -> Result<Self, HarnessError> {
        Self::get_with(|name| env::var(name).ok()).await
    }

    /// [`get`](Self::get) with `TIERLOG_TEST_S3_ENDPOINT` read through `lookup` instead
    /// of the process environment.
    pub async fn get_with(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, HarnessError> {
        let (settings, private) = match lookup(ENV_S3_ENDPOINT).filter(|s| !s.is_empty()) {
            Some(endpoint) => (S3Settings::moto(endpoint), None),
            None => {
                let mut slot = PRIVATE_S3.lock().await;
                let server = match slot.upgrade() {
                    Some(server) => server,
                    None => {
                        let server = Arc::new(S3Server::start().await?);
                        *slot = Arc::downgrade(&server);
                        server
                    }
                };
                (server.settings(), Some(server))
            }
        };
        let bucket = format!("tierlog-{}", unique_suffix());
        settings.create_bucket(&bucket).await?;
        Ok(Self { settings, bucket, private })
    }

    /// Endpoint, region and keys.
    pub fn settings(&self) -> &S3Settings {
        &self.settings
    }

    /// `http://127.0.0.1:P`.
    pub fn endpoint(&self) -> &str {
        &self.settings.endpoint
    }

    /// The bucket created for this caller.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// True when the server was started by this process rather than by xtask.
    pub fn is_private(&self) -> bool {
        self.private.is_some()
    }
}

/// The servers `cargo xtask test` runs for the whole test run. Dropping it kills them.
#[derive(Debug)]
pub struct SharedServers {
    /// The Valkey primary and replica.
    pub valkey: ValkeyPair,
    /// The moto server.
    pub s3: S3Server,
}

impl SharedServers {
    /// Starts a [`ValkeyPair`] and an [`S3Server`].
    pub async fn start() -> Result<Self, HarnessError> {
        let valkey = ValkeyPair::start().await?;
        let s3 = S3Server::start().await?;
        Ok(Self { valkey, s3 })
    }

    /// The variables to export to test processes so [`SharedValkey`] and [`SharedS3`]
    /// use these servers.
    pub fn env_vars(&self) -> Vec<(&'static str, String)> {
        vec![
            (ENV_VALKEY_PRIMARY, self.valkey.primary_url()),
            (ENV_VALKEY_REPLICA, self.valkey.replica_url()),
            (ENV_VALKEY_KIND, self.valkey.server_kind()),
            (ENV_S3_ENDPOINT, self.s3.endpoint()),
        ]
    }
}

/// Blocking [`SharedServers::start`] for xtask (which has no async runtime). The servers
/// keep running after this returns, until the returned value is dropped.
///
/// # Panics
/// If called from inside a Tokio runtime (use [`SharedServers::start`] there).
pub fn start_shared_servers_for_xtask() -> Result<SharedServers, HarnessError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| HarnessError::io("building a Tokio runtime", e))?;
    runtime.block_on(SharedServers::start())
}
