//! intactfs-embed: a persistent-memory image opened **in-process** (issue 28 item 4). A
//! program owns the image exclusively while it has it open, and uses the same file calls
//! and the same AD-transactions (FCFS `002` §III-B: tx_begin / tx_add / tx_commit /
//! tx_abort) as a program on the FUSE mount, with no FUSE round trip: each call is a call
//! into [`intactfs_pmem::PmemFs`] on the mapped image.
//!
//! The contract, as on a mount (docs/fs-api.md, "Embedded mode"):
//! * **One owner.** [`Image::open`] takes the image's exclusive `flock`, the lock a mount,
//!   fsck and dump take ([`intactfs_device::lock_image`]); while either holds it the other
//!   is refused with an error that says who to stop. A second open in the same process is
//!   refused as well.
//! * **Durability.** Every call outside a transaction is its own transaction, durable when
//!   it returns; a transaction is durable, all or nothing, when [`Image::tx_commit`]
//!   returns. A crash of the program (SIGKILL included) aborts the transactions it had
//!   open; the next [`Image::open`] recovers.
//! * **Routing** (the mount's rule, crates/intactfs-fuse/src/pmem.rs): a call that changes
//!   a file or directory an open transaction owns (named at begin/add, or changed in it)
//!   goes into that transaction; every other call is a legacy call.
//! * **No isolation**, as FCFS: transactions see each other's changes; a change to a file
//!   another open transaction owns fails with EBUSY.
//!
//! [`Image`] is not thread-safe by itself (its calls take `&mut self`); the C ABI
//! ([`ffi`]) puts it behind a mutex. Symbolic links are not followed.

pub mod error;
pub mod ffi;
mod names;
mod paths;
mod tx;

pub use error::{EmbedError, Result};
pub use intactfs_pmem::{Attr, FileType, Ino, TxId, TxStats};

use intactfs_device::{lock_image, ImageLock, PmemCounters, PmemFile};
use intactfs_pmem::background::{Checkpointer, Gate};
use intactfs_pmem::{MkfsOptions, MountReport, PmemFs, Tunables};
use intactfs_types::prelude::*;
use intactfs_types::{Owner, SetAttr};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, MutexGuard};

/// How to open an image.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Each fence also `msync`s the lines it covers (the mount's default, `-o pmem_sync`):
    /// durable against a machine crash on an image in a file system, not only against a
    /// crash of the program.
    pub sync_on_fence: bool,
    /// Checkpoints run in a background thread of this process, in units between calls
    /// (as the mount's default; FCFS 002 §III-E), instead of inline at the commit that
    /// makes them due. A commit that finds the log or the free blocks exhausted still
    /// checkpoints inline.
    pub background_checkpoints: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sync_on_fence: true,
            background_checkpoints: true,
        }
    }
}

/// How [`Image::open_file`] opens a file (the subset of open(2)'s flags that applies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenFlags {
    pub write: bool,
    /// Create the file if it does not exist (O_CREAT), with `mode`.
    pub create: bool,
    /// With `create`: fail with EEXIST if it exists (O_EXCL).
    pub exclusive: bool,
    /// Truncate to 0 bytes (O_TRUNC; needs `write`).
    pub truncate: bool,
}

/// A descriptor of [`Image::open_file`]: small, non-negative, unique while open.
pub type Fd = i32;

#[derive(Clone, Copy, Debug)]
struct OpenFile {
    ino: Ino,
    writable: bool,
}

/// A pmem image opened in-process: the engine on the mapped file, the image's lock, and
/// the open descriptors. Dropping it without [`Image::close`] is a crash as far as the
/// image can tell: every committed transaction is there, open ones are undone at the
/// next open.
pub struct Image {
    /// The engine, shared with the checkpointer's thread (each call takes the gate).
    fs: Arc<Gate<PmemFs<PmemFile>>>,
    /// The background checkpointer (None: checkpoints inline). Declared before `lock`, so
    /// a dropped image joins the thread before it releases the image.
    checkpointer: Option<Checkpointer>,
    lock: ImageLock,
    files: HashMap<Fd, OpenFile>,
    next_fd: Fd,
    recovery: MountReport,
    owner: Owner,
}

