//! Durability and tickets: OptFS's asynchronous durability notifications (`001` §4:
//! in-order journal recovery and release, reuse after notification; §4.4 `osync()` and
//! `dsync()`; §5 durability timeouts, the mount's periodic [`Fs::flush`]).
//!
//! Every commit's record has a sequence number, its *ticket*. A commit waits for its
//! device flush (fsync, dsync, sync) or does not (osync, and fsync in a FSYNC_AS_OSYNC
//! stream): recovery replays records in order and stops at the first whose data did not
//! all arrive, so an osync orders without waiting. The state here says how far that has
//! got:
//! * `written` ([`Fs::written_ticket`]): the last record written or prepared;
//! * `durable` ([`Fs::durable_ticket`]): the last record a completed flush covers;
//! * `carried`: the highest durable ticket a record on the media carries (recovery checks
//!   the data of every record after it, so what those records' writers wrote is reused
//!   only after it: [`Fs::released`]);
//! * `owed`: with deferred I/O, the ticket the caller must make durable before a call
//!   returns.
//!
//! Order: carried ≤ durable ≤ written, asserted where they move (and checked by
//! `check_invariants`); records are noted in ticket order, each carrying a durable ticket
//! below its own.

use super::*;

/// The tickets of a mount (module doc), owned by this module.
#[derive(Debug)]
pub(super) struct Tickets {
    /// The last record known to be on the media (a flush completed after it was written).
    durable: u64,
    /// The highest durable ticket that a record on the media carries.
    carried: u64,
    /// Records or data written since the last flush (osync commits).
    unflushed: bool,
    /// With deferred I/O: the ticket a call's durable commit needs on the media before the
    /// call may return ([`Fs::take_owed`]).
    owed: Option<u64>,
}

impl Tickets {
    /// At mount: everything recovered is durable, up to `durable`.
    pub(super) fn new(durable: u64) -> Tickets {
        Tickets {
            durable,
            carried: durable,
            unflushed: false,
            owed: None,
        }
    }

    pub(super) fn durable(&self) -> u64 {
        self.durable
    }

    pub(super) fn carried(&self) -> u64 {
        self.carried
    }

    pub(super) fn unflushed(&self) -> bool {
        self.unflushed
    }

    /// What commits freed is reusable up to here (see [`Fs::released`]).
    fn releasable(&self) -> u64 {
        self.durable.min(self.carried + 1)
    }

    /// A checkpoint's header flip flushed every record written before it (`written`).
    pub(super) fn checkpointed(&mut self, written: u64) {
        assert!(
            written >= self.durable,
            "a checkpoint at ticket {written}, below the durable {}",
            self.durable
        );
        self.durable = written;
        self.carried = written;
        self.unflushed = false;
    }

    /// Breaks the ticket order, for the invariant checker's own test.
    #[cfg(test)]
    pub(super) fn force_durable(&mut self, durable: u64) {
        self.durable = durable;
    }
}

impl<D: BlockDevice> Fs<D> {
    /// OptFS `osync()` (§4.4): commits what `fsync` would, without waiting for the device.
    /// After it returns, no later update of the stream survives a crash without every
    /// update before it (the records are recovered in order, each only if its data
    /// arrived); they become durable at the next flush ([`Self::flush`], a `dsync`, a
    /// `sync` or any flushing commit). Returns the ticket to compare with
    /// [`Self::durable_ticket`]: the osync'd point is durable once that reaches it.
    pub fn osync(&mut self, s: StreamId, ino: Ino) -> Result<u64> {
        self.usable()?;
        self.node(ino)?;
        if self.opts.read_only {
            return Ok(self.tickets.durable());
        }
        self.sync_file(s, ino, false)?;
        Ok(self.written_ticket())
    }

    /// OptFS `dsync()`: `fsync` whatever the stream's flags: everything before it in the
    /// stream (and earlier osyncs of any stream) is on the media when it returns.
    pub fn dsync(&mut self, s: StreamId, ino: Ino) -> Result<()> {
        self.usable()?;
        self.node(ino)?;
        if self.opts.read_only {
            return Ok(());
        }
        self.sync_file(s, ino, true)
    }

    pub(super) fn sync_file(&mut self, s: StreamId, ino: Ino, flush: bool) -> Result<()> {
        self.writable()?;
        // Inside an atomic region nothing commits before the region does.
        if self.is_region(s) {
            return Ok(());
        }
        // The file's other group first, so that one flush covers both (not a region's:
        // its changes are durable at its commit, not at someone's fsync).
        if let Some(o) = self.streams.owner_of(&Key::Ino(ino)) {
            let root = self.streams.find(o);
            if root != self.streams.find(s) && !self.is_region(root) {
                let g = self.streams.group(o);
                self.commit_with(&g, Wait::Written)?;
            }
        }
        let g = self.streams.group(s);
        self.commit_with(&g, if flush { Wait::Caller } else { Wait::Written })
    }

