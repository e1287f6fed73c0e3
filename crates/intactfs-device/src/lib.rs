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
//! * [`TxFileDevice`]: a transactional flash device (X-FTL style, as CFS uses it) kept in a
//!   file, and [`TxSimDevice`], its simulated twin.
//!
//! # Transactions (X-FTL: `write(txid, page)`, `commit(txid)`, `abort(txid)`)
//!
//! A device whose [`BlockDevice::transactional`] is true also takes transactional writes.
//! Transaction ids are the caller's (any `u64`; several may be open at once). A transaction
//! is *open* from [`BlockDevice::tx_begin`] or its first [`BlockDevice::tx_write`] until
//! [`BlockDevice::tx_commit`] or [`BlockDevice::tx_abort`]; committing or aborting an id that
//! is not open is [`DeviceError::UnknownTx`] (a double commit is a caller bug worth seeing).
//! A transaction with no writes commits fine (after `tx_begin`): a durable point.
//!
//! * Reads see the newest write to the block from any source except the writes of open
//!   transactions: those are invisible until their commit (and lost at an abort or a crash).
//! * `tx_commit` returns once the transaction is durable, atomically: after a crash either
//!   all its writes are there or (only when the crash came before `tx_commit` returned)
//!   none. It is also a flush: every plain write issued before it is durable once it
//!   returns (X-FTL's commit flushes the cache). A crash *during* `tx_commit` may keep the
//!   transaction while losing earlier unflushed plain writes ([`TxSimDevice::crash_during_commit`]).
//! * Plain writes keep the block-device rules above (volatile until a flush).
//! * A block has at most one open writer: a plain write, or a transactional write by another
//!   transaction, to a block an open transaction wrote is [`DeviceError::TxConflict`]. The
//!   same transaction may write a block again (the last write wins). The transactional
//!   devices check a whole `write_run`/`tx_write_run` for conflicts (and space) before
//!   writing any of it.
//!
//! # Persistent memory
//!
//! A [`PmemDevice`] is byte-addressable persistent memory (NVMM), for FCFS-style engines:
//! stores go through a volatile CPU cache, `clwb` schedules a 64-byte line's write-back,
//! `fence` (sfence) waits for it, and an aligned 8-byte `store_u64` never tears. At a crash
//! every word holds its last guaranteed value or any value stored to it since.
//! [`PmemFile`] maps a file shared (stores survive the process, not a power loss, unless
//! fences `msync`); [`PmemSim`] is its simulated twin, whose [`PmemSim::crash`] draws one
//! allowed image from a seed; [`Latency`] adds an NVMM write's cost to every flushed line.

pub mod counter;
mod file;
mod image;
mod lock;
mod pmem;
mod pmemsim;
mod sim;
mod txflash;
mod txsim;

pub use file::{FileDevice, FileIo};
pub use image::{DeviceKind, ImageDevice};
pub use lock::{lock_image, ImageLock, LockError};
pub use pmem::{
    Latency, LatencyModel, PmemCounters, PmemDevice, PmemError, PmemFile, CACHELINE, WORD,
};
pub use pmemsim::{PmemCrashImage, PmemSim};
pub use sim::{CrashImage, SimDevice};
pub use txflash::{is_txflash, TxCounters, TxFileDevice, TxGeometry, TxRecovery, TX_MAGIC};
pub use txsim::{TxSimCounters, TxSimDevice};

/// The unit of atomicity of the media: a sector is written entirely or not at all.
pub const SECTOR: usize = 512;

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("block {block} is outside the device ({blocks} blocks of {block_size} bytes)")]
    OutOfRange {
        block: u64,
        blocks: u64,
        block_size: usize,
    },
    #[error("buffer of {got} bytes for a {block_size}-byte block")]
    BadLength { got: usize, block_size: usize },
    #[error("block size {0} is not a positive multiple of {SECTOR}")]
    BadBlockSize(usize),
    #[error("an image of {len} bytes is not a whole number of {block_size}-byte blocks")]
    BadImage { len: usize, block_size: usize },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("this device has no transactions (make it with --device txflash)")]
    NotTransactional,
    #[error("block {block} is already written by open transaction {tx}")]
    TxConflict { block: u64, tx: u64 },
    #[error(
        "transaction {0} is not open (never begun or written, or already committed or aborted)"
    )]
    UnknownTx(u64),
    #[error("no free slot for transaction {tx}: open transactions hold all {spare} spare slots")]
    TxNoSpace { tx: u64, spare: u64 },
    #[error("damaged or foreign txflash image: {0}")]
    BadTxImage(String),
    #[error("invalid txflash geometry: {0}")]
    BadTxGeometry(String),
    #[error(
        "an earlier I/O error left the txflash device in an unknown state: reopen it to recover"
    )]
    TxBroken,
}

