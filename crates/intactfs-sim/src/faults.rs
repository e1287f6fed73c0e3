//! Fault injection (issue 25 item 1): a device write or flush of a commit or a checkpoint
//! fails with ENOSPC or EIO, and the commit failure rule must hold.
//!
//! One run, from a seed: mkfs on a small device (the block device's twin, or every fourth
//! seed the transactional-flash twin), then a seeded single-stream workload — creates,
//! writes, large extended attributes (records that overflow the journal and commit by
//! checkpoint), unlinks, fsyncs and syncs — so that commits also meet the file system's
//! own ENOSPC. A dry run of the same workload counts the device writes and flushes after
//! mount; the faulty run fails one of them (a seeded choice), with ENOSPC or EIO (seeded).
//!
//! The oracle keeps the live view after every call (V_0 after mount, V_i after call i)
//! and the last view an fsync or sync acknowledged durable (V_a). After every call it draws
//! crash images; each must pass fsck, mount, and recover to some V_j with a ≤ j ≤ i:
//! * **no acknowledged operation is lost** (j ≥ a), before and after the failure;
//! * **a failed call changed nothing durable**: a failed call leaves the live view as it
//!   was, so j ≤ i is the same bound as before the call. A failure that does not poison is
//!   a refusal (ENOSPC or EIO) and the workload goes on; at its end, with the fault gone,
//!   a `sync` must succeed and every image must hold the whole live view: the refused
//!   commit's operations stayed pending, they were not dropped;
//! * **after a poison every call fails with EIO**, reads included, and the images still
//!   recover (to V_j, a ≤ j ≤ the call before the failure).

use crate::{clock, engine_view, Logged};
use intactfs::fsck::fsck;
use intactfs::prelude::*;
use intactfs::{
    mkfs, Fs, FsError, Ino, MkfsOptions, MountOptions, Owner, Time, XattrMode, BLOCK, ROOT,
};
use intactfs_device::{DeviceError, SimDevice, TxSimDevice};
use intactfs_model::{diff, Snap};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One fault-injection run.
#[derive(Clone, Debug)]
pub struct FaultConfig {
    pub seed: u64,
    pub calls: usize,
    pub device_blocks: u64,
    pub journal_blocks: u64,
    /// Crash images drawn after every call.
    pub images_per_call: u64,
    /// Run on the transactional-flash twin.
    pub txflash: bool,
}

/// The configurations by seed: a 64..=192-block device (full within the workload), a
/// journal of 8..=32 blocks (records of a few large attributes overflow it, and commit by
/// checkpoint), every fourth seed on transactional flash.
pub fn faulty(seed: u64) -> FaultConfig {
    FaultConfig {
        seed,
        calls: 40,
        device_blocks: 64 + 32 * (seed % 5),
        journal_blocks: 8 << (seed % 3),
        images_per_call: 3,
        txflash: seed % 4 == 3,
    }
}

/// The injected error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    NoSpace,
    Io,
}

intactfs_device::counters! {
    /// What a run did.
    #[derive(Clone, Debug, Default)]
    pub struct FaultReport {
        pub runs: u64,
        pub images: u64,
        /// Runs whose fault fired, and of them those that poisoned the mount.
        pub fired: u64,
        pub poisoned: u64,
        /// Calls refused with ENOSPC by the file system itself (no injected fault).
        pub refused: u64,
        /// fsyncs and syncs refused (ENOSPC or EIO, not poisoned): their operations must stay
        /// pending.
        pub commits_refused: u64,
        /// Runs with a refused commit whose final sync succeeded (the check that nothing
        /// pending was dropped).
        pub retried: u64,
    }
}

impl std::fmt::Display for FaultReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} runs, {} crash images, {} faults fired ({} poisoned the mount), {} calls refused for want of room, {} fsyncs/syncs refused, {} runs retried a refused commit at the end",
            self.runs, self.images, self.fired, self.poisoned, self.refused, self.commits_refused, self.retried
        )
    }
}

/// A long run sums these, with the crash images each checked.
impl intactfs_types::longrun::CountsImages for FaultReport {
    fn images(&self) -> u64 {
        self.images
    }
}

