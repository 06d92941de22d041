//! `tierlog demo`: the whole life of a topic in a few seconds. Writes records into small
//! WAL segments, exports them to cold, trims warm (when configured) and prunes the WAL,
//! then reads everything back from offset 0 and from a timestamp, checking every record,
//! and prints which tier served which offsets and the throughput seen.

use std::time::Instant;

use anyhow::{Context, bail};
use futures::StreamExt;
use tier_cold::ColdConfig;
use tier_core::{Offset, OffsetRange, StartPosition, Timestamp};
use tier_hot::FsyncPolicy;
use tier_router::{NewRecord, StoreConfig, TieredStore, Topic};

use crate::cli::DemoArgs;
use crate::cmd::Ctx;
use crate::cmd::produce::{append, now_ms, synthetic_payload};
use crate::cmd::served::{Run, add_to_runs, render_runs};
use crate::units::{count, format_size, rates};
use crate::{exit, store};

/// WAL segment size of the demo (small, so that ~10 MB make dozens of segments).
const DEMO_SEGMENT_BYTES: u64 = 256 << 10;
/// WAL retention of the demo: everything beyond ~2 segments is pruned once in cold.
const DEMO_RETENTION_BYTES: u64 = 512 << 10;
/// Closed segments warm keeps in the demo.
const DEMO_WARM_SEGMENTS: usize = 8;
/// Records per appended batch.
const DEMO_BATCH: u64 = 1000;

/// The configuration with the demo's small segments and retention; adds a local cold
/// tier beside the WAL when none is configured.
fn demo_config(config: &StoreConfig) -> StoreConfig {
    let mut c = config.clone();
    c.hot.segment_bytes = DEMO_SEGMENT_BYTES;
    c.hot.retention_bytes = DEMO_RETENTION_BYTES;
    c.hot.fsync = FsyncPolicy::Never;
    c.router.max_cached_closed_segments = DEMO_WARM_SEGMENTS;
    if c.cold.is_none() {
        let dir = c.hot.data_dir.parent().map_or_else(|| "cold".into(), |p| p.join("cold"));
        c.cold = Some(ColdConfig::local(dir));
    }
    c
}

/// What one read-back saw.
#[derive(Debug, Default)]
struct ReadBack {
    runs: Vec<Run>,
    records: u64,
    bytes: u64,
    secs: f64,
}

/// Runs the command.
pub(crate) async fn run(ctx: &Ctx, args: DemoArgs) -> anyhow::Result<u8> {
    if args.records == 0 {
        return Err(exit::usage("--records must be at least 1"));
    }
    let config = demo_config(ctx.config());
    let store = store::open(&config, Vec::new(), false).await?;
    let result = demo(&store, &config, &args).await;
    store.close().await;
    print!("{}", result?);
    Ok(exit::OK)
}

