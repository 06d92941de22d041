//! `tierlog export`: seals each topic's active WAL segment and uploads every sealed
//! segment the cold tier does not hold yet. `tierlog maintain`: the same, then WAL
//! retention and warm trimming once — what a long-running store's background tasks do.

use anyhow::bail;
use tier_core::TopicName;
use tier_router::TieredStore;

use crate::cli::ExportArgs;
use crate::cmd::{Ctx, inspect};
use crate::units::{count, format_size};
use crate::{exit, store};

/// Which command runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `export`: upload only (needs cold).
    Export,
    /// `maintain`: upload (when cold is configured), then retention and warm trimming.
    Maintain,
}

/// Runs the command.
pub(crate) async fn run(ctx: &Ctx, args: ExportArgs, mode: Mode) -> anyhow::Result<u8> {
    let config = ctx.config();
    if config.cold.is_none() && mode == Mode::Export {
        bail!("the cold tier is not configured (no [cold] table), so there is nothing to export to");
    }
    // The WAL's topics are recovered at open; a topic named is opened only if a tier
    // holds anything of it (`one_topic`): exporting or maintaining creates no topic.
    let (topics, at_open) = match &args.topic {
        Some(t) => (vec![store::topic_name(t)?], Vec::new()),
        None => {
            let wal = inspect::wal_topics(&config.hot.data_dir)?;
            (wal.clone(), wal)
        }
    };
    let store = store::open(config, at_open, false).await?;
    let bar = ctx.progress.bar(Some(topics.len() as u64), "exporting", "topics");
    let mut stored_bytes = 0u64;
    let mut lines = Vec::new();
    let mut failed = Vec::new();
    for name in &topics {
        // One topic that cannot be exported (damaged, say) does not stop the others.
        match one_topic(&store, name, mode, config.cold.is_some()).await {
            Ok((topic_lines, bytes)) => {
                lines.extend(topic_lines);
                stored_bytes += bytes;
            }
            Err(e) => failed.push(e.context(format!("{} {name}", doing(mode)))),
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    store.close().await;
    // The only topic failing is the command's error, with nothing to sum up.
    let code = outcome(failed, topics.len())?;
    for line in lines {
        println!("{line}");
    }
    if config.cold.is_some() {
        println!("uploaded {}", format_size(stored_bytes));
    }
    Ok(code)
}

/// The exit code of a command over `topics` topics that failed on `failed`: the error
/// itself when the only topic failed, else each on stderr as `FAILED: …` and exit 3.
pub(crate) fn outcome(failed: Vec<anyhow::Error>, topics: usize) -> anyhow::Result<u8> {
    match failed.len() {
        0 => Ok(exit::OK),
        1 if topics == 1 => Err(failed.into_iter().next().expect("one failure")),
        _ => {
            for e in &failed {
                eprintln!("FAILED: {e:#}");
            }
            Ok(exit::PROBLEMS)
        }
    }
}

fn doing(mode: Mode) -> &'static str {
    match mode {
        Mode::Export => "exporting",
        Mode::Maintain => "maintaining",
    }
}

/// Exports `name` (when cold is configured) and, under `maintain`, runs its WAL retention
/// and warm trimming. Returns the lines to print and the bytes uploaded.
async fn one_topic(
    store: &TieredStore,
    name: &TopicName,
    mode: Mode,
    cold: bool,
) -> anyhow::Result<(Vec<String>, u64)> {
    let mut lines = Vec::new();
    let mut stored_bytes = 0;
    let topic = crate::store::existing_topic(store, name).await?;
    if cold {
        let exported = store.export_now(name.as_str()).await?;
        // Measured before retention, which may delete the segments just exported.
        let sealed = store.wal().sealed_segments(name);
        stored_bytes = exported
            .iter()
            .filter_map(|e| sealed.iter().find(|s| s.range == e.range))
            .map(|s| s.bytes)
            .sum::<u64>();
        let cold_end = topic.ranges().await?.cold.map_or(0, |c| c.end);
        lines.push(format!(
            "{name}: exported {}, cold holds offsets up to {cold_end}",
            count(exported.len() as u64, "segment")
        ));
        for seg in exported {
            lines.push(format!("  {} {}", seg.topic, seg.range));
        }
    }
    if mode == Mode::Maintain {
        let deleted = store.run_topic_retention_now(name.as_str(), store.clock().now()).await?;
        let trimmed = store.trim_topic_warm_now(name.as_str()).await?;
        let warm = trimmed.map(|o| format!(", warm trimmed below offset {o}")).unwrap_or_default();
        let hot = topic.ranges().await?.hot;
        lines.push(format!(
            "{name}: retention deleted {}{warm}; the WAL holds {hot}",
            count(deleted.len() as u64, "WAL segment")
        ));
    }
    Ok((lines, stored_bytes))
}