/// When the device fails, shared between the run and its device ([`crate::Logged`]).
#[derive(Debug, Default)]
pub(crate) struct Ctl {
    /// Counting writes and flushes (after mount).
    armed: bool,
    ios: u64,
    fail_at: Option<u64>,
    kind: Option<Fault>,
    fired: bool,
}

pub(crate) type Shared = std::sync::Arc<std::sync::Mutex<Ctl>>;

fn ctl(c: &Shared) -> std::sync::MutexGuard<'_, Ctl> {
    c.lock().unwrap_or_else(|p| p.into_inner())
}

/// Counts one write or flush, and fails it if it is the chosen one.
pub(crate) fn inject(c: &Shared, what: &'static str) -> Result<(), DeviceError> {
    let mut c = ctl(c);
    if !c.armed {
        return Ok(());
    }
    let k = c.ios;
    c.ios += 1;
    if c.fail_at != Some(k) {
        return Ok(());
    }
    c.fired = true;
    let errno = match c.kind.unwrap_or(Fault::Io) {
        Fault::NoSpace => 28,
        Fault::Io => 5,
    };
    Err(DeviceError::Io {
        what,
        path: format!("(injected fault at I/O {k})"),
        source: std::io::Error::from_raw_os_error(errno),
    })
}

#[derive(Clone, Debug)]
enum Call {
    Create(u8),
    Write(u8, u64, usize, u8),
    SetXattr(u8, u8, usize),
    Unlink(u8),
    Fsync(u8),
    Sync,
}

fn workload(cfg: &FaultConfig) -> Vec<Call> {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0xfa17);
    (0..cfg.calls)
        .map(|_| {
            let f = rng.random_range(0..12u8);
            match rng.random_range(0..100) {
                0..15 => Call::Create(f),
                15..45 => Call::Write(
                    f,
                    rng.random_range(0..48u64) * 1024,
                    rng.random_range(1..32usize) * 1024,
                    rng.random(),
                ),
                45..65 => {
                    Call::SetXattr(f, rng.random_range(0..4), rng.random_range(4..=64) * 1000)
                }
                65..72 => Call::Unlink(f),
                72..90 => Call::Fsync(f),
                _ => Call::Sync,
            }
        })
        .collect()
}

fn file_name(f: u8) -> Vec<u8> {
    format!("f{f}").into_bytes()
}

/// The `f`-th existing file (modulo how many there are), so that calls seldom miss.
fn pick(fs: &Fs<Logged>, f: u8) -> Result<Option<(Ino, Vec<u8>)>, FsError> {
    let entries = fs.readdir(ROOT, 0, usize::MAX)?;
    Ok((!entries.is_empty()).then(|| {
        let e = &entries[f as usize % entries.len()];
        (e.ino, e.name.clone())
    }))
}

/// Performs one call: Ok(true) if it acknowledged everything so far durable. A create of
/// an existing name creates the next free one; calls on files when there is none do
/// nothing.
fn perform(fs: &mut Fs<Logged>, c: &Call) -> Result<bool, FsError> {
    let s = intactfs::INIT_STREAM;
    match *c {
        Call::Create(f) => {
            let free = (0..12u8)
                .map(|k| file_name((f + k) % 12))
                .find(|n| fs.lookup(ROOT, n).is_err());
            if let Some(name) = free {
                fs.create(s, ROOT, &name, 0o644, Owner::default())?;
            }
        }
        Call::Write(f, off, len, byte) => {
            if let Some((ino, _)) = pick(fs, f)? {
                fs.write(s, ino, off, &vec![byte; len])?;
            }
        }
        Call::SetXattr(f, n, len) => {
            if let Some((ino, _)) = pick(fs, f)? {
                let name = format!("user.x{n}").into_bytes();
                fs.setxattr(s, ino, &name, &vec![n + f; len], XattrMode::Any)?;
            }
        }
        Call::Unlink(f) => {
            if let Some((_, name)) = pick(fs, f)? {
                fs.unlink(s, ROOT, &name)?;
            }
        }
        Call::Fsync(f) => {
            // One stream: an fsync commits everything before it, durably.
            if let Some((ino, _)) = pick(fs, f)? {
                fs.fsync(s, ino, false)?;
                return Ok(true);
            }
        }
        Call::Sync => {
            fs.sync()?;
            return Ok(true);
        }
    }
    Ok(false)
}

