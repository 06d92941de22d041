//! The routes and the handlers that are not reads or appends: topics and their ranges,
//! export, online verify, recovery reports, probes and metrics.

use std::sync::atomic::Ordering;

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router, middleware};
use futures::StreamExt;
use tier_router::{OffsetRange, RecoveryReport, StartPosition, Topic};
use tierlog_api::{
    ErrorKind, ExportResponse, RangeJson, RecoveryJson, RecoveryList, ResumeRequest, TopicInfo, TopicList,
    VerifyReport,
};

use crate::continuity::{Discontinuity, RecordedLoss, discontinuities};
use crate::error::{HttpError, json_body};
use crate::{AppState, append, auth, page, read, stream};

/// Every route, behind the token check.
pub(crate) fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(page::status_page))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/topics", get(topics))
        .route("/v1/topics/{topic}", get(topic))
        .route("/v1/topics/{topic}/records", post(append::append).get(read::read))
        .route("/v1/topics/{topic}/append-stream", post(stream::open))
        .route("/v1/topics/{topic}/export", post(export))
        .route("/v1/topics/{topic}/verify", get(verify))
        .route("/v1/topics/{topic}/resume", post(resume))
        .route("/v1/recovery", get(recovery))
        .fallback(|| async { HttpError::new(ErrorKind::NotFound, "no such endpoint (see docs/server.md)") })
        .layer(DefaultBodyLimit::max(state.max_body))
        .layer(middleware::from_fn_with_state(state.clone(), auth::require_token))
        .with_state(state)
}

fn range(r: OffsetRange) -> RangeJson {
    RangeJson { start: r.start, end: r.end }
}

/// A topic's ranges as the API shows them, and the offset an operator must resume it at
/// or past when its acknowledged end is unknown (from its recovery report).
pub(crate) async fn topic_info(state: &AppState, topic: &Topic) -> Result<TopicInfo, HttpError> {
    let ranges = topic.ranges().await?;
    let report = state.store.recover_topic(topic.name().clone()).await?;
    Ok(TopicInfo {
        topic: topic.name().to_string(),
        committed: ranges.committed,
        hot: range(ranges.hot),
        warm: ranges.warm.map(range),
        cold: ranges.cold.map(range),
        export_lag: ranges.cold.map(|c| ranges.committed.saturating_sub(c.end)),
        resume_at_least: report.end_unknown.then_some(report.next_offset),
    })
}

/// Every open topic's ranges, by name.
pub(crate) async fn all_topics(state: &AppState) -> Result<Vec<TopicInfo>, HttpError> {
    let mut names = state.store.topics().await;
    names.sort();
    let mut topics = Vec::with_capacity(names.len());
    for name in names {
        let topic = state.store.existing_topic(name.clone()).await?;
        topics.push(topic_info(state, &topic).await?);
    }
    Ok(topics)
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.draining.load(Ordering::SeqCst) {
        HttpError::new(ErrorKind::Closed, "the server is draining").into_response()
    } else {
        "ready\n".into_response()
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    match &state.metrics {
        Some(handle) => {
            ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], handle.render()).into_response()
        }
        None => HttpError::new(ErrorKind::NotFound, "no metrics recorder is installed").into_response(),
    }
}

async fn topics(State(state): State<AppState>) -> Result<Json<TopicList>, HttpError> {
    Ok(Json(TopicList { topics: all_topics(&state).await? }))
}

