//! Reading a cold archive on another machine with no WAL of its own: a store (WAL + a
//! local cold directory) produces readings and exports them to cold, then closes; the
//! reader opens only the cold tier on that directory — with the WAL and the router's
//! state deleted, as on a machine that has the archive and nothing else — lists what
//! it holds, finds an offset by timestamp and streams the records from there.
//!
//! The router cannot do this part: a `TieredStore` always opens a WAL of its own (it is
//! the one tier every store has) and would recover the topic as its writer, so the
//! reader uses `tier_cold::ColdTier` directly, which reads the archive in place.
//!
//! `cargo run -p tier-router --example cold_archive [DIR]` (a temporary directory by
//! default): the WAL in `DIR/hot`, the router's state in `DIR/router`, the archive in
//! `DIR/cold` (point `ColdConfig` at S3 for a bucket; the reading code is the same).

use std::sync::Arc;

use futures::StreamExt;
use tier_cold::{ColdConfig, ColdTier};
use tier_core::{Tier, Timestamp, TopicName};
use tier_hot::HotConfig;
use tier_router::{NewRecord, TieredStore};

const T0: Timestamp = 1_700_000_000_000;

/// Reading `n`: one a second from `T0`, keyed by its sensor.
fn reading(n: u64) -> NewRecord {
    NewRecord::new(T0 + 1000 * n as i64, format!("reading {n}: {} °C", 15 + n % 9)).with_key(sensor(n))
}

fn sensor(n: u64) -> String {
    format!("sensor-{}", n % 4)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let temp = tempfile::tempdir()?;
    let dir = std::env::args().nth(1).map_or_else(|| temp.path().to_owned(), Into::into);
    let archive_dir = dir.join("cold");
    let readings = TopicName::new("readings")?;

    // The producing machine: three rounds of readings, each exported to cold as a
    // segment (the background exporter does it on its own once a segment is sealed).
    let cold = Arc::new(ColdTier::open(ColdConfig::local(&archive_dir))?);
    let store = TieredStore::builder().hot(HotConfig::new(dir.join("hot"))).cold(cold).open().await?;
    let topic = store.topic(readings.as_str()).await?;
    for round in 0..3u64 {
        for base in (round * 400..(round + 1) * 400).step_by(100) {
            topic.append((base..base + 100).map(reading).collect()).await?;
        }
        store.export_now(readings.as_str()).await?;
    }
    let ranges = topic.ranges().await?;
    println!("produced offsets below {}; cold holds {}", ranges.committed, ranges.cold.unwrap_or_default());
    drop(topic);
    store.close().await;
    std::fs::remove_dir_all(dir.join("hot"))?;
    std::fs::remove_dir_all(dir.join("router"))?;

    // The reading machine: the archive alone.
    let archive = ColdTier::open(ColdConfig::local(&archive_dir))?;
    let held = archive.range(&readings).await?;
    println!("the archive holds {held} of '{readings}':");
    for (key, range, size) in archive.segments(&readings).await? {
        println!("  {key}: {range}, {size} bytes");
    }
    assert_eq!((held.start, held.end), (0, 1200));

    // Seek by time: the first reading at or after half a second before reading 700.
    let at = T0 + 699_500;
    let from = archive.offset_for_timestamp(&readings, at).await?.ok_or("no reading that late")?;
    println!("the first reading at or after {at} ms is offset {from}");
    assert_eq!(from, 700);

    // Stream from there to the end: ranged reads with read-ahead, each batch checked.
    let mut records = archive.stream(&readings, from).await?;
    let mut next = from;
    while let Some(record) = records.next().await {
        let record = record?;
        let want = reading(next);
        assert_eq!(record.offset, next);
        assert_eq!(record.timestamp, want.timestamp, "offset {next}");
        assert_eq!(record.key.as_deref(), want.key.as_deref(), "offset {next}");
        assert_eq!(record.payload, want.payload, "offset {next}");
        if next == from || next + 1 == held.end {
            let key = String::from_utf8_lossy(record.key.as_deref().unwrap_or_default());
            println!("offset {next} ({key}): {}", String::from_utf8_lossy(&record.payload));
        }
        next += 1;
    }
    println!("streamed offsets {from}..{next}, every byte as produced");
    assert_eq!(next, held.end);
    Ok(())
}
