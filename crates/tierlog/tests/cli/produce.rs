//! `produce`: acknowledgements as they happen, a JSON summary, Ctrl-C, CRLF input.

use std::io::{BufRead, BufReader, Read, Write};

use crate::support::{lines_file, ok, run, spawn_piped, stderr, workdir};

fn json_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

#[test]
fn acks_file_gets_one_line_per_acknowledged_batch_and_json_summarises() {
    let dir = workdir();
    lines_file(dir.path(), "in.txt", 25);
    let out = ok(
        dir.path(),
        &["produce", "t", "--file", "in.txt", "--batch", "10", "--acks", "acks.jsonl", "--json"],
    );
    let summary: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON summary");
    assert_eq!(summary["records"], 25);
    assert_eq!((summary["start"].clone(), summary["end"].clone()), (0.into(), 25.into()));
    assert_eq!(summary["interrupted"], false);
    let acks = json_lines(&std::fs::read_to_string(dir.path().join("acks.jsonl")).expect("acks file"));
    let mut next = 0;
    for ack in &acks {
        assert_eq!(ack["start"], next, "{acks:?}");
        let end = ack["end"].as_u64().expect("end");
        assert_eq!(ack["count"], end - next);
        next = end;
    }
    assert_eq!(next, 25, "{acks:?}");
}

#[test]
fn ctrl_c_reports_what_was_acknowledged_closes_the_store_and_exits_130() {
    let dir = workdir();
    let mut producer = spawn_piped(dir.path(), &["produce", "t", "--acks", "-"]);
    let mut stdin = producer.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(producer.stdout.take().expect("stdout"));
    stdin.write_all(b"a\nb\nc\n").expect("write lines");
    stdin.flush().expect("flush");
    // Wait (blocking on the pipe) until all three are acknowledged; stdin stays open.
    let mut acked = 0;
    while acked < 3 {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).expect("read an ack") > 0, "produce ended early");
        acked = json_lines(&line)[0]["end"].as_u64().expect("end");
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &producer.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let out = producer.wait_with_output().expect("produce ends");
    drop(stdin);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted: 3 records acknowledged at offsets [0, 3)"), "{err}");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).expect("the rest of stdout");
    assert!(rest.contains("produced 3 records"), "{rest}");
    assert_eq!(ok(dir.path(), &["consume", "t"]), "a\nb\nc\n");
    // Closed gracefully: the next process opens the directory (the lock is free).
    let again = run(dir.path(), &["produce", "t", "--count", "1"]);
    assert!(again.status.success(), "{:?} {}", again.status, stderr(&again));
}

#[test]
fn crlf_lines_lose_the_cr_unless_kept() {
    let dir = workdir();
    std::fs::write(dir.path().join("crlf.txt"), "one\r\ntwo\r\n").expect("write");
    ok(dir.path(), &["produce", "t", "--file", "crlf.txt"]);
    assert_eq!(ok(dir.path(), &["consume", "t"]), "one\ntwo\n");
    ok(dir.path(), &["produce", "k", "--file", "crlf.txt", "--keep-cr"]);
    assert_eq!(ok(dir.path(), &["consume", "k"]), "one\r\ntwo\r\n");
}

/// The files under `dir/data`, the store's own aside (the data directory's lock, the state
/// directory's lock and owner record): a topic's files only.
fn data_files(dir: &std::path::Path) -> Vec<String> {
    let mut files = Vec::new();
    let mut todo = vec![dir.join("data")];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if !(path.ends_with(".lock")
                || path.ends_with(".router.lock")
                || path.ends_with("router/owner"))
            {
                files.push(path.strip_prefix(dir).expect("under dir").display().to_string());
            }
        }
    }
    files
}

#[test]
fn an_unknown_topic_is_an_error_and_neither_a_read_nor_a_refused_write_leaves_files() {
    let dir = workdir();
    let out = run(dir.path(), &["consume", "nosuchtopic"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("topic 'nosuchtopic' does not exist"), "{err}");
    assert_eq!(data_files(dir.path()), Vec::<String>::new());
    let out = run(dir.path(), &["produce", "big", "--count", "1", "--size", "65MiB"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("refused, nothing was written"), "{err}");
    assert_eq!(data_files(dir.path()), Vec::<String>::new());
}

/// The offsets of each acknowledged batch in an `--acks` file, in order.
fn ack_counts(path: &std::path::Path) -> Vec<u64> {
    let acks = json_lines(&std::fs::read_to_string(path).expect("acks file"));
    acks.iter().map(|a| a["count"].as_u64().expect("count")).collect()
}

#[test]
fn large_records_are_cut_into_batches_under_the_batch_limit() {
    // 1,000 records per batch (the default) of 1 MiB would be a 1,000 MiB batch, far over
    // the largest record batch (64 MiB): produce cuts batches by bytes too.
    let dir = workdir();
    let out =
        ok(dir.path(), &["produce", "synthetic", "--count", "80", "--size", "1MiB", "--acks", "a.jsonl"]);
    assert!(out.contains("produced 80 records"), "{out}");
    let counts = ack_counts(&dir.path().join("a.jsonl"));
    assert!(counts.len() > 1 && counts.iter().sum::<u64>() == 80, "{counts:?}");

    let line = vec![b'x'; 1 << 20];
    let mut input = Vec::new();
    for _ in 0..80 {
        input.extend_from_slice(&line);
        input.push(b'\n');
    }
    std::fs::write(dir.path().join("big.txt"), &input).expect("write");
    let out = ok(dir.path(), &["produce", "lines", "--file", "big.txt", "--acks", "b.jsonl"]);
    assert!(out.contains("produced 80 records"), "{out}");
    let counts = ack_counts(&dir.path().join("b.jsonl"));
    assert!(counts.len() > 1 && counts.iter().sum::<u64>() == 80, "{counts:?}");
    let read = ok(dir.path(), &["consume", "lines"]);
    assert_eq!(read.len(), input.len(), "every line back, with its bytes");
    assert!(read.as_bytes() == input.as_slice());
}
