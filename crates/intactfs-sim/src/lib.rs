//! Deterministic crash simulation of the intactfs engine (design brief, "Validation
//! strategy"; issue "intactfs 1/2" item 5; osync/dsync: issue 12 item 3).
//!
//! One run, from a seed:
//! 1. mkfs on a [`SimDevice`]; a seeded random workload over several streams runs on the
//!    engine and, in lockstep, on the independent reference model ([`intactfs_model::MState`],
//!    shared with the pmem engine's simulation; every call must succeed or fail on both); every device write and flush is logged. Besides the mutating calls
//!    the workload syncs: `sync`, `streamsync`, `fsync` (a no-op in the IGNORE_FSYNC
//!    stream, an osync in the FSYNC_AS_OSYNC stream of some configurations), `osync`,
//!    `dsync` and `flush` (the durability timeout). The engine's tickets are checked as the
//!    workload runs: an osync returns the last record written, and after any flushing call
//!    `durable_ticket()` covers every earlier osync ticket and every commit in the log.
//! 2. The device log is replayed; after every write and every flush (a crash point) the
//!    simulated device draws several images its volatile-cache semantics allow.
//! 3. Each image must pass fsck, mount (recovery), pass fsck again after mount, accept new
//!    work, and hold a state the oracle allows (see [`run`]).
//!
//! The promise the oracle checks, with optimistic commits (OptFS §4): every recovered
//! image equals the model after some **commit boundary** k — each stream's prefix p_s(k)
//! of calls, replayed in real-time order — where
//! * k is at least the number of commits known durable when the crash came (commits whose
//!   record sequence number is at or below `durable_ticket()` after the last call that
//!   returned before the crash point): an osync'd commit may be lost until a flush
//!   (`flush`, `dsync`, a durable `fsync`, `streamsync`, `sync`, a checkpoint) makes it
//!   durable, a flushed one never;
//! * k is at most the commits issued by the end of the call in progress;
//! * p_s(k) covers every call acknowledged durable before the crash: `dsync` and
//!   `streamsync` (stream s), `sync` (every stream), `fsync` in a stream that neither
//!   ignores fsync nor treats it as osync — never `osync` alone;
//! * p_s(k) is closed under the relatedness rule (a later related call of another stream is
//!   present only if the earlier one is).
//!
//! Because the accepted states are exactly commit boundaries (prefixes of the commit
//! order), an image can never hold an update that came after an osync without every
//! update before it: osync orders, only a flush makes durable. The simulation does not
//! need a separate check for that ordering promise; it is the prefix check.
//!
//! **Concurrent commits** ([`concurrent`], issue 17 item 6): the engine runs with deferred
//! I/O, as under the FUSE daemon. A commit is prepared in the call and its writes are left
//! to the workload, which plays the daemon's other threads between calls: it writes
//! commits of its pool in an order of its choosing (the newest half the time, so often
//! while an older one is unwritten), and issues group flushes (`Fs::flush_written`) at
//! random moments, often right after writing a commit while others are unwritten. fsync,
//! dsync and streamsync return before they are durable; each is acknowledged (enters the
//! oracle's acknowledged prefix, with the stream's calls up to it, not those made while it
//! waited) only once `durable_ticket()` reaches the `written_ticket()` it returned with.
//! Every device write and flush stays a crash point, so the images include a later
//! commit's writes on the media before an earlier one's, and a flush that made them
//! durable while the earlier one was still unwritten. The oracle is the same.

mod config;
pub mod faults;
mod report;
mod touch;
mod workload;
pub use config::{concurrent, mixed, on_txflash, with_regions, SimConfig};
pub use intactfs_types::longrun::SimFailure;
pub use report::SimReport;
use workload::run_workload;

use intactfs::fsck::fsck;
use intactfs::prelude::*;
use intactfs::{
    mkfs, Fs, Ino, MkfsOptions, MountOptions, Owner, RenameFlags, SetAttr, StreamFlags, Time,
    XattrMode, BLOCK, ROOT,
};
use intactfs_device::{BlockDevice, DeviceError, SimDevice, TxSimDevice};
use intactfs_model::{by_first_path, diff, MData, MIno, MOp, MState, Snap, MROOT};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use touch::Touch;

