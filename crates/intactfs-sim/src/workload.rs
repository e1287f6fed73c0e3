//! The workload runner: one seeded workload on engine and model in lockstep, in stages.
//!
//! [`run_workload`] runs [`Run::start`] (mkfs, mount, stream flags), then per call
//! [`Run::call`]: pick a stream and roll, then one of a region event
//! ([`Run::region_event`]), a mutating call generated ([`Run::generate`]) and applied to
//! both ([`Run::apply`], [`Run::record`]), or a sync-type call ([`Run::sync_call`]) whose
//! tickets are checked; and last [`Run::finish`] (deferred I/O drained, the open region
//! committed, live compared with the model, a final sync compared with live). The random
//! draws happen in the order they always did, so a seed's workload is unchanged.

use super::*;
use intactfs_model::{check, MFalloc, MSpecial};

/// Runs the workload on engine and model in lockstep.
pub(crate) fn run_workload(cfg: &SimConfig) -> Result<Workload, SimFailure> {
    let mut r = Run::start(cfg)?;
    for _ in 0..cfg.calls {
        r.call()?;
    }
    r.finish()
}

/// A random element of a non-empty list.
fn pick(rng: &mut ChaCha8Rng, v: &[MIno]) -> MIno {
    v[rng.random_range(0..v.len())]
}

/// One workload's state between its stages.
struct Run<'a> {
    cfg: &'a SimConfig,
    seed: u64,
    rng: ChaCha8Rng,
    /// Owners and times of setattrs, drawn apart so that `rng`'s draws stay as they were.
    attr_rng: ChaCha8Rng,
    fs: Fs<Logged>,
    /// The image right after mkfs.
    base: Vec<u8>,
    /// Deferred I/O: the workload writes and flushes the prepared commits.
    io: Option<Deferred>,
    /// The last stream ignores fsync: only streamsync makes it durable.
    ignoring: u64,
    /// The newest osync ticket: every flush must make it durable.
    newest_ticket: u64,
    model: MState,
    inos: BTreeMap<MIno, Ino>,
    next_mino: MIno,
    done: Vec<Done>,
    /// The open atomic region: its stream, what its calls touched, and their entries in
    /// `done`.
    region: Option<(u64, Vec<Foot>, Vec<usize>)>,
    /// A file added to the open region (CFS cfs_add, the F2FS atomic write): every
    /// stream's writes to it are the region's.
    added: Option<MIno>,
    n: Counts,
}

/// A fresh file system: the image after mkfs, and the engine mounted on its copy.
fn fresh(cfg: &SimConfig) -> Result<(Vec<u8>, Fs<Logged>), SimFailure> {
    let seed = cfg.seed;
    let mut dev =
        SimDevice::new(BLOCK, cfg.device_blocks).map_err(|e| fail(seed, e.to_string()))?;
    mkfs(
        &mut dev,
        &MkfsOptions {
            journal_blocks: Some(cfg.journal_blocks),
            uuid: seed ^ 0x5eed,
            time: Time {
                sec: 1_700_000_000,
                nsec: 0,
            },
        },
    )
    .map_err(|e| fail(seed, format!("mkfs: {e}")))?;
    let base = dev.durable().to_vec();
    let dev =
        TxSimDevice::from_image(BLOCK, base.clone()).map_err(|e| fail(seed, e.to_string()))?;
    let logged = Logged {
        dev,
        tx: cfg.txflash,
        log: Vec::new(),
        faults: None,
    };
    let (fs, _) = Fs::mount(logged, mount_opts(cfg, true))
        .map_err(|e| fail(seed, format!("mount after mkfs: {e}")))?;
    Ok((base, fs))
}

