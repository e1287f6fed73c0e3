//! Block devices for the intactfs engine (design brief: "a storage-device abstraction with
//! the semantics of the real thing, and a simulated twin for testing").
//!
//! A [`BlockDevice`] reads and writes whole blocks and flushes. Its crash semantics are
//! those of a disk with a volatile write cache: a write that returned is only *volatile*
//! until a later [`BlockDevice::flush`] completes; at a crash any subset of the volatile
//! writes may have reached the media, in any order, each torn at [`SECTOR`] granularity
//! (a sector is written entirely or not at all).
//!
//! * [`FileDevice`]: a regular file or a block device node; `pwrite` + `fdatasync`.
//! * [`SimDevice`]: memory-backed, tracks what is volatile, and [`SimDevice::crash`] yields
//!   one image the semantics allow, deterministically from a seed.

mod file;
mod sim;

pub use file::FileDevice;
pub use sim::{CrashImage, SimDevice};

/// The unit of atomicity of the media: a sector is written entirely or not at all.
pub const SECTOR: usize = 512;

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("block {block} is outside the device ({blocks} blocks of {block_size} bytes)")]
    OutOfRange { block: u64, blocks: u64, block_size: usize },
    #[error("buffer of {got} bytes for a {block_size}-byte block")]
    BadLength { got: usize, block_size: usize },
    #[error("block size {0} is not a positive multiple of {SECTOR}")]
    BadBlockSize(usize),
    #[error("an image of {len} bytes is not a whole number of {block_size}-byte blocks")]
    BadImage { len: usize, block_size: usize },
    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: String, source: std::io::Error },
}

/// A device of `blocks()` blocks of `block_size()` bytes.
pub trait BlockDevice {
    fn block_size(&self) -> usize;
    fn blocks(&self) -> u64;
    /// Reads block `block` into `buf` (exactly one block); sees every earlier write.
    fn read(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError>;
    /// Writes one block. Volatile until the next completed flush.
    fn write(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError>;
    /// Makes every earlier write durable.
    fn flush(&mut self) -> Result<(), DeviceError>;
    /// Writes consecutive blocks from `block` (`data` is a whole number of blocks). Each
    /// block is a separate volatile write; a file device issues one `pwrite`.
    fn write_run(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        let bs = self.block_size();
        check_run(data.len(), bs)?;
        for (k, chunk) in data.chunks(bs).enumerate() {
            self.write(block + k as u64, chunk)?;
        }
        Ok(())
    }
    /// Reads consecutive blocks from `block` into `buf` (a whole number of blocks).
    fn read_run(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let bs = self.block_size();
        check_run(buf.len(), bs)?;
        for (k, chunk) in buf.chunks_mut(bs).enumerate() {
            self.read(block + k as u64, chunk)?;
        }
        Ok(())
    }
}

pub(crate) fn check_block_size(block_size: usize) -> Result<(), DeviceError> {
    if block_size == 0 || !block_size.is_multiple_of(SECTOR) {
        return Err(DeviceError::BadBlockSize(block_size));
    }
    Ok(())
}

/// A run of whole blocks, at least one: its block count.
pub(crate) fn check_run(len: usize, block_size: usize) -> Result<u64, DeviceError> {
    if len == 0 || !len.is_multiple_of(block_size) {
        return Err(DeviceError::BadLength { got: len, block_size });
    }
    Ok((len / block_size) as u64)
}

/// Argument checks shared by the implementations.
pub(crate) fn check(block: u64, len: usize, blocks: u64, block_size: usize) -> Result<(), DeviceError> {
    if block >= blocks {
        return Err(DeviceError::OutOfRange { block, blocks, block_size });
    }
    if len != block_size {
        return Err(DeviceError::BadLength { got: len, block_size });
    }
    Ok(())
}
