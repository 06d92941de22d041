//! The rustls client configuration of a TLS connection to Valkey: the roots to trust
//! (`warm.tls_ca_file`, else the system's), the client certificate
//! (`warm.tls_cert_file` + `warm.tls_key_file`) and the server name to check
//! (`warm.tls_server_name`). Read and checked when the tier connects, so a missing or
//! malformed file is `InvalidInput` naming the setting and the file.

use std::{path::Path, sync::Arc};

use fred::{
    bytes_utils::Str,
    types::config::{HostMapping, ServerConfig, TlsConfig, TlsHostMapping},
};
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject};
use tier_core::{ErrorContext, TierError};

use crate::config::WarmConfig;

/// The TLS settings of `config` for fred.
pub(crate) fn fred_tls(config: &WarmConfig, ctx: &ErrorContext) -> Result<TlsConfig, TierError> {
    let invalid = |msg: String| TierError::invalid(ctx.clone(), msg);
    let roots = match &config.tls_ca_file {
        Some(path) => ca_roots(path).map_err(invalid)?,
        None => system_roots().map_err(invalid)?,
    };
    // One provider named here: with both of rustls's providers compiled into a binary
    // (fred brings `ring`, other crates `aws-lc-rs`), rustls cannot pick a default.
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(format!("cannot set up rustls: {e}")))?
        .with_root_certificates(roots);
    let client = match (&config.tls_cert_file, &config.tls_key_file) {
        (None, None) => builder.with_no_client_auth(),
        (Some(cert), Some(key)) => {
            let chain = client_chain(cert).map_err(invalid)?;
            let key_der = client_key(key).map_err(invalid)?;
            builder.with_client_auth_cert(chain, key_der).map_err(|e| {
                invalid(format!(
                    "warm.tls_cert_file {} and warm.tls_key_file {} do not make a usable client certificate: {e}",
                    cert.display(),
                    key.display()
                ))
            })?
        }
        (Some(_), None) | (None, Some(_)) => {
            return Err(invalid(
                "warm.tls_cert_file and warm.tls_key_file go together: set both for a client certificate, or neither"
                    .to_owned(),
            ));
        }
    };
    let hostnames = match &config.tls_server_name {
        None => TlsHostMapping::None,
        Some(name) => {
            ServerName::try_from(name.as_str()).map_err(|_| {
                invalid(format!("warm.tls_server_name {name:?} is neither a DNS name nor an IP address"))
            })?;
            TlsHostMapping::Custom(Arc::new(FixedName(name.clone())))
        }
    };
    Ok(TlsConfig { connector: client.into(), hostnames })
}

/// Every server's certificate is checked against one name (`warm.tls_server_name`),
/// including the cluster nodes the client discovers by IP address.
#[derive(Debug)]
struct FixedName(String);

impl HostMapping for FixedName {
    fn map(&self, _ip: &std::net::IpAddr, _default_host: &str) -> Option<String> {
        Some(self.0.clone())
    }
}

/// Sets `warm.tls_server_name`, if any, as the name every configured server's
/// certificate is checked against.
pub(crate) fn apply_server_name(config: &WarmConfig, servers: &mut ServerConfig) {
    let Some(name) = &config.tls_server_name else {
        return;
    };
    let name = Some(Str::from(name.as_str()));
    match servers {
        ServerConfig::Centralized { server } => server.tls_server_name = name,
        ServerConfig::Clustered { hosts, .. } | ServerConfig::Sentinel { hosts, .. } => {
            for host in hosts {
                host.tls_server_name = name.clone();
            }
        }
    }
}

fn ca_roots(path: &Path) -> Result<RootCertStore, String> {
    let setting = "warm.tls_ca_file";
    let certs = read_certs(setting, path)?;
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| {
            format!("{setting} {} holds a certificate rustls cannot use as a root: {e}", path.display())
        })?;
    }
    Ok(roots)
}

fn system_roots() -> Result<RootCertStore, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found.errors.first().map_or_else(|| "none found".to_owned(), ToString::to_string);
        return Err(format!(
            "no system root certificates could be loaded ({why}); set warm.tls_ca_file to the PEM file of the CA \
             that signed the server's certificate"
        ));
    }
    Ok(roots)
}

fn client_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    read_certs("warm.tls_cert_file", path)
}

/// The certificates of a PEM file; at least one.
fn read_certs(setting: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let text = std::fs::read(path).map_err(|e| format!("cannot read {setting} {}: {e}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{setting} {} is not a valid PEM file: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{setting} {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(certs)
}

/// The private key of a PEM file. Errors name the file, never what it holds (the PEM
/// parser's messages can quote a line of it).
fn client_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let setting = "warm.tls_key_file";
    let text = std::fs::read(path).map_err(|e| format!("cannot read {setting} {}: {e}", path.display()))?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => format!(
            "{setting} {} holds no PEM private key (PKCS#8, PKCS#1 or SEC1: -----BEGIN PRIVATE KEY-----)",
            path.display()
        ),
        _ => format!("{setting} {} is not a valid PEM private key file", path.display()),
    })
}

