//! Commits outside the engine lock: a request prepares its commit under the lock, then
//! writes it and waits for a flush without it, so other requests (other streams' writes,
//! reads, lookups, other fsyncs) go on meanwhile; fsyncs waiting at the same time share one
//! flush (group commit). See `intactfs::engine::io` for why this is crash-consistent.

use fuser::Errno;
use intactfs::{CommitIo, Fs};
use intactfs_device::{ImageDevice, SharedIo};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// The longest a flush waits for more fsyncs to join it (`Flushing::gather`).
const MAX_GATHER: Duration = Duration::from_millis(1);

/// The group commit's shared state (under `Committer::flushing`'s mutex).
#[derive(Default)]
struct Flushing {
    /// A flush outside the lock is being gathered or is under way.
    busy: bool,
    /// Callers in `wait_durable` now.
    waiting: usize,
    /// How many callers were waiting when the previous flush started.
    last_batch: usize,
    /// Moving average of a flush's duration.
    flush_avg: Duration,
}

impl Flushing {
    /// How long a flush about to start waits for more callers: while fewer wait than
    /// shared the previous flush, up to half a flush (at most `MAX_GATHER`). Without it the
    /// callers a flush releases come back during the next flush and wait for the one
    /// after, so N concurrent fsyncers split into groups that alternate (about two per
    /// flush with four); waiting a fraction of a flush lets them all share one, as ext4's
    /// journal waits for more writers before a commit when several are syncing.
    fn gather(&self) -> Option<Duration> {
        (self.waiting < self.last_batch)
            .then(|| (self.flush_avg / 2).min(MAX_GATHER))
            .filter(|d| !d.is_zero())
    }
}

/// Counts a caller of `wait_durable` in `Flushing::waiting` while it lives.
struct Waiting<'a>(&'a (Mutex<Flushing>, Condvar, Condvar));

impl<'a> Waiting<'a> {
    fn enter(f: &'a (Mutex<Flushing>, Condvar, Condvar)) -> Result<Waiting<'a>, Errno> {
        f.0.lock().map_err(|_| Errno::EIO)?.waiting += 1;
        // A flush gathering callers may now have enough.
        f.2.notify_all();
        Ok(Waiting(f))
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut g = self.0 .0.lock().unwrap_or_else(|p| p.into_inner());
        g.waiting = g
            .waiting
            .checked_sub(1)
            .expect("Flushing::waiting: a Waiting guard left more often than it entered");
    }
}

/// What the committer needs of the server's state (`block::BlockState` implements it; a trait so
/// that this module does not import the server, which uses the committer).
pub trait CommitState {
    /// The engine; None once it is gone.
    fn engine(&self) -> Option<&Fs<ImageDevice>>;
    fn engine_mut(&mut self) -> Option<&mut Fs<ImageDevice>>;
    /// Whether a failure has made further changes unsafe.
    fn has_failed(&self) -> bool;
    /// Records the first failure (`why`) and answers the waiting DURABLE calls with EIO.
    fn fail(&mut self, why: String);
    /// After commits were written or flushed: answers the waiters whose ticket is durable.
    fn notify(&mut self);
}

/// What the request threads and the periodic committer share to write commits.
pub struct Committer<S> {
    pub state: Arc<RwLock<S>>,
    /// The group commit: its state; signalled when a flush ends; signalled when a caller
    /// arrives (for a flush gathering callers).
    flushing: Arc<(Mutex<Flushing>, Condvar, Condvar)>,
    /// The device's shared handle; `None` with `locked_commit` (or a device that has
    /// none): commits then write and flush under the lock, as the engine does by itself.
    io: Option<Arc<dyn SharedIo>>,
}

impl<S> Clone for Committer<S> {
    fn clone(&self) -> Self {
        Committer {
            state: self.state.clone(),
            flushing: self.flushing.clone(),
            io: self.io.clone(),
        }
    }
}

impl<S: CommitState> Committer<S> {
    pub fn new(state: Arc<RwLock<S>>, io: Option<Arc<dyn SharedIo>>) -> Committer<S> {
        Committer {
            state,
            flushing: Arc::new((
                Mutex::new(Flushing::default()),
                Condvar::new(),
                Condvar::new(),
            )),
            io,
        }
    }

