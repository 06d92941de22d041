//! Progress bars for long work, drawn on stderr only when it is a terminal.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Whether bars may be drawn (set from `--no-progress` and whether stderr is a terminal).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Progress {
    enabled: bool,
}

impl Progress {
    /// Bars are shown when `wanted` and stderr is a terminal.
    pub(crate) fn new(wanted: bool) -> Self {
        Self { enabled: wanted && std::io::stderr().is_terminal() }
    }

    /// A bar counting to `total` `unit`s (a spinner with a count when `total` is unknown).
    pub(crate) fn bar(&self, total: Option<u64>, what: &str, unit: &str) -> ProgressBar {
        if !self.enabled {
            return ProgressBar::hidden();
        }
        let bar = match total {
            Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
        };
        let template = match total {
            Some(_) => {
                format!("{what} [{{bar:30}}] {{human_pos}}/{{human_len}} {unit} ({{rate}}, eta {{eta}})")
            }
            None => format!("{what} {{spinner}} {{human_pos}} {unit} ({{rate}})"),
        };
        if let Ok(style) = ProgressStyle::with_template(&template) {
            // indicatif's own `per_sec` prints four decimals (`412,876.8384/s`).
            let style =
                style.with_key("rate", |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = w.write_str(&crate::units::format_rate(state.per_sec()));
                });
            bar.set_style(style.progress_chars("=> "));
        }
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    }
}
