//! Progress bars for passes over large traces; hidden when stderr is not a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

pub fn bar(total: Option<u64>, what: &str) -> ProgressBar {
    bar_of(total, what, "accesses")
}

/// A bar counting `unit`s (accesses, runs).
pub fn bar_of(total: Option<u64>, what: &str, unit: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = match total {
        Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()).with_style(
            ProgressStyle::with_template(&format!(
                "{{msg}} [{{bar:30}}] {{human_pos}}/{{human_len}} {unit} ({{per_sec}}, {{eta}})"
            ))
            .expect("valid template")
            .progress_chars("=> "),
        ),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(
            ProgressStyle::with_template(&format!("{{msg}} {{spinner}} {{human_pos}} {unit} ({{per_sec}})"))
                .expect("valid template"),
        ),
    };
    pb.set_message(what.to_string());
    pb
}
