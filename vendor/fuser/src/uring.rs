//! intact patch: FUSE over io_uring (Linux 6.14+; `Config::uring`).
//!
//! The kernel keeps one queue per possible CPU and sends each request to the queue of the
//! CPU the requesting task runs on. Per queue we run one thread with its own io_uring
//! (SQE128, single issuer, deferred task work) and `QUEUE_DEPTH` entries; each entry is a
//! header buffer (`fuse_uring_req_header`) and a payload buffer registered with
//! `FUSE_IO_URING_CMD_REGISTER`. A completed entry holds a request; the thread rebuilds the
//! classic wire format (in header, op header, payload) and dispatches it through fuser's
//! usual parsing, then answers with `FUSE_IO_URING_CMD_COMMIT_AND_FETCH`, which also waits
//! for the entry's next request.
//!
//! Replies may come later and from any thread (a reply object can be kept, as intactfs does
//! for group commits). Only the queue thread submits to its ring: a command's completion
//! task work runs on the task that submitted it, and the kernel cancels an entry whose
//! submitter exits. So a reply only fills the entry's buffers (or, when the request itself
//! still occupies the payload buffer, keeps a copy) and queues the commit; another thread
//! then wakes the queue thread through an eventfd that the ring keeps a read armed on.
//!
//! Interrupts and forgets still come through `/dev/fuse` (the kernel's
//! `fuse_io_uring_ops` keeps `fuse_dev_queue_forget` and `fuse_dev_queue_interrupt`), as
//! do requests sent before every queue has registered; notifications are written to
//! `/dev/fuse`. So the classic read loop keeps running beside the rings.

use std::io;
use std::io::IoSlice;
use std::os::fd::AsRawFd;
use std::os::fd::FromRawFd;
use std::os::fd::OwnedFd;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::thread::ThreadId;

use io_uring::IoUring;
use io_uring::cqueue;
use io_uring::opcode;
use io_uring::squeue;
use io_uring::types;
use log::error;
use log::warn;

use crate::Filesystem;
use crate::ReplyEmpty;
use crate::channel::ChannelSender;
use crate::ll;
use crate::ll::Operation;
use crate::ll::fuse_abi as abi;
use crate::request::RequestWithSender;
use crate::session::SessionEventLoop;

/// The kernel's switch for the protocol (module parameter, root may write `Y`).
pub(crate) const ENABLE_PARAM: &str = "/sys/module/fuse/parameters/enable_uring";

/// How to turn the protocol on, for error messages.
pub(crate) fn how_to_enable() -> String {
    format!(
        "enable it with `echo Y > {ENABLE_PARAM}` (as root; needs a kernel built with CONFIG_FUSE_IO_URING, Linux 6.14 or later), or mount without io_uring (drop `-o uring`)"
    )
}

/// Whether the kernel parameter is on; the error says why not.
pub(crate) fn check_enabled() -> io::Result<()> {
    match std::fs::read_to_string(ENABLE_PARAM) {
        Ok(v) if v.trim() == "Y" || v.trim() == "1" => Ok(()),
        Ok(v) => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "FUSE over io_uring is off in this kernel ({ENABLE_PARAM} is {}): {}",
                v.trim(),
                how_to_enable()
            ),
        )),
        Err(e) => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "FUSE over io_uring is not available ({ENABLE_PARAM}: {e}): {}",
                how_to_enable()
            ),
        )),
    }
}

/// Requests served through a ring since the process started (all sessions): lets a test or
/// a daemon's closing message show that the transport was really used.
static SERVED: AtomicU64 = AtomicU64::new(0);

/// Requests answered through FUSE-over-io_uring rings by this process so far.
pub fn uring_requests_served() -> u64 {
    SERVED.load(Ordering::Relaxed)
}

/// Entries per queue (libfuse's default depth). More than one lets requests whose reply
/// is kept for later (a group commit) wait without stopping their queue.
const QUEUE_DEPTH: usize = 8;

// `struct fuse_uring_req_header` (include/uapi/linux/fuse.h, ABI 7.42).
const IN_OUT_OFF: usize = 0;
const OP_IN_OFF: usize = 128;
const OP_IN_SZ: usize = 128;
const ENT_IN_OUT_OFF: usize = 256;
const HEADER_SZ: usize = 288;
// `struct fuse_uring_ent_in_out`: flags u64, commit_id u64, payload_sz u32, ...
const ENT_COMMIT_ID_OFF: usize = ENT_IN_OUT_OFF + 8;
const ENT_PAYLOAD_SZ_OFF: usize = ENT_IN_OUT_OFF + 16;

