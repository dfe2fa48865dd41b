//! A progress line on stderr while a measure window runs (hidden when stderr
//! is not a terminal, so logs and tests stay clean).

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::driver::Phase;

pub struct RunProgress {
    bar: ProgressBar,
    last_finished: u64,
    last_elapsed: Duration,
}

impl RunProgress {
    /// `total` is ramp-up + measure + ramp-down; `title` e.g. "16 threads, rep 1/3".
    pub fn new(total: Duration, title: &str) -> RunProgress {
        let bar = ProgressBar::new(total.as_millis().max(1) as u64);
        bar.set_style(
            ProgressStyle::with_template("{prefix} {bar:30} {msg}").unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_prefix(title.to_owned());
        RunProgress { bar, last_finished: 0, last_elapsed: Duration::ZERO }
    }

    /// Called by the driver's tick with the count of finished transactions.
    pub fn tick(&mut self, phase: Phase, elapsed: Duration, finished: u64) {
        let dt = elapsed.saturating_sub(self.last_elapsed).as_secs_f64();
        let rate = if dt > 0.0 { (finished - self.last_finished.min(finished)) as f64 / dt } else { 0.0 };
        self.last_finished = finished;
        self.last_elapsed = elapsed;
        let phase = match phase {
            Phase::Connecting => "connecting",
            Phase::RampUp => "ramp-up",
            Phase::Measure => "measure",
            Phase::RampDown => "ramp-down",
            Phase::Draining => "draining backlog",
        };
        self.bar.set_position(elapsed.as_millis() as u64);
        self.bar.set_message(format!("{phase:<16} {rate:>9.0} txn/s"));
    }

    /// Prints a line above the progress line (plainly when it is hidden).
    pub fn println(&self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
}
