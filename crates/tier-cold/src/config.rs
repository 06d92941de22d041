//! [`ColdConfig`]: where the cold tier stores objects and how it reads and writes them.
//! Every field has a default, so an empty TOML table is a valid configuration (a local
//! directory `./data/cold`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use serde::{Deserialize, Serialize};
pub use tier_core::Secret;
use tier_core::{ErrorContext, TierError, TierKind};

/// Which object store holds the segments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
#[non_exhaustive]
pub enum BackendConfig {
    /// A local directory (object_store's `LocalFileSystem`); created if missing.
    Local {
        /// The directory.
        path: PathBuf,
    },
    /// Amazon S3 or an S3-compatible server.
    S3 {
        /// Bucket name.
        bucket: String,
        /// Region to sign for.
        #[serde(default = "default_region")]
        region: String,
        /// Endpoint URL for S3-compatible servers (path-style requests); `None` for AWS.
        #[serde(default)]
        endpoint: Option<String>,
        /// Access key id; `None` to use the environment / instance credentials.
        #[serde(default)]
        access_key_id: Option<String>,
        /// Secret access key (never printed).
        #[serde(default)]
        secret_access_key: Option<Secret>,
        /// Allow plain `http://` endpoints (test servers).
        #[serde(default)]
        allow_http: bool,
        /// Server-side encryption requested on every object written (PUT and multipart
        /// upload); `None` sends no encryption header, leaving it to the bucket's default.
        #[serde(default)]
        encryption: Option<S3Encryption>,
    },
    /// Google Cloud Storage (object_store's client speaks GCS's XML API).
    #[cfg(feature = "gcp")]
    Gcs {
        /// Bucket name.
        bucket: String,
        /// Path of a service account JSON file; `None` for application default credentials.
        #[serde(default)]
        service_account_path: Option<PathBuf>,
        /// Base URL of the storage service (an emulator); `None` for
        /// `https://storage.googleapis.com`.
        #[serde(default)]
        base_url: Option<String>,
        /// Send requests without credentials (an emulator that checks none); excludes
        /// `service_account_path`.
        #[serde(default)]
        anonymous: bool,
        /// Allow a plain `http://` base URL (test servers).
        #[serde(default)]
        allow_http: bool,
    },
    /// Azure Blob Storage.
    #[cfg(feature = "azure")]
    Azure {
        /// Storage account.
        account: String,
        /// Container.
        container: String,
        /// Account access key (never printed); `None` for the environment's credentials.
        #[serde(default)]
        access_key: Option<Secret>,
        /// URL of the account's Blob service: `None` for
        /// `https://<account>.blob.core.windows.net`; an emulator's path-style URL such as
        /// Azurite's `http://127.0.0.1:10000/devstoreaccount1`.
        #[serde(default)]
        endpoint: Option<String>,
        /// Allow a plain `http://` endpoint (test servers).
        #[serde(default)]
        allow_http: bool,
    },
}

/// S3 server-side encryption of the objects tier-cold writes: the
/// `x-amz-server-side-encryption` headers object_store's S3 client sends with each PUT
/// and multipart upload. Reads need no setting: S3 decrypts SSE-S3 and SSE-KMS objects
/// for any caller allowed to read them (and, for SSE-KMS, to use the key).
///
/// In TOML: `encryption = { kind = "sse-s3" }` or
/// `encryption = { kind = "sse-kms", key_id = "arn:aws:kms:…", bucket_key = true }`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", deny_unknown_fields)]
#[non_exhaustive]
pub enum S3Encryption {
    /// SSE-S3: keys S3 manages (`x-amz-server-side-encryption: AES256`). A struct
    /// variant so that TOML naming a field it has not (`key_id`) is refused.
    #[serde(rename = "sse-s3")]
    SseS3 {},
    /// SSE-KMS (`x-amz-server-side-encryption: aws:kms`).
    #[serde(rename = "sse-kms")]
    SseKms {
        /// The KMS key (id, ARN or alias; not a secret) sent as
        /// `x-amz-server-side-encryption-aws-kms-key-id`; `None` for the AWS-managed
        /// `aws/s3` key or the bucket's default key.
        #[serde(default)]
        key_id: Option<String>,
        /// `x-amz-server-side-encryption-bucket-key-enabled`: whether S3 uses a bucket
        /// key (fewer KMS requests); `None` keeps the bucket's setting.
        #[serde(default)]
        bucket_key: Option<bool>,
    },
}

