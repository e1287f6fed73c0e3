//! The system calls of one family, replayed for `Conv::dispatch`: the fd table (closing, duplicating, flags, offsets).

use super::*;

impl Conv<'_> {
    /// Replays "close_range"
    pub(super) fn sys_close_range(
        &mut self,
        call: &Call,
        _idx: usize,
        task: &Task,
        _ret: i64,
    ) -> Result<(), Fail> {
        let lo = int_arg(call, 0)? as u64;
        let hi = call
            .args
            .get(1)
            .and_then(|a| a.as_int())
            .map(|v| v as u64)
            .unwrap_or(u64::MAX);
        let cloexec = call
            .args
            .get(2)
            .is_some_and(|a| has(a, "CLOSE_RANGE_CLOEXEC"));
        let mut fds = task.fds.borrow_mut();
        if cloexec {
            for (fd, f) in fds.iter_mut() {
                if (*fd as u64) >= lo && (*fd as u64) <= hi {
                    f.cloexec = true;
                }
            }
        } else {
            fds.retain(|fd, _| (*fd as u64) < lo || (*fd as u64) > hi);
        }
        Ok(())
    }

    /// Replays "dup" | "dup2" | "dup3"
    pub(super) fn sys_dup(
        &mut self,
        call: &Call,
        _idx: usize,
        task: &Task,
        ret: i64,
    ) -> Result<(), Fail> {
        let name = call.name.as_str();
        if let Some(of) = self.fd(call, task, &call.args[0]) {
            let cloexec = name == "dup3" && call.args.get(2).is_some_and(|a| has(a, "O_CLOEXEC"));
            task.fds.borrow_mut().insert(ret, Fd { of, cloexec });
        }
        Ok(())
    }

    /// Replays "fcntl"
    pub(super) fn sys_fcntl(
        &mut self,
        call: &Call,
        _idx: usize,
        task: &Task,
        ret: i64,
    ) -> Result<(), Fail> {
        let cmd = call
            .args
            .get(1)
            .map(|a| a.flags().join("|"))
            .unwrap_or_default();
        match cmd.as_str() {
            "F_DUPFD" | "F_DUPFD_CLOEXEC" => {
                if let Some(of) = self.fd(call, task, &call.args[0]) {
                    task.fds.borrow_mut().insert(
                        ret,
                        Fd {
                            of,
                            cloexec: cmd == "F_DUPFD_CLOEXEC",
                        },
                    );
                }
            }
            "F_SETFL" => {
                if let Some(of) = self.fd(call, task, &call.args[0]) {
                    let fl = call.args.get(2).cloned().unwrap_or(Arg::Int(0));
                    of.borrow_mut().append = has(&fl, "O_APPEND");
                }
            }
            "F_SETFD" => {
                let fd = int_arg(call, 0)?;
                let cloexec = call.args.get(2).is_some_and(|a| has(a, "FD_CLOEXEC"));
                if let Some(f) = task.fds.borrow_mut().get_mut(&fd) {
                    f.cloexec = cloexec;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Replays "lseek"
    pub(super) fn sys_lseek(
        &mut self,
        call: &Call,
        _idx: usize,
        task: &Task,
        ret: i64,
    ) -> Result<(), Fail> {
        let offset = u64::try_from(ret)
            .map_err(|_| Fail::Bad(format!("lseek returned a negative offset {ret}")))?;
        if let Some(of) = self.fd(call, task, &call.args[0]) {
            of.borrow_mut().offset = offset;
        }
        Ok(())
    }

    /// Replays "read" | "readv"
    pub(super) fn sys_read(
        &mut self,
        call: &Call,
        _idx: usize,
        task: &Task,
        ret: i64,
    ) -> Result<(), Fail> {
        if let Some(of) = self.fd(call, task, &call.args[0]) {
            let mut of = of.borrow_mut();
            of.offset = of.offset.saturating_add(ret as u64);
        }
        Ok(())
    }
}
