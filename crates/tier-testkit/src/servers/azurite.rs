//! [`Azurite`]: a private Azurite Blob service (Microsoft's Azure Storage emulator, from
//! npm), and [`AzureSettings`] to reach it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use tempfile::TempDir;

use super::{
    AZURITE_READY_TIMEOUT, HarnessError, http,
    locate::AzuriteBinary,
    poll::wait_until_answering,
    process::{ServerProcess, launch_on_a_free_port, temp_dir},
};

/// The storage account every Azurite serves (its documented development account).
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
/// The development account's key, published in Azurite's documentation (not a secret).
pub const AZURITE_ACCESS_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
/// The Blob service REST version the harness's own requests speak.
const API_VERSION: &str = "2021-08-06";

/// How to reach an Azure Blob account in tests (plain HTTP, path-style: the account is
/// the URL's first path segment, as Azurite serves it).
#[derive(Clone, PartialEq, Eq)]
pub struct AzureSettings {
    /// `http://127.0.0.1:<port>/devstoreaccount1`: the account's URL.
    pub account_url: String,
    /// The storage account (`devstoreaccount1`).
    pub account: String,
    /// The account key (base64).
    pub access_key: String,
}

impl std::fmt::Debug for AzureSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AzureSettings")
            .field("account_url", &self.account_url)
            .field("account", &self.account)
            .field("access_key", &"***")
            .finish()
    }
}

impl AzureSettings {
    /// Settings for an Azurite at `endpoint` (`http://127.0.0.1:<port>`).
    pub fn azurite(endpoint: &str) -> Self {
        Self {
            account_url: format!("{}/{AZURITE_ACCOUNT}", endpoint.trim_end_matches('/')),
            account: AZURITE_ACCOUNT.into(),
            access_key: AZURITE_ACCESS_KEY.into(),
        }
    }

    /// Creates container `name` (`PUT ?restype=container`, signed with the account key).
    /// Succeeds if it already exists.
    pub async fn create_container(&self, name: &str) -> Result<(), HarnessError> {
        let what = format!("creating container {name:?} at {}", self.account_url);
        let fail = |m: String| HarnessError::request(&what, m);
        let rest = self
            .account_url
            .strip_prefix("http://")
            .ok_or_else(|| fail(format!("account URL {:?} does not start with http://", self.account_url)))?;
        let (authority, account_path) = rest.split_once('/').unwrap_or((rest, ""));
        let path = format!("/{account_path}/{name}");
        // A request header's date, not a time the store sees.
        #[allow(clippy::disallowed_methods)]
        let date = httpdate::fmt_http_date(std::time::SystemTime::now());
        let signature =
            self.sign(&shared_key_string_to_sign("PUT", &date, &self.account, &path, "restype:container"))?;
        let headers = [
            ("x-ms-date", date),
            ("x-ms-version", API_VERSION.to_owned()),
            ("Authorization", format!("SharedKey {}:{signature}", self.account)),
        ];
        let response =
            http::request_with(authority, "PUT", &format!("{path}?restype=container"), &headers, &[])
                .await
                .map_err(fail)?;
        match response.status {
            201 => Ok(()),
            409 if response.body.contains("ContainerAlreadyExists") => Ok(()),
            status => Err(fail(format!("HTTP {status}: {}", response.body.trim()))),
        }
    }

    /// HMAC-SHA256 of `string_to_sign` with the account key, base64.
    fn sign(&self, string_to_sign: &str) -> Result<String, HarnessError> {
        let key = BASE64.decode(&self.access_key).map_err(|e| {
            HarnessError::request("signing an Azure request", format!("the account key is not base64: {e}"))
        })?;
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key);
        Ok(BASE64.encode(ring::hmac::sign(&key, string_to_sign.as_bytes()).as_ref()))
    }
}

/// The Shared Key string to sign of a body-less request with no standard headers but
/// `x-ms-date` and `x-ms-version`: the verb, eleven empty standard headers, the two
/// `x-ms-` headers, and the resource `/<account><path>` with its query parameters
/// (`name:value`, one per line).
fn shared_key_string_to_sign(verb: &str, date: &str, account: &str, path: &str, query: &str) -> String {
    format!(
        "{verb}\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:{date}\nx-ms-version:{API_VERSION}\n/{account}{path}\n{query}"
    )
}

