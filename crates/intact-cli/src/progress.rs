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

/// The pipeline reports its progress here.
impl intact_pipeline::Progress for Progress {
    fn apm_started(&mut self, apm: &str) {
        self.set_prefix(apm.to_string());
    }
    fn update(&mut self, built: usize, distinct: usize, done: usize, failing: usize) {
        Self::update(self, built, distinct, done, failing);
    }
    fn finish(&mut self) {
        Self::finish(self);
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

/// Progress of `intact record`: the system calls strace has written to the raw trace so
/// far (stack lines, ` > …`, not counted) and the time, on one updating line on a terminal,
/// or a plain line every 10 seconds otherwise. Stops (and clears its line) when dropped.
pub struct TraceWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TraceWatch {
    pub fn start(raw: std::path::PathBuf) -> TraceWatch {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || watch_trace(&raw, &flag));
        TraceWatch {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for TraceWatch {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Calls (lines that are not stack frames) in `bytes`, given whether the previous chunk
/// ended a line; returns the count and whether this chunk ends one.
fn count_calls(bytes: &[u8], at_line_start: bool) -> (usize, bool) {
    let mut calls = 0usize;
    let mut start = at_line_start;
    for (i, &b) in bytes.iter().enumerate() {
        if start && !bytes[i..].starts_with(b" > ") && b != b'\n' {
            calls += 1;
        }
        start = b == b'\n';
    }
    (calls, start)
}

fn watch_trace(raw: &std::path::Path, stop: &std::sync::atomic::AtomicBool) {
    use std::io::{Read, Write};
    let terminal = std::io::stderr().is_terminal();
    let (started, mut last_line) = (Instant::now(), Instant::now());
    let (mut calls, mut at_start, mut file) = (0usize, true, None);
    let mut buf = vec![0u8; 1 << 16];
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(250));
        if file.is_none() {
            file = std::fs::File::open(raw).ok();
        }
        // A chunk boundary inside " > " would miscount a line; the count is a progress
        // figure, not a result, so that is acceptable.
        while let Some(Ok(n @ 1..)) = file.as_mut().map(|f| f.read(&mut buf)) {
            let (c, s) = count_calls(&buf[..n], at_start);
            (calls, at_start) = (calls + c, s);
        }
        let secs = started.elapsed().as_secs();
        if terminal {
            eprint!("\rintact: recording: {calls} system calls traced, {secs} s ");
            let _ = std::io::stderr().flush();
        } else if last_line.elapsed() >= Duration::from_secs(10) {
            last_line = Instant::now();
            eprintln!("intact: recording: {calls} system calls traced, {secs} s");
        }
    }
    if terminal {
        eprint!("\r\x1b[K");
    }
}

#[cfg(test)]
mod trace_tests {
    #[test]
    fn stack_lines_are_not_calls() {
        let chunk = b"123 openat(AT_FDCWD, \"a\") = 3\n > /lib/libc.so.6(open+0x1) [0x1]\n123 write(3, \"x\", 1) = 1\n124 clo";
        assert_eq!(super::count_calls(chunk, true), (3, false));
        // The rest of a line already counted is not counted again.
        assert_eq!(super::count_calls(b"se(3) = 0\n", false), (0, true));
    }
}
