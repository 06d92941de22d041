//! What the cold tier records through the `metrics` facade (names in
//! [`tier_core::metrics`]): its read requests (`tierlog_tier_read_requests_total{tier="cold"}`,
//! one per bounded read or sequential stream, however many ranged GETs it makes), its
//! segment exports, and the bytes its GETs fetch while a caller positions a reader
//! ([`positioning`]).

use std::future::Future;

use metrics::counter;
use tier_core::metrics::{SEEK_BYTES, TIER, TIER_READS};

tokio::task_local! {
    /// Set while a reader positions itself (see [`positioning`]).
    static POSITIONING: ();
}

/// Runs `f`, counting the bytes every GET of a cold tier returns while it is polled (in
/// this task) in `tierlog_seek_bytes_total`: what the router's readers wrap around
/// their positioning — resolving the start and fetching the first records — so the
/// counter holds the cold bytes seeks cost (index lookups, the first data intervals).
pub async fn positioning<F: Future>(f: F) -> F::Output {
    POSITIONING.scope((), f).await
}

/// Notes `bytes` fetched by a GET: seek bytes while positioning.
pub(crate) fn fetched(bytes: u64) {
    if POSITIONING.try_with(|_| ()).is_ok() {
        counter!(SEEK_BYTES).increment(bytes);
    }
}

/// Counts one read request made to the cold tier.
pub(crate) fn read_request() {
    counter!(TIER_READS, TIER => "cold").increment(1);
}
