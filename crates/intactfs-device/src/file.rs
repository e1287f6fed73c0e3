//! A device on a regular file (or a block device node).

use crate::{check, check_block_size, check_run, BlockDevice, DeviceError, SharedIo};
use std::fs::{File, OpenOptions};
use std::io::Seek;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `pwrite`/`pread` at `block * block_size`; a flush is `fdatasync` (for a file on a file
/// system, the host file system's own flush reaches its device).
#[derive(Debug)]
pub struct FileDevice {
    io: Arc<FileIo>,
}

/// The shared part of a [`FileDevice`]: `pwrite`, `pwritev` and `fdatasync` need no
/// exclusive access, so other threads write and flush through it too.
#[derive(Debug)]
pub struct FileIo {
    file: File,
    path: PathBuf,
    block_size: usize,
    blocks: u64,
}

impl FileIo {
    fn io(&self, what: &'static str, source: std::io::Error) -> DeviceError {
        DeviceError::Io {
            what,
            path: self.path.display().to_string(),
            source,
        }
    }

    fn write_blocks(&self, block: u64, bufs: &[&[u8]]) -> Result<(), DeviceError> {
        if bufs.is_empty() {
            return Ok(());
        }
        for b in bufs {
            if b.len() != self.block_size {
                return Err(DeviceError::BadLength {
                    got: b.len(),
                    block_size: self.block_size,
                });
            }
        }
        check(
            block.saturating_add(bufs.len() as u64 - 1),
            self.block_size,
            self.blocks,
            self.block_size,
        )?;
        // At most IOV_MAX (1024) buffers per call; a short write continues where it stopped.
        let mut at = block * self.block_size as u64;
        for chunk in bufs.chunks(1024) {
            let mut iov: Vec<libc::iovec> = chunk
                .iter()
                .map(|b| libc::iovec {
                    iov_base: b.as_ptr() as *mut libc::c_void,
                    iov_len: b.len(),
                })
                .collect();
            let mut first = 0;
            while first < iov.len() {
                // SAFETY: every iovec points into a live borrowed buffer of its length, and
                // the kernel only reads them.
                let n = unsafe {
                    libc::pwritev(
                        self.file.as_raw_fd(),
                        iov[first..].as_ptr(),
                        (iov.len() - first) as libc::c_int,
                        at as libc::off_t,
                    )
                };
                if n < 0 {
                    let e = std::io::Error::last_os_error();
                    if e.kind() == std::io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(self.io("writing", e));
                }
                if n == 0 {
                    return Err(self.io(
                        "writing",
                        std::io::Error::new(std::io::ErrorKind::WriteZero, "pwritev wrote nothing"),
                    ));
                }
                at += n as u64;
                let mut n = n as usize;
                while n > 0 {
                    // pwritev never reports more bytes than the vectors hold.
                    assert!(first < iov.len(), "pwritev wrote past its vectors");
                    let v = &mut iov[first];
                    if n >= v.iov_len {
                        n -= v.iov_len;
                        first += 1;
                    } else {
                        // SAFETY: advancing within the same buffer.
                        v.iov_base = unsafe { (v.iov_base as *mut u8).add(n) } as *mut libc::c_void;
                        v.iov_len -= n;
                        n = 0;
                    }
                }
            }
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), DeviceError> {
        self.file.sync_data().map_err(|e| self.io("flushing", e))
    }
}

impl SharedIo for FileIo {
    fn write_blocks(&self, block: u64, bufs: &[&[u8]]) -> Result<(), DeviceError> {
        FileIo::write_blocks(self, block, bufs)
    }
    fn flush(&self) -> Result<(), DeviceError> {
        FileIo::flush(self)
    }
    fn read_run(&self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let n = check_run(buf.len(), self.block_size)?;
        check(
            block.saturating_add(n - 1),
            self.block_size,
            self.blocks,
            self.block_size,
        )?;
        self.file
            .read_exact_at(buf, block * self.block_size as u64)
            .map_err(|e| self.io("reading", e))
    }
}

impl FileDevice {
    /// Creates (or truncates) `path` to `blocks * block_size` bytes (sparse).
    pub fn create(path: &Path, block_size: usize, blocks: u64) -> Result<Self, DeviceError> {
        check_block_size(block_size)?;
        let io = |what, source| DeviceError::Io {
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
        file.set_len(blocks * block_size as u64)
            .map_err(|e| io("sizing", e))?;
        Ok(FileDevice {
            io: Arc::new(FileIo {
                file,
                path: path.to_path_buf(),
                block_size,
                blocks,
            }),
        })
    }

    /// Opens an existing file; its size must be a whole number of blocks.
    pub fn open(path: &Path, block_size: usize) -> Result<Self, DeviceError> {
        check_block_size(block_size)?;
        let io = |what, source| DeviceError::Io {
            what,
            path: path.display().to_string(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io("opening", e))?;
        // A block device's metadata says 0 bytes; its end is its size.
        let len = (&file)
            .seek(std::io::SeekFrom::End(0))
            .map_err(|e| io("reading the size of", e))?;
        Ok(FileDevice {
            io: Arc::new(FileIo {
                file,
                path: path.to_path_buf(),
                block_size,
                blocks: len / block_size as u64,
            }),
        })
    }
}

impl BlockDevice for FileDevice {
    fn block_size(&self) -> usize {
        self.io.block_size
    }
    fn blocks(&self) -> u64 {
        self.io.blocks
    }
    fn read(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let d = &*self.io;
        check(block, buf.len(), d.blocks, d.block_size)?;
        d.file
            .read_exact_at(buf, block * d.block_size as u64)
            .map_err(|e| d.io("reading", e))
    }
    fn write(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        let d = &*self.io;
        check(block, data.len(), d.blocks, d.block_size)?;
        d.file
            .write_all_at(data, block * d.block_size as u64)
            .map_err(|e| d.io("writing", e))
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.io.flush()
    }
    fn write_run(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        let d = &*self.io;
        let n = check_run(data.len(), d.block_size)?;
        check(
            block.saturating_add(n - 1),
            d.block_size,
            d.blocks,
            d.block_size,
        )?;
        d.file
            .write_all_at(data, block * d.block_size as u64)
            .map_err(|e| d.io("writing", e))
    }
    fn read_run(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        SharedIo::read_run(&*self.io, block, buf)
    }
    fn write_blocks(&mut self, block: u64, bufs: &[&[u8]]) -> Result<(), DeviceError> {
        self.io.write_blocks(block, bufs)
    }
    fn shared_io(&self) -> Option<Arc<dyn SharedIo>> {
        Some(self.io.clone())
    }
}
