//! The metrics endpoint serves the documented names during produce and consume runs.

// Tests use the real clock: deadlines for real servers, a retention "now" past what they wrote.
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support::{tierlog, workdir};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

fn scrape(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(text)
}

/// Scrapes until `ready` holds (the child is still running), with a deadline.
fn scrape_until(port: u16, child: &mut Child, ready: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(text) = scrape(port)
            && ready(&text)
        {
            return text;
        }
        assert!(child.try_wait().expect("child").is_none(), "tierlog exited early");
        assert!(Instant::now() < deadline, "metrics never showed the expected values: {:?}", scrape(port));
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn documented_names() -> Vec<String> {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/metrics.md")).expect("docs");
    doc.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|n| n.starts_with("tierlog_"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_endpoint_serves_the_documented_names() {
    let dir = workdir();
    let names = documented_names();
    assert!(names.len() >= 10, "docs/metrics.md documents the metrics: {names:?}");

    // A producer reading stdin stays up while the pipe is open.
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut producer = tierlog(dir.path())
        .args(["produce", "m", "--metrics-addr", &addr])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn produce");
    let mut stdin = producer.stdin.take().expect("stdin");
    for i in 0..100 {
        writeln!(stdin, "m{i}").expect("write a line");
    }
    stdin.flush().expect("flush");
    let text = scrape_until(port, &mut producer, |t| t.contains("tierlog_append_records_total 100"));
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    for name in &names {
        let found =
            text.lines().any(|l| l.starts_with(name.as_str()) || l.starts_with(&format!("# TYPE {name}")));
        assert!(found || name == "tierlog_export_lag_records", "{name} missing while producing:\n{text}");
    }
    assert!(text.contains("tierlog_append_seconds"), "{text}");
    drop(stdin);
    let out = producer.wait_with_output().expect("produce ends at EOF");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // A consumer following the topic: reads per tier and seeks.
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut consumer = tierlog(dir.path())
        .args(["consume", "m", "--follow", "--metrics-addr", &addr])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn consume");
    let text =
        scrape_until(port, &mut consumer, |t| t.contains("tierlog_read_records_total{tier=\"hot\"} 100"));
    consumer.kill().expect("stop the consumer");
    let _ = consumer.wait();
    for name in [
        "tierlog_seek_requests_total",
        "tierlog_seek_seconds",
        "tierlog_read_bytes_total",
        "tierlog_export_lag_records",
    ] {
        assert!(text.contains(name), "{name} missing while consuming:\n{text}");
    }
}
