//! `txbench`: the FCFS paper's microbenchmark (002 §VI-B, Figure 7), three systems side by
//! side on the same emulated persistent memory (issue 14 item 5).
//!
//! Each transaction picks 2 distinct files of N and overwrites a random range of 0–16 KiB at a
//! random offset in each, atomically. The systems:
//!
//! * `fcfs`  — the real engine [`PmemFs`]: `tx_begin(&[a, b])`, `write(Some(tx), ..)` twice,
//!   `tx_commit` (hybrid fine-grained logging: data into pending blocks, one redo entry per
//!   block, undo entries for the inode words; checkpoints inline when the engine decides to).
//! * `fcfs-bg` — the same engine with background checkpoints
//!   (`Tunables::background_checkpoints`): commit leaves due checkpoints to a checkpointer
//!   thread (`intactfs_pmem::background::Checkpointer`) that takes the same lock per unit
//!   (`PmemFs::checkpoint_step`) while the workers' transactions go on.
//! * `fgwal` — fine-grained redo write-ahead logging (the paper's FG-WAL, after PMFS's
//!   journal): a minimal store in this file, over the same device type and the same file sizes.
//!   Each write call logs its bytes as 64-byte redo entries carrying 48 data bytes each (plus
//!   one entry for the inode's mtime word), `clwb`'d as written; commit: fence, commit
//!   record and fence, the data and mtime written in place with `clwb` and fence, commit
//!   record cleared and fence.
//! * `nc`    — no consistency (the paper's PMFS baseline): data and mtime stored in place
//!   at write time and `clwb`'d; commit: one fence.
//!
//! All three run on a `Latency<PmemFile>`: a file in `--dir` (default /var/tmp), mapped,
//! unlinked at once (so nothing is left behind, whatever ends the process), with
//! `LatencyModel::FCFS` (150 ns per flushed line, 4 GB/s) or no latency (`--latency`).
//! Set-up (mkfs, creating and filling the files) runs without latency.
//!
//! Prints one JSON line per (system, latency model, threads, repetition). Threads share the
//! system through one lock (`intactfs_pmem::background::Gate`: the engine is
//! single-threaded); each thread uses its own files
//! (file i belongs to thread i mod T), and the lock is taken per call, so transactions of
//! different threads interleave. CPU time is reported for the transaction threads alone
//! (`tx_cpu_us_per_txn`), the checkpointer thread (`bg_cpu_us_per_txn`), and the whole
//! process over the phase and its drain (`proc_cpu_us_per_txn`), so that work moved off the
//! commit path is not hidden.

use clap::Parser;
use intactfs_device::{Latency, LatencyModel, PmemCounters, PmemDevice, PmemFile};
use intactfs_pmem::background::{Checkpointer, Gate};
use intactfs_pmem::prelude::*;
use intactfs_pmem::{MkfsOptions, Owner, PmemFs, Tunables, TxId, BLOCK, ROOT};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

type Dev = Latency<PmemFile>;

#[derive(Parser, Debug)]
#[command(
    name = "txbench",
    about = "FCFS microbenchmark (002 §VI-B): intactfs-FCFS vs FG-WAL vs no consistency on emulated pmem",
    after_help = "Example: cargo run --release -p intactfs-pmem --example txbench -- --files 100 --file-mib 1 --txns 2000"
)]
struct Args {
    /// Number of files (the paper: 1000).
    #[arg(long, default_value_t = 1000)]
    files: u64,
    /// Size of each file in MiB (the paper: 4).
    #[arg(long, default_value_t = 4)]
    file_mib: u64,
    /// Transactions per (system, latency model, threads, repetition), over all threads.
    #[arg(long, default_value_t = 5000)]
    txns: u64,
    /// Largest write in bytes (each write is 0..=this, uniformly).
    #[arg(long, default_value_t = 16384)]
    max_write: u64,
    /// Thread counts, comma-separated.
    #[arg(long, default_value = "1,2")]
    threads: String,
    /// Latency models, comma-separated: fcfs (150 ns per flushed line, 4 GB/s) and/or none.
    #[arg(long, default_value = "fcfs,none")]
    latency: String,
    /// Systems, comma-separated (fcfs, fcfs-bg, fgwal, nc); their order rotates per
    /// repetition.
    #[arg(long, default_value = "fcfs,fcfs-bg,fgwal,nc")]
    systems: String,
    /// Repetitions (each on freshly made images).
    #[arg(long, default_value_t = 1)]
    reps: u64,
    /// Workload seed (every system gets the same transactions).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory for the pmem image files (a disk file system; each is unlinked once mapped).
    #[arg(long, default_value = "/var/tmp")]
    dir: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sys {
    Fcfs,
    FcfsBg,
    FgWal,
    Nc,
}

impl Sys {
    fn name(self) -> &'static str {
        match self {
            Sys::Fcfs => "fcfs",
            Sys::FcfsBg => "fcfs-bg",
            Sys::FgWal => "fgwal",
            Sys::Nc => "nc",
        }
    }
}

