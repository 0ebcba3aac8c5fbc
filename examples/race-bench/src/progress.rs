//! Progress bars on stderr while the benchmark runs.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bars of one run; drawn only when stderr is a terminal, otherwise
/// phase lines are printed instead.
#[derive(Clone, Debug)]
pub(crate) struct Progress {
    bars: MultiProgress,
}

impl Progress {
    /// Bars on stderr.
    pub(crate) fn new() -> Self {
        Progress {
            bars: MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(4)),
        }
    }

    /// A bar for `phase` of `contender`, `len` steps long.
    pub(crate) fn bar(&self, contender: &str, phase: &str, len: u64) -> ProgressBar {
        let style = ProgressStyle::with_template(
            "{prefix:>10} {msg:<7} [{bar:36.cyan/blue}] {pos:>6}/{len:6} {per_sec:>12} {elapsed:>4}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        let bar = self.bars.add(ProgressBar::new(len).with_style(style));
        bar.set_prefix(contender.to_owned());
        bar.set_message(phase.to_owned());
        bar
    }

    /// A line above the bars (or on stderr when they are hidden).
    pub(crate) fn line(&self, text: &str) {
        if self.bars.is_hidden() || self.bars.println(text).is_err() {
            eprintln!("{text}");
        }
    }
}