/// Writes and flushes of a device shared between threads ([`BlockDevice::shared_io`]): the
/// same crash semantics as the device's own writes and flushes (a flush covers every write
/// that returned before it started).
pub trait SharedIo: Send + Sync {
    /// [`BlockDevice::write_blocks`].
    fn write_blocks(&self, block: u64, bufs: &[&[u8]]) -> Result<(), DeviceError>;
    /// [`BlockDevice::flush`].
    fn flush(&self) -> Result<(), DeviceError>;
    /// [`BlockDevice::read_run`]: sees every write that returned before it.
    fn read_run(&self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError>;
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

    /// Writes consecutive blocks from `block`, one buffer per block (each exactly one block),
    /// without gathering them first: a file device issues `pwritev`.
    fn write_blocks(&mut self, block: u64, bufs: &[&[u8]]) -> Result<(), DeviceError> {
        for (k, b) in bufs.iter().enumerate() {
            self.write(block + k as u64, b)?;
        }
        Ok(())
    }
    /// A handle that writes and flushes this device from other threads while its owner
    /// goes on (the engine's commits write outside its lock); `None` if the device cannot
    /// be shared (simulated and transactional devices: their owner does all I/O).
    fn shared_io(&self) -> Option<std::sync::Arc<dyn SharedIo>> {
        None
    }

    // Transactions (see the crate docs). The defaults are those of a device without them.

    /// Whether the `tx_*` methods work.
    fn transactional(&self) -> bool {
        false
    }
    /// How many more blocks open transactions may write now (0 without transactions): a
    /// caller that cannot abort halfway checks this first.
    fn tx_room(&self) -> u64 {
        0
    }
    /// Opens transaction `tx` with no writes yet; opening an open one is a no-op. Optional
    /// (the first `tx_write` opens it too); needed only to commit a transaction of no writes.
    fn tx_begin(&mut self, tx: u64) -> Result<(), DeviceError> {
        let _ = tx;
        Err(DeviceError::NotTransactional)
    }
    /// Writes one block in transaction `tx` (opening it): invisible to reads, and lost at a
    /// crash, until `tx_commit(tx)`.
    fn tx_write(&mut self, tx: u64, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        let _ = (tx, block, data);
        Err(DeviceError::NotTransactional)
    }
    /// `tx_write` of consecutive blocks from `block` (`data` is a whole number of blocks).
    fn tx_write_run(&mut self, tx: u64, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        let bs = self.block_size();
        check_run(data.len(), bs)?;
        for (k, chunk) in data.chunks(bs).enumerate() {
            self.tx_write(tx, block + k as u64, chunk)?;
        }
        Ok(())
    }
    /// Makes every write of `tx` visible and durable, atomically; also a flush. Returns once
    /// durable.
    fn tx_commit(&mut self, tx: u64) -> Result<(), DeviceError> {
        let _ = tx;
        Err(DeviceError::NotTransactional)
    }
    /// Drops every write of `tx`.
    fn tx_abort(&mut self, tx: u64) -> Result<(), DeviceError> {
        let _ = tx;
        Err(DeviceError::NotTransactional)
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
        return Err(DeviceError::BadLength {
            got: len,
            block_size,
        });
    }
    Ok((len / block_size) as u64)
}

/// Argument checks shared by the implementations.
pub(crate) fn check(
    block: u64,
    len: usize,
    blocks: u64,
    block_size: usize,
) -> Result<(), DeviceError> {
    if block >= blocks {
        return Err(DeviceError::OutOfRange {
            block,
            blocks,
            block_size,
        });
    }
    if len != block_size {
        return Err(DeviceError::BadLength {
            got: len,
            block_size,
        });
    }
    Ok(())
}