/// What the benchmark drives: the engine or a baseline store.
trait System: Send {
    fn begin(&mut self, files: [usize; 2]) -> Result<u64, String>;
    fn write(&mut self, tx: u64, file: usize, off: u64, data: &[u8]) -> Result<(), String>;
    /// Commits; true when background work is due (the checkpointer is to be woken).
    fn commit(&mut self, tx: u64) -> Result<bool, String>;
    /// Finishes deferred work (the engine: a full checkpoint).
    fn drain(&mut self) -> Result<(), String>;
    fn counters(&self) -> PmemCounters;
    fn set_model(&mut self, m: LatencyModel);
    /// (checkpoints, lines copied by checkpoints, pointer swaps, background units,
    /// checkpoints a call ran because the log or the free blocks were exhausted) — the
    /// engine only.
    fn engine_stats(&self) -> [u64; 5] {
        [0; 5]
    }
    /// Whether a checkpointer thread runs [`System::background_step`] beside the workers.
    fn background(&self) -> bool {
        false
    }
    /// One background unit; true when more work is due at once.
    fn background_step(&mut self) -> Result<bool, String> {
        Ok(false)
    }
}

// ---------------------------------------------------------------- the image file

/// Creates the image file, maps it and unlinks it at once (the mapping keeps it alive; the
/// space is freed when the process ends, however it ends).
fn image(dir: &Path, what: &str, len: u64) -> Result<Dev, String> {
    let path = dir.join(format!(
        "intactfs-txbench-{}-{what}.img",
        std::process::id()
    ));
    struct Unlink<'a>(&'a Path);
    impl Drop for Unlink<'_> {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(self.0);
        }
    }
    let _guard = Unlink(&path);
    let f = PmemFile::create(&path, len).map_err(|e| e.to_string())?;
    Ok(Latency::new(f, LatencyModel::default()))
}

struct Layout {
    len: u64,
    log_entries: u64,
    inodes: u64,
    file_blocks: u64,
}

/// The device size: the files with their indirect blocks, a directory, 25 % slack for
/// pending blocks, the log (as `MkfsOptions::for_len`) and the inode table.
fn layout(files: u64, file_bytes: u64) -> Layout {
    let file_blocks = file_bytes / BLOCK;
    let ind = if file_blocks > 12 { 1 } else { 0 }
        + if file_blocks > 12 + 512 {
            1 + (file_blocks - 12 - 512).div_ceil(512)
        } else {
            0
        };
    let data = files * (file_blocks + ind) + files.div_ceil(15) + 64;
    let data = data + data / 4;
    let inodes = files + 16;
    let guess = data * BLOCK;
    let log_entries = MkfsOptions::for_len(guess).log_entries;
    let meta = 1 + (log_entries * 64).div_ceil(BLOCK) + (inodes * 256).div_ceil(BLOCK);
    Layout {
        len: (data + meta) * BLOCK,
        log_entries,
        inodes,
        file_blocks,
    }
}

// ---------------------------------------------------------------- intactfs-FCFS

struct Fcfs {
    fs: PmemFs<Dev>,
    inos: Vec<u64>,
    bg: bool,
}

fn e2s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

