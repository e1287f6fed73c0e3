//! The control ABI: ioctls any process can issue on any file or directory of a mount.
//!
//! The numbers follow Linux's `_IOC` encoding so that the kernel forwards them to FUSE as
//! restricted ioctls with the right sizes (platform facts, "FUSE from Rust"). The same
//! numbers are in `libintact/include/intact.h` and the Python module; a test checks they
//! agree.

use intactfs::StreamId;
use intactfs_types::{Capabilities, Capability};

/// ioctl "type" byte of every intactfs ioctl.
pub const IOC_MAGIC: u32 = 0xCC;

const fn ioc(dir: u32, nr: u32, size: u32) -> u32 {
    (dir << 30) | (size << 16) | (IOC_MAGIC << 8) | nr
}
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// `struct intact_stream { uint64_t id; uint32_t flags; uint32_t reserved; }`.
pub const STREAM_ARG_SIZE: usize = 16;
/// `_IOW(0xCC, 1, struct intact_stream)`: put the calling process in stream `id`.
pub const IOC_SETSTREAM: u32 = ioc(IOC_WRITE, 1, STREAM_ARG_SIZE as u32);
/// `_IOR(0xCC, 2, struct intact_stream)`: the calling process's stream and its flags.
pub const IOC_GETSTREAM: u32 = ioc(IOC_READ, 2, STREAM_ARG_SIZE as u32);
/// `_IO(0xCC, 3)`: commit the caller's stream durably (fsync of the stream).
pub const IOC_STREAMSYNC: u32 = ioc(0, 3, 0);
/// `_IOR(0xCC, 4, uint64_t)`: OptFS osync of the file and the caller's stream: ordered now,
/// durable later; out: the durability ticket.
pub const IOC_OSYNC: u32 = ioc(IOC_READ, 4, 8);
/// `_IO(0xCC, 5)`: OptFS dsync: fsync whatever the stream's flags.
pub const IOC_DSYNC: u32 = ioc(0, 5, 0);
/// `struct intact_durable { uint64_t ticket; uint32_t flags; uint32_t reserved; }`.
pub const DURABLE_ARG_SIZE: usize = 16;
/// `_IOWR(0xCC, 6, struct intact_durable)`: in: a ticket from OSYNC and flags (WAIT);
/// out: the newest durable ticket. With WAIT, returns once the ticket is durable.
pub const IOC_DURABLE: u32 = ioc(IOC_READ | IOC_WRITE, 6, DURABLE_ARG_SIZE as u32);

/// `_IO(0xCC, 7)`: the calling process (and its children) enter a new atomic region (CFS).
pub const IOC_BEGIN: u32 = ioc(0, 7, 0);
/// `_IO(0xCC, 8)`: commit the caller's atomic region: durable, all or nothing.
pub const IOC_COMMIT: u32 = ioc(0, 8, 0);
/// `_IO(0xCC, 9)`: abort the caller's atomic region: none of it stays.
pub const IOC_ABORT: u32 = ioc(0, 9, 0);
/// `_IO(0xCC, 10)`: CFS `cfs_add`: every write to this file (also mmap write-back) belongs
/// to the caller's region.
pub const IOC_ADD: u32 = ioc(0, 10, 0);

/// AD-transactions on a persistent-memory mount (FCFS, `002` §III-B: tx_begin, tx_add,
/// tx_commit, tx_abort; docs/fs-api.md, "AD-transactions on persistent memory"). Numbers
/// 16..19 of the intactfs space (11..15 are left free for the block engine).
///
/// `_IOR(0xCC, 16, uint64_t)`: begin a transaction over the file (or directory) the ioctl
/// is issued on; out: the transaction id. It belongs to the calling process: the daemon
/// aborts it if the process exits with it open.
pub const IOC_TX_BEGIN: u32 = ioc(IOC_READ, 16, 8);
/// `_IOW(0xCC, 17, uint64_t)`: in: a transaction id; adds the file to it (its later
/// changes, by any process, are part of the transaction). EXDEV: the id is of another mount.
pub const IOC_TX_ADD: u32 = ioc(IOC_WRITE, 17, 8);
/// `_IOW(0xCC, 18, uint64_t)`: in: a transaction id; commits it (durable, all or nothing).
/// EINVAL: unknown, committed or aborted id.
pub const IOC_TX_COMMIT: u32 = ioc(IOC_WRITE, 18, 8);
/// `_IOW(0xCC, 19, uint64_t)`: in: a transaction id; aborts it (none of it stays).
pub const IOC_TX_ABORT: u32 = ioc(IOC_WRITE, 19, 8);

