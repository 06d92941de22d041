//! `tierlog recover`: opens the store, which runs crash recovery on every topic in the
//! WAL and on the topics named, and prints each topic's [`RecoveryReport`].

use serde_json::json;
use tier_core::OffsetRange;
use tier_router::RecoveryReport;

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
    // (after a lost disk the WAL knows none).
    let mut to_open = topics.clone();
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
    if let (Some(at), [topic]) = (args.resume_at, topics.as_slice()) {
        let resumed = opened.resume_topic(topic.as_str(), at).await;
        if let Err(e) = resumed {
            opened.close().await;
            // `resume_topic` records the skipped offsets before it lifts the fence: after a
            // transient failure nothing changed and the same command can simply be re-run.
            let retry = if e.kind() == tier_core::ErrorKind::Unavailable {
                " (the topic is still fenced and no offset was handed out; run the same command again once \
                 the tier answers)"
            } else {
                ""
            };
            return Err(anyhow::Error::new(e).context(format!("resuming {topic} at {at}{retry}")));
        }
        eprintln!("RESUMED: {topic} continues at offset {at}; the offsets skipped are never used");
    }
    let reports = opened.recovery_reports().await;
    let failed = opened.failed_topics();
    opened.close().await;
    for (topic, e) in &failed {
        eprintln!("FAILED: {topic}: its recovery failed and it is not served: {}", e.report());
    }
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
        for lost in &r.lost {
            eprintln!("LOST: {}: offsets {lost} were acknowledged but no tier holds them", r.topic);
        }
        for maybe in &r.maybe_lost {
            eprintln!(
                "MAYBE LOST: {}: offsets {maybe} may have been acknowledged after the last checkpoint; no tier \
                 holds them and they will not be reused",
                r.topic
            );
        }
        if r.end_unknown {
            eprintln!(
                "END UNKNOWN: {}: the WAL and the state directory are gone; cold/warm hold offsets up to {}, but \
                 producers may have been acknowledged beyond it. Appends are refused until you run \
                 `tierlog recover --topic {} --resume-at OFFSET` with OFFSET at or past the last acknowledged one",
                r.topic, r.next_offset, r.topic
            );
        }
        if r.warm_unreachable {
            eprintln!(
                "WARM UNREACHABLE: {}: opened from the WAL alone (degrade); warm is back-filled when it answers",
                r.topic
            );
        }
        if let Some(skipped) = r.skipped {
            eprintln!(
                "SKIPPED: {}: offsets {skipped} are not used: warm could not be asked, and it may hold records \
                 there that were never acknowledged (nothing acknowledged is missing; reads stop at the gap)",
                r.topic
            );
        }
    }
    let clean = failed.is_empty() && reports.iter().all(RecoveryReport::is_clean);
    Ok(if clean { exit::OK } else { exit::PROBLEMS })
}
