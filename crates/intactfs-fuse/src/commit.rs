//! Commits outside the engine lock: a request prepares its commit under the lock, then
//! writes it and waits for a flush without it, so other requests (other streams' writes,
//! reads, lookups, other fsyncs) go on meanwhile; fsyncs waiting at the same time share one
//! flush (group commit). See `intactfs::engine::io` for why this is crash-consistent.

use crate::fs::State;
use intactfs::CommitIo;
use intactfs_device::SharedIo;
use fuser::Errno;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// What the request threads and the periodic committer share to write commits.
#[derive(Clone)]
pub struct Committer {
    pub state: Arc<Mutex<State>>,
    /// Signalled when a flush outside the lock ends.
    flushed: Arc<Condvar>,
    /// The device's shared handle; `None` with `locked_commit` (or a device that has
    /// none): commits then write and flush under the lock, as the engine does by itself.
    io: Option<Arc<dyn SharedIo>>,
}

impl Committer {
    pub fn new(state: Arc<Mutex<State>>, io: Option<Arc<dyn SharedIo>>) -> Committer {
        Committer { state, flushed: Arc::new(Condvar::new()), io }
    }

    pub fn lock(&self) -> Result<MutexGuard<'_, State>, Errno> {
        // A panic while holding the lock left the engine in an unknown state: refuse.
        self.state.lock().map_err(|_| Errno::EIO)
    }

    /// After a call: writes the commits it prepared (without the lock) and, if one of
    /// them must be durable before the call returns, waits for it.
    pub fn finish(&self, mut st: MutexGuard<'_, State>) -> Result<(), Errno> {
        let Some(fs) = st.fs.as_mut() else { return Ok(()) };
        let (ios, owed) = (fs.take_io(), fs.take_owed());
        drop(st);
        self.write_out(&ios)?;
        match owed {
            Some(t) => self.wait_durable(t),
            None => Ok(()),
        }
    }

    /// Writes prepared commits without the lock (each once, whoever comes first).
    pub fn write_out(&self, ios: &[Arc<CommitIo>]) -> Result<(), Errno> {
        if ios.is_empty() {
            return Ok(());
        }
        let Some(io) = self.io.as_deref() else { return Ok(()) };
        let failed = ios.iter().find_map(|c| c.perform_shared(io).err());
        let mut st = self.lock()?;
        let st = &mut *st;
        let Some(fs) = st.fs.as_mut() else { return Err(Errno::EIO) };
        let r = match failed {
            Some(e) => Err(fs.io_failed(e)),
            None => fs.io_done(),
        };
        r.map_err(|e| {
            st.failure.get_or_insert(format!("writing a commit: {e}"));
            st.fail_waiters();
            Errno::EIO
        })
    }

    /// Returns once every commit up to `ticket` is on the media: writes those not yet
    /// written (another thread may be writing them: done ones are skipped), then flushes
    /// once for everything written so far, unless another thread's flush is under way,
    /// which it waits for and checks again.
    pub fn wait_durable(&self, ticket: u64) -> Result<(), Errno> {
        let mut st = self.lock()?;
        let Some(io) = self.io.clone() else {
            // Locked commits: flush under the lock.
            let fs = st.fs.as_mut().ok_or(Errno::EIO)?;
            if fs.durable_ticket() < ticket {
                if let Err(e) = fs.flush() {
                    st.failure.get_or_insert(format!("flushing: {e}"));
                    st.fail_waiters();
                    return Err(Errno::EIO);
                }
            }
            st.notify();
            return Ok(());
        };
        loop {
            let fs = st.fs.as_ref().ok_or(Errno::EIO)?;
            if fs.durable_ticket() >= ticket {
                return Ok(());
            }
            if st.failure.is_some() {
                return Err(Errno::EIO);
            }
            if st.flushing {
                st = self.flushed.wait(st).map_err(|_| Errno::EIO)?;
                continue;
            }
            let written = fs.written_upto();
            if written < ticket {
                let pending = fs.pending_io(ticket);
                drop(st);
                self.write_out(&pending)?;
                st = self.lock()?;
                continue;
            }
            st.flushing = true;
            drop(st);
            let r = io.flush();
            st = self.lock()?;
            st.flushing = false;
            self.flushed.notify_all();
            let fs = st.fs.as_mut().ok_or(Errno::EIO)?;
            match r {
                Ok(()) => {
                    fs.flushed_upto(written);
                    st.notify();
                }
                Err(e) => {
                    let e = fs.io_failed(format!("flushing: {e}"));
                    st.failure.get_or_insert(e.to_string());
                    st.fail_waiters();
                    return Err(Errno::EIO);
                }
            }
        }
    }
}
