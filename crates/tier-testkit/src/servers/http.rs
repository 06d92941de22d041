//! A minimal HTTP/1.1 client (one request per connection, `Connection: close`) for the
//! emulators' readiness probes, bucket / container creation and reset. Not a general
//! client.

use std::time::Duration;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// Largest response read; moto's replies to these requests are small.
const MAX_RESPONSE: u64 = 1 << 20;
/// Longest one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A response: status code, header fields (names lower-cased, in order) and the raw body
/// (not de-chunked; used for messages only).
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

/// Sends `method path` with an empty body to `host:port` (`authority` as given, e.g.
/// `127.0.0.1:9000`).
pub(crate) async fn request(authority: &str, method: &str, path: &str) -> Result<Response, String> {
    request_with(authority, method, path, &[], &[]).await
}

/// Sends `method path` with extra `headers` and `body` to `host:port`.
pub(crate) async fn request_with(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Result<Response, String> {
    tokio::time::timeout(REQUEST_TIMEOUT, request_inner(authority, method, path, headers, body))
        .await
        .map_err(|_| format!("{method} {path}: no response within {REQUEST_TIMEOUT:?}"))?
}

async fn request_inner(
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Result<Response, String> {
    let mut stream =
        TcpStream::connect(authority).await.map_err(|e| format!("connecting to {authority}: {e}"))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\nConnection: close\r\n\r\n", body.len()));
    let mut message = head.into_bytes();
    message.extend_from_slice(body);
    stream.write_all(&message).await.map_err(|e| format!("{method} {path}: sending: {e}"))?;
    let mut raw = Vec::new();
    stream
        .take(MAX_RESPONSE)
        .read_to_end(&mut raw)
        .await
        .map_err(|e| format!("{method} {path}: reading the response: {e}"))?;
    parse_response(&raw).ok_or_else(|| {
        format!(
            "{method} {path}: malformed response {:?}",
            String::from_utf8_lossy(&raw[..raw.len().min(200)])
        )
    })
}

fn parse_response(raw: &[u8]) -> Option<Response> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status_line = head.lines().next()?;
    let mut parts = status_line.split_whitespace();
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let status = parts.next()?.parse().ok()?;
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Some(Response { status, headers, body: body.to_owned() })
}

/// `host:port` from an `http://host:port[/]` endpoint.
pub(crate) fn authority(endpoint: &str) -> Result<&str, String> {
    let rest = endpoint
        .strip_prefix("http://")
        .ok_or_else(|| format!("endpoint {endpoint:?} does not start with http://"))?;
    Ok(rest.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_and_body() {
        let r = parse_response(b"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\nX-Amz-Id: a:b\r\n\r\nnop")
            .unwrap();
        assert_eq!((r.status, r.body.as_str()), (404, "nop"));
        assert_eq!(
            r.headers,
            [("content-length".to_owned(), "3".to_owned()), ("x-amz-id".to_owned(), "a:b".to_owned())]
        );
        assert!(parse_response(b"garbage").is_none());
        assert!(parse_response(b"").is_none());
    }

    #[test]
    fn authority_strips_scheme_and_slash() {
        assert_eq!(authority("http://127.0.0.1:5000/").unwrap(), "127.0.0.1:5000");
        assert!(authority("https://x").is_err());
    }
}