// `enum fuse_uring_cmd`.
const CMD_REGISTER: u32 = 1;
const CMD_COMMIT_AND_FETCH: u32 = 2;

/// `FUSE_MIN_READ_BUFFER` (fs/fuse/fuse_i.h): the smallest payload the kernel accepts.
const MIN_READ_BUFFER: usize = 8192;

const IN_HEADER_SZ: usize = size_of::<abi::fuse_in_header>();
const OUT_HEADER_SZ: usize = size_of::<abi::fuse_out_header>();

/// The page holding an entry's header buffer, then the payload buffer. The last
/// `IN_HEADER_SZ + OP_IN_SZ` bytes of the first page are ours: the queue thread rebuilds
/// the classic request there, right before the payload, so a write's data is not copied.
const PAGE: usize = 4096;

/// `user_data` of the eventfd read that wakes a queue thread.
const WAKE_TAG: u64 = u64::MAX;

/// The size of each entry's payload buffer: what the kernel requires
/// (`fuse_uring_create`: at least max_write and max_pages pages).
pub(crate) fn payload_size(max_write: u32, max_pages: u16) -> usize {
    (max_write as usize)
        .max(max_pages as usize * page_size::get())
        .max(MIN_READ_BUFFER)
}

/// The ids of the possible CPUs: the kernel makes one queue for each
/// (`num_possible_cpus`), and the ring is used only once every queue has an entry.
fn nr_queues() -> io::Result<usize> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    let mut max = None;
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let last = part.rsplit('-').next().unwrap_or(part);
        let n: usize = last.parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("/sys/devices/system/cpu/possible: cannot parse {s:?}"),
            )
        })?;
        max = Some(max.map_or(n, |m: usize| m.max(n)));
    }
    max.map(|m| m + 1).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "/sys/devices/system/cpu/possible is empty",
        )
    })
}

/// An anonymous mapping (lazily zero-filled: an untouched payload costs no memory).
#[derive(Debug)]
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh private anonymous mapping; checked for failure below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap: null"))?;
        Ok(Mapping { ptr, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once; the ring that used it is gone (the
        // mappings belong to the queue, which outlives its thread and every reply).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// One ring entry: [header buffer | our request prefix][payload buffer].
#[derive(Debug)]
struct Entry {
    mem: Mapping,
    payload_cap: usize,
    /// The current request's payload size: its reply may go straight into the payload
    /// buffer only if the request does not occupy it (0).
    req_payload: AtomicU32,
    /// `iov[0]` header, `iov[1]` payload, read by the kernel at REGISTER.
    iov: [libc::iovec; 2],
}

impl Entry {
    fn new(payload_cap: usize) -> io::Result<Entry> {
        let mem = Mapping::new(PAGE + payload_cap)?;
        let base = mem.ptr.as_ptr();
        let iov = [
            libc::iovec {
                iov_base: base.cast(),
                iov_len: HEADER_SZ,
            },
            libc::iovec {
                // SAFETY: within the mapping.
                iov_base: unsafe { base.add(PAGE) }.cast(),
                iov_len: payload_cap,
            },
        ];
        Ok(Entry {
            mem,
            payload_cap,
            req_payload: AtomicU32::new(0),
            iov,
        })
    }

    fn base(&self) -> *mut u8 {
        self.mem.ptr.as_ptr()
    }

    fn payload(&self) -> *mut u8 {
        // SAFETY: within the mapping.
        unsafe { self.base().add(PAGE) }
    }

    /// Copies `data` to header-buffer offset `off`.
    /// SAFETY: the entry must be ours (in userspace) and `off + data.len() <= HEADER_SZ`.
    unsafe fn write_header(&self, off: usize, data: &[u8]) {
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.base().add(off), data.len());
        }
    }

    /// Writes a reply (out header, then payload pieces) into the entry's buffers.
    /// SAFETY: the entry must be ours, and nothing may borrow its payload buffer.
    unsafe fn write_reply<'a>(&self, header: &[u8], payload: impl Iterator<Item = &'a [u8]>) {
        unsafe {
            self.write_header(IN_OUT_OFF, header);
            let mut at = 0usize;
            for p in payload {
                std::ptr::copy_nonoverlapping(p.as_ptr(), self.payload().add(at), p.len());
                at += p.len();
            }
            self.write_header(ENT_PAYLOAD_SZ_OFF, &(at as u32).to_ne_bytes());
        }
    }
}

