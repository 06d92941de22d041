//! `tierlog status`: per topic, each tier's offset range, size and segment count, the
//! commit point and the export lag; as a table or JSON. Read-only: it reads the WAL's
//! files, the router's checkpoints and the tiers' listings directly and never opens the
//! store, so it runs no recovery and writes nothing.

use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::Context;
use async_trait::async_trait;
use bytes::Bytes;
use serde::Serialize;
use tier_cold::ColdTier;
use tier_core::segment::{DEFAULT_TAIL_FETCH_BYTES, RangeReader, RecoveryPolicy, SegmentMeta, scan_unsealed};
use tier_core::{ErrorContext, OffsetRange, Tier, TierError, TierKind, TopicName};
use tier_warm::WarmTier;

use crate::cli::StatusArgs;
use crate::cmd::{Ctx, inspect};
use crate::units::format_size;
use crate::{exit, store};

/// One tier of one topic.
#[derive(Debug, Serialize)]
pub(crate) struct TierStatus {
    pub(crate) start: u64,
    pub(crate) end: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) segments: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) bytes: Option<u64>,
}

/// One topic.
#[derive(Debug, Serialize)]
pub(crate) struct TopicStatus {
    pub(crate) topic: String,
    pub(crate) committed: u64,
    pub(crate) hot: TierStatus,
    pub(crate) warm: Option<TierStatus>,
    pub(crate) cold: Option<TierStatus>,
    /// Committed records cold does not hold (null without cold).
    pub(crate) export_lag: Option<u64>,
    /// What the topic's files say the next open's recovery acts on, or the topic waits
    /// for (left out when nothing is pending).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) pending: Option<Pending>,
}

/// [`tier_router::PendingRecovery`] as `status --json` shows it: ranges as `[start, end]`.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Pending {
    /// Appends are refused until the topic is resumed at or past this offset.
    #[serde(skip_serializing_if = "Option::is_none")]
    resume_at_least: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    lost: Vec<[u64; 2]>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    maybe_lost: Vec<[u64; 2]>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    skipped: Vec<[u64; 2]>,
    /// The WAL was being rebuilt from warm by a recovery that did not finish: records
    /// may have been acknowledged up to this offset (`null`: unknown how far).
    #[serde(skip_serializing_if = "Option::is_none")]
    rebuilding: Option<Rebuilding>,
}

/// An unfinished rebuild of the WAL.
#[derive(Debug, Serialize)]
struct Rebuilding {
    acknowledged_up_to: Option<u64>,
}

impl Pending {
    fn of(p: tier_router::PendingRecovery) -> Option<Self> {
        let pairs = |v: Vec<OffsetRange>| v.into_iter().map(|r| [r.start, r.end]).collect();
        (!p.is_empty()).then(|| Self {
            resume_at_least: p.fenced_at_least,
            lost: pairs(p.lost),
            maybe_lost: pairs(p.maybe_lost),
            skipped: pairs(p.skipped),
            rebuilding: p.rebuilt.map(|r| Rebuilding { acknowledged_up_to: r.bound }),
        })
    }

    /// What a server says is pending for a topic it serves: only a resume awaited.
    pub(crate) fn served(resume_at_least: Option<u64>) -> Option<Self> {
        resume_at_least.map(|at| Self { resume_at_least: Some(at), ..Self::default() })
    }

    /// One line per pending item, for the text output.
    fn lines(&self, topic: &str) -> Vec<String> {
        let ranges =
            |v: &[[u64; 2]]| v.iter().map(|[a, b]| format!("[{a}, {b})")).collect::<Vec<_>>().join(", ");
        let mut out = Vec::new();
        if let Some(at) = self.resume_at_least {
            out.push(format!(
                "{topic}: appends refused: nothing bounds the offsets acknowledged; resume the topic at or past \
                 {at}, at or past the last offset any producer was told it holds \
                 (tierlog recover --topic {topic} --resume-at OFFSET; with --server URL while a server holds the \
                 data)"
            ));
        }
        if !self.lost.is_empty() || !self.maybe_lost.is_empty() {
            let mut found = Vec::new();
            if !self.lost.is_empty() {
                found.push(format!("lost {}", ranges(&self.lost)));
            }
            if !self.maybe_lost.is_empty() {
                found.push(format!("maybe lost {}", ranges(&self.maybe_lost)));
            }
            out.push(format!(
                "{topic}: a recovery found {} and did not finish; the next open (tierlog recover) reports them",
                found.join(", ")
            ));
        }
        if !self.skipped.is_empty() {
            out.push(format!(
                "{topic}: offsets {} were skipped while warm was unreachable; warm may hold records there that \
                 were never acknowledged, and they are never served",
                ranges(&self.skipped)
            ));
        }
        if let Some(r) = &self.rebuilding {
            let bound =
                r.acknowledged_up_to.map_or_else(|| "an unknown offset".to_owned(), |b| b.to_string());
            out.push(format!(
                "{topic}: a recovery rebuilding the WAL from warm did not finish; records may have been \
                 acknowledged up to {bound}; the next open (tierlog recover) finishes it"
            ));
        }
        out
    }
}

fn tier(range: OffsetRange, segments: Option<usize>, bytes: Option<u64>) -> TierStatus {
    TierStatus { start: range.start, end: range.end, segments, bytes }
}

/// The tiers as `status` reads them: files and listings, no store.
struct Sources {
    data_dir: PathBuf,
    state_dir: PathBuf,
    cold: Option<ColdTier>,
    warm: Option<WarmTier>,
}

