//! `tierlog export`: seals each topic's active WAL segment and uploads every sealed
//! segment the cold tier does not hold yet.

use anyhow::bail;

use crate::cli::ExportArgs;
use crate::cmd::{Ctx, inspect};
use crate::units::format_size;
use crate::{exit, store};

/// Runs the command.
pub(crate) async fn run(ctx: &Ctx, args: ExportArgs) -> anyhow::Result<u8> {
    let config = ctx.config();
    if config.cold.is_none() {
        bail!("the cold tier is not configured (no [cold] table), so there is nothing to export to");
    }
    let topics = match &args.topic {
        Some(t) => vec![store::topic_name(t)?],
        None => inspect::wal_topics(&config.hot.data_dir)?,
    };
    let store = store::open(config, topics.clone(), false).await?;
    let mut stored_bytes = 0u64;
    let result = async {
        let bar = ctx.progress.bar(Some(topics.len() as u64), "exporting", "topics");
        let mut lines = Vec::new();
        let mut failed = Vec::new();
        for name in &topics {
            // One topic that cannot be exported (damaged, say) does not stop the others.
            let exported = match store.export_now(name.as_str()).await {
                Ok(exported) => exported,
                Err(e) => {
                    failed.push(anyhow::Error::new(e).context(format!("exporting {name}")));
                    bar.inc(1);
                    continue;
                }
            };
            let topic = store.topic(name.as_str()).await?;
            // The WAL keeps the segments just exported (no retention runs here).
            let sealed = store.wal().sealed_segments(name);
            stored_bytes += exported
                .iter()
                .filter_map(|e| sealed.iter().find(|s| s.range == e.range))
                .map(|s| s.bytes)
                .sum::<u64>();
            let cold_end = topic.ranges().await?.cold.map_or(0, |c| c.end);
            lines.push(format!(
                "{name}: exported {}, cold holds offsets up to {cold_end}",
                crate::units::count(exported.len() as u64, "segment")
            ));
            for seg in exported {
                lines.push(format!("  {} {}", seg.topic, seg.range));
            }
            bar.inc(1);
        }
        bar.finish_and_clear();
        anyhow::Ok((lines, failed))
    }
    .await;
    store.close().await;
    let (lines, failed) = result?;
    for line in lines {
        println!("{line}");
    }
    println!("uploaded {}", format_size(stored_bytes));
    match failed.len() {
        0 => Ok(exit::OK),
        1 if topics.len() == 1 => Err(failed.into_iter().next().expect("one failure")),
        _ => {
            for e in &failed {
                eprintln!("FAILED: {e:#}");
            }
            Ok(exit::PROBLEMS)
        }
    }
}