/// A commit waiting for the queue thread.
#[derive(Debug)]
struct Commit {
    entry: u16,
    commit_id: u64,
    /// The whole reply (out header and payload) when it could not be written into the
    /// entry at once; None when the entry's buffers already hold it.
    copy: Option<Vec<u8>>,
}

#[derive(Debug, Default)]
struct Pending {
    commits: Vec<Commit>,
    /// The session ended: no more commits, the queue thread stops.
    closed: bool,
}

/// What a queue's thread and its replies share.
#[derive(Debug)]
pub(crate) struct Queue {
    qid: u16,
    entries: Box<[Entry]>,
    pending: Mutex<Pending>,
    /// Written by a reply from another thread (and at shutdown) to wake the queue thread.
    wake: OwnedFd,
    /// Where the ring reads the eventfd's counter into: it belongs to the queue, which
    /// outlives the ring (the thread drops its ring before its last use of the queue).
    wake_buf: std::cell::UnsafeCell<u64>,
    owner: OnceLock<ThreadId>,
}

// SAFETY: the raw buffers are handed between the kernel, the queue thread and the single
// reply of the entry's current request, one at a time: the kernel owns an entry from its
// REGISTER/COMMIT until its completion; the queue thread then reads the request and
// dispatches it; the reply writes only the header buffer and, if the request left the
// payload buffer empty, the payload buffer (the rebuilt request lives in the prefix); only
// the queue thread submits the commit, after its dispatch has returned.
unsafe impl Sync for Queue {}
// SAFETY: as above; the mappings are plain memory.
unsafe impl Send for Queue {}

impl Queue {
    fn new(qid: u16, payload_cap: usize) -> io::Result<Queue> {
        let entries = (0..QUEUE_DEPTH)
            .map(|_| Entry::new(payload_cap))
            .collect::<io::Result<Vec<_>>>()?;
        // SAFETY: plain eventfd creation, checked below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Queue {
            qid,
            entries: entries.into_boxed_slice(),
            pending: Mutex::new(Pending::default()),
            // SAFETY: a descriptor we just created and own.
            wake: unsafe { OwnedFd::from_raw_fd(fd) },
            wake_buf: std::cell::UnsafeCell::new(0),
            owner: OnceLock::new(),
        })
    }

    fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: an 8-byte write to our eventfd; a full counter (never in practice)
        // only means the thread is already due to wake.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    fn push(&self, c: Commit) -> io::Result<()> {
        {
            let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if p.closed {
                return Err(io::Error::new(
                    io::ErrorKind::NotConnected,
                    "the FUSE io_uring queue has stopped (unmounted)",
                ));
            }
            p.commits.push(c);
        }
        // The queue thread looks at its commits before it waits again.
        if self.owner.get() != Some(&std::thread::current().id()) {
            self.wake();
        }
        Ok(())
    }

    fn close(&self) {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        self.wake();
    }
}

/// Where the reply of a request that came through a ring goes.
#[derive(Debug, Clone)]
pub(crate) struct UringTarget {
    queue: Arc<Queue>,
    entry: u16,
    commit_id: u64,
}

/// The reply sender of a ring request (see `ReplySender::Uring`).
#[derive(Debug)]
pub(crate) struct UringReply {
    target: UringTarget,
    /// For passthrough's backing ids, which are ioctls on `/dev/fuse`.
    pub(crate) ch: ChannelSender,
}

impl UringReply {
    pub(crate) fn new(target: UringTarget, ch: ChannelSender) -> Self {
        UringReply { target, ch }
    }

