//! Byte-addressable persistent memory (NVMM), as FCFS-style engines use it: loads and
//! stores through the CPU caches, `clwb` to schedule a cacheline's write-back, `sfence` to
//! wait for it, and 8-byte aligned stores that never tear.
//!
//! [`PmemDevice`] is the contract; [`PmemFile`] keeps the memory in a file mapped shared,
//! [`crate::PmemSim`] is the simulated twin whose crashes leave any image the caches allow,
//! and [`Latency`] wraps either to charge each flushed line an NVMM write's time.

use std::fs::{File, OpenOptions};
use std::io::Seek;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The unit of write-back: `clwb` flushes whole lines of this many bytes, aligned.
pub const CACHELINE: usize = 64;
/// The unit of atomicity: an aligned word of this many bytes is written entirely or not at
/// all ([`PmemDevice::store_u64`]).
pub const WORD: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum PmemError {
    #[error("{len} bytes at offset {off} reach outside the persistent memory ({size} bytes)")]
    OutOfRange { off: u64, len: u64, size: u64 },
    /// Atomic stores and loads are of aligned words only: the hardware tears a misaligned
    /// one across two words (or two lines), which is exactly what a caller wants to avoid.
    #[error("atomic {WORD}-byte access at offset {off} is not {WORD}-byte aligned")]
    Misaligned { off: u64 },
    #[error("{what} has {len} bytes: a persistent-memory image is a positive multiple of {CACHELINE} bytes")]
    BadSize { what: String, len: u64 },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        source: std::io::Error,
    },
    /// The backing store is not (or no longer) a whole image: a path that is neither a regular
    /// file nor a block device, a file that shrank under its mapping. The layers above report
    /// damaged content with it too.
    #[error("damaged persistent-memory image {path}: {why}")]
    Damaged { path: String, why: String },
}

crate::counters! {
    /// Calls and work so far, the same for every implementation: the persistence points a test
    /// harness walks through (a crash before each fence), and what a benchmark reports.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct PmemCounters {
        /// `write` and `store_u64` calls.
        pub stores: u64,
        /// Bytes they wrote.
        pub bytes_stored: u64,
        /// Cachelines `clwb` was asked to write back (a line flushed twice counts twice, as the
        /// hardware writes it twice).
        pub lines_flushed: u64,
        /// `fence` calls (`persist` makes one).
        pub fences: u64,
        /// Write latency injected by [`Latency`], in nanoseconds (0 without it).
        pub latency_ns: u64,
    }
}

/// Byte-addressable persistent memory of `len()` bytes.
///
/// Semantics (those of x86 NVMM with `clwb` and `sfence`):
/// * `write` and `store_u64` are ordinary stores: reads see them at once, but they sit in a
///   volatile CPU cache that may write a line back at any moment, in any order, or lose it
///   at a crash. At a crash every aligned [`WORD`] holds its last guaranteed value or any value
///   stored to it since; words never tear.
/// * `clwb(off, len)` schedules the write-back of every [`CACHELINE`] the range touches; it
///   guarantees nothing by itself.
/// * `fence` waits for every write-back scheduled before it: each such line is then
///   persistent with at least its content at the time of its `clwb` (a store after the
///   `clwb` may or may not be included, and stays volatile).
///
/// Offsets are bytes from the start; `store_u64` and `load_u64` are little-endian, so the
/// word's bytes read back as `v.to_le_bytes()` on any host.
pub trait PmemDevice: Send {
    /// Size in bytes (a positive multiple of [`CACHELINE`]).
    fn len(&self) -> u64;
    /// Never true: an image has at least one line. (For clippy's `len_without_is_empty`.)
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Reads `buf.len()` bytes at `off`: sees every earlier store.
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), PmemError>;
    /// Ordinary stores of `data` at `off`: visible at once, persistent only once written back
    /// and fenced. Each word it touches may independently be lost at a crash.
    fn write(&mut self, off: u64, data: &[u8]) -> Result<(), PmemError>;
    /// An atomic store of one aligned word (misaligned: [`PmemError::Misaligned`]): a crash
    /// leaves the old value or `v`, never a mix.
    fn store_u64(&mut self, off: u64, v: u64) -> Result<(), PmemError>;
    /// An atomic load of one aligned word.
    fn load_u64(&self, off: u64) -> Result<u64, PmemError>;
    /// Schedules the write-back of every cacheline covering `off..off + len`; takes effect at
    /// the next `fence`.
    fn clwb(&mut self, off: u64, len: u64) -> Result<(), PmemError>;
    /// `sfence`: every line `clwb`'d before it is persistent when it returns.
    fn fence(&mut self) -> Result<(), PmemError>;
    /// `clwb` + `fence`: the range is persistent when it returns.
    fn persist(&mut self, off: u64, len: u64) -> Result<(), PmemError> {
        self.clwb(off, len)?;
        self.fence()
    }
    fn counters(&self) -> PmemCounters;
}

