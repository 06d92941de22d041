//! The effective configuration: embedded defaults or a TOML file, then environment
//! overrides, then command-line overrides; human units for sizes; redaction for output.
//!
//! The scheme (documented in `docs/configuration.md`):
//!
//! 1. `--config PATH`, else `./tierlog.toml` when it exists, else the embedded defaults
//!    (`[hot]` under `./data/hot` and `[cold]` on the local directory `./data/cold`). A
//!    file is the whole configuration: a tier without its table is disabled.
//! 2. Every variable `TIERLOG_<SECTION>__<KEY>[__<KEY>…]` sets the key at that dotted
//!    path (lower-cased), e.g. `TIERLOG_HOT__SEGMENT_BYTES=1MiB` sets `hot.segment_bytes`.
//!    The value is read as a TOML value when it parses as one (`5`, `true`,
//!    `["a", "b"]`, `"quoted"`) and as a string otherwise.
//! 3. `--data-dir DIR` puts the WAL in `DIR/hot`, a local cold tier in `DIR/cold` and
//!    the router's checkpoints in `DIR/router`.
//!
//! Size keys ([`SIZE_KEYS`]) take a number of bytes or a string with a unit.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use tier_cold::BackendConfig;
use tier_router::StoreConfig;
use toml::{Table, Value};

use crate::units::parse_size;

/// The configuration used when no file is named and `./tierlog.toml` does not exist.
pub(crate) const EMBEDDED_DEFAULTS: &str =
    "[hot]\ndata_dir = \"./data/hot\"\n\n[cold]\nbackend = { kind = \"local\", path = \"./data/cold\" }\n";

/// The file read when `--config` is not given, if it exists.
pub(crate) const DEFAULT_FILE: &str = "tierlog.toml";

/// Prefix of environment overrides.
pub(crate) const ENV_PREFIX: &str = "TIERLOG_";

/// Keys whose values are byte sizes: an integer or a string with a unit (`"64MiB"`).
pub(crate) const SIZE_KEYS: &[&str] = &[
    "hot.segment_bytes",
    "hot.index_interval_bytes",
    "hot.cache_bytes",
    "hot.retention_bytes",
    "cold.read_buffer",
    "cold.tail_fetch_bytes",
    "cold.index_interval_bytes",
    "cold.multipart_threshold",
    "cold.part_size",
    "router.max_group_bytes",
    "router.max_unreplicated_bytes",
    "router.read_batch_bytes",
];

/// Keys whose values are secrets, printed as `***`.
const SECRET_KEYS: &[&str] = &["password", "secret_access_key", "access_key", "tokens", "token"];

/// Top-level tables a configuration may have.
const SECTIONS: &[&str] = &["hot", "warm", "cold", "router", "server", "client"];

/// Where the configuration came from, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The embedded defaults.
    Embedded,
    /// A file.
    File(PathBuf),
}

/// A loaded, validated configuration.
#[derive(Clone, Debug)]
pub(crate) struct Loaded {
    /// The store's configuration.
    pub(crate) config: StoreConfig,
    /// Where it came from.
    pub(crate) origin: Origin,
    /// The `[server]` table (`tierlog serve`; tokens redacted in `Debug`).
    pub(crate) server: tierlog_server::ServerConfig,
    /// The `[client]` table (`produce`, `consume`, `status`, `export`, `verify` through a
    /// server).
    pub(crate) client: crate::cmd::remote::ClientConfig,
}