/// An `azurite-blob` on a free 127.0.0.1 port, keeping its data in memory, killed by PID
/// when dropped.
#[derive(Debug)]
pub struct Azurite {
    binary: AzuriteBinary,
    process: Option<ServerProcess>,
    port: u16,
    // Declared last: removed after the process is killed.
    dir: TempDir,
}

impl Azurite {
    /// Locates `azurite-blob`, starts it on a free port and waits until it answers HTTP.
    pub async fn start() -> Result<Self, HarnessError> {
        let binary = AzuriteBinary::locate()?;
        let dir = temp_dir("tierlog-azurite-", "Azurite")?;
        let mut server = Self { binary, process: None, port: 0, dir };
        let (process, port) = launch_on_a_free_port(&server.log_path(), |port| server.launch(port)).await?;
        server.process = Some(process);
        server.port = port;
        Ok(server)
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Connection settings for the development account.
    pub fn settings(&self) -> AzureSettings {
        AzureSettings::azurite(&self.endpoint())
    }

    /// The running server's PID.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ServerProcess::pid)
    }

    /// Creates container `name` in the development account.
    pub async fn create_container(&self, name: &str) -> Result<(), HarnessError> {
        self.settings().create_container(name).await
    }

    /// Kills the server (SIGKILL by PID) and waits for it to exit. Its data is lost.
    pub async fn stop(&mut self) {
        if let Some(process) = self.process.take() {
            process.kill();
        }
    }

    fn log_path(&self) -> std::path::PathBuf {
        self.dir.path().join("azurite.log")
    }

    async fn launch(&self, port: u16) -> Result<ServerProcess, HarnessError> {
        // Data in memory (`--inMemoryPersistence` excludes `--location`); the working
        // directory is the temporary one.
        let args: Vec<String> = [
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            &port.to_string(),
            "--inMemoryPersistence",
            "--disableTelemetry",
            "--skipApiVersionCheck",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut process =
            ServerProcess::spawn("azurite-blob", &self.binary.path, &args, self.dir.path(), self.log_path())?;
        let authority = format!("127.0.0.1:{port}");
        // Any HTTP answer (Azurite answers `GET /` with an error document) means it serves.
        let answers = || async {
            match http::request(&authority, "GET", "/").await? {
                r if r.status < 500 => Ok(()),
                r => Err(format!("GET / answered HTTP {}", r.status)),
            }
        };
        let what = format!("azurite-blob on port {port}");
        wait_until_answering(&mut process, what, AZURITE_READY_TIMEOUT, answers).await?;
        Ok(process)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_string_to_sign_has_the_verb_eleven_empty_headers_the_ms_headers_and_the_resource() {
        let s = shared_key_string_to_sign("PUT", "D", "acct", "/acct/c", "restype:container");
        let lines: Vec<&str> = s.split('\n').collect();
        assert_eq!(lines[0], "PUT");
        assert!(lines[1..12].iter().all(|l| l.is_empty()), "{lines:?}");
        assert_eq!(
            &lines[12..],
            ["x-ms-date:D", &format!("x-ms-version:{API_VERSION}"), "/acct/acct/c", "restype:container"]
        );
    }

    #[test]
    fn settings_hide_the_key_and_sign_with_it() {
        let settings = AzureSettings::azurite("http://127.0.0.1:1/");
        assert_eq!(settings.account_url, "http://127.0.0.1:1/devstoreaccount1");
        assert!(!format!("{settings:?}").contains(AZURITE_ACCESS_KEY));
        // HMAC-SHA256 is deterministic: the same input signs the same; another differs.
        let a = settings.sign("x").unwrap();
        assert_eq!(a, settings.sign("x").unwrap());
        assert_ne!(a, settings.sign("y").unwrap());
        let broken = AzureSettings { access_key: "not base64!".into(), ..settings };
        assert!(broken.sign("x").is_err());
    }
}
