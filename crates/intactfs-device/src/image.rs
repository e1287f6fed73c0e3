//! An image file of either kind, found out from its content: a plain block image
//! ([`FileDevice`]) or a transactional-flash image ([`TxFileDevice`], which carries its
//! magic in its first sectors). The tools and the mount open images through this.

use crate::{is_txflash, BlockDevice, DeviceError, FileDevice, TxFileDevice};
use std::path::Path;

/// The storage kinds `intact fs mkfs --device` makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// A disk with a volatile write cache: writes, flushes.
    Block,
    /// Flash with transactions (X-FTL): page writes committed all or nothing.
    TxFlash,
}

impl DeviceKind {
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Block => "block",
            DeviceKind::TxFlash => "txflash",
        }
    }
}

pub enum ImageDevice {
    Block(FileDevice),
    TxFlash(Box<TxFileDevice>),
}

impl ImageDevice {
    /// Opens `path` as whatever it holds (recovering a txflash image's own mapping).
    pub fn open(path: &Path, block_size: usize) -> Result<ImageDevice, DeviceError> {
        if path.is_file() && is_txflash(path)? {
            let d = TxFileDevice::open(path)?;
            if d.block_size() != block_size {
                return Err(DeviceError::BadTxImage(format!(
                    "{}: blocks of {} bytes, not {block_size}",
                    path.display(),
                    d.block_size()
                )));
            }
            return Ok(ImageDevice::TxFlash(Box::new(d)));
        }
        Ok(ImageDevice::Block(FileDevice::open(path, block_size)?))
    }

    /// Creates (or truncates) `path` as a device of `blocks` blocks of this kind. A txflash
    /// image also holds spare slots for transactions in flight (an eighth of the blocks, at
    /// least 1024), its mapping tables and its commit log, so its file is larger.
    pub fn create(
        path: &Path,
        kind: DeviceKind,
        block_size: usize,
        blocks: u64,
    ) -> Result<ImageDevice, DeviceError> {
        Ok(match kind {
            DeviceKind::Block => ImageDevice::Block(FileDevice::create(path, block_size, blocks)?),
            DeviceKind::TxFlash => ImageDevice::TxFlash(Box::new(TxFileDevice::create(
                path,
                block_size,
                blocks,
                (blocks / 8).max(1024),
            )?)),
        })
    }

    pub fn kind(&self) -> DeviceKind {
        match self {
            ImageDevice::Block(_) => DeviceKind::Block,
            ImageDevice::TxFlash(_) => DeviceKind::TxFlash,
        }
    }
}

macro_rules! both {
    ($self:ident, $d:ident => $e:expr) => {
        match $self {
            ImageDevice::Block($d) => $e,
            ImageDevice::TxFlash($d) => $e,
        }
    };
}

impl BlockDevice for ImageDevice {
    fn block_size(&self) -> usize {
        both!(self, d => d.block_size())
    }
    fn blocks(&self) -> u64 {
        both!(self, d => d.blocks())
    }
    fn read(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        both!(self, d => d.read(block, buf))
    }
    fn write(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        both!(self, d => d.write(block, data))
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        both!(self, d => d.flush())
    }
    fn write_run(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        both!(self, d => d.write_run(block, data))
    }
    fn read_run(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        both!(self, d => d.read_run(block, buf))
    }
    fn write_blocks(&mut self, block: u64, bufs: &[&[u8]]) -> Result<(), DeviceError> {
        both!(self, d => d.write_blocks(block, bufs))
    }
    fn shared_io(&self) -> Option<std::sync::Arc<dyn crate::SharedIo>> {
        match self {
            ImageDevice::Block(d) => d.shared_io(),
            // Its commits and mapping tables are the owner's: no writes behind its back.
            ImageDevice::TxFlash(_) => None,
        }
    }
    fn transactional(&self) -> bool {
        both!(self, d => d.transactional())
    }
    fn tx_room(&self) -> u64 {
        both!(self, d => d.tx_room())
    }
    fn tx_begin(&mut self, tx: u64) -> Result<(), DeviceError> {
        both!(self, d => d.tx_begin(tx))
    }
    fn tx_write(&mut self, tx: u64, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        both!(self, d => d.tx_write(tx, block, data))
    }
    fn tx_write_run(&mut self, tx: u64, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        both!(self, d => d.tx_write_run(tx, block, data))
    }
    fn tx_commit(&mut self, tx: u64) -> Result<(), DeviceError> {
        both!(self, d => d.tx_commit(tx))
    }
    fn tx_abort(&mut self, tx: u64) -> Result<(), DeviceError> {
        both!(self, d => d.tx_abort(tx))
    }
}
