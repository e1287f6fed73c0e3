//! A device on a regular file (or a block device node).

use crate::{check, check_block_size, check_run, BlockDevice, DeviceError};
use std::fs::{File, OpenOptions};
use std::io::Seek;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// `pwrite`/`pread` at `block * block_size`; a flush is `fdatasync` (for a file on a file
/// system, the host file system's own flush reaches its device).
#[derive(Debug)]
pub struct FileDevice {
    file: File,
    path: PathBuf,
    block_size: usize,
    blocks: u64,
}

impl FileDevice {
    /// Creates (or truncates) `path` to `blocks * block_size` bytes (sparse).
    pub fn create(path: &Path, block_size: usize, blocks: u64) -> Result<Self, DeviceError> {
        check_block_size(block_size)?;
        let io = |what, source| DeviceError::Io { what, path: path.display().to_string(), source };
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path).map_err(|e| io("creating", e))?;
        file.set_len(blocks * block_size as u64).map_err(|e| io("sizing", e))?;
        Ok(FileDevice { file, path: path.to_path_buf(), block_size, blocks })
    }

    /// Opens an existing file; its size must be a whole number of blocks.
    pub fn open(path: &Path, block_size: usize) -> Result<Self, DeviceError> {
        check_block_size(block_size)?;
        let io = |what, source| DeviceError::Io { what, path: path.display().to_string(), source };
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(|e| io("opening", e))?;
        // A block device's metadata says 0 bytes; its end is its size.
        let len = (&file).seek(std::io::SeekFrom::End(0)).map_err(|e| io("reading the size of", e))?;
        Ok(FileDevice { file, path: path.to_path_buf(), block_size, blocks: len / block_size as u64 })
    }

    fn io(&self, what: &'static str, source: std::io::Error) -> DeviceError {
        DeviceError::Io { what, path: self.path.display().to_string(), source }
    }
}

impl BlockDevice for FileDevice {
    fn block_size(&self) -> usize {
        self.block_size
    }
    fn blocks(&self) -> u64 {
        self.blocks
    }
    fn read(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        check(block, buf.len(), self.blocks, self.block_size)?;
        self.file.read_exact_at(buf, block * self.block_size as u64).map_err(|e| self.io("reading", e))
    }
    fn write(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        check(block, data.len(), self.blocks, self.block_size)?;
        self.file.write_all_at(data, block * self.block_size as u64).map_err(|e| self.io("writing", e))
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.file.sync_data().map_err(|e| self.io("flushing", e))
    }
    fn write_run(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        let n = check_run(data.len(), self.block_size)?;
        check(block + n - 1, self.block_size, self.blocks, self.block_size)?;
        self.file.write_all_at(data, block * self.block_size as u64).map_err(|e| self.io("writing", e))
    }
    fn read_run(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let n = check_run(buf.len(), self.block_size)?;
        check(block + n - 1, self.block_size, self.blocks, self.block_size)?;
        self.file.read_exact_at(buf, block * self.block_size as u64).map_err(|e| self.io("reading", e))
    }
}
