//! A minimal RESP2 client for readiness checks (PING, INFO), so the harness needs no
//! Redis client crate. One command per connection; replies are bounded in size.
//! [`exchange`] speaks it over any stream (the TLS server's readiness goes over rustls).

use std::{net::Ipv4Addr, time::Duration};

use tokio::{
    io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader},
    net::TcpStream,
};

/// Largest bulk string accepted (INFO replies are a few KiB).
const MAX_BULK: usize = 1 << 20;
/// Longest a probe may take before it counts as a failure.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// A RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    /// `+OK`
    Simple(String),
    /// `-ERR …`
    Error(String),
    /// `:42`
    Integer(i64),
    /// `$n` bulk string, or `None` for `$-1`.
    Bulk(Option<Vec<u8>>),
    /// `*n` array, or `None` for `*-1`.
    Array(Option<Vec<Reply>>),
}

/// Sends one command to `127.0.0.1:port` and returns its reply; errors are strings
/// suitable for a readiness report.
pub(crate) async fn command(port: u16, args: &[&str]) -> Result<Reply, String> {
    tokio::time::timeout(PROBE_TIMEOUT, command_inner(port, args))
        .await
        .map_err(|_| format!("no reply to {args:?} within {PROBE_TIMEOUT:?}"))?
}

async fn command_inner(port: u16, args: &[&str]) -> Result<Reply, String> {
    let mut replies = pipeline_inner(port, &[args]).await?;
    replies.pop().ok_or_else(|| format!("no reply to {args:?}"))
}

/// Sends several commands on one connection (so `WAIT` sees the connection's own
/// writes) and returns their replies in order.
pub(crate) async fn pipeline(port: u16, commands: &[&[&str]]) -> Result<Vec<Reply>, String> {
    tokio::time::timeout(PROBE_TIMEOUT, pipeline_inner(port, commands))
        .await
        .map_err(|_| format!("no reply to {commands:?} within {PROBE_TIMEOUT:?}"))?
}

async fn pipeline_inner(port: u16, commands: &[&[&str]]) -> Result<Vec<Reply>, String> {
    let stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port))
        .await
        .map_err(|e| format!("connecting to 127.0.0.1:{port}: {e}"))?;
    exchange(stream, commands).await
}

/// Sends `commands` on `stream` and reads their replies in order (no timeout of its own).
pub(crate) async fn exchange<S>(mut stream: S, commands: &[&[&str]]) -> Result<Vec<Reply>, String>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut request = Vec::new();
    for args in commands {
        request.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for arg in *args {
            request.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            request.extend_from_slice(arg.as_bytes());
            request.extend_from_slice(b"\r\n");
        }
    }
    stream.write_all(&request).await.map_err(|e| format!("sending {commands:?}: {e}"))?;
    let mut reader = BufReader::new(stream);
    let mut replies = Vec::with_capacity(commands.len());
    for _ in commands {
        replies.push(read_reply(&mut reader, 0).await?);
    }
    Ok(replies)
}

/// Text of an `INFO <section>` reply.
pub(crate) async fn info(port: u16, section: &str) -> Result<String, String> {
    match command(port, &["INFO", section]).await? {
        Reply::Bulk(Some(bytes)) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        other => Err(format!("unexpected INFO reply {other:?}")),
    }
}

/// True when `PING` answers `PONG`.
pub(crate) async fn ping(port: u16) -> Result<(), String> {
    match command(port, &["PING"]).await? {
        Reply::Simple(s) if s == "PONG" => Ok(()),
        other => Err(format!("PING answered {other:?}")),
    }
}

async fn read_line(reader: &mut (impl AsyncBufRead + Unpin)) -> Result<String, String> {
    let mut line = Vec::new();
    // Bounded read: a status line is short.
    let n = (&mut *reader).take(64 << 10).read_until(b'\n', &mut line).await.map_err(|e| e.to_string())?;
    if n == 0 || !line.ends_with(b"\r\n") {
        return Err("connection closed mid-reply".into());
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).map_err(|_| "non-UTF-8 reply line".to_string())
}

async fn read_reply<R: AsyncBufRead + Unpin>(reader: &mut R, depth: usize) -> Result<Reply, String> {
    if depth > 8 {
        return Err("reply nested too deeply".into());
    }
    let line = read_line(reader).await?;
    let (kind, rest) = line.split_at_checked(1).ok_or("empty reply line")?;
    let parse_int = |s: &str| s.parse::<i64>().map_err(|_| format!("bad integer {s:?}"));
    match kind {
        "+" => Ok(Reply::Simple(rest.to_owned())),
        "-" => Ok(Reply::Error(rest.to_owned())),
        ":" => Ok(Reply::Integer(parse_int(rest)?)),
        "$" => {
            let len = parse_int(rest)?;
            if len < 0 {
                return Ok(Reply::Bulk(None));
            }
            let len = usize::try_from(len).map_err(|_| "bulk length overflows")?;
            if len > MAX_BULK {
                return Err(format!("bulk reply of {len} bytes exceeds {MAX_BULK}"));
            }
            let mut buf = vec![0u8; len + 2];
            reader.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
            buf.truncate(len);
            Ok(Reply::Bulk(Some(buf)))
        }
        "*" => {
            let len = parse_int(rest)?;
            if len < 0 {
                return Ok(Reply::Array(None));
            }
            if len > 1024 {
                return Err(format!("array reply of {len} items is too long for a probe"));
            }
            let mut items = Vec::with_capacity(len as usize);
            for _ in 0..len {
                items.push(Box::pin(read_reply(reader, depth + 1)).await?);
            }
            Ok(Reply::Array(Some(items)))
        }
        _ => Err(format!("unknown reply type in {line:?}")),
    }
}
