//! The system calls of one family, replayed for `Conv::dispatch`: shared file mappings (mmap, munmap, mremap; writes through them come from the shim).

use super::*;

impl Conv<'_> {
    /// Replays "mmap"
    pub(super) fn sys_mmap(
        &mut self,
        call: &Call,
        _idx: usize,
        task: &Task,
        ret: i64,
    ) -> Result<(), Fail> {
        let flags = call.args.get(3).cloned().unwrap_or(Arg::Int(0));
        if has(&flags, "MAP_SHARED") || has(&flags, "MAP_SHARED_VALIDATE") {
            if let Some(Target::File(inode)) = call
                .args
                .get(4)
                .and_then(|a| {
                    if a.as_int().unwrap_or(-1) < 0 {
                        None
                    } else {
                        Some(a.clone())
                    }
                })
                .and_then(|a| self.fd(call, task, &a))
                .map(|o| o.borrow().target.clone())
            {
                let len = size_arg(call, 1, "the length").map_err(Fail::Bad)?;
                let file_off = size_arg(call, 5, "the offset").map_err(Fail::Bad)?;
                range_end(file_off, len).map_err(Fail::Bad)?;
                let addr = ret as u64;
                addr.checked_add(len)
                    .ok_or_else(|| Fail::Bad(format!("mapping {addr:#x}+{len} wraps around")))?;
                task.maps.borrow_mut().push(Mapping {
                    addr,
                    len,
                    inode,
                    file_off,
                });
            }
        }
        Ok(())
    }

    /// Replays "munmap"
    pub(super) fn sys_munmap(
        &mut self,
        call: &Call,
        _idx: usize,
        task: &Task,
        _ret: i64,
    ) -> Result<(), Fail> {
        let (addr, end) = address_range(call, 0, 1).map_err(Fail::Bad)?;
        task.maps
            .borrow_mut()
            .retain(|m| !(m.addr < end && addr < m.addr + m.len));
        Ok(())
    }

    /// Replays "mremap"
    pub(super) fn sys_mremap(
        &mut self,
        call: &Call,
        _idx: usize,
        task: &Task,
        ret: i64,
    ) -> Result<(), Fail> {
        let old = int_arg(call, 0)? as u64;
        let new_len = size_arg(call, 2, "the new length").map_err(Fail::Bad)?;
        (ret as u64)
            .checked_add(new_len)
            .ok_or_else(|| Fail::Bad(format!("mapping {ret:#x}+{new_len} wraps around")))?;
        for m in task.maps.borrow_mut().iter_mut() {
            if m.addr == old {
                m.addr = ret as u64;
                m.len = new_len;
            }
        }
        Ok(())
    }
}
