//! TLS on the listener and bearer tokens.

use std::path::Path;

use tierlog_api::ApiError;
use tierlog_client::{Client, ErrorKind, NewRecordJson, Start};

use crate::support::{serve, tree, workdir};
use futures::StreamExt;

/// A self-signed certificate for 127.0.0.1 and localhost, written to `dir`; its PEM.
fn self_signed(dir: &Path) -> String {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .expect("a self-signed certificate");
    let pem = certified.cert.pem();
    std::fs::write(dir.join("cert.pem"), &pem).expect("write cert");
    std::fs::write(dir.join("key.pem"), certified.signing_key.serialize_pem()).expect("write key");
    pem
}

#[tokio::test]
async fn tls_serves_https_with_the_configured_certificate() {
    let dir = workdir();
    let pem = self_signed(dir.path());
    let server = serve(dir.path(), &["--tls-cert", "cert.pem", "--tls-key", "key.pem"]);
    assert!(server.url.starts_with("https://127.0.0.1:"), "{}", server.url);
    let client = Client::builder(&server.url).ca_certificate_pem(pem).build().expect("client");
    let offsets =
        client.append("secure", vec![NewRecordJson::new("over tls")]).await.expect("append over TLS");
    let record = read_one(&client, offsets.start).await;
    assert_eq!(&record.payload[..], b"over tls");
    // An append stream is upgraded inside the TLS connection.
    let stream = client.append_stream("secure").await.expect("an append stream over TLS");
    let streamed = tierlog_client::Record {
        offset: 0,
        timestamp: tierlog_client::SERVER_CLOCK,
        key: None,
        headers: Vec::new(),
        payload: bytes::Bytes::from_static(b"streamed over tls"),
    };
    let answer = stream.append(&[streamed]).await.expect("a batch over the stream");
    assert_eq!((answer.start, answer.end), (offsets.end, offsets.end + 1));
    let record = read_one(&client, answer.start).await;
    assert_eq!(&record.payload[..], b"streamed over tls");

    // A client that does not trust the certificate cannot talk to it, and plain HTTP on
    // the TLS port gets no answer.
    let untrusting = Client::new(&server.url).expect("client");
    assert!(matches!(untrusting.topics().await, Err(tierlog_client::Error::Http(_))));
    let plain = reqwest::Client::new()
        .get(format!("{}/healthz", server.url.replace("https://", "http://")))
        .send()
        .await;
    assert!(
        plain.map_or(true, |r| !r.status().is_success()),
        "plain HTTP must not be served on the TLS port"
    );
    assert!(server.terminate().success());
}

