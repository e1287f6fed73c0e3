//! Deterministic crash simulation of the intactfs engine (design brief, "Validation
//! strategy"; issue "intactfs 1/2" item 5).
//!
//! One run, from a seed:
//! 1. mkfs on a [`SimDevice`]; a seeded random workload over several streams runs on the
//!    engine and, in lockstep, on an independent [`model::Model`] (every call must succeed
//!    or fail on both); every device write and flush is logged.
//! 2. The device log is replayed; after every write and every flush (a crash point) the
//!    simulated device draws several images its volatile-cache semantics allow.
//! 3. Each image must pass fsck, mount (recovery), pass fsck again after mount, accept new
//!    work, and hold a state the oracle allows: for some commit boundary k in the window the
//!    crash point permits, the namespace and contents equal the model after each stream's
//!    prefix p_s(k) of calls, replayed in real-time order; that prefix covers every call
//!    acknowledged durable (fsync outside IGNORE_FSYNC, streamsync, sync) and is closed
//!    under the relatedness rule (a later related call of another stream is present only
//!    if the earlier one is).

pub mod model;

use intactfs::fsck::fsck;
use intactfs::{mkfs, FileType, Fs, Ino, MkfsOptions, MountOptions, NewKind, Owner, RenameFlags, SetAttr, StreamFlags, Time, BLOCK, ROOT};
use intactfs_device::{BlockDevice, DeviceError, SimDevice};
use model::{MIno, MOp, Model, Touch, View, What, MROOT};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub streams: u64,
    /// Calls in the workload (including syncs).
    pub calls: usize,
    pub device_blocks: u64,
    pub journal_blocks: u64,
    /// Crash images drawn at each crash point.
    pub images_per_point: u64,
    /// Only every n-th crash point (1: all of them).
    pub point_stride: usize,
    pub dirty_limit: u64,
    /// At a crash point that allows at most this many distinct images, check every one
    /// of them instead of sampling.
    pub exhaustive_up_to: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig { seed: 0, streams: 3, calls: 60, device_blocks: 384, journal_blocks: 24, images_per_point: 3, point_stride: 1, dirty_limit: 48 << 10, exhaustive_up_to: 0 }
    }
}

/// The configurations the CI test and the long run rotate through, by seed: journal of 24
/// blocks (frequent checkpoints) or 4 (transactions overflow it and commit by checkpoint;
/// small crash points checked exhaustively), 1, 3 or 5 streams.
pub fn mixed(seed: u64) -> SimConfig {
    let base = match seed % 4 {
        0 => SimConfig { streams: 3, journal_blocks: 24, ..Default::default() },
        1 => SimConfig { streams: 3, journal_blocks: 4, exhaustive_up_to: 256, ..Default::default() },
        2 => SimConfig { streams: 1, journal_blocks: 24, ..Default::default() },
        _ => SimConfig { streams: 5, journal_blocks: 12, calls: 90, ..Default::default() },
    };
    SimConfig { seed, ..base }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimReport {
    pub calls: usize,
    pub device_ops: usize,
    pub crash_points: usize,
    pub images: u64,
    pub commits: usize,
    pub checkpoints: u64,
    pub merges: u64,
    /// Images that recovered to the newest commit allowed, and to an older one.
    pub newest: u64,
    pub older: u64,
    /// Crash points where every allowed image was checked.
    pub exhaustive_points: usize,
}

/// Totals over several runs.
impl std::ops::AddAssign for SimReport {
    fn add_assign(&mut self, r: SimReport) {
        self.calls += r.calls;
        self.device_ops += r.device_ops;
        self.crash_points += r.crash_points;
        self.images += r.images;
        self.commits += r.commits;
        self.checkpoints += r.checkpoints;
        self.merges += r.merges;
        self.newest += r.newest;
        self.older += r.older;
        self.exhaustive_points += r.exhaustive_points;
    }
}

impl std::fmt::Display for SimReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} crash points ({} checked exhaustively), {} crash images, {} commits, {} checkpoints, {} stream merges, {} images recovered to an older allowed commit",
            self.crash_points, self.exhaustive_points, self.images, self.commits, self.checkpoints, self.merges, self.older
        )
    }
}

/// A failed check: everything needed to reproduce it.
#[derive(Debug)]
pub struct SimFailure {
    pub seed: u64,
    pub crash_point: Option<usize>,
    pub image: Option<String>,
    pub message: String,
    /// The crash image, to save for `intact fs fsck` / `dump`.
    pub bytes: Option<Vec<u8>>,
}

