//! The control ABI: ioctls any process can issue on any file or directory of a mount.
//!
//! The numbers follow Linux's `_IOC` encoding so that the kernel forwards them to FUSE as
//! restricted ioctls with the right sizes (platform facts, "FUSE from Rust"). The same
//! numbers are in `libintact/include/intact.h` and the Python module; a test checks they
//! agree.

use intactfs::StreamId;

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

/// Flag: fsync and fdatasync in this stream return at once without committing.
pub const FLAG_IGNORE_FSYNC: u32 = 1;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_follow_the_linux_encoding() {
        assert_eq!(IOC_SETSTREAM, 0x4010_CC01);
        assert_eq!(IOC_GETSTREAM, 0x8010_CC02);
        assert_eq!(IOC_STREAMSYNC, 0x0000_CC03);
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
        let a = StreamArg { id: 0x1234_5678_9abc_def0, flags: FLAG_IGNORE_FSYNC };
        assert_eq!(StreamArg::decode(&a.encode()), Some(a));
        assert_eq!(StreamArg::decode(&[0u8; 8]), None);
    }
}