/// Makes a fresh pmem image of `len_bytes` at `path` (as `intact fs mkfs --device pmem`);
/// `log_bytes` sizes the log (`--journal`), None: the engine's default for the size.
pub fn mkfs(path: &Path, len_bytes: u64, log_bytes: Option<u64>) -> Result<()> {
    let what = || format!("making a pmem image at {}", path.display());
    let mut dev = PmemFile::create(path, len_bytes).map_err(|e| EmbedError::image(what(), e))?;
    let mut opts = MkfsOptions::for_len(len_bytes);
    if let Some(b) = log_bytes {
        opts.log_entries = b / intactfs_pmem::layout::LOG_ENTRY;
    }
    PmemFs::mkfs(&mut dev, &opts).map_err(|e| EmbedError::fs(what(), e))?;
    dev.sync_all().map_err(|e| EmbedError::image(what(), e))
}

impl Image {
    /// Locks, maps and recovers the image at `path` (the transactions open at a crash are
    /// undone). [`EmbedError::Lock`] when a mount or another program holds it.
    pub fn open(path: &Path, opts: Options) -> Result<Image> {
        let lock = lock_image(path)?;
        let what = || format!("opening the pmem image {}", path.display());
        let mut dev = PmemFile::open(path).map_err(|e| EmbedError::image(what(), e))?;
        dev.set_sync_on_fence(opts.sync_on_fence);
        let (mut fs, recovery) = PmemFs::mount(dev).map_err(|e| {
            EmbedError::fs(
                format!("{} (run `intact fs fsck {}`)", what(), path.display()),
                e,
            )
        })?;
        fs.set_tunables(Tunables {
            background_checkpoints: opts.background_checkpoints,
            ..fs.tunables()
        });
        let fs = Arc::new(Gate::new(fs));
        let checkpointer = (opts.background_checkpoints)
            .then(|| spawn_checkpointer(&fs))
            .transpose()?;
        // SAFETY: geteuid and getegid have no preconditions and cannot fail.
        let owner = unsafe {
            Owner {
                uid: libc::geteuid(),
                gid: libc::getegid(),
            }
        };
        Ok(Image {
            fs,
            checkpointer,
            lock,
            files: HashMap::new(),
            next_fd: 0,
            recovery,
            owner,
        })
    }

    /// Unmounts cleanly: open transactions are aborted, everything is checkpointed and the
    /// image written back; then the lock is released.
    pub fn close(mut self) -> Result<()> {
        let path = self.path().to_path_buf();
        let what = || format!("closing the pmem image {}", path.display());
        if let Some(c) = self.checkpointer.take() {
            // Its error left the checkpoints to commits; unmount checkpoints everything.
            if let Err(e) = c.stop() {
                eprintln!(
                    "intactfs-embed: the background checkpointer of {} stopped early: {e}",
                    path.display()
                );
            }
        }
        let fs = Arc::try_unwrap(self.fs)
            .map_err(|_| {
                let why = "the engine is still shared after its checkpointer stopped";
                EmbedError::fs(what(), intactfs_pmem::PmemFsError::Internal(why.into()))
            })?
            .into_inner();
        let mut dev = fs.unmount().map_err(|e| EmbedError::fs(what(), e))?;
        dev.sync_all().map_err(|e| EmbedError::image(what(), e))?;
        drop(self.lock);
        Ok(())
    }

    pub fn path(&self) -> &Path {
        self.lock.path()
    }

    /// What recovery found when the image was opened.
    pub fn recovery(&self) -> &MountReport {
        &self.recovery
    }

    /// The device's counters since the image was opened: stores, bytes stored, lines
    /// flushed, fences.
    pub fn device_counters(&self) -> PmemCounters {
        self.fs().device_counters()
    }