    /// Makes every record written so far durable (one flush if any is not yet): the
    /// durability timeout of the mount and the notification path call it.
    pub fn flush(&mut self) -> Result<()> {
        if self.opts.read_only || !self.has_unflushed() {
            return Ok(());
        }
        self.writable()?;
        self.drain()?;
        if let Err(e) = self.dev.flush() {
            return Err(self.poison(format!("flushing: {e}")));
        }
        self.stats.flushes += 1;
        self.flushed();
        Ok(())
    }

    /// The last commit known to be on the media: an osync ticket at or below it is durable.
    pub fn durable_ticket(&self) -> u64 {
        self.tickets.durable()
    }

    /// The last commit written (durable or not).
    pub fn written_ticket(&self) -> u64 {
        self.next_seq - 1
    }

    /// Some commit was written without a flush and is not yet known durable.
    pub fn has_unflushed(&self) -> bool {
        self.tickets.unflushed() || self.inflight_bytes() > 0
    }

    /// The ticket that must be durable before the last calls may return (deferred I/O:
    /// a durable commit the caller writes and flushes), once.
    pub fn take_owed(&mut self) -> Option<u64> {
        self.tickets.owed.take()
    }

    pub(crate) fn owe(&mut self, seq: u64) {
        self.tickets.owed = Some(self.tickets.owed.map_or(seq, |o| o.max(seq)));
    }

    /// Record `seq`, carrying durable ticket `carries`, is written (or being written): not
    /// durable before a flush after it.
    pub(crate) fn note_record(&mut self, seq: u64, carries: u64) {
        // Pair of the checks in durable_advanced: records in ticket order, each carrying a
        // durable ticket below its own.
        assert!(
            carries < seq,
            "record {seq} carries durable ticket {carries}"
        );
        assert!(
            carries <= self.tickets.durable,
            "record {seq} carries durable ticket {carries}, past the durable {}",
            self.tickets.durable
        );
        self.inflight.push_record(seq, carries);
        self.tickets.unflushed = true;
    }

    /// Every record up to `upto` is on the media.
    pub(crate) fn durable_advanced(&mut self, upto: u64) {
        // The durable ticket never passes a record not yet prepared (issue 25).
        assert!(
            upto <= self.written_ticket(),
            "durable up to {upto}, past the last record prepared ({})",
            self.written_ticket()
        );
        let t = &mut self.tickets;
        t.durable = t.durable.max(upto);
        if let Some(c) = self.inflight.pop_records_upto(t.durable) {
            t.carried = t.carried.max(c);
        }
        t.unflushed = t.durable < self.next_seq - 1;
        assert!(
            t.carried <= t.durable,
            "carried ticket past the durable one"
        );
        self.released();
    }

    /// A flush completed after a drain: every record written so far is on the media.
    pub(super) fn flushed(&mut self) {
        self.durable_advanced(self.written_ticket());
    }

    /// Releases what durable commits freed. A block freed by commit F was written by an
    /// earlier commit W, whose record recovery checks against the block's checksum unless
    /// a record on the media says W was durable. So F's frees are reusable once F is on
    /// the media *and* some record on the media carries `durable_upto` ≥ F − 1 ≥ W. With
    /// flushing commits only, F itself carries F − 1, and this is "after F's flush"; after
    /// osync commits it may take one more flushed record (or a checkpoint).
    pub(super) fn released(&mut self) {
        let upto = self.tickets.releasable();
        self.alloc.durable_upto(upto);
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending_inos)
            .into_iter()
            .partition(|p| p.0 <= upto);
        self.pending_inos = later;
        self.free_inos.extend(now.into_iter().map(|p| p.1));
    }

    /// After a checkpoint nothing older is replayed or checked: everything freed so far
    /// may be reused.
    pub(super) fn released_all(&mut self) {
        self.alloc.durable();
        self.free_inos
            .extend(self.pending_inos.drain(..).map(|p| p.1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_makes_everything_written_durable() {
        let mut t = Tickets::new(3);
        t.unflushed = true;
        t.checkpointed(9);
        assert_eq!((t.durable(), t.carried(), t.unflushed()), (9, 9, false));
        assert_eq!(t.releasable(), 9);
    }

    #[test]
    #[should_panic(expected = "below the durable")]
    fn a_checkpoint_never_moves_durable_back() {
        Tickets::new(5).checkpointed(4);
    }
}
