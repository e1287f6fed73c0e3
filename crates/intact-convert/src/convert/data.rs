//! The system calls of one family, replayed for `Conv::dispatch`: file data beyond writes and copies (truncation, splice).

use super::*;

impl Conv<'_> {
    /// Replays "truncate" | "ftruncate"
    pub(super) fn sys_truncate(
        &mut self,
        call: &Call,
        idx: usize,
        task: &Task,
        _ret: i64,
    ) -> Result<(), Fail> {
        let name = call.name.as_str();
        let len = size_arg(call, 1, "the new size").map_err(Fail::Bad)?;
        range_end(len, 0).map_err(Fail::Bad)?;
        let inode = if name == "truncate" {
            match self.resolve_cwd(task, &str_arg(call, 0)?, true)? {
                Res::In {
                    target: Some(t), ..
                } => Some(t),
                _ => None,
            }
        } else {
            match self
                .fd(call, task, &call.args[0])
                .map(|o| o.borrow().target.clone())
            {
                Some(Target::File(t)) => Some(t),
                _ => None,
            }
        };
        if let Some(inode) = inode {
            let old = self.size(inode);
            if old != len {
                let path = Some(self.path_of_file(inode));
                self.emit(
                    call,
                    idx,
                    task,
                    LogicalOp::Truncate {
                        inode,
                        old_size: old,
                        new_size: len,
                    },
                    path,
                    None,
                )?;
            }
        }
        Ok(())
    }

    /// Replays "splice"
    pub(super) fn sys_splice(
        &mut self,
        call: &Call,
        _idx: usize,
        task: &Task,
        _ret: i64,
    ) -> Result<(), Fail> {
        if let Some(Target::File(t)) = self
            .fd(call, task, &call.args[2])
            .map(|o| o.borrow().target.clone())
        {
            let p = self.path_of_file(t);
            self.unsupported(
                call,
                task,
                "splice into a file: the spliced bytes are not visible to the tracer",
                Some(p),
            );
        }
        Ok(())
    }
}