/// F2FS's atomic-write ioctls (magic 0xf5, `include/uapi/linux/f2fs.h`), which SQLite built
/// with SQLITE_ENABLE_BATCH_ATOMIC_WRITE uses: one atomic region per file.
pub const F2FS_IOC_START_ATOMIC_WRITE: u32 = 0xf501;
pub const F2FS_IOC_COMMIT_ATOMIC_WRITE: u32 = 0xf502;
pub const F2FS_IOC_ABORT_VOLATILE_WRITE: u32 = 0xf505;
/// `_IOR(0xf5, 12, u32)`.
pub const F2FS_IOC_GET_FEATURES: u32 = 0x8004_f50c;
pub const F2FS_FEATURE_ATOMIC_WRITE: u32 = 0x0004;

/// Flag: fsync and fdatasync in this stream return at once without committing.
pub const FLAG_IGNORE_FSYNC: u32 = 1;
/// Flag: fsync and fdatasync in this stream are osync (ordered, durable later).
pub const FLAG_FSYNC_AS_OSYNC: u32 = 2;
/// Every stream flag.
pub const FLAGS_ALL: u32 = FLAG_IGNORE_FSYNC | FLAG_FSYNC_AS_OSYNC;
/// DURABLE flag: wait until the ticket is durable instead of answering at once.
pub const DURABLE_WAIT: u32 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamArg {
    pub id: StreamId,
    pub flags: u32,
}

impl StreamArg {
    pub fn decode(b: &[u8]) -> Option<StreamArg> {
        if b.len() < STREAM_ARG_SIZE {
            return None;
        }
        let id = u64::from_ne_bytes(b[0..8].try_into().ok()?);
        let flags = u32::from_ne_bytes(b[8..12].try_into().ok()?);
        Some(StreamArg { id, flags })
    }

    pub fn encode(&self) -> [u8; STREAM_ARG_SIZE] {
        let mut b = [0u8; STREAM_ARG_SIZE];
        b[0..8].copy_from_slice(&self.id.to_ne_bytes());
        b[8..12].copy_from_slice(&self.flags.to_ne_bytes());
        b
    }
}

/// The argument of DURABLE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DurableArg {
    pub ticket: u64,
    pub flags: u32,
}

impl DurableArg {
    pub fn decode(b: &[u8]) -> Option<DurableArg> {
        if b.len() < DURABLE_ARG_SIZE {
            return None;
        }
        Some(DurableArg {
            ticket: u64::from_ne_bytes(b[0..8].try_into().ok()?),
            flags: u32::from_ne_bytes(b[8..12].try_into().ok()?),
        })
    }

    pub fn encode(&self) -> [u8; DURABLE_ARG_SIZE] {
        let mut b = [0u8; DURABLE_ARG_SIZE];
        b[0..8].copy_from_slice(&self.ticket.to_ne_bytes());
        b[8..12].copy_from_slice(&self.flags.to_ne_bytes());
        b
    }
}

/// The stream id a name stands for: FNV-1a 64 of its bytes; "init" (and "") is the init
/// stream 0, and a name hashing to 0 becomes 1. Any program that picks the same name gets
/// the same stream (see docs/fs-api.md, "Stream ids").
pub fn stream_id(name: &str) -> StreamId {
    if name.is_empty() || name == "init" {
        return intactfs::INIT_STREAM;
    }
    intactfs::meta::fnv1a(name.as_bytes()).max(1)
}