#[derive(Clone, Debug)]
enum DevOp {
    Write(u64, Vec<u8>),
    Flush,
    TxWrite(u64, u64, Vec<u8>),
    TxCommit(u64),
    TxAbort(u64),
}

impl DevOp {
    fn apply(&self, dev: &mut TxSimDevice) -> Result<(), DeviceError> {
        match self {
            DevOp::Write(b, d) => dev.write(*b, d),
            DevOp::Flush => dev.flush(),
            DevOp::TxWrite(t, b, d) => dev.tx_write(*t, *b, d),
            DevOp::TxCommit(t) => dev.tx_commit(*t),
            DevOp::TxAbort(t) => dev.tx_abort(*t),
        }
    }
}

/// The simulated device (the block device's twin, or with `tx` the transactional flash
/// device's: without it the tx methods are never called), logging every operation; with
/// `faults`, failing the write or flush they say ([`faults`]).
struct Logged {
    dev: TxSimDevice,
    tx: bool,
    log: Vec<DevOp>,
    faults: Option<faults::Shared>,
}

impl Logged {
    fn inject(&mut self, what: &'static str) -> Result<(), DeviceError> {
        self.faults
            .as_ref()
            .map_or(Ok(()), |f| faults::inject(f, what))
    }
}

impl BlockDevice for Logged {
    fn block_size(&self) -> usize {
        self.dev.block_size()
    }
    fn blocks(&self) -> u64 {
        self.dev.blocks()
    }
    fn read(&mut self, b: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.dev.read(b, buf)
    }
    fn write(&mut self, b: u64, d: &[u8]) -> Result<(), DeviceError> {
        self.inject("writing")?;
        self.log.push(DevOp::Write(b, d.to_vec()));
        self.dev.write(b, d)
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.inject("flushing")?;
        self.log.push(DevOp::Flush);
        self.dev.flush()
    }
    fn transactional(&self) -> bool {
        self.tx
    }
    fn tx_room(&self) -> u64 {
        if self.tx {
            self.dev.tx_room()
        } else {
            0
        }
    }
    fn tx_begin(&mut self, tx: u64) -> Result<(), DeviceError> {
        self.dev.tx_begin(tx)
    }
    fn tx_write(&mut self, tx: u64, b: u64, d: &[u8]) -> Result<(), DeviceError> {
        self.inject("writing in a device transaction")?;
        self.log.push(DevOp::TxWrite(tx, b, d.to_vec()));
        self.dev.tx_write(tx, b, d)
    }
    fn tx_commit(&mut self, tx: u64) -> Result<(), DeviceError> {
        self.inject("committing a device transaction")?;
        self.log.push(DevOp::TxCommit(tx));
        self.dev.tx_commit(tx)
    }
    fn tx_abort(&mut self, tx: u64) -> Result<(), DeviceError> {
        self.log.push(DevOp::TxAbort(tx));
        self.dev.tx_abort(tx)
    }
}

/// One call of the workload as it ran.
#[derive(Clone, Debug)]
struct Done {
    stream: u64,
    /// Some(op) for a mutating call that succeeded (history entry).
    op: Option<MOp>,
    touch: Touch,
    /// Device ops issued when the call returned.
    dev_after: usize,
    /// Commits recorded after the call returned.
    commits_after: usize,
    /// Of those, the commits known durable (sequence number at or below
    /// `durable_ticket()`): a crash after the call keeps at least these.
    durable_commits_after: usize,
    /// A durability acknowledgement: streams whose whole history so far is durable.
    acks: Vec<u64>,
    /// Acknowledgements of earlier durability calls that a flush made durable by now
    /// (deferred I/O): (stream, index in the history of the call): the stream's calls up
    /// to that one are durable.
    late_acks: Vec<(u64, usize)>,
    /// An osync (or an fsync of a FSYNC_AS_OSYNC stream): ordered, not acknowledged.
    osync: bool,
}

impl Done {
    /// A call that just returned, with the engine's commit counts now.
    fn now(fs: &Fs<Logged>, stream: u64, op: Option<MOp>, touch: Touch, acks: Vec<u64>) -> Done {
        let log = fs.commit_log();
        let durable = fs.durable_ticket();
        Done {
            stream,
            op,
            touch,
            dev_after: fs.device().log.len(),
            commits_after: log.len(),
            // The log's sequence numbers never decrease (checked at the end of the workload).
            durable_commits_after: log.partition_point(|c| c.seq <= durable),
            acks,
            late_acks: Vec::new(),
            osync: false,
        }
    }
}