fn mount_opts() -> MountOptions {
    MountOptions {
        clock: Some(clock()),
        // Small journals: chains of deltas as well as new bases.
        delta_share: 2.0,
        ..Default::default()
    }
}

fn new_fs(cfg: &FaultConfig, ctl: &Shared) -> Result<Fs<Logged>, String> {
    let mut dev = Logged {
        dev: TxSimDevice::new(BLOCK, cfg.device_blocks).map_err(|e| e.to_string())?,
        tx: cfg.txflash,
        log: Vec::new(),
        faults: Some(ctl.clone()),
    };
    let opts = MkfsOptions {
        journal_blocks: Some(cfg.journal_blocks),
        uuid: cfg.seed ^ 0xfa17,
        time: Time {
            sec: 1_700_000_000,
            nsec: 0,
        },
    };
    mkfs(&mut dev, &opts).map_err(|e| format!("mkfs: {e}"))?;
    let (mut fs, _) = Fs::mount(dev, mount_opts()).map_err(|e| format!("mount: {e}"))?;
    // Writes and flushes from here on are those of commits and checkpoints.
    let _ = fs.flush();
    Ok(fs)
}

/// The device writes and flushes the workload makes after mount, with no fault.
fn count_ios(cfg: &FaultConfig, calls: &[Call]) -> Result<u64, String> {
    let c = Shared::default();
    let mut fs = new_fs(cfg, &c)?;
    ctl(&c).armed = true;
    for call in calls {
        let _ = perform(&mut fs, call);
    }
    let _ = fs.sync();
    let n = ctl(&c).ios;
    Ok(n)
}

/// Checks `draws` crash images of the device now: each recovers to one of `allowed`.
fn check_images(
    fs: &Fs<Logged>,
    allowed: &[Snap],
    draws: u64,
    seed: u64,
    after: &str,
) -> Result<u64, String> {
    for d in 0..draws {
        let img = fs.device().dev.crash(seed.wrapping_mul(1_000_003) ^ d);
        let why = |m: String| format!("{after}, image {d} ({}): {m}", img.description);
        let mut dev =
            SimDevice::from_image(BLOCK, img.bytes.clone()).map_err(|e| why(e.to_string()))?;
        let r = fsck(&mut dev, true);
        if !r.clean() {
            return Err(why(format!("fsck: {}", r.problems.join("; "))));
        }
        // Read-only: recovery in memory. A read-write mount of a full image also writes a
        // checkpoint, whose room is the metadata reserve's business (issue 25 item 2).
        let opts = MountOptions {
            read_only: true,
            ..mount_opts()
        };
        let (mut rfs, _) = Fs::mount(dev, opts).map_err(|e| why(format!("mount refused: {e}")))?;
        let view = engine_view(&mut rfs).map_err(&why)?;
        if !allowed.contains(&view) {
            let newest = allowed.last().expect("at least the acknowledged view");
            return Err(why(format!(
                "recovered to a state that is none of the {} allowed (acknowledged or later); against the newest: {}",
                allowed.len(),
                diff(&view, newest)
            )));
        }
    }
    Ok(draws)
}

/// After a poison every call fails with EIO, reads included.
fn check_poisoned(fs: &mut Fs<Logged>) -> Result<(), String> {
    let s = intactfs::INIT_STREAM;
    let results = [
        ("sync", fs.sync().err()),
        ("getattr", fs.getattr(ROOT).err()),
        ("readdir", fs.readdir(ROOT, 0, 10).err()),
        (
            "create",
            fs.create(s, ROOT, b"late", 0o644, Owner::default()).err(),
        ),
    ];
    for (what, e) in results {
        match e {
            Some(e) if e.errno() == 5 => {}
            other => return Err(format!("{what} after the poison: {other:?}, not EIO")),
        }
    }
    Ok(())
}