/// Issues SETSTREAM on `fd` for the calling process.
pub fn setstream(fd: i32, id: StreamId, flags: u32) -> std::io::Result<()> {
    let arg = StreamArg { id, flags }.encode();
    // SAFETY: the argument is a 16-byte buffer, as the command's size field says.
    let r = unsafe { libc::ioctl(fd, IOC_SETSTREAM as _, arg.as_ptr()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Issues GETSTREAM on `fd`.
pub fn getstream(fd: i32) -> std::io::Result<StreamArg> {
    let mut arg = [0u8; STREAM_ARG_SIZE];
    // SAFETY: the kernel writes at most 16 bytes, the command's size.
    let r = unsafe { libc::ioctl(fd, IOC_GETSTREAM as _, arg.as_mut_ptr()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(StreamArg::decode(&arg).expect("16 bytes"))
}

/// Issues STREAMSYNC on `fd`.
pub fn streamsync(fd: i32) -> std::io::Result<()> {
    // SAFETY: _IO command without argument.
    let r = unsafe { libc::ioctl(fd, IOC_STREAMSYNC as _, 0) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Issues OSYNC on `fd`: the durability ticket.
pub fn osync(fd: i32) -> std::io::Result<u64> {
    let mut t = [0u8; 8];
    // SAFETY: the kernel writes at most 8 bytes, the command's size.
    let r = unsafe { libc::ioctl(fd, IOC_OSYNC as _, t.as_mut_ptr()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(u64::from_ne_bytes(t))
}

/// Issues DSYNC on `fd`.
pub fn dsync(fd: i32) -> std::io::Result<()> {
    // SAFETY: _IO command without argument.
    let r = unsafe { libc::ioctl(fd, IOC_DSYNC as _, 0) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn ioctl_none(fd: i32, cmd: u32) -> std::io::Result<()> {
    // SAFETY: _IO commands take no argument.
    let r = unsafe { libc::ioctl(fd, cmd as _, 0) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Issues BEGIN on `fd` (any file or directory of the mount).
pub fn region_begin(fd: i32) -> std::io::Result<()> {
    ioctl_none(fd, IOC_BEGIN)
}

/// Issues COMMIT on `fd`.
pub fn region_commit(fd: i32) -> std::io::Result<()> {
    ioctl_none(fd, IOC_COMMIT)
}

/// Issues ABORT on `fd`.
pub fn region_abort(fd: i32) -> std::io::Result<()> {
    ioctl_none(fd, IOC_ABORT)
}

fn ioctl_u64_in(fd: i32, cmd: u32, v: u64) -> std::io::Result<()> {
    let b = v.to_ne_bytes();
    // SAFETY: an 8-byte buffer, read by the kernel as the command's size says.
    let r = unsafe { libc::ioctl(fd, cmd as _, b.as_ptr()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Issues TX_BEGIN on `fd` (a file or directory of a pmem mount): the transaction id.
pub fn tx_begin(fd: i32) -> std::io::Result<u64> {
    let mut t = [0u8; 8];
    // SAFETY: the kernel writes at most 8 bytes, the command's size.
    let r = unsafe { libc::ioctl(fd, IOC_TX_BEGIN as _, t.as_mut_ptr()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(u64::from_ne_bytes(t))
}

/// Issues TX_ADD on `fd`: the file joins transaction `tx`.
pub fn tx_add(fd: i32, tx: u64) -> std::io::Result<()> {
    ioctl_u64_in(fd, IOC_TX_ADD, tx)
}

/// Issues TX_COMMIT of `tx` on `fd` (any file or directory of the mount).
pub fn tx_commit(fd: i32, tx: u64) -> std::io::Result<()> {
    ioctl_u64_in(fd, IOC_TX_COMMIT, tx)
}

/// Issues TX_ABORT of `tx` on `fd`.
pub fn tx_abort(fd: i32, tx: u64) -> std::io::Result<()> {
    ioctl_u64_in(fd, IOC_TX_ABORT, tx)
}

/// Issues DURABLE on `fd`: whether `ticket` is durable (waiting until it is with `wait`).
pub fn durable(fd: i32, ticket: u64, wait: bool) -> std::io::Result<bool> {
    let mut a = DurableArg {
        ticket,
        flags: if wait { DURABLE_WAIT } else { 0 },
    }
    .encode();
    // SAFETY: a 16-byte buffer, read and written by the kernel as the command's size says.
    let r = unsafe { libc::ioctl(fd, IOC_DURABLE as _, a.as_mut_ptr()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(DurableArg::decode(&a).expect("16 bytes").ticket >= ticket)
}

/// The engine capability a control ioctl needs; None for the calls every engine answers
/// (the F2FS atomic writes: a region on the block engine, a transaction on pmem) and for
/// numbers that are not ours.
pub fn needs(cmd: u32) -> Option<Capability> {
    match cmd {
        IOC_SETSTREAM | IOC_GETSTREAM | IOC_STREAMSYNC => Some(Capability::Streams),
        IOC_OSYNC | IOC_DSYNC | IOC_DURABLE => Some(Capability::OsyncDsync),
        IOC_BEGIN | IOC_COMMIT | IOC_ABORT | IOC_ADD => Some(Capability::AtomicRegions),
        IOC_TX_BEGIN | IOC_TX_ADD | IOC_TX_COMMIT | IOC_TX_ABORT => {
            Some(Capability::AdTransactions)
        }
        _ => None,
    }
}

/// The one place that answers a control ioctl the mounted engine lacks: Some(errno) to
/// refuse it with, None to serve it. The answer is EOPNOTSUPP, except for the calls that
/// carry a transaction id: on a mount without AD-transactions the id is another mount's,
/// so TX_ADD answers EXDEV and TX_COMMIT/TX_ABORT EINVAL, as on a pmem mount that does not
/// know the id (docs/fs-api.md; libintact/tests/t_tx.c relies on it).
pub fn refusal(cmd: u32, caps: Capabilities) -> Option<i32> {
    let need = needs(cmd)?;
    if caps.has(need) {
        return None;
    }
    Some(match cmd {
        IOC_TX_ADD => libc::EXDEV,
        IOC_TX_COMMIT | IOC_TX_ABORT => libc::EINVAL,
        _ => libc::EOPNOTSUPP,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use intactfs_types::EngineBase;

    /// Every intactfs ioctl needs exactly the capability its seed gives, and a mount
    /// without it refuses it here (EOPNOTSUPP; a transaction id: EXDEV/EINVAL).
    #[test]
    fn control_calls_an_engine_lacks_are_refused_in_one_place() {
        let block = Capabilities {
            streams: true,
            osync_dsync: true,
            atomic_regions: true,
            ad_transactions: false,
        };
        let pmem = Capabilities {
            ad_transactions: true,
            ..Capabilities::default()
        };
        let eop = Some(libc::EOPNOTSUPP);
        for cmd in [
            IOC_SETSTREAM,
            IOC_GETSTREAM,
            IOC_STREAMSYNC,
            IOC_OSYNC,
            IOC_DSYNC,
        ] {
            assert_eq!(refusal(cmd, block), None, "{cmd:#x} on block");
            assert_eq!(refusal(cmd, pmem), eop, "{cmd:#x} on pmem");
        }
        for cmd in [IOC_DURABLE, IOC_BEGIN, IOC_COMMIT, IOC_ABORT, IOC_ADD] {
            assert_eq!(refusal(cmd, block), None, "{cmd:#x} on block");
            assert_eq!(refusal(cmd, pmem), eop, "{cmd:#x} on pmem");
        }
        assert_eq!(refusal(IOC_TX_BEGIN, block), eop);
        assert_eq!(refusal(IOC_TX_ADD, block), Some(libc::EXDEV));
        assert_eq!(refusal(IOC_TX_COMMIT, block), Some(libc::EINVAL));
        assert_eq!(refusal(IOC_TX_ABORT, block), Some(libc::EINVAL));
        for cmd in [IOC_TX_BEGIN, IOC_TX_ADD, IOC_TX_COMMIT, IOC_TX_ABORT] {
            assert_eq!(refusal(cmd, pmem), None, "{cmd:#x} on pmem");
        }
        for cmd in [F2FS_IOC_START_ATOMIC_WRITE, F2FS_IOC_GET_FEATURES, 0x5401] {
            assert_eq!(refusal(cmd, block), None);
            assert_eq!(refusal(cmd, pmem), None);
        }
    }

    /// The capabilities the gate is fed are the engines' own.
    #[test]
    fn engines_report_their_capabilities() {
        let mut dev = intactfs_device::PmemSim::new(4 << 20).unwrap();
        let opts = intactfs_pmem::MkfsOptions::for_len(4 << 20);
        intactfs_pmem::PmemFs::mkfs(&mut dev, &opts).unwrap();
        let (fs, _) = intactfs_pmem::PmemFs::mount(dev).unwrap();
        let c = fs.capabilities();
        assert!(c.ad_transactions && !c.streams && !c.osync_dsync && !c.atomic_regions);
    }

    #[test]
    fn numbers_follow_the_linux_encoding() {
        assert_eq!(IOC_SETSTREAM, 0x4010_CC01);
        assert_eq!(IOC_GETSTREAM, 0x8010_CC02);
        assert_eq!(IOC_STREAMSYNC, 0x0000_CC03);
        assert_eq!(IOC_OSYNC, 0x8008_CC04);
        assert_eq!(IOC_DSYNC, 0x0000_CC05);
        assert_eq!(IOC_DURABLE, 0xC010_CC06);
        assert_eq!(
            (IOC_BEGIN, IOC_COMMIT, IOC_ABORT, IOC_ADD),
            (0xCC07, 0xCC08, 0xCC09, 0xCC0A)
        );
        assert_eq!(
            (IOC_TX_BEGIN, IOC_TX_ADD, IOC_TX_COMMIT, IOC_TX_ABORT),
            (0x8008_CC10, 0x4008_CC11, 0x4008_CC12, 0x4008_CC13)
        );
        // F2FS_IOC_GET_FEATURES is _IOR(0xf5, 12, __u32).
        assert_eq!(
            F2FS_IOC_GET_FEATURES,
            (2 << 30) | (4 << 16) | (0xf5 << 8) | 12
        );
    }

    #[test]
    fn names_map_to_stable_ids() {
        assert_eq!(stream_id("init"), 0);
        assert_eq!(stream_id(""), 0);
        // FNV-1a 64 of "a" (published test vector).
        assert_eq!(stream_id("a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(stream_id("A"), stream_id("B"));
    }

    #[test]
    fn argument_round_trips() {
        let a = StreamArg {
            id: 0x1234_5678_9abc_def0,
            flags: FLAG_IGNORE_FSYNC,
        };
        assert_eq!(StreamArg::decode(&a.encode()), Some(a));
        assert_eq!(StreamArg::decode(&[0u8; 8]), None);
    }
}
