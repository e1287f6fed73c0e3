//! Shared by the APM tests: a logical operation as the converter would give it.

use intact_model::op::{LogicalOp, Op};

/// Operation `id`, its own system call, in one process and stream 0.
pub fn op(id: usize, op: LogicalOp) -> Op {
    Op {
        id,
        call: id,
        pid: 1,
        tid: 1,
        syscall: "x".into(),
        op,
        path: None,
        path2: None,
        stack: vec![],
        loc: None,
        stream: 0,
    }
}