impl Fcfs {
    fn setup(
        dir: &Path,
        files: u64,
        file_bytes: u64,
        fill: &[u8],
        bg: bool,
    ) -> Result<Fcfs, String> {
        let l = layout(files, file_bytes);
        let mut dev = image(dir, "fcfs", l.len)?;
        PmemFs::mkfs(
            &mut dev,
            &MkfsOptions {
                inodes: l.inodes,
                log_entries: l.log_entries,
            },
        )
        .map_err(|e| format!("mkfs: {e}"))?;
        let (mut fs, _) = PmemFs::mount(dev).map_err(|e| format!("mount: {e}"))?;
        let mut inos = Vec::new();
        for i in 0..files {
            let a = fs
                .create(
                    None,
                    ROOT,
                    format!("f{i}").as_bytes(),
                    0o644,
                    Owner::default(),
                )
                .map_err(|e| format!("create f{i}: {e}"))?;
            let mut off = 0;
            while off < file_bytes {
                let n = (file_bytes - off).min(fill.len() as u64);
                fs.write(None, a.ino, off, &fill[..n as usize])
                    .map_err(|e| format!("filling f{i}: {e}"))?;
                off += n;
            }
            inos.push(a.ino);
        }
        fs.checkpoint()
            .map_err(|e| format!("checkpoint after filling: {e}"))?;
        fs.set_tunables(Tunables {
            background_checkpoints: bg,
            ..fs.tunables()
        });
        Ok(Fcfs { fs, inos, bg })
    }
}

impl System for Fcfs {
    fn begin(&mut self, f: [usize; 2]) -> Result<u64, String> {
        self.fs
            .tx_begin(&[self.inos[f[0]], self.inos[f[1]]])
            .map(|t| t.0)
            .map_err(e2s)
    }
    fn write(&mut self, tx: u64, file: usize, off: u64, data: &[u8]) -> Result<(), String> {
        self.fs
            .write(Some(TxId(tx)), self.inos[file], off, data)
            .map(|_| ())
            .map_err(e2s)
    }
    fn commit(&mut self, tx: u64) -> Result<bool, String> {
        self.fs.tx_commit(TxId(tx)).map_err(e2s)?;
        Ok(self.bg && self.fs.checkpoint_due())
    }
    fn drain(&mut self) -> Result<(), String> {
        self.fs.checkpoint().map(|_| ()).map_err(e2s)
    }
    fn counters(&self) -> PmemCounters {
        self.fs.device_counters()
    }
    fn set_model(&mut self, m: LatencyModel) {
        self.fs.device_mut().set_model(m);
    }
    fn engine_stats(&self) -> [u64; 5] {
        let s = self.fs.stats();
        [
            s.checkpoints,
            s.lines_copied,
            s.pointer_swaps,
            s.background_units,
            s.exhausted_checkpoints,
        ]
    }
    fn background(&self) -> bool {
        self.bg
    }
    fn background_step(&mut self) -> Result<bool, String> {
        self.fs.background_unit().map_err(e2s)
    }
}

// ---------------------------------------------------------------- FG-WAL and no consistency

/// Bytes of data one FG-WAL redo entry carries (PMFS's journal entry: 64 bytes, 48 of data).
const ENTRY_DATA: usize = 48;
const ENTRY: u64 = 64;
/// Marks a commit record in an entry's target word.
const COMMIT: u64 = u64::MAX;
/// The mtime word in a 256-byte inode slot (the engine's is word 5).
const MTIME: u64 = 40;

#[derive(Default)]
struct StoreTx {
    slots: Vec<u64>,
    /// FG-WAL: what to write in place at commit (target, bytes).
    redo: Vec<(u64, Vec<u8>)>,
    files: Vec<usize>,
}

/// A minimal store with the engine's layout: block 0 (superblock, unused), a log of
/// `log_entries` 64-byte entries, an inode table of 256-byte slots, then each file's blocks,
/// contiguous. No namespace, no allocation, no recovery code: just the two protocols' pmem
/// traffic. FG-WAL entries: word 0 = target offset | length << 56 (COMMIT: a commit record,
/// word 1 = its entry count), bytes 8..56 data, word 7 = tx id << 32 | crc32c(bytes 0..56);
/// recovery would replay the entries of transactions whose commit record is valid.
struct Store {
    dev: Dev,
    wal: bool,
    log_off: u64,
    log_entries: u64,
    busy: Vec<bool>,
    cursor: u64,
    inode_off: u64,
    data_off: u64,
    file_bytes: u64,
    next_tx: u64,
    txs: HashMap<u64, StoreTx>,
    clock: u64,
}