/// The workload's side of deferred I/O ([`SimConfig::concurrent`]): what the FUSE daemon's
/// threads do outside the engine's lock — write prepared commits (in any order), flush for
/// every commit written so far, and acknowledge the durability calls that flush covers.
struct Deferred {
    /// Its own generator, so that the calls drawn from the workload's stay those of the
    /// configuration without deferred I/O.
    rng: ChaCha8Rng,
    /// Prepared commits handed out by `Fs::take_io` and not yet written by the workload
    /// (a drain inside the engine may have written them: then writing them is a no-op).
    pool: Vec<std::sync::Arc<intactfs::CommitIo>>,
    /// Durability calls not yet acknowledged: (written ticket right after the call
    /// returned, stream, index of the call in the history).
    waiting: Vec<(u64, u64, usize)>,
    steps: usize,
    performed: u64,
    out_of_order: u64,
    group_flushes: u64,
    inflight_flushes: u64,
    acking_flushes: u64,
    multi_flushes: u64,
    group_acked: u64,
    waited_calls: u64,
}

/// Every commit up to this one has been written: computed from the commits in flight, not
/// with `Fs::written_upto` (which a mutation breaks).
fn written_prefix<D: BlockDevice>(fs: &Fs<D>) -> u64 {
    fs.pending_io(u64::MAX)
        .first()
        .map_or(fs.written_ticket(), |c| c.seq() - 1)
}

fn trace() -> bool {
    std::env::var_os("INTACTFS_SIM_TRACE").is_some()
}

