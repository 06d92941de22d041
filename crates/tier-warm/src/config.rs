//! Configuration of the warm tier, loadable from TOML by the router and the CLI.
//!
//! Every field has a default, so an empty table is a valid configuration (one local
//! standalone server, `WAIT 1` within 100 ms). Durations are written as humantime
//! strings (`"100ms"`, `"2s"`). Credentials are wrapped in [`Secret`], which never
//! prints its contents.

use std::{fmt, time::Duration};

use serde::{Deserialize, Serialize};
pub use tier_core::Secret;

/// How the warm tier reaches Valkey/Redis.
///
/// `Debug` hides the password and any password embedded in a URL.
///
/// Non-exhaustive, so that a new setting is not a breaking change: outside this crate,
/// start from [`WarmConfig::standalone`] (or [`WarmConfig::default`]) and set the fields
/// you need.
///
/// ```
/// use std::time::Duration;
/// use tier_warm::{Mode, Secret, WarmConfig};
///
/// let mut config = WarmConfig::standalone("rediss://cache-1:6380");
/// config.password = Some(Secret::new("hunter2"));
/// config.wait_timeout = Duration::from_millis(250);
/// config.reconnect.max_attempts = 5;
/// assert_eq!(config.mode, Mode::Standalone);
/// assert!(!format!("{config:?}").contains("hunter2"));
/// ```
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct WarmConfig {
    /// Server URLs (`redis://host:port`, `rediss://…` for TLS; `valkey://` works too).
    /// Standalone mode uses the first; cluster mode uses every one as a seed node;
    /// sentinel mode lists the sentinels.
    pub urls: Vec<String>,
    /// Deployment topology.
    pub mode: Mode,
    /// Connect with TLS (rustls, system roots) even when the URL scheme does not ask.
    pub tls: bool,
    /// ACL user name; `None` uses the URL's, if any.
    pub username: Option<String>,
    /// Password; `None` uses the URL's, if any. Never printed.
    pub password: Option<Secret>,
    /// Prefix of every stream key: a topic's stream is `<key_prefix><topic>`.
    pub key_prefix: String,
    /// Replicas that must acknowledge each append (`WAIT`); 0 skips `WAIT`.
    pub wait_replicas: u32,
    /// How long `WAIT` may block for the replicas.
    #[serde(with = "humantime_serde")]
    pub wait_timeout: Duration,
    /// Upper bound on one operation's round trips (on top of `wait_timeout` for
    /// appends). An unreachable server turns into `Unavailable` within this time.
    #[serde(with = "humantime_serde")]
    pub command_timeout: Duration,
    /// Upper bound on establishing a connection (TCP, TLS, AUTH).
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// How the client reconnects after losing the server.
    pub reconnect: ReconnectConfig,
    /// Stream entries (= batches) fetched per `XRANGE` page when reading or scanning.
    pub page_size: u32,
}

impl Default for WarmConfig {
    fn default() -> Self {
        Self {
            urls: vec!["redis://127.0.0.1:6379".to_owned()],
            mode: Mode::Standalone,
            tls: false,
            username: None,
            password: None,
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            wait_replicas: 1,
            wait_timeout: Duration::from_millis(100),
            command_timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(2),
            reconnect: ReconnectConfig::default(),
            page_size: 64,
        }
    }
}

impl fmt::Debug for WarmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(|u| redact_url(u)).collect();
        f.debug_struct("WarmConfig")
            .field("urls", &urls)
            .field("mode", &self.mode)
            .field("tls", &self.tls)
            .field("username", &self.username)
            .field("password", &self.password)
            .field("key_prefix", &self.key_prefix)
            .field("wait_replicas", &self.wait_replicas)
            .field("wait_timeout", &self.wait_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("reconnect", &self.reconnect)
            .field("page_size", &self.page_size)
            .finish()
    }
}

/// `url` with the password of its user-info part (`scheme://user:PASSWORD@host`)
/// replaced by `***`; a user-info without `:` is replaced whole, since some clients read
/// `scheme://PASSWORD@host`.
pub(crate) fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[scheme_end..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_len].rfind('@') else {
        return url.to_owned();
    };
    let userinfo = &rest[..at];
    let redacted = match userinfo.find(':') {
        Some(colon) => format!("{}:***", &userinfo[..colon]),
        None => "***".to_owned(),
    };
    format!("{}{}{}", &url[..scheme_end], redacted, &rest[at..])
}

/// The default [`WarmConfig::key_prefix`].
pub const DEFAULT_KEY_PREFIX: &str = "tierlog:";

impl WarmConfig {
    /// A configuration for one standalone server at `url`, with every other field
    /// defaulted.
    pub fn standalone(url: impl Into<String>) -> Self {
        Self { urls: vec![url.into()], ..Self::default() }
    }
}

/// Server topology.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Mode {
    /// One primary (with replicas that `WAIT` counts).
    #[default]
    Standalone,
    /// Valkey/Redis Cluster; `urls` are seed nodes.
    Cluster,
    /// A primary found through sentinels; `urls` are the sentinels.
    Sentinel {
        /// The monitored service (`sentinel monitor <name> …`).
        service_name: String,
    },
}

/// How the client reconnects after a connection is lost.
///
/// Exponential backoff from `min_backoff` doubling up to `max_backoff`. While it is
/// disconnected, commands fail within [`WarmConfig::command_timeout`] rather than
/// waiting for the reconnection.
///
/// Non-exhaustive: outside this crate, start from [`ReconnectConfig::default`] (or the
/// [`WarmConfig::reconnect`] of a configuration) and set the fields you need.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct ReconnectConfig {
    /// Attempts before giving up for good; 0 retries forever.
    pub max_attempts: u32,
    /// First delay between attempts.
    #[serde(with = "humantime_serde")]
    pub min_backoff: Duration,
    /// Longest delay between attempts.
    #[serde(with = "humantime_serde")]
    pub max_backoff: Duration,
}

impl Default for ReconnectConfig {
    fn default() -> Self {
        Self { max_attempts: 0, min_backoff: Duration::from_millis(100), max_backoff: Duration::from_secs(5) }
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn redact_url_hides_only_the_password() {
        assert_eq!(redact_url("redis://u:p4ss@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact_url("rediss://p4ss@h:1"), "rediss://***@h:1");
        assert_eq!(redact_url("redis://h:1/0?x=a@b"), "redis://h:1/0?x=a@b");
        assert_eq!(redact_url("redis://:p@ss@h"), "redis://:***@h");
        assert_eq!(redact_url("not a url"), "not a url");
    }
}