impl S3Encryption {
    /// Applies the setting to an S3 client builder.
    fn apply(
        &self,
        builder: object_store::aws::AmazonS3Builder,
    ) -> Result<object_store::aws::AmazonS3Builder, object_store::Error> {
        use object_store::aws::AmazonS3ConfigKey;
        let encryption_type = |value: &str| -> Result<_, object_store::Error> {
            let key: AmazonS3ConfigKey = "aws_server_side_encryption".parse()?;
            Ok((key, value.to_owned()))
        };
        Ok(match self {
            S3Encryption::SseS3 {} => {
                let (key, value) = encryption_type("AES256")?;
                builder.with_config(key, value)
            }
            S3Encryption::SseKms { key_id, bucket_key } => {
                let mut builder = match key_id {
                    Some(id) => builder.with_sse_kms_encryption(id),
                    None => {
                        let (key, value) = encryption_type("aws:kms")?;
                        builder.with_config(key, value)
                    }
                };
                if let Some(enabled) = bucket_key {
                    builder = builder.with_bucket_key(*enabled);
                }
                builder
            }
        })
    }
}

/// Checks an endpoint URL of `what` (a TOML key) in the backend configuration: `http://`
/// or `https://` followed by a host, and `http://` only with `allow_http`.
#[cfg(any(feature = "gcp", feature = "azure"))]
fn check_endpoint(what: &str, url: Option<&str>, allow_http: bool) -> Result<(), TierError> {
    let Some(url) = url else { return Ok(()) };
    let rest = if let Some(rest) = url.strip_prefix("https://") {
        rest
    } else if let Some(rest) = url.strip_prefix("http://") {
        if !allow_http {
            return Err(config_error(format!(
                "{what} {url:?} is plain http://: set allow_http = true to use it (test servers only)"
            )));
        }
        rest
    } else {
        return Err(config_error(format!("{what} {url:?} must start with https:// (or http://)")));
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(config_error(format!("{what} {url:?} names no host")));
    }
    Ok(())
}

/// Checks that the name `what` (a TOML key) is not empty.
fn check_named(what: &str, value: &str) -> Result<(), TierError> {
    if value.trim().is_empty() {
        return Err(config_error(format!("{what} must not be empty")));
    }
    Ok(())
}

impl BackendConfig {
    /// Checks the backend's settings that can be checked without a request: names that
    /// must not be empty, endpoint URLs (`http://` only with `allow_http`), and settings
    /// that exclude each other.
    pub fn validate(&self) -> Result<(), TierError> {
        match self {
            BackendConfig::Local { .. } => Ok(()),
            BackendConfig::S3 { bucket, encryption, .. } => {
                check_named("backend.bucket", bucket)?;
                if let Some(S3Encryption::SseKms { key_id: Some(id), .. }) = encryption {
                    check_named("backend.encryption.key_id", id)?;
                }
                Ok(())
            }
            #[cfg(feature = "gcp")]
            BackendConfig::Gcs { bucket, service_account_path, base_url, anonymous, allow_http } => {
                check_named("backend.bucket", bucket)?;
                check_endpoint("backend.base_url", base_url.as_deref(), *allow_http)?;
                if *anonymous && service_account_path.is_some() {
                    return Err(config_error(
                        "backend.anonymous sends no credentials, so it excludes backend.service_account_path",
                    ));
                }
                Ok(())
            }
            #[cfg(feature = "azure")]
            BackendConfig::Azure { account, container, endpoint, allow_http, .. } => {
                check_named("backend.account", account)?;
                check_named("backend.container", container)?;
                check_endpoint("backend.endpoint", endpoint.as_deref(), *allow_http)
            }
        }
    }
}

fn default_region() -> String {
    "us-east-1".into()
}

impl Default for BackendConfig {
    fn default() -> Self {
        BackendConfig::Local { path: PathBuf::from("./data/cold") }
    }
}

/// Retries of failed requests (5xx, timeouts, connection errors), done by object_store's
/// HTTP client with exponential backoff. Not used by the local backend.
///
/// Non-exhaustive: outside this crate, start from [`RetrySettings::default`] (or the
/// [`ColdConfig::retry`] of a configuration) and set the fields you need.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RetrySettings {
    /// Retries after the first attempt (0 disables retries). Default 10.
    pub max_retries: usize,
    /// First backoff. Default 100 ms.
    #[serde(with = "humantime_serde")]
    pub init_backoff: Duration,
    /// Largest backoff. Default 15 s.
    #[serde(with = "humantime_serde")]
    pub max_backoff: Duration,
    /// Backoff multiplier. Default 2.
    pub backoff_base: f64,
    /// No retry starts this long after the first attempt. Default 3 min.
    #[serde(with = "humantime_serde")]
    pub retry_timeout: Duration,
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self {
            max_retries: 10,
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(15),
            backoff_base: 2.0,
            retry_timeout: Duration::from_secs(180),
        }
    }
}