impl Deferred {
    fn new(seed: u64) -> Deferred {
        Deferred {
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0xdefe_4ed1_0000_0000),
            pool: Vec::new(),
            waiting: Vec::new(),
            steps: 0,
            performed: 0,
            out_of_order: 0,
            group_flushes: 0,
            inflight_flushes: 0,
            acking_flushes: 0,
            multi_flushes: 0,
            group_acked: 0,
            waited_calls: 0,
        }
    }

    /// After a call: takes the commits it prepared, forgets those written meanwhile (by a
    /// drain), and acknowledges the waiting calls a flush inside it made durable.
    fn settle(&mut self, fs: &mut Fs<Logged>, done: &mut Vec<Done>) {
        self.pool.extend(fs.take_io());
        let live = fs.pending_io(u64::MAX);
        self.pool
            .retain(|c| live.iter().any(|l| std::sync::Arc::ptr_eq(l, c)));
        let mut d = Done::now(fs, 0, None, Touch::default(), Vec::new());
        if self.acknowledge(fs, &mut d) > 0 {
            self.steps += 1;
            done.push(d);
        }
    }

    /// Moves the waiting calls the durable ticket now covers into `d`; how many.
    fn acknowledge(&mut self, fs: &Fs<Logged>, d: &mut Done) -> u64 {
        let durable = fs.durable_ticket();
        let mut n = 0;
        self.waiting.retain(|&(t, s, i)| {
            if t > durable {
                return true;
            }
            d.late_acks.push((s, i));
            n += 1;
            false
        });
        // One call may acknowledge several streams (one entry each): count calls.
        let calls: std::collections::BTreeSet<usize> = d.late_acks.iter().map(|a| a.1).collect();
        if trace() && n > 0 {
            eprintln!("durable ticket {durable} acknowledges the calls {calls:?}");
        }
        calls.len() as u64
    }

    /// A durability call returned with its commit prepared, not written (deferred): it
    /// waits for a flush unless the durable ticket already covers it. Returns whether it
    /// waits (its acknowledgements moved out of `acks`).
    fn wait(&mut self, fs: &Fs<Logged>, acks: &mut Vec<u64>, index: usize) -> bool {
        let t = fs.written_ticket();
        if acks.is_empty() || fs.durable_ticket() >= t {
            return false;
        }
        self.waited_calls += 1;
        self.waiting.extend(acks.drain(..).map(|s| (t, s, index)));
        true
    }

    /// Writes one commit of the pool: the newest half the time (out of order whenever an
    /// older one is still unwritten), else any. Returns whether it was out of order.
    fn perform_one(
        &mut self,
        fs: &mut Fs<Logged>,
        done: &mut Vec<Done>,
        seed: u64,
    ) -> Result<bool, SimFailure> {
        let i = if self.rng.random_bool(0.5) {
            (0..self.pool.len())
                .max_by_key(|&i| self.pool[i].seq())
                .expect("not empty")
        } else {
            self.rng.random_range(0..self.pool.len())
        };
        let c = self.pool.swap_remove(i);
        let (prefix, before) = (written_prefix(fs), fs.device().log.len());
        fs.perform_io(&c).map_err(|e| {
            fail(
                seed,
                format!("call {}: writing commit {}: {e}", done.len(), c.seq()),
            )
        })?;
        if fs.device().log.len() == before {
            // Written already (by a drain), or nothing to write.
            return Ok(false);
        }
        self.performed += 1;
        let ooo = c.seq() > prefix + 1;
        self.out_of_order += ooo as u64;
        if trace() {
            eprintln!(
                "call {}: wrote commit {} ({} device writes; written prefix was {prefix}{})",
                done.len(),
                c.seq(),
                fs.device().log.len() - before,
                if ooo { ", out of order" } else { "" }
            );
        }
        self.steps += 1;
        done.push(Done::now(fs, 0, None, Touch::default(), Vec::new()));
        Ok(ooo)
    }

    /// A group flush: every commit written so far becomes durable, and the waiting calls
    /// it covers are acknowledged.
    fn group_flush(
        &mut self,
        fs: &mut Fs<Logged>,
        done: &mut Vec<Done>,
        seed: u64,
    ) -> Result<(), SimFailure> {
        let unwritten = written_prefix(fs) < fs.written_ticket();
        let upto = fs
            .flush_written()
            .map_err(|e| fail(seed, format!("call {}: group flush: {e}", done.len())))?;
        self.group_flushes += 1;
        self.inflight_flushes += unwritten as u64;
        let mut d = Done::now(fs, 0, None, Touch::default(), Vec::new());
        let n = self.acknowledge(fs, &mut d);
        if n > 0 {
            self.acking_flushes += 1;
            self.group_acked += n;
        }
        if n > 1 {
            self.multi_flushes += 1;
        }
        if trace() {
            eprintln!(
                "call {}: group flush up to {upto} (durable ticket {}), acknowledges {n} calls",
                done.len(),
                fs.durable_ticket()
            );
        }
        self.steps += 1;
        done.push(d);
        Ok(())
    }

    /// What the other threads do between two calls: up to three events, each writing a
    /// commit of the pool or (less often) a group flush, which may come while commits are
    /// still unwritten.
    fn step(
        &mut self,
        fs: &mut Fs<Logged>,
        done: &mut Vec<Done>,
        seed: u64,
    ) -> Result<(), SimFailure> {
        for _ in 0..3 {
            match self.rng.random_range(0..100) {
                0..22 if !self.pool.is_empty() => {
                    // The thread that wrote a commit flushes for it while others are still
                    // being written (the group flush must stop below the oldest of them).
                    if (self.perform_one(fs, done, seed)?
                        || written_prefix(fs) < fs.written_ticket())
                        && self.rng.random_bool(0.4)
                    {
                        self.group_flush(fs, done, seed)?;
                    }
                }
                22..34 if fs.device().dev.volatile_writes() > 0 => {
                    self.group_flush(fs, done, seed)?
                }
                _ => break,
            }
        }
        Ok(())
    }

    /// At the end of the workload: every commit left is written, in a random order, and
    /// one group flush covers them.
    fn finish(
        &mut self,
        fs: &mut Fs<Logged>,
        done: &mut Vec<Done>,
        seed: u64,
    ) -> Result<(), SimFailure> {
        self.settle(fs, done);
        while !self.pool.is_empty() {
            self.perform_one(fs, done, seed)?;
        }
        if fs.device().dev.volatile_writes() > 0 {
            self.group_flush(fs, done, seed)?;
        }
        Ok(())
    }
}

fn clock() -> Box<dyn FnMut() -> Time + Send + Sync> {
    let mut t = 1_700_000_000i64;
    Box::new(move || {
        t += 1;
        Time { sec: t, nsec: 0 }
    })
}