impl<'a> Run<'a> {
    /// Stage 1: the file system, its streams' flags and the I/O mode.
    fn start(cfg: &'a SimConfig) -> Result<Run<'a>, SimFailure> {
        let seed = cfg.seed;
        let rng = ChaCha8Rng::seed_from_u64(seed);
        let (base, mut fs) = fresh(cfg)?;
        let ignoring = cfg.streams - 1;
        if cfg.streams > 1 {
            let flags = StreamFlags {
                ignore_fsync: true,
                ..Default::default()
            };
            fs.set_stream_flags(ignoring, flags);
        }
        // One stream's fsync may be an osync: an ordering point, not a durability promise.
        if let Some(o) = cfg.osync_stream {
            if o >= cfg.streams || (cfg.streams > 1 && o == ignoring) {
                return Err(fail(
                    seed,
                    format!("osync_stream {o} must be a stream other than the IGNORE_FSYNC one"),
                ));
            }
            let flags = StreamFlags {
                fsync_as_osync: true,
                ..Default::default()
            };
            fs.set_stream_flags(o, flags);
        }
        let io = if cfg.concurrent {
            fs.set_deferred_io(true)
                .map_err(|e| fail(seed, format!("set_deferred_io: {e}")))?;
            Some(Deferred::new(seed))
        } else {
            None
        };
        Ok(Run {
            cfg,
            seed,
            rng,
            attr_rng: ChaCha8Rng::seed_from_u64(seed ^ 0xc404_a77e),
            fs,
            base,
            io,
            ignoring,
            newest_ticket: 0,
            model: MState::default(),
            inos: BTreeMap::from([(MROOT, ROOT)]),
            next_mino: 2,
            done: Vec::new(),
            region: None,
            added: None,
            n: Counts::default(),
        })
    }

    fn fail(&self, msg: impl Into<String>) -> SimFailure {
        fail(self.seed, msg)
    }

    fn trace_on() -> bool {
        std::env::var_os("INTACTFS_SIM_TRACE").is_some()
    }

    /// The model's directories and regular files, in inode order.
    fn dirs_and_files(&self) -> (Vec<MIno>, Vec<MIno>) {
        (self.model.dirs(), self.model.regular_files())
    }

    /// Stage 2, once per call: the stream and the roll, then what the roll chose.
    fn call(&mut self) -> Result<(), SimFailure> {
        self.fs
            .check_invariants()
            .map_err(|e| self.fail(format!("after call {}: {e}", self.done.len())))?;
        if let Some(io) = self.io.as_mut() {
            // The last call's commits join the pool; other threads write and flush some.
            io.settle(&mut self.fs, &mut self.done);
            io.step(&mut self.fs, &mut self.done, self.seed)?;
        }
        let cfg = self.cfg;
        let mut s = self.rng.random_range(0..cfg.streams);
        if let Some((r, _, _)) = &self.region {
            if self.rng.random_bool(0.5) {
                s = *r;
            }
        }
        let in_region = self.region.as_ref().is_some_and(|(r, _, _)| *r == s);
        let (dirs, files) = self.dirs_and_files();
        let dir = pick(&mut self.rng, &dirs);
        let entry = self.model.dir_entries(dir);
        // 0..=99 as before osync existed (mutating calls, then sync/streamsync/fsync; hole
        // punches took 82..=85 of the sync share), 100..=114 osync, dsync and flush
        // (workloads have 15% more calls than before, so the older calls keep their
        // expected count), 115.. the space-pressure share.
        let roll = self
            .rng
            .random_range(0..115 + cfg.overwrite_share + cfg.region_share);
        if roll >= 115 + cfg.overwrite_share {
            return self.region_event(s, &files);
        }
        let op = self.generate(roll, dir, &dirs, &files, &entry);
        if in_region && op.is_none() {
            return self.sync_in_region(s, &files);
        }
        match op {
            Some(op) => self.apply(s, in_region, op),
            None => self.sync_call(roll, s, &files),
        }
    }

    /// An atomic region begins, commits or aborts.
    fn region_event(&mut self, s: u64, files: &[MIno]) -> Result<(), SimFailure> {
        if Self::trace_on() {
            eprintln!(
                "call {}: region event (open: {:?}, added file {:?})",
                self.done.len(),
                self.region.as_ref().map(|r| r.0),
                self.added
            );
        }
        match self.region.take() {
            None => self.region_begin(s, files),
            Some((r, _, calls)) if self.rng.random_range(0..5) < 3 => self.region_commit(r, calls),
            Some((r, _, calls)) => self.region_abort(r, s, calls),
        }
    }

    fn region_begin(&mut self, s: u64, files: &[MIno]) -> Result<(), SimFailure> {
        let r = self
            .fs
            .region_begin()
            .map_err(|e| self.fail(format!("region_begin: {e}")))?;
        let mut foots = Vec::new();
        self.added = None;
        if !files.is_empty() && self.rng.random_bool(0.5) {
            let f = pick(&mut self.rng, files);
            self.fs
                .region_add(r, self.inos[&f])
                .map_err(|e| fail(self.seed, format!("region_add: {e}")))?;
            self.added = Some(f);
            // Other streams' calls on the file other than writes would join the region:
            // kept out like those related to its calls.
            foots.push(Foot {
                claimed: vec![f],
                ..Default::default()
            });
        }
        assert!(self.region.is_none(), "a region begun while one is open");
        self.region = Some((r, foots, Vec::new()));
        let d = Done::now(&self.fs, s, None, Touch::default(), Vec::new());
        self.done.push(d);
        Ok(())
    }

    fn region_commit(&mut self, r: u64, calls: Vec<usize>) -> Result<(), SimFailure> {
        self.fs
            .region_commit(r)
            .map_err(|e| self.fail(format!("region_commit: {e}")))?;
        self.n.regions_committed += 1;
        self.n.region_calls += calls.len() as u64;
        let d = Done::now(&self.fs, r, None, Touch::default(), vec![r]);
        if d.durable_commits_after != d.commits_after {
            return Err(self.fail(format!(
                "call {}: after a region's commit {} of {} commits are durable",
                self.done.len(),
                d.durable_commits_after,
                d.commits_after
            )));
        }
        self.done.push(d);
        Ok(())
    }

    fn region_abort(&mut self, r: u64, s: u64, calls: Vec<usize>) -> Result<(), SimFailure> {
        self.fs
            .region_abort(r)
            .map_err(|e| self.fail(format!("region_abort: {e}")))?;
        self.n.regions_aborted += 1;
        self.n.region_calls += calls.len() as u64;
        // The region's calls never happened: out of the history, and the model is its
        // history replayed without them.
        for i in calls {
            self.done[i].op = None;
            self.done[i].touch = Touch::default();
        }
        self.model = MState::default();
        for d in &self.done {
            if let Some(op) = &d.op {
                if self.model.try_apply(op).is_err() {
                    return Err(fail(self.seed, format!("replaying the history without the aborted region: {op:?} does not apply")));
                }
            }
        }
        let d = Done::now(&self.fs, s, None, Touch::default(), Vec::new());
        self.done.push(d);
        Ok(())
    }

    /// The mutating call `roll` chose (None: a sync-type call, or nothing to call it on).
    /// The roll ranges never overlap, so a guard that fails means None.
    fn generate(
        &mut self,
        roll: u64,
        dir: MIno,
        dirs: &[MIno],
        files: &[MIno],
        entry: &[Vec<u8>],
    ) -> Option<MOp> {
        match roll {
            19..=42 | 115.. => self.generate_write(roll, files),
            43..=51 | 54 | 82..=85 => self.generate_file_op(roll, dirs, files),
            _ => self.generate_namespace(roll, dir, dirs, files, entry),
        }
    }

    /// Writes: appends, overwrites and writes past the end; the space-pressure overwrites.
    fn generate_write(&mut self, roll: u64, files: &[MIno]) -> Option<MOp> {
        let rng = &mut self.rng;
        match roll {
            19..=42 if !files.is_empty() => {
                let ino = pick(rng, files);
                let len = self.model.file_len(ino);
                let off = match rng.random_range(0..3) {
                    0 => len,
                    1 => rng.random_range(0..=len),
                    _ => len + rng.random_range(0..3 * BLOCK as u64),
                };
                let n = rng.random_range(1..2 * BLOCK + 100);
                let byte = rng.random::<u8>();
                Some(MOp::Write {
                    ino,
                    off,
                    data: vec![byte; n],
                })
            }
            115.. if (roll - 115).is_multiple_of(2) && !files.is_empty() => {
                // Space pressure: an overwrite in a file's first three blocks (growing it
                // to at most that).
                let ino = pick(rng, files);
                let off = rng.random_range(0..=self.model.file_len(ino).min(BLOCK as u64));
                let n = rng.random_range(1..2 * BLOCK);
                let byte = rng.random::<u8>();
                Some(MOp::Write {
                    ino,
                    off,
                    data: vec![byte; n],
                })
            }
            _ => None,
        }
    }

    /// Truncate, fallocate, extended attributes and hole punches.
    fn generate_file_op(&mut self, roll: u64, dirs: &[MIno], files: &[MIno]) -> Option<MOp> {
        let rng = &mut self.rng;
        match roll {
            43..=48 if !files.is_empty() => {
                let ino = pick(rng, files);
                let len = self.model.file_len(ino);
                let size = rng.random_range(0..=len + BLOCK as u64);
                Some(MOp::SetAttr {
                    ino,
                    mode: None,
                    uid: None,
                    gid: None,
                    size: Some(size),
                    times: None,
                })
            }
            49..=51 if !files.is_empty() => {
                let ino = pick(rng, files);
                let off = rng.random_range(0..4 * BLOCK as u64);
                let len = rng.random_range(1..3 * BLOCK as u64);
                let mode = match rng.random_bool(0.5) {
                    true => MFalloc::KeepSize,
                    false => MFalloc::Allocate,
                };
                Some(MOp::Fallocate {
                    ino,
                    off,
                    len,
                    mode,
                })
            }
            54 if !files.is_empty() || !dirs.is_empty() => {
                // Two names, so that sets replace and removes sometimes find nothing.
                let all: Vec<MIno> = files.iter().chain(dirs.iter()).copied().collect();
                let name = if rng.random_bool(0.5) {
                    b"user.a".to_vec()
                } else {
                    b"user.b".to_vec()
                };
                let value = rng
                    .random_bool(0.7)
                    .then(|| vec![rng.random::<u8>(); rng.random_range(0..300)]);
                Some(MOp::SetXattr {
                    ino: pick(rng, &all),
                    name,
                    value,
                })
            }
            82..=85 if !files.is_empty() => Some(self.generate_punch(files)),
            _ => None,
        }
    }

    /// fallocate PUNCH_HOLE | KEEP_SIZE: partial blocks at either end, whole blocks,
    /// ranges over several extents and holes, and past the end.
    fn generate_punch(&mut self, files: &[MIno]) -> MOp {
        let rng = &mut self.rng;
        let ino = pick(rng, files);
        let (size, bs) = (self.model.file_len(ino), BLOCK as u64);
        let off = match rng.random_range(0..4) {
            0 => rng.random_range(0..=size.div_ceil(bs)) * bs,
            1 => rng.random_range(0..=size),
            2 => 0,
            _ => size + rng.random_range(0..2 * bs),
        };
        let len = match rng.random_range(0..5) {
            0 => rng.random_range(1..bs),
            1 => rng.random_range(1..=3) * bs,
            2 => rng.random_range(1..=4 * bs),
            3 => size.saturating_sub(off) + rng.random_range(1..=bs),
            _ => 1 << 40,
        };
        MOp::Fallocate {
            ino,
            off,
            len,
            mode: MFalloc::Punch,
        }
    }

    /// Creations, links, removals, renames and chmod.
    fn generate_namespace(
        &mut self,
        roll: u64,
        dir: MIno,
        dirs: &[MIno],
        files: &[MIno],
        entry: &[Vec<u8>],
    ) -> Option<MOp> {
        let (rng, ino) = (&mut self.rng, self.next_mino);
        match roll {
            0..=18 => {
                let (dir_, mode, special) = match roll {
                    0..=11 => (false, 0o644, None),
                    12..=16 => (true, 0o755, None),
                    _ => (false, 0o777, Some((MSpecial::Symlink, b"target".to_vec()))),
                };
                Some(MOp::Create {
                    parent: dir,
                    name: name(rng),
                    ino,
                    dir: dir_,
                    mode,
                    special,
                })
            }
            52..=53 => self.generate_chmod(),
            55..=59 if !files.is_empty() => Some(MOp::Link {
                ino: pick(rng, files),
                parent: dir,
                name: name(rng),
            }),
            60..=69 if !entry.is_empty() => Some(MOp::Remove {
                parent: dir,
                name: entry[rng.random_range(0..entry.len())].clone(),
                dir: roll >= 67,
                keep: false,
            }),
            70..=81 if !entry.is_empty() => {
                let sn = entry[rng.random_range(0..entry.len())].clone();
                let dp = pick(rng, dirs);
                let flags = rng.random_range(0..6);
                Some(MOp::Rename {
                    from: (dir, sn),
                    to: (dp, name(rng)),
                    flags: RenameFlags {
                        noreplace: flags == 0,
                        exchange: flags == 1,
                    },
                    keep: false,
                })
            }
            _ => None,
        }
    }

    fn generate_chmod(&mut self) -> Option<MOp> {
        let model = &self.model;
        let all: Vec<MIno> = model
            .nodes
            .keys()
            .copied()
            .filter(|&i| i != MROOT && model.nodes[&i].special != Some(MSpecial::Symlink))
            .collect();
        if all.is_empty() {
            return None;
        }
        let ino = pick(&mut self.rng, &all);
        let mode = [0o600, 0o640, 0o700, 0o755][self.rng.random_range(0..4)];
        // Owners of random width, to widen inodes in place (the engine's metadata reserve
        // must bound that: issue 25).
        let owner = self.attr_rng.random_bool(0.5).then(|| {
            let id = |r: &mut ChaCha8Rng| r.random::<u32>() >> r.random_range(0..32);
            (id(&mut self.attr_rng), id(&mut self.attr_rng))
        });
        // Past times only (the simulation's clock starts at 1.7e9 s): a time set into the
        // future exposes a separate ctime disagreement (docs/fs-testing.md). Random
        // nanoseconds still widen times the clock set with 0.
        let times = self.attr_rng.random_bool(0.3).then(|| {
            let sec = self.attr_rng.random_range(0..1_700_000_000);
            (sec, self.attr_rng.random_range(0..1_000_000_000))
        });
        Some(MOp::SetAttr {
            ino,
            mode: Some(mode),
            uid: owner.map(|o| o.0),
            gid: owner.map(|o| o.1),
            size: None,
            times,
        })
    }

    /// fsync, osync, dsync, streamsync inside a region return at once and commit nothing
    /// (the region's commit is its only durability point).
    fn sync_in_region(&mut self, s: u64, files: &[MIno]) -> Result<(), SimFailure> {
        let file = (!files.is_empty()).then(|| self.inos[&pick(&mut self.rng, files)]);
        let fs = &mut self.fs;
        let r = match (self.rng.random_range(0..4), file) {
            (0, Some(f)) => fs.fsync(s, f, false),
            (1, Some(f)) => fs.osync(s, f).map(|_| ()),
            (2, Some(f)) => fs.dsync(s, f),
            _ => fs.streamsync(s),
        };
        r.map_err(|e| self.fail(format!("a sync inside a region failed: {e}")))?;
        let d = Done::now(&self.fs, s, None, Touch::default(), Vec::new());
        self.done.push(d);
        Ok(())
    }

    /// A sync-type call: chosen, made, and its tickets checked.
    fn sync_call(&mut self, roll: u64, s: u64, files: &[MIno]) -> Result<(), SimFailure> {
        let call = match roll {
            100..=107 | 115.. => SyncCall::Osync,
            108..=111 => SyncCall::Dsync,
            112..=114 => SyncCall::Flush,
            _ => match self.rng.random_range(0..5) {
                0 => SyncCall::Sync,
                1 | 2 => SyncCall::Streamsync,
                _ => SyncCall::Fsync,
            },
        };
        let file = match call {
            SyncCall::Fsync | SyncCall::Osync | SyncCall::Dsync if !files.is_empty() => {
                Some(self.inos[&pick(&mut self.rng, files)])
            }
            _ => None,
        };
        let (mut acks, ticket, mut flushing) = self.make_sync(call, file, s)?;
        // With deferred I/O fsync, dsync and streamsync return with their commit
        // prepared: acknowledged when a flush makes it durable (sync and flush drain
        // and flush inside the engine).
        if let Some(io) = self.io.as_mut().filter(|_| {
            matches!(
                call,
                SyncCall::Fsync | SyncCall::Dsync | SyncCall::Streamsync
            )
        }) {
            if io.wait(&self.fs, &mut acks, self.done.len()) {
                flushing = false;
            }
        }
        let d = Done::now(&self.fs, s, None, Touch::default(), acks);
        self.check_tickets(call, s, d, ticket, flushing)
    }

    /// Makes a sync-type call: the streams it acknowledges, the osync ticket it returned,
    /// and whether it must leave everything written durable.
    fn make_sync(
        &mut self,
        call: SyncCall,
        file: Option<Ino>,
        s: u64,
    ) -> Result<(Vec<u64>, Option<u64>, bool), SimFailure> {
        let (cfg, fs) = (self.cfg, &mut self.fs);
        let fsync_is_osync = cfg.osync_stream == Some(s);
        let fsync_is_durable = (cfg.streams == 1 || s != self.ignoring) && !fsync_is_osync;
        let (mut acks, mut ticket, mut flushing) = (Vec::new(), None, true);
        let r = match (call, file) {
            (SyncCall::Sync, _) => fs.sync().map(|_| acks.extend(0..cfg.streams)),
            (SyncCall::Streamsync, _) => fs.streamsync(s).map(|_| acks.push(s)),
            (SyncCall::Fsync, Some(f)) => fs.fsync(s, f, false).map(|_| {
                if fsync_is_osync {
                    ticket = Some(fs.written_ticket());
                }
                flushing = fsync_is_durable;
                if flushing {
                    acks.push(s);
                }
            }),
            (SyncCall::Osync, Some(f)) => fs.osync(s, f).map(|t| {
                ticket = Some(t);
                flushing = false;
            }),
            (SyncCall::Dsync, Some(f)) => {
                self.n.dsyncs += 1;
                fs.dsync(s, f).map(|_| acks.push(s))
            }
            (SyncCall::Flush, _) => {
                self.n.flushes += 1;
                fs.flush()
            }
            _ => {
                flushing = false;
                Ok(())
            }
        };
        r.map_err(|e| fail(self.seed, format!("{call:?} failed: {e}")))?;
        Ok((acks, ticket, flushing))
    }

    /// The tickets: an osync names the last record written, which holds its commits; a
    /// flush makes every earlier ticket and every logged commit durable.
    fn check_tickets(
        &mut self,
        call: SyncCall,
        s: u64,
        mut d: Done,
        ticket: Option<u64>,
        flushing: bool,
    ) -> Result<(), SimFailure> {
        let (fs, n, newest) = (&self.fs, self.done.len(), self.newest_ticket);
        let (written, durable) = (fs.written_ticket(), fs.durable_ticket());
        if durable > written {
            return Err(self.fail(format!(
                "call {n}: durable ticket {durable} is past the written ticket {written}"
            )));
        }
        if let Some(t) = ticket {
            let last = fs.commit_log().last().map_or(0, |c| c.seq);
            if t != written || t < last || t < newest {
                return Err(self.fail(format!("call {n}: {call:?} ticket {t}, written ticket {written}, last commit {last}, earlier ticket {newest}")));
            }
            self.newest_ticket = t;
            d.osync = true;
        }
        let newest = self.newest_ticket;
        if flushing
            && (durable < newest
                || fs.has_unflushed()
                || d.durable_commits_after != d.commits_after)
        {
            return Err(self.fail(format!(
                "call {n}: after {call:?} durable ticket {durable} (earlier osync ticket {newest}, unflushed {}): {} of {} commits durable",
                fs.has_unflushed(),
                d.durable_commits_after,
                d.commits_after
            )));
        }
        if Self::trace_on() {
            eprintln!(
                "call {n} stream {s}: {call:?}, acks {:?}, commits now {} ({} durable), tickets written {written} durable {durable}",
                d.acks,
                d.commits_after,
                d.durable_commits_after
            );
        }
        self.done.push(d);
        Ok(())
    }

    /// A mutating call on engine and model: skipped when another stream's call would join
    /// the open region, else made and its outcome compared ([`Self::record`]).
    fn apply(&mut self, s: u64, in_region: bool, op: MOp) -> Result<(), SimFailure> {
        let touch = Touch::of(&self.model, &op);
        let foot = Foot::of(&self.model, &op, &touch);
        // A write to the added file, by any stream, is the region's (the engine routes it
        // there: it is made with the caller's stream, and counted in the region's history).
        let caller = s;
        let (s, in_region) = match (&self.region, &op) {
            (Some((r, _, _)), MOp::Write { ino, .. }) if self.added == Some(*ino) => (*r, true),
            _ => (s, in_region),
        };
        if let Some((_, touched, _)) = &self.region {
            // A call of another stream that depends on the open region would join it (the
            // engine's rule, tested in intactfs/tests/regions.rs); the simulation keeps the
            // streams apart so that its histories stay per stream.
            if !in_region && touched.iter().any(|t| t.related(&foot)) {
                let d = Done::now(&self.fs, s, None, Touch::default(), Vec::new());
                self.done.push(d);
                return Ok(());
            }
        }
        let model_ok = self.model.check_op(&op, &check::free).is_ok();
        let got = match op.file() {
            Some(ino) => self.data_call(s, caller, self.engine_ino(ino), &op),
            None => self.namespace_call(s, &op),
        };
        if Self::trace_on() {
            eprintln!(
                "call {} stream {s}: {:.160} -> {:?} (model {model_ok})",
                self.done.len(),
                format!("{op:?}"),
                got.as_ref().map_err(|e| e.to_string())
            );
        }
        let made = Made {
            s,
            caller,
            in_region,
            touch,
            foot,
        };
        self.record(made, op, got, model_ok)
    }

    /// The model's inode `m` in the engine (0, which no inode has, if it has none).
    fn engine_ino(&self, m: MIno) -> Ino {
        self.inos.get(&m).copied().unwrap_or(0)
    }

    /// Calls on a file's data and attributes, on the engine's inode `ino` (a write is made
    /// with the caller's stream).
    fn data_call(
        &mut self,
        s: u64,
        caller: u64,
        ino: Ino,
        op: &MOp,
    ) -> intactfs::Result<Option<Ino>> {
        let fs = &mut self.fs;
        match op {
            MOp::Write { off, data, .. } => fs.write(caller, ino, *off, data).map(|_| None),
            MOp::SetAttr {
                size: Some(size),
                mode: None,
                uid: None,
                gid: None,
                times: None,
                ..
            } => fs.truncate(s, ino, *size).map(|_| None),
            MOp::SetAttr {
                mode,
                uid,
                gid,
                size,
                times,
                ..
            } => {
                let time = times.map(|(sec, nsec)| Time { sec, nsec });
                let a = SetAttr {
                    mode: *mode,
                    uid: *uid,
                    gid: *gid,
                    size: *size,
                    atime: time,
                    mtime: time,
                };
                fs.setattr(s, ino, a).map(|_| None)
            }
            MOp::Fallocate {
                off,
                len,
                mode: MFalloc::Punch,
                ..
            } => fs.punch_hole(s, ino, *off, *len).map(|_| None),
            MOp::Fallocate { off, len, mode, .. } => {
                let keep_size = *mode == MFalloc::KeepSize;
                fs.fallocate(s, ino, *off, *len, keep_size).map(|_| None)
            }
            MOp::SetXattr {
                name,
                value: Some(v),
                ..
            } => fs.setxattr(s, ino, name, v, XattrMode::Any).map(|_| None),
            MOp::SetXattr { name, .. } => fs.removexattr(s, ino, name).map(|_| None),
            _ => unreachable!("not a data call: {op:?}"),
        }
    }

    /// Calls on names: what they create is returned (its engine inode).
    fn namespace_call(&mut self, s: u64, op: &MOp) -> intactfs::Result<Option<Ino>> {
        let inos = &self.inos;
        let e = |m: MIno| inos.get(&m).copied().unwrap_or(0);
        let (fs, o) = (&mut self.fs, Owner::default());
        match op {
            MOp::Create {
                parent,
                name,
                special: Some((MSpecial::Symlink, target)),
                ..
            } => fs
                .symlink(s, e(*parent), name, target, o)
                .map(|a| Some(a.ino)),
            MOp::Create {
                parent,
                name,
                dir: true,
                mode,
                ..
            } => fs.mkdir(s, e(*parent), name, *mode, o).map(|a| Some(a.ino)),
            MOp::Create {
                parent,
                name,
                mode,
                special: None,
                ..
            } => fs
                .create(s, e(*parent), name, *mode, o)
                .map(|a| Some(a.ino)),
            MOp::Link { ino, parent, name } => fs.link(s, e(*ino), e(*parent), name).map(|_| None),
            MOp::Remove {
                parent,
                name,
                dir: false,
                ..
            } => fs.unlink(s, e(*parent), name).map(|_| None),
            MOp::Remove { parent, name, .. } => fs.rmdir(s, e(*parent), name).map(|_| None),
            MOp::Rename {
                from, to, flags, ..
            } => (fs.rename(s, e(from.0), &from.1, e(to.0), &to.1, *flags)).map(|_| None),
            _ => unreachable!("not a namespace call: {op:?}"),
        }
    }

    /// The outcome of a mutating call against the model's: both made it (history and
    /// model advance), both refused it, or the engine ran out of space; else a failure.
    fn record(
        &mut self,
        m: Made,
        op: MOp,
        got: intactfs::Result<Option<Ino>>,
        model_ok: bool,
    ) -> Result<(), SimFailure> {
        match (got, model_ok) {
            (Ok(new), true) => self.made(m, op, new),
            (Err(_), false) => Ok(()),
            (Err(intactfs::FsError::NoSpace(_)), true) => {
                // The model has no space limit: a refusal for space must change nothing
                // (the live state is compared with the model at the end), though making
                // room may have committed.
                self.n.nospace += 1;
                let d = Done::now(&self.fs, m.s, None, Touch::default(), Vec::new());
                self.done.push(d);
                Ok(())
            }
            (Ok(_), false) => {
                Err(self.fail(format!("the engine accepted {op:?}, which POSIX refuses")))
            }
            (Err(err), true) => Err(self.fail(format!("the engine refused {op:?}: {err}"))),
        }
    }

    /// A call both made: into the model and the stream's history (and the region's).
    fn made(&mut self, m: Made, op: MOp, new: Option<Ino>) -> Result<(), SimFailure> {
        let same_file = match &op {
            MOp::Rename { from, to, .. } => {
                let target = self.model.lookup(to.0, &to.1);
                target.is_some() && self.model.lookup(from.0, &from.1) == target
            }
            _ => false,
        };
        self.model.apply(&op);
        if same_file {
            // A rename between two links of one file: nothing happened, so it is not part
            // of the stream's history.
            let d = Done::now(&self.fs, m.s, None, Touch::default(), Vec::new());
            self.done.push(d);
            return Ok(());
        }
        if let Some(new) = new {
            self.inos.insert(self.next_mino, new);
            self.next_mino += 1;
        }
        self.n.punches += touch::is_punch(&op) as u64;
        let n = self.done.len();
        if let Some((_, touched, calls)) = self.region.as_mut().filter(|_| m.in_region) {
            touched.push(m.foot);
            calls.push(n);
            if m.caller != m.s {
                self.n.added_writes += 1;
            }
        }
        let d = Done::now(&self.fs, m.s, Some(op), m.touch, Vec::new());
        self.done.push(d);
        Ok(())
    }

    /// Stage 3: deferred I/O drained, the open region committed, live compared with the
    /// model; then a full sync must make durable == live.
    fn finish(mut self) -> Result<Workload, SimFailure> {
        if let Some(io) = self.io.as_mut() {
            io.finish(&mut self.fs, &mut self.done, self.seed)?;
        }
        // A region still open at the end commits (so that the final state holds everything).
        if let Some((r, _, calls)) = self.region.take() {
            self.fs
                .region_commit(r)
                .map_err(|e| self.fail(format!("region_commit at the end: {e}")))?;
            self.n.regions_committed += 1;
            self.n.region_calls += calls.len() as u64;
            let d = Done::now(&self.fs, r, None, Touch::default(), vec![r]);
            self.done.push(d);
        }
        let live = engine_view(&mut self.fs).map_err(|e| self.fail(e))?;
        let want = by_first_path(self.model.snapshot());
        if live != want {
            return Err(self.fail(format!(
                "live state differs from the model: {}",
                diff(&live, &want)
            )));
        }
        self.fs
            .sync()
            .map_err(|e| self.fail(format!("final sync: {e}")))?;
        self.fs
            .check_invariants()
            .map_err(|e| self.fail(format!("after the final sync: {e}")))?;
        self.check_durable_is_live()?;
        self.check_final_durability()?;
        self.into_workload()
    }

    /// After the final sync the durable metadata is the live metadata.
    fn check_durable_is_live(&self) -> Result<(), SimFailure> {
        let (d, l) = (self.fs.durable_meta(), self.fs.live_meta());
        if d == l {
            return Ok(());
        }
        let first = l
            .inodes
            .iter()
            .find(|(i, n)| d.inodes.get(i) != Some(n))
            .map(|(i, n)| format!("inode {i}: live {n:?}, durable {:?}", d.inodes.get(i)));
        let extra = d
            .inodes
            .keys()
            .find(|i| !l.inodes.contains_key(i))
            .map(|i| format!("inode {i} only in durable"));
        Err(self.fail(format!(
            "after sync the durable metadata differs from the live metadata: {}",
            first
                .or(extra)
                .unwrap_or_else(|| format!("next_ino {} vs {}", l.next_ino, d.next_ino))
        )))
    }

    /// After the final sync every stream is acknowledged, nothing waits or is in flight,
    /// every commit and the newest osync ticket are durable.
    fn check_final_durability(&mut self) -> Result<(), SimFailure> {
        let streams = self.cfg.streams;
        let mut d = Done::now(&self.fs, 0, None, Touch::default(), (0..streams).collect());
        if let Some(io) = self.io.as_mut() {
            io.pool.extend(self.fs.take_io());
            io.acknowledge(&self.fs, &mut d);
            if !io.waiting.is_empty() || !self.fs.pending_io(u64::MAX).is_empty() {
                return Err(fail(self.seed, format!("after the final sync durability calls still wait ({:?}) or commits are in flight ({})", io.waiting, self.fs.pending_io(u64::MAX).len())));
            }
        }
        if d.durable_commits_after != d.commits_after
            || self.fs.durable_ticket() < self.newest_ticket
        {
            return Err(self.fail(format!(
                "after the final sync {} of {} commits are durable",
                d.durable_commits_after, d.commits_after
            )));
        }
        self.done.push(d);
        Ok(())
    }

    /// The run's results: the history, the device's write log and the counts.
    fn into_workload(self) -> Result<Workload, SimFailure> {
        let commits = self.fs.commit_log().to_vec();
        if let Some(w) = commits.windows(2).find(|w| w[1].seq < w[0].seq) {
            return Err(self.fail(format!(
                "the commit log's sequence numbers decrease: {} then {}",
                w[0].seq, w[1].seq
            )));
        }
        let stats = self.fs.stats();
        let merges = self.fs.merges();
        let logged = self.fs.into_device();
        let io = self.io.unwrap_or_else(|| Deferred::new(self.seed));
        Ok(Workload {
            calls: self.done.len() - io.steps,
            done: self.done,
            commits_performed: io.performed,
            out_of_order: io.out_of_order,
            group_flushes: io.group_flushes,
            inflight_flushes: io.inflight_flushes,
            acking_flushes: io.acking_flushes,
            multi_flushes: io.multi_flushes,
            group_acked: io.group_acked,
            waited_calls: io.waited_calls,
            log: logged.log,
            commits,
            base: self.base,
            final_view: by_first_path(self.model.snapshot()),
            checkpoints: stats.checkpoints,
            delta_checkpoints: stats.delta_checkpoints,
            merges,
            optimistic_commits: stats.optimistic_commits,
            counts: self.n,
            tx_commits: stats.tx_commits,
            inplace_blocks: stats.inplace_blocks,
        })
    }
}

/// What a mutating call was made as, for [`Run::record`].
struct Made {
    /// The stream it went to (the region's, for a write to the added file).
    s: u64,
    /// The stream that made it.
    caller: u64,
    in_region: bool,
    touch: Touch,
    foot: Foot,
}
