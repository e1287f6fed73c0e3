//! Deterministic crash simulation of the engine (issue 14 item 4; design brief,
//! "Validation strategy").
//!
//! One run, from a seed:
//! 1. mkfs on a [`probe::Probe`] (a [`PmemSim`] that takes crash images at every fence); a
//!    seeded workload runs on the engine and, in lockstep, on the independent
//!    [`MState`] (crate `intactfs-model`, shared with the block engine's simulation):
//!    multi-file transactions (several open at once, calls interleaved), writes at random
//!    unaligned offsets of 0–16 KiB, creates, mkdirs, unlinks, rmdirs, renames (replacing
//!    targets), truncates and chmods inside and outside transactions,
//!    commits, aborts, explicit checkpoints, legacy calls, opens and releases (so files are
//!    unlinked or replaced while open: orphans, whose content reads must keep showing until
//!    their last release frees them; mount frees those a crash left). Every call must succeed or fail
//!    with the errno the model predicts (EBUSY from the ownership rule included; ENOSPC is
//!    accepted as "no effect"), the engine's volatile structures must agree with pmem
//!    ([`PmemFs::check`]), and what reads see must equal the model's live state.
//! 2. At every fence the probe takes the images a crash may leave: every one when there are
//!    at most `exhaustive_up_to`, else `images_per_point` seeded draws.
//! 3. Each image is mounted (recovery), checked, and its state (namespace, every file's
//!    content, size, mode, uid, gid) must equal the model after some prefix of the commit
//!    order that includes every transaction whose commit returned before the crash: the
//!    state after commit `lo` or, if the call in progress commits, after commit `lo + 1`
//!    (transactions are all-or-nothing; a legacy call is a transaction). A sample of images
//!    is also crashed at every fence of its recovery (images drawn the same way) and
//!    recovered again, which must give the same state, and another sample is checkpointed
//!    after recovery, which must not change it.

mod config;
pub mod probe;
mod report;
pub use config::{mixed, with_background, SimConfig};
pub use intactfs_types::longrun::SimFailure;
pub use report::SimReport;

use crate::{FileType, Ino, MkfsOptions, PmemFs, PmemFsError, SetAttr, Time, Tunables, TxId, ROOT};
use intactfs_device::{PmemDevice, PmemSim};
use intactfs_model::{
    diff, digest, sparse_hash, MFalloc, MIno, MOp, MSpecial, MState, Snap, CHUNK, MROOT,
};
use intactfs_types::prelude::*;
use intactfs_types::{MknodKind, Owner, RenameFlags, XattrMode};
use probe::Probe;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The largest file the engine allows: 12 direct blocks and single-, double- and
/// triple-indirect trees of 512 pointers, 4 KiB blocks (the format-3 limit, stated here
/// independently of the engine's layout code; the model's EFBIG bound).
pub const MAX_SIZE: u64 = (12 + 512 + 512 * 512 + 512 * 512 * 512 + 512 * 512 * 512 * 512) * 4096;

fn fixed_clock() -> Time {
    Time {
        sec: 1_700_000_000,
        nsec: 0,
    }
}

/// The state an engine shows: every object reachable from the root.
pub fn engine_snapshot<P: PmemDevice>(fs: &mut PmemFs<P>) -> Result<Snap, String> {
    intactfs_model::engine_snapshot(fs, ROOT, |fs, ino, size| sparse_content(fs, ino, size))
}

/// A file's content hash as [`intactfs_model::MData::digest`] computes it: its size and
/// each block that holds a nonzero byte (read only where [`PmemFs::data_lbns`] says data
/// may be, so a sparse file of hundreds of GiB costs its written blocks).
fn sparse_content<P: PmemDevice>(fs: &PmemFs<P>, ino: Ino, size: u64) -> Result<u64, String> {
    assert_eq!(
        CHUNK,
        crate::BLOCK,
        "the model's chunks are the engine's blocks"
    );
    let mut chunks = Vec::new();
    for lbn in fs
        .data_lbns(ino)
        .map_err(|e| format!("data_lbns {ino}: {e}"))?
    {
        let mut b = fs
            .read_shared(ino, lbn * CHUNK, CHUNK as usize)
            .map_err(|e| format!("read {ino} block {lbn}: {e}"))?;
        let want = (size - lbn * CHUNK).min(CHUNK);
        if b.len() as u64 != want {
            return Err(format!(
                "inode {ino} has size {size} but block {lbn} reads {} bytes",
                b.len()
            ));
        }
        b.resize(CHUNK as usize, 0);
        if b.iter().any(|&x| x != 0) {
            chunks.push((lbn, b));
        }
    }
    Ok(sparse_hash(size, chunks.iter().map(|(c, b)| (*c, &b[..]))))
}