    /// Queues the reply `data` (out header first) for its entry's commit.
    pub(crate) fn send(&self, data: &[IoSlice<'_>]) -> io::Result<()> {
        let t = &self.target;
        let e = &t.queue.entries[t.entry as usize];
        let (header, payload) = match data.split_first() {
            Some((h, rest)) if h.len() == OUT_HEADER_SZ => (h, rest),
            _ => return Err(io::Error::other("a FUSE reply must start with its out header")),
        };
        let len: usize = payload.iter().map(|p| p.len()).sum();
        if len > e.payload_cap {
            // Still answer, or the entry would never come back.
            let h = abi::fuse_out_header {
                len: OUT_HEADER_SZ as u32,
                error: -libc::EIO,
                unique: t.commit_id,
            };
            let mut copy = Vec::with_capacity(OUT_HEADER_SZ);
            copy.extend_from_slice(zerocopy::IntoBytes::as_bytes(&h));
            t.queue.push(Commit {
                entry: t.entry,
                commit_id: t.commit_id,
                copy: Some(copy),
            })?;
            return Err(io::Error::other(format!(
                "a {len}-byte reply does not fit the {}-byte ring buffer; answered EIO",
                e.payload_cap
            )));
        }
        let copy = if e.req_payload.load(Ordering::Acquire) == 0 {
            // SAFETY: the entry is ours until its commit, which comes after this; its
            // request does not occupy the payload buffer.
            unsafe { e.write_reply(header, payload.iter().map(|p| &**p)) };
            None
        } else {
            // The request's data (a write's, say) may still be in use by the dispatching
            // thread: the queue thread copies this in once the dispatch has returned.
            let mut v = Vec::with_capacity(OUT_HEADER_SZ + len);
            for p in data {
                v.extend_from_slice(p);
            }
            Some(v)
        };
        t.queue.push(Commit {
            entry: t.entry,
            commit_id: t.commit_id,
            copy,
        })
    }
}

/// The rings of a session: one queue thread per possible CPU.
#[derive(Debug)]
pub(crate) struct Rings<FS: Filesystem> {
    queues: Vec<Arc<Queue>>,
    threads: Vec<JoinHandle<()>>,
    /// Hands each queue thread what it needs to dispatch, once the session runs.
    start: Vec<mpsc::Sender<SessionEventLoop<FS>>>,
}

impl<FS: Filesystem> Rings<FS> {
    /// Creates the queues, registers every entry and returns once all are registered (the
    /// kernel then sends requests through the rings), or with the first failure.
    pub(crate) fn start(dev: RawFd, payload_cap: usize) -> io::Result<Rings<FS>> {
        let n = nr_queues()?;
        let mut rings = Rings {
            queues: Vec::with_capacity(n),
            threads: Vec::with_capacity(n),
            start: Vec::with_capacity(n),
        };
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
        for qid in 0..n {
            let qid16 = u16::try_from(qid)
                .map_err(|_| io::Error::other(format!("{n} CPUs: too many FUSE queues")))?;
            let queue = Arc::new(Queue::new(qid16, payload_cap)?);
            let (start_tx, start_rx) = mpsc::channel();
            let ready = ready_tx.clone();
            let q = queue.clone();
            let thread = std::thread::Builder::new()
                .name(format!("fuser-uring-{qid}"))
                .spawn(move || queue_thread(q, dev, ready, start_rx))?;
            rings.queues.push(queue);
            rings.threads.push(thread);
            rings.start.push(start_tx);
        }
        drop(ready_tx);
        for _ in 0..n {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(io::Error::other("a FUSE io_uring queue thread died")),
            }
        }
        Ok(rings)
    }

    /// Lets the queue threads dispatch, with `event_loop(qid)` each.
    pub(crate) fn run(&mut self, mut event_loop: impl FnMut(usize) -> SessionEventLoop<FS>) {
        for (qid, tx) in std::mem::take(&mut self.start).into_iter().enumerate() {
            // A thread that already stopped (connection gone) needs nothing.
            let _ = tx.send(event_loop(qid));
        }
    }

    /// Stops the queue threads and waits for them.
    pub(crate) fn stop(&mut self) {
        self.start.clear();
        for q in &self.queues {
            q.close();
        }
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                error!("a FUSE io_uring queue thread panicked");
            }
        }
    }
}

impl<FS: Filesystem> Drop for Rings<FS> {
    fn drop(&mut self) {
        self.stop();
    }
}

type Ring = IoUring<squeue::Entry128, cqueue::Entry>;