impl<P: PmemDevice + ?Sized> PmemDevice for Box<P> {
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), PmemError> {
        (**self).read(off, buf)
    }
    fn write(&mut self, off: u64, data: &[u8]) -> Result<(), PmemError> {
        (**self).write(off, data)
    }
    fn store_u64(&mut self, off: u64, v: u64) -> Result<(), PmemError> {
        (**self).store_u64(off, v)
    }
    fn load_u64(&self, off: u64) -> Result<u64, PmemError> {
        (**self).load_u64(off)
    }
    fn clwb(&mut self, off: u64, len: u64) -> Result<(), PmemError> {
        (**self).clwb(off, len)
    }
    fn fence(&mut self) -> Result<(), PmemError> {
        (**self).fence()
    }
    fn persist(&mut self, off: u64, len: u64) -> Result<(), PmemError> {
        (**self).persist(off, len)
    }
    fn counters(&self) -> PmemCounters {
        (**self).counters()
    }
}

/// Checks that `off..off + len` lies within `size` bytes; returns it as a `usize` range.
pub(crate) fn check_range(off: u64, len: u64, size: u64) -> Result<Range<usize>, PmemError> {
    match off.checked_add(len) {
        Some(end) if end <= size => Ok(off as usize..end as usize),
        _ => Err(PmemError::OutOfRange { off, len, size }),
    }
}

/// Checks an atomic word access at `off`.
pub(crate) fn check_word(off: u64, size: u64) -> Result<usize, PmemError> {
    if !off.is_multiple_of(WORD as u64) {
        return Err(PmemError::Misaligned { off });
    }
    Ok(check_range(off, WORD as u64, size)?.start)
}

/// The lines (indices) covering `range`; empty for an empty range.
pub(crate) fn lines(range: &Range<usize>) -> Range<usize> {
    if range.is_empty() {
        return 0..0;
    }
    range.start / CACHELINE..range.end.div_ceil(CACHELINE)
}

pub(crate) fn check_size(what: impl FnOnce() -> String, len: u64) -> Result<(), PmemError> {
    if len == 0 || !len.is_multiple_of(CACHELINE as u64) {
        return Err(PmemError::BadSize { what: what(), len });
    }
    Ok(())
}

/// Persistent memory kept in a file mapped shared (`mmap(MAP_SHARED)`).
///
/// There is no DAX here, so the file's pages live in the page cache: a store reaches it at
/// once and survives the process being killed, but nothing survives a power loss until the
/// kernel writes the page back. The persistence points are therefore the explicit `clwb` +
/// `fence` calls, counted; [`PmemFile::set_sync_on_fence`] makes each fence also `msync` the
/// pages of the lines it covers, for real durability at a real cost (off by default: the
/// engine's crash tests use [`crate::PmemSim`], and a benchmark wants NVMM's cost, see
/// [`Latency`], not a disk's). No cache-flush instruction is issued: without DAX it would
/// only cost time, not make anything durable.
///
/// One writer: the mapping is this value's, and another process writing the same file at the
/// same time is outside the model. A file truncated under the mapping makes accesses beyond
/// its new end fault (SIGBUS); fences with `sync_on_fence` check the size first.
#[derive(Debug)]
pub struct PmemFile {
    map: *mut u8,
    len: u64,
    file: File,
    path: PathBuf,
    sync_on_fence: bool,
    /// Line ranges `clwb`'d since the last fence (adjacent ones merged): what a syncing fence
    /// writes back.
    pending: Vec<Range<usize>>,
    /// The system's page size: `msync`'s unit.
    page: usize,
    counters: PmemCounters,
}

