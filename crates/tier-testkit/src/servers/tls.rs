//! [`ValkeyTls`]: a private Valkey that speaks TLS only, with certificates the harness
//! makes (a private CA, a server and a client certificate, and an unrelated CA).

use std::{
    net::Ipv4Addr,
    path::{Path, PathBuf},
    sync::Arc,
};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject};
use tempfile::TempDir;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::{
    HarnessError, PORT_CLASH_RETRIES, VALKEY_READY_TIMEOUT,
    locate::ValkeyBinary,
    poll::{poll_until, primary_and_replica_tails, wait_until_answering},
    process::{ServerProcess, free_port, log_shows_port_clash, temp_dir, valkey_args},
    resp::{self, Reply},
};

/// How a [`ValkeyTls`] is started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsOptions {
    /// `tls-auth-clients yes`: a client without a certificate signed by the CA is
    /// refused during the handshake. Off (`no`) by default.
    pub auth_clients: bool,
    /// Also start a replica (replicating over TLS), so that `WAIT 1` is acknowledged.
    pub replica: bool,
}

impl TlsOptions {
    /// No client certificate required, no replica.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`auth_clients`](Self::auth_clients).
    pub fn auth_clients(mut self, on: bool) -> Self {
        self.auth_clients = on;
        self
    }

    /// Sets [`replica`](Self::replica).
    pub fn replica(mut self, on: bool) -> Self {
        self.replica = on;
        self
    }
}

/// The PEM files a [`ValkeyTls`] wrote into its temporary directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The private CA that signed the server and client certificates.
    pub ca: PathBuf,
    /// The server's certificate (for `127.0.0.1` and `localhost`; also used by the
    /// replica as its client certificate towards the primary).
    pub server_cert: PathBuf,
    /// The server's private key.
    pub server_key: PathBuf,
    /// A client certificate signed by the CA (for `tls-auth-clients yes`).
    pub client_cert: PathBuf,
    /// The client certificate's private key.
    pub client_key: PathBuf,
    /// A CA unrelated to the server's: trusting only it must fail the handshake.
    pub other_ca: PathBuf,
}

/// A Valkey primary (and, with [`TlsOptions::replica`], a replica of it) on free
/// 127.0.0.1 ports, listening with TLS only (`port 0`, `tls-port <free>`), with
/// certificates generated into its temporary directory ([`files`](Self::files)).
///
/// The harness itself talks to the servers over TLS with the CA and the client
/// certificate (readiness, [`set_acl_user`](Self::set_acl_user)). Every process is killed
/// (SIGKILL by PID) when this is dropped.
#[derive(Debug)]
pub struct ValkeyTls {
    binary: ValkeyBinary,
    primary: ServerProcess,
    primary_port: u16,
    replica: Option<(u16, ServerProcess)>,
    files: TlsFiles,
    /// The harness's own client configuration (trusts the CA, presents the client
    /// certificate).
    client: Arc<rustls::ClientConfig>,
    // Declared last: removed after the processes are killed.
    dir: TempDir,
}

impl ValkeyTls {
    /// Generates the certificates, starts the server(s) and waits until the primary
    /// answers `PING` over TLS and, with a replica, acknowledges a write (`WAIT 1`).
    pub async fn start(options: TlsOptions) -> Result<Self, HarnessError> {
        let binary = ValkeyBinary::locate()?;
        let dir = temp_dir("tierlog-valkey-tls-", "Valkey over TLS")?;
        let files = write_certificates(dir.path())?;
        let client = harness_client(&files)?;
        let connector = TlsConnector::from(Arc::clone(&client));
        let launch = Launch { binary: &binary, dir: dir.path(), files: &files, options };
        let (primary, primary_port) = launch.start("primary", None, &connector).await?;
        let replica = if options.replica {
            Some(launch.start("replica", Some(primary_port), &connector).await?)
        } else {
            None
        };
        let this = Self {
            binary,
            primary,
            primary_port,
            replica: replica.map(|(process, port)| (port, process)),
            files,
            client,
            dir,
        };
        if this.replica.is_some() {
            this.wait_replica_acknowledges().await?;
        }
        Ok(this)
    }