/// Loads the configuration (see the module docs). `env` is the process environment
/// (passed in for tests).
pub(crate) fn load(
    explicit: Option<&Path>,
    data_dir: Option<&Path>,
    env: impl IntoIterator<Item = (String, String)>,
) -> anyhow::Result<Loaded> {
    let (text, origin) = match explicit {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read config file {}", path.display()))?;
            (text, Origin::File(path.to_owned()))
        }
        None if Path::new(DEFAULT_FILE).is_file() => {
            let text = std::fs::read_to_string(DEFAULT_FILE)
                .with_context(|| format!("cannot read config file {DEFAULT_FILE}"))?;
            (text, Origin::File(PathBuf::from(DEFAULT_FILE)))
        }
        None => (EMBEDDED_DEFAULTS.to_owned(), Origin::Embedded),
    };
    let name = match &origin {
        Origin::Embedded => "(embedded defaults)".to_owned(),
        Origin::File(p) => p.display().to_string(),
    };
    let mut table: Table = toml::from_str(&text).map_err(|e| {
        let message = plain_toml_message(e.message());
        let line = e.span().map(|s| text[..s.start].lines().count().max(1));
        match line {
            Some(line) => anyhow!("config {name}, line {line}: {message}"),
            None => anyhow!("config {name}: {message}"),
        }
    })?;
    apply_env(&mut table, env)?;
    let server = section(&mut table, "server").with_context(|| format!("config {name}"))?;
    let client = section(&mut table, "client").with_context(|| format!("config {name}"))?;
    let mut config = from_table(table).with_context(|| format!("config {name}"))?;
    if let Some(dir) = data_dir {
        apply_data_dir(&mut config, dir);
    }
    config.validate().with_context(|| format!("config {name}"))?;
    Ok(Loaded { config, origin, server, client })
}

/// Takes the table `key` (a program's own settings, not the store's) out of `table`,
/// deserialized; the default when it is absent.
fn section<T: serde::de::DeserializeOwned + Default>(table: &mut Table, key: &str) -> anyhow::Result<T> {
    match table.remove(key) {
        Some(value) => serde_path_to_error::deserialize(value)
            .map_err(|e| anyhow!("{key}.{}: {}", e.path(), e.inner().message().trim())),
        None => Ok(T::default()),
    }
}

/// Applies `TIERLOG_<SECTION>__<KEY>` overrides to `table`.
fn apply_env(table: &mut Table, env: impl IntoIterator<Item = (String, String)>) -> anyhow::Result<()> {
    let mut vars: Vec<(String, String)> =
        env.into_iter().filter(|(k, _)| k.starts_with(ENV_PREFIX) && k.contains("__")).collect();
    vars.sort();
    for (name, raw) in vars {
        let path: Vec<String> = name[ENV_PREFIX.len()..].split("__").map(str::to_ascii_lowercase).collect();
        if path.iter().any(String::is_empty) || !SECTIONS.contains(&path[0].as_str()) || path.len() < 2 {
            bail!(
                "environment variable {name}: expected TIERLOG_<SECTION>__<KEY> with SECTION one of {}",
                SECTIONS.join(", ")
            );
        }
        let value = parse_env_value(&raw);
        let (last, parents) = path.split_last().expect("the path has at least two parts");
        let mut current = &mut *table;
        for part in parents {
            let entry = current.entry(part.clone()).or_insert_with(|| Value::Table(Table::new()));
            current = match entry {
                Value::Table(t) => t,
                _ => bail!("environment variable {name}: {} is not a table", path.join(".")),
            };
        }
        current.insert(last.clone(), value);
    }
    Ok(())
}

/// A TOML value when `raw` parses as one, else the string itself.
fn parse_env_value(raw: &str) -> Value {
    toml::from_str::<Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(raw.to_owned()))
}

/// Converts size strings, then deserializes, naming the key of any error.
pub(crate) fn from_table(mut table: Table) -> anyhow::Result<StoreConfig> {
    for key in SIZE_KEYS {
        let mut parts = key.split('.');
        let (Some(section), Some(field)) = (parts.next(), parts.next()) else { continue };
        let Some(Value::Table(t)) = table.get_mut(section) else { continue };
        if let Some(Value::String(s)) = t.get(field) {
            let bytes = parse_size(s).map_err(|e| anyhow!("{key}: {e}"))?;
            let bytes = i64::try_from(bytes).map_err(|_| anyhow!("{key}: {s:?} is too large"))?;
            t.insert(field.to_owned(), Value::Integer(bytes));
        }
    }
    let forms = |path: &str| ENUM_FORMS.iter().find(|(p, _)| *p == path).map(|(_, f)| *f);
    let found = |path: &str| {
        let mut value: Option<&Value> = None;
        let mut current = Some(&table);
        for part in path.split('.') {
            value = current.and_then(|t| t.get(part));
            current = value.and_then(Value::as_table);
        }
        value.map(ToString::to_string)
    };
    let deserializer = Value::Table(table.clone());
    serde_path_to_error::deserialize::<_, StoreConfig>(deserializer).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let mut message = inner.message().trim().to_owned();
        // serde's words for a wrong value of an enum ("invalid type: unit variant, expected
        // string only") say nothing to a user: name the values the key takes.
        if let Some(forms) = forms(&path)
            && (message.starts_with("invalid type") || message.starts_with("unknown variant"))
        {
            message = match found(&path) {
                Some(v) => format!("expected {forms}, found {v}"),
                None => format!("expected {forms}"),
            };
        }
        if path == "." || path.is_empty() { anyhow!("{message}") } else { anyhow!("{path}: {message}") }
    })
}