// SAFETY: the mapping is owned by this value alone (no aliasing pointer escapes it), and a
// shared file mapping may be used from any thread.
unsafe impl Send for PmemFile {}
// SAFETY: through `&self` the mapping is only read (`read` copies out, `load_u64` is an
// atomic load); every store, flush and fence takes `&mut self`, so shared references on
// several threads (the FUSE server's read lock) never race with a write.
unsafe impl Sync for PmemFile {}

impl PmemFile {
    /// Creates (or truncates) `path` as a zero-filled image of `len` bytes (sparse), mapped.
    pub fn create(path: &Path, len: u64) -> Result<Self, PmemError> {
        check_size(|| format!("a new image {}", path.display()), len)?;
        let io = |what, source| PmemError::Io {
            what,
            path: path.display().to_string(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| io("creating", e))?;
        file.set_len(len).map_err(|e| io("sizing", e))?;
        Self::map(file, path, len)
    }

    /// Opens and maps an existing image; its size must be a positive multiple of
    /// [`CACHELINE`] (a crash image written out by [`crate::PmemSim`] is one).
    pub fn open(path: &Path) -> Result<Self, PmemError> {
        let io = |what, source| PmemError::Io {
            what,
            path: path.display().to_string(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io("opening", e))?;
        let ty = file
            .metadata()
            .map_err(|e| io("reading the metadata of", e))?
            .file_type();
        use std::os::unix::fs::FileTypeExt;
        if !ty.is_file() && !ty.is_block_device() {
            return Err(PmemError::Damaged {
                path: path.display().to_string(),
                why: "neither a regular file nor a block device".into(),
            });
        }
        // A block device's metadata says 0 bytes; its end is its size.
        let len = (&file)
            .seek(std::io::SeekFrom::End(0))
            .map_err(|e| io("reading the size of", e))?;
        check_size(|| format!("image {}", path.display()), len)?;
        Self::map(file, path, len)
    }

    fn map(file: File, path: &Path, len: u64) -> Result<Self, PmemError> {
        let io = |what, source| PmemError::Io {
            what,
            path: path.display().to_string(),
            source,
        };
        let size = usize::try_from(len).map_err(|_| {
            io(
                "mapping",
                std::io::Error::new(
                    std::io::ErrorKind::OutOfMemory,
                    "larger than the address space",
                ),
            )
        })?;
        // SAFETY: a fresh shared mapping of an open file descriptor; the kernel picks the
        // address, and the result is checked before use.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io("mapping", std::io::Error::last_os_error()));
        }
        // SAFETY: sysconf has no preconditions.
        let page =
            (unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).max(CACHELINE as libc::c_long) as usize;
        Ok(PmemFile {
            map: map as *mut u8,
            len,
            file,
            path: path.to_path_buf(),
            sync_on_fence: false,
            pending: Vec::new(),
            page,
            counters: PmemCounters::default(),
        })
    }

    /// Whether each fence also `msync`s the pages of the lines it covers.
    pub fn set_sync_on_fence(&mut self, on: bool) {
        self.sync_on_fence = on;
    }

    pub fn syncs_on_fence(&self) -> bool {
        self.sync_on_fence
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes every dirty page of the whole mapping to the file's storage (`msync`), e.g.
    /// before unmounting when fences do not sync.
    pub fn sync_all(&mut self) -> Result<(), PmemError> {
        self.check_not_shrunk()?;
        self.msync(0..self.len as usize)
    }

    fn io(&self, what: &'static str, source: std::io::Error) -> PmemError {
        PmemError::Io {
            what,
            path: self.path.display().to_string(),
            source,
        }
    }

    fn check_not_shrunk(&self) -> Result<(), PmemError> {
        let now = self
            .file
            .metadata()
            .map_err(|e| self.io("reading the metadata of", e))?;
        if now.file_type().is_file() && now.len() < self.len {
            return Err(PmemError::Damaged {
                path: self.path.display().to_string(),
                why: format!(
                    "the file shrank from {} to {} bytes while mapped",
                    self.len,
                    now.len()
                ),
            });
        }
        Ok(())
    }

    /// `msync(MS_SYNC)` of the pages covering the byte range (`msync` wants a page-aligned
    /// start).
    fn msync(&self, range: Range<usize>) -> Result<(), PmemError> {
        let start = range.start / self.page * self.page;
        let end = range.end.min(self.len as usize);
        if start >= end {
            return Ok(());
        }
        // SAFETY: start..end lies within the live mapping.
        let r = unsafe {
            libc::msync(
                self.map.add(start) as *mut libc::c_void,
                end - start,
                libc::MS_SYNC,
            )
        };
        if r != 0 {
            return Err(self.io("syncing", std::io::Error::last_os_error()));
        }
        Ok(())
    }
}

impl Drop for PmemFile {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; no reference into it outlives
        // `self`. The page cache keeps the stores (the kernel writes them back later).
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.len as usize) };
    }
}