async fn demo(store: &TieredStore, config: &StoreConfig, args: &DemoArgs) -> anyhow::Result<String> {
    let name = format!("demo-{}", now_ms());
    let topic = store.topic(&name).await?;
    let mut out = String::new();
    let warm = config.warm.as_ref().map_or_else(|| "off".to_owned(), |w| w.urls.join(","));
    let cold = config.cold.as_ref().map_or_else(|| "off".to_owned(), store::describe);
    out.push_str(&format!(
        "tierlog demo: topic {name}, {} records of {} B, WAL segments of {}\n  WAL {}, warm {warm}, cold {cold}\n\n",
        args.records,
        args.size,
        format_size(DEMO_SEGMENT_BYTES),
        config.hot.data_dir.display(),
    ));

    // Write, with timestamps one millisecond apart so a time maps to one offset.
    let base_time: Timestamp = now_ms() - args.records as Timestamp;
    // The elapsed time shown to the user is real time
    #[allow(clippy::disallowed_methods)]
    let started = Instant::now();
    let mut written_bytes = 0u64;
    let mut next = 0u64;
    while next < args.records {
        let end = (next + DEMO_BATCH).min(args.records);
        let records: Vec<NewRecord> = (next..end)
            .map(|i| NewRecord::new(base_time + i as Timestamp, synthetic_payload(i, args.size)))
            .collect();
        let bytes: u64 = records.iter().map(|r| r.payload.len() as u64).sum();
        // The topic stays in the data directory when an append fails: say what it keeps
        // (the usual cause is warm refusing what its replicas do not confirm; a Valkey
        // that has never had a replica was already refused when the store opened).
        let range = append(&topic, records).await.with_context(|| {
            format!("the demo topic {name} keeps the {} written before this failure", count(next, "record"))
        })?;
        if range != OffsetRange::new(next, end) {
            bail!("the store assigned offsets {range} where [{next}, {end}) were expected");
        }
        written_bytes += bytes;
        next = end;
    }
    topic.flush().await.context("flushing")?;
    let write_secs = started.elapsed().as_secs_f64();
    let (rps, mbps) = rates(args.records, written_bytes, write_secs);
    out.push_str(&format!(
        "write    {} records, {} in {write_secs:.2} s: {rps:.0} records/s, {mbps:.1} MB/s\n",
        args.records,
        format_size(written_bytes)
    ));

    // Export, trim warm, prune the WAL.
    let exported = store.export_now(&name).await.context("exporting")?;
    // The demo's own topic only: other topics in the data directory are left as they are.
    let trimmed = store.trim_topic_warm_now(&name).await.context("trimming warm")?;
    let deleted =
        store.run_topic_retention_now(&name, store.clock().now()).await.context("running retention")?;
    let trim = trimmed.map(|o| format!(", warm trimmed below offset {o}"));
    out.push_str(&format!(
        "export   {} to cold{}; retention deleted {}\n",
        count(exported.len() as u64, "segment"),
        trim.unwrap_or_default(),
        count(deleted.len() as u64, "WAL segment")
    ));
    let r = topic.ranges().await?;
    let show = |r: Option<OffsetRange>| r.map_or_else(|| "off".to_owned(), |r| r.to_string());
    out.push_str(&format!("holding  WAL {}, warm {}, cold {}\n\n", r.hot, show(r.warm), show(r.cold)));

    // Read back from offset 0 and from the middle record's timestamp.
    let all = read_back(&topic, StartPosition::Offset(0), 0, args).await?;
    out.push_str(&render_read("read from offset 0", &all));
    let middle = args.records / 2;
    let by_time =
        read_back(&topic, StartPosition::Timestamp(base_time + middle as Timestamp), middle, args).await?;
    out.push_str(&render_read(
        &format!("read from timestamp {} (offset {middle})", base_time + middle as i64),
        &by_time,
    ));
    out.push_str(&format!("\nrecords checked: every offset once, in order, with the payload written. Read it again with\n  tierlog consume {name} --max 5\n"));
    Ok(out)
}

/// Reads from `start` to the end, checking that the first offset is `first` and every
/// record is the one written, and groups the offsets by serving source.
async fn read_back(
    topic: &Topic,
    start: StartPosition,
    first: Offset,
    args: &DemoArgs,
) -> anyhow::Result<ReadBack> {
    // The elapsed time shown to the user is real time
    #[allow(clippy::disallowed_methods)]
    let started = Instant::now();
    let mut reader = topic.reader_with_source(start).await?;
    let mut back = ReadBack::default();
    let mut expected = first;
    while expected < args.records {
        let Some(item) = reader.next().await else { bail!("the reader ended at offset {expected}") };
        let (source, record) = item.with_context(|| format!("reading offset {expected}"))?;
        if record.offset != expected || record.payload != synthetic_payload(expected, args.size) {
            bail!("offset {expected}: read offset {} with a different payload than written", record.offset);
        }
        back.records += 1;
        back.bytes += record.payload.len() as u64;
        add_to_runs(&mut back.runs, source, record.offset);
        expected += 1;
    }
    back.secs = started.elapsed().as_secs_f64();
    Ok(back)
}

fn render_read(title: &str, back: &ReadBack) -> String {
    let (rps, mbps) = rates(back.records, back.bytes, back.secs);
    let mut out = format!("{title}:\n");
    out.push_str(&render_runs(&back.runs));
    out.push_str(&format!(
        "  {} records, {} in {:.2} s: {rps:.0} records/s, {mbps:.1} MB/s\n",
        back.records,
        format_size(back.bytes),
        back.secs
    ));
    out
}