/// A uring command on `/dev/fuse` with `struct fuse_uring_cmd_req {flags, commit_id, qid}`.
fn fuse_cmd(dev: RawFd, op: u32, qid: u16, commit_id: u64, iov: Option<&[libc::iovec; 2]>) -> squeue::Entry128 {
    let mut cmd = [0u8; 80];
    cmd[8..16].copy_from_slice(&commit_id.to_ne_bytes());
    cmd[16..18].copy_from_slice(&qid.to_ne_bytes());
    let mut b = opcode::UringCmd80::new(types::Fd(dev), op).cmd(cmd);
    if let Some(iov) = iov {
        b = b.addr(Some(iov.as_ptr() as u64));
    }
    let sqe = b.build();
    match iov {
        Some(iov) => with_sqe_len(sqe, iov.len() as u32),
        None => sqe,
    }
}

/// Sets `sqe->len`, which REGISTER needs (the number of iovecs: 2) and the crate's
/// `UringCmd80` builder does not offer.
fn with_sqe_len(sqe: squeue::Entry128, len: u32) -> squeue::Entry128 {
    // `struct io_uring_sqe`: opcode u8, flags u8, ioprio u16, fd i32, off u64, addr u64,
    // len u32 (offset 24). Entry128 is `repr(C)`: the 64-byte SQE, then 64 bytes.
    const LEN_OFF: usize = 24;
    const _: () = assert!(size_of::<squeue::Entry128>() == 128);
    let mut bytes: [u8; 128] = unsafe {
        // SAFETY: Entry128 is a repr(C) plain-data struct of exactly 128 bytes.
        std::mem::transmute::<squeue::Entry128, [u8; 128]>(sqe)
    };
    bytes[LEN_OFF..LEN_OFF + 4].copy_from_slice(&len.to_ne_bytes());
    // SAFETY: the same bytes back, with a valid `len`.
    unsafe { std::mem::transmute::<[u8; 128], squeue::Entry128>(bytes) }
}

/// Pushes `sqe`, submitting first if the submission queue is full.
fn push(ring: &mut Ring, sqe: &squeue::Entry128) -> io::Result<()> {
    loop {
        // SAFETY: every buffer an SQE points to (entries, iovecs, the wake counter) lives
        // as long as the ring (they belong to the queue and the thread's frame).
        if unsafe { ring.submission().push(sqe) }.is_ok() {
            return Ok(());
        }
        ring.submit()?;
    }
}

fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET stays in bounds for cpu < CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu < libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu, &mut set);
            // Best effort: an offline CPU only means the queue is served from elsewhere.
            libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
        }
    }
}