impl std::fmt::Display for SimFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "seed {}", self.seed)?;
        if let Some(c) = self.crash_point {
            write!(f, ", crash point {c}")?;
        }
        if let Some(i) = &self.image {
            write!(f, ", image {i}")?;
        }
        write!(f, ": {}", self.message)
    }
}

#[derive(Clone, Debug)]
enum DevOp {
    Write(u64, Vec<u8>),
    Flush,
}

/// A SimDevice that logs every write and flush.
struct Logged {
    dev: SimDevice,
    log: Vec<DevOp>,
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
        self.log.push(DevOp::Write(b, d.to_vec()));
        self.dev.write(b, d)
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.log.push(DevOp::Flush);
        self.dev.flush()
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
    /// A durability acknowledgement: streams whose whole history so far is durable.
    acks: Vec<u64>,
}

fn clock() -> Box<dyn FnMut() -> Time + Send> {
    let mut t = 1_700_000_000i64;
    Box::new(move || {
        t += 1;
        Time { sec: t, nsec: 0 }
    })
}

fn mount_opts(dirty_limit: u64, log: bool) -> MountOptions {
    MountOptions { dirty_limit, clock: Some(clock()), keep_commit_log: log, ..Default::default() }
}

fn fail(seed: u64, msg: impl Into<String>) -> SimFailure {
    SimFailure { seed, crash_point: None, image: None, message: msg.into(), bytes: None }
}

/// The engine's namespace, in the model's canonical form.
pub fn engine_view<D: BlockDevice>(fs: &mut Fs<D>) -> Result<View, String> {
    let mut v = View::default();
    let mut first: BTreeMap<Ino, String> = BTreeMap::new();
    let mut stack = vec![(ROOT, String::new())];
    let mut paths = Vec::new();
    while let Some((d, p)) = stack.pop() {
        let entries = fs.readdir(d, 0, usize::MAX).map_err(|e| format!("readdir {p}: {e}"))?;
        for e in entries {
            let path = format!("{p}/{}", String::from_utf8_lossy(&e.name));
            if e.kind == FileType::Dir {
                stack.push((e.ino, path.clone()));
            }
            paths.push((path, e.ino));
        }
    }
    paths.sort();
    for (path, ino) in paths {
        let f = first.entry(ino).or_insert_with(|| path.clone()).clone();
        let a = fs.getattr(ino).map_err(|e| format!("getattr {path}: {e}"))?;
        let what = match a.kind {
            FileType::File => What::File(fs.read(ino, 0, a.size as usize).map_err(|e| format!("read {path}: {e}"))?),
            FileType::Dir => What::Dir,
            FileType::Symlink => What::Symlink(fs.readlink(ino).map_err(|e| format!("readlink {path}: {e}"))?),
            other => return Err(format!("{path}: unexpected {other:?}")),
        };
        let mut x = model::Xattrs::new();
        for k in fs.listxattr(ino).map_err(|e| format!("listxattr {path}: {e}"))? {
            let v = fs.getxattr(ino, &k).map_err(|e| format!("getxattr {path}: {e}"))?;
            x.insert(k, v);
        }
        v.0.insert(path, (what, a.mode, x, f));
    }
    Ok(v)
}

struct Workload {
    done: Vec<Done>,
    log: Vec<DevOp>,
    commits: Vec<intactfs::CommitInfo>,
    base: Vec<u8>,
    final_view: View,
    checkpoints: u64,
    merges: u64,
}

fn name(rng: &mut ChaCha8Rng) -> Vec<u8> {
    // A small name space so that names collide across streams (related operations).
    format!("n{}", rng.random_range(0..6)).into_bytes()
}

