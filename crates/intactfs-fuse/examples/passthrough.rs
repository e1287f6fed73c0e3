//! A passthrough FUSE file system: the baseline of bench/fs/mount.sh, the bare cost of FUSE.
//!
//!   cargo run --release -p intactfs-fuse --example passthrough -- BACKING_DIR MNT [--threads N]
//!       [--no-xattr]
//!
//! Every request is forwarded to the same operation on `BACKING_DIR` (in the benchmarks, a
//! directory of an ext4 loop image), so a program on MNT pays FUSE plus ext4. The fuser
//! configuration is the intactfs mount's (crates/intactfs-fuse/src/mount.rs and fs.rs): 4
//! request threads, one cloned /dev/fuse descriptor per thread, max_write and max_readahead
//! 1 MiB, no writeback cache, FOPEN_KEEP_CACHE on open and create, 1 s entry and attribute
//! TTL (missing names too, as negative entries), `default_permissions`, and as root `allow_other` (with dev, suid). Extended
//! attributes are forwarded, as intactfs keeps them (`--no-xattr`: ENOSYS instead). Like
//! intactfs it answers ENOSYS to POSIX locks (the kernel then keeps locks locally) and
//! implements no copy_file_range.
//!
//! Inodes: the backing inode number is the FUSE inode number (the backing root is 1). A
//! directory the kernel knows is held by an `O_PATH` descriptor until the kernel forgets it
//! (as libfuse's passthrough_ll holds every inode), so it can be renamed or moved freely;
//! any other inode is found again by (parent directory, name), checked against its inode
//! number on use (ESTALE when the name now holds another file), and updated on rename: one
//! descriptor per file would exceed the descriptor limit after a create-heavy run (the kernel
//! forgets inodes only under memory pressure, and the hard limit cannot be raised here).
//! So an unlinked file is still readable and writable through its open handles, but not
//! reachable by inode alone once its attributes expire. Operations use the `*at` calls. An
//! open file's handle is its backing descriptor; fsync and fdatasync forward to fsync and
//! fdatasync. No lock is held while a system call runs, so the four threads work in parallel.
//!
//! SIGINT, SIGTERM and SIGHUP detach the mount (lazily, like `intact fs mount`); the request
//! loop then ends and the program exits 0.

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    IoctlFlags, KernelConfig, LockOwner, MountOption, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyLseek,
    ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, Session, SessionACL, TimeOrNow,
    WriteFlags,
};
use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

// The intactfs mount's request size, cache lifetime and negative entries, by construction.
use intactfs_fuse::block::MAX_WRITE;
use intactfs_fuse::server::{negative_attr, TTL};

enum Node {
    /// A directory, held open (`O_PATH`).
    Dir(Arc<OwnedFd>),
    /// Anything else: a name in a directory the table holds.
    Other { parent: u64, name: CString },
}

struct Inode {
    node: Node,
    nlookup: u64,
}

/// Where an inode is now: a directory descriptor and a name in it ("" for the directory).
struct At {
    fd: Arc<OwnedFd>,
    name: CString,
    dir: bool,
    ino: u64,
}

impl At {
    fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
    fn empty(&self) -> libc::c_int {
        if self.dir {
            libc::AT_EMPTY_PATH
        } else {
            0
        }
    }
}

struct DirHandle {
    fd: OwnedFd,
    entries: Vec<(u64, FileType, Vec<u8>)>,
}

struct Passthrough {
    backing: PathBuf,
    root_ino: u64,
    inodes: Mutex<HashMap<u64, Inode>>,
    dirs: Mutex<HashMap<u64, Arc<DirHandle>>>,
    next_dir: AtomicU64,
    no_xattr: bool,
}

fn err() -> Errno {
    Errno::from_i32(
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO),
    )
}

fn cstr(name: &OsStr) -> Result<CString, Errno> {
    CString::new(name.as_bytes()).map_err(|_| Errno::EINVAL)
}

fn proc_path(fd: RawFd) -> CString {
    CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL")
}

fn check(r: libc::c_int) -> Result<(), Errno> {
    if r < 0 {
        Err(err())
    } else {
        Ok(())
    }
}

fn systime(sec: i64, nsec: i64) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs()) + Duration::from_nanos(nsec as u64)
    }
}

