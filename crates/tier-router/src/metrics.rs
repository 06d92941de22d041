//! The metrics the router records through the `metrics` facade, where the work happens:
//! appends in [`Topic::append`](crate::Topic::append), reads by serving part and seeks in
//! the readers, warm read requests where a reader reads warm, WAL deletions in retention
//! (the background deleter's rounds included), the export lag when the exporter stores a
//! segment or a topic's ranges are asked for. The tier crates record their own (tier-warm
//! its `WAIT` outcomes, tier-cold its read requests, exports and the bytes seeks fetch).
//!
//! Nothing is recorded without a recorder, and nothing costs more than a no-op then: an
//! embedder installs any `metrics` recorder (the `tierlog` program installs a Prometheus
//! one) and may call [`describe`] for the units and descriptions. The names are those of
//! [`tier_core::metrics`], re-exported here; `docs/metrics.md` documents them.

use std::future::Future;
use std::time::Duration;

use metrics::{Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};
pub use tier_core::metrics::*;
use tier_core::{Offset, OffsetRange, StartPosition, TierError, TopicName};
use tier_hot::SegmentInfo;

/// The start of a latency a metric records (appends, seeks): the real monotonic clock,
/// not tokio's — a latency is what the caller waited, and it steers nothing the store
/// does, so it may differ between runs of one simulated schedule.
#[allow(clippy::disallowed_methods)]
pub(crate) fn latency_start() -> std::time::Instant {
    std::time::Instant::now()
}

/// Registers the unit and description of every metric with the installed recorder.
pub fn describe() {
    describe_counter!(APPEND_RECORDS, Unit::Count, "Records appended");
    describe_counter!(APPEND_BYTES, Unit::Bytes, "Payload bytes appended");
    describe_histogram!(APPEND_SECONDS, Unit::Seconds, "Latency of an appended batch until acknowledged");
    describe_counter!(APPEND_ERRORS, Unit::Count, "Failed appends");
    describe_counter!(READ_RECORDS, Unit::Count, "Records read, by serving tier");
    describe_counter!(READ_BYTES, Unit::Bytes, "Payload bytes read, by serving tier");
    describe_counter!(TIER_READS, Unit::Count, "Read requests made to a tier backend");
    describe_counter!(EXPORT_SEGMENTS, Unit::Count, "Segments stored in cold");
    describe_counter!(EXPORT_BYTES, Unit::Bytes, "Bytes of segments stored in cold");
    describe_counter!(EXPORT_ERRORS, Unit::Count, "Failed segment exports");
    describe_gauge!(EXPORT_LAG, Unit::Count, "Committed records cold does not hold yet");
    describe_counter!(SEEK_REQUESTS, Unit::Count, "Reader positionings, by start position kind");
    describe_histogram!(SEEK_SECONDS, Unit::Seconds, "Latency from opening a reader to its first record");
    describe_counter!(SEEK_BYTES, Unit::Bytes, "Bytes fetched from cold while positioning readers");
    describe_counter!(WARM_WAIT, Unit::Count, "Warm appends (XADD + WAIT), by outcome");
    describe_counter!(DELETED_SEGMENTS, Unit::Count, "WAL segments deleted by retention");
    describe_counter!(DELETED_BYTES, Unit::Bytes, "Bytes of WAL segments deleted by retention");
    describe_gauge!(SERVER_CONNECTIONS, Unit::Count, "Connections and append streams a server serves");
    describe_counter!(SERVER_REFUSED, Unit::Count, "Connections refused past server.max_connections");
    describe_counter!(SERVER_ACCEPT_ERRORS, Unit::Count, "Failed accepts (out of file descriptors, say)");
}

/// The [`BY`] label of a reader starting at `start`.
pub(crate) fn by_label(start: StartPosition) -> &'static str {
    match start {
        StartPosition::Earliest => "earliest",
        StartPosition::Latest => "latest",
        StartPosition::Offset(_) => "offset",
        StartPosition::Timestamp(_) => "timestamp",
    }
}

/// Counts the outcome of one append of `records` holding `bytes` payload bytes that
/// took `elapsed`.
pub(crate) fn appended<T>(result: &Result<T, TierError>, records: usize, bytes: u64, elapsed: Duration) {
    match result {
        Ok(_) => {
            histogram!(APPEND_SECONDS).record(elapsed.as_secs_f64());
            counter!(APPEND_RECORDS).increment(records as u64);
            counter!(APPEND_BYTES).increment(bytes);
        }
        Err(_) => counter!(APPEND_ERRORS).increment(1),
    }
}

/// Sets the export lag of `topic`: committed records (below `committed`) beyond what
/// cold holds.
pub(crate) fn export_lag(topic: &TopicName, committed: Offset, cold: OffsetRange) {
    gauge!(EXPORT_LAG, TOPIC => topic.to_string()).set(committed.saturating_sub(cold.end) as f64);
}

/// Counts the WAL segments retention deleted.
pub(crate) fn deleted(segments: &[SegmentInfo]) {
    if segments.is_empty() {
        return;
    }
    counter!(DELETED_SEGMENTS).increment(segments.len() as u64);
    counter!(DELETED_BYTES).increment(segments.iter().map(|s| s.bytes).sum());
}

/// Counts one read request a reader made to warm.
pub(crate) fn warm_read() {
    counter!(TIER_READS, TIER => "warm").increment(1);
}

/// Runs `f`, a reader's positioning: the bytes cold fetches meanwhile are counted in
/// [`SEEK_BYTES`] (by tier-cold; other cold backends are not observed).
pub(crate) async fn positioning<F: Future>(f: F) -> F::Output {
    #[cfg(feature = "cold")]
    {
        tier_cold::metrics::positioning(f).await
    }
    #[cfg(not(feature = "cold"))]
    {
        f.await
    }
}
