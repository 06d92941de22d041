//! Configuration of the warm tier, loadable from TOML by the router and the CLI.
//!
//! Every field has a default, so an empty table is a valid configuration (one local
//! standalone server, `WAIT 1` within 100 ms). Durations are written as humantime
//! strings (`"100ms"`, `"2s"`). Credentials are wrapped in [`Secret`], which never
//! prints its contents.

use std::{fmt, path::PathBuf, time::Duration};

use serde::{Deserialize, Serialize};
pub use tier_core::Secret;

/// How the warm tier reaches Valkey/Redis.
///
/// `Debug` hides the password and any password embedded in a URL; it shows the TLS
/// files' paths, never what they hold.
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
    /// Connect with TLS (rustls) even when the URL scheme does not ask. The `tls_*`
    /// settings below imply it.
    pub tls: bool,
    /// PEM file of the CA certificate(s) to trust for the server's certificate, instead
    /// of the system's roots (a private CA).
    pub tls_ca_file: Option<PathBuf>,
    /// PEM file of the client certificate chain to present (servers with
    /// `tls-auth-clients yes`); needs [`tls_key_file`](Self::tls_key_file).
    pub tls_cert_file: Option<PathBuf>,
    /// PEM file of the client certificate's private key (PKCS#8, PKCS#1 or SEC1). Read
    /// at connect; its contents never appear in `Debug` or an error.
    pub tls_key_file: Option<PathBuf>,
    /// The name the server's certificate must carry, when it is not the URL's host
    /// (e.g. connecting by IP address to a server whose certificate names a DNS name).
    pub tls_server_name: Option<String>,
    /// ACL user name; `None` uses the URL's, if any.
    pub username: Option<String>,
    /// Password; `None` uses the URL's, if any. Never printed.
    pub password: Option<Secret>,
    /// Prefix of every stream key: a topic's stream is `<key_prefix><topic>`, in cluster
    /// mode `<key_prefix>{<topic>}` (a hash tag, so a topic's keys share one slot).
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
            tls_ca_file: None,
            tls_cert_file: None,
            tls_key_file: None,
            tls_server_name: None,
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
            .field("tls_ca_file", &self.tls_ca_file)
            .field("tls_cert_file", &self.tls_cert_file)
            .field("tls_key_file", &self.tls_key_file)
            .field("tls_server_name", &self.tls_server_name)
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

    /// Whether the client connects with TLS: [`tls`](Self::tls), a `tls_*` setting, or
    /// a URL scheme that asks for it (`rediss://`, `valkeys://`).
    pub fn uses_tls(&self) -> bool {
        self.tls
            || self.tls_ca_file.is_some()
            || self.tls_cert_file.is_some()
            || self.tls_key_file.is_some()
            || self.tls_server_name.is_some()
            || self.urls.iter().any(|u| without_tls_scheme(u).1)
    }
}

/// `url` with a TLS scheme (`rediss`, `valkeys`, and their `-cluster` / `-sentinel`
/// forms) replaced by the plain one, and whether it had one. The warm tier sets up TLS
/// itself ([`WarmConfig::uses_tls`]), so the URL parser must not.
pub(crate) fn without_tls_scheme(url: &str) -> (String, bool) {
    let Some((scheme, rest)) = url.split_once("://") else {
        return (url.to_owned(), false);
    };
    let lower = scheme.to_ascii_lowercase();
    for (tls, plain) in [("rediss", "redis"), ("valkeys", "valkey")] {
        if let Some(suffix) = lower.strip_prefix(tls)
            && (suffix.is_empty() || suffix.starts_with('-'))
        {
            return (format!("{plain}{suffix}://{rest}"), true);
        }
    }
    (url.to_owned(), false)
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

/// The commands the warm tier sends in every mode: the minimal command set of its ACL
/// user (`ACL SETUSER … +<command>`; `xinfo|stream` is one subcommand). `eval` runs the
/// append script, which calls `GET`, `XADD` and `SET` (checked against the same user);
/// without it appends are plain `XADD`s whose position only the client checks; it also
/// runs the claim script, which calls `INCR`, `HSET` and `HDEL`. `get` reads a topic's
/// next key with its range. `incr` claims a topic's owner epoch and `hset`/`hdel` record
/// its claimer (`WarmTier::claim_owner`); `hmget` reads the claimers back
/// (`WarmTier::claimers`). `info` is the replica check at open
/// (`INFO replication`, only when `wait_replicas > 0`). [`Mode::acl_commands`] adds what
/// the cluster and sentinel modes send.
pub const ACL_COMMANDS: &[&str] = &[
    "xadd",
    "xrange",
    "xrevrange",
    "xtrim",
    "xinfo|stream",
    "exists",
    "get",
    "set",
    "incr",
    "hset",
    "hdel",
    "hmget",
    "wait",
    "eval",
    "info",
];

impl Mode {
    /// The commands the warm tier sends in this mode: [`ACL_COMMANDS`], plus
    /// `cluster|slots` and `cluster|info` (the client's slot map and cluster health
    /// check) in cluster mode and `role` (the client's check that the server the
    /// sentinels named is a primary) in sentinel mode.
    pub fn acl_commands(&self) -> Vec<&'static str> {
        let extra: &[&str] = match self {
            Mode::Standalone => &[],
            Mode::Cluster => &["cluster|slots", "cluster|info"],
            Mode::Sentinel { .. } => &["role"],
        };
        ACL_COMMANDS.iter().chain(extra).copied().collect()
    }
}

