//! Waiting for a server: a probe run every [`POLL_INTERVAL`] until it succeeds, the
//! server's process exits, or a time limit passes.
//!
//! Every wait ends in an error that names what was awaited, how long the harness waited,
//! the reason the last probe gave, and the log(s) to read.

use std::{
    future::Future,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use super::{
    HarnessError, POLL_INTERVAL,
    process::{ServerProcess, log_tail},
};

/// How many log lines a [`wait_until_answering`] error ends with.
const STARTUP_TAIL_LINES: usize = 30;

/// Why [`poll`] gave up.
struct GaveUp {
    /// The exit `stop` reported, or the last probe's reason.
    reason: String,
    /// How long it polled.
    waited: Duration,
}

/// Runs `probe` every [`POLL_INTERVAL`] until it succeeds, for at most `limit` (the probe
/// that sees `limit` passed is the last). Before each probe `stop` may end the wait at
/// once with a reason (a process that exited cannot become ready).
async fn poll<T, S, F, Fut>(limit: Duration, mut stop: S, mut probe: F) -> Result<T, GaveUp>
where
    S: FnMut() -> Option<String>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    // Waiting for a real server to answer takes real time
    #[allow(clippy::disallowed_methods)]
    let start = Instant::now();
    loop {
        if let Some(reason) = stop() {
            return Err(GaveUp { reason, waited: start.elapsed() });
        }
        let reason = match probe().await {
            Ok(value) => return Ok(value),
            Err(why) => why,
        };
        if start.elapsed() > limit {
            return Err(GaveUp { reason, waited: start.elapsed() });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Runs `probe` every [`POLL_INTERVAL`] until it succeeds, for at most `limit`; the error
/// is the reason the last probe gave.
pub(crate) async fn retry<T, F, Fut>(limit: Duration, probe: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    poll(limit, || None, probe).await.map_err(|gave_up| gave_up.reason)
}

/// [`retry`], failing with [`HarnessError::NotReady`]: `what` was awaited for `limit`,
/// the last probe's reason, `log` (a file or the directory of the logs) and
/// `log_tails()` (called only on failure).
pub(crate) async fn poll_until<T, F, Fut>(
    what: &str,
    limit: Duration,
    probe: F,
    log: &Path,
    log_tails: impl FnOnce() -> String,
) -> Result<T, HarnessError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    retry(limit, probe).await.map_err(|reason| HarnessError::NotReady {
        what: what.to_owned(),
        waited: limit,
        reason,
        log: log.to_owned(),
        log_tail: log_tails(),
    })
}

/// Waits until the just-spawned `process` answers `probe`, tried every [`POLL_INTERVAL`]
/// for at most `limit`. Fails at once when the process exits, else when `limit` has
/// passed, with [`HarnessError::NotReady`]: `what` (the server and its port), the time
/// waited, the exit or the last probe's reason, and the process's log and its last lines.
pub(crate) async fn wait_until_answering<F, Fut>(
    process: &mut ServerProcess,
    what: String,
    limit: Duration,
    probe: F,
) -> Result<(), HarnessError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    match poll(limit, || process.exited(), probe).await {
        Ok(()) => Ok(()),
        Err(GaveUp { reason, waited }) => Err(HarnessError::NotReady {
            what,
            waited,
            reason,
            log: process.log().to_owned(),
            log_tail: log_tail(process.log(), STARTUP_TAIL_LINES),
        }),
    }
}

/// `[label]` and the last `lines` lines of each log, one block after the other, each
/// ended by a newline.
pub(crate) fn labelled_tails(logs: impl IntoIterator<Item = (String, PathBuf)>, lines: usize) -> String {
    logs.into_iter().map(|(label, path)| format!("[{label}]\n{}\n", log_tail(&path, lines))).collect()
}

/// `[primary]` and `[replica]` with the last 20 lines of `primary.log` and `replica.log`
/// in `dir`: the logs of a replication link.
pub(crate) fn primary_and_replica_tails(dir: &Path) -> String {
    let mut tail = format!("[primary]\n{}", log_tail(&dir.join("primary.log"), 20));
    tail.push_str(&format!("\n[replica]\n{}", log_tail(&dir.join("replica.log"), 20)));
    tail
}

/// The last component of `path` (empty when there is none).
pub(crate) fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::{cell::Cell, path::Path, time::Duration};

    use super::{labelled_tails, poll_until, primary_and_replica_tails, wait_until_answering};
    use crate::servers::{HarnessError, process::ServerProcess};

    const LONG: Duration = Duration::from_secs(3600);

    fn shell(dir: &Path, script: &str) -> ServerProcess {
        let args = ["-c".to_owned(), script.to_owned()];
        ServerProcess::spawn("sh", Path::new("/bin/sh"), &args, dir, dir.join("sh.log")).unwrap()
    }

    #[tokio::test]
    async fn poll_until_returns_what_the_probe_found_and_reads_no_log() {
        let attempts = Cell::new(0);
        let tails_read = Cell::new(false);
        let probe = || async {
            attempts.set(attempts.get() + 1);
            if attempts.get() < 3 { Err(format!("attempt {}", attempts.get())) } else { Ok(7) }
        };
        let found = poll_until("seven", LONG, probe, Path::new("/nowhere"), || {
            tails_read.set(true);
            String::new()
        })
        .await
        .unwrap();
        assert_eq!((found, attempts.get()), (7, 3));
        assert!(!tails_read.get());
    }

    #[tokio::test]
    async fn poll_until_fails_naming_what_the_limit_the_last_reason_and_the_logs() {
        let attempts = Cell::new(0);
        let probe = || async {
            attempts.set(attempts.get() + 1);
            Err::<(), _>(format!("attempt {}", attempts.get()))
        };
        let err = poll_until("the thing", Duration::ZERO, probe, Path::new("/logs"), || "the tails".into())
            .await
            .unwrap_err();
        match err {
            HarnessError::NotReady { what, waited, reason, log, log_tail } => {
                assert_eq!(what, "the thing");
                assert_eq!(waited, Duration::ZERO);
                assert_eq!(reason, format!("attempt {}", attempts.get()));
                assert_eq!(log, Path::new("/logs"));
                assert_eq!(log_tail, "the tails");
            }
            other => panic!("expected NotReady, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn waiting_for_a_process_that_exits_ends_with_its_exit_and_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut process = shell(dir.path(), "echo cannot-bind >&2; exit 3");
        let err = wait_until_answering(&mut process, "sh on port 1".into(), LONG, || async {
            Err("no answer".to_owned())
        })
        .await
        .unwrap_err();
        match err {
            HarnessError::NotReady { what, reason, log, log_tail, .. } => {
                assert_eq!(what, "sh on port 1");
                assert!(reason.starts_with("sh (pid ") && reason.contains("exited"), "{reason}");
                assert_eq!(log, dir.path().join("sh.log"));
                assert_eq!(log_tail, "cannot-bind");
            }
            other => panic!("expected NotReady, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn waiting_for_a_running_process_ends_when_it_answers() {
        let dir = tempfile::tempdir().unwrap();
        let mut process = shell(dir.path(), "exec sleep 600");
        let attempts = Cell::new(0);
        let probe = || async {
            attempts.set(attempts.get() + 1);
            if attempts.get() < 2 { Err("not yet".to_owned()) } else { Ok(()) }
        };
        wait_until_answering(&mut process, "sleep".into(), LONG, probe).await.unwrap();
        assert_eq!(attempts.get(), 2);
        assert_eq!(process.exited(), None);
    }

    #[test]
    fn log_tails_are_labelled_blocks() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("primary.log"), "p1\np2\n").unwrap();
        std::fs::write(dir.path().join("replica.log"), "r1\n").unwrap();
        let logs = [
            ("a".to_owned(), dir.path().join("primary.log")),
            ("b".to_owned(), dir.path().join("replica.log")),
        ];
        assert_eq!(labelled_tails(logs, 1), "[a]\np2\n[b]\nr1\n");
        assert_eq!(primary_and_replica_tails(dir.path()), "[primary]\np1\np2\n[replica]\nr1");
    }
}
