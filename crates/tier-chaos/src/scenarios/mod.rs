//! The scenarios, each a function returning a [`ScenarioResult`](crate::ScenarioResult).
//!
//! - [`crash`]: SIGKILL a producer at random moments, restart it, verify.
//! - [`lost_disk`]: delete the WAL directory under a running producer, recover.
//! - [`corruption`]: flipped and truncated bytes in WAL segments and cold objects.
//! - [`valkey_faults`]: replica stopped, primary killed and restarted, both policies.
//! - [`valkey_failover`]: the replication link cut under `WAIT`, the primary killed, the
//!   replica promoted and the WAL lost: every acknowledged record comes back from it.
//! - [`objstore_faults`]: failing, slow and stopped object storage.
//! - [`load`]: 8 producers and 8 consumers over 100 topics; memory stays flat.
//! - [`server_kill`]: SIGKILL the real `tierlog serve` under 8 client producers and 8
//!   followers, restart it, verify through the client.
//! - [`handover`]: one topic moves between two `tierlog serve` processes sharing Valkey
//!   and a bucket (graceful, crash and zombie moves) under client producers; a resumed
//!   zombie refuses every append.
//! - [`full_disk`]: a real ext4 file system on a loop device fills up and frees again
//!   under the producers; after a remount every acknowledged record is there.
//! - [`bad_input`]: invalid names, oversized records, bad configuration, bad credentials.
//! - [`compound`]: two faults in a row: a lost WAL after an unconfirmed batch
//!   was rotated, a power cut past a stale checkpoint, a lost data directory, a warm
//!   outage longer than retention, one damaged topic among intact ones.

pub mod bad_input;
pub mod compound;
pub mod corruption;
pub mod crash;
pub mod full_disk;
pub mod handover;
mod inproc;
pub mod load;
pub mod lost_disk;
pub mod objstore_faults;
pub mod server_kill;
pub mod valkey_failover;
pub mod valkey_faults;

use std::path::Path;

use tier_router::{StoreConfig, TieredStore};

use crate::{
    ChaosError,
    ack::Ack,
    verify::{Verification, verify_topic_around},
};

/// Opens the store in this process (recovering it as a restarted producer would), checks
/// `topic` from offset 0 against `acks` (skipping `excused` losses, and reading around the
/// gaps the WAL recorded: a SIGKILL that tears a write makes recovery skip to the offset
/// reservation, which it records as a gap of offsets never acknowledged), and closes it.
pub(crate) async fn open_and_verify(
    config: &StoreConfig,
    topic: &str,
    acks: &[Ack],
    excused: &[tier_core::OffsetRange],
) -> Result<Verification, ChaosError> {
    let name = tier_core::TopicName::new(topic).map_err(|e| ChaosError::tier("topic name", e))?;
    let store = TieredStore::open_recovering(config.clone(), vec![name])
        .await
        .map_err(|e| ChaosError::tier("opening the store to verify", e))?;
    let result = async {
        let handle = store.topic(topic).await.map_err(|e| ChaosError::tier("opening the topic", e))?;
        let gaps = store.wal().gaps(handle.name());
        verify_topic_around(&handle, acks, 0, excused, &gaps).await
    }
    .await;
    store.close().await;
    result
}

/// A fresh temporary directory under `base`.
pub(crate) fn temp_dir(base: &Path, prefix: &str) -> Result<tempfile::TempDir, ChaosError> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(base)
        .map_err(|e| ChaosError::io(format!("creating a temp dir in {}", base.display()), e))
}