impl PmemDevice for PmemFile {
    fn len(&self) -> u64 {
        self.len
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), PmemError> {
        let r = check_range(off, buf.len() as u64, self.len)?;
        // SAFETY: r lies within the mapping; `buf` is a distinct Rust buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(self.map.add(r.start), buf.as_mut_ptr(), buf.len())
        };
        Ok(())
    }
    fn write(&mut self, off: u64, data: &[u8]) -> Result<(), PmemError> {
        let r = check_range(off, data.len() as u64, self.len)?;
        // SAFETY: as in `read`, the other way; `&mut self` excludes other access.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.map.add(r.start), data.len()) };
        self.counters.stores += 1;
        self.counters.bytes_stored += data.len() as u64;
        Ok(())
    }
    fn store_u64(&mut self, off: u64, v: u64) -> Result<(), PmemError> {
        let at = check_word(off, self.len)?;
        // SAFETY: the mapping is page-aligned and `at` a multiple of 8 within it, so the
        // pointer is valid and aligned for an AtomicU64; all our accesses go through `self`.
        unsafe { AtomicU64::from_ptr(self.map.add(at) as *mut u64) }
            .store(v.to_le(), Ordering::Release);
        self.counters.stores += 1;
        self.counters.bytes_stored += WORD as u64;
        Ok(())
    }
    fn load_u64(&self, off: u64) -> Result<u64, PmemError> {
        let at = check_word(off, self.len)?;
        // SAFETY: as in `store_u64`.
        Ok(u64::from_le(
            unsafe { AtomicU64::from_ptr(self.map.add(at) as *mut u64) }.load(Ordering::Acquire),
        ))
    }
    fn clwb(&mut self, off: u64, len: u64) -> Result<(), PmemError> {
        let lines = lines(&check_range(off, len, self.len)?);
        if lines.is_empty() {
            return Ok(());
        }
        self.counters.lines_flushed += lines.len() as u64;
        match self.pending.last_mut() {
            Some(last) if lines.start <= last.end && last.start <= lines.end => {
                *last = last.start.min(lines.start)..last.end.max(lines.end)
            }
            _ => self.pending.push(lines),
        }
        Ok(())
    }
    fn fence(&mut self) -> Result<(), PmemError> {
        if self.sync_on_fence && !self.pending.is_empty() {
            self.check_not_shrunk()?;
            let mut pending = std::mem::take(&mut self.pending);
            pending.sort_by_key(|r| r.start);
            let mut run: Option<Range<usize>> = None;
            for r in pending {
                let bytes = r.start * CACHELINE..r.end * CACHELINE;
                run = match run {
                    // Within a page of each other: one msync (it works on whole pages anyway).
                    Some(cur) if bytes.start <= cur.end + self.page => {
                        Some(cur.start..cur.end.max(bytes.end))
                    }
                    Some(cur) => {
                        self.msync(cur)?;
                        Some(bytes)
                    }
                    None => Some(bytes),
                };
            }
            if let Some(cur) = run {
                self.msync(cur)?;
            }
        }
        self.pending.clear();
        // Orders this process's stores too (the sfence the engine would issue).
        std::sync::atomic::fence(Ordering::SeqCst);
        self.counters.fences += 1;
        Ok(())
    }
    fn counters(&self) -> PmemCounters {
        self.counters
    }
}

