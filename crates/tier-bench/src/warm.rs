//! Workload 3: the warm dual write (WAL + Valkey `XADD` + `WAIT 1`) through the router,
//! against raw pipelined `XADD` + `WAIT` of the same bytes through `fred`, and against
//! a raw dual write (that `XADD` + `WAIT` joined with a file write of the same bytes,
//! `fdatasync`ed when the WAL is).

use std::{
    fs::File,
    io::Write,
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use bytes::Bytes;
use fred::{
    prelude::{Client, ClientLike, Config, KeysInterface, ServerInterface, StreamsInterface},
    types::Value,
};
use tier_core::Tier;
use tier_hot::{FsyncPolicy, HotConfig};
use tier_router::TieredStore;
use tier_warm::{WarmConfig, WarmTier};

use crate::{
    Settings,
    report::Row,
    util::{self, secs, size_label},
};

const WARM: &str = "3 warm dual write";
const PER_BATCH: usize = 100;

/// A warm tier on `url` waiting for one replica.
pub(crate) async fn warm_tier(url: &str, prefix: &str) -> Result<WarmTier> {
    let mut config = WarmConfig::standalone(url);
    config.key_prefix = prefix.to_owned();
    config.wait_replicas = 1;
    config.wait_timeout = Duration::from_secs(1);
    Ok(WarmTier::connect(config).await?)
}

async fn raw_client(url: &str) -> Result<Client> {
    let client = Client::new(Config::from_url(url)?, None, None, None);
    client.init().await.context("connecting fred")?;
    Ok(client)
}

/// One pipeline of `XADD key id b <bytes>` + `WAIT 1 1000`.
async fn raw_xadd_wait(client: &Client, key: &str, id: &str, bytes: Bytes) -> Result<()> {
    let pipeline = client.pipeline();
    let _: () = pipeline.xadd(key, false, None::<()>, id, vec![("b", bytes)]).await?;
    let _: () = pipeline.wait(1, 1000).await?;
    let replies: Vec<Value> = pipeline.all().await?;
    anyhow::ensure!(replies.len() == 2, "raw pipeline answered {} replies", replies.len());
    Ok(())
}

/// Times for one round of one case.
struct Round {
    dual: f64,
    warm_only: f64,
    raw_xadd: f64,
    raw_dual: f64,
}

struct Case<'a> {
    url: &'a str,
    raw: &'a Client,
    dir: &'a Path,
    fsync: FsyncPolicy,
    payload: Vec<u8>,
    bytes: Bytes,
}

impl Case<'_> {
    /// Runs every variant once; `n` batches, or as many as `budget` allows when `n` is
    /// `None` (the count used is returned).
    async fn round(&self, tag: &str, n: Option<u64>, max: u64, budget: Duration) -> Result<(u64, Round)> {
        let case_dir = tempfile::tempdir_in(self.dir)?;
        let warm = Arc::new(warm_tier(self.url, &format!("bench:{tag}:")).await?);
        let store = TieredStore::builder()
            .hot(HotConfig::new(case_dir.path().join("hot")).with_fsync(self.fsync))
            .warm(warm.clone())
            .background(false)
            .open()
            .await?;
        let topic = store.topic("dual").await?;
        let (limit, budget) = match n {
            Some(n) => (n, Duration::MAX),
            None => (max, budget),
        };
        let start = Instant::now();
        let mut count = 0u64;
        while count < limit && start.elapsed() < budget {
            topic.append_batch(util::builder(&self.payload, PER_BATCH, count * PER_BATCH as u64)?).await?;
            count += 1;
        }
        let dual = secs(start.elapsed());
        store.close().await;
        // Every variant starts from the same server memory state: what one variant
        // wrote is deleted before the next runs (Valkey and its replica otherwise pay
        // first-touch page faults for some variants and reuse freed memory in others).
        let _: i64 = self.raw.del(warm.stream_key(&util::topic("dual")?)).await?;

        let warm_topic = util::topic("warmonly")?;
        let start = Instant::now();
        for i in 0..count {
            let base = i * PER_BATCH as u64;
            warm.append(&warm_topic, util::batch(&self.payload, PER_BATCH, base)?).await?;
        }
        let warm_only = secs(start.elapsed());
        let _: i64 = self.raw.del(warm.stream_key(&warm_topic)).await?;
        warm.close().await;

        let key = format!("bench:{tag}:raw");
        let start = Instant::now();
        for i in 0..count {
            let id = format!("{}-1", i * PER_BATCH as u64 + 1);
            raw_xadd_wait(self.raw, &key, &id, self.bytes.clone()).await?;
        }
        let raw_xadd = secs(start.elapsed());
        let _: i64 = self.raw.del(key.as_str()).await?;

        let key2 = format!("bench:{tag}:rawdual");
        let file = Arc::new(File::create(case_dir.path().join("raw.log"))?);
        let always = self.fsync == FsyncPolicy::Always;
        let start = Instant::now();
        for i in 0..count {
            let id = format!("{}-1", i * PER_BATCH as u64 + 1);
            let (file, bytes) = (file.clone(), self.bytes.clone());
            let write = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
                (&*file).write_all(&bytes)?;
                if always {
                    file.sync_data()?;
                }
                Ok(())
            });
            let (w, x) = tokio::join!(write, raw_xadd_wait(self.raw, &key2, &id, self.bytes.clone()));
            w??;
            x?;
        }
        let raw_dual = secs(start.elapsed());
        let _: i64 = self.raw.del(key2.as_str()).await?;
        Ok((count, Round { dual, warm_only, raw_xadd, raw_dual }))
    }
}