    /// `rediss://127.0.0.1:<primary's TLS port>`.
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.primary_port)
    }

    /// The primary's TLS port.
    pub fn port(&self) -> u16 {
        self.primary_port
    }

    /// The certificate and key files.
    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// Which server runs, e.g. `"valkey 8.0.1"`.
    pub fn server_kind(&self) -> String {
        self.binary.kind()
    }

    /// The primary's PID.
    pub fn primary_pid(&self) -> u32 {
        self.primary.pid()
    }

    /// Creates (or replaces) the ACL user `name` on the primary (and the replica), with
    /// password `password`, access to the keys matching `key_pattern` and to `commands`
    /// only (`ACL SETUSER name reset on >password ~key_pattern resetchannels -@all
    /// +command…`; a command may name a subcommand, `xinfo|stream`).
    pub async fn set_acl_user(
        &self,
        name: &str,
        password: &str,
        key_pattern: &str,
        commands: &[&str],
    ) -> Result<(), HarnessError> {
        let password_rule = format!(">{password}");
        let key_rule = format!("~{key_pattern}");
        let mut args = vec!["ACL", "SETUSER", name, "reset", "on", &password_rule, &key_rule];
        args.extend(["resetchannels", "-@all"]);
        let grants: Vec<String> = commands.iter().map(|c| format!("+{c}")).collect();
        args.extend(grants.iter().map(String::as_str));
        let ports = std::iter::once(self.primary_port).chain(self.replica.as_ref().map(|(p, _)| *p));
        for port in ports {
            let what = format!("ACL SETUSER {name} on 127.0.0.1:{port}");
            match self.command(port, &[&args]).await.map_err(|e| HarnessError::request(&what, e))?.as_slice()
            {
                [Reply::Simple(ok)] if ok == "OK" => {}
                other => return Err(HarnessError::request(what, format!("answered {other:?}"))),
            }
        }
        Ok(())
    }

    /// Sends `commands` to the server on `port` over TLS (as the default user).
    async fn command(&self, port: u16, commands: &[&[&str]]) -> Result<Vec<Reply>, String> {
        tls_exchange(&TlsConnector::from(Arc::clone(&self.client)), port, commands).await
    }

    /// Waits until the replica acknowledges a write on the primary (`SET` + `WAIT 1`
    /// on one connection): `state=online` comes before its first `REPLCONF ACK`.
    async fn wait_replica_acknowledges(&self) -> Result<(), HarnessError> {
        let what = format!("{} replication link over TLS", self.binary.kind());
        let dir = self.dir.path();
        let probe = || async {
            let write: &[&str] = &["SET", "tierlog-harness:probe", "1"];
            match self.command(self.primary_port, &[write, &["WAIT", "1", "100"]]).await?.as_slice() {
                [_, Reply::Integer(n)] if *n >= 1 => Ok(()),
                other => Err(format!("a probe write was not acknowledged by the replica: {other:?}")),
            }
        };
        let log = dir.join("replica.log");
        poll_until(&what, VALKEY_READY_TIMEOUT, probe, &log, || primary_and_replica_tails(dir)).await
    }
}

/// What starting one server needs.
struct Launch<'a> {
    binary: &'a ValkeyBinary,
    dir: &'a Path,
    files: &'a TlsFiles,
    options: TlsOptions,
}

impl Launch<'_> {
    /// Starts `name` on a free TLS port and waits until it answers `PING` over TLS;
    /// a start that lost its port to another process is retried on another.
    async fn start(
        &self,
        name: &str,
        replica_of: Option<u16>,
        connector: &TlsConnector,
    ) -> Result<(ServerProcess, u16), HarnessError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_port()?;
            let mut process = self.spawn(name, port, replica_of)?;
            let what = format!("valkey {name} on TLS port {port}");
            let ping = || tls_ping(connector, port);
            match wait_until_answering(&mut process, what, VALKEY_READY_TIMEOUT, ping).await {
                Ok(()) => return Ok((process, port)),
                Err(e) => {
                    let clash = log_shows_port_clash(process.log());
                    drop(process);
                    if !(clash && attempt < PORT_CLASH_RETRIES) {
                        return Err(e);
                    }
                }
            }
        }
    }

    fn spawn(&self, name: &str, port: u16, replica_of: Option<u16>) -> Result<ServerProcess, HarnessError> {
        let path = |p: &Path| p.to_string_lossy().into_owned();
        let mut args = valkey_args(0, self.dir, name)?;
        args.extend(["--tls-port".into(), port.to_string()]);
        args.extend(["--tls-cert-file".into(), path(&self.files.server_cert)]);
        args.extend(["--tls-key-file".into(), path(&self.files.server_key)]);
        args.extend(["--tls-ca-cert-file".into(), path(&self.files.ca)]);
        let auth = if self.options.auth_clients { "yes" } else { "no" };
        args.extend(["--tls-auth-clients".into(), auth.into(), "--tls-replication".into(), "yes".into()]);
        if let Some(primary) = replica_of {
            args.extend(["--replicaof".into(), "127.0.0.1".into(), primary.to_string()]);
        }
        ServerProcess::spawn(
            format!("{} {name} (TLS)", self.binary.flavor),
            &self.binary.path,
            &args,
            self.dir,
            self.dir.join(format!("{name}.log")),
        )
    }
}

