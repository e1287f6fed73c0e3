//! What the converter reads: a trace's events in order, in two passes (first who created
//! whom, then everything). A [`Trace`] parsed in memory, or a raw trace file parsed as it
//! is read, so that a million-call trace converts in memory that does not grow with it
//! (issue 29).

use crate::ConvertError;
use intact_trace::{Event, EventReader, Trace, TraceEnd};
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

/// A source of trace events that can be read from the start more than once.
pub trait TraceInput {
    /// Hands every event to `visit`, in order; returns what the pass left besides them.
    /// With `only`, calls of other names may be left out (exits and kills never are). An
    /// error from `visit` stops the pass and is returned.
    fn each_event(
        &self,
        only: Option<&'static [&'static str]>,
        visit: &mut dyn FnMut(&Event) -> Result<(), ConvertError>,
    ) -> Result<TraceEnd, ConvertError>;
}

impl TraceInput for Trace {
    fn each_event(
        &self,
        _only: Option<&'static [&'static str]>,
        visit: &mut dyn FnMut(&Event) -> Result<(), ConvertError>,
    ) -> Result<TraceEnd, ConvertError> {
        for ev in &self.events {
            visit(ev)?;
        }
        Ok(self.end.clone())
    }
}

/// A raw trace file (`strace` output), parsed line by line on every pass.
#[derive(Clone, Debug)]
pub struct RawTraceFile {
    path: PathBuf,
}

impl RawTraceFile {
    pub fn new(path: &Path) -> Self {
        RawTraceFile {
            path: path.to_path_buf(),
        }
    }
}

impl TraceInput for RawTraceFile {
    fn each_event(
        &self,
        only: Option<&'static [&'static str]>,
        visit: &mut dyn FnMut(&Event) -> Result<(), ConvertError>,
    ) -> Result<TraceEnd, ConvertError> {
        let file = File::open(&self.path).map_err(|e| ConvertError::Read {
            path: self.path.display().to_string(),
            message: e.to_string(),
        })?;
        let input = BufReader::with_capacity(1 << 16, file);
        let mut reader = match only {
            Some(names) => EventReader::only(input, names),
            None => EventReader::new(input),
        };
        for ev in reader.by_ref() {
            visit(&ev.map_err(ConvertError::Parse)?)?;
        }
        Ok(reader.finish())
    }
}