/// A 128-bit key of an image, to recover each distinct image once per run (two
/// multiply-rotate lanes over the words; a CRC would not do: it is linear, and images that
/// differ in a few words collide far more often than 2^-64).
fn image_key(b: &[u8]) -> u128 {
    let (mut h1, mut h2) = (0x243f_6a88_85a3_08d3u64, 0x1319_8a2e_0370_7344u64);
    for (i, c) in b.chunks_exact(8).enumerate() {
        let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        h1 = (h1 ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(31);
        h2 = (h2.wrapping_add(w) ^ i as u64)
            .wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
            .rotate_left(29);
    }
    (h1 as u128) << 64 | h2 as u128
}

/// Mounts an image, checks it, returns its state.
fn recover(bytes: Vec<u8>, tun: Tunables) -> Result<(PmemFs<Probe>, Snap), String> {
    let sim = PmemSim::from_image(bytes).map_err(|e| e.to_string())?;
    let (mut fs, _) = PmemFs::mount(Probe::new(sim, 0, 0, 0))
        .map_err(|e| format!("mount refused a crash image: {e}"))?;
    fs.set_tunables(tun);
    fs.set_clock(fixed_clock);
    fs.check_invariants()
        .map_err(|e| format!("after recovery: {e}"))?;
    let s = engine_snapshot(&mut fs)?;
    Ok((fs, s))
}

struct Run {
    cfg: SimConfig,
    rng: ChaCha8Rng,
    fs: PmemFs<Probe>,
    live: MState,
    committed: MState,
    open: BTreeMap<u64, Vec<MOp>>,
    owner: HashMap<MIno, u64>,
    /// Digest of the state after each commit (index 0: after mkfs).
    digests: Vec<u64>,
    /// Snapshots of the last two states, for messages.
    last_snaps: Vec<Snap>,
    /// Distinct images already recovered: image key → recovered digest.
    seen: HashMap<u128, u64>,
    rep: SimReport,
    /// The last call, for the trace.
    last: String,
    /// Open counts of files (the engine's open/release).
    opens: BTreeMap<MIno, u32>,
    /// Orphans whose last release came while a transaction owned them.
    zombies: BTreeSet<MIno>,
    /// The call in progress is a background checkpoint unit run while transactions are open
    /// (its crash images are counted apart).
    unit_with_open: bool,
    /// Decides when background units run: a stream of its own, so that a seed's workload
    /// calls are the same with inline and background checkpoints.
    unit_rng: ChaCha8Rng,
}

const NAMES: [&[u8]; 8] = [b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h"];
/// The owner of every file the workload makes.
const ROOT_OWNER: Owner = Owner { uid: 0, gid: 0 };

impl Run {
    fn busy(&self, ctx: Option<u64>) -> impl Fn(MIno) -> bool + '_ {
        move |i| self.owner.get(&i).is_some_and(|&o| Some(o) != ctx)
    }

    fn push_commit(&mut self) {
        let s = self.committed.snapshot();
        self.digests.push(digest(&s));
        self.last_snaps.push(s);
        if self.last_snaps.len() > 2 {
            self.last_snaps.remove(0);
        }
    }

    /// Compares the engine's result with the model's prediction; Some(value) when both
    /// succeeded, None for an agreed failure (or ENOSPC, which the model does not predict).
    fn agree<T: std::fmt::Debug>(
        &mut self,
        what: &str,
        got: Result<T, PmemFsError>,
        want: Result<(), i32>,
    ) -> Result<Option<T>, String> {
        self.last = format!(
            "{}{what} -> {}",
            std::mem::take(&mut self.last),
            match &got {
                Ok(_) => "ok".to_string(),
                Err(e) => e.to_string(),
            }
        );
        match (got, want) {
            (Ok(v), Ok(())) => Ok(Some(v)),
            (Err(e), Ok(())) if e.errno() == 28 => {
                self.rep.nospace += 1;
                Ok(None)
            }
            (Err(e), Err(w)) if e.errno() == w => {
                self.rep.expected_errors += 1;
                self.rep.ebusy += (w == 16) as u64;
                Ok(None)
            }
            (got, want) => Err(format!(
                "{what}: the engine returned {got:?}, the model expects {}",
                match want {
                    Ok(()) => "success".to_string(),
                    Err(e) => format!("errno {e}"),
                }
            )),
        }
    }

    /// Records a successful mutating call in the model.
    fn done(&mut self, ctx: Option<u64>, op: MOp, touched: &[MIno]) {
        if std::env::var_os("INTACTFS_PMEM_SIM_TRACE").is_some() {
            match &op {
                MOp::Write { ino, off, data } => eprintln!(
                    "  op in {ctx:?}: write {ino} at {off}, {} bytes",
                    data.len()
                ),
                op => eprintln!("  op in {ctx:?}: {op:?}"),
            }
        }
        self.live.apply(&op);
        match ctx {
            Some(t) => {
                for &i in touched {
                    self.owner.insert(i, t);
                }
                self.open.get_mut(&t).expect("open").push(op);
            }
            None => {
                self.committed.apply(&op);
                self.push_commit();
            }
        }
    }

    fn rebuild_live(&mut self) {
        let mut live = self.committed.clone();
        for ops in self.open.values() {
            for op in ops {
                live.apply(op);
            }
        }
        self.live = live;
    }

    fn pick<T: Copy>(&mut self, v: &[T]) -> Option<T> {
        if v.is_empty() {
            None
        } else {
            Some(v[self.rng.random_range(0..v.len())])
        }
    }

    /// A target inode among `cands`, mostly one the context may change.
    fn target(&mut self, cands: Vec<MIno>, ctx: Option<u64>) -> Option<MIno> {
        let ok: Vec<MIno> = cands
            .iter()
            .copied()
            .filter(|i| self.owner.get(i).is_none_or(|&o| Some(o) == ctx))
            .collect();
        if !ok.is_empty() && self.rng.random_bool(0.85) {
            self.pick(&ok)
        } else {
            self.pick(&cands)
        }
    }

    fn name(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..40) {
            0 => vec![b'L'; 255],
            1 => vec![b'x'; 256],
            2 => b"bad/name".to_vec(),
            _ => NAMES[self.rng.random_range(0..NAMES.len())].to_vec(),
        }
    }

    fn existing_name(&mut self, dir: MIno) -> Vec<u8> {
        let names: Vec<Vec<u8>> = self
            .live
            .get(dir)
            .map(|n| n.entries.keys().cloned().collect())
            .unwrap_or_default();
        if !names.is_empty() && self.rng.random_bool(0.8) {
            names[self.rng.random_range(0..names.len())].clone()
        } else {
            self.name()
        }
    }

    /// One background checkpoint unit ([`PmemFs::checkpoint_step`]): changes nothing a read
    /// sees, nothing recovery recovers.
    fn background_unit(&mut self) -> Result<(), String> {
        let r = self
            .fs
            .checkpoint_step()
            .map_err(|e| format!("checkpoint_step: {e}"))?;
        self.last = format!("background checkpoint unit ({} blocks)", r.blocks);
        self.rep.background_units += 1;
        if !self.open.is_empty() && r.blocks > 0 {
            self.rep.background_units_open += 1;
            self.unit_with_open = true;
        }
        Ok(())
    }

    /// One workload call; Err is a lockstep mismatch.
    fn step(&mut self) -> Result<(), String> {
        let r = self.step_inner();
        if std::env::var_os("INTACTFS_PMEM_SIM_TRACE").is_some() {
            eprintln!("  last: {}", self.last);
        }
        r
    }

    fn step_inner(&mut self) -> Result<(), String> {
        let open: Vec<u64> = self.open.keys().copied().collect();
        if open.len() >= 2 {
            self.rep.interleaved_calls += 1;
        }
        // Background checkpoints: a unit is a call of its own, between the calls of the open
        // transactions (as a checkpointer thread takes the engine's lock per unit); mostly
        // while some are open, the case the order of installs matters in.
        let p = if open.is_empty() { 0.2 } else { 0.7 };
        if self.cfg.tunables.background_checkpoints
            && self.fs.checkpoint_due()
            && self.unit_rng.random_bool(p)
        {
            return self.background_unit();
        }
        // The draws are the same, in the same order, as when this was one function: a seed
        // runs the workload it always ran.
        let roll = self.rng.random_range(0..100u32);
        // The kinds of call share the roll's ranges: a roll of a kind that cannot run now
        // falls to the next.
        if roll < 10 && open.len() < self.cfg.max_open {
            return self.tx_begin_call();
        }
        if roll < 20 && !open.is_empty() {
            return self.tx_commit_call(&open);
        }
        if roll < 24 && !open.is_empty() {
            return self.tx_abort_call(&open);
        }
        if roll < 26 && !open.is_empty() {
            return self.tx_add_call(&open);
        }
        match roll {
            0..28 => (self.fs.checkpoint().map(drop)).map_err(|e| format!("checkpoint: {e}")),
            28..37 => self.open_file(),
            37..45 => self.release_file(),
            _ => self.mutating_call(&open),
        }
    }

    /// Begins a transaction on 0-2 files (EBUSY when one is another's).
    fn tx_begin_call(&mut self) -> Result<(), String> {
        let files = self.live.files();
        let n = self.rng.random_range(0..=2usize);
        let mut pick = Vec::new();
        for _ in 0..n {
            if let Some(f) = self.target(files.clone(), None) {
                pick.push(f);
            }
        }
        let want = pick.iter().try_for_each(|&f| {
            if self.live.get(f).is_none() {
                Err(2)
            } else if self.owner.contains_key(&f) {
                Err(16)
            } else {
                Ok(())
            }
        });
        let got = self.fs.tx_begin(&pick);
        if let Some(t) = self.agree("tx_begin", got, want)? {
            self.open.insert(t.0, Vec::new());
            for f in pick {
                self.owner.insert(f, t.0);
            }
        }
        Ok(())
    }

    fn tx_commit_call(&mut self, open: &[u64]) -> Result<(), String> {
        let t = self.pick(open).expect("non-empty");
        self.fs
            .tx_commit(TxId(t))
            .map_err(|e| format!("tx_commit {t}: {e}"))?;
        self.last = format!("commit {t}");
        let ops = self.open.remove(&t).expect("open");
        for op in &ops {
            self.committed.apply(op);
        }
        self.owner.retain(|_, o| *o != t);
        self.push_commit();
        self.reap();
        self.rep.tx_committed += 1;
        Ok(())
    }

    fn tx_abort_call(&mut self, open: &[u64]) -> Result<(), String> {
        let t = self.pick(open).expect("non-empty");
        self.fs
            .tx_abort(TxId(t))
            .map_err(|e| format!("tx_abort {t}: {e}"))?;
        self.last = format!("abort {t}");
        for op in self.open.remove(&t).expect("open") {
            if let MOp::Create { ino, .. } = op {
                // Its create is undone: the engine forgets its opens.
                self.opens.remove(&ino);
            }
        }
        self.owner.retain(|_, o| *o != t);
        self.rebuild_live();
        self.reap();
        self.rep.tx_aborted += 1;
        Ok(())
    }

    /// Adds a file to an open transaction (EBUSY when it is another's).
    fn tx_add_call(&mut self, open: &[u64]) -> Result<(), String> {
        let t = self.pick(open).expect("non-empty");
        let all: Vec<MIno> = self.live.nodes.keys().copied().collect();
        let f = self.target(all, Some(t)).expect("root exists");
        let want = if self.busy(Some(t))(f) {
            Err(16)
        } else {
            Ok(())
        };
        let got = self.fs.tx_add(TxId(t), f);
        if self.agree("tx_add", got, want)?.is_some() {
            self.owner.insert(f, t);
        }
        Ok(())
    }

    /// A mutating call, in an open transaction (mostly) or on its own.
    fn mutating_call(&mut self, open: &[u64]) -> Result<(), String> {
        let ctx = if !open.is_empty() && self.rng.random_bool(0.65) {
            self.pick(open)
        } else {
            None
        };
        self.last = format!("in {ctx:?}: ");
        if ctx.is_none() {
            self.rep.legacy_calls += 1;
        }
        match self.rng.random_range(0..100u32) {
            0..34 => self.write_call(ctx),
            34..40 => self.fallocate_call(ctx),
            40..52 => self.setattr_call(ctx),
            52..70 => self.create_node(ctx),
            70..80 => self.remove_call(ctx),
            80..88 => self.link_file(ctx),
            88..93 => self.xattr_call(ctx),
            93..100 => self.rename_call(ctx),
            _ => unreachable!("kind is drawn from 0..100"),
        }
    }

    fn write_call(&mut self, ctx: Option<u64>) -> Result<(), String> {
        let tx = ctx.map(TxId);
        let files = self.live.files();
        let Some(f) = self.target(files, ctx) else {
            return Ok(());
        };
        let off = self.write_offset();
        let len = match self.rng.random_range(0..10) {
            0..=2 => self.rng.random_range(0..200usize),
            3..=6 => self.rng.random_range(0..4096usize),
            _ => self.rng.random_range(0..=16_384usize),
        };
        let mut data = vec![0u8; len];
        self.rng.fill(&mut data[..]);
        let span = (off, data.len() as u64);
        let want = self.live.check_write(f, span, &self.busy(ctx));
        let got = self.fs.write(tx, f, off, &data);
        if self.agree("write", got, want)?.is_some() {
            self.rep.far_writes += (off >= 1 << 30 && !data.is_empty()) as u64;
            let touched: &[MIno] = if data.is_empty() { &[] } else { &[f] };
            let touched = touched.to_vec();
            self.done(ctx, MOp::Write { ino: f, off, data }, &touched);
        }
        Ok(())
    }

    fn setattr_call(&mut self, ctx: Option<u64>) -> Result<(), String> {
        let tx = ctx.map(TxId);
        let cands: Vec<MIno> = self.live.nodes.keys().copied().collect();
        let Some(f) = self.target(cands, ctx) else {
            return Ok(());
        };
        let (size, mode, uid) = match self.rng.random_range(0..4) {
            0 => (
                None,
                Some(self.rng.random_range(0..0o1000u32)),
                Some(self.rng.random_range(0..3u32)),
            ),
            1 => (Some(0), None, None),
            _ => {
                let cur = self.live.get(f).map_or(0, |n| n.data.len());
                (Some(self.rng.random_range(0..=cur + 8192)), None, None)
            }
        };
        let want = self.live.check_setattr(f, size, &self.busy(ctx));
        let got = self.fs.setattr(
            tx,
            f,
            SetAttr {
                mode,
                uid,
                size,
                ..Default::default()
            },
        );
        if self.agree("setattr", got, want)?.is_some() {
            self.done(
                ctx,
                MOp::SetAttr {
                    ino: f,
                    mode,
                    uid,
                    gid: None,
                    size,
                    times: None,
                },
                &[f],
            );
        }
        Ok(())
    }

    /// unlink or rmdir, mostly of an open file's name (so that orphans are common).
    fn remove_call(&mut self, ctx: Option<u64>) -> Result<(), String> {
        let tx = ctx.map(TxId);
        let (p, name) = match self.open_file_name() {
            // Mostly an open file, so that orphans are common.
            Some(pn) if self.rng.random_bool(0.7) => pn,
            _ => {
                let dirs = self.live.dirs();
                let Some(p) = self.target(dirs, ctx) else {
                    return Ok(());
                };
                let name = self.existing_name(p);
                (p, name)
            }
        };
        let dir = self
            .live
            .get(p)
            .and_then(|n| n.entries.get(&name))
            .and_then(|&c| self.live.get(c))
            .map_or(self.rng.random_bool(0.5), |c| {
                c.dir ^ self.rng.random_bool(0.1)
            });
        let want = self.live.check_remove(p, &name, dir, &self.busy(ctx));
        let got = if dir {
            self.fs.rmdir(tx, p, &name)
        } else {
            self.fs.unlink(tx, p, &name)
        };
        let t = want.unwrap_or(0);
        if self
            .agree(if dir { "rmdir" } else { "unlink" }, got, want.map(|_| ()))?
            .is_some()
        {
            let keep = self.opens.contains_key(&t);
            let op = MOp::Remove {
                parent: p,
                name,
                dir,
                keep,
            };
            self.done(ctx, op, &[p, t]);
            self.count_orphan(t);
        }
        Ok(())
    }

    fn rename_call(&mut self, ctx: Option<u64>) -> Result<(), String> {
        let tx = ctx.map(TxId);
        let dirs = self.live.dirs();
        let Some(sp) = self.target(dirs.clone(), ctx) else {
            return Ok(());
        };
        let Some(dp) = self.target(dirs, ctx) else {
            return Ok(());
        };
        let flags = match self.rng.random_range(0..20) {
            0..=12 => RenameFlags::NONE,
            13..=14 => RenameFlags::NOREPLACE,
            15..=18 => RenameFlags::EXCHANGE,
            _ => {
                // Both: EINVAL. The draw that picked an unknown bit (before the flags
                // had a type the engine takes) stays, so that a seed runs the workload
                // it ran then.
                let _ = self.rng.random_range(0..3);
                RenameFlags {
                    noreplace: true,
                    exchange: true,
                }
            }
        };
        let sn = self.existing_name(sp);
        // An exchange needs both names: mostly an existing one.
        let dn = if flags == RenameFlags::EXCHANGE || self.rng.random_bool(0.4) {
            self.existing_name(dp)
        } else {
            self.name()
        };
        let names = (sp, &sn[..], dp, &dn[..]);
        let want = self.live.check_rename_flags(names, flags, &self.busy(ctx));
        let got = self.fs.rename(tx, sp, &sn, dp, &dn, flags);
        if self.agree("rename", got, want.map(|_| ()))?.is_some() {
            let (src, victim) = want.expect("agreed on success");
            if victim == Some(src) {
                // Renaming onto the same inode changes nothing.
                if ctx.is_none() {
                    self.push_commit();
                }
            } else {
                let exchange = flags == RenameFlags::EXCHANGE;
                self.rep.exchanges += exchange as u64;
                let mut touched = vec![sp, dp, src];
                touched.extend(victim);
                // A replaced target that is open stays (an exchange replaces nothing).
                let keep = !exchange && victim.is_some_and(|v| self.opens.contains_key(&v));
                let (from, to) = ((sp, sn), (dp, dn));
                let op = MOp::Rename {
                    from,
                    to,
                    flags,
                    keep,
                };
                self.done(ctx, op, &touched);
                if let Some(v) = victim {
                    self.count_orphan(v);
                }
            }
        }
        Ok(())
    }

    /// Mostly within the first 24 KiB; one write in 6 far out, where the triple- or
    /// quadruple-indirect tree maps it: at format 2's limit (the double tree's end), across
    /// format 4's (the triple tree's end, 512 GiB), at a triple-tree boundary, or at the
    /// largest file's end (EFBIG past it).
    fn write_offset(&mut self) -> u64 {
        const OLD_LIMIT: u64 = (12 + 512 + 512 * 512) * 4096;
        const TRIPLE_END: u64 = (12 + 512 + 512 * 512 + 512 * 512 * 512) * 4096;
        const SUBTREE: u64 = 512 * 512 * 4096;
        let near = self.rng.random_range(0..24_576u64);
        match self.rng.random_range(0..24) {
            0 => OLD_LIMIT - self.rng.random_range(0..8192u64),
            1 => TRIPLE_END - 8192 + near,
            2 => OLD_LIMIT + 5 * SUBTREE - self.rng.random_range(0..8192u64),
            3 => MAX_SIZE - self.rng.random_range(0..20_000u64),
            _ => near,
        }
    }

    /// A create, mkdir, symlink or mknod (valid targets and kinds mostly; an empty or a
    /// too-long target, a mknod of a directory or a link: EINVAL).
    fn create_node(&mut self, ctx: Option<u64>) -> Result<(), String> {
        let dirs = self.live.dirs();
        let Some(p) = self.target(dirs, ctx) else {
            return Ok(());
        };
        let name = self.name();
        let roll = self.rng.random_range(0..100u32);
        if roll >= 70 {
            return self.create_special(ctx, p, name, roll >= 85);
        }
        let dir = roll < 25;
        let mode = 0o640;
        let tx = ctx.map(TxId);
        let want = self.live.check_create(p, &name, &self.busy(ctx));
        let got = if dir {
            self.fs.mkdir(tx, p, &name, mode, ROOT_OWNER)
        } else {
            self.fs.create(tx, p, &name, mode, ROOT_OWNER)
        };
        if let Some(a) = self.agree(if dir { "mkdir" } else { "create" }, got, want)? {
            let op = MOp::Create {
                parent: p,
                name,
                ino: a.ino,
                dir,
                mode,
                special: None,
            };
            self.done(ctx, op, &[p, a.ino]);
        }
        Ok(())
    }

    /// A symlink (`link`) or a mknod of a FIFO, socket or device.
    fn create_special(
        &mut self,
        ctx: Option<u64>,
        p: MIno,
        name: Vec<u8>,
        link: bool,
    ) -> Result<(), String> {
        let tx = ctx.map(TxId);
        let (special, target, kind, rdev) = if link {
            let len = match self.rng.random_range(0..20) {
                0 => 0,
                1 => 4096,
                2 => 4095,
                3..=5 => self.rng.random_range(1..4095),
                _ => self.rng.random_range(1..64),
            };
            let t: Vec<u8> = (0..len)
                .map(|_| self.rng.random_range(b'a'..=b'z'))
                .collect();
            (MSpecial::Symlink, t, FileType::Symlink, 0)
        } else {
            let rdev = self.rng.random_range(1..1u32 << 20);
            match self.rng.random_range(0..10) {
                0..=2 => (MSpecial::Fifo, vec![], FileType::Fifo, 0),
                3..=4 => (MSpecial::Socket, vec![], FileType::Socket, 0),
                5..=6 => (MSpecial::Char(rdev), vec![], FileType::CharDev, rdev),
                7..=8 => (MSpecial::Block(rdev), vec![], FileType::BlockDev, rdev),
                // mknod does not make directories or links.
                _ => (MSpecial::Fifo, vec![], FileType::Dir, 0),
            }
        };
        let want = if kind == FileType::Dir {
            Err(22)
        } else {
            let sp = (special, &target[..]);
            self.live.check_special(p, &name, sp, &self.busy(ctx))
        };
        let got = if link {
            self.fs.symlink(tx, p, &name, &target, ROOT_OWNER)
        } else {
            MknodKind::new(kind, rdev)
                .and_then(|k| self.fs.mknod(tx, p, &name, k, 0o640, ROOT_OWNER))
        };
        let Some(a) = self.agree(if link { "symlink" } else { "mknod" }, got, want)? else {
            return Ok(());
        };
        if a.kind != kind || a.rdev != rdev {
            return Err(format!("{kind:?} {rdev} made as {:?} {}", a.kind, a.rdev));
        }
        self.rep.symlinks += link as u64;
        self.rep.specials += !link as u64;
        let op = MOp::Create {
            parent: p,
            name,
            ino: a.ino,
            dir: false,
            mode: if link { 0o777 } else { 0o640 },
            special: Some((special, target)),
        };
        self.done(ctx, op, &[p, a.ino]);
        Ok(())
    }

    /// link(2): a new name for a file (mostly a named one, sometimes an orphan: ENOENT).
    fn link_file(&mut self, ctx: Option<u64>) -> Result<(), String> {
        let files = self.live.files();
        let Some(f) = self.target(files, ctx) else {
            return Ok(());
        };
        let f = if self.rng.random_bool(0.05) {
            self.pick(&self.live.dirs()).expect("root")
        } else {
            f
        };
        let dirs = self.live.dirs();
        let Some(p) = self.target(dirs, ctx) else {
            return Ok(());
        };
        let name = self.name();
        let want = self.live.check_link(f, p, &name, &self.busy(ctx));
        let got = self.fs.link(ctx.map(TxId), f, p, &name);
        if self.agree("link", got, want)?.is_some() {
            self.rep.links += 1;
            self.done(
                ctx,
                MOp::Link {
                    ino: f,
                    parent: p,
                    name,
                },
                &[p, f],
            );
        }
        Ok(())
    }

    /// fallocate: mode 0, KEEP_SIZE (often past the end) or a punch, mostly within the
    /// first blocks, sometimes far out (new indirect blocks on the way), some too large for
    /// the device (ENOSPC, which must leave nothing).
    fn fallocate_call(&mut self, ctx: Option<u64>) -> Result<(), String> {
        let files = self.live.files();
        let Some(f) = self.target(files, ctx) else {
            return Ok(());
        };
        let mode =
            [MFalloc::Allocate, MFalloc::KeepSize, MFalloc::Punch][self.rng.random_range(0..3)];
        let off = match self.rng.random_range(0..8) {
            0 => self.write_offset(),
            _ => self.rng.random_range(0..40_000u64),
        };
        let len = match self.rng.random_range(0..10) {
            0 => 0,
            1 => self.rng.random_range(400_000..900_000u64),
            _ => self.rng.random_range(1..40_000u64),
        };
        let want = self
            .live
            .check_fallocate(f, (off, len), mode, &self.busy(ctx));
        let tx = ctx.map(TxId);
        let got = match mode {
            MFalloc::Punch => self.fs.punch_hole(tx, f, off, len),
            _ => self
                .fs
                .fallocate(tx, f, off, len, mode == MFalloc::KeepSize),
        };
        if self.agree("fallocate", got, want)?.is_some() {
            self.rep.fallocates += 1;
            self.done(
                ctx,
                MOp::Fallocate {
                    ino: f,
                    off,
                    len,
                    mode,
                },
                &[f],
            );
        }
        Ok(())
    }

    /// setxattr (with or without the create/replace flags; values up to one block, so
    /// some sets overflow it: ENOSPC) or removexattr, on any inode.
    fn xattr_call(&mut self, ctx: Option<u64>) -> Result<(), String> {
        const NAMES: [&[u8]; 4] = [b"user.a", b"user.b", b"user.c", b"trusted.t"];
        let cands: Vec<MIno> = self.live.nodes.keys().copied().collect();
        let Some(f) = self.target(cands, ctx) else {
            return Ok(());
        };
        let name = NAMES[self.rng.random_range(0..NAMES.len())].to_vec();
        let tx = ctx.map(TxId);
        if self.rng.random_bool(0.25) {
            let want = self.live.check_xattr(f, &name, None, &self.busy(ctx));
            let got = self.fs.removexattr(tx, f, &name);
            if self.agree("removexattr", got, want)?.is_some() {
                let op = MOp::SetXattr {
                    ino: f,
                    name,
                    value: None,
                };
                self.done(ctx, op, &[f]);
            }
            return Ok(());
        }
        let len = match self.rng.random_range(0..10) {
            0..=5 => self.rng.random_range(0..64usize),
            6..=7 => self.rng.random_range(0..1500usize),
            8 => self.rng.random_range(2000..4070usize),
            // More than one block holds with its headers: ENOSPC, which must leave nothing.
            _ => self.rng.random_range(4080..4200usize),
        };
        let mut value = vec![0u8; len];
        self.rng.fill(&mut value[..]);
        let mode = match self.rng.random_range(0..10) {
            0 => XattrMode::Create,
            1 => XattrMode::Replace,
            _ => XattrMode::Any,
        };
        let want = self.live.check_xattr(f, &name, Some(mode), &self.busy(ctx));
        let got = self.fs.setxattr(tx, f, &name, &value, mode);
        if self.agree("setxattr", got, want)?.is_some() {
            self.rep.xattr_sets += 1;
            let op = MOp::SetXattr {
                ino: f,
                name,
                value: Some(value),
            };
            self.done(ctx, op, &[f]);
        }
        Ok(())
    }

    /// The directory and name of an open file or directory that has one (half the time an
    /// open directory when there is one, so that directories are removed while open).
    fn open_file_name(&mut self) -> Option<(MIno, Vec<u8>)> {
        let mut named: Vec<(MIno, Vec<u8>, bool)> = self
            .live
            .nodes
            .iter()
            .flat_map(|(&d, n)| {
                n.entries
                    .iter()
                    .filter(|(_, c)| self.opens.contains_key(c))
                    .map(move |(name, &c)| (d, name.clone(), c))
            })
            .map(|(d, name, c)| (d, name, self.live.get(c).is_some_and(|n| n.dir)))
            .collect();
        if named.iter().any(|e| e.2) && self.rng.random_bool(0.5) {
            named.retain(|e| e.2);
        }
        if named.is_empty() {
            return None;
        }
        let k = self.rng.random_range(0..named.len());
        Some((named[k].0, named[k].1.clone()))
    }

    /// Opens a file or a directory (not the root), counted in the model.
    fn open_file(&mut self) -> Result<(), String> {
        let mut files = self.live.files();
        // Often an empty directory when there is one: rmdir can remove it while open.
        let mut dirs = self.live.dirs();
        dirs.retain(|&d| d != MROOT && self.live.get(d).is_some_and(|n| n.entries.is_empty()));
        if !dirs.is_empty() && self.rng.random_bool(0.5) {
            files = dirs;
        }
        let Some(f) = self.pick(&files) else {
            return Ok(());
        };
        self.fs.open(f).map_err(|e| format!("open {f}: {e}"))?;
        self.last = format!("open {f}");
        self.zombies.remove(&f);
        *self.opens.entry(f).or_default() += 1;
        self.rep.opens += 1;
        Ok(())
    }

    /// Releases an open file; the last release of an orphan frees it (in a commit of its
    /// own that changes no visible state) unless a transaction owns it (then at its end).
    fn release_file(&mut self) -> Result<(), String> {
        let mut open: Vec<MIno> = self.opens.keys().copied().collect();
        let orphans: Vec<MIno> = self.live.orphans();
        if self.rng.random_bool(0.8) && open.iter().any(|o| orphans.contains(o)) {
            // Mostly an orphan, so that last releases free some.
            open.retain(|o| orphans.contains(o));
        }
        let Some(f) = self.pick(&open) else {
            return Ok(());
        };
        self.fs
            .release(None, f)
            .map_err(|e| format!("release {f}: {e}"))?;
        self.last = format!("release {f}");
        let c = self.opens.get_mut(&f).expect("picked");
        // Only open files are picked, and a count of 0 is removed at once.
        *c = (c.checked_sub(1))
            .unwrap_or_else(|| panic!("model open count of {f} is 0 while in the map"));
        if *c == 0 {
            self.opens.remove(&f);
            if self.live.orphans().contains(&f) {
                self.zombies.insert(f);
                self.reap();
            }
        }
        Ok(())
    }

    /// Frees the model's waiting orphans that no transaction owns (after a release, commit
    /// or abort), as the engine does.
    fn reap(&mut self) {
        let ready: Vec<MIno> = self
            .zombies
            .iter()
            .copied()
            .filter(|z| !self.owner.contains_key(z))
            .collect();
        for z in ready {
            self.zombies.remove(&z);
            if self.opens.contains_key(&z) || !self.live.orphans().contains(&z) {
                continue;
            }
            self.live.free_orphan(z);
            // No open transaction owns it, so its unlink is committed.
            self.committed.free_orphan(z);
            self.rep.orphans_freed += 1;
        }
    }

    /// Paging a directory 3 entries at a time (cookies) must list what one readdir does.
    fn check_paging(&self) -> Result<(), String> {
        for d in self.live.dirs() {
            let all = self
                .fs
                .readdir(d, 0, usize::MAX)
                .map_err(|e| format!("readdir {d}: {e}"))?;
            let mut paged = Vec::new();
            let mut cookie = 0;
            loop {
                let page = self
                    .fs
                    .readdir(d, cookie, 3)
                    .map_err(|e| format!("readdir {d} from {cookie}: {e}"))?;
                let Some(last) = page.last() else { break };
                if last.cookie <= cookie {
                    return Err(format!("readdir {d}: cookie {cookie} did not advance"));
                }
                cookie = last.cookie;
                paged.extend(page);
            }
            if paged != all {
                return Err(format!(
                    "directory {d}: paged readdir lists {} entries, readdir {}",
                    paged.len(),
                    all.len()
                ));
            }
        }
        Ok(())
    }

    /// Counts `ino` in the report if the call just made it an orphan.
    fn count_orphan(&mut self, ino: MIno) {
        if self.live.orphans().contains(&ino) {
            self.rep.orphans_made += 1;
            self.rep.dir_orphans_made += self.live.get(ino).is_some_and(|n| n.dir) as u64;
        }
    }

    /// An orphan directory (removed while open): a directory, link count 0, no entries.
    fn check_orphan_dir(&self, o: MIno) -> Result<(), String> {
        let a = (self.fs.getattr(o))
            .map_err(|e| format!("getattr of orphan directory {o} (removed while open): {e}"))?;
        let listed = (self.fs.readdir(o, 0, usize::MAX))
            .map_err(|e| format!("readdir of orphan directory {o}: {e}"))?;
        if a.kind != FileType::Dir || a.nlink != 0 || !listed.is_empty() {
            return Err(format!(
                "orphan directory {o}: {:?} with link count {} and {} entries (a directory, 0, none expected)",
                a.kind,
                a.nlink,
                listed.len()
            ));
        }
        Ok(())
    }

    /// What reads of the open orphans show must equal the model.
    fn check_orphans(&self) -> Result<(), String> {
        for o in self.live.orphans() {
            if self.live.get(o).is_some_and(|n| n.dir) {
                self.check_orphan_dir(o)?;
                continue;
            }
            let want = &self.live.get(o).expect("listed").data;
            let size = self
                .fs
                .getattr(o)
                .map_err(|e| format!("getattr of orphan {o} (unlinked while open): {e}"))?
                .size;
            let got = sparse_content(&self.fs, o, size)
                .map_err(|e| format!("orphan {o} (unlinked while open): {e}"))?;
            if (size, got) != (want.len(), want.digest()) {
                return Err(format!(
                    "orphan {o} has {size} bytes, the model {} (or the content differs)",
                    want.len()
                ));
            }
        }
        Ok(())
    }

    /// Recovers every image taken since the last call and checks it against the commits
    /// `lo..=hi`.
    fn check_images(&mut self, call: usize, lo: usize, hi: usize) -> Result<(), SimFailure> {
        let images = self.fs.device_mut().take();
        for img in images {
            self.rep.images += 1;
            let fail = |msg: String, bytes: Option<Vec<u8>>| SimFailure {
                seed: self.cfg.seed,
                call: Some(call),
                crash_point: Some(img.point),
                image: Some(img.description.clone()),
                message: msg,
                bytes,
            };
            let key = image_key(&img.bytes);
            let d = match self.seen.get(&key) {
                Some(&d) => d,
                None => {
                    self.rep.distinct_images += 1;
                    let n = self.rep.distinct_images;
                    let (mut fs, snap) = recover(img.bytes.clone(), self.cfg.tunables)
                        .map_err(|m| fail(m, Some(img.bytes.clone())))?;
                    let d = digest(&snap);
                    if !(lo..=hi).any(|k| self.digests[k] == d) {
                        let want = &self.last_snaps[self.last_snaps.len()
                            - 1
                            - (self.digests.len() - 1 - lo).min(self.last_snaps.len() - 1)];
                        return Err(fail(format!("the recovered state is not the state after commit {lo}{} (the commits that returned before the crash, plus the one in progress): {}", if hi > lo { format!(" or {hi}") } else { String::new() }, diff(&snap, want)), Some(img.bytes)));
                    }
                    if self.cfg.checkpoint_after_every > 0
                        && n.is_multiple_of(self.cfg.checkpoint_after_every)
                    {
                        self.rep.checkpoint_after_recovery += 1;
                        fs.checkpoint().map_err(|e| {
                            fail(
                                format!("checkpoint after recovery: {e}"),
                                Some(img.bytes.clone()),
                            )
                        })?;
                        fs.check_invariants().map_err(|e| {
                            fail(
                                format!("after a checkpoint after recovery: {e}"),
                                Some(img.bytes.clone()),
                            )
                        })?;
                        let s2 = engine_snapshot(&mut fs)
                            .map_err(|m| fail(m, Some(img.bytes.clone())))?;
                        if digest(&s2) != d {
                            return Err(fail(
                                format!(
                                    "a checkpoint after recovery changed the state: {}",
                                    diff(&s2, &snap)
                                ),
                                Some(img.bytes),
                            ));
                        }
                    }
                    if self.cfg.recovery_crash_every > 0
                        && n.is_multiple_of(self.cfg.recovery_crash_every)
                    {
                        let mut p = Probe::new(
                            PmemSim::from_image(img.bytes.clone()).expect("sized"),
                            self.cfg.seed ^ n,
                            2,
                            16,
                        );
                        p.capture = true;
                        let (fs2, _) = PmemFs::mount(p)
                            .map_err(|e| fail(format!("mount: {e}"), Some(img.bytes.clone())))?;
                        for inner in fs2.into_device().take() {
                            self.rep.recovery_crash_images += 1;
                            let (_, s3) =
                                recover(inner.bytes.clone(), self.cfg.tunables).map_err(|m| {
                                    fail(
                                        format!(
                                            "after a crash at fence {} of recovery ({}): {m}",
                                            inner.point, inner.description
                                        ),
                                        Some(inner.bytes.clone()),
                                    )
                                })?;
                            if digest(&s3) != d {
                                return Err(fail(format!("recovery is not idempotent: a crash at fence {} of recovery ({}) then recovery gives another state: {}", inner.point, inner.description, diff(&s3, &snap)), Some(inner.bytes)));
                            }
                        }
                    }
                    self.seen.insert(key, d);
                    d
                }
            };
            if hi > lo && self.digests[hi] == d && self.digests[lo] != d {
                self.rep.newest += 1;
            } else if hi > lo && self.digests[lo] == d && self.digests[hi] != d {
                self.rep.older += 1;
            }
            if !(lo..=hi).any(|k| self.digests[k] == d) {
                let at: Vec<usize> = (0..self.digests.len())
                    .filter(|&k| self.digests[k] == d)
                    .collect();
                return Err(fail(format!("an image identical to one recovered earlier recovered to a state outside commits {lo}..={hi} (the state after commits {at:?})"), Some(img.bytes)));
            }
        }
        Ok(())
    }
}

