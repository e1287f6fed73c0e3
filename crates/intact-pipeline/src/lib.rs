//! The explorer's pipeline as a library (design brief, "The explorer's data flow"): the
//! `intact` command, Dask workers and tests call it; it parses no arguments and prints
//! nothing itself.
//!
//! - [`record`]: snapshot a directory, trace a workload, convert the trace, write and
//!   self-check a bundle;
//! - [`check`]: explore a bundle's crash states under APMs, run the checker on each
//!   distinct state, build the report;
//! - [`units`]: the same split into work units for other machines (`--emit-states`,
//!   `check-unit`, `--from-verdicts`, Dask); [`serve`]: `check-unit --serve`, many units
//!   through one process.
//!
//! What a caller must provide: progress display through [`Progress`] and
//! [`record::Observer`], and a stop request through [`interrupt`] (e.g. from a Ctrl-C
//! handler). Errors are [`Error`] values whose [`Kind`] the caller maps to exit codes.

pub mod check;
pub mod options;
pub mod record;
mod seen;
pub mod serve;
pub mod units;
pub mod view;

use std::sync::atomic::{AtomicBool, Ordering};

/// What kind of failure an [`Error`] is; the `intact` command maps it to an exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Bad input: arguments, bundle, APM, checker, paths (exit 2).
    Input,
    /// intact's own failure (exit 3).
    Internal,
    /// Stopped by [`interrupt`] before a result (exit 130).
    Interrupted,
}

/// A failure of a pipeline stage, with what failed and on which input.
#[derive(Debug)]
pub struct Error {
    pub kind: Kind,
    pub message: String,
}

impl Error {
    pub fn input(message: impl Into<String>) -> Error {
        Error {
            kind: Kind::Input,
            message: message.into(),
        }
    }
    pub fn internal(message: impl Into<String>) -> Error {
        Error {
            kind: Kind::Internal,
            message: message.into(),
        }
    }
    pub fn interrupted(message: impl Into<String>) -> Error {
        Error {
            kind: Kind::Interrupted,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Asks every running stage to stop at its next check (the workload and checkers get the
/// terminal's signal themselves; the pipeline stops submitting, cleans up, returns
/// [`Kind::Interrupted`]). Safe to call from a signal handler's thread.
pub fn interrupt() {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Whether [`interrupt`] was called.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Progress of a check, shown by the caller. Counts run across APMs.
pub trait Progress {
    /// The exploration of one APM starts.
    fn apm_started(&mut self, _apm: &str) {}
    /// States built, distinct states found, distinct states with a verdict, failing.
    fn update(&mut self, _built: usize, _distinct: usize, _done: usize, _failing: usize) {}
    /// Exploration and checking are over.
    fn finish(&mut self) {}
}

/// No progress display.
pub struct Silent;
impl Progress for Silent {}