/// Runs the workload on engine and model in lockstep.
fn run_workload(cfg: &SimConfig) -> Result<Workload, SimFailure> {
    let seed = cfg.seed;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut dev = SimDevice::new(BLOCK, cfg.device_blocks).map_err(|e| fail(seed, e.to_string()))?;
    mkfs(&mut dev, &MkfsOptions { journal_blocks: Some(cfg.journal_blocks), uuid: seed ^ 0x5eed, time: Time { sec: 1_700_000_000, nsec: 0 } })
        .map_err(|e| fail(seed, format!("mkfs: {e}")))?;
    let base = dev.durable().to_vec();
    let logged = Logged { dev, log: Vec::new() };
    let (mut fs, _) = Fs::mount(logged, mount_opts(cfg.dirty_limit, true)).map_err(|e| fail(seed, format!("mount after mkfs: {e}")))?;
    // The last stream ignores fsync: only streamsync makes it durable.
    let ignoring = cfg.streams - 1;
    if cfg.streams > 1 {
        fs.set_stream_flags(ignoring, StreamFlags { ignore_fsync: true, ..Default::default() });
    }
    let mut model = Model::default();
    let mut inos: BTreeMap<MIno, Ino> = BTreeMap::from([(MROOT, ROOT)]);
    let mut next_mino: MIno = 2;
    let mut done = Vec::new();
    let mut calls_per_stream: BTreeMap<u64, u64> = BTreeMap::new();
    for _ in 0..cfg.calls {
        let s = rng.random_range(0..cfg.streams);
        let dirs: Vec<MIno> = model.nodes.iter().filter(|(_, n)| matches!(n.kind, model::MKind::Dir(_))).map(|(i, _)| *i).collect();
        let files: Vec<MIno> = model.nodes.iter().filter(|(_, n)| matches!(n.kind, model::MKind::File(_))).map(|(i, _)| *i).collect();
        let pick = |rng: &mut ChaCha8Rng, v: &[MIno]| v[rng.random_range(0..v.len())];
        let dir = pick(&mut rng, &dirs);
        let entry = model.dir_entries(dir);
        let roll = rng.random_range(0..100);
        let op = match roll {
            0..=11 => Some(MOp::Create { parent: dir, name: name(&mut rng), ino: next_mino, mode: 0o644 }),
            12..=16 => Some(MOp::Mkdir { parent: dir, name: name(&mut rng), ino: next_mino, mode: 0o755 }),
            17..=18 => Some(MOp::Symlink { parent: dir, name: name(&mut rng), ino: next_mino, target: b"target".to_vec() }),
            19..=42 if !files.is_empty() => {
                let ino = pick(&mut rng, &files);
                let len = model.file_len(ino);
                // Appends, overwrites and writes past the end.
                let off = match rng.random_range(0..3) {
                    0 => len,
                    1 => rng.random_range(0..=len),
                    _ => len + rng.random_range(0..3 * BLOCK as u64),
                };
                let n = rng.random_range(1..2 * BLOCK + 100);
                let byte = rng.random::<u8>();
                Some(MOp::Write { ino, off, data: vec![byte; n] })
            }
            43..=48 if !files.is_empty() => {
                let ino = pick(&mut rng, &files);
                let len = model.file_len(ino);
                Some(MOp::Truncate { ino, size: rng.random_range(0..=len + BLOCK as u64) })
            }
            49..=51 if !files.is_empty() => {
                let ino = pick(&mut rng, &files);
                Some(MOp::Fallocate { ino, off: rng.random_range(0..4 * BLOCK as u64), len: rng.random_range(1..3 * BLOCK as u64), keep_size: rng.random_bool(0.5) })
            }
            54 if !files.is_empty() || !dirs.is_empty() => {
                // Two names, so that sets replace and removes sometimes find nothing.
                let all: Vec<MIno> = files.iter().chain(dirs.iter()).copied().collect();
                let name = if rng.random_bool(0.5) { b"user.a".to_vec() } else { b"user.b".to_vec() };
                let value = rng.random_bool(0.7).then(|| vec![rng.random::<u8>(); rng.random_range(0..300)]);
                Some(MOp::SetXattr { ino: pick(&mut rng, &all), name, value })
            }
            52..=53 => {
                let all: Vec<MIno> = model.nodes.keys().copied().filter(|&i| i != MROOT && !matches!(model.nodes[&i].kind, model::MKind::Symlink(_))).collect();
                (!all.is_empty()).then(|| MOp::Chmod { ino: pick(&mut rng, &all), mode: [0o600, 0o640, 0o700, 0o755][rng.random_range(0..4)] })
            }
            55..=59 if !files.is_empty() => Some(MOp::Link { ino: pick(&mut rng, &files), parent: dir, name: name(&mut rng) }),
            60..=66 if !entry.is_empty() => Some(MOp::Unlink { parent: dir, name: entry[rng.random_range(0..entry.len())].clone() }),
            67..=69 if !entry.is_empty() => Some(MOp::Rmdir { parent: dir, name: entry[rng.random_range(0..entry.len())].clone() }),
            70..=81 if !entry.is_empty() => {
                let sn = entry[rng.random_range(0..entry.len())].clone();
                let dp = pick(&mut rng, &dirs);
                let flags = rng.random_range(0..6);
                Some(MOp::Rename { sp: dir, sn, dp, dn: name(&mut rng), noreplace: flags == 0, exchange: flags == 1 })
            }
            _ => None,
        };
        let mut acks = Vec::new();
        let Some(op) = op else {
            // A sync call.
            let r = match rng.random_range(0..5) {
                0 => fs.sync().map(|_| acks.extend(0..cfg.streams)),
                1 | 2 => fs.streamsync(s).map(|_| acks.push(s)),
                _ if !files.is_empty() => {
                    let f = pick(&mut rng, &files);
                    fs.fsync(s, inos[&f], false).map(|_| {
                        if s != ignoring || cfg.streams == 1 {
                            acks.push(s)
                        }
                    })
                }
                _ => Ok(()),
            };
            r.map_err(|e| fail(seed, format!("sync call failed: {e}")))?;
            if std::env::var_os("INTACTFS_SIM_TRACE").is_some() {
                eprintln!("call {} stream {s}: sync-type call, acks {acks:?}, commits now {}", done.len(), fs.commit_log().len());
            }
            done.push(Done { stream: s, op: None, touch: Touch::default(), dev_after: fs.device().log.len(), commits_after: fs.commit_log().len(), acks });
            continue;
        };
        let touch = model.touch(&op);
        let model_ok = model.clone().apply(&op);
        let e = |m: MIno| inos.get(&m).copied().unwrap_or(0);
        let got = match &op {
            MOp::Create { parent, name, mode, .. } => fs.create(s, e(*parent), name, NewKind::File, *mode, Owner::default()).map(|a| Some(a.ino)),
            MOp::Mkdir { parent, name, mode, .. } => fs.mkdir(s, e(*parent), name, *mode, Owner::default()).map(|a| Some(a.ino)),
            MOp::Symlink { parent, name, target, .. } => fs.symlink(s, e(*parent), name, target, Owner::default()).map(|a| Some(a.ino)),
            MOp::Write { ino, off, data } => fs.write(s, e(*ino), *off, data).map(|_| None),
            MOp::Truncate { ino, size } => fs.truncate(s, e(*ino), *size).map(|_| None),
            MOp::Fallocate { ino, off, len, keep_size } => fs.fallocate(s, e(*ino), *off, *len, *keep_size).map(|_| None),
            MOp::Chmod { ino, mode } => fs.setattr(s, e(*ino), SetAttr { mode: Some(*mode), ..Default::default() }).map(|_| None),
            MOp::SetXattr { ino, name, value: Some(v) } => fs.setxattr(s, e(*ino), name, v, false, false).map(|_| None),
            MOp::SetXattr { ino, name, value: None } => fs.removexattr(s, e(*ino), name).map(|_| None),
            MOp::Link { ino, parent, name } => fs.link(s, e(*ino), e(*parent), name).map(|_| None),
            MOp::Unlink { parent, name } => fs.unlink(s, e(*parent), name).map(|_| None),
            MOp::Rmdir { parent, name } => fs.rmdir(s, e(*parent), name).map(|_| None),
            MOp::Rename { sp, sn, dp, dn, noreplace, exchange } => {
                fs.rename(s, e(*sp), sn, e(*dp), dn, RenameFlags { noreplace: *noreplace, exchange: *exchange }).map(|_| None)
            }
        };
        if std::env::var_os("INTACTFS_SIM_TRACE").is_some() {
            eprintln!("call {} stream {s}: {:.160} -> {:?} (model {model_ok})", done.len(), format!("{op:?}"), got.as_ref().map_err(|e| e.to_string()));
        }
        match (&got, model_ok) {
            (Ok(new), true) => {
                let same_file = match &op {
                    MOp::Rename { sp, sn, dp, dn, .. } => model.lookup(*dp, dn).is_some() && model.lookup(*sp, sn) == model.lookup(*dp, dn),
                    _ => false,
                };
                model.apply(&op);
                if same_file {
                    // A rename between two links of one file: nothing happened, so it is
                    // not part of the stream's history.
                    done.push(Done { stream: s, op: None, touch: Touch::default(), dev_after: fs.device().log.len(), commits_after: fs.commit_log().len(), acks });
                    continue;
                }
                if let Some(new) = new {
                    inos.insert(next_mino, *new);
                    next_mino += 1;
                }
                *calls_per_stream.entry(s).or_default() += 1;
                done.push(Done { stream: s, op: Some(op), touch, dev_after: fs.device().log.len(), commits_after: fs.commit_log().len(), acks });
            }
            (Err(_), false) => {}
            (Ok(_), false) => return Err(fail(seed, format!("the engine accepted {op:?}, which POSIX refuses"))),
            (Err(err), true) => return Err(fail(seed, format!("the engine refused {op:?}: {err}"))),
        }
    }
    // The live state must equal the model now, and a full sync must make durable == live.
    let live = engine_view(&mut fs).map_err(|e| fail(seed, e))?;
    if live != model.view() {
        return Err(fail(seed, format!("live state differs from the model: {}", model.view().diff(&live))));
    }
    fs.sync().map_err(|e| fail(seed, format!("final sync: {e}")))?;
    if fs.durable_meta() != fs.live_meta() {
        let (d, l) = (fs.durable_meta(), fs.live_meta());
        let first = l.inodes.iter().find(|(i, n)| d.inodes.get(i) != Some(n)).map(|(i, n)| format!("inode {i}: live {n:?}, durable {:?}", d.inodes.get(i)));
        let extra = d.inodes.keys().find(|i| !l.inodes.contains_key(i)).map(|i| format!("inode {i} only in durable"));
        return Err(fail(seed, format!("after sync the durable metadata differs from the live metadata: {}", first.or(extra).unwrap_or_else(|| format!("next_ino {} vs {}", l.next_ino, d.next_ino)))));
    }
    done.push(Done { stream: 0, op: None, touch: Touch::default(), dev_after: fs.device().log.len(), commits_after: fs.commit_log().len(), acks: (0..cfg.streams).collect() });
    let commits = fs.commit_log().to_vec();
    let checkpoints = fs.stats().checkpoints;
    let merges = fs.merges();
    let logged = fs.into_device();
    Ok(Workload { done, log: logged.log, commits, base, final_view: model.view(), checkpoints, merges })
}