    /// The engine to change. A panic while holding the lock left the engine in an unknown
    /// state: refuse.
    pub fn lock(&self) -> Result<RwLockWriteGuard<'_, S>, Errno> {
        self.state.write().map_err(|_| Errno::EIO)
    }

    /// The engine to look at, alongside other readers.
    pub fn read(&self) -> Result<RwLockReadGuard<'_, S>, Errno> {
        self.state.read().map_err(|_| Errno::EIO)
    }

    /// After a call: writes the commits it prepared (without the lock) and, if one of
    /// them must be durable before the call returns, waits for it.
    pub fn finish(&self, mut st: RwLockWriteGuard<'_, S>) -> Result<(), Errno> {
        let Some(fs) = st.engine_mut() else {
            return Ok(());
        };
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
        let Some(io) = self.io.as_deref() else {
            return Ok(());
        };
        let failed = ios.iter().find_map(|c| c.perform_shared(io).err());
        let mut st = self.lock()?;
        let st = &mut *st;
        let Some(fs) = st.engine_mut() else {
            return Err(Errno::EIO);
        };
        let r = match failed {
            Some(e) => Err(fs.io_failed(e)),
            None => fs.io_done(),
        };
        r.map_err(|e| {
            st.fail(format!("writing a commit: {e}"));
            Errno::EIO
        })
    }

    /// Returns once every commit up to `ticket` is on the media: writes those not yet
    /// written (another thread may be writing them: done ones are skipped), then flushes
    /// once for everything written so far (after gathering callers: `Flushing::gather`),
    /// unless another thread's flush is under way, which it waits for and checks again.
    pub fn wait_durable(&self, ticket: u64) -> Result<(), Errno> {
        let Some(io) = self.io.clone() else {
            // Locked commits: flush under the lock.
            let mut st = self.lock()?;
            let fs = st.engine_mut().ok_or(Errno::EIO)?;
            if fs.durable_ticket() < ticket {
                if let Err(e) = fs.flush() {
                    st.fail(format!("flushing: {e}"));
                    return Err(Errno::EIO);
                }
            }
            st.notify();
            return Ok(());
        };
        let (flag, ended, arrived) = &*self.flushing;
        let _waiting = Waiting::enter(&self.flushing)?;
        loop {
            let (durable, written, failed) = {
                let st = self.read()?;
                let fs = st.engine().ok_or(Errno::EIO)?;
                (fs.durable_ticket(), fs.written_upto(), st.has_failed())
            };
            if durable >= ticket {
                return Ok(());
            }
            if failed {
                return Err(Errno::EIO);
            }
            let mut f = flag.lock().map_err(|_| Errno::EIO)?;
            if f.busy {
                // The flusher clears the flag (after telling the engine) under this mutex,
                // then signals: no wake-up is lost.
                drop(ended.wait(f).map_err(|_| Errno::EIO)?);
                continue;
            }
            if written < ticket {
                drop(f);
                let pending = self.read()?.engine().ok_or(Errno::EIO)?.pending_io(ticket);
                self.write_out(&pending)?;
                continue;
            }
            f.busy = true;
            let written = match f.gather() {
                None => {
                    f.last_batch = f.waiting;
                    drop(f);
                    written
                }
                Some(d) => {
                    // Callers arriving meanwhile wrote their commits before they came, so
                    // the flush covers them if `written` is read after the wait.
                    let mut f = match gather(arrived, f, d) {
                        Ok(f) => f,
                        Err(e) => {
                            self.end_flush(None);
                            return Err(e);
                        }
                    };
                    f.last_batch = f.waiting;
                    drop(f);
                    match self.read() {
                        Ok(st) => st.engine().map_or(written, |fs| fs.written_upto()),
                        Err(e) => {
                            self.end_flush(None);
                            return Err(e);
                        }
                    }
                }
            };
            let started = Instant::now();
            let r = io.flush();
            let done = {
                let mut st = self.lock()?;
                let st = &mut *st;
                // Some(why): the flush failed and the engine says why.
                let outcome = match (st.engine_mut(), r) {
                    (Some(fs), Ok(())) => {
                        fs.flushed_upto(written);
                        Ok(())
                    }
                    (Some(fs), Err(e)) => Err(Some(fs.io_failed(format!("flushing: {e}")))),
                    (None, _) => Err(None),
                };
                match outcome {
                    Ok(()) => {
                        st.notify();
                        Ok(())
                    }
                    Err(why) => {
                        if let Some(e) = why {
                            st.fail(e.to_string());
                        }
                        Err(Errno::EIO)
                    }
                }
            };
            self.end_flush(Some(started.elapsed()));
            done?;
        }
    }

    /// Clears the busy flag (with a flush's duration for the average) and wakes waiters.
    fn end_flush(&self, took: Option<Duration>) {
        let (flag, ended, _) = &*self.flushing;
        {
            let mut f = flag.lock().unwrap_or_else(|p| p.into_inner());
            f.busy = false;
            if let Some(t) = took {
                // An average over about the last eight flushes.
                f.flush_avg = if f.flush_avg.is_zero() {
                    t
                } else {
                    (f.flush_avg * 7 + t) / 8
                };
            }
        }
        ended.notify_all();
    }
}