impl RetrySettings {
    /// As object_store's `RetryConfig`.
    pub fn to_retry_config(&self) -> object_store::RetryConfig {
        object_store::RetryConfig {
            backoff: object_store::BackoffConfig {
                init_backoff: self.init_backoff,
                max_backoff: self.max_backoff,
                base: self.backoff_base,
            },
            max_retries: self.max_retries,
            retry_timeout: self.retry_timeout,
        }
    }
}

/// The cold tier's configuration.
///
/// Non-exhaustive, so that a new setting is not a breaking change: outside this crate,
/// start from [`ColdConfig::new`], [`ColdConfig::local`] (or [`ColdConfig::default`])
/// and set the fields you need.
///
/// ```
/// use std::time::Duration;
/// use tier_cold::{BackendConfig, ColdConfig, S3Encryption, Secret};
///
/// let mut config = ColdConfig::new(BackendConfig::S3 {
///     bucket: "segments".into(),
///     region: "eu-west-1".into(),
///     endpoint: None,
///     access_key_id: Some("AKIA…".into()),
///     secret_access_key: Some(Secret::new("…")),
///     allow_http: false,
///     encryption: Some(S3Encryption::SseS3 {}),
/// });
/// config.prefix = "prod".into();
/// config.retry.max_retries = 3;
/// config.expiry = Some(Duration::from_secs(30 * 86_400));
/// assert!(config.validate().is_ok());
///
/// let local = ColdConfig::local("/var/lib/tierlog/cold");
/// assert_eq!(local.part_size, config.part_size);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ColdConfig {
    /// Where the objects live.
    pub backend: BackendConfig,
    /// Folder inside the bucket / directory under which each topic has a folder.
    /// Default `""` (the root).
    pub prefix: String,
    /// Largest ranged GET of data a sequential [`stream`](crate::ColdTier::stream) makes
    /// (whole index intervals, at least one). Default 1 MiB.
    pub read_buffer: u64,
    /// Ranged GETs a stream keeps in flight ahead of the consumer. Default 4.
    pub read_ahead: usize,
    /// Segment metadata (trailer + index) entries kept in the LRU cache. Default 1024.
    pub index_cache_entries: usize,
    /// Bytes of recently fetched data intervals kept in an LRU cache for seeks and
    /// bounded reads (so `read(offset_for_timestamp(t))` fetches the interval once);
    /// sequential [`stream`](crate::ColdTier::stream)s bypass it. An interval larger
    /// than this is not cached; 0 disables the cache. Default 4 MiB.
    pub data_cache_bytes: u64,
    /// Bytes fetched from an object's end to read its trailer and index in one request;
    /// raised per object to hold the whole index of a segment written with
    /// `index_interval_bytes`. Default 64 KiB.
    pub tail_fetch_bytes: u64,
    /// Index interval of the segments this tier writes itself (on `append`), and the
    /// interval assumed when sizing tail fetches. Default 64 KiB.
    pub index_interval_bytes: u32,
    /// Segments larger than this are uploaded with a multipart upload. Default 8 MiB.
    pub multipart_threshold: u64,
    /// Size of each multipart part (at least 5 MiB, S3's minimum). Default 8 MiB.
    pub part_size: u64,
    /// Parts uploaded concurrently. Default 4.
    pub upload_concurrency: usize,
    /// Retries of failed requests.
    pub retry: RetrySettings,
    /// When set, segments whose newest record is older than this may be deleted by
    /// [`ColdTier::expire`](crate::ColdTier::expire). Default: never (`None`).
    #[serde(with = "humantime_serde")]
    pub expiry: Option<Duration>,
}

/// S3's smallest part (except the last).
pub const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;

impl Default for ColdConfig {
    fn default() -> Self {
        Self {
            backend: BackendConfig::default(),
            prefix: String::new(),
            read_buffer: 1 << 20,
            read_ahead: 4,
            index_cache_entries: 1024,
            data_cache_bytes: 4 << 20,
            tail_fetch_bytes: tier_core::segment::DEFAULT_TAIL_FETCH_BYTES,
            index_interval_bytes: tier_core::segment::DEFAULT_INDEX_INTERVAL_BYTES,
            multipart_threshold: 8 << 20,
            part_size: 8 << 20,
            upload_concurrency: 4,
            retry: RetrySettings::default(),
            expiry: None,
        }
    }
}

fn config_error(message: impl Into<String>) -> TierError {
    TierError::invalid(ErrorContext::tier(TierKind::Cold).location("cold config"), message)
}

impl ColdConfig {
    /// A configuration storing into `backend`, other fields default.
    pub fn new(backend: BackendConfig) -> Self {
        Self { backend, ..Self::default() }
    }

