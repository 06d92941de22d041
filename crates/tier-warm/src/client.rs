//! Building the `fred` client from a [`WarmConfig`] and mapping `fred` errors into
//! [`TierError`].

use std::{future::Future, time::Duration};

use fred::{
    error::{Error as FredError, ErrorKind as FredErrorKind},
    prelude::{Builder, Client, ClientLike, Config, ReconnectPolicy, ServerConfig},
    types::config::Server,
};
use tier_core::{ErrorContext, TierError};

use crate::config::{Mode, WarmConfig, redact_url, without_tls_scheme};

/// Builds and connects a client; fails with `Unavailable` within
/// `config.connect_timeout` when no server answers.
pub(crate) async fn connect(config: &WarmConfig, ctx: &ErrorContext) -> Result<Client, TierError> {
    let fred_config = fred_config(config, ctx)?;
    let timeout = config.connect_timeout;
    let command_timeout = config.command_timeout;
    let mut builder = Builder::from_config(fred_config);
    builder
        .with_connection_config(|c| {
            c.connection_timeout = timeout;
            c.internal_command_timeout = timeout;
            // One attempt per call: a command lost with its connection fails and the
            // caller (the router) decides whether to retry, rather than the client
            // silently re-sending an XADD.
            c.max_command_attempts = 1;
        })
        .with_performance_config(|p| p.default_command_timeout = command_timeout)
        .set_policy(reconnect_policy(config));
    let client = builder
        .build()
        .map_err(|e| TierError::invalid(ctx.clone(), "invalid warm tier configuration").with_source(e))?;
    let init = tokio::time::timeout(timeout, client.init()).await;
    let result = match init {
        Ok(Ok(_task)) => Ok(()),
        Ok(Err(e)) => Err(connect_error(ctx.clone(), config, e)),
        Err(_) => Err(TierError::unavailable(
            ctx.clone(),
            format!("no connection to {} within {timeout:?}", describe_urls(config)),
        )),
    };
    if let Err(e) = result {
        // Stop the reconnect loop of the client we are abandoning.
        let _ = tokio::time::timeout(Duration::from_millis(200), client.quit()).await;
        return Err(e);
    }
    Ok(client)
}

/// Why `connect` failed, naming the servers (passwords redacted): a refused connection
/// as "connection refused" rather than the socket error's debug form, a wrong password
/// or user as an authentication failure, and a refused TLS certificate (the server's or
/// ours) naming the `warm.tls_*` setting to look at (`InvalidInput`: retrying will not
/// help).
fn connect_error(ctx: ErrorContext, config: &WarmConfig, e: FredError) -> TierError {
    let urls = describe_urls(config);
    let details = e.details().to_owned();
    let auth = matches!(e.kind(), FredErrorKind::Auth)
        || ["WRONGPASS", "NOAUTH", "invalid password", "invalid username-password"]
            .iter()
            .any(|m| details.contains(m));
    if auth {
        let message = format!("authentication failed at {urls} (check warm.username and warm.password)");
        return TierError::invalid(ctx, message).with_source(e);
    }
    if let Some(message) = crate::tls::handshake_refusal(&details, &urls) {
        // A certificate refused either way: retrying will not help.
        return TierError::invalid(ctx, message).with_source(e);
    }
    if matches!(e.kind(), FredErrorKind::IO) && details.contains("ConnectionRefused") {
        // fred's text is the socket error's debug form; its kind says it all.
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        return TierError::unavailable(ctx, format!("connecting to {urls}")).with_source(refused);
    }
    map_fred(ctx, &format!("connecting to {urls}"), e)
}

fn describe_urls(config: &WarmConfig) -> String {
    config.urls.iter().map(|u| redact_url(u)).collect::<Vec<_>>().join(", ")
}

fn reconnect_policy(config: &WarmConfig) -> ReconnectPolicy {
    let millis = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX).max(1);
    ReconnectPolicy::new_exponential(
        config.reconnect.max_attempts,
        millis(config.reconnect.min_backoff),
        millis(config.reconnect.max_backoff),
        2,
    )
}

fn fred_config(config: &WarmConfig, ctx: &ErrorContext) -> Result<Config, TierError> {
    let invalid = |msg: String| TierError::invalid(ctx.clone(), msg);
    let Some(first) = config.urls.first() else {
        return Err(invalid("warm tier configuration lists no server URL".into()));
    };
    let parse = |url: &str| {
        // TLS is set up below from the whole configuration, not by the URL parser.
        Config::from_url_centralized(&without_tls_scheme(url).0)
            .map_err(|e| invalid(format!("bad warm tier URL {}: {}", redact_url(url), e.details())))
    };
    let mut out = parse(first)?;
    match &config.mode {
        Mode::Standalone => {}
        Mode::Cluster => {
            let hosts = seed_hosts(config, parse)?;
            out.server = ServerConfig::Clustered { hosts, policy: Default::default() };
        }
        Mode::Sentinel { service_name } => {
            let hosts = seed_hosts(config, parse)?;
            out.server = ServerConfig::Sentinel { hosts, service_name: service_name.clone() };
        }
    }
    if let Some(user) = &config.username {
        out.username = Some(user.clone());
    }
    if let Some(password) = &config.password {
        out.password = Some(password.expose().to_owned());
    }
    if config.uses_tls() {
        out.tls = Some(crate::tls::fred_tls(config, ctx)?);
        crate::tls::apply_server_name(config, &mut out.server);
    }
    // Return connection errors from `init` instead of retrying forever behind it.
    out.fail_fast = true;
    Ok(out)
}