    /// The engine, for reading (tests, statistics); the checkpointer waits meanwhile.
    pub fn engine(&self) -> impl std::ops::Deref<Target = PmemFs<PmemFile>> + '_ {
        self.fs()
    }

    /// The engine for one call: its gate, and on release a poke of the checkpointer when the
    /// call left checkpoint work. Not re-entrant: a second `fs()` while a guard lives (a
    /// `match self.fs()...` whose arms call it again) deadlocks; bind the result first.
    fn fs(&self) -> EngineRef<'_> {
        EngineRef {
            fs: self.fs.lock(),
            checkpointer: self.checkpointer.as_ref(),
        }
    }

    /// Opens (or creates) the regular file or directory at `path` (from the image's root).
    pub fn open_file(&mut self, path: &Path, flags: OpenFlags, mode: u32) -> Result<Fd> {
        if flags.truncate && !flags.write {
            return Err(EmbedError::invalid(
                path,
                "truncating needs a descriptor open for writing",
            ));
        }
        let attr = self.lookup_or_create(path, flags, mode)?;
        if attr.kind == FileType::Dir && flags.write {
            return Err(EmbedError::fs(
                format!("opening {} for writing", path.display()),
                intactfs_types::FsError::IsDir(String::new()),
            ));
        }
        if !matches!(attr.kind, FileType::Dir | FileType::File) {
            return Err(EmbedError::invalid(
                path,
                "neither a regular file nor a directory",
            ));
        }
        let ino = attr.ino;
        if flags.truncate && attr.size > 0 {
            self.set_size(ino, 0, &path.display().to_string())?;
        }
        self.fs()
            .open(ino)
            .map_err(|e| EmbedError::fs(format!("opening {}", path.display()), e))?;
        let fd = self.next_fd;
        self.next_fd = fd.checked_add(1).ok_or(EmbedError::TooManyFds)?;
        let old = self.files.insert(
            fd,
            OpenFile {
                ino,
                writable: flags.write,
            },
        );
        assert!(old.is_none(), "descriptor {fd} handed out twice");
        Ok(fd)
    }

    /// The inode at `path`, created first if the flags say so.
    fn lookup_or_create(&mut self, path: &Path, flags: OpenFlags, mode: u32) -> Result<Attr> {
        let (parent, name) = self.resolve_parent(path)?;
        let Some(name) = name else {
            return self.stat(path); // the root
        };
        // Bound first: the engine's guard must be released before the create below.
        let found = self.fs().lookup(parent, name);
        match found {
            Ok(_) if flags.create && flags.exclusive => Err(EmbedError::fs(
                format!("creating {}", path.display()),
                intactfs_types::FsError::Exists(String::new()),
            )),
            Ok(a) => Ok(a),
            Err(e) if e.errno() == libc::ENOENT && flags.create => {
                let tx = self.route(&[parent]);
                let o = self.owner;
                (self.fs().create(tx, parent, name, mode & 0o7777, o))
                    .map_err(|e| EmbedError::fs(format!("creating {}", path.display()), e))
            }
            Err(e) => Err(EmbedError::fs(format!("opening {}", path.display()), e)),
        }
    }

    /// Closes a descriptor (the last close of a removed file frees it).
    pub fn close_file(&mut self, fd: Fd) -> Result<()> {
        let f = self.files.remove(&fd).ok_or(EmbedError::BadFd(fd))?;
        self.fs()
            .release(None, f.ino)
            .map_err(|e| EmbedError::fs(format!("closing descriptor {fd}"), e))
    }

    fn file(&self, fd: Fd) -> Result<OpenFile> {
        self.files.get(&fd).copied().ok_or(EmbedError::BadFd(fd))
    }

    fn writable(&self, fd: Fd) -> Result<Ino> {
        let f = self.file(fd)?;
        if !f.writable {
            return Err(EmbedError::NotWritable(fd));
        }
        Ok(f.ino)
    }

    /// Reads up to `buf.len()` bytes at `off`; fewer at the end of the file.
    pub fn pread(&mut self, fd: Fd, buf: &mut [u8], off: u64) -> Result<usize> {
        let ino = self.file(fd)?.ino;
        let data = (self.fs().read(ino, off, buf.len()))
            .map_err(|e| EmbedError::fs(format!("reading descriptor {fd} at {off}"), e))?;
        assert!(data.len() <= buf.len(), "the engine read more than asked");
        buf[..data.len()].copy_from_slice(&data);
        Ok(data.len())
    }

    /// Writes `data` at `off` (in the transaction that owns the file, if any).
    pub fn pwrite(&mut self, fd: Fd, data: &[u8], off: u64) -> Result<usize> {
        let ino = self.writable(fd)?;
        let tx = self.route(&[ino]);
        let n = (self.fs().write(tx, ino, off, data)).map_err(|e| {
            EmbedError::fs(
                format!("writing {} bytes at {off} to descriptor {fd}", data.len()),
                e,
            )
        })?;
        assert!(n == data.len(), "a write is whole or fails");
        Ok(n)
    }

    /// Sets the file's size (in the transaction that owns it, if any).
    pub fn ftruncate(&mut self, fd: Fd, size: u64) -> Result<()> {
        let ino = self.writable(fd)?;
        self.set_size(ino, size, &format!("descriptor {fd}"))
    }

    fn set_size(&mut self, ino: Ino, size: u64, what: &str) -> Result<()> {
        let tx = self.route(&[ino]);
        let sa = SetAttr {
            size: Some(size),
            ..SetAttr::default()
        };
        let a = (self.fs().setattr(tx, ino, sa))
            .map_err(|e| EmbedError::fs(format!("truncating {what} to {size} bytes"), e))?;
        assert_eq!(a.size, size, "setattr took the size");
        Ok(())
    }

    /// Every call is durable when it returns (a transaction's changes at its commit), so
    /// this only checks the descriptor, as fsync on the mount does.
    pub fn fsync(&mut self, fd: Fd) -> Result<()> {
        let ino = self.file(fd)?.ino;
        (self.fs().fsync(None, ino, false))
            .map_err(|e| EmbedError::fs(format!("fsync of descriptor {fd}"), e))
    }

    pub fn fstat(&self, fd: Fd) -> Result<Attr> {
        let ino = self.file(fd)?.ino;
        (self.fs().getattr(ino)).map_err(|e| EmbedError::fs(format!("fstat of descriptor {fd}"), e))
    }

    /// The open transaction that owns one of `inos` (the first owned), or None: a legacy
    /// call (the mount's routing rule).
    fn route(&self, inos: &[Ino]) -> Option<TxId> {
        inos.iter().find_map(|&i| self.fs().owner_of(i))
    }
}