impl Store {
    fn setup(
        dir: &Path,
        wal: bool,
        files: u64,
        file_bytes: u64,
        fill: &[u8],
    ) -> Result<Store, String> {
        let l = layout(files, file_bytes);
        let mut dev = image(dir, if wal { "fgwal" } else { "nc" }, l.len)?;
        let log_off = BLOCK;
        let inode_off = log_off + (l.log_entries * ENTRY).div_ceil(BLOCK) * BLOCK;
        let data_off = inode_off + (l.inodes * 256).div_ceil(BLOCK) * BLOCK;
        let file_bytes = l.file_blocks * BLOCK;
        let zeros = vec![0u8; BLOCK as usize];
        let mut b = 0;
        while b < data_off {
            dev.write(b, &zeros).map_err(e2s)?;
            b += BLOCK;
        }
        dev.persist(0, data_off).map_err(e2s)?;
        for i in 0..files {
            let base = data_off + i * file_bytes;
            let mut off = 0;
            while off < file_bytes {
                let n = (file_bytes - off).min(fill.len() as u64);
                dev.write(base + off, &fill[..n as usize]).map_err(e2s)?;
                dev.clwb(base + off, n).map_err(e2s)?;
                off += n;
            }
            dev.fence().map_err(e2s)?;
        }
        Ok(Store {
            dev,
            wal,
            log_off,
            log_entries: l.log_entries,
            busy: vec![false; l.log_entries as usize],
            cursor: 0,
            inode_off,
            data_off,
            file_bytes,
            next_tx: 1,
            txs: HashMap::new(),
            clock: 1,
        })
    }

    fn take_slot(&mut self) -> Result<u64, String> {
        for _ in 0..self.log_entries {
            let s = self.cursor;
            self.cursor = (self.cursor + 1) % self.log_entries;
            if !self.busy[s as usize] {
                self.busy[s as usize] = true;
                return Ok(s);
            }
        }
        Err(format!("FG-WAL log full ({} entries)", self.log_entries))
    }

    /// Writes one log entry (body and valid word in one store: the checksum tells a torn
    /// entry) and schedules its write-back.
    fn log_entry(&mut self, tx: u64, w0: u64, data: &[u8]) -> Result<u64, String> {
        let slot = self.take_slot()?;
        let mut e = [0u8; ENTRY as usize];
        e[..8].copy_from_slice(&w0.to_le_bytes());
        e[8..8 + data.len()].copy_from_slice(data);
        let valid = (tx & 0xffff_ffff) << 32 | crc32c::crc32c(&e[..56]) as u64;
        e[56..].copy_from_slice(&valid.to_le_bytes());
        let at = self.log_off + slot * ENTRY;
        self.dev.write(at, &e).map_err(e2s)?;
        self.dev.clwb(at, ENTRY).map_err(e2s)?;
        Ok(slot)
    }
}