/// A commit boundary the oracle may accept, with its model state.
struct Candidate {
    prefix: BTreeMap<u64, u64>,
    /// None: the prefix is not a state the rules allow (with the reason).
    view: Result<View, String>,
}

fn candidates(w: &Workload, streams: u64) -> Vec<Candidate> {
    // Histories per stream, and each call's index in its stream.
    let ops: Vec<&Done> = w.done.iter().filter(|d| d.op.is_some()).collect();
    // Position of each mutating call among all calls (as INTACTFS_SIM_TRACE numbers them).
    let pos: Vec<usize> = w.done.iter().enumerate().filter(|(_, d)| d.op.is_some()).map(|(i, _)| i).collect();
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
        let incl = |i: usize| index[i] < prefix[&ops[i].stream];
        let view = (|| {
            for &(i, j) in &related {
                if incl(j) && !incl(i) {
                    return Err(format!("call {} ({:.120}) is present without the earlier related call {} ({:.120})", pos[j], format!("{:?}", ops[j].op), pos[i], format!("{:?}", ops[i].op)));
                }
            }
            let mut m = Model::default();
            for (i, d) in ops.iter().enumerate() {
                if incl(i) && !m.apply(d.op.as_ref().expect("filtered")) {
                    return Err(format!("call {} ({:.120}) does not apply to this prefix", pos[i], format!("{:?}", d.op)));
                }
            }
            Ok(m.view())
        })();
        out.push(Candidate { prefix: prefix.clone(), view });
    }
    out
}

