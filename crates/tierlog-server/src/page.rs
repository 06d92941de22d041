//! The status page at `/`: plain server-rendered HTML refreshing itself every few
//! seconds (`<meta http-equiv="refresh">`, no script). Each topic's tiers are bars on one
//! offset axis (cold `[a, b)`, warm `[c, d)`, WAL `[e, f)`) in inline SVG, with the
//! commit point, export lag and append rate (records/s between two renders of the page).

use std::collections::HashMap;
use std::fmt::Write;
use std::time::Instant;

use axum::extract::State;
use axum::response::{Html, IntoResponse, Response};
use parking_lot::Mutex;
use tierlog_api::{RangeJson, TopicInfo};

use crate::AppState;
use crate::routes::{all_topics, status_of};

/// Seconds between refreshes.
const REFRESH_SECONDS: u32 = 2;
/// Width of a topic's axis, in SVG units.
const AXIS: f64 = 600.0;

/// The commit point each topic had at the last render, for the append rate.
#[derive(Debug, Default)]
pub(crate) struct Rates(Mutex<HashMap<String, Sample>>);

/// When a topic's commit point was last sampled, its value then, and the rate measured
/// up to then (`None` before a second sample).
type Sample = (Instant, u64, Option<f64>);

impl Rates {
    /// Records per second since the previous sample at least a second ago (the last
    /// rate between); `None` until there is one — the first render of a topic cannot
    /// know its rate, and saying 0 would be wrong.
    fn sample(&self, topic: &str, committed: u64) -> Option<f64> {
        // A rate shown on the status page, in real time; it steers nothing
        #[allow(clippy::disallowed_methods)]
        let now = Instant::now();
        let mut map = self.0.lock();
        let entry = map.entry(topic.to_owned()).or_insert((now, committed, None));
        let elapsed = now.duration_since(entry.0).as_secs_f64();
        if elapsed >= 1.0 {
            entry.2 = Some(committed.saturating_sub(entry.1) as f64 / elapsed);
            entry.0 = now;
            entry.1 = committed;
        }
        entry.2
    }
}

pub(crate) async fn status_page(State(state): State<AppState>) -> Response {
    match all_topics(&state).await {
        Ok(topics) => {
            let rates: Vec<Option<f64>> =
                topics.iter().map(|t| state.rates.sample(&t.topic, t.committed)).collect();
            Html(render(&topics, &rates)).into_response()
        }
        Err(e) => {
            let status = status_of(e.0.kind());
            (status, Html(page(&format!("<p class=\"error\">{}</p>", escape(&e.0.to_string())))))
                .into_response()
        }
    }
}

fn page(body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <title>tierlog</title><style>\
         body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse}} \
         td,th{{padding:2px 10px;text-align:left}} .topic{{margin-bottom:2em}} \
         .cold{{fill:#4a78b5}} .warm{{fill:#e08a2c}} .hot{{fill:#c0392b}} .axis{{stroke:#888}} \
         text{{font-size:12px}}</style></head>\
         <body><h1>tierlog</h1>{body}</body></html>\n"
    )
}

/// `1 record`, `5 records`.
fn records(n: u64) -> String {
    if n == 1 { "1 record".to_owned() } else { format!("{n} records") }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The page for `topics`, with each one's append rate (`None`: not measured yet).
pub(crate) fn render(topics: &[TopicInfo], rates: &[Option<f64>]) -> String {
    if topics.is_empty() {
        return page("<p>no topics</p>");
    }
    let mut body = String::new();
    for (t, rate) in topics.iter().zip(rates) {
        let name = escape(&t.topic);
        let tiers: Vec<(&str, &str, RangeJson)> =
            [("cold", "cold", t.cold), ("warm", "warm", t.warm), ("hot", "WAL", Some(t.hot))]
                .into_iter()
                .filter_map(|(class, label, r)| r.map(|r| (class, label, r)))
                .collect();
        let low =
            tiers.iter().filter(|(_, _, r)| r.start < r.end).map(|(_, _, r)| r.start).min().unwrap_or(0);
        let high = tiers.iter().map(|(_, _, r)| r.end).max().unwrap_or(0).max(t.committed).max(low + 1);
        let x = |o: u64| (o.saturating_sub(low) as f64 / (high - low) as f64) * AXIS;
        let _ = write!(
            body,
            "<div class=\"topic\" id=\"topic-{name}\" data-topic=\"{name}\"><h2>{name}</h2><table>\
             <tr><th>commit point</th><td class=\"committed\">{}</td></tr>\
             <tr><th>export lag</th><td class=\"export-lag\">{}</td></tr>\
             <tr><th>append rate</th><td class=\"rate\">{}</td></tr>{}</table>",
            t.committed,
            t.export_lag.map_or_else(|| "- (no cold tier)".to_owned(), records),
            rate.map_or_else(
                || format!("measuring (shown after {REFRESH_SECONDS} s)"),
                |r| format!("{r:.1} records/s")
            ),
            t.resume_at_least.map_or_else(String::new, |at| format!(
                "<tr><th>appends</th><td class=\"refused\">refused until an operator resumes the topic at or \
                 past {at} (its acknowledged end is unknown): <code>tierlog --server URL recover --topic {name} \
                 --resume-at OFFSET</code></td></tr>"
            )),
        );
        let height = 24 * tiers.len() + 24;
        let _ = write!(body, "<svg width=\"{}\" height=\"{height}\" role=\"img\">", AXIS as u32 + 220);
        for (i, (class, label, r)) in tiers.iter().enumerate() {
            let y = 24 * i;
            let (x0, x1) = (x(r.start), x(r.end));
            let _ = write!(
                body,
                "<g class=\"tier\" data-tier=\"{class}\" data-start=\"{}\" data-end=\"{}\">\
                 <rect class=\"{class}\" x=\"{x0:.1}\" y=\"{y}\" width=\"{:.1}\" height=\"18\"></rect>\
                 <text x=\"{}\" y=\"{}\">{label} [{}, {})</text></g>",
                r.start,
                r.end,
                (x1 - x0).max(if r.start < r.end { 1.0 } else { 0.0 }),
                AXIS as u32 + 10,
                y + 14,
                r.start,
                r.end,
            );
        }
        let y = 24 * tiers.len() + 4;
        let _ = write!(
            body,
            "<line class=\"axis\" x1=\"0\" y1=\"{y}\" x2=\"{AXIS}\" y2=\"{y}\"></line>\
             <text x=\"0\" y=\"{}\">{low}</text><text x=\"{}\" y=\"{}\">{high}</text></svg></div>",
            y + 16,
            AXIS as u32 - 40,
            y + 16,
        );
    }
    page(&body)
}
