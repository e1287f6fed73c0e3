//! The system calls of one family, replayed for `Conv::dispatch`: process state (working directory, execve).

use super::*;

impl Conv<'_> {
    /// Replays "chdir" | "fchdir"
    pub(super) fn sys_chdir(
        &mut self,
        call: &Call,
        _idx: usize,
        task: &Task,
        _ret: i64,
    ) -> Result<(), Fail> {
        let name = call.name.as_str();
        let loc = if name == "chdir" {
            match self.resolve_cwd(task, &str_arg(call, 0)?, true)? {
                Res::Dir(d)
                | Res::In {
                    target: Some(d), ..
                } => Loc::In(d),
                Res::Out(p) => Loc::Out(p),
                Res::In { .. } => {
                    return Err("chdir into a directory missing from the recorded state".into())
                }
            }
        } else {
            match self
                .fd(call, task, &call.args[0])
                .map(|o| o.borrow().target.clone())
            {
                Some(Target::Dir(d)) => Loc::In(d),
                Some(Target::Out(p)) => Loc::Out(PathBuf::from(p)),
                _ => return Err("fchdir to an fd that is not a directory".into()),
            }
        };
        *task.cwd.borrow_mut() = loc;
        Ok(())
    }

    /// Replays "execve" | "execveat"
    pub(super) fn sys_execve(
        &mut self,
        call: &Call,
        _idx: usize,
        task: &Task,
        _ret: i64,
    ) -> Result<(), Fail> {
        // The new program keeps the fd table minus close-on-exec fds; memory is new.
        let kept: FdTable = task
            .fds
            .borrow()
            .iter()
            .filter(|(_, f)| !f.cloexec)
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        if let Some(t) = self.tasks.get_mut(&call.tid) {
            t.fds = Rc::new(RefCell::new(kept));
            t.maps = Rc::new(RefCell::new(Vec::new()));
            t.source_stack.clear();
        }
        Ok(())
    }
}