fn kind(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

fn dtype(t: u8) -> FileType {
    match t {
        libc::DT_DIR => FileType::Directory,
        libc::DT_LNK => FileType::Symlink,
        libc::DT_FIFO => FileType::NamedPipe,
        libc::DT_SOCK => FileType::Socket,
        libc::DT_CHR => FileType::CharDevice,
        libc::DT_BLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

fn fstatat(fd: RawFd, name: &CString, flags: libc::c_int) -> Result<libc::stat, Errno> {
    // SAFETY: an all-zero stat is a valid value; fstatat writes it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, C string, and a stat buffer.
    check(unsafe {
        libc::fstatat(
            fd,
            name.as_ptr(),
            &mut st,
            flags | libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    Ok(st)
}

fn fstat(fd: RawFd) -> Result<libc::stat, Errno> {
    fstatat(fd, &CString::default(), libc::AT_EMPTY_PATH)
}

fn timespec(t: Option<TimeOrNow>) -> libc::timespec {
    match t {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(t)) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => libc::timespec {
                tv_sec: d.as_secs() as i64,
                tv_nsec: d.subsec_nanos() as i64,
            },
            Err(e) => {
                let d = e.duration();
                let (mut s, mut n) = (-(d.as_secs() as i64), d.subsec_nanos() as i64);
                if n > 0 {
                    s -= 1;
                    n = 1_000_000_000 - n;
                }
                libc::timespec {
                    tv_sec: s,
                    tv_nsec: n,
                }
            }
        },
    }
}

impl Passthrough {
    fn new(backing: PathBuf) -> std::io::Result<Passthrough> {
        let c = CString::new(backing.as_os_str().as_bytes())?;
        // SAFETY: a valid C string; the descriptor is owned below.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: just opened, owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let st = fstat(fd.as_raw_fd()).map_err(|e| std::io::Error::from_raw_os_error(e.code()))?;
        let mut inodes = HashMap::new();
        inodes.insert(
            1,
            Inode {
                node: Node::Dir(Arc::new(fd)),
                nlookup: 1,
            },
        );
        Ok(Passthrough {
            backing,
            root_ino: st.st_ino,
            inodes: Mutex::new(inodes),
            dirs: Mutex::new(HashMap::new()),
            next_dir: AtomicU64::new(1),
            no_xattr: false,
        })
    }

    /// The FUSE inode number of a backing inode number (the backing root is FUSE's 1).
    fn fuse_ino(&self, st_ino: u64) -> u64 {
        if st_ino == self.root_ino {
            1
        } else {
            st_ino
        }
    }

    fn attr(&self, st: &libc::stat) -> FileAttr {
        FileAttr {
            ino: INodeNo(self.fuse_ino(st.st_ino)),
            size: st.st_size as u64,
            blocks: st.st_blocks as u64,
            atime: systime(st.st_atime, st.st_atime_nsec),
            mtime: systime(st.st_mtime, st.st_mtime_nsec),
            ctime: systime(st.st_ctime, st.st_ctime_nsec),
            crtime: systime(st.st_ctime, st.st_ctime_nsec),
            kind: kind(st.st_mode),
            perm: (st.st_mode & 0o7777) as u16,
            nlink: st.st_nlink as u32,
            uid: st.st_uid,
            gid: st.st_gid,
            rdev: st.st_rdev as u32,
            blksize: st.st_blksize as u32,
            flags: 0,
        }
    }

    /// The descriptor of a directory the kernel knows.
    fn dir(&self, ino: INodeNo) -> Result<Arc<OwnedFd>, Errno> {
        match self.inodes.lock().unwrap().get(&ino.0).map(|i| &i.node) {
            Some(Node::Dir(fd)) => Ok(fd.clone()),
            Some(Node::Other { .. }) => Err(Errno::ENOTDIR),
            None => Err(Errno::ESTALE),
        }
    }

    /// Where inode `ino` is.
    fn at(&self, ino: INodeNo) -> Result<At, Errno> {
        let inodes = self.inodes.lock().unwrap();
        match inodes.get(&ino.0).map(|i| &i.node) {
            Some(Node::Dir(fd)) => Ok(At {
                fd: fd.clone(),
                name: CString::default(),
                dir: true,
                ino: ino.0,
            }),
            Some(Node::Other { parent, name }) => match inodes.get(parent).map(|i| &i.node) {
                Some(Node::Dir(fd)) => Ok(At {
                    fd: fd.clone(),
                    name: name.clone(),
                    dir: false,
                    ino: ino.0,
                }),
                _ => Err(Errno::ESTALE),
            },
            None => Err(Errno::ESTALE),
        }
    }

    /// The attributes of what `at` names, if it is still the same inode.
    fn stat_at(&self, at: &At) -> Result<libc::stat, Errno> {
        let st = fstatat(at.fd(), &at.name, at.empty())?;
        if self.fuse_ino(st.st_ino) != at.ino {
            return Err(Errno::ESTALE);
        }
        Ok(st)
    }

    /// Looks `name` up in directory `parent` and takes one kernel reference on the result.
    fn lookup_at(&self, parent: INodeNo, pfd: RawFd, name: &OsStr) -> Result<FileAttr, Errno> {
        let c = cstr(name)?;
        let mut st = fstatat(pfd, &c, 0)?;
        let mut ino = self.fuse_ino(st.st_ino);
        if let Some(i) = self.inodes.lock().unwrap().get_mut(&ino) {
            // Known: one more reference; a file is now reached by this name.
            i.nlookup += 1;
            if let Node::Other { parent: p, name: n } = &mut i.node {
                (*p, *n) = (parent.0, c);
            }
            return Ok(self.attr(&st));
        }
        let node = if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            // SAFETY: valid descriptor and C string.
            let fd = unsafe {
                libc::openat(
                    pfd,
                    c.as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                )
            };
            if fd < 0 {
                return Err(err());
            }
            // SAFETY: just opened.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            st = fstat(fd.as_raw_fd())?;
            ino = self.fuse_ino(st.st_ino);
            Node::Dir(Arc::new(fd))
        } else {
            Node::Other {
                parent: parent.0,
                name: c,
            }
        };
        let mut inodes = self.inodes.lock().unwrap();
        match inodes.get_mut(&ino) {
            // Another thread got there first: same inode, one more reference.
            Some(i) => i.nlookup += 1,
            None => {
                inodes.insert(ino, Inode { node, nlookup: 1 });
            }
        }
        Ok(self.attr(&st))
    }

    /// A path for the xattr calls (there are no `*at` forms before Linux 6.13) and whether
    /// to follow it: a directory through its descriptor's /proc link (followed), anything
    /// else as that link plus its name (not followed, so a symlink's own attributes).
    fn xattr_path(&self, ino: INodeNo) -> Result<(CString, bool), Errno> {
        let at = self.at(ino)?;
        if at.dir {
            return Ok((proc_path(at.fd()), true));
        }
        self.stat_at(&at)?;
        let mut p = format!("/proc/self/fd/{}/", at.fd()).into_bytes();
        p.extend_from_slice(at.name.as_bytes());
        Ok((CString::new(p).map_err(|_| Errno::EINVAL)?, false))
    }

    /// getxattr/listxattr: size 0 asks for the length; a smaller buffer is ERANGE (the
    /// backing call already answered ERANGE then).
    fn xattr_reply(r: Result<Vec<u8>, Errno>, size: u32, reply: ReplyXattr) {
        match r {
            Ok(b) if size == 0 => reply.size(b.len() as u32),
            Ok(b) => reply.data(&b),
            Err(e) => reply.error(e),
        }
    }

    fn entry(r: Result<FileAttr, Errno>, reply: ReplyEntry) {
        match r {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn empty(r: Result<(), Errno>, reply: ReplyEmpty) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    /// New entries belong to the caller (the daemon runs as root).
    fn chown_to(req: &Request, fd: RawFd, name: Option<&CString>) {
        // SAFETY: geteuid cannot fail.
        if req.uid() == unsafe { libc::geteuid() } && req.gid() == unsafe { libc::getegid() } {
            return;
        }
        // SAFETY: valid descriptor and C strings.
        unsafe {
            match name {
                Some(n) => libc::fchownat(
                    fd,
                    n.as_ptr(),
                    req.uid(),
                    req.gid(),
                    libc::AT_SYMLINK_NOFOLLOW,
                ),
                None => libc::fchown(fd, req.uid(), req.gid()),
            };
        }
    }
}

impl Filesystem for Passthrough {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(MAX_WRITE);
        let _ = config.set_max_readahead(MAX_WRITE);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let r = (|| {
            let p = self.dir(parent)?;
            self.lookup_at(parent, p.as_raw_fd(), name)
        })();
        match r {
            // A negative entry (node 0) cached for TTL, as intactfs answers missing names.
            Err(e) if e == Errno::ENOENT => reply.entry(&TTL, &negative_attr(), Generation(0)),
            r => Self::entry(r, reply),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        if ino.0 == 1 {
            return;
        }
        let mut inodes = self.inodes.lock().unwrap();
        if let Some(i) = inodes.get_mut(&ino.0) {
            i.nlookup = i.nlookup.saturating_sub(nlookup);
            if i.nlookup == 0 {
                inodes.remove(&ino.0);
            }
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let r = (|| match fh {
            Some(fh) => fstat(fh.0 as RawFd),
            None => self.stat_at(&self.at(ino)?),
        })();
        match r {
            Ok(st) => reply.attr(&TTL, &self.attr(&st)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let r = (|| {
            let at = self.at(ino)?;
            let fh = fh.map(|f| f.0 as RawFd);
            if fh.is_none() {
                // Still the same inode under that name?
                self.stat_at(&at)?;
            }
            // A directory by its descriptor's /proc path (chmod, utimes do not take AT_EMPTY_PATH).
            let path = if at.dir {
                proc_path(at.fd())
            } else {
                at.name.clone()
            };
            let base = if at.dir { libc::AT_FDCWD } else { at.fd() };
            // SAFETY (all calls below): valid descriptors and C strings.
            if let Some(m) = mode {
                check(match fh {
                    Some(f) => unsafe { libc::fchmod(f, m & 0o7777) },
                    None => unsafe { libc::fchmodat(base, path.as_ptr(), m & 0o7777, 0) },
                })?;
            }
            if uid.is_some() || gid.is_some() {
                let u = uid.unwrap_or(u32::MAX);
                let g = gid.unwrap_or(u32::MAX);
                check(unsafe {
                    libc::fchownat(
                        at.fd(),
                        at.name.as_ptr(),
                        u,
                        g,
                        at.empty() | libc::AT_SYMLINK_NOFOLLOW,
                    )
                })?;
            }
            if let Some(s) = size {
                check(match fh {
                    Some(f) => unsafe { libc::ftruncate(f, s as i64) },
                    None => {
                        let f = unsafe {
                            libc::openat(
                                base,
                                path.as_ptr(),
                                libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                            )
                        };
                        if f < 0 {
                            -1
                        } else {
                            let r = unsafe { libc::ftruncate(f, s as i64) };
                            let e = std::io::Error::last_os_error();
                            unsafe { libc::close(f) };
                            if r < 0 {
                                return Err(Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO)));
                            }
                            0
                        }
                    }
                })?;
            }
            if atime.is_some() || mtime.is_some() {
                let ts = [timespec(atime), timespec(mtime)];
                check(match fh {
                    Some(f) => unsafe { libc::futimens(f, ts.as_ptr()) },
                    None => unsafe {
                        libc::utimensat(
                            base,
                            path.as_ptr(),
                            ts.as_ptr(),
                            if at.dir { 0 } else { libc::AT_SYMLINK_NOFOLLOW },
                        )
                    },
                })?;
            }
            match fh {
                Some(f) => fstat(f),
                None => self.stat_at(&at),
            }
        })();
        match r {
            Ok(st) => reply.attr(&TTL, &self.attr(&st)),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let r = (|| {
            let at = self.at(ino)?;
            let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
            // SAFETY: valid descriptor, C string and buffer of the given length.
            let n = unsafe {
                libc::readlinkat(
                    at.fd(),
                    at.name.as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if n < 0 {
                return Err(err());
            }
            buf.truncate(n as usize);
            Ok(buf)
        })();
        match r {
            Ok(b) => reply.data(&b),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let r = (|| {
            let p = self.dir(parent)?;
            let c = cstr(name)?;
            // SAFETY: valid descriptor and C string.
            check(unsafe { libc::mknodat(p.as_raw_fd(), c.as_ptr(), mode, rdev as libc::dev_t) })?;
            Self::chown_to(req, p.as_raw_fd(), Some(&c));
            self.lookup_at(parent, p.as_raw_fd(), name)
        })();
        Self::entry(r, reply)
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        let r = (|| {
            let p = self.dir(parent)?;
            let c = cstr(name)?;
            // SAFETY: valid descriptor and C string.
            check(unsafe { libc::mkdirat(p.as_raw_fd(), c.as_ptr(), mode) })?;
            Self::chown_to(req, p.as_raw_fd(), Some(&c));
            self.lookup_at(parent, p.as_raw_fd(), name)
        })();
        Self::entry(r, reply)
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = (|| {
            let p = self.dir(parent)?;
            let c = cstr(name)?;
            // SAFETY: valid descriptor and C string.
            check(unsafe { libc::unlinkat(p.as_raw_fd(), c.as_ptr(), 0) })
        })();
        Self::empty(r, reply)
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let r = (|| {
            let p = self.dir(parent)?;
            let c = cstr(name)?;
            // SAFETY: valid descriptor and C string.
            check(unsafe { libc::unlinkat(p.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) })
        })();
        Self::empty(r, reply)
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let r = (|| {
            let p = self.dir(parent)?;
            let c = cstr(link_name)?;
            let t = cstr(target.as_os_str())?;
            // SAFETY: valid descriptor and C strings.
            check(unsafe { libc::symlinkat(t.as_ptr(), p.as_raw_fd(), c.as_ptr()) })?;
            Self::chown_to(req, p.as_raw_fd(), Some(&c));
            self.lookup_at(parent, p.as_raw_fd(), link_name)
        })();
        Self::entry(r, reply)
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let r = (|| {
            let p = self.dir(parent)?;
            let np = self.dir(newparent)?;
            let (c, nc) = (cstr(name)?, cstr(newname)?);
            let src = fstatat(p.as_raw_fd(), &c, 0)
                .map(|st| self.fuse_ino(st.st_ino))
                .ok();
            let dst = if flags.contains(RenameFlags::RENAME_EXCHANGE) {
                fstatat(np.as_raw_fd(), &nc, 0)
                    .map(|st| self.fuse_ino(st.st_ino))
                    .ok()
            } else {
                None
            };
            // SAFETY: valid descriptors and C strings.
            check(unsafe {
                libc::renameat2(
                    p.as_raw_fd(),
                    c.as_ptr(),
                    np.as_raw_fd(),
                    nc.as_ptr(),
                    flags.bits(),
                )
            })?;
            // Files are found by name: follow them (directories are held by descriptor).
            let mut inodes = self.inodes.lock().unwrap();
            for (ino, to) in [(src, (newparent.0, nc)), (dst, (parent.0, c))] {
                if let Some(Node::Other { parent: p, name: n }) =
                    ino.and_then(|i| inodes.get_mut(&i)).map(|i| &mut i.node)
                {
                    (*p, *n) = to;
                }
            }
            Ok(())
        })();
        Self::empty(r, reply)
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let r = (|| {
            let at = self.at(ino)?;
            let np = self.dir(newparent)?;
            let nc = cstr(newname)?;
            self.stat_at(&at)?;
            // SAFETY: valid descriptors and C strings.
            check(unsafe {
                libc::linkat(
                    at.fd(),
                    at.name.as_ptr(),
                    np.as_raw_fd(),
                    nc.as_ptr(),
                    at.empty(),
                )
            })?;
            self.lookup_at(newparent, np.as_raw_fd(), newname)
        })();
        Self::entry(r, reply)
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let r = (|| {
            let at = self.at(ino)?;
            let f = (flags.0 & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY))
                | libc::O_NOFOLLOW
                | libc::O_CLOEXEC;
            let (base, path) = if at.dir {
                (libc::AT_FDCWD, proc_path(at.fd()))
            } else {
                (at.fd(), at.name.clone())
            };
            // SAFETY: valid descriptor and C string; the descriptor becomes the file handle,
            // closed at release.
            let h = unsafe { libc::openat(base, path.as_ptr(), f) };
            if h < 0 {
                return Err(err());
            }
            // The same inode the kernel means?
            if fstat(h).map(|st| self.fuse_ino(st.st_ino)) != Ok(at.ino) {
                // SAFETY: ours.
                unsafe { libc::close(h) };
                return Err(Errno::ESTALE);
            }
            Ok(h)
        })();
        match r {
            Ok(h) => reply.opened(FileHandle(h as u64), FopenFlags::FOPEN_KEEP_CACHE),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut buf = vec![0u8; size as usize];
        let mut done = 0usize;
        while done < buf.len() {
            // SAFETY: the handle is an open descriptor; the buffer has room for the rest.
            let n = unsafe {
                libc::pread(
                    fh.0 as RawFd,
                    buf[done..].as_mut_ptr().cast(),
                    buf.len() - done,
                    (offset + done as u64) as i64,
                )
            };
            if n < 0 {
                let e = err();
                if e == Errno::EINTR {
                    continue;
                }
                return reply.error(e);
            }
            if n == 0 {
                break;
            }
            done += n as usize;
        }
        reply.data(&buf[..done])
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _wf: WriteFlags,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut done = 0usize;
        while done < data.len() {
            // SAFETY: the handle is an open descriptor; the slice is valid.
            let n = unsafe {
                libc::pwrite(
                    fh.0 as RawFd,
                    data[done..].as_ptr().cast(),
                    data.len() - done,
                    (offset + done as u64) as i64,
                )
            };
            if n < 0 {
                let e = err();
                if e == Errno::EINTR {
                    continue;
                }
                return reply.error(e);
            }
            done += n as usize;
        }
        reply.written(done as u32)
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok()
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // SAFETY: the handle was opened by `open` or `create` and is released once.
        unsafe { libc::close(fh.0 as RawFd) };
        reply.ok()
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        // SAFETY: the handle is an open descriptor.
        let r = unsafe {
            if datasync {
                libc::fdatasync(fh.0 as RawFd)
            } else {
                libc::fsync(fh.0 as RawFd)
            }
        };
        Self::empty(check(r), reply)
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let r = (|| {
            let fd = self.dir(ino)?;
            // SAFETY: a valid descriptor and C string; the descriptor is owned below.
            let d = unsafe {
                libc::openat(
                    fd.as_raw_fd(),
                    c".".as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
                )
            };
            if d < 0 {
                return Err(err());
            }
            // SAFETY: just opened.
            let d = unsafe { OwnedFd::from_raw_fd(d) };
            // The entries as of opendir, read with getdents through a duplicate descriptor.
            // SAFETY: dup of an open descriptor; fdopendir takes ownership of the duplicate.
            let dup = unsafe { libc::dup(d.as_raw_fd()) };
            if dup < 0 {
                return Err(err());
            }
            // SAFETY: as above.
            let dir = unsafe { libc::fdopendir(dup) };
            if dir.is_null() {
                let e = err();
                // SAFETY: fdopendir failed, so the duplicate is still ours.
                unsafe { libc::close(dup) };
                return Err(e);
            }
            let mut entries = Vec::new();
            loop {
                // SAFETY: a valid DIR stream.
                let e = unsafe { libc::readdir64(dir) };
                if e.is_null() {
                    break;
                }
                // SAFETY: readdir returned a valid entry with a NUL-terminated name.
                let (name, ino, t) = unsafe {
                    (
                        std::ffi::CStr::from_ptr((*e).d_name.as_ptr())
                            .to_bytes()
                            .to_vec(),
                        (*e).d_ino,
                        (*e).d_type,
                    )
                };
                entries.push((self.fuse_ino(ino), dtype(t), name));
            }
            // SAFETY: closes the duplicate.
            unsafe { libc::closedir(dir) };
            let h = self.next_dir.fetch_add(1, Ordering::Relaxed);
            self.dirs
                .lock()
                .unwrap()
                .insert(h, Arc::new(DirHandle { fd: d, entries }));
            Ok(h)
        })();
        match r {
            Ok(h) => reply.opened(FileHandle(h), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let Some(d) = self.dirs.lock().unwrap().get(&fh.0).cloned() else {
            return reply.error(Errno::EBADF);
        };
        for (i, (ino, k, name)) in d.entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), i as u64 + 1, *k, OsStr::from_bytes(name)) {
                break;
            }
        }
        reply.ok()
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.dirs.lock().unwrap().remove(&fh.0);
        reply.ok()
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let Some(d) = self.dirs.lock().unwrap().get(&fh.0).cloned() else {
            return reply.error(Errno::EBADF);
        };
        // SAFETY: an open directory descriptor.
        let r = unsafe {
            if datasync {
                libc::fdatasync(d.fd.as_raw_fd())
            } else {
                libc::fsync(d.fd.as_raw_fd())
            }
        };
        Self::empty(check(r), reply)
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let c = CString::new(self.backing.as_os_str().as_bytes()).expect("no NUL");
        // SAFETY: an all-zero statvfs is valid; statvfs fills it.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: a C string and a buffer.
        match check(unsafe { libc::statvfs(c.as_ptr(), &mut s) }) {
            Ok(()) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(e),
        }
    }

    // Extended attributes are forwarded (intactfs keeps them too). The kernel asks for
    // security.capability before every write(2) to a FUSE file (FUSE sets no SB_NOSEC), so a
    // file system that answers them pays one GETXATTR round trip per write; with
    // --no-xattr the passthrough answers ENOSYS once and the kernel stops asking.
    fn setxattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        if self.no_xattr {
            return reply.error(Errno::ENOSYS);
        }
        let r = (|| {
            let (p, follow) = self.xattr_path(ino)?;
            let n = cstr(name)?;
            // SAFETY: C strings and a buffer of the given length.
            check(unsafe {
                if follow {
                    libc::setxattr(
                        p.as_ptr(),
                        n.as_ptr(),
                        value.as_ptr().cast(),
                        value.len(),
                        flags,
                    )
                } else {
                    libc::lsetxattr(
                        p.as_ptr(),
                        n.as_ptr(),
                        value.as_ptr().cast(),
                        value.len(),
                        flags,
                    )
                }
            })
        })();
        Self::empty(r, reply)
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        if self.no_xattr {
            return reply.error(Errno::ENOSYS);
        }
        let r = (|| {
            let (p, follow) = self.xattr_path(ino)?;
            let n = cstr(name)?;
            let mut buf = vec![0u8; size as usize];
            // SAFETY: C strings and a buffer of the given length (0: the size is asked).
            let got = unsafe {
                if follow {
                    libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
                } else {
                    libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
                }
            };
            if got < 0 {
                return Err(err());
            }
            buf.truncate(got as usize);
            Ok(buf)
        })();
        Self::xattr_reply(r, size, reply)
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        if self.no_xattr {
            return reply.error(Errno::ENOSYS);
        }
        let r = (|| {
            let (p, follow) = self.xattr_path(ino)?;
            let mut buf = vec![0u8; size as usize];
            // SAFETY: a C string and a buffer of the given length (0: the size is asked).
            let got = unsafe {
                if follow {
                    libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
                } else {
                    libc::llistxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len())
                }
            };
            if got < 0 {
                return Err(err());
            }
            buf.truncate(got as usize);
            Ok(buf)
        })();
        Self::xattr_reply(r, size, reply)
    }

    fn removexattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if self.no_xattr {
            return reply.error(Errno::ENOSYS);
        }
        let r = (|| {
            let (p, follow) = self.xattr_path(ino)?;
            let n = cstr(name)?;
            // SAFETY: C strings.
            check(unsafe {
                if follow {
                    libc::removexattr(p.as_ptr(), n.as_ptr())
                } else {
                    libc::lremovexattr(p.as_ptr(), n.as_ptr())
                }
            })
        })();
        Self::empty(r, reply)
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let r = (|| {
            let p = self.dir(parent)?;
            let c = cstr(name)?;
            let f = (flags & !libc::O_NOCTTY) | libc::O_CREAT | libc::O_CLOEXEC;
            // SAFETY: valid descriptor and C string; the descriptor becomes the file handle.
            let h = unsafe { libc::openat(p.as_raw_fd(), c.as_ptr(), f, mode) };
            if h < 0 {
                return Err(err());
            }
            Self::chown_to(req, h, None);
            match self.lookup_at(parent, p.as_raw_fd(), name) {
                Ok(a) => Ok((a, h)),
                Err(e) => {
                    // SAFETY: ours.
                    unsafe { libc::close(h) };
                    Err(e)
                }
            }
        })();
        match r {
            Ok((a, h)) => reply.created(
                &TTL,
                &a,
                Generation(0),
                FileHandle(h as u64),
                FopenFlags::FOPEN_KEEP_CACHE,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        reply.error(Errno::from_i32(libc::ENOTTY))
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        // SAFETY: the handle is an open descriptor.
        Self::empty(
            check(unsafe { libc::fallocate(fh.0 as RawFd, mode, offset as i64, length as i64) }),
            reply,
        )
    }

    fn lseek(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        // SAFETY: the handle is an open descriptor.
        let r = unsafe { libc::lseek(fh.0 as RawFd, offset, whence) };
        if r < 0 {
            reply.error(err())
        } else {
            reply.offset(r)
        }
    }
}

fn usage() -> ! {
    eprintln!("usage: passthrough BACKING_DIR MOUNTPOINT [--threads N] [--no-xattr]");
    std::process::exit(2)
}

fn main() {
    let mut args = std::env::args_os().skip(1);
    let (Some(backing), Some(mnt)) = (args.next(), args.next()) else {
        usage()
    };
    let mut threads = 4usize;
    let mut no_xattr = false;
    while let Some(a) = args.next() {
        match a.to_str() {
            Some("--threads") => {
                threads = args
                    .next()
                    .and_then(|v| v.to_str().and_then(|s| s.parse().ok()))
                    .unwrap_or_else(|| usage())
            }
            Some("--no-xattr") => no_xattr = true,
            _ => usage(),
        }
    }
    let backing = std::path::absolute(PathBuf::from(backing)).unwrap_or_else(|e| {
        eprintln!("passthrough: {e}");
        std::process::exit(2)
    });
    let mnt = PathBuf::from(mnt);
    // SAFETY: umask and rlimit calls on this process only.
    unsafe {
        // Modes arrive with the caller's umask already applied by the kernel.
        libc::umask(0);
        // One descriptor per directory the kernel knows and per open file: lift the soft
        // limit to the hard one.
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 {
            rl.rlim_cur = rl.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
        }
    }
    let mut fs = Passthrough::new(backing.clone()).unwrap_or_else(|e| {
        eprintln!("passthrough: {}: {e}", backing.display());
        std::process::exit(2)
    });
    fs.no_xattr = no_xattr;
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let mut options = vec![
        MountOption::FSName(backing.display().to_string()),
        MountOption::Subtype("passthrough".into()),
        MountOption::DefaultPermissions,
        MountOption::RW,
    ];
    if root {
        options.push(MountOption::Dev);
        options.push(MountOption::Suid);
    }
    let mut config = Config::default();
    config.mount_options = options;
    config.acl = if root {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(threads.max(1));
    config.clone_fd = true;
    let session = Session::new(fs, &mnt, &config).unwrap_or_else(|e| {
        eprintln!("passthrough: mounting on {}: {e}", mnt.display());
        std::process::exit(1)
    });

    let mut signals =
        signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM, libc::SIGHUP])
            .expect("signal handlers");
    let handle = signals.handle();
    let m = mnt.clone();
    let sig_thread = std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            let c = CString::new(m.as_os_str().as_bytes()).expect("no NUL");
            // SAFETY: a C string.
            if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
                eprintln!(
                    "passthrough: unmounting {}: {}",
                    m.display(),
                    std::io::Error::last_os_error()
                );
            }
        }
    });
    eprintln!(
        "passthrough: {} mounted on {} (pid {}, {} threads)",
        backing.display(),
        mnt.display(),
        std::process::id(),
        threads
    );
    let r = session.run();
    handle.close();
    let _ = sig_thread.join();
    match r {
        Ok(()) => eprintln!("passthrough: {} unmounted", mnt.display()),
        Err(e) => {
            eprintln!("passthrough: the FUSE session ended with an error: {e}");
            std::process::exit(1)
        }
    }
}
