//! The device writes of prepared commits, and who performs them.
//!
//! A commit is prepared under the engine's `&mut self` (blocks assigned, record encoded,
//! memory updated) and its writes are collected in a [`CommitIo`]. With *deferred I/O* off
//! (the default: tests, the simulation's sequential runs) the engine performs it at once.
//! With it on (the FUSE daemon), the caller takes it with [`Fs::take_io`] and writes it
//! through [`intactfs_device::SharedIo`] after releasing its lock, then flushes once for
//! every commit written so far ([`Fs::flushed_upto`]): several threads' commits are in
//! flight at once and share a flush (group commit).
//!
//! Why this is sound: records of concurrent commits land at disjoint journal positions in
//! sequence order, and recovery stops at the first record that is missing, so a later
//! record written before an earlier one is ignored until the earlier one arrives. A commit
//! counts as durable only after a flush that began once every commit up to it was written
//! (`written_upto`). Blocks freed by a commit are reused only after it is durable (the
//! pending-free rule), so no block is written by two commits in flight. Reads of blocks
//! still being written are served from the commit's buffers. Anything that needs the
//! device to itself (a checkpoint, a transactional-device commit, a flush under the lock)
//! first drains: performs every commit not yet written, in the calling thread. A commit's
//! writes happen once: its state is behind its own mutex, so the thread that comes second
//! finds it done.

use super::*;
use intactfs_device::DeviceError;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Writes consecutive blocks from a device block, one buffer per block.
pub type BlockWriter<'a> = dyn FnMut(u64, &[&[u8]]) -> std::result::Result<(), DeviceError> + 'a;

/// The writes of one prepared commit: its data runs and its journal record.
pub struct CommitIo {
    seq: u64,
    /// (first device block, its blocks), each block where it lay in the dirty cache.
    runs: Vec<(u64, Vec<Box<[u8]>>)>,
    /// (first journal block, encoded record); none for a commit made by a checkpoint.
    record: Option<(u64, Vec<u8>)>,
    state: Mutex<IoState>,
}

#[derive(Clone)]
enum IoState {
    Pending,
    Done,
    Failed(String),
}

impl CommitIo {
    pub(crate) fn new(seq: u64) -> CommitIo {
        CommitIo {
            seq,
            runs: Vec::new(),
            record: None,
            state: Mutex::new(IoState::Pending),
        }
    }

    pub(crate) fn add_run(&mut self, first: u64, blocks: Vec<Box<[u8]>>) {
        self.runs.push((first, blocks));
    }

    pub(crate) fn set_record(&mut self, first: u64, bytes: Vec<u8>) {
        self.record = Some((first, bytes));
    }

    /// The commit's sequence number.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Bytes it writes.
    pub fn bytes(&self) -> u64 {
        let data: usize = self.runs.iter().map(|r| r.1.len() * BLOCK).sum();
        (data + self.record.as_ref().map_or(0, |r| r.1.len())) as u64
    }

    /// Writes it unless it is written already (by another thread, or by a drain): any
    /// thread may call this, any number of times; the writes happen once. `w` writes
    /// consecutive blocks from a device block, one buffer per block.
    pub fn perform(&self, w: &mut BlockWriter<'_>) -> std::result::Result<(), String> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match &*st {
            IoState::Done => return Ok(()),
            IoState::Failed(e) => return Err(e.clone()),
            IoState::Pending => {}
        }
        let r = (|| -> std::result::Result<(), DeviceError> {
            for (b, blocks) in &self.runs {
                let bufs: Vec<&[u8]> = blocks.iter().map(|b| &b[..]).collect();
                w(*b, &bufs)?;
            }
            if let Some((at, rec)) = &self.record {
                let bufs: Vec<&[u8]> = rec.chunks(BLOCK).collect();
                w(*at, &bufs)?;
            }
            Ok(())
        })();
        match r {
            Ok(()) => {
                *st = IoState::Done;
                Ok(())
            }
            Err(e) => {
                let m = format!("writing commit {}: {e}", self.seq);
                *st = IoState::Failed(m.clone());
                Err(m)
            }
        }
    }

    /// Writes it through a shared device handle.
    pub fn perform_shared(
        &self,
        dev: &dyn intactfs_device::SharedIo,
    ) -> std::result::Result<(), String> {
        self.perform(&mut |b, bufs| dev.write_blocks(b, bufs))
    }

    fn done(&self) -> Option<std::result::Result<(), String>> {
        match &*self.state.lock().unwrap_or_else(|p| p.into_inner()) {
            IoState::Pending => None,
            IoState::Done => Some(Ok(())),
            IoState::Failed(e) => Some(Err(e.clone())),
        }
    }

    fn block(&self, run: u32, k: u32) -> &[u8] {
        &self.runs[run as usize].1[k as usize]
    }
}

