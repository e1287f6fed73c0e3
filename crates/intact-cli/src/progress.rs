//! Progress of a long `intact check`: on a terminal a bar line (states checked of those
//! found so far, failing, rate, ETA for the states found so far — exploration may still
//! find more); otherwise a plain line every 10 seconds, so logs of CI runs show it too.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    plain: bool,
    start: Instant,
    last_line: Instant,
    prefix: String,
}

impl Progress {
    pub fn new(quiet: bool) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        let bar = (!quiet && terminal).then(|| {
            let b = indicatif::ProgressBar::new(0);
            let style = indicatif::ProgressStyle::with_template(
                "{prefix} [{bar:25}] {pos}/{len} states checked {msg} [{elapsed}]",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
            b.set_style(style.progress_chars("=> "));
            b.enable_steady_tick(Duration::from_millis(200));
            b
        });
        let now = Instant::now();
        Progress {
            bar,
            plain: !quiet && !terminal,
            start: now,
            last_line: now,
            prefix: String::new(),
        }
    }

    pub fn set_prefix(&mut self, p: String) {
        if let Some(b) = &self.bar {
            b.set_prefix(p.clone());
        }
        self.prefix = p;
    }

    /// `built`: states constructed; `distinct`: found so far; `done`: checked; `failing`.
    pub fn update(&mut self, built: usize, distinct: usize, done: usize, failing: usize) {
        let secs = self.start.elapsed().as_secs_f64();
        let rate = if secs > 0.0 { done as f64 / secs } else { 0.0 };
        let left = distinct.saturating_sub(done);
        let eta = if rate > 0.0 {
            format!("{:.0} s", left as f64 / rate)
        } else {
            "?".into()
        };
        if let Some(b) = &self.bar {
            b.set_length(distinct as u64);
            b.set_position(done as u64);
            b.set_message(format!(
                "({built} built), {failing} failing, {rate:.1}/s, ETA {eta} for those found"
            ));
        } else if self.plain && self.last_line.elapsed() >= Duration::from_secs(10) {
            self.last_line = Instant::now();
            eprintln!("intact: {}: {done}/{distinct} states checked ({built} built), {failing} failing, {rate:.1} states/s", self.prefix);
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