impl System for Store {
    fn begin(&mut self, files: [usize; 2]) -> Result<u64, String> {
        let id = self.next_tx;
        self.next_tx += 1;
        self.txs.insert(
            id,
            StoreTx {
                files: files.to_vec(),
                ..Default::default()
            },
        );
        Ok(id)
    }
    fn write(&mut self, tx: u64, file: usize, off: u64, data: &[u8]) -> Result<(), String> {
        let t = self
            .txs
            .get(&tx)
            .ok_or_else(|| format!("unknown transaction {tx}"))?;
        if !t.files.contains(&file) || off + data.len() as u64 > self.file_bytes {
            return Err(format!(
                "write outside transaction {tx}'s files or beyond a file's end"
            ));
        }
        if data.is_empty() {
            return Ok(());
        }
        let target = self.data_off + file as u64 * self.file_bytes + off;
        let mtime_at = self.inode_off + (file as u64 + 1) * 256 + MTIME;
        self.clock += 1;
        let now = self.clock;
        if self.wal {
            let mut slots = Vec::with_capacity(data.len() / ENTRY_DATA + 2);
            for (k, chunk) in data.chunks(ENTRY_DATA).enumerate() {
                let at = target + (k * ENTRY_DATA) as u64;
                slots.push(self.log_entry(tx, at | (chunk.len() as u64) << 56, chunk)?);
            }
            slots.push(self.log_entry(tx, mtime_at | 8 << 56, &now.to_le_bytes())?);
            let t = self.txs.get_mut(&tx).expect("checked");
            t.slots.extend(slots);
            t.redo.push((target, data.to_vec()));
            t.redo.push((mtime_at, now.to_le_bytes().to_vec()));
        } else {
            self.dev.write(target, data).map_err(e2s)?;
            self.dev.clwb(target, data.len() as u64).map_err(e2s)?;
            self.dev.store_u64(mtime_at, now).map_err(e2s)?;
            self.dev.clwb(mtime_at, 8).map_err(e2s)?;
        }
        Ok(())
    }
    fn commit(&mut self, tx: u64) -> Result<bool, String> {
        let t = self
            .txs
            .remove(&tx)
            .ok_or_else(|| format!("unknown transaction {tx}"))?;
        if !self.wal {
            return self.dev.fence().map(|_| false).map_err(e2s);
        }
        if t.slots.is_empty() {
            return Ok(false);
        }
        self.dev.fence().map_err(e2s)?; // the redo entries are persistent
        let n = t.slots.len() as u64;
        let cslot = self.log_entry(tx, COMMIT, &n.to_le_bytes())?;
        self.dev.fence().map_err(e2s)?; // committed
        for (at, bytes) in &t.redo {
            self.dev.write(*at, bytes).map_err(e2s)?;
            self.dev.clwb(*at, bytes.len() as u64).map_err(e2s)?;
        }
        self.dev.fence().map_err(e2s)?; // the home locations hold the new data
        let valid = self.log_off + cslot * ENTRY + 56;
        self.dev.store_u64(valid, 0).map_err(e2s)?;
        self.dev.persist(valid, 8).map_err(e2s)?; // the log is free
        for s in t.slots.iter().chain([&cslot]) {
            self.busy[*s as usize] = false;
        }
        Ok(false)
    }
    fn drain(&mut self) -> Result<(), String> {
        Ok(())
    }
    fn counters(&self) -> PmemCounters {
        self.dev.counters()
    }
    fn set_model(&mut self, m: LatencyModel) {
        self.dev.set_model(m);
    }
}

// ---------------------------------------------------------------- the workload

#[derive(Clone, Copy)]
struct Txn {
    files: [usize; 2],
    /// (offset, length, start in the data pool) of the write to each file.
    w: [(u64, u64, usize); 2],
}

/// Each thread's transactions: 2 distinct files of its own, a range of 0..=max_write bytes
/// at a random offset in each.
fn workload(
    seed: u64,
    files: u64,
    file_bytes: u64,
    max_write: u64,
    threads: u64,
    txns: u64,
    pool: usize,
) -> Vec<Vec<Txn>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = vec![Vec::new(); threads as usize];
    for k in 0..txns {
        let th = k % threads;
        let mine = (files - th).div_ceil(threads);
        let a = rng.random_range(0..mine);
        let mut b = rng.random_range(0..mine - 1);
        if b >= a {
            b += 1;
        }
        let mut w = [(0, 0, 0); 2];
        for x in w.iter_mut() {
            let len = rng.random_range(0..=max_write);
            let off = rng.random_range(0..=file_bytes - len);
            *x = (off, len, rng.random_range(0..pool - max_write as usize));
        }
        out[th as usize].push(Txn {
            files: [(a * threads + th) as usize, (b * threads + th) as usize],
            w,
        });
    }
    out
}

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    /// From the C library std links anyway (`clock_gettime(2)`; 64-bit Linux layout).
    fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
}

/// Linux's `CLOCK_PROCESS_CPUTIME_ID` and `CLOCK_THREAD_CPUTIME_ID`.
const PROCESS_CPUTIME: i32 = 2;
const THREAD_CPUTIME: i32 = 3;

/// CPU time in ns of `clock` (0 where the kernel does not offer it).
fn cpu_ns(clock: i32) -> u64 {
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer to a struct of the C layout on 64-bit Linux.
    if unsafe { clock_gettime(clock, &mut ts) } == 0 {
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    } else {
        0
    }
}

