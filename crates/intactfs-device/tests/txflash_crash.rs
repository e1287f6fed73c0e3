//! The txflash mapping is crash-safe: TxFileDevice runs on a SimDevice (512-byte blocks, the
//! backing "file"), random workloads of transactional writes, commits, aborts, plain writes
//! and flushes drive it and a TxSimDevice twin side by side, and the backing is crashed
//! just before every flush it sees (so inside commits, checkpoints and seals too) and at
//! random points between calls. Every crash image is recovered, and the logical blocks it
//! gives must be an image the twin allows: every committed transaction whole, no open one,
//! plain writes per the volatile-cache rules; for a crash inside `tx_commit(t)`, `t` whole
//! or absent. Some workloads go on from a recovered device and crash again.

use intactfs_device::{
    BlockDevice, CrashImage, DeviceError, SimDevice, TxFileDevice, TxGeometry, TxSimDevice, SECTOR,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::mem::discriminant;

/// A SimDevice that keeps a copy of itself just before each flush: a crash there may leave
/// any subset of the writes since the previous flush.
struct Recorder {
    dev: SimDevice,
    snaps: Vec<SimDevice>,
}

impl BlockDevice for Recorder {
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
        self.dev.write(b, d)
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.snaps.push(self.dev.clone());
        self.dev.flush()
    }
}

#[derive(Clone, Copy, Debug)]
enum Op {
    TxWrite(u64, u64, u64),
    Plain(u64, u64),
    /// Runs of two blocks (one backing write per run of consecutive slots).
    TxRun(u64, u64, u64),
    PlainRun(u64, u64),
    Commit(u64),
    Abort(u64),
    Begin(u64),
    Flush,
}

/// Every sector of every write is distinct, so a torn or stale sector is recognisable.
fn data(bs: usize, v: u64) -> Vec<u8> {
    let mut d = vec![0u8; bs];
    for (k, c) in d.chunks_mut(8).enumerate() {
        c.copy_from_slice(&(v << 24 | k as u64).to_le_bytes());
    }
    d
}

fn run(d: &mut impl BlockDevice, op: Op) -> Result<(), DeviceError> {
    let bs = d.block_size();
    match op {
        Op::TxWrite(t, b, v) => d.tx_write(t, b, &data(bs, v)),
        Op::Plain(b, v) => d.write(b, &data(bs, v)),
        Op::TxRun(t, b, v) => {
            d.tx_write_run(t, b, &[data(bs, v), data(bs, v + (1 << 12))].concat())
        }
        Op::PlainRun(b, v) => d.write_run(b, &[data(bs, v), data(bs, v + (1 << 12))].concat()),
        Op::Commit(t) => d.tx_commit(t),
        Op::Abort(t) => d.tx_abort(t),
        Op::Begin(t) => d.tx_begin(t),
        Op::Flush => d.flush(),
    }
}

fn logical(d: &mut impl BlockDevice) -> Vec<u8> {
    let mut out = vec![0u8; d.block_size() * d.blocks() as usize];
    d.read_run(0, &mut out).unwrap();
    out
}

#[derive(Default, Debug)]
struct Stats {
    images: u64,
    in_commit_kept: u64,
    dropped_tails: u64,
    checkpoints: u64,
    seals: u64,
    nested: u64,
}

/// Recovers `img` (the backing after a crash) and returns the logical blocks and the device.
/// A crash during recovery's own erase of a dropped record must give the same blocks.
fn recover(img: &CrashImage, what: &str) -> (Vec<u8>, TxFileDevice<Recorder>, bool) {
    let rec = Recorder {
        dev: SimDevice::from_image(SECTOR, img.bytes.clone()).unwrap(),
        snaps: Vec::new(),
    };
    let mut d = TxFileDevice::recover(rec)
        .unwrap_or_else(|e| panic!("{what}: recovery failed: {e} ({})", img.description));
    let l = logical(&mut d);
    for snap in std::mem::take(&mut d.backing_mut().snaps) {
        for seed in 0..4 {
            let again = snap.crash(seed);
            let mut d2 =
                TxFileDevice::recover(SimDevice::from_image(SECTOR, again.bytes).unwrap()).unwrap();
            assert_eq!(
                logical(&mut d2),
                l,
                "{what}: a crash during recovery changed the outcome"
            );
        }
    }
    let dropped = d.recovery().dropped_tail;
    (l, d, dropped)
}