fn queue_thread<FS: Filesystem>(
    q: Arc<Queue>,
    dev: RawFd,
    ready: mpsc::Sender<io::Result<()>>,
    start: mpsc::Receiver<SessionEventLoop<FS>>,
) {
    let _ = q.owner.set(std::thread::current().id());
    // The kernel picks the queue by the requester's CPU: serve it from that CPU.
    pin_to_cpu(q.qid as usize);
    let mut ring = match setup(&q, dev) {
        Ok(ring) => {
            let _ = ready.send(Ok(()));
            ring
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    drop(ready);
    // Before the session runs, requests wait in the ring.
    let Ok(se) = start.recv() else {
        return;
    };
    if let Err(e) = serve(&q, dev, &mut ring, &se) {
        error!("FUSE io_uring queue {}: {e}", q.qid);
    }
    // Later replies find the queue closed; dropping the ring cancels what is left.
    q.pending.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
    drop(ring);
}

fn setup(q: &Queue, dev: RawFd) -> io::Result<Ring> {
    let entries = (QUEUE_DEPTH as u32 + 2).next_power_of_two();
    let mut ring: Ring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(entries)
        .map_err(|e| io::Error::new(e.kind(), format!("io_uring_setup (queue {}): {e}", q.qid)))?;
    for (i, e) in q.entries.iter().enumerate() {
        let sqe = fuse_cmd(dev, CMD_REGISTER, q.qid, 0, Some(&e.iov)).user_data(i as u64);
        push(&mut ring, &sqe)?;
    }
    arm_wake(&mut ring, q)?;
    ring.submit()?;
    // A refused REGISTER completes at once; a good one waits for a request.
    for cqe in ring.completion() {
        if cqe.user_data() != WAKE_TAG && cqe.result() < 0 {
            let err = io::Error::from_raw_os_error(-cqe.result());
            return Err(io::Error::new(
                err.kind(),
                format!(
                    "FUSE_IO_URING_CMD_REGISTER (queue {}, entry {}) failed: {err}",
                    q.qid,
                    cqe.user_data()
                ),
            ));
        }
    }
    Ok(ring)
}

fn arm_wake(ring: &mut Ring, q: &Queue) -> io::Result<()> {
    // Only the kernel writes `wake_buf`, and only one read is armed at a time.
    let sqe = opcode::Read::new(types::Fd(q.wake.as_raw_fd()), q.wake_buf.get().cast::<u8>(), 8)
    .build()
    .user_data(WAKE_TAG);
    push(ring, &squeue::Entry128::from(sqe))
}

fn serve<FS: Filesystem>(
    q: &Arc<Queue>,
    dev: RawFd,
    ring: &mut Ring,
    se: &SessionEventLoop<FS>,
) -> io::Result<()> {
    // Entries the kernel holds (registered or committed, not yet completed).
    let mut in_kernel = q.entries.len();
    let mut disconnected = false;
    let mut cqes: Vec<(u64, i32)> = Vec::with_capacity(QUEUE_DEPTH + 1);
    // A request whose in header and op header do not end on 8 bytes is rebuilt here
    // (the parser wants fuse_in_header aligned); none of today's opcodes needs it.
    let mut scratch: Vec<u64> = Vec::new();
    loop {
        let (commits, closed) = {
            let mut p = q.pending.lock().unwrap_or_else(|e| e.into_inner());
            (std::mem::take(&mut p.commits), p.closed)
        };
        if closed {
            return Ok(());
        }
        for c in commits {
            let e = &q.entries[c.entry as usize];
            if let Some(copy) = &c.copy {
                let (h, payload) = copy.split_at(OUT_HEADER_SZ);
                // SAFETY: the entry is ours and its dispatch has returned (this thread
                // dispatched it and is back in its loop).
                unsafe { e.write_reply(h, std::iter::once(payload)) };
            }
            push(ring, &fuse_cmd(dev, CMD_COMMIT_AND_FETCH, q.qid, c.commit_id, None).user_data(u64::from(c.entry)))?;
            in_kernel += 1;
        }
        if disconnected && in_kernel == 0 {
            return Ok(());
        }
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            // A full completion queue: reap below, then submit again.
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
            Err(e) => return Err(e),
        }
        cqes.clear();
        cqes.extend(ring.completion().map(|c| (c.user_data(), c.result())));
        for &(tag, res) in &cqes {
            if tag == WAKE_TAG {
                if res < 0 && res != -libc::EINTR && res != -libc::EAGAIN {
                    return Err(io::Error::new(
                        io::Error::from_raw_os_error(-res).kind(),
                        format!("reading the wake-up eventfd: {}", io::Error::from_raw_os_error(-res)),
                    ));
                }
                arm_wake(ring, q)?;
                continue;
            }
            in_kernel = in_kernel.saturating_sub(1);
            let Some(entry) = usize::try_from(tag).ok().filter(|&i| i < q.entries.len()) else {
                warn!("FUSE io_uring queue {}: completion with unknown tag {tag}", q.qid);
                continue;
            };
            if res < 0 {
                match -res {
                    // The connection is gone (unmount or abort): the entry is released.
                    libc::ENOTCONN | libc::ECONNABORTED | libc::ENODEV | libc::ECANCELED => {
                        disconnected = true
                    }
                    // A commit the kernel could not match (its request was aborted): the
                    // entry is lost to this queue; the others go on.
                    errno => warn!(
                        "FUSE io_uring queue {} entry {entry}: {}",
                        q.qid,
                        io::Error::from_raw_os_error(errno)
                    ),
                }
                continue;
            }
            serve_entry(q, entry, se, &mut scratch);
        }
    }
}

/// Reads the request of a completed entry and dispatches it.
fn serve_entry<FS: Filesystem>(
    q: &Arc<Queue>,
    entry: usize,
    se: &SessionEventLoop<FS>,
    scratch: &mut Vec<u64>,
) {
    let e = &q.entries[entry];
    let base = e.base();
    let mut in_header = [0u8; IN_HEADER_SZ];
    let mut word = [0u8; 8];
    let mut word4 = [0u8; 4];
    // SAFETY: the kernel completed the entry: its buffers are ours until the commit.
    unsafe {
        std::ptr::copy_nonoverlapping(base.add(IN_OUT_OFF), in_header.as_mut_ptr(), IN_HEADER_SZ);
        std::ptr::copy_nonoverlapping(base.add(ENT_COMMIT_ID_OFF), word.as_mut_ptr(), 8);
        std::ptr::copy_nonoverlapping(base.add(ENT_PAYLOAD_SZ_OFF), word4.as_mut_ptr(), 4);
    }
    let commit_id = u64::from_ne_bytes(word);
    let payload_sz = u32::from_ne_bytes(word4) as usize;
    // fuse_in_header: len u32 first; the op header (the first in-arg) went to op_in and
    // the rest to the payload, so the op header's size is what remains.
    let len = u32::from_ne_bytes([in_header[0], in_header[1], in_header[2], in_header[3]]) as usize;
    let target = UringTarget {
        queue: q.clone(),
        entry: entry as u16,
        commit_id,
    };
    let op_len = len
        .checked_sub(IN_HEADER_SZ + payload_sz)
        .filter(|&n| n <= OP_IN_SZ && payload_sz <= e.payload_cap);
    let Some(op_len) = op_len else {
        error!(
            "FUSE io_uring: malformed request (len {len}, payload {payload_sz}); answered EIO"
        );
        e.req_payload.store(0, Ordering::Release);
        answer_errno(target, se, ll::Errno::EIO);
        return;
    };
    e.req_payload.store(payload_sz as u32, Ordering::Release);
    SERVED.fetch_add(1, Ordering::Relaxed);
    let head = IN_HEADER_SZ + op_len;
    let data: &[u8] = if head % 8 == 0 {
        // SAFETY: the prefix page's tail is ours; the payload follows it directly, so the
        // request is contiguous without copying its data. The slice lives until the
        // dispatch returns, before this entry's commit (see `Queue`).
        unsafe {
            let start = e.payload().sub(head);
            std::ptr::copy_nonoverlapping(in_header.as_ptr(), start, IN_HEADER_SZ);
            std::ptr::copy_nonoverlapping(base.add(OP_IN_OFF), start.add(IN_HEADER_SZ), op_len);
            std::slice::from_raw_parts(start, len)
        }
    } else {
        scratch.clear();
        scratch.resize(len.div_ceil(8), 0);
        let dst = scratch.as_mut_ptr().cast::<u8>();
        // SAFETY: `scratch` holds at least `len` bytes; the sources are the entry's.
        unsafe {
            std::ptr::copy_nonoverlapping(in_header.as_ptr(), dst, IN_HEADER_SZ);
            std::ptr::copy_nonoverlapping(base.add(OP_IN_OFF), dst.add(IN_HEADER_SZ), op_len);
            std::ptr::copy_nonoverlapping(e.payload(), dst.add(head), payload_sz);
            std::slice::from_raw_parts(dst, len)
        }
    };
    match RequestWithSender::new_uring(se.ch.sender(), data, target.clone()) {
        Some(req) => {
            if let Ok(Operation::Destroy(_)) = req.request.operation() {
                // Only fuseblk sends DESTROY; the connection ends right after.
                req.reply::<ReplyEmpty>().ok();
            } else {
                // A handler that panics must not take the queue with it (every request
                // from this CPU would then wait forever): its reply, dropped while
                // unwinding, has answered EIO; the next requests are served as usual.
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    req.dispatch(se);
                }));
                if r.is_err() {
                    error!("FUSE io_uring queue {}: a request handler panicked", q.qid);
                }
            }
        }
        None => answer_errno(target, se, ll::Errno::EIO),
    }
}

fn answer_errno<FS: Filesystem>(target: UringTarget, se: &SessionEventLoop<FS>, errno: ll::Errno) {
    let unique = ll::RequestId(target.commit_id);
    let reply = UringReply::new(target, se.ch.sender());
    let res = ll::reply::Response::with_iovec(&ll::ResponseErrno(errno), unique, |iov| reply.send(iov));
    if let Err(e) = res {
        error!("FUSE io_uring: cannot answer a malformed request: {e}");
    }
}