fn mount_opts(cfg: &SimConfig, log: bool) -> MountOptions {
    // Incremental checkpoints by seed: long chains (deltas whatever their size, a new base
    // only after 8), the default share (on these small file systems a few deltas, then a
    // new base), or a new base every time.
    let delta_share = [1e9, MountOptions::default().delta_share, 0.0][(cfg.seed % 3) as usize];
    MountOptions {
        dirty_limit: cfg.dirty_limit,
        clock: Some(clock()),
        keep_commit_log: log,
        delta_share,
        ..Default::default()
    }
}

fn fail(seed: u64, msg: impl Into<String>) -> SimFailure {
    SimFailure::new(seed, msg)
}

/// The engine's state, in the model's canonical form: inodes numbered by their first path
/// (the model numbers its own), every file read whole (the simulation's files are small).
pub fn engine_view<D: BlockDevice>(fs: &mut Fs<D>) -> Result<Snap, String> {
    let whole = |fs: &mut Fs<D>, ino: Ino, size: u64| {
        let b = fs
            .read(ino, 0, size as usize)
            .map_err(|e| format!("read: {e}"))?;
        if b.len() as u64 != size {
            return Err(format!("size {size}, but a read gives {} bytes", b.len()));
        }
        Ok(MData::from_bytes(&b).digest())
    };
    intactfs_model::engine_snapshot(fs, ROOT, whole).map(by_first_path)
}

/// What the workload runner counts as it goes.
#[derive(Debug, Default)]
struct Counts {
    dsyncs: u64,
    flushes: u64,
    nospace: u64,
    punches: u64,
    regions_committed: u64,
    regions_aborted: u64,
    region_calls: u64,
    added_writes: u64,
}

struct Workload {
    /// Calls (entries of `done` that are not deferred I/O steps).
    calls: usize,
    done: Vec<Done>,
    log: Vec<DevOp>,
    commits: Vec<intactfs::CommitInfo>,
    base: Vec<u8>,
    final_view: Snap,
    checkpoints: u64,
    delta_checkpoints: u64,
    merges: u64,
    optimistic_commits: u64,
    counts: Counts,
    tx_commits: u64,
    inplace_blocks: u64,
    commits_performed: u64,
    out_of_order: u64,
    group_flushes: u64,
    inflight_flushes: u64,
    acking_flushes: u64,
    multi_flushes: u64,
    group_acked: u64,
    waited_calls: u64,
}

/// The sync-type calls of the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SyncCall {
    Sync,
    Streamsync,
    Fsync,
    Osync,
    Dsync,
    /// `Fs::flush`: the durability timeout.
    Flush,
}

fn name(rng: &mut ChaCha8Rng) -> Vec<u8> {
    // A small name space so that names collide across streams (related operations).
    format!("n{}", rng.random_range(0..6)).into_bytes()
}

/// What an operation claims in the engine's terms (the keys of `intactfs::streams`), over
/// the model's inode numbers: enough to tell whether a call of another stream would join
/// an open atomic region. Coarser than exact (claims files a rename or unlink only
/// unlinks), which only makes the simulation skip a few more calls.
#[derive(Clone, Debug, Default)]
struct Foot {
    claimed: Vec<MIno>,
    entries: Vec<(MIno, Vec<u8>)>,
    in_dirs: Vec<MIno>,
    removes_dir: Option<MIno>,
    dir_tree: bool,
}

impl Foot {
    fn of(model: &MState, op: &MOp, t: &Touch) -> Foot {
        let mut claimed = t.inodes.clone();
        claimed.extend(t.creates_dir);
        claimed.extend(t.removes_dir);
        claimed.extend(t.entries.iter().filter_map(|(p, n)| model.lookup(*p, n)));
        let dir_tree = matches!(op, MOp::Rename { from, to, .. } if from.0 != to.0);
        Foot {
            claimed,
            entries: t.entries.clone(),
            in_dirs: t.in_dirs.clone(),
            removes_dir: t.removes_dir,
            dir_tree,
        }
    }

    /// Whether `later` (another stream's call) relates to this (a region's) call.
    fn related(&self, later: &Foot) -> bool {
        self.claimed
            .iter()
            .any(|i| later.claimed.contains(i) || later.in_dirs.contains(i))
            || self.entries.iter().any(|e| later.entries.contains(e))
            || later.removes_dir.is_some_and(|d| self.in_dirs.contains(&d))
            || (self.dir_tree && later.dir_tree)
    }
}

