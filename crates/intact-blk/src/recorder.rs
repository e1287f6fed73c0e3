//! The recorder: a one-file FUSE file system serving `disk.img`, the backing file of a
//! loop device (or intactfs's image). Every write, fsync and hole punch the file receives
//! is what the file system above sent to its device — the loop driver turns a block write
//! into a write, a flush into an fsync and a discard into a hole punch
//! (`platform-facts.md`) — so it is appended to the block log before it is applied.
//!
//! Requests are served by one thread: the log order is the order the device completed
//! them. A flush is logged when it arrives: every write logged before it has completed,
//! so the flush covers it. (A write still in flight when the flush was issued is not
//! promised by the device; logging it before the flush loses a few images where such a
//! write is missing, never adds an impossible one.) FUA writes reach us as a write
//! followed by a flush, because the loop device emulates FUA that way.

use crate::log::{Counts, LogError, LogWriter};
use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, KernelConfig,
    LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyWrite, Request, Session, WriteFlags,
};
use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

/// The name of the served file inside the recorder's mount.
pub const FILE_NAME: &str = "disk.img";
const ROOT: u64 = 1;
const FILE: u64 = 2;
const TTL: Duration = Duration::from_secs(3600);

struct Inner {
    log: Option<LogWriter>,
    /// The first failure to log: every later request fails, and `finish` reports it.
    failed: Option<String>,
}

struct RecFs {
    backing: File,
    size: u64,
    inner: Arc<Mutex<Inner>>,
}

