//! The background checkpointer (002 §III-E, "concurrently selective checkpointing"): a
//! thread that runs [`PmemFs::checkpoint_step`](crate::PmemFs::checkpoint_step) units
//! while transactions stay open, so that commit does not pay for checkpoints
//! ([`Tunables::background_checkpoints`](crate::Tunables::background_checkpoints)).
//!
//! What runs in parallel: the engine is one `&mut PmemFs`, so whoever shares it holds it
//! behind one lock, and the checkpointer takes that lock per unit (a few blocks, a handful
//! of fences). A unit and a call of a transaction never run at the same time; between units
//! every call (begin, write, commit, abort) goes on, and open transactions stay open across
//! units. What leaves the commit path is the checkpoint's CPU time and its device latency,
//! which the checkpointer thread spends while the committer does other work (or waits for
//! the lock, if it wants it during a unit). A commit that finds the log or the free blocks
//! exhausted still checkpoints inline and blocks.
//!
//! The thread is owned by a [`Checkpointer`]: [`Checkpointer::stop`] (or dropping it, on
//! any error path) stops and joins it, so no thread outlives its owner.

use crate::error::{PmemFsError, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// The lock an engine shared with a checkpointer sits behind: a mutex the checkpointer gets
/// between two calls of a busy caller. (With a plain mutex, a caller that unlocks and locks
/// again at once re-takes it before the woken checkpointer runs, so the checkpointer starves
/// until the log is exhausted and a commit checkpoints inline after all.)
#[derive(Debug, Default)]
pub struct Gate<T> {
    inner: Mutex<T>,
    /// The checkpointer waits for the lock: callers let it in first.
    waiting: AtomicBool,
}

impl<T> Gate<T> {
    pub fn new(t: T) -> Gate<T> {
        Gate {
            inner: Mutex::new(t),
            waiting: AtomicBool::new(false),
        }
    }

    /// A caller's lock: waits while the checkpointer is about to take it (yielding: the
    /// window is the checkpointer's wake-up; once it holds the lock, this blocks).
    pub fn lock(&self) -> MutexGuard<'_, T> {
        while self.waiting.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        relock(&self.inner)
    }

    /// The value, once nothing else holds the gate.
    pub fn into_inner(self) -> T {
        self.inner.into_inner().unwrap_or_else(|p| p.into_inner())
    }

    /// The checkpointer's lock: ahead of callers that come after it asked.
    pub fn lock_for_checkpoint(&self) -> MutexGuard<'_, T> {
        self.waiting.store(true, Ordering::Release);
        let g = relock(&self.inner);
        self.waiting.store(false, Ordering::Release);
        g
    }
}

/// Locks, taking over a lock whose holder panicked (the panic is reported where it happened;
/// the engine's own invariants are asserted on its next call).
fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the thread did, returned by [`Checkpointer::stop`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Worked {
    /// Wake-ups (pokes seen) and units run.
    pub wakeups: u64,
    pub units: u64,
}

#[derive(Default)]
struct State {
    stop: bool,
    pokes: u64,
}

#[derive(Default)]
struct Signal {
    state: Mutex<State>,
    wake: Condvar,
}

impl Signal {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere cannot leave `State` half-changed (two plain fields).
        relock(&self.state)
    }

    fn poke(&self) {
        let mut st = self.lock();
        st.pokes = st.pokes.wrapping_add(1);
        drop(st);
        self.wake.notify_one();
    }
}

/// Wakes a [`Checkpointer`]'s thread ([`Checkpointer::poker`]).
#[derive(Clone)]
pub struct Poker(Arc<Signal>);

impl Poker {
    /// As [`Checkpointer::poke`].
    pub fn poke(&self) {
        self.0.poke();
    }
}

impl std::fmt::Debug for Poker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Poker")
    }
}

/// Owns the checkpointer thread.
pub struct Checkpointer {
    signal: Arc<Signal>,
    thread: Option<JoinHandle<Result<Worked>>>,
}