#[tokio::test]
async fn a_bad_tls_pair_fails_before_the_store_is_opened() {
    let dir = workdir();
    std::fs::write(dir.path().join("cert.pem"), "not a certificate").expect("write");
    std::fs::write(dir.path().join("key.pem"), "not a key").expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tierlog"))
        .current_dir(dir.path())
        .args([
            "--data-dir",
            "data",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            "cert.pem",
            "--tls-key",
            "key.pem",
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: ") && stderr.contains("cert.pem"), "{stderr}");
    assert!(!dir.path().join("data").exists(), "nothing was created: {:?}", tree(dir.path()));
}

const CONFIG_TOKEN: &str = "config-token-5f0c1d2e";
const FILE_TOKEN: &str = "file-token-9a8b7c6d";

#[tokio::test]
async fn without_a_valid_token_requests_get_401_and_write_nothing() {
    let dir = workdir();
    let config = format!(
        "[hot]\ndata_dir = \"data/hot\"\n\n[cold]\nbackend = {{ kind = \"local\", path = \"data/cold\" }}\n\n\
         [router]\nstate_dir = \"data/router\"\n\n[server]\ntokens = [\"{CONFIG_TOKEN}\"]\n"
    );
    std::fs::write(dir.path().join("tierlog.toml"), config).expect("write config");
    std::fs::write(dir.path().join("tokens"), format!("# operators\n{FILE_TOKEN}\n\n"))
        .expect("write tokens");
    let server = serve(dir.path(), &["--token-file", "tokens"]);
    let http = reqwest::Client::new();
    let records = format!("{}/v1/topics/locked/records", server.url);
    for auth in [None, Some("Bearer wrong-token"), Some("Basic Y29uZmlnLXRva2Vu"), Some(CONFIG_TOKEN)] {
        let mut request = http.post(&records).header("content-type", "text/plain").body("x");
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        let response = request.send().await.expect("request");
        assert_eq!(response.status().as_u16(), 401, "authorization {auth:?}");
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
        let error: ApiError = response.json().await.expect("an error body");
        assert_eq!(error.kind(), ErrorKind::Unauthorized);
    }
    for path in ["/v1/topics", "/v1/topics/locked/records", "/metrics", "/"] {
        let response = http.get(format!("{}{path}", server.url)).send().await.expect("request");
        assert_eq!(response.status().as_u16(), 401, "GET {path} without a token");
    }
    let unauthorised = tree(dir.path());
    assert!(unauthorised.iter().all(|p| !p.contains("locked")), "a refused request wrote: {unauthorised:?}");
    // Probes need no token.
    for path in ["/healthz", "/readyz"] {
        assert!(http.get(format!("{}{path}", server.url)).send().await.expect(path).status().is_success());
    }
    // Either token works, from the configuration or the token file.
    for token in [CONFIG_TOKEN, FILE_TOKEN] {
        let client = Client::builder(&server.url).token(token).build().expect("client");
        client.append("locked", vec![NewRecordJson::new("ok")]).await.expect("append with a token");
        assert!(!format!("{client:?}").contains(token), "the client's Debug shows the token");
    }
    let client = Client::builder(&server.url).token(FILE_TOKEN).build().expect("client");
    assert_eq!(client.topic("locked").await.expect("topic").committed, 2);

    // Tokens appear in no log and not in `tierlog config`.
    let config_out = std::process::Command::new(env!("CARGO_BIN_EXE_tierlog"))
        .current_dir(dir.path())
        .arg("config")
        .output()
        .expect("tierlog config");
    assert!(config_out.status.success());
    let printed = String::from_utf8_lossy(&config_out.stdout);
    assert!(server.terminate().success());
    let log = std::fs::read_to_string(dir.path().join("server.log")).expect("log");
    for token in [CONFIG_TOKEN, FILE_TOKEN] {
        assert!(!printed.contains(token), "tierlog config printed a token:\n{printed}");
        assert!(!log.contains(token), "the server logged a token");
    }
    assert!(log.contains("serving"), "the log was written (RUST_LOG=info): {log}");
}

/// The record at `offset` of `secure`.
async fn read_one(client: &Client, offset: u64) -> tierlog_client::Record {
    let mut read = client.read_with("secure", Start::Offset(offset), false, Some(1)).await.expect("read");
    read.next().await.expect("a record").expect("a record")
}

/// A token file that holds no token (blank lines and comments only) would let every
/// request in while `--help` promises that a token file makes every request need one:
/// `serve` refuses to start, naming the file, before it opens the store.
#[test]
fn a_token_file_without_a_token_refuses_to_start() {
    use std::io::{BufRead, BufReader};
    let dir = workdir();
    std::fs::write(dir.path().join("tokens"), "# operators\n\n   \n# nobody yet\n").expect("write tokens");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tierlog"))
        .current_dir(dir.path())
        .args(["--data-dir", "data", "serve", "--listen", "127.0.0.1:0", "--token-file", "tokens"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run");
    // A server that starts prints its URL first; one that refuses closes stdout.
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut first).expect("read stdout");
    if !first.is_empty() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("serve started with a token file holding no token, letting everyone in: {first}");
    }
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: ") && stderr.contains("tokens") && stderr.contains("no token"),
        "{stderr}"
    );
    assert!(!dir.path().join("data").exists(), "nothing was created: {:?}", tree(dir.path()));
}