/// This thread's CPU time in ns (`CLOCK_THREAD_CPUTIME_ID`, exact), its time waiting for a CPU
/// in ns (/proc/thread-self/schedstat, updated when it is switched), and its minor page faults
/// (/proc/thread-self/stat: a store to a page of the mapping that the kernel has written back
/// faults again); zeros where the kernel does not offer them.
fn sched() -> (u64, u64, u64) {
    let cpu = cpu_ns(THREAD_CPUTIME);
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let runq = s
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse::<u64>().ok())
        .unwrap_or(0);
    let st = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis: state is field 3, minflt field 10.
    let minflt = st
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(7))
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    (cpu, runq, minflt)
}

/// A worker's latencies (ns) and its (CPU ns, run-queue ns, minor faults).
type WorkerResult = Result<(Vec<u64>, (u64, u64, u64)), String>;

struct Phase {
    lat_ns: Vec<u64>,
    /// Worker threads' on-CPU and run-queue time (ns), the drain's included.
    cpu_ns: u64,
    /// Worker threads' on-CPU time alone; the checkpointer thread's; the whole process's
    /// over the phase and its drain (ns).
    tx_cpu_ns: u64,
    bg_cpu_ns: u64,
    proc_cpu_ns: u64,
    runq_ns: u64,
    faults: u64,
    wall_s: f64,
    drain_s: f64,
    dev: PmemCounters,
    drain_lines: u64,
    engine: [u64; 5],
}

/// The system behind the lock the workers take per call, and the checkpointer per unit.
type Shared = Arc<Gate<Box<dyn System>>>;

fn lock(sys: &Gate<Box<dyn System>>) -> std::sync::MutexGuard<'_, Box<dyn System>> {
    sys.lock()
}

/// The checkpointer thread of a system with background work (none otherwise), and the CPU
/// time (ns) its units take.
fn checkpointer(sys: &Shared) -> Result<(Option<Checkpointer>, Arc<AtomicU64>), String> {
    let spent = Arc::new(AtomicU64::new(0));
    if !lock(sys).background() {
        return Ok((None, spent));
    }
    let (s, cpu) = (Arc::clone(sys), Arc::clone(&spent));
    let c = Checkpointer::spawn("txbench-ckpt", move || {
        let t0 = cpu_ns(THREAD_CPUTIME);
        let more = s
            .lock_for_checkpoint()
            .background_step()
            .map_err(intactfs_pmem::PmemFsError::Internal);
        cpu.fetch_add(cpu_ns(THREAD_CPUTIME) - t0, Ordering::Relaxed);
        more
    })
    .map_err(e2s)?;
    Ok((Some(c), spent))
}

/// One worker: its transactions, each begin, two writes and commit under the lock per call.
fn worker(
    sys: &Gate<Box<dyn System>>,
    mine: &[Txn],
    pool: &[u8],
    ck: Option<&Checkpointer>,
) -> WorkerResult {
    let s0 = sched();
    let mut lat = Vec::with_capacity(mine.len());
    for t in mine {
        let t0 = Instant::now();
        let id = lock(sys).begin(t.files)?;
        for (f, &(off, len, p)) in t.files.iter().zip(&t.w) {
            lock(sys).write(id, *f, off, &pool[p..p + len as usize])?;
        }
        let due = lock(sys).commit(id)?;
        lat.push(t0.elapsed().as_nanos() as u64);
        if let (true, Some(c)) = (due, ck) {
            c.poke();
        }
    }
    let s1 = sched();
    Ok((lat, (s1.0 - s0.0, s1.1 - s0.1, s1.2 - s0.2)))
}

