//! The progress bar: drawn only when stdout is a terminal, so logs and pipes stay clean. Lines
//! printed through it appear above the bar (or plainly without one).

use std::io::IsTerminal as _;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(Clone)]
pub struct Progress {
    bar: ProgressBar,
    visible: bool,
}

impl Progress {
    pub fn new() -> Progress {
        let visible = std::io::stdout().is_terminal();
        // Drawn from the first phase on (until then there is nothing to count).
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
        let template = "{msg:32} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} ({per_sec}, eta {eta})";
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        Progress { bar, visible }
    }

    /// Starts a phase of `total` steps (documents or queries).
    pub fn phase(&self, message: &str, total: u64) {
        self.bar.set_message(message.to_owned());
        self.bar.set_length(total);
        self.bar.set_position(0);
        self.bar.reset_eta();
        if self.visible && self.bar.is_hidden() {
            self.bar.set_draw_target(ProgressDrawTarget::stdout());
        }
    }

    pub fn advance(&self, steps: u64) {
        self.bar.inc(steps);
    }

    pub fn println(&self, line: &str) {
        if self.visible && !self.bar.is_hidden() {
            self.bar.println(line);
        } else {
            println!("{line}");
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
