//! Workload 9: opening a store that holds many topics — the WAL's own open (its scan of
//! every topic's segments) as the baseline, then `StoreBuilder::open`, which also
//! recovers every topic (state files, and per topic the range and marker of warm or cold
//! when enabled: network round trips) before it returns.

use std::{path::Path, sync::Arc, time::Instant};

use anyhow::{Context, Result};
use tier_cold::ColdTier;
use tier_hot::{FsyncPolicy, HotConfig, HotTier};
use tier_router::{ColdBackend, NewRecord, RouterConfig, TieredStore, WarmBackend};
use tier_testkit::servers::S3Server;

use crate::{
    Settings,
    cold::Backend,
    report::Row,
    util::{self, BASE_TS},
};

const OPEN: &str = "9 open";

/// The warm and cold backends of a case.
#[derive(Clone, Default)]
struct Remote {
    warm: Option<Arc<dyn WarmBackend>>,
    cold: Option<Arc<dyn ColdBackend>>,
}

/// A store on `root` (`root/hot`, state in `root/router`), with the remote tiers given.
async fn open_store(root: &Path, remote: &Remote) -> Result<TieredStore> {
    let mut router = RouterConfig::default();
    router.state_dir = Some(root.join("router"));
    let mut builder = TieredStore::builder().hot(hot_config(root)).router(router).background(false);
    if let Some(warm) = &remote.warm {
        builder = builder.warm(Arc::clone(warm));
    }
    if let Some(cold) = &remote.cold {
        builder = builder.cold(Arc::clone(cold));
    }
    Ok(builder.open().await?)
}

fn hot_config(root: &Path) -> HotConfig {
    HotConfig::new(root.join("hot")).with_fsync(FsyncPolicy::Never)
}

/// `topics` topics of one 100 B record each, written through the store and closed.
async fn prepare(root: &Path, topics: usize, remote: &Remote) -> Result<()> {
    let store = open_store(root, remote).await?;
    let payload = util::payload(100);
    for i in 0..topics {
        let topic = store.topic(&format!("t{i:05}")).await?;
        topic.append(vec![NewRecord::new(BASE_TS, payload.clone())]).await?;
    }
    store.close().await;
    Ok(())
}

/// One case: the best of `rounds` opens of the prepared store, each beside a WAL-only
/// open of the same directory.
async fn case(settings: &Settings, dir: &Path, label: &str, topics: usize, remote: &Remote) -> Result<Row> {
    let root = tempfile::tempdir_in(dir)?;
    prepare(root.path(), topics, remote).await?;
    let (mut best, mut best_baseline) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..settings.rounds {
        let started = Instant::now();
        let hot = HotTier::open(hot_config(root.path())).await?;
        best_baseline = best_baseline.min(util::secs(started.elapsed()));
        anyhow::ensure!(hot.topics().len() == topics, "the WAL holds {} topics", hot.topics().len());
        hot.close().await;
        drop(hot);

        let started = Instant::now();
        let store = open_store(root.path(), remote).await?;
        best = best.min(util::secs(started.elapsed()));
        let open = store.topics().await.len();
        store.close().await;
        anyhow::ensure!(open == topics, "the store opened {open} of {topics} topics");
    }
    let mut row = Row::new(OPEN, format!("{topics} topics, {label}")).detail(format!(
        "open {:.1} ms ({:.0} topics/s) against the WAL's own open {:.1} ms; best of {}",
        best * 1e3,
        topics as f64 / best,
        best_baseline * 1e3,
        settings.rounds
    ));
    row.ratio = Some(best_baseline / best);
    Ok(row)
}

/// Workload 9 with 1,000 topics: hot only, hot+warm on the Valkey pair at `url`
/// (`WAIT 1`), and hot+cold on a moto S3 server of its own.
pub(crate) async fn many_topics(settings: &Settings, dir: &Path, url: &str) -> Result<Vec<Row>> {
    let topics = 1000;
    let mut rows = vec![case(settings, dir, "hot only", topics, &Remote::default()).await?];
    let warm: Arc<dyn WarmBackend> =
        Arc::new(crate::warm::warm_tier(url, "benchopen:").await.context("warm tier for workload 9")?);
    let remote = Remote { warm: Some(warm), cold: None };
    rows.push(case(settings, dir, "hot+warm (Valkey, WAIT 1)", topics, &remote).await?);
    let s3 = S3Server::start().await?;
    s3.create_bucket("bench").await?;
    let cold: Arc<dyn ColdBackend> =
        Arc::new(ColdTier::open(Backend::S3 { endpoint: s3.endpoint() }.config())?);
    let remote = Remote { warm: None, cold: Some(cold) };
    rows.push(case(settings, dir, "hot+cold (moto S3)", topics, &remote).await?);
    Ok(rows)
}
