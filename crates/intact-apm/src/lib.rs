//! Abstract persistence models (thesis 004 §3.2, Tables 3.3–3.5): what a file system may
//! leave on disk after a crash, as micro-operations and ordering constraints.
//!
//! - [`spec`]: the APM language (TOML) and the built-in APMs.
//! - [`program`]: an APM applied to a workload's logical operations.
//! - [`preds`]: a unit's predecessor set, as its longest run of units and bit sets around it.

pub mod preds;
pub mod program;
pub mod spec;

pub use preds::Preds;
pub use program::{CallGroup, Micro, MicroOp, Program, ProgramError};
pub use spec::{About, Apm, ApmError, Class, ModelKind, When, BUILTINS};
