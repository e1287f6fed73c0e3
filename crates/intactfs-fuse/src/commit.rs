//! Commits outside the engine lock: a request prepares its commit under the lock, then
//! writes it and waits for a flush without it, so other requests (other streams' writes,
//! reads, lookups, other fsyncs) go on meanwhile; fsyncs waiting at the same time share one
//! flush (group commit). See `intactfs::engine::io` for why this is crash-consistent.

use crate::fs::State;
use fuser::Errno;
use intactfs::CommitIo;
use intactfs_device::SharedIo;
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// What the request threads and the periodic committer share to write commits.
#[derive(Clone)]
pub struct Committer {
    pub state: Arc<RwLock<State>>,
    /// A flush outside the lock is under way; signalled when it ends.
    flushing: Arc<(Mutex<bool>, Condvar)>,
    /// The device's shared handle; `None` with `locked_commit` (or a device that has
    /// none): commits then write and flush under the lock, as the engine does by itself.
    io: Option<Arc<dyn SharedIo>>,
}

impl Committer {
    pub fn new(state: Arc<RwLock<State>>, io: Option<Arc<dyn SharedIo>>) -> Committer {
        Committer { state, flushing: Arc::new((Mutex::new(false), Condvar::new())), io }
    }

    /// The engine to change. A panic while holding the lock left the engine in an unknown
    /// state: refuse.
    pub fn lock(&self) -> Result<RwLockWriteGuard<'_, State>, Errno> {
        self.state.write().map_err(|_| Errno::EIO)
    }

    /// The engine to look at, alongside other readers.
    pub fn read(&self) -> Result<RwLockReadGuard<'_, State>, Errno> {
        self.state.read().map_err(|_| Errno::EIO)
    }

    /// After a call: writes the commits it prepared (without the lock) and, if one of
    /// them must be durable before the call returns, waits for it.
    pub fn finish(&self, mut st: RwLockWriteGuard<'_, State>) -> Result<(), Errno> {
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
        let Some(io) = self.io.clone() else {
            // Locked commits: flush under the lock.
            let mut st = self.lock()?;
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
        let (flag, ended) = &*self.flushing;
        loop {
            let (durable, written, failed) = {
                let st = self.read()?;
                let fs = st.fs.as_ref().ok_or(Errno::EIO)?;
                (fs.durable_ticket(), fs.written_upto(), st.failure.is_some())
            };
            if durable >= ticket {
                return Ok(());
            }
            if failed {
                return Err(Errno::EIO);
            }
            let mut busy = flag.lock().map_err(|_| Errno::EIO)?;
            if *busy {
                // The flusher clears the flag (after telling the engine) under this mutex,
                // then signals: no wake-up is lost.
                drop(ended.wait(busy).map_err(|_| Errno::EIO)?);
                continue;
            }
            if written < ticket {
                drop(busy);
                let pending = self.read()?.fs.as_ref().ok_or(Errno::EIO)?.pending_io(ticket);
                self.write_out(&pending)?;
                continue;
            }
            *busy = true;
            drop(busy);
            let r = io.flush();
            let done = {
                let mut st = self.lock()?;
                let st = &mut *st;
                match (st.fs.as_mut(), r) {
                    (Some(fs), Ok(())) => {
                        fs.flushed_upto(written);
                        st.notify();
                        Ok(())
                    }
                    (Some(fs), Err(e)) => {
                        let e = fs.io_failed(format!("flushing: {e}"));
                        st.failure.get_or_insert(e.to_string());
                        st.fail_waiters();
                        Err(Errno::EIO)
                    }
                    (None, _) => Err(Errno::EIO),
                }
            };
            *flag.lock().map_err(|_| Errno::EIO)? = false;
            ended.notify_all();
            done?;
        }
    }
}
