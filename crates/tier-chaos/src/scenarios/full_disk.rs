//! Full disk (hot, `fsync = "always"`): the store runs on a real ext4 file system over a
//! loop device whose backing store fills up and frees again while producers append
//! (`tier_testkit::loopfs`, whose loop device takes one-block requests, so a write the
//! full backing store cannot hold fails instead of being acknowledged short). When the
//! backing store is full, ext4's writeback of new data blocks fails: the kernel reports
//! it once, to the next `fsync`, and marks the pages clean, so a later `fsync` succeeds
//! without writing them and the page cache keeps showing bytes the disk never got.
//!
//! Each round: producers append until some are acknowledged; the backing store is
//! filled; once an append has failed it is freed again (after a random delay); the
//! producers stop and the store closes; the store reopens on the same file system and a
//! second set of producers appends; then the file system is unmounted and mounted again
//! (the page cache is gone, only what the disk holds is read) and every acknowledged
//! record of both phases must be present exactly once at its offset.
//!
//! Needs root and loop devices; where the kernel refuses them the row says `SKIPPED`
//! with the reason in its notes and on standard output.

use std::time::Duration;

use tier_core::TopicName;
use tier_hot::FsyncPolicy;
use tier_router::TieredStore;
use tier_testkit::loopfs::{LoopFs, LoopFsSize};

use crate::{
    ChaosError, ScenarioResult,
    ack::Ack,
    deploy::{Deployment, Profile, Servers, store_config},
    rng::Rng,
    scenarios::{
        inproc::{Producers, until},
        open_and_verify,
    },
};

/// The row's name.
pub const NAME: &str = "full-disk hot";

const TOPIC: &str = "chaos-full-disk";

/// Records per append: ~12 KB, so a group whose writeback fails spans pages that no
/// later append writes again (a page written again reaches the disk with the next
/// writeback, hiding the loss).
const RECORDS_PER_APPEND: u64 = 100;

/// Runs `rounds` fill-and-free rounds, each on a fresh file system.
pub async fn run(servers: &Servers, rounds: u64, seed: u64) -> Result<ScenarioResult, ChaosError> {
    let mut r = ScenarioResult::new(NAME);
    let mut rng = Rng::new(seed);
    let mut refused = 0u64;
    for round in 0..rounds {
        let Some(mut fs) = LoopFs::mount_or_explain(NAME, LoopFsSize::default()) else {
            r.notes.push("SKIPPED: the kernel refuses loop devices here (see the SKIPPED line above)".into());
            return Ok(r);
        };
        let profile = Profile { segment_bytes: 256 << 10, ..Profile::default() };
        let mut config =
            store_config(Deployment::Hot, fs.path(), servers, &format!("full-disk-{round}"), &profile)
                .await?;
        config.hot.fsync = FsyncPolicy::Always;
        let mut acks: Vec<Ack> = Vec::new();

        // Phase 1: fill the disk under the producers, free it again.
        let store =
            TieredStore::open(config.clone()).await.map_err(|e| ChaosError::tier("opening the store", e))?;
        let topic = store.topic(TOPIC).await.map_err(|e| ChaosError::tier("topic", e))?;
        let producers = Producers::start_batches(&topic, 0..2, RECORDS_PER_APPEND);
        let tally = std::sync::Arc::clone(&producers.tally);
        if !until(|| tally.counts().0 >= 20).await {
            r.fail(format!("round {round}: fewer than 20 appends acknowledged before the disk filled"));
        }
        let filler = fs.fill().map_err(|e| ChaosError::io("filling the backing store", e))?;
        let errors_before = tally.counts().1;
        let failed = until(|| tally.counts().1 > errors_before).await;
        // Fault timing: how long the disk stays full once an append failed.
        tokio::time::sleep(Duration::from_millis(rng.between(0, 200))).await;
        fs.free().map_err(|e| ChaosError::io("freeing the backing store", e))?;
        acks.extend(producers.stop().await?);
        let errors = tally.counts().1 - errors_before;
        refused += errors;
        if !failed {
            r.fail(format!(
                "round {round}: no append failed with the backing store full ({filler} bytes of filler)"
            ));
        }
        drop(topic);
        store.close().await;
        r.iterations += 1;

        // Phase 2: the store reopens on the same disk (the page cache still holds what
        // failed to reach it) and appends more.
        let name = TopicName::new(TOPIC).map_err(|e| ChaosError::tier("topic name", e))?;
        match TieredStore::open_recovering(config.clone(), vec![name]).await {
            Ok(store) => {
                let report =
                    store.recover_topic(TOPIC).await.map_err(|e| ChaosError::tier("recovery report", e))?;
                r.notes.push(format!(
                    "round {round}: phase 1 acknowledged up to {}; reopened: WAL {}, lost {:?}, maybe lost {:?}, \
                     next offset {}",
                    crate::scenarios::compound::acked_end(&acks),
                    report.hot,
                    report.lost,
                    report.maybe_lost,
                    report.next_offset
                ));
                let topic = store.topic(TOPIC).await.map_err(|e| ChaosError::tier("topic", e))?;
                let producers = Producers::start_batches(&topic, 2..4, RECORDS_PER_APPEND);
                let tally = std::sync::Arc::clone(&producers.tally);
                if !until(|| tally.counts().0 >= 20).await {
                    r.fail(format!(
                        "round {round}: fewer than 20 appends acknowledged after the disk was freed"
                    ));
                }
                acks.extend(producers.stop().await?);
                drop(topic);
                store.close().await;
            }
            Err(e) => {
                r.fail(format!("round {round}: the store does not reopen after the disk was freed: {e}"))
            }
        }

        // The disk's truth: nothing of the page cache survives a remount.
        fs.remount().map_err(|e| ChaosError::io("remounting the file system", e))?;
        let v = open_and_verify(&config, TOPIC, &acks, &[]).await;
        match v {
            Ok(v) => {
                r.notes.push(format!("round {round}: after the remount: {}", v.tiers));
                let acked_before = r.acked;
                r.absorb(&format!("round {round}"), &v);
                r.acked = acked_before + v.acked;
            }
            Err(e) => r.fail(format!("round {round}: after the remount: {e}")),
        }
        drop(fs);
    }
    r.notes.push(format!("seed {seed}: {refused} appends refused while the disk was full"));
    Ok(r)
}