    /// A configuration storing into the local directory `path`, other fields default.
    pub fn local(path: impl Into<PathBuf>) -> Self {
        Self::new(BackendConfig::Local { path: path.into() })
    }

    /// Checks the numbers make sense (`part_size >= 5 MiB`, `multipart_threshold >=
    /// part_size`, non-zero buffers and concurrency) and the backend
    /// ([`BackendConfig::validate`]).
    pub fn validate(&self) -> Result<(), TierError> {
        self.backend.validate()?;
        if self.part_size < MIN_PART_SIZE {
            return Err(config_error(format!(
                "part_size {} is below S3's minimum {MIN_PART_SIZE}",
                self.part_size
            )));
        }
        if self.multipart_threshold < self.part_size {
            return Err(config_error("multipart_threshold must be at least part_size"));
        }
        if self.read_buffer == 0 || self.read_ahead == 0 || self.upload_concurrency == 0 {
            return Err(config_error("read_buffer, read_ahead and upload_concurrency must be positive"));
        }
        Ok(())
    }

    /// Builds the object store the backend describes. Credentials go to the client only.
    pub fn build_store(&self) -> Result<Arc<dyn ObjectStore>, TierError> {
        let failed = |what: &str, e: object_store::Error| {
            TierError::invalid(
                ErrorContext::tier(TierKind::Cold).location("cold config"),
                format!("building the {what} object store"),
            )
            .with_source(e)
        };
        match &self.backend {
            BackendConfig::Local { path } => {
                std::fs::create_dir_all(path).map_err(|e| {
                    TierError::unavailable(
                        ErrorContext::tier(TierKind::Cold).location(path.display().to_string()),
                        "creating the cold directory",
                    )
                    .with_source(e)
                })?;
                let store = LocalFileSystem::new_with_prefix(path).map_err(|e| failed("local", e))?;
                Ok(Arc::new(store))
            }
            BackendConfig::S3 {
                bucket,
                region,
                endpoint,
                access_key_id,
                secret_access_key,
                allow_http,
                encryption,
            } => {
                self.backend.validate()?;
                let mut b = object_store::aws::AmazonS3Builder::new()
                    .with_bucket_name(bucket)
                    .with_region(region)
                    .with_allow_http(*allow_http)
                    .with_retry(self.retry.to_retry_config());
                if let Some(endpoint) = endpoint {
                    b = b.with_endpoint(endpoint);
                }
                if let Some(id) = access_key_id {
                    b = b.with_access_key_id(id);
                }
                if let Some(secret) = secret_access_key {
                    b = b.with_secret_access_key(secret.expose());
                }
                if let Some(encryption) = encryption {
                    b = encryption.apply(b).map_err(|e| failed("S3", e))?;
                }
                Ok(Arc::new(b.build().map_err(|e| failed("S3", e))?))
            }
            #[cfg(feature = "gcp")]
            BackendConfig::Gcs { bucket, service_account_path, base_url, anonymous, allow_http } => {
                self.backend.validate()?;
                let mut b = object_store::gcp::GoogleCloudStorageBuilder::new()
                    .with_bucket_name(bucket)
                    .with_client_options(object_store::ClientOptions::new().with_allow_http(*allow_http))
                    .with_skip_signature(*anonymous)
                    .with_retry(self.retry.to_retry_config());
                if let Some(p) = service_account_path {
                    b = b.with_service_account_path(p.display().to_string());
                }
                if let Some(url) = base_url {
                    b = b.with_base_url(url.trim_end_matches('/'));
                }
                if *anonymous {
                    // No credential is read or fetched (application default credentials, the
                    // metadata server): requests carry none.
                    b = b.with_credentials(Arc::new(object_store::StaticCredentialProvider::new(
                        object_store::gcp::GcpCredential { bearer: String::new() },
                    )));
                }
                Ok(Arc::new(b.build().map_err(|e| failed("GCS", e))?))
            }
            #[cfg(feature = "azure")]
            BackendConfig::Azure { account, container, access_key, endpoint, allow_http } => {
                self.backend.validate()?;
                let mut b = object_store::azure::MicrosoftAzureBuilder::new()
                    .with_account(account)
                    .with_container_name(container)
                    .with_allow_http(*allow_http)
                    .with_retry(self.retry.to_retry_config());
                if let Some(k) = access_key {
                    b = b.with_access_key(k.expose());
                }
                if let Some(url) = endpoint {
                    b = b.with_endpoint(url.trim_end_matches('/').to_owned());
                }
                Ok(Arc::new(b.build().map_err(|e| failed("Azure", e))?))
            }
        }
    }
}