/// The cost of an NVMM write-back, per cacheline: `max(write_latency, CACHELINE / bandwidth)`.
/// FCFS emulates NVMM on DRAM with 150 ns of extra write latency and 4 GB/s of write
/// bandwidth ([`LatencyModel::FCFS`]). The default charges nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencyModel {
    /// Extra latency of one line's write-back, in nanoseconds.
    pub write_ns: u64,
    /// Write bandwidth in bytes per second; 0 for unlimited.
    pub bytes_per_sec: u64,
}

impl LatencyModel {
    pub const FCFS: LatencyModel = LatencyModel {
        write_ns: 150,
        bytes_per_sec: 4_000_000_000,
    };

    /// What one flushed line costs, in nanoseconds.
    pub fn per_line_ns(&self) -> u64 {
        let transfer = if self.bytes_per_sec == 0 {
            0
        } else {
            (CACHELINE as u64 * 1_000_000_000).div_ceil(self.bytes_per_sec)
        };
        self.write_ns.max(transfer)
    }
}

/// Wraps a device to busy-wait for the modelled write time of the lines each `clwb` flushes
/// (the paper's emulation delays after every flush instruction). The wait is taken at the
/// next `fence`, for all the lines flushed since the previous one: a real `clwb` is
/// asynchronous and the fence waits, the total is the same, and one clock loop per fence
/// instead of per line keeps the emulation's own cost (a clock read per spin, ~65 ns per
/// line measured) out of the figures. The time charged is added to
/// [`PmemCounters::latency_ns`]. Spinning rather than sleeping: the delays are far below a
/// timer's resolution, and a stalled core is what NVMM costs.
#[derive(Debug)]
pub struct Latency<P: PmemDevice> {
    inner: P,
    model: LatencyModel,
    charged_ns: u64,
    /// Flushed since the last fence, not yet waited for.
    owed_ns: u64,
}

impl<P: PmemDevice> Latency<P> {
    pub fn new(inner: P, model: LatencyModel) -> Self {
        Latency {
            inner,
            model,
            charged_ns: 0,
            owed_ns: 0,
        }
    }
    pub fn model(&self) -> LatencyModel {
        self.model
    }
    /// Changes the model from now on (e.g. the default, to turn the delays off for a setup
    /// phase).
    pub fn set_model(&mut self, model: LatencyModel) {
        self.model = model;
    }
    pub fn inner(&self) -> &P {
        &self.inner
    }
    pub fn inner_mut(&mut self) -> &mut P {
        &mut self.inner
    }
    pub fn into_inner(self) -> P {
        self.inner
    }
}

fn spin(ns: u64) {
    let until = Duration::from_nanos(ns);
    let start = Instant::now();
    while start.elapsed() < until {
        std::hint::spin_loop();
    }
}

impl<P: PmemDevice> PmemDevice for Latency<P> {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), PmemError> {
        self.inner.read(off, buf)
    }
    fn write(&mut self, off: u64, data: &[u8]) -> Result<(), PmemError> {
        self.inner.write(off, data)
    }
    fn store_u64(&mut self, off: u64, v: u64) -> Result<(), PmemError> {
        self.inner.store_u64(off, v)
    }
    fn load_u64(&self, off: u64) -> Result<u64, PmemError> {
        self.inner.load_u64(off)
    }
    fn clwb(&mut self, off: u64, len: u64) -> Result<(), PmemError> {
        self.inner.clwb(off, len)?;
        // The range was checked by the inner device.
        let n = lines(&(off as usize..(off + len) as usize)).len() as u64;
        self.owed_ns = self
            .owed_ns
            .saturating_add(n.saturating_mul(self.model.per_line_ns()));
        Ok(())
    }
    fn fence(&mut self) -> Result<(), PmemError> {
        self.inner.fence()?;
        let ns = std::mem::take(&mut self.owed_ns);
        if ns > 0 {
            spin(ns);
            self.charged_ns = self.charged_ns.saturating_add(ns);
        }
        Ok(())
    }
    fn counters(&self) -> PmemCounters {
        let mut c = self.inner.counters();
        c.latency_ns = c.latency_ns.saturating_add(self.charged_ns);
        c
    }
}