/// Arms the fault: one of the `total` writes and flushes after mount, ENOSPC or EIO.
fn arm(cfg: &FaultConfig, shared: &Shared, total: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x10);
    let mut d = ctl(shared);
    d.armed = true;
    d.fail_at = (total > 0).then(|| rng.random_range(0..total));
    d.kind = Some(if rng.random() {
        Fault::NoSpace
    } else {
        Fault::Io
    });
}

/// The oracle's state: V_0.. (the live view after each call) and a, the last acknowledged.
struct Oracle {
    views: Vec<Snap>,
    acked: usize,
    rep: FaultReport,
}

impl Oracle {
    /// Performs one call and checks what the rule says of its result; true if it
    /// poisoned the mount.
    fn step(&mut self, fs: &mut Fs<Logged>, c: &Call, after: &str) -> Result<bool, String> {
        let r = perform(fs, c);
        if std::env::var_os("INTACTFS_FAULT_TRACE").is_some() {
            eprintln!("{after}: {r:?}");
        }
        if let Some(why) = fs.poisoned().map(str::to_string) {
            if r.is_ok() {
                return Err(format!(
                    "{after}: the mount is poisoned ({why}), yet the call succeeded"
                ));
            }
            self.rep.poisoned += 1;
            check_poisoned(fs)?;
            return Ok(true);
        }
        let last = self.views.last().expect("V_0").clone();
        let now = engine_view(fs).map_err(|e| format!("{after}: {e}"))?;
        match r {
            Ok(durable) => {
                self.views.push(now);
                if durable {
                    self.acked = self.views.len() - 1;
                }
            }
            Err(e) => {
                if !matches!(e, FsError::NoSpace(_) | FsError::Device(_)) {
                    return Err(format!(
                        "{after}: failed without poisoning the mount, yet not as a refusal: {e}"
                    ));
                }
                if now != last {
                    return Err(format!(
                        "{after}: refused ({e}), yet the live view changed: {}",
                        diff(&now, &last)
                    ));
                }
                self.rep.refused += !matches!(e, FsError::Device(_)) as u64;
                self.rep.commits_refused += matches!(c, Call::Fsync(_) | Call::Sync) as u64;
                self.views.push(now);
            }
        }
        Ok(false)
    }
}

/// One fault-injection run (see the module docs).
pub fn run_faulty(cfg: &FaultConfig) -> Result<FaultReport, String> {
    let calls = workload(cfg);
    let shared = Shared::default();
    let mut fs = new_fs(cfg, &shared)?;
    arm(cfg, &shared, count_ios(cfg, &calls)?);
    let mut o = Oracle {
        views: vec![engine_view(&mut fs)?],
        acked: 0,
        rep: FaultReport {
            runs: 1,
            ..Default::default()
        },
    };
    for (i, c) in calls.iter().enumerate() {
        let after = format!("seed {}: after call {i} {c:?}", cfg.seed);
        let poisoned = o.step(&mut fs, c, &after)?;
        let point = cfg.seed + i as u64;
        o.rep.images += check_images(&fs, &o.views[o.acked..], cfg.images_per_call, point, &after)?;
        if poisoned {
            o.rep.fired += ctl(&shared).fired as u64;
            return Ok(o.rep);
        }
    }
    o.rep.fired += ctl(&shared).fired as u64;
    // The fault is gone: what refused commits left pending commits now, whole.
    ctl(&shared).fail_at = None;
    let end = format!("seed {}: the final sync", cfg.seed);
    let from = match fs.sync() {
        Ok(()) => {
            o.rep.retried += (o.rep.commits_refused > 0) as u64;
            o.views.len() - 1
        }
        // Still no room: then nothing more is promised than before.
        Err(FsError::NoSpace(_)) => o.acked,
        Err(e) => return Err(format!("{end}: {e}")),
    };
    o.rep.images += check_images(&fs, &o.views[from..], cfg.images_per_call, cfg.seed, &end)?;
    Ok(o.rep)
}