async fn topic(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<TopicInfo>, HttpError> {
    let topic = state.store.existing_topic(name.as_str()).await?;
    Ok(Json(topic_info(&state, &topic).await?))
}

async fn export(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<ExportResponse>, HttpError> {
    let topic = state.store.existing_topic(name.as_str()).await?;
    let stored = state.store.export_now(topic.name().clone()).await?;
    let cold = topic.ranges().await?.cold;
    Ok(Json(ExportResponse {
        topic: topic.name().to_string(),
        segments: stored.into_iter().map(|s| range(s.range)).collect(),
        cold: cold.map(range),
    }))
}

async fn verify(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<VerifyReport>, HttpError> {
    let topic = state.store.existing_topic(name.as_str()).await?;
    Ok(Json(verify_snapshot(&topic).await?))
}

/// Checks everything below a snapshot of the commit point, taken first: the tiers'
/// ranges together hold every offset from the oldest to the snapshot (read after it;
/// retention and trimming only remove what another tier holds, and producers only add
/// above the snapshot, so a write in progress is never a hole), then every batch below
/// the snapshot is read through the stitched reader, which checks each batch's CRC and
/// records and the continuity at every hand-off. Offsets that retention deletes while
/// they are read (possible without cold) are skipped, not reported: `records` then counts
/// fewer than `checked` spans. A recorded loss the read meets (a gap marker the WAL or
/// cold answers with) is reported as [`crate::continuity`] says it — the offline `tierlog
/// verify`'s wording — and the read goes on after it.
async fn verify_snapshot(topic: &Topic) -> Result<VerifyReport, HttpError> {
    let snapshot = topic.high_watermark();
    let ranges = topic.ranges().await?;
    let held: Vec<OffsetRange> = [Some(ranges.hot), ranges.warm, ranges.cold]
        .into_iter()
        .flatten()
        .map(|r| OffsetRange::new(r.start, r.end.min(snapshot)))
        .collect();
    let mut problems: Vec<String> = discontinuities(&held, &[]).iter().map(ToString::to_string).collect();
    let first = topic.start_offset(StartPosition::Earliest).await?.min(snapshot);
    let (mut records, mut batches) = (0u64, 0u64);
    let mut next = first;
    // Retention may delete the oldest offsets while they are read (without cold, nothing
    // else holds them): a read failing below the store's new oldest offset goes on from
    // there, a few times, instead of reporting a hole that is only retention at work.
    let mut restarts = 0;
    while next < snapshot {
        let mut reader = topic.batch_reader(StartPosition::Offset(next)).await?;
        let failed = loop {
            match reader.next().await {
                Some(Ok(batch)) => {
                    batches += 1;
                    records += batch.batch.end_offset().min(snapshot) - batch.from;
                    next = batch.batch.end_offset();
                    if next >= snapshot {
                        break None;
                    }
                }
                Some(Err(e)) => break Some(e),
                None => break None,
            }
        };
        let Some(e) = failed else { break };
        if let Some(loss) = RecordedLoss::of_read_error(&e)
            && loss.range.contains(next)
        {
            problems.push(
                Discontinuity::lost(&RecordedLoss { range: OffsetRange::new(next, loss.range.end), ..loss })
                    .to_string(),
            );
            next = loss.range.end;
            continue;
        }
        let oldest = topic.start_offset(StartPosition::Earliest).await?;
        if oldest > next && restarts < 3 {
            restarts += 1;
            next = oldest;
            continue;
        }
        problems.push(e.report().to_string());
        break;
    }
    Ok(VerifyReport {
        topic: topic.name().to_string(),
        snapshot,
        checked: RangeJson { start: first, end: snapshot },
        records,
        batches,
        problems,
    })
}

/// A recovery report as the API shows it.
fn recovery_json(r: &RecoveryReport) -> RecoveryJson {
    RecoveryJson {
        topic: r.topic.to_string(),
        next_offset: r.next_offset,
        lost: r.lost.iter().copied().map(range).collect(),
        maybe_lost: r.maybe_lost.iter().copied().map(range).collect(),
        replayed: r.replayed.map(range),
        warm_unreachable: r.warm_unreachable,
        skipped: r.skipped.map(range),
        end_unknown: r.end_unknown,
        failed: None,
    }
}

/// The operator's decision for a topic whose acknowledged end is unknown, online:
/// `TieredStore::resume_topic` (what `tierlog recover --resume-at` does to a store it
/// opens). `400` when the topic needs no resume or `at` is below what the tiers hold;
/// `503` when a tier could not record the skipped offsets (the topic stays fenced).
async fn resume(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<RecoveryJson>, HttpError> {
    let request: ResumeRequest = json_body(&body)?;
    let topic = state.store.existing_topic(name.as_str()).await?;
    let report = state.store.resume_topic(topic.name().clone(), request.at).await?;
    Ok(Json(recovery_json(&report)))
}

async fn recovery(State(state): State<AppState>) -> Json<RecoveryList> {
    let mut topics: Vec<RecoveryJson> =
        state.store.recovery_reports().await.iter().map(recovery_json).collect();
    for (topic, e) in state.store.failed_topics() {
        topics.push(RecoveryJson {
            topic: topic.to_string(),
            next_offset: 0,
            lost: Vec::new(),
            maybe_lost: Vec::new(),
            replayed: None,
            warm_unreachable: false,
            skipped: None,
            end_unknown: false,
            failed: Some(e.report().to_string()),
        });
    }
    topics.sort_by(|a, b| a.topic.cmp(&b.topic));
    Json(RecoveryList { topics })
}

/// `StatusCode` for a kind (used by the status page's error answer).
pub(crate) fn status_of(kind: ErrorKind) -> StatusCode {
    StatusCode::from_u16(kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}
