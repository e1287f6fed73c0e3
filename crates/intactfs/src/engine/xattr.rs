//! The extended-attribute calls of the block engine ([`ExtAttrs`]): an inode's attributes
//! are part of its metadata, changed by logged operations like any other.

use super::*;

/// The caller's context is its stream (ccfs).
impl<D: BlockDevice> ExtAttrs for Fs<D> {
    /// Sets extended attribute `name`, as `mode` allows (EEXIST, ENODATA).
    fn setxattr(
        &mut self,
        s: StreamId,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        mode: XattrMode,
    ) -> Result<()> {
        self.writable()?;
        let n = self.node(ino)?;
        intactfs_types::check_xattr(name, value)?;
        mode.check(n.xattrs.contains_key(name))?;
        if !xattr_fits(&n.xattrs, name, value.len()) {
            return Err(FsError::NoSpace(format!(
                "extended attributes of one inode are limited to {XATTR_TOTAL_MAX} bytes"
            )));
        }
        self.meta_room((name.len() + value.len()) as u64 + 64)?;
        self.log_xattr(s, ino, name, Some(value.to_vec()))
    }

    fn getxattr(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>> {
        self.usable()?;
        self.node(ino)?
            .xattrs
            .get(name)
            .cloned()
            .ok_or(FsError::NoData)
    }

    fn listxattr(&self, ino: Ino) -> Result<Vec<Vec<u8>>> {
        self.usable()?;
        Ok(self.node(ino)?.xattrs.keys().cloned().collect())
    }

    fn removexattr(&mut self, s: StreamId, ino: Ino, name: &[u8]) -> Result<()> {
        self.writable()?;
        if !self.node(ino)?.xattrs.contains_key(name) {
            return Err(FsError::NoData);
        }
        self.log_xattr(s, ino, name, None)
    }
}

impl<D: BlockDevice> Fs<D> {
    /// Logs attribute `name` of `ino` set to `value` (None: removed) in stream `s`.
    fn log_xattr(
        &mut self,
        s: StreamId,
        ino: Ino,
        name: &[u8],
        value: Option<Vec<u8>>,
    ) -> Result<()> {
        let ctime = self.now();
        let op = LogOp::SetXattr {
            ino,
            name: name.to_vec(),
            value,
            ctime,
        };
        self.log(s, op, &[Key::Ino(ino)], &[])?;
        self.count_call(s);
        Ok(())
    }
}