fn run_phase(sys: &Shared, work: &[Vec<Txn>], pool: &[u8]) -> Result<Phase, String> {
    let (c0, e0) = {
        let s = lock(sys);
        (s.counters(), s.engine_stats())
    };
    let p0 = cpu_ns(PROCESS_CPUTIME);
    let start = Instant::now();
    let (ck, bg_cpu) = checkpointer(sys)?;
    let results: Vec<WorkerResult> = std::thread::scope(|sc| {
        let hs: Vec<_> = work
            .iter()
            .map(|mine| sc.spawn(|| worker(sys, mine, pool, ck.as_ref())))
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a worker panicked".into())))
            .collect()
    });
    // Stopped and joined before the drain (and on every error path, by its Drop).
    if let Some(c) = ck {
        c.stop().map_err(|e| format!("checkpointer: {e}"))?;
    }
    let wall_s = start.elapsed().as_secs_f64();
    let (mut lat_ns, mut cpu_ns_sum, mut runq_ns, mut faults) = (Vec::new(), 0, 0, 0);
    for r in results {
        let (l, (c, q, f)) = r?;
        lat_ns.extend(l);
        cpu_ns_sum += c;
        runq_ns += q;
        faults += f;
    }
    let tx_cpu_ns = cpu_ns_sum;
    let mut s = lock(sys);
    let c1 = s.counters();
    let t = Instant::now();
    let s0 = sched();
    s.drain()?;
    let s1 = sched();
    cpu_ns_sum += s1.0 - s0.0;
    runq_ns += s1.1 - s0.1;
    faults += s1.2 - s0.2;
    let drain_s = t.elapsed().as_secs_f64();
    let c2 = s.counters();
    let e2 = s.engine_stats();
    Ok(Phase {
        lat_ns,
        cpu_ns: cpu_ns_sum,
        tx_cpu_ns,
        bg_cpu_ns: bg_cpu.load(Ordering::Relaxed),
        proc_cpu_ns: cpu_ns(PROCESS_CPUTIME) - p0,
        runq_ns,
        faults,
        wall_s,
        drain_s,
        dev: c2.since(&c0),
        drain_lines: c2.since(&c1).lines_flushed,
        engine: std::array::from_fn(|k| e2[k] - e0[k]),
    })
}

fn list<T>(what: &str, s: &str, parse: impl Fn(&str) -> Option<T>) -> Result<Vec<T>, String> {
    let v: Vec<T> = s
        .split(',')
        .map(|x| {
            parse(x.trim())
                .ok_or_else(|| format!("--{what}: {x:?} is not one of the allowed values"))
        })
        .collect::<Result<_, _>>()?;
    if v.is_empty() {
        return Err(format!("--{what}: empty list"));
    }
    Ok(v)
}

