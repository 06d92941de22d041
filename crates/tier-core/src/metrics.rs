//! The names of the metrics tierlog's crates record (through the `metrics` facade), in
//! one place: each crate records the ones of the work it does, embedders and exporters
//! (the `tierlog` program's Prometheus endpoint) look them up here. Their types, labels
//! and meaning are documented in `docs/metrics.md`; no recorder, no cost.
//!
//! tier-core itself records nothing and does not link `metrics`: these are names only.

/// Records appended and acknowledged (counter; tier-router, `Topic::append`).
pub const APPEND_RECORDS: &str = "tierlog_append_records_total";
/// Payload bytes appended (counter; tier-router).
pub const APPEND_BYTES: &str = "tierlog_append_bytes_total";
/// Seconds from handing a batch to a topic to its acknowledgement by every write tier
/// (histogram; tier-router).
pub const APPEND_SECONDS: &str = "tierlog_append_seconds";
/// Failed appends (counter; tier-router).
pub const APPEND_ERRORS: &str = "tierlog_append_errors_total";
/// Records read, by the part of the store that served them: label [`TIER`] = cold,
/// warm, hot, live (counter; tier-router's readers).
pub const READ_RECORDS: &str = "tierlog_read_records_total";
/// Payload bytes read, by [`TIER`] (counter; tier-router's readers).
pub const READ_BYTES: &str = "tierlog_read_bytes_total";
/// Read requests made to the warm or cold tier, by [`TIER`] = cold, warm (counter;
/// tier-cold for cold, tier-router's readers for warm).
pub const TIER_READS: &str = "tierlog_tier_read_requests_total";
/// Sealed segments stored in cold (counter; tier-cold).
pub const EXPORT_SEGMENTS: &str = "tierlog_export_segments_total";
/// Bytes of segments stored in cold (counter; tier-cold).
pub const EXPORT_BYTES: &str = "tierlog_export_bytes_total";
/// Failed segment exports (counter; tier-cold).
pub const EXPORT_ERRORS: &str = "tierlog_export_errors_total";
/// Committed records cold does not hold yet, by [`TOPIC`] (gauge; tier-router).
pub const EXPORT_LAG: &str = "tierlog_export_lag_records";
/// Reader positionings, by [`BY`] = earliest, latest, offset, timestamp (counter;
/// tier-router's readers).
pub const SEEK_REQUESTS: &str = "tierlog_seek_requests_total";
/// Seconds from opening a reader to its first record (histogram; tier-router).
pub const SEEK_SECONDS: &str = "tierlog_seek_seconds";
/// Bytes fetched from cold between opening a reader and its first record (counter;
/// tier-cold, while tier-router's readers position).
pub const SEEK_BYTES: &str = "tierlog_seek_bytes_total";
/// Warm appends (XADD + WAIT for `wait_replicas`), by [`OUTCOME`] = ok, failed (counter;
/// tier-warm).
pub const WARM_WAIT: &str = "tierlog_warm_wait_total";
/// WAL segments deleted by retention (counter; tier-router).
pub const DELETED_SEGMENTS: &str = "tierlog_deleted_segments_total";
/// Bytes of WAL segments deleted by retention (counter; tier-router).
pub const DELETED_BYTES: &str = "tierlog_deleted_bytes_total";

/// Connections and append streams a server serves now (gauge; tierlog-server).
pub const SERVER_CONNECTIONS: &str = "tierlog_server_connections";
/// Connections a server refused past its `max_connections` (counter; tierlog-server).
pub const SERVER_REFUSED: &str = "tierlog_server_connections_refused_total";
/// Failed accepts that were not one connection's (out of file descriptors, say) (counter;
/// tierlog-server).
pub const SERVER_ACCEPT_ERRORS: &str = "tierlog_server_accept_errors_total";

/// Every metric name.
pub const ALL: &[&str] = &[
    APPEND_RECORDS,
    APPEND_BYTES,
    APPEND_SECONDS,
    APPEND_ERRORS,
    READ_RECORDS,
    READ_BYTES,
    TIER_READS,
    EXPORT_SEGMENTS,
    EXPORT_BYTES,
    EXPORT_ERRORS,
    EXPORT_LAG,
    SEEK_REQUESTS,
    SEEK_SECONDS,
    SEEK_BYTES,
    WARM_WAIT,
    DELETED_SEGMENTS,
    DELETED_BYTES,
    SERVER_CONNECTIONS,
    SERVER_REFUSED,
    SERVER_ACCEPT_ERRORS,
];

/// Label of [`READ_RECORDS`], [`READ_BYTES`] and [`TIER_READS`]: the serving part or tier.
pub const TIER: &str = "tier";
/// Label of [`SEEK_REQUESTS`]: the kind of start position.
pub const BY: &str = "by";
/// Label of [`WARM_WAIT`]: `ok` or `failed`.
pub const OUTCOME: &str = "outcome";
/// Label of [`EXPORT_LAG`]: the topic.
pub const TOPIC: &str = "topic";
