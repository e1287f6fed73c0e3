//! The tracer stage: run a workload under strace with the intact shim preloaded, and
//! parse the raw trace into system-call events.

pub mod marker;
pub mod parse;
pub mod pty;
pub mod reader;
pub mod tracer;

pub use parse::{Arg, Call, Event, ParseError, Ret, Trace};
pub use reader::{parse_trace, EventReader, TraceEnd};