/// What a failed TLS handshake with `urls` means and which setting to look at, from
/// fred's text of the rustls error (`InvalidCertificate(…)` for the server's
/// certificate, `AlertReceived(…)` for the server's verdict on ours); `None` when
/// `details` is no certificate refusal.
pub(crate) fn handshake_refusal(details: &str, urls: &str) -> Option<String> {
    if let Some(reason) = between(details, "InvalidCertificate(", ")") {
        let why = if reason.starts_with("UnknownIssuer") {
            "is not trusted: no CA it trusts signed it (set warm.tls_ca_file to the PEM file of the CA that \
             signed the server's certificate)"
                .to_owned()
        } else if reason.starts_with("NotValidForName") {
            "does not name the host connected to (connect by a name it holds, or set warm.tls_server_name to one)"
                .to_owned()
        } else {
            format!("was refused: {reason} (check the server's certificate, or warm.tls_ca_file)")
        };
        return Some(format!("the TLS certificate of {urls} {why}"));
    }
    let alert = between(details, "AlertReceived(", ")")?;
    let why = match alert {
        "CertificateRequired" | "HandshakeFailure" => {
            "requires a client certificate (set warm.tls_cert_file and warm.tls_key_file)".to_owned()
        }
        "BadCertificate"
        | "UnknownCA"
        | "CertificateUnknown"
        | "UnsupportedCertificate"
        | "CertificateExpired"
        | "CertificateRevoked"
        | "AccessDenied" => format!(
            "refused the client certificate ({alert}): warm.tls_cert_file must be signed by a CA the server \
             trusts (its tls-ca-cert-file)"
        ),
        other => format!("ended the TLS handshake ({other})"),
    };
    Some(format!("{urls} {why}"))
}

/// The text of `s` between the first `start` and the next `end`.
fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = s.find(start)? + start.len();
    let len = s[from..].find(end)?;
    Some(&s[from..from + len])
}

/// The message of a command the server's ACL refused (`NOPERM …`): which command (or
/// key) the warm tier's ACL user lacks and how to grant it; `None` for any other
/// reply.
pub(crate) fn acl_refusal(doing: &str, details: &str) -> Option<String> {
    // `NOPERM User <user> has no permissions to run the '<command>' command`, or from a
    // command a script calls, `ERR ACL failure in script: User <user> has no permissions
    // to run the '<command>' command`.
    if !details.starts_with("NOPERM") && !details.contains("ACL failure in script") {
        return None;
    }
    let message = if let Some(command) = between(details, "run the '", "'") {
        format!(
            "{doing}: the warm tier's ACL user may not run {} (NOPERM); grant it with `ACL SETUSER <user> \
             +{command}` (docs/warm.md lists the commands the warm tier needs)",
            command.to_ascii_uppercase()
        )
    } else if details.contains("key") {
        format!(
            "{doing}: the warm tier's ACL user may not access the key (NOPERM); its key pattern must cover \
             warm.key_prefix (`~<key_prefix>*`)"
        )
    } else {
        format!("{doing}: refused by the server's ACL for the warm tier's ACL user: {details}")
    };
    Some(message)
}

#[cfg(test)]
mod tests {
    use super::{acl_refusal, handshake_refusal};

    #[test]
    fn certificate_refusals_name_the_setting_to_look_at() {
        let said = |d: &str| handshake_refusal(d, "rediss://h:1").expect("a refusal");
        let unknown =
            said("IO Error: Custom { kind: InvalidData, error: InvalidCertificate(UnknownIssuer) }");
        assert!(unknown.contains("not trusted") && unknown.contains("warm.tls_ca_file"), "{unknown}");
        let name = said(
            "IO Error: Custom { kind: InvalidData, error: InvalidCertificate(NotValidForNameContext { .. }) }",
        );
        assert!(name.contains("warm.tls_server_name"), "{name}");
        let required =
            said("IO Error: Custom { kind: InvalidData, error: AlertReceived(CertificateRequired) }");
        assert!(
            required.contains("warm.tls_cert_file") && required.contains("warm.tls_key_file"),
            "{required}"
        );
        let refused = said("IO Error: Custom { kind: InvalidData, error: AlertReceived(UnknownCA) }");
        assert!(refused.contains("refused the client certificate"), "{refused}");
        assert_eq!(handshake_refusal("IO Error: Os { code: 111, kind: ConnectionRefused }", "u"), None);
    }

    #[test]
    fn acl_refusals_name_the_command_and_the_grant() {
        let run = acl_refusal("XADD", "NOPERM User tierlog has no permissions to run the 'xadd' command");
        let run = run.expect("a refusal");
        assert!(run.contains("may not run XADD") && run.contains("+xadd"), "{run}");
        let sub =
            acl_refusal("XINFO STREAM", "NOPERM User u has no permissions to run the 'xinfo|stream' command");
        assert!(sub.expect("a refusal").contains("+xinfo|stream"));
        let key = acl_refusal("XADD", "NOPERM No permissions to access a key").expect("a refusal");
        assert!(key.contains("warm.key_prefix"), "{key}");
        assert_eq!(acl_refusal("XADD", "ERR The ID specified in XADD is equal or smaller"), None);
    }
}
