//! The system calls of one family, replayed for `Conv::dispatch`: files and directories in the namespace (unlink, rmdir, mkdir, symlink, mknod).

use super::*;

impl Conv<'_> {
    /// Replays "unlink" | "unlinkat" | "rmdir"
    pub(super) fn sys_unlink(
        &mut self,
        call: &Call,
        idx: usize,
        task: &Task,
        _ret: i64,
    ) -> Result<(), Fail> {
        let name = call.name.as_str();
        let res = self.path_arg(call, task, 0, 1, false)?;
        let dir_op = name == "rmdir"
            || name == "unlinkat" && call.args.get(2).is_some_and(|a| has(a, "AT_REMOVEDIR"));
        if let Res::In {
            parent,
            name: n,
            target,
        } = res
        {
            let inode =
                target.ok_or_else(|| format!("{n:?} does not exist in the recorded state"))?;
            let path = Some(self.join(parent, &n));
            let op = if dir_op {
                LogicalOp::Rmdir {
                    dir: parent,
                    name: n,
                    inode,
                }
            } else {
                let lc = self
                    .state
                    .get(inode)
                    .map(|i| i.nlink)
                    .unwrap_or(1)
                    .saturating_sub(1);
                LogicalOp::Unlink {
                    dir: parent,
                    name: n,
                    inode,
                    link_count: lc,
                }
            };
            self.emit(call, idx, task, op, path, None)?;
        }
        Ok(())
    }

    /// Replays "mkdir" | "mkdirat"
    pub(super) fn sys_mkdir(
        &mut self,
        call: &Call,
        idx: usize,
        task: &Task,
        _ret: i64,
    ) -> Result<(), Fail> {
        self.new_name(call, idx, task, (0, 1), |dir, name, inode| {
            LogicalOp::Mkdir { dir, name, inode }
        })
    }

    /// Replays "symlink" | "symlinkat"
    pub(super) fn sys_symlink(
        &mut self,
        call: &Call,
        idx: usize,
        task: &Task,
        _ret: i64,
    ) -> Result<(), Fail> {
        let target = str_arg(call, 0)?;
        self.new_name(call, idx, task, (1, 2), |dir, name, inode| {
            LogicalOp::Symlink {
                dir,
                name,
                inode,
                target,
            }
        })
    }

    /// A call that makes a new inode under a name (its dirfd and path at `args`): emits
    /// `op(parent, name, new inode)` when the name is inside the recorded directory.
    fn new_name(
        &mut self,
        call: &Call,
        idx: usize,
        task: &Task,
        args: (usize, usize),
        op: impl FnOnce(InodeId, String, InodeId) -> LogicalOp,
    ) -> Result<(), Fail> {
        if let Res::In {
            parent, name: n, ..
        } = self.path_arg(call, task, args.0, args.1, false)?
        {
            let inode = self.state.alloc_id();
            let path = Some(self.join(parent, &n));
            self.emit(call, idx, task, op(parent, n, inode), path, None)?;
        }
        Ok(())
    }

    /// Replays "mknod" | "mknodat"
    pub(super) fn sys_mknod(
        &mut self,
        call: &Call,
        _idx: usize,
        task: &Task,
        _ret: i64,
    ) -> Result<(), Fail> {
        if let Res::In {
            parent, name: n, ..
        } = self.path_arg(call, task, 0, 1, false)?
        {
            let p = self.join(parent, &n);
            self.unsupported(call, task, "special files are not modelled", Some(p));
        }
        Ok(())
    }
}