/// A commit boundary the oracle may accept, with its model state.
struct Candidate {
    prefix: BTreeMap<u64, u64>,
    /// Err: the prefix is not a state the rules allow (with the reason).
    view: Result<Snap, String>,
}

fn candidates(w: &Workload, streams: u64) -> Vec<Candidate> {
    // Histories per stream, and each call's index in its stream.
    let ops: Vec<&Done> = w.done.iter().filter(|d| d.op.is_some()).collect();
    // Position of each mutating call among all calls (as INTACTFS_SIM_TRACE numbers them).
    let pos: Vec<usize> = w
        .done
        .iter()
        .enumerate()
        .filter(|(_, d)| d.op.is_some())
        .map(|(i, _)| i)
        .collect();
    let mut index = Vec::new();
    let mut count: BTreeMap<u64, u64> = BTreeMap::new();
    for d in &ops {
        let c = count.entry(d.stream).or_default();
        index.push(*c);
        *c += 1;
    }
    let mut related = Vec::new();
    for j in 0..ops.len() {
        for i in 0..j {
            if ops[i].stream != ops[j].stream && ops[i].touch.related(&ops[j].touch) {
                related.push((i, j));
            }
        }
    }
    let mut out = Vec::new();
    let mut prefix: BTreeMap<u64, u64> = (0..streams).map(|s| (s, 0)).collect();
    for k in 0..=w.commits.len() {
        if k > 0 {
            for &(s, n) in &w.commits[k - 1].streams {
                prefix.insert(s, n);
            }
        }
        let incl = |i: usize| index[i] < prefix.get(&ops[i].stream).copied().unwrap_or(0);
        let view = (|| {
            // An atomic region is in a state all or nothing.
            for (&r, &p) in prefix.range(intactfs::REGION_BASE..) {
                let total = count.get(&r).copied().unwrap_or(0);
                if p != 0 && p != total {
                    return Err(format!(
                        "atomic region {} has {p} of its {total} calls",
                        r - intactfs::REGION_BASE
                    ));
                }
            }
            for &(i, j) in &related {
                if incl(j) && !incl(i) {
                    return Err(format!("call {} ({:.120}) is present without the earlier related call {} ({:.120})", pos[j], format!("{:?}", ops[j].op), pos[i], format!("{:?}", ops[i].op)));
                }
            }
            let mut m = MState::default();
            for (i, d) in ops.iter().enumerate() {
                if incl(i) && m.try_apply(d.op.as_ref().expect("filtered")).is_err() {
                    return Err(format!(
                        "call {} ({:.120}) does not apply to this prefix",
                        pos[i],
                        format!("{:?}", d.op)
                    ));
                }
            }
            Ok(by_first_path(m.snapshot()))
        })();
        out.push(Candidate {
            prefix: prefix.clone(),
            view,
        });
    }
    out
}