/// Runs workload 3 against the Valkey primary at `url` (with one replica).
pub(crate) async fn dual_write(settings: &Settings, dir: &Path, url: &str) -> Result<Vec<Row>> {
    let raw = raw_client(url).await?;
    let mut rows = Vec::new();
    let cases = [
        (100, FsyncPolicy::Never),
        (1024, FsyncPolicy::Never),
        (16 * 1024, FsyncPolicy::Never),
        (1024, FsyncPolicy::Always),
    ];
    for (c, (size, fsync)) in cases.into_iter().enumerate() {
        let payload = util::payload(size);
        let bytes = util::batch(&payload, PER_BATCH, 0)?.to_bytes();
        let case = Case { url, raw: &raw, dir, fsync, payload, bytes };
        let max = (settings.warm_bytes / (size * PER_BATCH) as u64).max(1);
        let (n, mut best) = case.round(&format!("{c}r0"), None, max, settings.case_budget).await?;
        for r in 1..settings.rounds {
            let (_, t) = case.round(&format!("{c}r{r}"), Some(n), max, Duration::MAX).await?;
            best.dual = best.dual.min(t.dual);
            best.warm_only = best.warm_only.min(t.warm_only);
            best.raw_xadd = best.raw_xadd.min(t.raw_xadd);
            best.raw_dual = best.raw_dual.min(t.raw_dual);
        }
        let records = n * PER_BATCH as u64;
        let payload_bytes = records * size as u64;
        let fs = if fsync == FsyncPolicy::Always { "always" } else { "never" };
        let label = size_label(size);
        rows.push(
            Row::new(WARM, format!("{label} x100 router append, WAL fsync={fs} vs raw XADD+WAIT"))
                .throughput(records, payload_bytes, best.dual, Some(best.raw_xadd))
                .target_at_least(0.7, ">= 0.7x raw XADD+WAIT")
                .detail(format!("{n} batches, best of {}", settings.rounds)),
        );
        rows.push(
            Row::new(
                WARM,
                format!("{label} x100 router append, WAL fsync={fs} vs raw file write + XADD+WAIT joined"),
            )
            .throughput(records, payload_bytes, best.dual, Some(best.raw_dual)),
        );
        rows.push(
            Row::new(WARM, format!("{label} x100 WarmTier::append alone vs raw XADD+WAIT"))
                .throughput(records, payload_bytes, best.warm_only, Some(best.raw_xadd))
                .target_at_least(0.7, ">= 0.7x raw XADD+WAIT"),
        );
    }
    raw.quit().await?;
    Ok(rows)
}
