//! `tierlog status`: per topic, each tier's offset range, size and segment count, the
//! commit point and the export lag; as a table or JSON.

use serde::Serialize;
use tier_cold::ColdTier;
use tier_core::{OffsetRange, TopicName};
use tier_router::TieredStore;

use crate::cli::StatusArgs;
use crate::cmd::{Ctx, inspect};
use crate::units::format_size;
use crate::{exit, store};

/// One tier of one topic.
#[derive(Debug, Serialize)]
struct TierStatus {
    start: u64,
    end: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    segments: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bytes: Option<u64>,
}

/// One topic.
#[derive(Debug, Serialize)]
struct TopicStatus {
    topic: String,
    committed: u64,
    hot: TierStatus,
    warm: Option<TierStatus>,
    cold: Option<TierStatus>,
    /// Committed records cold does not hold (null without cold).
    export_lag: Option<u64>,
}

fn tier(range: OffsetRange, segments: Option<usize>, bytes: Option<u64>) -> TierStatus {
    TierStatus { start: range.start, end: range.end, segments, bytes }
}

/// Runs the command.
pub(crate) async fn run(ctx: &Ctx, args: StatusArgs) -> anyhow::Result<u8> {
    let config = ctx.config();
    let mut names: Vec<TopicName> = inspect::wal_topics(&config.hot.data_dir)?;
    let cold = match &config.cold {
        Some(c) => Some(store::open_cold(c).await?),
        None => None,
    };
    if let Some(cold) = &cold {
        names.extend(inspect::cold_topics(cold).await?);
    }
    names.sort();
    names.dedup();
    let store = store::open(config, names.clone(), false).await?;
    let failed = store.failed_topics();
    let healthy: Vec<TopicName> = names.into_iter().filter(|n| !failed.iter().any(|(f, _)| f == n)).collect();
    let result = collect(&store, cold.as_ref(), &healthy, &config.hot.data_dir).await;
    store.close().await;
    let rows = result?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_table(&rows);
    }
    // A topic that could not be opened is reported, not a reason to show nothing.
    for (topic, e) in &failed {
        eprintln!("DAMAGED: {topic}: {}", e.report());
    }
    Ok(if failed.is_empty() { exit::OK } else { exit::PROBLEMS })
}

async fn collect(
    store: &TieredStore,
    cold_tier: Option<&ColdTier>,
    names: &[TopicName],
    data_dir: &std::path::Path,
) -> anyhow::Result<Vec<TopicStatus>> {
    let mut rows = Vec::new();
    for name in names {
        let topic = store.topic(name.as_str()).await?;
        let ranges = topic.ranges().await?;
        let files = inspect::wal_files(data_dir, name)?;
        let hot = tier(ranges.hot, Some(files.len()), Some(files.iter().map(|f| f.bytes).sum()));
        // The segments as listed by a cold tier of its own (the store's is a backend).
        let cold = match (cold_tier, ranges.cold) {
            (Some(c), Some(range)) => {
                let segments = c.segments(name).await?;
                Some(tier(range, Some(segments.len()), Some(segments.iter().map(|s| s.2).sum())))
            }
            _ => None,
        };
        let export_lag = ranges.cold.map(|c| ranges.committed.saturating_sub(c.end));
        rows.push(TopicStatus {
            topic: name.to_string(),
            committed: ranges.committed,
            hot,
            warm: ranges.warm.map(|w| tier(w, None, None)),
            cold,
            export_lag,
        });
    }
    Ok(rows)
}

fn cell(t: Option<&TierStatus>) -> [String; 3] {
    match t {
        None => ["disabled".into(), "-".into(), "-".into()],
        Some(t) => [
            if t.start == t.end {
                format!("empty, next {}", t.end)
            } else {
                format!("[{}, {})", t.start, t.end)
            },
            t.segments.map_or_else(|| "-".into(), |s| s.to_string()),
            t.bytes.map_or_else(|| "-".into(), format_size),
        ],
    }
}

fn print_table(rows: &[TopicStatus]) {
    if rows.is_empty() {
        println!("no topics");
        return;
    }
    let header = [
        "topic",
        "committed",
        "hot offsets",
        "hot segs",
        "hot size",
        "warm offsets",
        "cold offsets",
        "cold segs",
        "cold size",
        "export lag",
    ]
    .map(str::to_owned);
    let mut table = vec![header];
    for r in rows {
        let [hr, hs, hb] = cell(Some(&r.hot));
        let [wr, _, _] = cell(r.warm.as_ref());
        let [cr, cs, cb] = cell(r.cold.as_ref());
        let lag = r.export_lag.map_or_else(|| "-".into(), |l| l.to_string());
        table.push([r.topic.clone(), r.committed.to_string(), hr, hs, hb, wr, cr, cs, cb, lag]);
    }
    print!("{}", render_table(&table));
}

/// Renders rows as left-aligned columns separated by two spaces.
pub(crate) fn render_table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let line: Vec<String> = row.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}
