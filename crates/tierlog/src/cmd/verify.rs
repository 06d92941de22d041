//! `tierlog verify`: checks every WAL segment file and every cold object byte by byte
//! (header, every batch's CRC and offsets, index and footer) and that the tiers together
//! hold each topic's offsets without a hole — without opening the store, so nothing is
//! repaired or truncated first. One line per problem on stdout, naming the file or object
//! key and the byte position; exit code 3 when there is any.
//!
//! It holds the WAL data directory's lock while it reads, as the store would: the files
//! of a directory another process writes, rotates and prunes meanwhile would show holes
//! that are not there. A running server is verified online instead (`--server`). Offsets
//! no tier holds are judged by [`tierlog_server::continuity`], the online verify's rule:
//! a loss a gap marker records is named with its markers, not as a hole.

use anyhow::Context;
use bytes::Bytes;
use object_store::ObjectStoreExt;
use tier_cold::ColdTier;
use tier_core::segment::{DecodeError, RecoveryPolicy, SealedSegment, scan_unsealed};
use tier_core::{OffsetRange, Tier, TopicName};
use tier_warm::WarmTier;
use tierlog_server::continuity::{RecordedLoss, discontinuities};

use crate::cli::VerifyArgs;
use crate::cmd::{Ctx, inspect};
use crate::units::count;
use crate::{exit, store};

/// What was checked and what was wrong.
#[derive(Debug, Default)]
struct Report {
    wal_files: usize,
    cold_objects: usize,
    problems: Vec<String>,
}

impl Report {
    fn problem(&mut self, where_: &str, e: &DecodeError) {
        self.problems.push(format!("{where_}@{}: {e}", e.position()));
    }
}

/// Runs the command.
pub(crate) async fn run(ctx: &Ctx, args: VerifyArgs) -> anyhow::Result<u8> {
    let config = ctx.config();
    let _lock = inspect::lock_data_dir(&config.hot.data_dir).context(
        "tierlog verify reads the WAL's files directly and needs the data directory to itself: stop the process \
         holding it, or verify through the server serving it (tierlog --server URL verify)",
    )?;
    let cold = match &config.cold {
        Some(c) => Some(store::open_cold(c).await?),
        None => None,
    };
    let warm = match &config.warm {
        Some(w) => Some(WarmTier::connect(w.clone()).await.context("connecting to the warm tier")?),
        None => None,
    };
    let topics = match &args.topic {
        Some(t) => {
            let name = store::topic_name(t)?;
            let mut known = inspect::known_topics(config, cold.as_ref()).await?;
            if let Some(w) = &warm
                && !known.contains(&name)
                && (w.topic_recorded(&name).await? || !w.range(&name).await?.is_empty())
            {
                known.push(name.clone());
            }
            vec![inspect::require_known(name, &known)?]
        }
        None => {
            let mut t = inspect::wal_topics(&config.hot.data_dir)?;
            if let Some(c) = &cold {
                t.extend(inspect::cold_topics(c).await?);
            }
            t.sort();
            t.dedup();
            t
        }
    };
    let mut report = Report::default();
    let bar = ctx.progress.bar(Some(topics.len() as u64), "verifying", "topics");
    for topic in &topics {
        let mut held = verify_wal(&config.hot.data_dir, topic, &mut report)?;
        let mut recorded = inspect::wal_gaps(&config.hot.data_dir, topic)?;
        if let Some(c) = &cold {
            held.extend(verify_cold(c, topic, &mut report).await?);
            recorded.extend(inspect::cold_gaps(c, topic).await?);
        }
        if let Some(w) = &warm {
            let r = w.range(topic).await.context("reading the warm tier's range")?;
            if !r.is_empty() {
                held.push(r);
            }
        }
        check_continuity(topic, &held, &recorded, &mut report);
        bar.inc(1);
    }
    bar.finish_and_clear();
    if let Some(w) = warm {
        w.close().await;
    }
    for p in &report.problems {
        println!("{p}");
    }
    let summary = format!(
        "verified {} and {} of {}",
        count(report.wal_files as u64, "WAL segment file"),
        count(report.cold_objects as u64, "cold object"),
        count(topics.len() as u64, "topic")
    );
    if report.problems.is_empty() {
        println!("{summary}: no problems");
        Ok(exit::OK)
    } else {
        eprintln!("{summary}: {}", count(report.problems.len() as u64, "problem"));
        Ok(exit::PROBLEMS)
    }
}

