//! The kernel's view of the shared vocabulary: attributes, file types, times and statfs in
//! fuser's types, and back. Engine-independent.

use fuser::Errno;
use fuser::{FileAttr, FileType as FType, INodeNo, ReplyStatfs, TimeOrNow};
use intactfs_types::{Attr, FileType, StatFs, Time};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long the kernel may cache attributes and entries: every change goes through the
/// kernel, which updates its caches itself, so this only bounds staleness after a crash.
pub const TTL: Duration = Duration::from_secs(1);
/// The block size reported in attributes (both engines allocate 4 KiB blocks).
const BLKSIZE: u32 = 4096;

pub(crate) fn to_system(t: Time) -> SystemTime {
    system_time(t.sec, t.nsec)
}

/// Seconds and nanoseconds since the epoch (seconds may be negative) as a `SystemTime`.
pub(crate) fn system_time(sec: i64, nsec: u32) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec)
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs()) + Duration::from_nanos(nsec as u64)
    }
}

/// The inverse of [`system_time`]: nanoseconds always in 0..1e9.
pub(crate) fn split_system(t: SystemTime) -> (i64, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            let (mut sec, mut nsec) = (-(d.as_secs() as i64), d.subsec_nanos());
            if nsec > 0 {
                sec -= 1;
                nsec = 1_000_000_000 - nsec;
            }
            (sec, nsec)
        }
    }
}

pub(crate) fn kind(k: FileType) -> FType {
    match k {
        FileType::File => FType::RegularFile,
        FileType::Dir => FType::Directory,
        FileType::Symlink => FType::Symlink,
        FileType::Fifo => FType::NamedPipe,
        FileType::Socket => FType::Socket,
        FileType::CharDev => FType::CharDevice,
        FileType::BlockDev => FType::BlockDevice,
    }
}

pub(crate) fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: to_system(a.atime),
        mtime: to_system(a.mtime),
        ctime: to_system(a.ctime),
        crtime: to_system(a.ctime),
        kind: kind(a.kind),
        perm: (a.mode & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: BLKSIZE,
        flags: 0,
    }
}

/// Answers statfs with an engine's figures.
pub(crate) fn reply_statfs(reply: ReplyStatfs, r: Result<StatFs, Errno>) {
    match r {
        Ok(s) => reply.statfs(
            s.blocks,
            s.free_blocks,
            s.free_blocks,
            s.files,
            s.free_files,
            s.block_size as u32,
            s.name_max as u32,
            s.block_size as u32,
        ),
        Err(e) => reply.error(e),
    }
}

/// The attributes of a negative entry: only node id 0 matters to the kernel.
pub fn negative_attr() -> FileAttr {
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: FType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: BLKSIZE,
        flags: 0,
    }
}

pub(crate) fn time_arg(t: Option<TimeOrNow>) -> Option<Time> {
    t.map(|t| match t {
        TimeOrNow::SpecificTime(t) => from_fuser(t),
        TimeOrNow::Now => Time::now(),
    })
}

/// A time fuser decoded from the kernel's (seconds, nanoseconds). For times before 1970,
/// fuser 0.18 subtracts `Duration::new(-sec, nsec)` from the epoch, one second too early
/// whenever nsec > 0 (its src/time.rs); the kernel's pair is recovered exactly from it.
pub(crate) fn from_fuser(t: SystemTime) -> Time {
    let (sec, nsec) = split_fuser(t);
    Time { sec, nsec }
}

/// [`from_fuser`] as (seconds, nanoseconds).
pub(crate) fn split_fuser(t: SystemTime) -> (i64, u32) {
    match UNIX_EPOCH.duration_since(t) {
        Ok(d) if !d.is_zero() => (-(d.as_secs() as i64), d.subsec_nanos()),
        _ => split_system(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_system(t: SystemTime) -> Time {
        let (sec, nsec) = split_system(t);
        Time { sec, nsec }
    }

    #[test]
    fn times_before_1970_survive_fusers_decoding() {
        // What fuser 0.18 hands us for the kernel's (-2 s, 500,000,000 ns), i.e. -1.5 s.
        let from_fuser_lib = UNIX_EPOCH - Duration::new(2, 500_000_000);
        let t = Time {
            sec: -2,
            nsec: 500_000_000,
        };
        assert_eq!(from_fuser(from_fuser_lib), t);
        assert_eq!(to_system(t), UNIX_EPOCH - Duration::from_millis(1500));
        let t = Time {
            sec: 1_700_000_000,
            nsec: 123,
        };
        assert_eq!(from_fuser(to_system(t)), t);
        let t = Time { sec: -5, nsec: 7 };
        assert_eq!(from_system(to_system(t)), t);
    }
}
