use tierlog_api::{RangeJson, TopicInfo};

use crate::{ServerConfig, Token, page};

#[test]
fn the_server_configuration_never_shows_a_token() {
    let config: ServerConfig =
        toml::from_str("tokens = [\"hunter2-token\"]\nlisten = \"127.0.0.1:0\"\ndrain_timeout = \"5s\"")
            .expect("config");
    assert_eq!(config.tokens, vec![Token::new("hunter2-token")]);
    assert_eq!(config.drain_timeout, Some(std::time::Duration::from_secs(5)));
    let debug = format!("{config:?}");
    assert!(!debug.contains("hunter2"), "{debug}");
    assert!(debug.contains("***"), "{debug}");
    assert!(toml::from_str::<ServerConfig>("tokenz = []").is_err(), "unknown keys are refused");
}

#[test]
fn the_status_page_draws_each_tier_on_one_axis() {
    let topic = TopicInfo {
        topic: "orders".into(),
        committed: 300,
        hot: RangeJson { start: 200, end: 300 },
        warm: None,
        cold: Some(RangeJson { start: 0, end: 250 }),
        export_lag: Some(50),
        resume_at_least: None,
    };
    let html = page::render(std::slice::from_ref(&topic), &[Some(12.5)]);
    assert!(html.contains("<meta http-equiv=\"refresh\""), "refreshes itself");
    assert!(html.contains("cold [0, 250)") && html.contains("WAL [200, 300)"), "{html}");
    // On one axis from 0 to 300: the WAL's bar starts two thirds along.
    assert!(html.contains("class=\"hot\" x=\"400.0\""), "{html}");
    assert!(html.contains("class=\"cold\" x=\"0.0\" y=\"0\" width=\"500.0\""), "{html}");
    assert!(html.contains("12.5 records/s") && html.contains("50 records"), "{html}");
    assert!(!html.contains("<script"), "no script");
    // The first render of a topic has no earlier commit point to measure a rate against.
    let first = page::render(&[topic], &[None]);
    assert!(first.contains("measuring (shown after 2 s)") && !first.contains("records/s"), "{first}");
    let escaped = page::render(
        &[TopicInfo {
            topic: "<b>".into(),
            committed: 0,
            hot: RangeJson { start: 0, end: 0 },
            warm: None,
            cold: None,
            export_lag: None,
            resume_at_least: Some(7),
        }],
        &[None],
    );
    assert!(escaped.contains("&lt;b&gt;") && !escaped.contains("<b>"));
    assert!(escaped.contains("refused until an operator resumes the topic at or past 7"), "{escaped}");
    assert!(!html.contains("refused until"), "{html}");
}