/// Runs one seeded workload with crash checks at every fence.
pub fn run(cfg: &SimConfig) -> Result<SimReport, SimFailure> {
    let seed = cfg.seed;
    let fail0 = |call: Option<usize>, message: String| SimFailure {
        call,
        ..SimFailure::new(seed, message)
    };
    let mut sim = PmemSim::new(cfg.device_len).map_err(|e| fail0(None, e.to_string()))?;
    PmemFs::mkfs(
        &mut sim,
        &MkfsOptions {
            inodes: cfg.inodes,
            log_entries: cfg.log_entries,
        },
    )
    .map_err(|e| fail0(None, format!("mkfs: {e}")))?;
    let (mut fs, _) = PmemFs::mount(Probe::new(
        sim,
        seed,
        cfg.images_per_point,
        cfg.exhaustive_up_to,
    ))
    .map_err(|e| fail0(None, format!("mount after mkfs: {e}")))?;
    fs.set_clock(fixed_clock);
    fs.set_tunables(cfg.tunables);
    fs.device_mut().capture = true;
    let mut run = Run {
        cfg: cfg.clone(),
        rng: ChaCha8Rng::seed_from_u64(seed),
        fs,
        live: MState::with_max_size(MAX_SIZE),
        committed: MState::with_max_size(MAX_SIZE),
        open: BTreeMap::new(),
        owner: HashMap::new(),
        digests: Vec::new(),
        last_snaps: Vec::new(),
        seen: HashMap::new(),
        rep: SimReport {
            workloads: 1,
            ..Default::default()
        },
        last: String::new(),
        opens: BTreeMap::new(),
        zombies: BTreeSet::new(),
        unit_with_open: false,
        unit_rng: ChaCha8Rng::seed_from_u64(seed ^ 0xb6c4_ec00_0000_0001),
    };
    run.push_commit();
    // INTACTFS_PMEM_SIM_TRACE=1: one line per call on stderr.
    let trace = std::env::var_os("INTACTFS_PMEM_SIM_TRACE").is_some();
    for call in 0..cfg.calls {
        let lo = run.digests.len() - 1;
        run.step().map_err(|m| fail0(Some(call), m))?;
        if trace {
            eprintln!(
                "call {call}: commits {lo}->{}, open {:?}, fences so far {}, ops {:?}",
                run.digests.len() - 1,
                run.open.keys().collect::<Vec<_>>(),
                run.fs.device().points,
                run.open.values().map(|v| v.len()).collect::<Vec<_>>()
            );
        }
        run.rep.calls += 1;
        let hi = run.digests.len() - 1;
        if hi > lo + 1 {
            return Err(fail0(
                Some(call),
                format!("one call made {} commits", hi - lo),
            ));
        }
        let images = run.rep.images;
        run.check_images(call, lo, hi)?;
        if std::mem::take(&mut run.unit_with_open) {
            run.rep.background_unit_images += run.rep.images - images;
        }
        run.fs
            .check_invariants()
            .map_err(|e| fail0(Some(call), format!("invariants after the call: {e}")))?;
        run.check_orphans().map_err(|m| fail0(Some(call), m))?;
        run.check_paging().map_err(|m| fail0(Some(call), m))?;
        let s = engine_snapshot(&mut run.fs).map_err(|m| fail0(Some(call), m))?;
        if digest(&s) != digest(&run.live.snapshot()) {
            return Err(fail0(
                Some(call),
                format!(
                    "what the engine shows differs from the model's live state: {}",
                    diff(&s, &run.live.snapshot())
                ),
            ));
        }
    }
    // A crash at the end, with whatever is still volatile (and transactions still open).
    let end = run.digests.len() - 1;
    run.fs.device_mut().snap();
    run.check_images(cfg.calls, end, end)?;
    run.rep.crash_points = run.fs.device().points;
    run.rep.exhaustive_points = run.fs.device().exhaustive_points;
    let st = run.fs.stats();
    run.rep.checkpoints = st.checkpoints;
    run.rep.blocks_checkpointed = st.blocks_checkpointed;
    run.rep.pointer_swaps = st.pointer_swaps;
    run.rep.redo_entries = st.redo_entries;
    run.rep.undo_entries = st.undo_entries;
    run.rep.entries_retired = st.entries_retired;
    Ok(run.rep)
}