/// The `ACL SETUSER` command that creates `user` with exactly what a warm tier with
/// `config` needs: `password`, the keys under `config.key_prefix`, no channels, and
/// [`Mode::acl_commands`].
pub fn acl_setuser_line(config: &WarmConfig, user: &str, password: &str) -> String {
    let mut pattern: String = config
        .key_prefix
        .chars()
        .flat_map(|c| if matches!(c, '*' | '?' | '[' | ']' | '\\') { vec!['\\', c] } else { vec![c] })
        .collect();
    pattern.push('*');
    let commands: Vec<String> = config.mode.acl_commands().iter().map(|c| format!("+{c}")).collect();
    format!("ACL SETUSER {user} reset on >{password} ~{pattern} resetchannels -@all {}", commands.join(" "))
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
    use super::{Mode, WarmConfig, acl_setuser_line, redact_url, without_tls_scheme};

    #[test]
    fn tls_keys_load_from_toml_and_imply_tls() {
        let text = "urls = [\"redis://h:1\"]\ntls_ca_file = \"/etc/ca.pem\"\ntls_cert_file = \"c.pem\"\n\
                    tls_key_file = \"k.pem\"\ntls_server_name = \"cache.internal\"\n";
        let config: WarmConfig = toml::from_str(text).expect("valid");
        assert_eq!(config.tls_ca_file.as_deref(), Some(std::path::Path::new("/etc/ca.pem")));
        assert_eq!(config.tls_key_file.as_deref(), Some(std::path::Path::new("k.pem")));
        assert_eq!(config.tls_server_name.as_deref(), Some("cache.internal"));
        assert!(config.uses_tls() && !config.tls);
        assert!(!WarmConfig::default().uses_tls());
        assert!(WarmConfig::standalone("rediss://h:1").uses_tls());
    }

    #[test]
    fn the_acl_line_escapes_the_prefix_and_adds_the_mode_s_commands() {
        let mut config = WarmConfig {
            key_prefix: "a*b:".into(),
            mode: Mode::Sentinel { service_name: "s".into() },
            ..WarmConfig::default()
        };
        let line = acl_setuser_line(&config, "u", "pw");
        assert!(line.starts_with("ACL SETUSER u reset on >pw ~a\\*b:* resetchannels -@all +xadd "), "{line}");
        assert!(line.ends_with(" +info +role"), "{line}");
        config.mode = Mode::Cluster;
        assert!(acl_setuser_line(&config, "u", "pw").ends_with(" +info +cluster|slots +cluster|info"));
    }

    #[test]
    fn tls_schemes_are_read_as_plain_ones_with_tls_on() {
        let plain = |u: &str| without_tls_scheme(u);
        assert_eq!(plain("rediss://h:1"), ("redis://h:1".to_owned(), true));
        assert_eq!(plain("valkeys://u:p@h:1/0"), ("valkey://u:p@h:1/0".to_owned(), true));
        assert_eq!(plain("rediss-cluster://h:1"), ("redis-cluster://h:1".to_owned(), true));
        assert_eq!(plain("redis://h:1"), ("redis://h:1".to_owned(), false));
        assert_eq!(plain("redissx://h:1"), ("redissx://h:1".to_owned(), false));
        assert_eq!(plain("not a url"), ("not a url".to_owned(), false));
    }

    #[test]
    fn redact_url_hides_only_the_password() {
        assert_eq!(redact_url("redis://u:p4ss@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact_url("rediss://p4ss@h:1"), "rediss://***@h:1");
        assert_eq!(redact_url("redis://h:1/0?x=a@b"), "redis://h:1/0?x=a@b");
        assert_eq!(redact_url("redis://:p@ss@h"), "redis://:***@h");
        assert_eq!(redact_url("not a url"), "not a url");
    }
}