/// A directory entry of [`Image::readdir`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: Vec<u8>,
    pub ino: Ino,
    pub kind: FileType,
}

impl Image {
    /// The descriptors open now (for tests and the C ABI's checks).
    pub fn open_fds(&self) -> usize {
        self.files.len()
    }

    /// The device counters of the last engine call (a commit's, after [`Image::tx_commit`]).
    pub fn last_call_counters(&self) -> PmemCounters {
        self.fs().last_call_counters()
    }
}

/// One call's hold on the engine ([`Image::fs`]).
struct EngineRef<'a> {
    fs: MutexGuard<'a, PmemFs<PmemFile>>,
    checkpointer: Option<&'a Checkpointer>,
}

impl std::ops::Deref for EngineRef<'_> {
    type Target = PmemFs<PmemFile>;
    fn deref(&self) -> &Self::Target {
        &self.fs
    }
}

impl std::ops::DerefMut for EngineRef<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.fs
    }
}

impl Drop for EngineRef<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.checkpointer {
            if self.fs.checkpoint_due() {
                c.poke();
            }
        }
    }
}

/// The background checkpointer (002 §III-E): one unit per take of the gate, ahead of the
/// calls that come after it asked ([`Gate::lock_for_checkpoint`]), woken by the calls that
/// leave work due.
fn spawn_checkpointer(fs: &Arc<Gate<PmemFs<PmemFile>>>) -> Result<Checkpointer> {
    let shared = Arc::clone(fs);
    Checkpointer::spawn("intactfs-ckpt", move || {
        shared.lock_for_checkpoint().background_unit()
    })
    .map_err(|e| EmbedError::fs("starting the background checkpointer".into(), e))
}
