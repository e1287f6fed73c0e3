//! What a recording learns besides the logical operations: how the workload ended and the
//! system calls the model cannot express. The converter finds them; the bundle keeps them.

use crate::frame::Frame;
use serde::{Deserialize, Serialize};

/// A system call the model cannot express, touching the recorded directory.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Unsupported {
    pub syscall: String,
    pub reason: String,
    pub count: u64,
    pub first_line: usize,
    pub first_path: Option<String>,
    pub first_stack: Vec<Frame>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum TaskExit {
    Exited { code: i32 },
    Killed { signal: String },
}