/// The engine's commits in flight.
#[derive(Default)]
pub(crate) struct Inflight {
    /// Prepared commits whose writes are not known done, oldest first.
    list: VecDeque<Arc<CommitIo>>,
    /// Device block → (commit writing it, run, index in the run): reads see them.
    blocks: HashMap<u64, (Arc<CommitIo>, u32, u32)>,
    /// Not yet handed to the caller ([`Fs::take_io`]).
    queued: Vec<Arc<CommitIo>>,
    /// Records written (or being written) and not known flushed: (seq, the
    /// `durable_upto` it carries).
    records: VecDeque<(u64, u64)>,
    bytes: u64,
}

impl Inflight {
    /// A record written (or being written), with the durable ticket it carries.
    pub(super) fn push_record(&mut self, seq: u64, carries: u64) {
        let last = self.records.back().map_or(0, |r| r.0);
        assert!(last < seq, "record {seq} noted after record {last}");
        self.records.push_back((seq, carries));
    }

    /// Forgets the records up to `upto` (they are on the media); returns the highest
    /// durable ticket they carry.
    pub(super) fn pop_records_upto(&mut self, upto: u64) -> Option<u64> {
        let mut carried = None;
        while let Some(&(s, c)) = self.records.front() {
            if s > upto {
                break;
            }
            carried = carried.max(Some(c));
            self.records.pop_front();
        }
        carried
    }
}

impl<D: BlockDevice> Fs<D> {
    /// Commit I/O is left to the caller ([`Self::take_io`]) instead of done at once.
    pub fn set_deferred_io(&mut self, on: bool) -> Result<()> {
        if !on {
            self.drain()?;
        }
        self.deferred = on;
        Ok(())
    }

    /// A handle to write and flush the device from other threads, if it has one.
    pub fn shared_io(&self) -> Option<Arc<dyn intactfs_device::SharedIo>> {
        self.dev.shared_io()
    }

    /// Commits prepared since the last call, for the caller to write (deferred I/O).
    pub fn take_io(&mut self) -> Vec<Arc<CommitIo>> {
        std::mem::take(&mut self.inflight.queued)
    }

    /// Commits up to `seq` whose writes are not yet known done (a caller that must wait
    /// for them performs them itself: done ones are skipped).
    pub fn pending_io(&self, seq: u64) -> Vec<Arc<CommitIo>> {
        self.inflight
            .list
            .iter()
            .filter(|c| c.seq <= seq)
            .cloned()
            .collect()
    }

    /// Bytes of commits whose writes are not known done.
    pub fn inflight_bytes(&self) -> u64 {
        self.inflight.bytes
    }

    /// Every commit up to this one has been written (durable after the next flush).
    pub fn written_upto(&self) -> u64 {
        if crate::mutation::active(crate::mutation::Mutation::FlushBeforeWritten) {
            return self.written_ticket();
        }
        self.inflight
            .list
            .front()
            .map_or(self.written_ticket(), |c| c.seq - 1)
    }