fn seed_hosts(
    config: &WarmConfig,
    parse: impl Fn(&str) -> Result<Config, TierError>,
) -> Result<Vec<Server>, TierError> {
    let mut hosts = Vec::new();
    for url in &config.urls {
        hosts.extend(parse(url)?.server.hosts());
    }
    Ok(hosts)
}

/// Maps a `fred` error: connection, timeout and cancellation problems are
/// `Unavailable` (retryable); a command the server's ACL refuses (`NOPERM`) is
/// `InvalidInput` naming the command to grant; anything else is `Internal`.
pub(crate) fn map_fred(ctx: ErrorContext, doing: &str, e: FredError) -> TierError {
    if let Some(message) = crate::tls::acl_refusal(doing, e.details()) {
        return TierError::invalid(ctx, message).with_source(e);
    }
    let message = doing;
    let error = match e.kind() {
        FredErrorKind::IO
        | FredErrorKind::Timeout
        | FredErrorKind::Canceled
        | FredErrorKind::Routing
        | FredErrorKind::Cluster
        | FredErrorKind::Sentinel
        | FredErrorKind::Backpressure
        | FredErrorKind::Tls => TierError::unavailable(ctx, message),
        FredErrorKind::Auth | FredErrorKind::Config | FredErrorKind::Url => TierError::invalid(ctx, message),
        _ if is_transient_server_error(e.details()) => TierError::unavailable(ctx, message),
        _ => TierError::internal(ctx, message),
    };
    error.with_source(e)
}

/// Server replies that mean "not now" rather than "never", and the client's own
/// give-ups after losing the connection (fred reports a command whose writes failed on
/// every reconnection attempt as an `Unknown` error, "Too many failed write attempts.", and
/// one it could not send while its connection is down as "Failed to route command.").
fn is_transient_server_error(details: &str) -> bool {
    [
        "LOADING",
        "BUSY",
        "TRYAGAIN",
        "CLUSTERDOWN",
        "MASTERDOWN",
        "READONLY",
        "Connection",
        "Too many failed write attempts",
        "Failed to route command",
        "Max redirections exceeded",
    ]
    .iter()
    .any(|p| details.starts_with(p) || details.contains(&format!("{p} ")))
}

/// Runs `fut` with a deadline; a miss is `Unavailable` naming `doing` and the limit.
pub(crate) async fn bounded<T>(
    ctx: &ErrorContext,
    doing: &str,
    limit: Duration,
    fut: impl Future<Output = Result<T, FredError>>,
) -> Result<T, TierError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(map_fred(ctx.clone(), doing, e)),
        Err(_) => Err(TierError::unavailable(
            ctx.clone(),
            format!("{doing}: no answer from the server within {limit:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use fred::error::{Error as FredError, ErrorKind as FredErrorKind};
    use tier_core::{ErrorContext, ErrorKind, TierKind};

    use super::map_fred;

    fn kind_of(kind: FredErrorKind, details: &'static str) -> ErrorKind {
        map_fred(ErrorContext::tier(TierKind::Warm), "XADD", FredError::new(kind, details)).kind()
    }

    #[test]
    fn connection_loss_and_busy_servers_are_retryable_and_the_rest_is_not() {
        assert_eq!(kind_of(FredErrorKind::IO, "Connection refused"), ErrorKind::Unavailable);
        assert_eq!(kind_of(FredErrorKind::Canceled, "Canceled."), ErrorKind::Unavailable);
        // What fred answers once a command's writes failed on every reconnection.
        assert_eq!(
            kind_of(FredErrorKind::Unknown, "Too many failed write attempts."),
            ErrorKind::Unavailable
        );
        // What fred answers for a command sent while the connection is down.
        assert_eq!(kind_of(FredErrorKind::Unknown, "Failed to route command."), ErrorKind::Unavailable);
        assert_eq!(kind_of(FredErrorKind::Unknown, "LOADING Valkey is loading"), ErrorKind::Unavailable);
        assert_eq!(kind_of(FredErrorKind::Auth, "WRONGPASS"), ErrorKind::InvalidInput);
        assert_eq!(kind_of(FredErrorKind::Unknown, "Could not convert to map."), ErrorKind::Internal);
    }
}
