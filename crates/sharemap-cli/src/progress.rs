//! Progress bars for passes over large traces; hidden when stderr is not a terminal.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;

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

/// A bar for each pass the library makes over a trace, cleared when the pass ends.
#[derive(Default)]
pub struct Bars {
    current: Mutex<Option<ProgressBar>>,
}

impl Bars {
    pub fn new() -> Bars {
        Bars::default()
    }
}

impl sharemap::Observer for Bars {
    fn start(&self, what: &str, total: Option<u64>) {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = current.replace(bar(total, what)) {
            old.finish_and_clear();
        }
    }

    fn read(&self, accesses: u64) {
        if let Some(b) = self.current.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            b.set_position(accesses);
        }
    }

    fn end(&self) {
        if let Some(b) = self.current.lock().unwrap_or_else(|e| e.into_inner()).take() {
            b.finish_and_clear();
        }
    }
}