/// `Ok` when the server on TLS port `port` answers `PING` with `PONG`.
async fn tls_ping(connector: &TlsConnector, port: u16) -> Result<(), String> {
    match tls_exchange(connector, port, &[&["PING"]]).await?.as_slice() {
        [Reply::Simple(s)] if s == "PONG" => Ok(()),
        other => Err(format!("PING answered {other:?}")),
    }
}

/// One TLS connection to `127.0.0.1:port` carrying `commands`, bounded by the probe
/// timeout.
async fn tls_exchange(
    connector: &TlsConnector,
    port: u16,
    commands: &[&[&str]],
) -> Result<Vec<Reply>, String> {
    let exchange = async {
        let tcp = TcpStream::connect((Ipv4Addr::LOCALHOST, port))
            .await
            .map_err(|e| format!("connecting to 127.0.0.1:{port}: {e}"))?;
        let name = ServerName::IpAddress(Ipv4Addr::LOCALHOST.into());
        let tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake with 127.0.0.1:{port}: {e}"))?;
        resp::exchange(tls, commands).await
    };
    tokio::time::timeout(PROBE_TIMEOUT, exchange)
        .await
        .map_err(|_| format!("no reply over TLS to {commands:?} within {PROBE_TIMEOUT:?}"))?
}

/// Longest one TLS probe may take.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The harness's own client: trusts the CA, presents the client certificate.
fn harness_client(files: &TlsFiles) -> Result<Arc<rustls::ClientConfig>, HarnessError> {
    let what = "building the harness's TLS client";
    let invalid = |e: &dyn std::fmt::Display| HarnessError::request(what, e.to_string());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&files.ca).map_err(|e| invalid(&e))? {
        roots.add(cert.map_err(|e| invalid(&e))?).map_err(|e| invalid(&e))?;
    }
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.client_cert)
        .map_err(|e| invalid(&e))?
        .collect::<Result<_, _>>()
        .map_err(|e| invalid(&e))?;
    let key = PrivateKeyDer::from_pem_file(&files.client_key).map_err(|e| invalid(&e))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(&e))?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| invalid(&e))?;
    Ok(Arc::new(config))
}

/// Generates the CA, the server and client certificates and the unrelated CA into `dir`.
fn write_certificates(dir: &Path) -> Result<TlsFiles, HarnessError> {
    let gen_err = |e: rcgen::Error| HarnessError::request("generating test certificates", e.to_string());
    let (ca_params, ca_key) = ca("tierlog test CA").map_err(gen_err)?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(gen_err)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let (other_params, other_key) = ca("tierlog unrelated CA").map_err(gen_err)?;
    let other_cert = other_params.self_signed(&other_key).map_err(gen_err)?;

    let names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
    let mut server = CertificateParams::new(names).map_err(gen_err)?;
    server.distinguished_name.push(DnType::CommonName, "tierlog test valkey");
    // The replica presents it as its client certificate to the primary.
    server.extended_key_usages =
        vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    let server_key = KeyPair::generate().map_err(gen_err)?;
    let server_cert = server.signed_by(&server_key, &issuer).map_err(gen_err)?;

    let mut client = CertificateParams::new(Vec::<String>::new()).map_err(gen_err)?;
    client.distinguished_name.push(DnType::CommonName, "tierlog test client");
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_key = KeyPair::generate().map_err(gen_err)?;
    let client_cert = client.signed_by(&client_key, &issuer).map_err(gen_err)?;

    let files = TlsFiles {
        ca: dir.join("ca.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server-key.pem"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client-key.pem"),
        other_ca: dir.join("other-ca.pem"),
    };
    let contents = [
        (&files.ca, ca_cert.pem()),
        (&files.server_cert, server_cert.pem()),
        (&files.server_key, server_key.serialize_pem()),
        (&files.client_cert, client_cert.pem()),
        (&files.client_key, client_key.serialize_pem()),
        (&files.other_ca, other_cert.pem()),
    ];
    for (path, pem) in contents {
        std::fs::write(path, pem).map_err(|e| HarnessError::io(format!("writing {}", path.display()), e))?;
    }
    Ok(files)
}

/// A CA's parameters and key.
fn ca(name: &str) -> Result<(CertificateParams, KeyPair), rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    Ok((params, KeyPair::generate()?))
}