/// Runs one seed: the workload, then every crash point, checking each image against the
/// oracle stated in the crate docs: the recovered state is the model after a commit
/// boundary k with `durable ≤ k ≤ issued`, where `durable` counts the commits known durable
/// (sequence number at or below `durable_ticket()`) after the last call that returned
/// before the crash point and `issued` the commits logged by the end of the call in
/// progress; every stream's prefix at k covers its acknowledged-durable calls (dsync,
/// streamsync, sync, durable fsync; not osync); and the prefix is relatedness-closed.
pub fn run(cfg: &SimConfig) -> Result<SimReport, SimFailure> {
    let seed = cfg.seed;
    let w = run_workload(cfg)?;
    let cands = candidates(&w, cfg.streams);
    let mut report = SimReport {
        calls: w.calls,
        commits_performed: w.commits_performed,
        out_of_order: w.out_of_order,
        group_flushes: w.group_flushes,
        inflight_flushes: w.inflight_flushes,
        acking_flushes: w.acking_flushes,
        multi_flushes: w.multi_flushes,
        group_acked: w.group_acked,
        waited_calls: w.waited_calls,
        device_ops: w.log.len(),
        commits: w.commits.len(),
        checkpoints: w.checkpoints,
        delta_checkpoints: w.delta_checkpoints,
        merges: w.merges,
        osyncs: w.done.iter().filter(|d| d.osync).count() as u64,
        dsyncs: w.counts.dsyncs,
        flushes: w.counts.flushes,
        nospace: w.counts.nospace,
        punches: w.counts.punches,
        regions_committed: w.counts.regions_committed,
        regions_aborted: w.counts.regions_aborted,
        region_calls: w.counts.region_calls,
        added_writes: w.counts.added_writes,
        tx_commits: w.tx_commits,
        inplace_blocks: w.inplace_blocks,
        optimistic_commits: w.optimistic_commits,
        reused_blocks: {
            let data_start = intactfs::layout::JOURNAL_START + cfg.journal_blocks;
            let mut seen = std::collections::BTreeSet::new();
            w.log
                .iter()
                .filter(
                    |op| matches!(op, DevOp::Write(b, _) if *b >= data_start && !seen.insert(*b)),
                )
                .count() as u64
        },
        ..Default::default()
    };
    // Each stream's calls up to each entry of the history (acknowledgements count them).
    let mut counts_at: Vec<BTreeMap<u64, u64>> = Vec::with_capacity(w.done.len());
    let mut count: BTreeMap<u64, u64> = BTreeMap::new();
    for d in &w.done {
        if d.op.is_some() {
            *count.entry(d.stream).or_default() += 1;
        }
        counts_at.push(count.clone());
    }
    let mut dev =
        TxSimDevice::from_image(BLOCK, w.base.clone()).map_err(|e| fail(seed, e.to_string()))?;
    for c in 0..=w.log.len() {
        if c > 0 {
            w.log[c - 1]
                .apply(&mut dev)
                .map_err(|e| fail(seed, e.to_string()))?;
        }
        if c % cfg.point_stride != 0 && c != w.log.len() {
            continue;
        }
        report.crash_points += 1;
        // The commits known durable when the last finished call returned bound the
        // recovered commit from below (an osync'd commit may be lost until a flush); the
        // call in progress bounds it from above.
        let finished: Vec<&Done> = w.done.iter().filter(|d| d.dev_after <= c).collect();
        let k_min = finished
            .last()
            .map(|d| d.durable_commits_after)
            .unwrap_or(0);
        // The newest commit an osync that returned before this point ordered.
        let k_osync = finished
            .iter()
            .rev()
            .find(|d| d.osync)
            .map(|d| d.commits_after);
        let k_max = w
            .done
            .iter()
            .find(|d| d.dev_after > c)
            .map(|d| d.commits_after)
            .unwrap_or(w.commits.len());
        // What was acknowledged durable: per stream, its calls up to the acknowledgement.
        // A late acknowledgement (deferred I/O) covers the calls up to the durability call
        // it acknowledges, not those made while it waited.
        let mut acked: BTreeMap<u64, u64> = BTreeMap::new();
        for (i, d) in w.done.iter().enumerate() {
            if d.dev_after <= c {
                let upto = d
                    .acks
                    .iter()
                    .map(|&s| (s, i))
                    .chain(d.late_acks.iter().copied());
                for (s, j) in upto {
                    let n = counts_at[j].get(&s).copied().unwrap_or(0);
                    let a = acked.entry(s).or_default();
                    *a = (*a).max(n);
                }
            }
        }
        let all = if cfg.exhaustive_up_to > 0 {
            dev.all_images(cfg.exhaustive_up_to)
        } else {
            None
        };
        let images: Vec<intactfs_device::CrashImage> = match all {
            Some(v) => {
                report.exhaustive_points += 1;
                let n = v.len();
                v.into_iter()
                    .enumerate()
                    .map(|(i, bytes)| intactfs_device::CrashImage {
                        bytes,
                        description: format!("{} of all {n} allowed images", i + 1),
                    })
                    .collect()
            }
            None => (0..cfg.images_per_point)
                .map(|j| dev.crash(seed.wrapping_mul(1_000_003) ^ ((c as u64) << 16) ^ j))
                .collect(),
        };
        // A crash inside the device's commit of the next operation: the transaction whole,
        // plain writes since the last flush as the device may leave them.
        let mut images = images;
        if let Some(DevOp::TxCommit(t)) = w.log.get(c) {
            for j in 0..cfg.images_per_point {
                images.push(
                    dev.crash_during_commit(
                        *t,
                        seed.wrapping_mul(7_000_003) ^ ((c as u64) << 16) ^ j,
                    )
                    .map_err(|e| fail(seed, e.to_string()))?,
                );
            }
        }
        for img in images {
            report.images += 1;
            let f = |m: String| SimFailure {
                crash_point: Some(c as u64),
                image: Some(img.description.clone()),
                bytes: Some(img.bytes.clone()),
                ..SimFailure::new(seed, m)
            };
            let k = check_image(&img.bytes, &cands, k_min, k_max, &acked, cfg).map_err(f)?;
            if k == k_max {
                report.newest += 1;
            } else {
                report.older += 1;
            }
            if k_osync.is_some_and(|o| k < o) {
                report.lost_osync += 1;
            }
        }
    }
    // The end state recovers to the whole workload.
    let last = cands.last().and_then(|c| c.view.as_ref().ok());
    if last != Some(&w.final_view) {
        return Err(fail(
            seed,
            "the last commit boundary does not hold the whole workload",
        ));
    }
    Ok(report)
}