/// Runs one seed: the workload, then every crash point.
pub fn run(cfg: &SimConfig) -> Result<SimReport, SimFailure> {
    let seed = cfg.seed;
    let w = run_workload(cfg)?;
    let cands = candidates(&w, cfg.streams);
    let mut report = SimReport {
        calls: w.done.len(),
        device_ops: w.log.len(),
        commits: w.commits.len(),
        checkpoints: w.checkpoints,
        merges: w.merges,
        ..Default::default()
    };
    // Acknowledged prefixes, by the call that acknowledged them.
    let mut dev = SimDevice::from_image(BLOCK, w.base.clone()).map_err(|e| fail(seed, e.to_string()))?;
    for c in 0..=w.log.len() {
        if c > 0 {
            match &w.log[c - 1] {
                DevOp::Write(b, d) => dev.write(*b, d),
                DevOp::Flush => dev.flush(),
            }
            .map_err(|e| fail(seed, e.to_string()))?;
        }
        if c % cfg.point_stride != 0 && c != w.log.len() {
            continue;
        }
        report.crash_points += 1;
        // Calls finished by this point bound the commits from below; the call in progress
        // bounds them from above.
        let finished: Vec<&Done> = w.done.iter().filter(|d| d.dev_after <= c).collect();
        let k_min = finished.last().map(|d| d.commits_after).unwrap_or(0);
        let k_max = w.done.iter().find(|d| d.dev_after > c).map(|d| d.commits_after).unwrap_or(w.commits.len());
        // What was acknowledged durable: per stream, its calls up to the acknowledgement.
        let mut acked: BTreeMap<u64, u64> = BTreeMap::new();
        let mut count: BTreeMap<u64, u64> = BTreeMap::new();
        for d in &w.done {
            if d.op.is_some() {
                *count.entry(d.stream).or_default() += 1;
            }
            if d.dev_after <= c {
                for s in &d.acks {
                    acked.insert(*s, count.get(s).copied().unwrap_or(0));
                }
            }
        }
        let all = if cfg.exhaustive_up_to > 0 { dev.all_images(cfg.exhaustive_up_to) } else { None };
        let images: Vec<intactfs_device::CrashImage> = match all {
            Some(v) => {
                report.exhaustive_points += 1;
                let n = v.len();
                v.into_iter().enumerate().map(|(i, bytes)| intactfs_device::CrashImage { bytes, description: format!("{} of all {n} allowed images", i + 1) }).collect()
            }
            None => (0..cfg.images_per_point).map(|j| dev.crash(seed.wrapping_mul(1_000_003) ^ ((c as u64) << 16) ^ j)).collect(),
        };
        for img in images {
            report.images += 1;
            let f = |m: String| SimFailure { seed, crash_point: Some(c), image: Some(img.description.clone()), message: m, bytes: Some(img.bytes.clone()) };
            let k = check_image(&img.bytes, &cands, k_min, k_max, &acked, cfg).map_err(f)?;
            if k == k_max {
                report.newest += 1;
            } else {
                report.older += 1;
            }
        }
    }
    // The end state recovers to the whole workload.
    let last = cands.last().and_then(|c| c.view.as_ref().ok());
    if last != Some(&w.final_view) {
        return Err(fail(seed, "the last commit boundary does not hold the whole workload"));
    }
    Ok(report)
}