/// Checks `topic`'s WAL files and returns the offset ranges they hold.
fn verify_wal(
    data_dir: &std::path::Path,
    topic: &TopicName,
    report: &mut Report,
) -> anyhow::Result<Vec<OffsetRange>> {
    let files = inspect::wal_files(data_dir, topic)?;
    let mut held = Vec::new();
    let last = files.len().saturating_sub(1);
    for (i, file) in files.iter().enumerate() {
        report.wal_files += 1;
        let name = file.path.display().to_string();
        let bytes = Bytes::from(std::fs::read(&file.path).with_context(|| format!("cannot read {name}"))?);
        let range = match SealedSegment::open(bytes.clone()) {
            Ok(segment) => match segment.verify() {
                Ok(()) => Some((
                    segment.header().base_offset,
                    &segment.header().topic == topic,
                    segment.offset_range(),
                )),
                Err(e) => {
                    report.problem(&name, &e);
                    None
                }
            },
            // The newest file is the active segment: no footer yet.
            Err(_) if i == last => match scan_unsealed(&bytes, RecoveryPolicy::Refuse) {
                Ok(outcome) => Some((
                    outcome.header.base_offset,
                    &outcome.header.topic == topic,
                    outcome.state.offset_range(),
                )),
                Err(e) => {
                    report.problem(&name, &e);
                    None
                }
            },
            Err(e) => {
                report.problem(&name, &e);
                None
            }
        };
        if let Some((base, same_topic, range)) = range {
            if base != file.base {
                report
                    .problems
                    .push(format!("{name}@0: the header's base offset {base} does not match the file name"));
            }
            if !same_topic {
                report.problems.push(format!("{name}@0: the header names another topic than {topic}"));
            }
            if !range.is_empty() {
                held.push(range);
            }
        }
    }
    Ok(held)
}

/// Checks every cold object of `topic` and returns the offset ranges they hold.
async fn verify_cold(
    cold: &ColdTier,
    topic: &TopicName,
    report: &mut Report,
) -> anyhow::Result<Vec<OffsetRange>> {
    let segments = cold.segments(topic).await.with_context(|| format!("listing {topic} in the cold tier"))?;
    let mut held = Vec::new();
    for (key, named, _size) in segments {
        report.cold_objects += 1;
        let name = key.to_string();
        let bytes = cold
            .store()
            .get(&key)
            .await
            .with_context(|| format!("cannot read cold object {name}"))?
            .bytes()
            .await
            .with_context(|| format!("cannot read cold object {name}"))?;
        match SealedSegment::open(bytes).and_then(|s| s.verify().map(|()| s)) {
            Ok(segment) => {
                if segment.offset_range() != named {
                    report.problems.push(format!(
                        "{name}@0: the object holds offsets {} but its name says {named}",
                        segment.offset_range()
                    ));
                }
                held.push(segment.offset_range());
            }
            Err(e) => report.problem(&name, &e),
        }
    }
    Ok(held)
}

/// Reports offsets between the oldest and the newest held that no tier holds, by the
/// online verify's rule ([`discontinuities`]): recorded losses named with their markers.
fn check_continuity(topic: &TopicName, held: &[OffsetRange], recorded: &[RecordedLoss], report: &mut Report) {
    for found in discontinuities(held, recorded) {
        report.problems.push(format!("{topic}@{}: {found}", found.start()));
    }
}
