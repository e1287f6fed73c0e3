//! Progress of a long `intact check`, per APM: on a terminal a bar line (states checked of
//! those found so far under this APM, failing, rate, an estimate of the time left for the
//! states found so far — exploration may still find more); otherwise a plain line every 10
//! seconds with the same figures, so logs of CI runs show it too.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    plain: bool,
    start: Instant,
    last_line: Instant,
    prefix: String,
    /// Totals at the start of the current APM (the caller's counters run across APMs).
    base: Totals,
    /// Totals at the last update.
    last: Totals,
    /// (checked, found) of the current APM as last shown.
    shown: (usize, usize),
}

#[derive(Clone, Copy, Default)]
struct Totals {
    built: usize,
    distinct: usize,
    done: usize,
    failing: usize,
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
            base: Totals::default(),
            last: Totals::default(),
            shown: (0, 0),
        }
    }

    /// A new APM starts: its counts and its clock start from zero.
    pub fn set_prefix(&mut self, p: String) {
        if let Some(b) = &self.bar {
            b.set_prefix(p.clone());
            b.reset_elapsed();
        }
        self.prefix = p;
        self.base = self.last;
        self.start = Instant::now();
    }

    /// `built`: states constructed; `distinct`: found so far; `done`: checked; `failing`.
    pub fn update(&mut self, built: usize, distinct: usize, done: usize, failing: usize) {
        let now = Totals {
            built,
            distinct,
            done,
            failing,
        };
        assert!(done <= distinct, "more states checked than found");
        assert!(now.done >= self.base.done && now.distinct >= self.base.distinct);
        self.last = now;
        let built = built - self.base.built;
        let distinct = distinct - self.base.distinct;
        let done = done - self.base.done;
        let failing = failing.saturating_sub(self.base.failing);
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
            eprintln!("intact: {}: {done}/{distinct} states checked ({built} built), {failing} failing, {rate:.1} states/s, about {eta} left for those found", self.prefix);
        }
        self.shown = (done, distinct);
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The caller's counters run across APMs; what is shown starts again at each APM.
    #[test]
    fn counts_are_per_apm() {
        let mut p = Progress::new(true);
        p.set_prefix("APM default".into());
        p.update(100, 60, 60, 5);
        assert_eq!(p.shown, (60, 60));
        p.set_prefix("APM ext4-o".into());
        p.update(130, 70, 65, 6);
        assert_eq!(p.shown, (5, 10));
    }
}