/// Recovers one image and returns the commit boundary its state equals.
fn check_image(bytes: &[u8], cands: &[Candidate], k_min: usize, k_max: usize, acked: &BTreeMap<u64, u64>, cfg: &SimConfig) -> Result<usize, String> {
    let mut dev = SimDevice::from_image(BLOCK, bytes.to_vec()).map_err(|e| e.to_string())?;
    let r = fsck(&mut dev, true);
    if !r.clean() {
        return Err(format!("fsck before mount: {}", r.problems.join("; ")));
    }
    let (mut fs, _) = Fs::mount(dev, mount_opts(cfg.dirty_limit, false)).map_err(|e| format!("mount refused: {e}"))?;
    let view = engine_view(&mut fs)?;
    let mut why = Vec::new();
    let mut found = None;
    for k in (k_min..=k_max.min(cands.len() - 1)).rev() {
        let c = &cands[k];
        match &c.view {
            Ok(v) if *v == view => {
                for (s, &a) in acked {
                    if c.prefix.get(s).copied().unwrap_or(0) < a {
                        return Err(format!("recovered to commit {k}, which lacks calls of stream {s} acknowledged durable ({} < {a})", c.prefix[s]));
                    }
                }
                found = Some(k);
                break;
            }
            Ok(v) => why.push(format!("commit {k}: {}", v.diff(&view))),
            Err(e) => why.push(format!("commit {k} is not an allowed state: {e}")),
        }
    }
    let Some(k) = found else {
        return Err(format!("the recovered state matches no allowed commit boundary in {k_min}..={k_max}: {}", why.join(" | ")));
    };
    // The recovered file system takes new work and stays consistent.
    fs.create(0, ROOT, b"after-crash", NewKind::File, 0o644, Owner::default()).map_err(|e| format!("create after recovery: {e}"))?;
    fs.sync().map_err(|e| format!("sync after recovery: {e}"))?;
    let mut dev = fs.unmount().map_err(|e| format!("unmount after recovery: {e}"))?;
    let r = fsck(&mut dev, true);
    if !r.clean() {
        return Err(format!("fsck after recovery and new work: {}", r.problems.join("; ")));
    }
    Ok(k)
}
