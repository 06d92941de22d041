//! `tierlog recover`: opens the store, which runs crash recovery on every topic in the
//! WAL and on the topics named, and prints each topic's [`RecoveryReport`].

use serde_json::json;
use tier_core::OffsetRange;
use tier_router::RecoveryReport;
use tierlog_client::RecoveryJson;

use crate::cli::RecoverArgs;
use crate::cmd::{Ctx, inspect};
use crate::{exit, store};

fn range(r: Option<OffsetRange>) -> String {
    r.map_or_else(|| "-".to_owned(), |r| r.to_string())
}

fn report_json(r: &RecoveryReport) -> serde_json::Value {
    let pair = |r: Option<OffsetRange>| r.map(|r| json!([r.start, r.end]));
    json!({
        "topic": r.topic.to_string(),
        "hot": [r.hot.start, r.hot.end],
        "warm": pair(r.warm),
        "cold": pair(r.cold),
        "replayed": pair(r.replayed),
        "warm_backfill": pair(r.warm_backfill),
        "lost": r.lost.iter().map(|l| json!([l.start, l.end])).collect::<Vec<_>>(),
        "maybe_lost": r.maybe_lost.iter().map(|l| json!([l.start, l.end])).collect::<Vec<_>>(),
        "warm_unreachable": r.warm_unreachable,
        "skipped": pair(r.skipped),
        "end_unknown": r.end_unknown,
        "next_offset": r.next_offset,
    })
}

/// Runs the command. Exit code 3 when some topic lost (or may have lost) offsets.
pub(crate) async fn run(ctx: &Ctx, args: RecoverArgs) -> anyhow::Result<u8> {
    let topics = args.topics.iter().map(|t| store::topic_name(t)).collect::<anyhow::Result<Vec<_>>>()?;
    if args.resume_at.is_some() && topics.len() != 1 {
        return Err(exit::usage("--resume-at needs exactly one --topic"));
    }
    // Without --topic: every topic the state directory or cold knows, besides the WAL's
    // (after a lost disk the WAL knows none). A topic named is opened only if a tier
    // holds anything of it: recovering creates no topic.
    let mut to_open = Vec::new();
    if topics.is_empty() {
        let config = ctx.config();
        to_open = inspect::state_topics(&inspect::state_dir(config))?;
        if let Some(cold) = &config.cold {
            to_open.extend(inspect::cold_topics(&store::open_cold(cold).await?).await?);
        }
        to_open.sort();
        to_open.dedup();
    }
    let opened = store::open(ctx.config(), to_open, false).await?;
    for topic in &topics {
        // A topic whose recovery failed is reported below (`FAILED:`) with the others.
        if let Err(e) = store::existing_topic(&opened, topic).await
            && !opened.failed_topics().iter().any(|(t, _)| t == topic)
        {
            opened.close().await;
            return Err(e);
        }
    }
    if let (Some(at), [topic]) = (args.resume_at, topics.as_slice()) {
        let resumed = opened.resume_topic(topic.as_str(), at).await;
        if let Err(e) = resumed {
            opened.close().await;
            let unavailable = e.kind() == tier_core::ErrorKind::Unavailable;
            return Err(anyhow::Error::new(e).context(resume_failed(topic.as_str(), at, unavailable)));
        }
        eprintln!("RESUMED: {topic} continues at offset {at}; the offsets skipped are never used");
    }
    let reports = opened.recovery_reports().await;
    let failed = opened.failed_topics();
    opened.close().await;
    for (topic, e) in &failed {
        Found { topic: topic.to_string(), failed: Some(e.report().to_string()), ..Found::default() }.print();
    }
    let mut clean = failed.is_empty();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports.iter().map(report_json).collect::<Vec<_>>())?);
    } else if reports.is_empty() && failed.is_empty() {
        println!("no topics to recover");
    }
    for r in &reports {
        if !args.json {
            println!(
                "{}: WAL {}, warm {}, cold {}; replayed {}, warm back-fill {}; next offset {}",
                r.topic,
                r.hot,
                range(r.warm),
                range(r.cold),
                range(r.replayed),
                range(r.warm_backfill),
                r.next_offset
            );
        }
        let found = Found::of(r);
        found.print();
        clean &= found.is_clean();
    }
    Ok(if clean { exit::OK } else { exit::PROBLEMS })
}