/// Runs the command.
pub(crate) async fn run(ctx: &Ctx, args: StatusArgs) -> anyhow::Result<u8> {
    let config = ctx.config();
    let state_dir = inspect::state_dir(config);
    let cold = match &config.cold {
        Some(c) => Some(store::open_cold(c).await?),
        None => None,
    };
    let mut names: Vec<TopicName> = inspect::known_topics(config, cold.as_ref()).await?;
    if let Some(topic) = &args.topic {
        names = vec![inspect::require_known(store::topic_name(topic)?, &names)?];
    }
    let warm = match &config.warm {
        Some(w) => Some(WarmTier::connect(w.clone()).await.context("connecting to the warm tier")?),
        None => None,
    };
    let sources = Sources { data_dir: config.hot.data_dir.clone(), state_dir, cold, warm };
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for name in &names {
        match topic_status(&sources, name).await {
            Ok(row) => rows.push(row),
            Err(e) => failed.push((name, e)),
        }
    }
    if let Some(w) = sources.warm {
        w.close().await;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print_table(&rows);
    }
    // A topic that could not be read is reported, not a reason to show nothing.
    for (topic, e) in &failed {
        eprintln!("DAMAGED: {topic}: {}", crate::exit::message(e));
    }
    Ok(if failed.is_empty() { exit::OK } else { exit::PROBLEMS })
}

/// One topic's row. The commit point is the furthest of the router's checkpoint and the
/// tiers' ends (a store that is not running commits nothing more).
async fn topic_status(sources: &Sources, name: &TopicName) -> anyhow::Result<TopicStatus> {
    let files = inspect::wal_files(&sources.data_dir, name)?;
    let hot_range = wal_range(&files, name).await?;
    let warm = match &sources.warm {
        Some(w) => Some(w.range(name).await.context("reading the warm tier's range")?),
        None => None,
    };
    let cold = match &sources.cold {
        Some(c) => {
            let range =
                c.range(name).await.with_context(|| format!("reading {name}'s range in the cold tier"))?;
            let segments = c.segments(name).await?;
            Some(tier(range, Some(segments.len()), Some(segments.iter().map(|s| s.2).sum())))
        }
        None => None,
    };
    let ends = [
        hot_range.map(|r| r.end),
        warm.map(|r| r.end),
        cold.as_ref().map(|c| c.end),
        checkpoint(sources, name),
    ];
    let committed = ends.into_iter().flatten().max().unwrap_or(0);
    // No WAL file: the WAL is empty at the commit point.
    let hot_range = hot_range.unwrap_or(OffsetRange::new(committed, committed));
    let hot = tier(hot_range, Some(files.len()), Some(files.iter().map(|f| f.bytes).sum()));
    let export_lag = cold.as_ref().map(|c| committed.saturating_sub(c.end));
    let pending = tier_router::pending_recovery(&sources.data_dir, &sources.state_dir, name)
        .with_context(|| format!("reading {name}'s recovery state"))?;
    Ok(TopicStatus {
        topic: name.to_string(),
        committed,
        hot,
        warm: warm.map(|w| tier(w, None, None)),
        cold,
        export_lag,
        pending: Pending::of(pending),
    })
}

/// The end the router's checkpoint (`<state_dir>/<topic>.end`: `<end>` or `<end> warm
/// <confirmed>`) records, if any.
fn checkpoint(sources: &Sources, name: &TopicName) -> Option<u64> {
    let text = std::fs::read_to_string(sources.state_dir.join(format!("{name}.end"))).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The offsets the WAL's files hold (None without files): each sealed segment's trailer
/// and index are checked (its tail is read), the newest file is scanned whole.
async fn wal_range(files: &[inspect::WalFile], name: &TopicName) -> anyhow::Result<Option<OffsetRange>> {
    let Some((last, sealed)) = files.split_last() else { return Ok(None) };
    for file in sealed {
        let ctx = ErrorContext::tier(TierKind::Hot).topic(name).location(file.path.display().to_string());
        SegmentMeta::fetch(&FileRange(&file.path), file.bytes, DEFAULT_TAIL_FETCH_BYTES, &ctx).await?;
    }
    let shown = last.path.display().to_string();
    let bytes = std::fs::read(&last.path).with_context(|| format!("cannot read {shown}"))?;
    let scanned = scan_unsealed(&bytes, RecoveryPolicy::TruncateTornTail)
        .with_context(|| format!("reading {shown}"))?;
    let end = scanned.state.offset_range().end;
    Ok(Some(OffsetRange::new(files[0].base, end)))
}

/// Ranged reads of a file.
struct FileRange<'a>(&'a Path);

#[async_trait]
impl RangeReader for FileRange<'_> {
    async fn read_range(&self, range: Range<u64>) -> Result<Bytes, TierError> {
        use std::io::{Read, Seek, SeekFrom};
        let read = || -> std::io::Result<Vec<u8>> {
            let mut file = std::fs::File::open(self.0)?;
            file.seek(SeekFrom::Start(range.start))?;
            let mut buf = vec![0; usize::try_from(range.end - range.start).unwrap_or(usize::MAX)];
            file.read_exact(&mut buf)?;
            Ok(buf)
        };
        read().map(Bytes::from).map_err(|e| {
            TierError::unavailable(
                ErrorContext::tier(TierKind::Hot).location(self.0.display().to_string()),
                "reading",
            )
            .with_source(e)
        })
    }
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

pub(crate) fn print_table(rows: &[TopicStatus]) {
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
    for r in rows {
        for line in r.pending.iter().flat_map(|p| p.lines(&r.topic)) {
            println!("{line}");
        }
    }
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
