//! [`S3Server`]: a private moto S3 server, and [`S3Settings`] to reach any S3 endpoint.

use tempfile::TempDir;

use super::{
    HarnessError, MOTO_READY_TIMEOUT, http,
    locate::MotoBinary,
    poll::wait_until_answering,
    process::{ServerProcess, launch_on_a_free_port, temp_dir},
};

/// The region moto is addressed with.
pub const S3_REGION: &str = "us-east-1";
/// moto accepts any credentials; these are the conventional test ones.
pub const S3_ACCESS_KEY: &str = "testing";
/// See [`S3_ACCESS_KEY`].
pub const S3_SECRET_KEY: &str = "testing";

/// How to reach an S3 endpoint in tests (plain HTTP, path-style buckets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Settings {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    /// Region to sign requests for (`us-east-1`).
    pub region: String,
    /// Access key id (`testing`).
    pub access_key_id: String,
    /// Secret access key (`testing`).
    pub secret_access_key: String,
}

impl S3Settings {
    /// Settings for a moto server at `endpoint`.
    pub fn moto(endpoint: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            region: S3_REGION.into(),
            access_key_id: S3_ACCESS_KEY.into(),
            secret_access_key: S3_SECRET_KEY.into(),
        }
    }

    /// Creates bucket `name` with an unsigned path-style `PUT /<name>` (moto does not
    /// check signatures). Succeeds if the bucket already exists and is ours.
    pub async fn create_bucket(&self, name: &str) -> Result<(), HarnessError> {
        let what = format!("creating bucket {name:?} at {}", self.endpoint);
        let authority = http::authority(&self.endpoint).map_err(|m| HarnessError::request(&what, m))?;
        let response = http::request(authority, "PUT", &format!("/{name}"))
            .await
            .map_err(|m| HarnessError::request(&what, m))?;
        if response.status != 200 {
            return Err(HarnessError::request(
                what,
                format!("HTTP {}: {}", response.status, response.body.trim()),
            ));
        }
        Ok(())
    }

    /// The header fields (names lower-cased) of a path-style `HEAD /<bucket>/<key>`:
    /// what the server stored with the object, such as `x-amz-server-side-encryption`.
    /// `key` is sent as given (no percent-encoding). The request names the access key in
    /// an `Authorization` header with a dummy signature: moto answers an anonymous
    /// object request 403 and does not check signatures.
    pub async fn head_object(&self, bucket: &str, key: &str) -> Result<Vec<(String, String)>, HarnessError> {
        let what = format!("HEAD {bucket}/{key} at {}", self.endpoint);
        let authority = http::authority(&self.endpoint).map_err(|m| HarnessError::request(&what, m))?;
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential={}/20000101/{}/s3/aws4_request, SignedHeaders=host, Signature=0",
            self.access_key_id, self.region
        );
        let headers = [("Authorization", authorization)];
        let response = http::request_with(authority, "HEAD", &format!("/{bucket}/{key}"), &headers, &[])
            .await
            .map_err(|m| HarnessError::request(&what, m))?;
        if response.status != 200 {
            return Err(HarnessError::request(what, format!("HTTP {}", response.status)));
        }
        Ok(response.headers)
    }
}

/// A `moto_server` on a free 127.0.0.1 port, killed by PID when dropped.
#[derive(Debug)]
pub struct S3Server {
    binary: MotoBinary,
    process: Option<ServerProcess>,
    port: u16,
    // Declared last: removed after the process is killed.
    dir: TempDir,
}

impl S3Server {
    /// Locates `moto_server`, starts `moto_server -H 127.0.0.1 -p <port>` and waits until
    /// it answers HTTP.
    pub async fn start() -> Result<Self, HarnessError> {
        let binary = MotoBinary::locate()?;
        let dir = temp_dir("tierlog-moto-", "moto")?;
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

    /// The port (kept across [`restart`](Self::restart)).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connection settings for this server.
    pub fn settings(&self) -> S3Settings {
        S3Settings::moto(self.endpoint())
    }

    /// The running server's PID.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ServerProcess::pid)
    }

    /// Creates bucket `name`.
    pub async fn create_bucket(&self, name: &str) -> Result<(), HarnessError> {
        self.settings().create_bucket(name).await
    }

    /// Deletes every bucket and object (`POST /moto-api/reset`).
    pub async fn reset(&self) -> Result<(), HarnessError> {
        let what = format!("resetting moto at {}", self.endpoint());
        let authority = format!("127.0.0.1:{}", self.port);
        let response = http::request(&authority, "POST", "/moto-api/reset")
            .await
            .map_err(|m| HarnessError::request(&what, m))?;
        if response.status != 200 {
            return Err(HarnessError::request(what, format!("HTTP {}: {}", response.status, response.body)));
        }
        Ok(())
    }

    /// Kills the server (SIGKILL by PID) and waits for it to exit. Its state is lost.
    pub async fn stop(&mut self) {
        if let Some(process) = self.process.take() {
            process.kill();
        }
    }

    /// Stops the server if it runs and starts it again, empty, on the same port.
    pub async fn restart(&mut self) -> Result<(), HarnessError> {
        self.stop().await;
        let process = self.launch(self.port).await?;
        self.process = Some(process);
        Ok(())
    }

    fn log_path(&self) -> std::path::PathBuf {
        self.dir.path().join("moto.log")
    }

    async fn launch(&self, port: u16) -> Result<ServerProcess, HarnessError> {
        let args = ["-H".to_string(), "127.0.0.1".into(), "-p".into(), port.to_string()];
        let mut process =
            ServerProcess::spawn("moto_server", &self.binary.path, &args, self.dir.path(), self.log_path())?;
        let authority = format!("127.0.0.1:{port}");
        let answers = || async {
            match http::request(&authority, "GET", "/").await? {
                r if r.status < 500 => Ok(()),
                r => Err(format!("GET / answered HTTP {}", r.status)),
            }
        };
        let what = format!("moto_server on port {port}");
        wait_until_answering(&mut process, what, MOTO_READY_TIMEOUT, answers).await?;
        Ok(process)
    }
}