/// Waits on `arrived` up to `d` while fewer callers wait than shared the previous flush.
fn gather<'a>(
    arrived: &Condvar,
    mut f: MutexGuard<'a, Flushing>,
    d: Duration,
) -> Result<MutexGuard<'a, Flushing>, Errno> {
    let deadline = Instant::now() + d;
    while f.waiting < f.last_batch {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        f = arrived
            .wait_timeout(f, deadline - now)
            .map_err(|_| Errno::EIO)?
            .0;
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flushing(waiting: usize, last_batch: usize, avg_us: u64) -> Flushing {
        Flushing {
            busy: true,
            waiting,
            last_batch,
            flush_avg: Duration::from_micros(avg_us),
        }
    }

    #[test]
    fn a_flush_gathers_only_while_fewer_wait_than_shared_the_last_one() {
        assert_eq!(
            flushing(1, 4, 400).gather(),
            Some(Duration::from_micros(200))
        );
        assert_eq!(
            flushing(4, 4, 400).gather(),
            None,
            "all of the last batch are here"
        );
        assert_eq!(
            flushing(1, 1, 400).gather(),
            None,
            "a lone fsyncer never waits"
        );
        assert_eq!(flushing(1, 4, 0).gather(), None, "no flush measured yet");
        assert_eq!(flushing(1, 4, 50_000).gather(), Some(MAX_GATHER), "bounded");
    }

    #[test]
    fn gathering_ends_when_the_last_batch_is_back_or_at_the_deadline() {
        let f = Arc::new((
            Mutex::new(flushing(1, 3, 400)),
            Condvar::new(),
            Condvar::new(),
        ));
        let started = Instant::now();
        // Nobody comes: the wait ends at its deadline with the one caller.
        let g = gather(&f.2, f.0.lock().unwrap(), Duration::from_millis(20)).unwrap();
        assert_eq!(g.waiting, 1);
        assert!(started.elapsed() >= Duration::from_millis(20));
        drop(g);
        // Two more arrive: the wait ends with three, however long the deadline.
        let f2 = f.clone();
        let arrivals = std::thread::spawn(move || {
            let a = Waiting::enter(&f2).unwrap();
            let b = Waiting::enter(&f2).unwrap();
            std::mem::forget((a, b));
        });
        let g = gather(&f.2, f.0.lock().unwrap(), Duration::from_secs(600)).unwrap();
        assert_eq!(g.waiting, 3);
        drop(g);
        arrivals.join().unwrap();
    }
}
