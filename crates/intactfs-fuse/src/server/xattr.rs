//! Extended attributes in the user, trusted and security namespaces (the kernel checks who
//! may touch which). system.* holds POSIX ACLs, which the kernel would expect us to
//! enforce: refused, so that no one believes an ACL protects a file.

use super::{errno, Served, Server, Who};
use fuser::{Errno, ReplyXattr};
use intactfs_types::{Ino, XattrMode};

fn xattr_name(name: &[u8]) -> Result<&[u8], Errno> {
    if name.starts_with(b"system.") {
        return Err(Errno::from_i32(libc::EOPNOTSUPP));
    }
    Ok(name)
}

/// getxattr/listxattr: size 0 asks for the length; a smaller buffer is ERANGE.
pub(crate) fn sized(r: Result<Vec<u8>, Errno>, size: u32, reply: ReplyXattr) {
    match r {
        Ok(v) if size == 0 => reply.size(v.len() as u32),
        Ok(v) if v.len() > size as usize => reply.error(Errno::ERANGE),
        Ok(v) => reply.data(&v),
        Err(e) => reply.error(e),
    }
}

impl<E: Served> Server<E> {
    /// ENOSYS when the mount does not serve extended attributes (the kernel stops asking).
    fn xattr_on(&self) -> Result<(), Errno> {
        if self.xattr {
            Ok(())
        } else {
            Err(Errno::ENOSYS)
        }
    }

    pub(crate) fn setxattr_call(
        &self,
        who: &Who,
        ino: Ino,
        name: &[u8],
        value: &[u8],
        flags: i32,
    ) -> Result<(), Errno> {
        self.xattr_on()?;
        let name = xattr_name(name)?;
        let (mut st, c) = self.begin(who, &[ino])?;
        let mode = XattrMode::from_flags(
            flags & libc::XATTR_CREATE != 0,
            flags & libc::XATTR_REPLACE != 0,
        );
        st.fs()?
            .setxattr(c, ino, name, value, mode)
            .map_err(|e| errno(&e))?;
        E::changed(&mut st, c, &[ino], &[]);
        Ok(())
    }

    pub(crate) fn getxattr_call(&self, ino: Ino, name: &[u8]) -> Result<Vec<u8>, Errno> {
        self.xattr_on()?;
        let name = xattr_name(name)?;
        self.read()?
            .fs_ref()?
            .getxattr(ino, name)
            .map_err(|e| errno(&e))
    }

    /// The names, each ended by a NUL.
    pub(crate) fn listxattr_call(&self, ino: Ino) -> Result<Vec<u8>, Errno> {
        self.xattr_on()?;
        let names = self
            .read()?
            .fs_ref()?
            .listxattr(ino)
            .map_err(|e| errno(&e))?;
        Ok(names
            .into_iter()
            .flat_map(|mut n| {
                n.push(0);
                n
            })
            .collect())
    }

    pub(crate) fn removexattr_call(&self, who: &Who, ino: Ino, name: &[u8]) -> Result<(), Errno> {
        self.xattr_on()?;
        let name = xattr_name(name)?;
        let (mut st, c) = self.begin(who, &[ino])?;
        st.fs()?.removexattr(c, ino, name).map_err(|e| errno(&e))?;
        E::changed(&mut st, c, &[ino], &[]);
        Ok(())
    }
}