/// Crash images of `snap`: all of them when few, else a seeded sample.
fn images(snap: &SimDevice, salt: u64) -> Vec<CrashImage> {
    match snap.all_images(48) {
        Some(all) => all
            .into_iter()
            .enumerate()
            .map(|(i, bytes)| CrashImage {
                bytes,
                description: format!("image {i} of all"),
            })
            .collect(),
        None => (0..8)
            .map(|k| snap.crash(salt.wrapping_mul(0x9E37_79B9) ^ k))
            .collect(),
    }
}

fn workload(seed: u64, stats: &mut Stats) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let bs = if seed.is_multiple_of(2) { 1024 } else { 512 };
    let blocks = 6;
    let geo = TxGeometry {
        block_size: bs,
        blocks,
        spare: [3, 6][(seed / 2 % 2) as usize],
        log_bytes: bs as u64 * [1, 2, 4][(seed % 3) as usize],
    };
    let backing = Recorder {
        dev: SimDevice::new(SECTOR, geo.file_bytes().unwrap() / SECTOR as u64).unwrap(),
        snaps: Vec::new(),
    };
    let mut ftl = TxFileDevice::format(backing, geo).unwrap();
    ftl.backing_mut().snaps.clear();
    let mut twin = TxSimDevice::new(bs, blocks).unwrap();
    let mut v = seed << 16;
    for step in 0..50 {
        let tx = rng.random_range(0..3u64);
        let b = rng.random_range(0..blocks);
        v += 1;
        let op = match rng.random_range(0..100) {
            0..32 => Op::TxWrite(tx, b, v),
            32..40 => Op::TxRun(tx, b.min(blocks - 2), v),
            40..60 => Op::Plain(b, v),
            60..65 => Op::PlainRun(b.min(blocks - 2), v),
            65..82 => Op::Commit(tx),
            82..88 => Op::Abort(tx),
            88..91 => Op::Begin(tx),
            _ => Op::Flush,
        };
        let what = format!("workload {seed} step {step} {op:?}");
        let before = twin.clone();
        let got = run(&mut ftl, op);
        match &got {
            // The twin has no slot limit.
            Err(DeviceError::TxNoSpace { .. }) => {}
            _ => {
                let want = run(&mut twin, op);
                assert_eq!(
                    got.as_ref().err().map(discriminant),
                    want.as_ref().err().map(discriminant),
                    "{what}: {got:?} vs the twin's {want:?}"
                );
            }
        }
        for (k, snap) in std::mem::take(&mut ftl.backing_mut().snaps)
            .into_iter()
            .enumerate()
        {
            for img in images(&snap, seed << 20 | step << 8 | k as u64) {
                let (l, _, dropped) = recover(&img, &what);
                stats.images += 1;
                stats.dropped_tails += dropped as u64;
                let ok = match op {
                    Op::Commit(t) => {
                        let plain = before.allows(&l);
                        stats.in_commit_kept += !plain as u64;
                        plain || before.allows_during_commit(t, &l).unwrap()
                    }
                    _ => before.allows(&l),
                };
                assert!(ok, "{what}: flush {k} inside the call, {}: recovered blocks the semantics do not allow", img.description);
            }
        }
        assert_eq!(
            logical(&mut ftl),
            twin.contents(),
            "{what}: reads differ from the twin's"
        );
        if rng.random_bool(0.08) {
            // A crash between calls; sometimes the workload goes on from the recovered device.
            let img = ftl.backing().dev.crash(rng.random());
            let (l, d, dropped) = recover(&img, &what);
            stats.images += 1;
            stats.dropped_tails += dropped as u64;
            assert!(
                twin.allows(&l),
                "{what}: crash after the call, {}: recovered blocks the semantics do not allow",
                img.description
            );
            if rng.random_bool(0.5) {
                stats.nested += 1;
                stats.checkpoints += ftl.counters().checkpoints;
                stats.seals += ftl.counters().seals;
                ftl = d;
                twin = TxSimDevice::from_image(bs, l).unwrap();
            }
        }
    }
    stats.checkpoints += ftl.counters().checkpoints;
    stats.seals += ftl.counters().seals;
}

#[test]
fn every_crash_image_of_the_ftl_recovers_to_an_allowed_logical_image() {
    let mut stats = Stats::default();
    for seed in 0..256 {
        workload(seed, &mut stats);
    }
    eprintln!("{stats:?}");
    // The interesting cases happened.
    assert!(stats.images > 10_000, "{stats:?}");
    assert!(
        stats.in_commit_kept > 100,
        "crashes inside a commit that kept it: {stats:?}"
    );
    assert!(
        stats.dropped_tails > 100,
        "records whose data had not landed: {stats:?}"
    );
    assert!(
        stats.checkpoints > 100 && stats.seals > 20 && stats.nested > 100,
        "{stats:?}"
    );
}
