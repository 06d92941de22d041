//! Workload 6: live-tail latency from the moment `append` returns to the moment a
//! subscriber holds the record, at a fixed rate of single-record appends.

use std::{
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Result;
use futures::TryStreamExt;
use tier_core::{StartPosition, Tier};
use tier_hot::{FsyncPolicy, HotConfig, HotTier};
use tier_router::{NewRecord, TieredStore};

use crate::{
    Settings,
    report::Row,
    util::{self, BASE_TS},
};

const TAIL: &str = "6 live tail";

/// Latencies in ms (receipt minus append return, 0 when the record arrived first) and
/// how many arrived before their append returned.
pub(crate) fn latencies(returned: &[Instant], received: &[Instant]) -> (Vec<f64>, usize) {
    let mut early = 0;
    let mut out: Vec<f64> = returned
        .iter()
        .zip(received)
        .map(|(ret, rec)| match rec.checked_duration_since(*ret) {
            Some(d) => d.as_secs_f64() * 1e3,
            None => {
                early += 1;
                0.0
            }
        })
        .collect();
    out.sort_by(f64::total_cmp);
    (out, early)
}

/// The row of one tail run; the target is a p99 below `p99_ms`.
pub(crate) fn row(case: &str, rate: u64, returned: &[Instant], received: &[Instant], p99_ms: f64) -> Row {
    let (ms, early) = latencies(returned, received);
    let p99 = util::percentile(&ms, 99.0);
    let target =
        if p99_ms >= 1.0 { format!("p99 < {p99_ms} ms") } else { format!("p99 <= {:.0} us", p99_ms * 1e3) };
    Row::new(TAIL, case)
        .target_checked(&target, p99 < p99_ms)
        .detail(format!(
            "{} records at {rate}/s: p50 {:.3} ms, p99 {:.3} ms, p999 {:.3} ms, max {:.3} ms; {early} received before append returned",
            ms.len(),
            util::percentile(&ms, 50.0),
            p99,
            util::percentile(&ms, 99.9),
            ms.last().copied().unwrap_or(f64::NAN),
        ))
}

/// The floor under every tail row: a task on the runtime's workers woken through a
/// `tokio::sync::Notify` at the same rate, carrying nothing — the wake-up of a parked
/// worker thread that every live-tail consumer waits for. Returns the row's detail
/// clause: p50/p99/p999 in ms.
pub(crate) async fn wake_floor(settings: &Settings) -> Result<String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    let count = settings.tail_records;
    let sent = Arc::new(AtomicU64::new(0));
    let wake = Arc::new(tokio::sync::Notify::new());
    let consumer = tokio::spawn({
        let (sent, wake) = (Arc::clone(&sent), Arc::clone(&wake));
        async move {
            let mut received = Vec::with_capacity(count as usize);
            while (received.len() as u64) < count {
                // `notify_one` stores a permit, so a wake sent before this wait is kept.
                while (received.len() as u64) < sent.load(Ordering::SeqCst) {
                    received.push(Instant::now());
                }
                if (received.len() as u64) < count {
                    wake.notified().await;
                }
            }
            received
        }
    });
    let returned = paced(count, settings.tail_rate, |_| {
        sent.fetch_add(1, Ordering::SeqCst);
        wake.notify_one();
        async { Ok(()) }
    })
    .await?;
    let received = consumer.await?;
    let (ms, _) = latencies(&returned, &received);
    Ok(format!(
        "the floor, a task woken through tokio::sync::Notify at the same rate: p50 {:.3} ms, p99 {:.3} ms, p999 {:.3} ms",
        util::percentile(&ms, 50.0),
        util::percentile(&ms, 99.0),
        util::percentile(&ms, 99.9),
    ))
}

/// Paces `count` appends at `rate` per second, calling `append(i)` for each and
/// returning the instants at which each append returned.
pub(crate) async fn paced<F, Fut>(count: u64, rate: u64, mut append: F) -> Result<Vec<Instant>>
where
    F: FnMut(u64) -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let start = tokio::time::Instant::now();
    let mut returned = Vec::with_capacity(count as usize);
    for i in 0..count {
        tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate as f64)).await;
        append(i).await?;
        returned.push(Instant::now());
    }
    Ok(returned)
}

/// Hot only: `HotTier::append` of single 100 B records (fsync never) and a
/// `HotTier::subscribe` consumer.
pub(crate) async fn hot_only(settings: &Settings, dir: &Path) -> Result<Row> {
    let case = tempfile::tempdir_in(dir)?;
    let tier = HotTier::open(HotConfig::new(case.path().join("hot")).with_fsync(FsyncPolicy::Never)).await?;
    let topic = util::topic("tail")?;
    let count = settings.tail_records;
    let mut sub = tier.subscribe(&topic, 0)?;
    let consumer = tokio::spawn(async move {
        let mut received = Vec::with_capacity(count as usize);
        while (received.len() as u64) < count {
            let r = sub.next().await?;
            anyhow::ensure!(r.offset == received.len() as u64, "tail skipped to {}", r.offset);
            received.push(Instant::now());
        }
        Ok::<_, anyhow::Error>(received)
    });
    let payload = util::payload(100);
    let returned = paced(count, settings.tail_rate, |i| {
        let tier = tier.clone();
        let topic = topic.clone();
        let batch = util::batch(&payload, 1, i);
        async move {
            tier.append(&topic, batch?).await?;
            Ok(())
        }
    })
    .await?;
    let received = consumer.await??;
    tier.close().await;
    Ok(row("hot only, 100 B x1, fsync=never", settings.tail_rate, &returned, &received, 1.0))
}

/// With warm: the router's `Topic::append` (WAL fsync never + XADD + WAIT 1) and a
/// `Topic::reader` from offset 0.
pub(crate) async fn with_warm(settings: &Settings, dir: &Path, url: &str) -> Result<Row> {
    let case = tempfile::tempdir_in(dir)?;
    let warm = Arc::new(crate::warm::warm_tier(url, "benchtail:").await?);
    let store = TieredStore::builder()
        .hot(HotConfig::new(case.path().join("hot")).with_fsync(FsyncPolicy::Never))
        .warm(warm)
        .background(false)
        .open()
        .await?;
    let topic = store.topic("tail").await?;
    let count = settings.tail_records;
    let mut reader = topic.reader(StartPosition::Offset(0)).await?;
    let consumer = tokio::spawn(async move {
        let mut received = Vec::with_capacity(count as usize);
        while (received.len() as u64) < count {
            let r = reader.try_next().await?.ok_or_else(|| anyhow::anyhow!("reader ended"))?;
            anyhow::ensure!(r.offset == received.len() as u64, "reader skipped to {}", r.offset);
            received.push(Instant::now());
        }
        Ok::<_, anyhow::Error>(received)
    });
    let payload = bytes::Bytes::from(util::payload(100));
    let returned = paced(count, settings.tail_rate, |i| {
        let topic = topic.clone();
        let record = NewRecord::new(BASE_TS + i as i64, payload.clone());
        async move {
            topic.append(vec![record]).await?;
            Ok(())
        }
    })
    .await?;
    let received = consumer.await??;
    store.close().await;
    Ok(row(
        "with warm (router, WAIT 1), 100 B x1, fsync=never",
        settings.tail_rate,
        &returned,
        &received,
        1.0,
    ))
}
