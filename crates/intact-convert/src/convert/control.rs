//! The system calls of one family, replayed for `Conv::dispatch`: control calls (ioctl: FIOCLEX, intactfs STREAMSYNC, reflinks; io_uring).

use super::*;

impl Conv<'_> {
    /// Replays "ioctl"
    pub(super) fn sys_ioctl(
        &mut self,
        call: &Call,
        idx: usize,
        task: &Task,
        _ret: i64,
    ) -> Result<(), Fail> {
        let req = call
            .args
            .get(1)
            .map(|a| a.flags().join("|"))
            .unwrap_or_default();
        match req.as_str() {
            "FIOCLEX" | "FIONCLEX" => {
                let fd = int_arg(call, 0)?;
                if let Some(f) = task.fds.borrow_mut().get_mut(&fd) {
                    f.cloexec = req == "FIOCLEX";
                }
            }
            r if is_streamsync(r) => {
                // intactfs STREAMSYNC, `_IO(0xCC, 3)`: the caller's stream is durable.
                self.emit(
                    call,
                    idx,
                    task,
                    LogicalOp::Sync {
                        inode: None,
                        how: SyncKind::StreamSync,
                        range: None,
                    },
                    None,
                    None,
                )?;
            }
            r if r.starts_with("FICLONE") || r.starts_with("FIDEDUPERANGE") => {
                if let Some(Target::File(t)) = self
                    .fd(call, task, &call.args[0])
                    .map(|o| o.borrow().target.clone())
                {
                    let p = self.path_of_file(t);
                    self.unsupported(
                        call,
                        task,
                        "reflink copies (FICLONE) are not modelled",
                        Some(p),
                    );
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Replays "io_uring_setup"
    pub(super) fn sys_io_uring_setup(
        &mut self,
        call: &Call,
        _idx: usize,
        task: &Task,
        _ret: i64,
    ) -> Result<(), Fail> {
        self.unsupported(
            call,
            task,
            "io_uring submissions are not visible to the tracer",
            None,
        );
        Ok(())
    }
}