    /// Forgets the commits whose writes are done (oldest first); a failed write poisons
    /// the engine.
    pub fn io_done(&mut self) -> Result<()> {
        while let Some(c) = self.inflight.list.front() {
            match c.done() {
                None => break,
                Some(Err(e)) => return Err(self.poison(e)),
                Some(Ok(())) => {
                    let c = self.inflight.list.pop_front().expect("front exists");
                    intactfs_device::counter::release(
                        &mut self.inflight.bytes,
                        c.bytes(),
                        "inflight.bytes (io_done)",
                    );
                    for (b, blocks) in &c.runs {
                        for k in 0..blocks.len() as u64 {
                            if self
                                .inflight
                                .blocks
                                .get(&(b + k))
                                .is_some_and(|e| Arc::ptr_eq(&e.0, &c))
                            {
                                self.inflight.blocks.remove(&(b + k));
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The caller flushed the device after every commit up to `upto` was written
    /// ([`Self::written_upto`] before the flush began).
    pub fn flushed_upto(&mut self, upto: u64) {
        self.stats.flushes += 1;
        self.durable_advanced(upto);
    }

    /// The mount's dirty limit (bytes).
    pub fn dirty_limit(&self) -> u64 {
        self.opts.dirty_limit
    }

    /// A write or flush outside the engine failed: memory and disk may disagree.
    pub fn io_failed(&mut self, why: String) -> FsError {
        self.poison(why)
    }

    /// Writes one commit in flight now, through the engine's device (the simulation
    /// drives the order of concurrent commits' writes this way).
    pub fn perform_io(&mut self, c: &CommitIo) -> Result<()> {
        let dev = &mut self.dev;
        c.perform(&mut |b, bufs| dev.write_blocks(b, bufs))
            .map_err(|e| self.poison(e))?;
        self.io_done()
    }

    /// Flushes the device for every commit written so far (the simulation's group flush).
    pub fn flush_written(&mut self) -> Result<u64> {
        self.writable()?;
        let upto = self.written_upto();
        if let Err(e) = self.dev.flush() {
            return Err(self.poison(format!("flushing: {e}")));
        }
        self.flushed_upto(upto);
        Ok(upto)
    }

    /// A prepared commit: performed now, or queued for the caller.
    pub(crate) fn enqueue(&mut self, c: CommitIo) -> Result<()> {
        let c = Arc::new(c);
        let last = self
            .inflight
            .list
            .back()
            .map_or(self.tickets.durable(), |l| l.seq);
        assert!(c.seq > last, "commit {} enqueued after {last}", c.seq);
        for (ri, (b, blocks)) in c.runs.iter().enumerate() {
            for k in 0..blocks.len() {
                self.inflight
                    .blocks
                    .insert(b + k as u64, (c.clone(), ri as u32, k as u32));
            }
        }
        self.inflight.bytes += c.bytes();
        self.inflight.list.push_back(c.clone());
        if self.deferred {
            self.inflight.queued.push(c);
            Ok(())
        } else {
            self.perform_io(&c)
        }
    }

    /// Performs every commit not yet written, in this thread.
    pub(crate) fn drain(&mut self) -> Result<()> {
        self.inflight.queued.clear();
        let list: Vec<Arc<CommitIo>> = self.inflight.list.iter().cloned().collect();
        for c in list {
            let dev = &mut self.dev;
            c.perform(&mut |b, bufs| dev.write_blocks(b, bufs))
                .map_err(|e| self.poison(e))?;
        }
        self.io_done()
    }

    /// The bytes of device block `p` while a commit in flight writes it.
    pub(crate) fn inflight_block(&self, p: u64) -> Option<&[u8]> {
        self.inflight
            .blocks
            .get(&p)
            .map(|(c, r, k)| c.block(*r, *k))
    }

    /// After a checkpoint: nothing is in flight and every record is durable.
    pub(crate) fn inflight_reset(&mut self) {
        assert!(
            self.inflight.list.is_empty(),
            "a checkpoint with commits in flight"
        );
        self.inflight.records.clear();
    }
}