/// What a failed resume of `topic` at `at` says: `resume_topic` records the skipped
/// offsets before it lifts the fence, so after a tier's transient failure (`unavailable`)
/// nothing changed and the same command can simply be run again.
pub(crate) fn resume_failed(topic: &str, at: u64, unavailable: bool) -> String {
    let retry = if unavailable {
        " (the topic is still fenced and no offset was handed out; run the same command again once the tier \
         answers)"
    } else {
        ""
    };
    format!("resuming {topic} at {at}{retry}")
}

/// What `recover` says of a topic on stderr — from a report of the store it opened, or
/// of a server's (`--server`) — and whether that is clean (the exit code).
#[derive(Debug, Default)]
pub(crate) struct Found {
    topic: String,
    lost: Vec<OffsetRange>,
    maybe_lost: Vec<OffsetRange>,
    end_unknown: bool,
    next_offset: u64,
    warm_unreachable: bool,
    skipped: Option<OffsetRange>,
    /// The topic could not be opened (its recovery failed): the error.
    failed: Option<String>,
}

impl Found {
    fn of(r: &RecoveryReport) -> Self {
        Self {
            topic: r.topic.to_string(),
            lost: r.lost.clone(),
            maybe_lost: r.maybe_lost.clone(),
            end_unknown: r.end_unknown,
            next_offset: r.next_offset,
            warm_unreachable: r.warm_unreachable,
            skipped: r.skipped,
            failed: None,
        }
    }

    pub(crate) fn served(r: &RecoveryJson) -> Self {
        let ranges =
            |v: &[tierlog_client::RangeJson]| v.iter().map(|r| OffsetRange::new(r.start, r.end)).collect();
        Self {
            topic: r.topic.clone(),
            lost: ranges(&r.lost),
            maybe_lost: ranges(&r.maybe_lost),
            end_unknown: r.end_unknown,
            next_offset: r.next_offset,
            warm_unreachable: r.warm_unreachable,
            skipped: r.skipped.as_ref().map(|r| OffsetRange::new(r.start, r.end)),
            failed: r.failed.clone(),
        }
    }

    /// Nothing lost, maybe lost, undecided or failed.
    pub(crate) fn is_clean(&self) -> bool {
        self.lost.is_empty() && self.maybe_lost.is_empty() && !self.end_unknown && self.failed.is_none()
    }

    /// The lines on stderr: `LOST:`, `MAYBE LOST:`, `END UNKNOWN:`, `WARM UNREACHABLE:`,
    /// `SKIPPED:` (and `FAILED:` for a server's topic).
    pub(crate) fn print(&self) {
        let topic = &self.topic;
        if let Some(e) = &self.failed {
            eprintln!("FAILED: {topic}: its recovery failed and it is not served: {e}");
        }
        for lost in &self.lost {
            eprintln!("LOST: {topic}: offsets {lost} were acknowledged but no tier holds them");
        }
        for maybe in &self.maybe_lost {
            eprintln!(
                "MAYBE LOST: {topic}: offsets {maybe} may have been acknowledged after the last checkpoint; no \
                 tier holds them and they will not be reused"
            );
        }
        if self.end_unknown {
            eprintln!(
                "END UNKNOWN: {topic}: the WAL and the state directory are gone; cold/warm hold offsets up to {}, \
                 but producers may have been acknowledged beyond it. Appends are refused until you run \
                 `tierlog recover --topic {topic} --resume-at OFFSET` with OFFSET at or past the last acknowledged \
                 one",
                self.next_offset
            );
        }
        if self.warm_unreachable {
            eprintln!(
                "WARM UNREACHABLE: {topic}: opened from the WAL alone (degrade); warm is back-filled when it answers"
            );
        }
        if let Some(skipped) = self.skipped {
            eprintln!(
                "SKIPPED: {topic}: offsets {skipped} are not used: warm could not be asked, and it may hold \
                 records there that were never acknowledged (nothing acknowledged is missing; reads stop at the gap)"
            );
        }
    }
}