impl Checkpointer {
    /// Spawns the thread. `step` takes the engine's lock and runs one unit, saying whether
    /// more work is due ([`PmemFs::background_unit`](crate::PmemFs::background_unit)); the
    /// thread runs units while it says so, and otherwise sleeps until
    /// [`Checkpointer::poke`]. An error ends the thread; [`Checkpointer::stop`] returns it.
    pub fn spawn<F>(name: &str, step: F) -> Result<Checkpointer>
    where
        F: FnMut() -> Result<bool> + Send + 'static,
    {
        let signal = Arc::new(Signal::default());
        let s = Arc::clone(&signal);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || run(&s, step))
            .map_err(|e| PmemFsError::Internal(format!("spawning checkpointer {name}: {e}")))?;
        Ok(Checkpointer {
            signal,
            thread: Some(thread),
        })
    }

    /// Wakes the thread: work is due (a commit made some). Cheap when it is awake already.
    pub fn poke(&self) {
        self.signal.poke();
    }

    /// A handle that only pokes, for code that cannot own the checkpointer (a server's
    /// state, which the thread's own closure shares). Poking a stopped thread does nothing.
    pub fn poker(&self) -> Poker {
        Poker(Arc::clone(&self.signal))
    }

    /// Stops the thread after its current unit and joins it; its error, if it had one.
    pub fn stop(mut self) -> Result<Worked> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<Worked> {
        let Some(t) = self.thread.take() else {
            return Ok(Worked::default());
        };
        self.signal.lock().stop = true;
        self.signal.wake.notify_one();
        t.join()
            .unwrap_or_else(|_| Err(PmemFsError::Internal("the checkpointer panicked".into())))
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        // An error path that did not call stop: the thread is still joined (its error is
        // lost, as the owner's own error is what the caller sees).
        let _ = self.shutdown();
    }
}

/// The thread: sleep until poked (or stopped), then run units while work is due.
fn run<F: FnMut() -> Result<bool>>(signal: &Signal, mut step: F) -> Result<Worked> {
    let mut w = Worked::default();
    let mut seen = 0;
    loop {
        {
            let mut st = signal.lock();
            while !st.stop && st.pokes == seen {
                st = signal.wake.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            if st.stop {
                return Ok(w);
            }
            seen = st.pokes;
        }
        w.wakeups += 1;
        loop {
            w.units += 1;
            if !step()? || signal.lock().stop {
                break;
            }
            // Let a committer waiting for the engine's lock in before the next unit.
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn runs_units_when_poked_and_joins_on_stop() {
        let left = Arc::new(AtomicU64::new(0));
        let l = Arc::clone(&left);
        let c = Checkpointer::spawn("test-ckpt", move || {
            // Work is due while `left` > 0; each unit does one.
            Ok(
                l.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |x| x.checked_sub(1))
                    .is_ok_and(|x| x > 1),
            )
        })
        .expect("spawn");
        left.store(5, Ordering::SeqCst);
        c.poke();
        while left.load(Ordering::SeqCst) > 0 {
            std::thread::yield_now();
        }
        let w = c.stop().expect("no error");
        assert!(w.wakeups >= 1 && w.units >= 5, "{w:?}");
    }

    #[test]
    fn an_error_ends_the_thread_and_stop_returns_it() {
        let c = Checkpointer::spawn("test-ckpt-err", || {
            Err(PmemFsError::Internal("boom".into()))
        })
        .expect("spawn");
        c.poke();
        let e = c.stop();
        // The poke may come after stop's flag in a slow start: either way, joined.
        assert!(e.is_ok() || e.is_err_and(|e| e.to_string().contains("boom")));
    }

    #[test]
    fn drop_joins_the_thread() {
        let ran = Arc::new(AtomicU64::new(0));
        let r = Arc::clone(&ran);
        let c = Checkpointer::spawn("test-ckpt-drop", move || {
            r.fetch_add(1, Ordering::SeqCst);
            Ok(false)
        })
        .expect("spawn");
        c.poke();
        drop(c);
        // Joined: the closure (and its Arc) is gone.
        assert_eq!(Arc::strong_count(&ran), 1);
    }
}