/// Recovers one image and returns the commit boundary its state equals.
fn check_image(
    bytes: &[u8],
    cands: &[Candidate],
    k_min: usize,
    k_max: usize,
    acked: &BTreeMap<u64, u64>,
    cfg: &SimConfig,
) -> Result<usize, String> {
    let mut dev = SimDevice::from_image(BLOCK, bytes.to_vec()).map_err(|e| e.to_string())?;
    let r = fsck(&mut dev, true);
    if !r.clean() {
        return Err(format!("fsck before mount: {}", r.problems.join("; ")));
    }
    let (mut fs, _) =
        Fs::mount(dev, mount_opts(cfg, false)).map_err(|e| format!("mount refused: {e}"))?;
    let view = engine_view(&mut fs)?;
    let mut why = Vec::new();
    let mut found = None;
    for k in (k_min..=k_max.min(cands.len() - 1)).rev() {
        let c = &cands[k];
        match &c.view {
            Ok(v) if *v == view => {
                for (s, &a) in acked {
                    if c.prefix.get(s).copied().unwrap_or(0) < a {
                        return Err(format!("recovered to commit {k}, which lacks calls of stream {s} acknowledged durable ({} < {a})", c.prefix.get(s).copied().unwrap_or(0)));
                    }
                }
                found = Some(k);
                break;
            }
            Ok(v) => why.push(format!("commit {k}: {}", diff(&view, v))),
            Err(e) => why.push(format!("commit {k} is not an allowed state: {e}")),
        }
    }
    let Some(k) = found else {
        return Err(format!(
            "the recovered state matches no allowed commit boundary in {k_min}..={k_max}: {}",
            why.join(" | ")
        ));
    };
    // The recovered file system takes new work and stays consistent.
    create_after_recovery(&mut fs)?;
    fs.sync().map_err(|e| format!("sync after recovery: {e}"))?;
    let mut dev = fs
        .unmount()
        .map_err(|e| format!("unmount after recovery: {e}"))?;
    let r = fsck(&mut dev, true);
    if !r.clean() {
        return Err(format!(
            "fsck after recovery and new work: {}",
            r.problems.join("; ")
        ));
    }
    Ok(k)
}

/// A create on the recovered file system: it succeeds, or the file system is full (ENOSPC
/// while `statfs` reports fewer free blocks than a create can add to the metadata reserve:
/// a name that crosses a block boundary of the bound, with its share of the quarter, the
/// run table and the room for the base after next). The small devices of the mixed
/// configurations are filled to the reserve by some workloads.
fn create_after_recovery(fs: &mut Fs<SimDevice>) -> Result<(), String> {
    const CREATE_RESERVE_BLOCKS: u64 = 4;
    match fs.create(0, ROOT, b"after-crash", 0o644, Owner::default()) {
        Ok(_) => Ok(()),
        Err(intactfs::FsError::NoSpace(_)) if fs.statfs().free_blocks < CREATE_RESERVE_BLOCKS => {
            Ok(())
        }
        Err(e) => Err(format!(
            "create after recovery: {e} ({} blocks free by statfs)",
            fs.statfs().free_blocks
        )),
    }
}
