//! The system calls of one family, replayed for `Conv::dispatch`: durability (fsync, fdatasync, sync_file_range, syncfs, sync, msync).

use super::*;

impl Conv<'_> {
    /// Replays "syncfs": the whole file system, when the fd is on the recorded directory's.
    pub(super) fn sys_syncfs(
        &mut self,
        call: &Call,
        idx: usize,
        task: &Task,
        _ret: i64,
    ) -> Result<(), Fail> {
        let target = self
            .fd(call, task, &call.args[0])
            .map(|o| o.borrow().target.clone());
        let same_fs = match &target {
            Some(Target::File(_)) | Some(Target::Dir(_)) => true,
            Some(Target::Out(p)) => {
                use std::os::unix::fs::MetadataExt;
                std::fs::metadata(p).ok().map(|m| m.dev()) == self.root_dev
            }
            None => false,
        };
        if same_fs {
            self.emit(
                call,
                idx,
                task,
                LogicalOp::Sync {
                    inode: None,
                    how: SyncKind::Syncfs,
                    range: None,
                },
                None,
                None,
            )?;
        }
        Ok(())
    }

    /// Replays "fsync" | "fdatasync" | "sync_file_range"
    pub(super) fn sys_fsync(
        &mut self,
        call: &Call,
        idx: usize,
        task: &Task,
        _ret: i64,
    ) -> Result<(), Fail> {
        let name = call.name.as_str();
        let target = self
            .fd(call, task, &call.args[0])
            .map(|o| o.borrow().target.clone());
        let inode = match target {
            Some(Target::File(t)) | Some(Target::Dir(t)) => t,
            _ => return Ok(()),
        };
        let (how, range) = match name {
            "fsync" => (SyncKind::Fsync, None),
            "fdatasync" => (SyncKind::Fdatasync, None),
            _ => {
                let off = size_arg(call, 1, "the offset").map_err(Fail::Bad)?;
                let n = size_arg(call, 2, "the length").map_err(Fail::Bad)?;
                range_end(off, n).map_err(Fail::Bad)?;
                let n = if n == 0 {
                    self.size(inode).saturating_sub(off)
                } else {
                    n
                };
                (SyncKind::SyncFileRange, Some((off, n)))
            }
        };
        let path = Some(self.display_path(inode));
        self.emit(
            call,
            idx,
            task,
            LogicalOp::Sync {
                inode: Some(inode),
                how,
                range,
            },
            path,
            None,
        )?;
        Ok(())
    }

    /// Replays "sync"
    pub(super) fn sys_sync(
        &mut self,
        call: &Call,
        idx: usize,
        task: &Task,
        _ret: i64,
    ) -> Result<(), Fail> {
        self.emit(
            call,
            idx,
            task,
            LogicalOp::Sync {
                inode: None,
                how: SyncKind::Sync,
                range: None,
            },
            None,
            None,
        )?;
        Ok(())
    }

    /// Replays "msync"
    pub(super) fn sys_msync(
        &mut self,
        call: &Call,
        idx: usize,
        task: &Task,
        _ret: i64,
    ) -> Result<(), Fail> {
        let (addr, end) = address_range(call, 0, 1).map_err(Fail::Bad)?;
        if call.args.get(2).is_some_and(|a| has(a, "MS_SYNC")) {
            let maps = task.maps.borrow().clone();
            for m in maps
                .iter()
                .filter(|m| m.addr < end && addr < m.addr + m.len)
            {
                let s = addr.max(m.addr);
                let e = end.min(m.addr + m.len);
                let path = Some(self.path_of_file(m.inode));
                let range = Some((m.file_off + (s - m.addr), e - s));
                self.emit(
                    call,
                    idx,
                    task,
                    LogicalOp::Sync {
                        inode: Some(m.inode),
                        how: SyncKind::Msync,
                        range,
                    },
                    path,
                    None,
                )?;
            }
        }
        Ok(())
    }
}