fn main() -> ExitCode {
    let a = Args::parse();
    match run(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("txbench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(a: &Args) -> Result<(), String> {
    let threads = list("threads", &a.threads, |x| {
        x.parse::<u64>().ok().filter(|&t| (1..=64).contains(&t))
    })?;
    let models = list("latency", &a.latency, |x| match x {
        "fcfs" => Some(("fcfs", LatencyModel::FCFS)),
        "none" => Some(("none", LatencyModel::default())),
        _ => None,
    })?;
    let systems = list("systems", &a.systems, |x| match x {
        "fcfs" => Some(Sys::Fcfs),
        "fcfs-bg" => Some(Sys::FcfsBg),
        "fgwal" => Some(Sys::FgWal),
        "nc" => Some(Sys::Nc),
        _ => None,
    })?;
    let tmax = *threads.iter().max().expect("non-empty");
    if a.files < 2 * tmax {
        return Err(format!(
            "--files {}: need at least 2 per thread ({} threads)",
            a.files, tmax
        ));
    }
    if a.file_mib == 0 || a.file_mib > 1024 {
        return Err(format!("--file-mib {}: expected 1..=1024", a.file_mib));
    }
    let file_bytes = a.file_mib << 20;
    if a.max_write > file_bytes || a.max_write > 1 << 20 {
        return Err(format!(
            "--max-write {}: at most 1 MiB and at most the file size",
            a.max_write
        ));
    }
    if a.txns == 0 || a.reps == 0 {
        return Err("--txns and --reps must be at least 1".into());
    }
    if !a.dir.is_dir() {
        return Err(format!("--dir {}: not a directory", a.dir.display()));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(a.seed ^ 0x5eed_da7a);
    let mut pool = vec![0u8; 2 * a.max_write as usize + 4096];
    rng.fill_bytes(&mut pool);
    let mut fill = vec![0u8; 1 << 20];
    rng.fill_bytes(&mut fill);
    for rep in 0..a.reps {
        for k in 0..systems.len() {
            let sys = systems[(k + rep as usize) % systems.len()];
            let t = Instant::now();
            let boxed: Box<dyn System> = match sys {
                Sys::Fcfs => Box::new(Fcfs::setup(&a.dir, a.files, file_bytes, &fill, false)?),
                Sys::FcfsBg => Box::new(Fcfs::setup(&a.dir, a.files, file_bytes, &fill, true)?),
                Sys::FgWal => Box::new(Store::setup(&a.dir, true, a.files, file_bytes, &fill)?),
                Sys::Nc => Box::new(Store::setup(&a.dir, false, a.files, file_bytes, &fill)?),
            };
            let setup_s = t.elapsed().as_secs_f64();
            let m: Shared = Arc::new(Gate::new(boxed));
            for (mi, (mname, model)) in models.iter().enumerate() {
                for &th in &threads {
                    let seed = a
                        .seed
                        .wrapping_mul(1_000_003)
                        .wrapping_add(rep * 1009 + th * 31 + mi as u64);
                    let work = workload(
                        seed,
                        a.files,
                        file_bytes,
                        a.max_write,
                        th,
                        a.txns,
                        pool.len(),
                    );
                    m.lock().set_model(*model);
                    let p = run_phase(&m, &work, &pool).map_err(|e| {
                        format!("{} ({mname}, {th} threads, rep {rep}): {e}", sys.name())
                    })?;
                    m.lock().set_model(LatencyModel::default());
                    let mut v = p.lat_ns.clone();
                    v.sort_unstable();
                    let n = v.len() as f64;
                    let mean = v.iter().sum::<u64>() as f64 / n / 1e3;
                    let pick =
                        |q: f64| v[((q * n).ceil() as usize).clamp(1, v.len()) - 1] as f64 / 1e3;
                    let per = |x: u64| x as f64 / n;
                    let bytes_written: u64 =
                        work.iter().flatten().map(|t| t.w[0].1 + t.w[1].1).sum();
                    println!(
                        "{{\"system\":\"{}\",\"latency\":\"{mname}\",\"threads\":{th},\"rep\":{rep},\"files\":{},\"file_mib\":{},\"txns\":{},\"max_write\":{},\"seed\":{seed},\
\"setup_s\":{setup_s:.3},\"wall_s\":{:.6},\"drain_s\":{:.6},\"mean_us\":{mean:.3},\"p50_us\":{:.3},\"p99_us\":{:.3},\"max_us\":{:.3},\
\"mean_with_drain_us\":{:.3},\"cpu_us_per_txn\":{:.3},\"tx_cpu_us_per_txn\":{:.3},\"bg_cpu_us_per_txn\":{:.3},\"proc_cpu_us_per_txn\":{:.3},\"runq_us_per_txn\":{:.3},\"faults_per_txn\":{:.3},\"txn_per_s\":{:.1},\"payload_per_txn\":{:.1},\"stores_per_txn\":{:.2},\"bytes_per_txn\":{:.1},\"lines_per_txn\":{:.2},\
\"fences_per_txn\":{:.3},\"injected_us_per_txn\":{:.3},\"drain_lines_per_txn\":{:.2},\"checkpoints\":{},\"background_units\":{},\"exhausted_checkpoints\":{},\"lines_copied_per_txn\":{:.2},\"pointer_swaps_per_txn\":{:.3},\"model_ns_per_line\":{}}}",
                        sys.name(),
                        a.files,
                        a.file_mib,
                        v.len(),
                        a.max_write,
                        p.wall_s,
                        p.drain_s,
                        pick(0.5),
                        pick(0.99),
                        pick(1.0),
                        mean + p.drain_s * 1e6 / n,
                        per(p.cpu_ns) / 1e3,
                        per(p.tx_cpu_ns) / 1e3,
                        per(p.bg_cpu_ns) / 1e3,
                        per(p.proc_cpu_ns) / 1e3,
                        per(p.runq_ns) / 1e3,
                        per(p.faults),
                        n / (p.wall_s + p.drain_s),
                        per(bytes_written),
                        per(p.dev.stores),
                        per(p.dev.bytes_stored),
                        per(p.dev.lines_flushed),
                        per(p.dev.fences),
                        per(p.dev.latency_ns) / 1e3,
                        per(p.drain_lines),
                        p.engine[0],
                        p.engine[3],
                        p.engine[4],
                        per(p.engine[1]),
                        per(p.engine[2]),
                        model.per_line_ns(),
                    );
                }
            }
        }
    }
    Ok(())
}
