//! Converts system-call events into logical operations (thesis 004 §3.2, Table 3.2) by
//! replaying the trace: per-task fd tables (shared or copied per clone flags, CLOEXEC on
//! execve), working directories, directory fds, open-file offsets and O_APPEND, shared
//! file mappings, and the logical file-system state itself, which every emitted operation
//! is applied to (so sizes, link counts and inode identities are always current).

mod args;
mod convert;
mod input;
mod resolve;

pub use args::MAX_FILE_SIZE_BYTES;
pub use convert::{convert, convert_into, Conversion, ConvertError, ConvertOptions};
pub use input::{RawTraceFile, TraceInput};
// Defined with the model (the bundle keeps them without depending on the converter).
pub use intact_model::{TaskExit, Unsupported};