impl RecFs {
    fn attr(&self, ino: u64) -> FileAttr {
        let (kind, perm, nlink, size) = if ino == ROOT {
            (FileType::Directory, 0o755, 2, 0)
        } else {
            (FileType::RegularFile, 0o644, 1, self.size)
        };
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: UNIX_EPOCH,
            mtime: UNIX_EPOCH,
            ctime: UNIX_EPOCH,
            crtime: UNIX_EPOCH,
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// Logs through `f`; a logging failure fails this and every later request (EIO):
    /// an incomplete log must not look complete.
    fn logged(&self, f: impl FnOnce(&mut LogWriter) -> Result<(), LogError>) -> Result<(), Errno> {
        let mut g = self.inner.lock().map_err(|_| Errno::EIO)?;
        if g.failed.is_some() {
            return Err(Errno::EIO);
        }
        let Some(log) = g.log.as_mut() else {
            return Err(Errno::EIO);
        };
        if let Err(e) = f(log) {
            g.failed = Some(e.to_string());
            return Err(Errno::EIO);
        }
        Ok(())
    }
}

fn io_errno(e: &std::io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

impl fuser::Filesystem for RecFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_write(1 << 20);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if parent.0 == ROOT && name == FILE_NAME {
            reply.entry(&TTL, &self.attr(FILE), Generation(0));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match ino.0 {
            ROOT | FILE => reply.attr(&TTL, &self.attr(ino.0)),
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<std::time::SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<std::time::SystemTime>,
        _chgtime: Option<std::time::SystemTime>,
        _bkuptime: Option<std::time::SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // The device has a fixed size; attribute changes are accepted and ignored.
        if size.is_some_and(|s| s != self.size) {
            return reply.error(Errno::EPERM);
        }
        reply.attr(&TTL, &self.attr(ino.0));
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if ino.0 != FILE {
            return reply.error(Errno::EISDIR);
        }
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let len = (size as u64).min(self.size.saturating_sub(offset)) as usize;
        let mut buf = vec![0u8; len];
        match self.backing.read_exact_at(&mut buf, offset) {
            Ok(()) => reply.data(&buf),
            Err(e) => reply.error(io_errno(&e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _wf: WriteFlags,
        _flags: OpenFlags,
        _lock: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        if offset
            .checked_add(data.len() as u64)
            .is_none_or(|e| e > self.size)
        {
            return reply.error(Errno::ENOSPC);
        }
        let r = self
            .logged(|l| l.write(offset, data, false))
            .and_then(|()| {
                self.backing
                    .write_all_at(data, offset)
                    .map_err(|e| io_errno(&e))
            });
        match r {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(e),
        }
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

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // The backing file's own durability does not matter: the log is the record.
        match self.logged(|l| l.flush()) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if offset.checked_add(length).is_none_or(|e| e > self.size) {
            return reply.error(Errno::EINVAL);
        }
        let zeroing = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE;
        if mode & zeroing == 0 {
            // Plain preallocation inside a fixed-size file: nothing changes.
            return reply.ok();
        }
        let r = self.logged(|l| l.discard(offset, length)).and_then(|()| {
            // SAFETY: fallocate on a descriptor we own.
            let rc = unsafe {
                libc::fallocate(
                    self.backing.as_raw_fd(),
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    offset as i64,
                    length as i64,
                )
            };
            if rc != 0 {
                return Err(io_errno(&std::io::Error::last_os_error()));
            }
            Ok(())
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if ino.0 != ROOT {
            return reply.error(Errno::ENOTDIR);
        }
        let entries = [
            (ROOT, FileType::Directory, "."),
            (ROOT, FileType::Directory, ".."),
            (FILE, FileType::RegularFile, FILE_NAME),
        ];
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok()
    }
}

/// A running recorder: `dir/disk.img` is the recorded file while it lives.
pub struct Recorder {
    session: Option<fuser::BackgroundSession>,
    inner: Arc<Mutex<Inner>>,
    dir: PathBuf,
    backing: PathBuf,
}

impl Recorder {
    /// Serves `backing` (an existing file, e.g. a fresh mkfs image) as `dir/disk.img` and
    /// logs to `log`.
    pub fn start(backing: &Path, dir: &Path, log: &Path) -> Result<Recorder, String> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(backing)
            .map_err(|e| format!("{}: {e}", backing.display()))?;
        let size = file
            .metadata()
            .map_err(|e| format!("{}: {e}", backing.display()))?
            .len();
        let writer = LogWriter::create(log, size).map_err(|e| e.to_string())?;
        let inner = Arc::new(Mutex::new(Inner {
            log: Some(writer),
            failed: None,
        }));
        let fs = RecFs {
            backing: file,
            size,
            inner: inner.clone(),
        };
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("intact-blk-recorder".into()),
            MountOption::RW,
        ];
        config.n_threads = Some(1);
        let session = Session::new(fs, dir, &config)
            .map_err(|e| format!("mounting the block recorder on {}: {e}", dir.display()))?;
        let session = session
            .spawn()
            .map_err(|e| format!("starting the block recorder: {e}"))?;
        Ok(Recorder {
            session: Some(session),
            inner,
            dir: dir.to_path_buf(),
            backing: backing.to_path_buf(),
        })
    }

    /// A handle that logs what the workload prints, in order with the device's requests.
    pub fn output_sink(&self) -> OutputSink {
        OutputSink(self.inner.clone())
    }

    pub fn file(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// Unmounts, then completes the log with the final image's hash. Call only after
    /// everything above (loop device, mounts) is gone.
    pub fn finish(mut self) -> Result<Counts, String> {
        self.stop()?;
        let mut g = self
            .inner
            .lock()
            .map_err(|_| "the recorder failed".to_string())?;
        if let Some(f) = g.failed.take() {
            return Err(format!("writing the block log failed: {f}"));
        }
        let log = g.log.take().ok_or("the block log was already closed")?;
        let hash =
            hash_file(&self.backing).map_err(|e| format!("{}: {e}", self.backing.display()))?;
        log.finish(hash).map_err(|e| e.to_string())
    }

    fn stop(&mut self) -> Result<(), String> {
        if let Some(s) = self.session.take() {
            s.umount_and_join().map_err(|e| {
                format!(
                    "unmounting the block recorder at {}: {e}",
                    self.dir.display()
                )
            })?;
        }
        Ok(())
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("intact: warning: {e}");
        }
    }
}

/// Logs output chunks (see [`Recorder::output_sink`]); usable from another thread.
#[derive(Clone)]
pub struct OutputSink(Arc<Mutex<Inner>>);

impl OutputSink {
    pub fn output(&self, bytes: &[u8]) -> Result<(), String> {
        let mut g = self
            .0
            .lock()
            .map_err(|_| "the recorder failed".to_string())?;
        if let Some(f) = &g.failed {
            return Err(f.clone());
        }
        let Some(log) = g.log.as_mut() else {
            return Err("the block log is closed".into());
        };
        if let Err(e) = log.output(bytes) {
            let m = e.to_string();
            g.failed = Some(m.clone());
            return Err(m);
        }
        Ok(())
    }
}

/// blake3 of a whole file (the image), streamed.
pub fn hash_file(p: &Path) -> std::io::Result<[u8; 32]> {
    let mut h = blake3::Hasher::new();
    let mut f = File::open(p)?;
    h.update_reader(&mut f)?;
    Ok(*h.finalize().as_bytes())
}