/// The settings that take one of a few forms, and those forms as written in TOML.
const ENUM_FORMS: &[(&str, &str)] = &[
    ("hot.fsync", r#""always", "never" or { interval = "100ms" }"#),
    ("hot.recovery", r#""truncate_torn_tail" or "refuse""#),
    ("router.warm_failure_policy", r#""fail" or "degrade""#),
];

/// The TOML parser's message, with its words for an integer it cannot hold ("invalid
/// type: integer `…` as i128, expected any valid TOML value") made plain.
fn plain_toml_message(message: &str) -> String {
    let message = message.trim();
    if message.contains("as i128") {
        let number = message.split('`').nth(1).unwrap_or("the number");
        return format!("{number} is too large for a setting (the largest is {})", i64::MAX);
    }
    message.to_owned()
}

fn apply_data_dir(config: &mut StoreConfig, dir: &Path) {
    config.hot.data_dir = dir.join("hot");
    if let Some(cold) = &mut config.cold
        && let BackendConfig::Local { path } = &mut cold.backend
    {
        *path = dir.join("cold");
    }
    config.router.state_dir = Some(dir.join("router"));
}

/// The whole effective configuration as TOML — the store's tables, then `[server]` (its
/// defaults filled in) and `[client]` — with every secret replaced by `***`: passwords,
/// secret keys, each of `server.tokens` and `client.token`. `server.token_file` is a path
/// and is printed; the file's tokens are not read.
pub(crate) fn to_redacted_toml(
    config: &StoreConfig,
    server: &tierlog_server::ServerConfig,
    client: &crate::cmd::remote::ClientConfig,
) -> anyhow::Result<String> {
    let mut value = Value::try_from(config).context("serializing the configuration")?;
    let server = Value::try_from(server.with_defaults()).context("serializing the [server] table")?;
    let client = Value::try_from(client).context("serializing the [client] table")?;
    if let Value::Table(t) = &mut value {
        t.insert("server".into(), server);
        t.insert("client".into(), client);
    }
    redact(&mut value, "");
    toml::to_string_pretty(&value).context("serializing the configuration")
}

fn redact(value: &mut Value, key: &str) {
    match value {
        Value::Table(t) => {
            for (k, v) in t.iter_mut() {
                if SECRET_KEYS.contains(&k.as_str()) {
                    redact_all(v);
                } else {
                    redact(v, k);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| redact(v, key)),
        Value::String(s) if key == "urls" || key == "endpoint" => *s = redact_url(s),
        _ => {}
    }
}

/// Replaces a secret with `***`; each of a list of secrets (`server.tokens`), so that
/// the output keeps its shape and still parses.
fn redact_all(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(redact_all),
        _ => *value = Value::String("***".into()),
    }
}

/// `url` with the password in `scheme://user:PASSWORD@host` (or a bare
/// `scheme://SECRET@host`) replaced by `***`.
fn redact_url(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else { return url.to_owned() };
    let rest = &url[start..];
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    let Some(at) = authority.rfind('@') else { return url.to_owned() };
    let user = match authority[..at].find(':') {
        Some(colon) => format!("{}:***", &authority[..colon]),
        None => "***".to_owned(),
    };
    format!("{}{user}{}", &url[..start], &rest[at..])
}

#[cfg(test)]
mod tests;
