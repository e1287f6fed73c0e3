//! Benchmarks of the intactfs engine alone, and the same operations through real system
//! calls on a kernel file system (the ext4 baseline of `bench/fs/engine.sh`).
//!
//! ```text
//! engine_bench [--backend engine|posix] [--dir DIR] [--device-mib N | --device-file F]
//!              [--blockdev loopN] [--unmount-at-end] [--label L] WORKLOAD [options]
//!
//!   create    --files 10000 --dirs 100 --size 4096 [--fsync-each]
//!   append    --n 2000 --size 4096
//!   overwrite --file-mib 64 --n 2000 --size 4096 [--seed 1]
//!   table53   --variant append|truncate|overwrite --streams 1|2 --a-mib 100
//! ```
//!
//! `--backend engine` (default): mkfs + mount of the engine on a `FileDevice`: the existing
//! file `--device-file` (kept), or else a sparse file of `--device-mib` MiB (default 1024)
//! created in `--dir` (default /var/tmp: the root disk, so flushes are real `fdatasync`s)
//! and removed at the end. `--device-file` may also be a block device node (e.g. the loop
//! device the ext4 baseline uses). Bytes and flushes are counted by a wrapper around the
//! device (everything the engine sent to it); the engine's own [`Stats`] split them by kind.
//!
//! `--backend posix` (alias `ext4`): the same operations as system calls (`open`, `pwrite`,
//! `ftruncate`, `fsync`, `syncfs`, `mkdir`) under `--dir`, a mount point. With `--blockdev
//! loopN`, bytes written and flushes are read from `/sys/block/loopN/stat` (field 7, sectors
//! written; field 16, flushes) around each step. With `--unmount-at-end` the program
//! unmounts `--dir` at the end (`umount`), so the total includes what the file system writes
//! at unmount (journal checkpoint, superblock), like the engine's unmount (a checkpoint).
//!
//! Every workload prints one JSON line; `--label L` sets its "system" field (default: the
//! backend), and table53's "config" is L-1 or L-2 for the engine's one or two streams.
//! Timings are wall-clock (`Instant`). Streams exist only in the engine: the posix backend
//! ignores stream ids.

use intactfs::prelude::*;
use intactfs::{mkfs, Fs, MkfsOptions, MountOptions, Owner, Stats, ROOT};
use intactfs_device::{BlockDevice, DeviceError, FileDevice};
use serde_json::{json, Value};
use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const MIB: u64 = 1 << 20;

intactfs_device::counters! {
    /// Bytes written and flushes issued, as the device saw them.
    #[derive(Clone, Copy, Debug, Default)]
    struct Counters {
        bytes: u64,
        flushes: u64,
    }
}

// ----- the engine's device, counted -----

struct Counting<D> {
    inner: D,
    c: Rc<Cell<Counters>>,
}

impl<D: BlockDevice> Counting<D> {
    fn add(&self, bytes: usize, flushes: u64) {
        let mut c = self.c.get();
        c.bytes += bytes as u64;
        c.flushes += flushes;
        self.c.set(c);
    }
}

impl<D: BlockDevice> BlockDevice for Counting<D> {
    fn block_size(&self) -> usize {
        self.inner.block_size()
    }
    fn blocks(&self) -> u64 {
        self.inner.blocks()
    }
    fn read(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.inner.read(block, buf)
    }
    fn write(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.inner.write(block, data)?;
        self.add(data.len(), 0);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.inner.flush()?;
        self.add(0, 1);
        Ok(())
    }
    fn write_run(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.inner.write_run(block, data)?;
        self.add(data.len(), 0);
        Ok(())
    }
    fn read_run(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        self.inner.read_run(block, buf)
    }
}

// ----- what a workload runs on -----

/// Handles are inode numbers (engine) or indexes into open files and directories (posix).
trait Target {
    fn root(&self) -> u64;
    fn mkdir(&mut self, s: u64, parent: u64, name: &str) -> Res<u64>;
    /// Creates and opens a regular file.
    fn create(&mut self, s: u64, parent: u64, name: &str) -> Res<u64>;
    fn write(&mut self, s: u64, f: u64, off: u64, data: &[u8]) -> Res<()>;
    fn truncate(&mut self, s: u64, f: u64, size: u64) -> Res<()>;
    fn fsync(&mut self, s: u64, f: u64) -> Res<()>;
    fn close(&mut self, f: u64) -> Res<()>;
    /// Everything durable (engine `sync`, posix `syncfs`).
    fn sync(&mut self) -> Res<()>;
    fn counters(&mut self) -> Res<Counters>;
    fn engine_stats(&self) -> Option<Stats>;
    /// Engine: everything its device received since mkfs (a cross-check for `--blockdev`).
    fn device_total(&self) -> Option<Counters> {
        None
    }
    /// Closes everything, syncs, unmounts: counters after the sync and after the unmount.
    fn finish(&mut self) -> Res<(Counters, Counters)>;
}

/// Removes a file when dropped (the engine's own device file, whatever happens).
struct Remove(Option<PathBuf>);

impl Drop for Remove {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

struct Engine {
    fs: Option<Fs<Counting<FileDevice>>>,
    c: Rc<Cell<Counters>>,
    // Dropped after `fs` (fields drop in order).
    _file: Remove,
}

impl Engine {
    /// mkfs + mount on `device_file` (an existing file, kept: e.g. pre-written so that no
    /// write allocates in the host file system) or on a new sparse file in `dir` (removed).
    fn new(dir: &Path, device_file: Option<&Path>, device_mib: u64) -> Res<Engine> {
        let (inner, file) = match device_file {
            Some(p) => (FileDevice::open(p, 4096)?, Remove(None)),
            None => {
                let p = dir.join(format!("intactfs-engine-bench-{}.img", std::process::id()));
                let file = Remove(Some(p.clone()));
                (FileDevice::create(&p, 4096, device_mib * MIB / 4096)?, file)
            }
        };
        let c = Rc::new(Cell::new(Counters::default()));
        let mut dev = Counting {
            inner,
            c: c.clone(),
        };
        mkfs(&mut dev, &MkfsOptions::default())?;
        let (fs, _) = Fs::mount(dev, MountOptions::default())?;
        Ok(Engine {
            fs: Some(fs),
            c,
            _file: file,
        })
    }

    fn fs(&mut self) -> &mut Fs<Counting<FileDevice>> {
        self.fs.as_mut().expect("mounted")
    }
}

impl Target for Engine {
    fn root(&self) -> u64 {
        ROOT
    }
    fn mkdir(&mut self, s: u64, parent: u64, name: &str) -> Res<u64> {
        Ok(self
            .fs()
            .mkdir(s, parent, name.as_bytes(), 0o755, Owner::default())?
            .ino)
    }
    fn create(&mut self, s: u64, parent: u64, name: &str) -> Res<u64> {
        Ok(self
            .fs()
            .create(s, parent, name.as_bytes(), 0o644, Owner::default())?
            .ino)
    }
    fn write(&mut self, s: u64, f: u64, off: u64, data: &[u8]) -> Res<()> {
        let n = self.fs().write(s, f, off, data)?;
        assert_eq!(n, data.len());
        Ok(())
    }
    fn truncate(&mut self, s: u64, f: u64, size: u64) -> Res<()> {
        Ok(self.fs().truncate(s, f, size)?)
    }
    fn fsync(&mut self, s: u64, f: u64) -> Res<()> {
        Ok(self.fs().fsync(s, f, false)?)
    }
    fn close(&mut self, _f: u64) -> Res<()> {
        Ok(())
    }
    fn sync(&mut self) -> Res<()> {
        Ok(self.fs().sync()?)
    }
    fn counters(&mut self) -> Res<Counters> {
        Ok(self.c.get())
    }
    fn engine_stats(&self) -> Option<Stats> {
        self.fs.as_ref().map(|f| f.stats())
    }
    fn device_total(&self) -> Option<Counters> {
        Some(self.c.get())
    }
    fn finish(&mut self) -> Res<(Counters, Counters)> {
        self.sync()?;
        let synced = self.c.get();
        let fs = self.fs.take().expect("mounted");
        drop(fs.unmount()?);
        Ok((synced, self.c.get()))
    }
}

extern "C" {
    fn syncfs(fd: std::ffi::c_int) -> std::ffi::c_int;
}

struct Posix {
    root: PathBuf,
    root_fd: File,
    dirs: HashMap<u64, PathBuf>,
    files: HashMap<u64, File>,
    next: u64,
    stat: Option<PathBuf>,
    unmount: bool,
}

fn stat_path(blockdev: &str) -> PathBuf {
    PathBuf::from(format!(
        "/sys/block/{}/stat",
        blockdev.trim_start_matches("/dev/")
    ))
}

/// Sectors written (field 7) and flushes (field 16) of a block device.
fn read_stat(path: &Path) -> Res<Counters> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let f: Vec<u64> = text
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    Ok(Counters {
        bytes: f.get(6).copied().unwrap_or(0) * 512,
        flushes: f.get(15).copied().unwrap_or(0),
    })
}

impl Posix {
    fn new(dir: &Path, blockdev: Option<&str>, unmount: bool) -> Res<Posix> {
        let stat = blockdev.map(stat_path);
        if let Some(s) = &stat {
            read_stat(s)?;
        }
        let mut dirs = HashMap::new();
        dirs.insert(0, dir.to_path_buf());
        Ok(Posix {
            root: dir.to_path_buf(),
            root_fd: File::open(dir)?,
            dirs,
            files: HashMap::new(),
            next: 1,
            stat,
            unmount,
        })
    }
    fn handle(&mut self) -> u64 {
        self.next += 1;
        self.next - 1
    }
    fn file(&self, f: u64) -> Res<&File> {
        self.files
            .get(&f)
            .ok_or_else(|| format!("no open file {f}").into())
    }
}

impl Target for Posix {
    fn root(&self) -> u64 {
        0
    }
    fn mkdir(&mut self, _s: u64, parent: u64, name: &str) -> Res<u64> {
        let p = self.dirs[&parent].join(name);
        std::fs::create_dir(&p)?;
        let h = self.handle();
        self.dirs.insert(h, p);
        Ok(h)
    }
    fn create(&mut self, _s: u64, parent: u64, name: &str) -> Res<u64> {
        let p = self.dirs[&parent].join(name);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&p)?;
        let h = self.handle();
        self.files.insert(h, f);
        Ok(h)
    }
    fn write(&mut self, _s: u64, f: u64, off: u64, data: &[u8]) -> Res<()> {
        Ok(self.file(f)?.write_all_at(data, off)?)
    }
    fn truncate(&mut self, _s: u64, f: u64, size: u64) -> Res<()> {
        Ok(self.file(f)?.set_len(size)?)
    }
    fn fsync(&mut self, _s: u64, f: u64) -> Res<()> {
        Ok(self.file(f)?.sync_all()?)
    }
    fn close(&mut self, f: u64) -> Res<()> {
        self.files.remove(&f);
        Ok(())
    }
    fn sync(&mut self) -> Res<()> {
        // SAFETY: syncfs on a descriptor we own; no memory is passed.
        if unsafe { syncfs(self.root_fd.as_raw_fd()) } != 0 {
            return Err(format!(
                "syncfs {}: {}",
                self.root.display(),
                std::io::Error::last_os_error()
            )
            .into());
        }
        Ok(())
    }
    fn counters(&mut self) -> Res<Counters> {
        match &self.stat {
            Some(s) => read_stat(s),
            None => Ok(Counters::default()),
        }
    }
    fn engine_stats(&self) -> Option<Stats> {
        None
    }
    fn finish(&mut self) -> Res<(Counters, Counters)> {
        self.files.clear();
        self.sync()?;
        let synced = self.counters()?;
        if !self.unmount {
            return Ok((synced, synced));
        }
        // Our own descriptor on the mount point would keep it busy.
        self.root_fd = File::open("/")?;
        let st = std::process::Command::new("umount")
            .arg(&self.root)
            .status()?;
        if !st.success() {
            return Err(format!("umount {}: {st}", self.root.display()).into());
        }
        Ok((synced, self.counters()?))
    }
}

// ----- workloads -----

struct Args {
    opts: HashMap<String, String>,
    flags: HashSet<String>,
    positional: Vec<String>,
}

const FLAGS: &[&str] = &["fsync-each", "unmount-at-end", "help"];

impl Args {
    fn parse() -> Res<Args> {
        let mut a = Args {
            opts: HashMap::new(),
            flags: HashSet::new(),
            positional: Vec::new(),
        };
        let mut it = std::env::args().skip(1);
        while let Some(x) = it.next() {
            if let Some(k) = x.strip_prefix("--") {
                if FLAGS.contains(&k) {
                    a.flags.insert(k.to_string());
                } else {
                    let v = it.next().ok_or_else(|| format!("--{k} needs a value"))?;
                    a.opts.insert(k.to_string(), v);
                }
            } else {
                a.positional.push(x);
            }
        }
        Ok(a)
    }
    fn num(&self, k: &str, default: u64) -> Res<u64> {
        match self.opts.get(k) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|e| format!("--{k} {v}: {e}").into()),
        }
    }
    fn str<'a>(&'a self, k: &str, default: &'a str) -> &'a str {
        self.opts.get(k).map(|s| s.as_str()).unwrap_or(default)
    }
}

/// Mean, median and 99th percentile (nearest rank), in microseconds.
fn latency(mut v: Vec<f64>) -> Value {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return json!(null);
    }
    let rank = |p: f64| v[((p * n as f64).ceil() as usize).clamp(1, n) - 1] * 1e6;
    json!({
        "mean_us": v.iter().sum::<f64>() / n as f64 * 1e6,
        "p50_us": rank(0.50),
        "p99_us": rank(0.99),
        "max_us": v[n - 1] * 1e6,
    })
}

fn stats_delta(a: Option<Stats>, b: Option<Stats>) -> Value {
    match (a, b) {
        (Some(a), Some(b)) => {
            let d = b.since(&a);
            json!({
                "data": d.data_bytes,
                "journal": d.journal_bytes,
                "snapshot": d.snapshot_bytes,
                "header": d.header_bytes,
                "flushes": d.flushes,
                "commits": d.commits,
                "checkpoints": d.checkpoints,
            })
        }
        _ => json!(null),
    }
}

/// Deterministic pseudo-random numbers (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Writes `len` bytes from offset 0 in 1 MiB calls.
fn fill(t: &mut dyn Target, s: u64, f: u64, len: u64, seed: u8) -> Res<()> {
    let chunk = pattern(MIB as usize, seed);
    let mut off = 0;
    while off < len {
        let n = (len - off).min(MIB) as usize;
        t.write(s, f, off, &chunk[..n])?;
        off += n as u64;
    }
    Ok(())
}

fn create(t: &mut dyn Target, a: &Args) -> Res<Value> {
    let (files, dirs, size) = (
        a.num("files", 10_000)?,
        a.num("dirs", 100)?.max(1),
        a.num("size", 4096)? as usize,
    );
    let fsync_each = a.flags.contains("fsync-each");
    let root = t.root();
    let mut d = Vec::new();
    for i in 0..dirs {
        d.push(t.mkdir(0, root, &format!("d{i:03}"))?);
    }
    t.sync()?;
    let (c0, s0) = (t.counters()?, t.engine_stats());
    let buf = pattern(size, 7);
    let mut lat = Vec::new();
    let t0 = Instant::now();
    for i in 0..files {
        let f = t.create(0, d[(i % dirs) as usize], &format!("f{i:06}"))?;
        if size > 0 {
            t.write(0, f, 0, &buf)?;
        }
        if fsync_each {
            let q = Instant::now();
            t.fsync(0, f)?;
            lat.push(q.elapsed().as_secs_f64());
        }
        t.close(f)?;
    }
    let before_sync = t0.elapsed().as_secs_f64();
    t.sync()?;
    let secs = t0.elapsed().as_secs_f64();
    let (c1, s1) = (t.counters()?, t.engine_stats());
    let (_, end) = t.finish()?;
    let w = c1.since(&c0);
    Ok(json!({
        "workload": if fsync_each { "create-fsync" } else { "create" },
        "files": files, "dirs": dirs, "size": size,
        "secs": secs, "secs_before_final_sync": before_sync,
        "files_per_s": files as f64 / secs,
        "fsync_latency": if fsync_each { latency(lat) } else { json!(null) },
        "bytes": w.bytes, "flushes": w.flushes,
        "bytes_per_file": w.bytes as f64 / files as f64,
        "bytes_with_unmount": end.since(&c0).bytes,
        "engine": stats_delta(s0, s1),
    }))
}

fn ops_fsync(t: &mut dyn Target, a: &Args, overwrite: bool) -> Res<Value> {
    let (n, size) = (a.num("n", 2000)?, a.num("size", 4096)?);
    let file_bytes = a.num("file-mib", 64)? * MIB;
    let mut rng = Rng(a.num("seed", 1)?);
    let root = t.root();
    let f = t.create(0, root, "data")?;
    if overwrite {
        fill(t, 0, f, file_bytes, 1)?;
    }
    t.sync()?;
    let (c0, s0) = (t.counters()?, t.engine_stats());
    let buf = pattern(size as usize, 3);
    let slots = (file_bytes / size).max(1);
    let mut lat = Vec::with_capacity(n as usize);
    let t0 = Instant::now();
    for i in 0..n {
        let off = if overwrite {
            rng.next() % slots * size
        } else {
            i * size
        };
        t.write(0, f, off, &buf)?;
        let q = Instant::now();
        t.fsync(0, f)?;
        lat.push(q.elapsed().as_secs_f64());
    }
    let secs = t0.elapsed().as_secs_f64();
    let (c1, s1) = (t.counters()?, t.engine_stats());
    t.finish()?;
    let w = c1.since(&c0);
    Ok(json!({
        "workload": if overwrite { "overwrite" } else { "append" },
        "n": n, "size": size, "file_bytes": if overwrite { file_bytes } else { n * size },
        "secs": secs, "ops_per_s": n as f64 / secs,
        "fsync_latency": latency(lat),
        "bytes": w.bytes, "flushes": w.flushes,
        "bytes_per_op": w.bytes as f64 / n as f64,
        "flushes_per_op": w.flushes as f64 / n as f64,
        "engine": stats_delta(s0, s1),
    }))
}

/// Thesis Table 5.3: A (`--a-mib`) and B in one stream or two; 100 MiB appended to A, 1 byte
/// written to B, fsync(B) timed; then nothing / truncate A to 0 / overwrite all of A.
fn table53(t: &mut dyn Target, a: &Args, system: &str, engine: bool) -> Res<Value> {
    let variant = a.str("variant", "append").to_string();
    if !["append", "truncate", "overwrite"].contains(&variant.as_str()) {
        return Err(format!("--variant {variant}: append, truncate or overwrite").into());
    }
    let streams = a.num("streams", 2)?;
    if streams != 1 && streams != 2 {
        return Err("--streams 1 or 2".into());
    }
    let a_bytes = a.num("a-mib", 100)? * MIB;
    let (sa, sb) = if streams == 1 { (1, 1) } else { (1, 2) };
    let root = t.root();
    let fa = t.create(sa, root, "A")?;
    let fb = t.create(sb, root, "B")?;
    t.sync()?;
    let (c0, s0) = (t.counters()?, t.engine_stats());
    let w0 = Instant::now();
    fill(t, sa, fa, a_bytes, 1)?;
    let write_a = w0.elapsed().as_secs_f64();
    t.write(sb, fb, 0, b"x")?;
    let (c1, s1) = (t.counters()?, t.engine_stats());
    let q = Instant::now();
    t.fsync(sb, fb)?;
    let fsync_s = q.elapsed().as_secs_f64();
    let (c2, s2) = (t.counters()?, t.engine_stats());
    match variant.as_str() {
        "truncate" => t.truncate(sa, fa, 0)?,
        "overwrite" => fill(t, sa, fa, a_bytes, 2)?,
        _ => {}
    }
    t.sync()?;
    let s3 = t.engine_stats();
    let (synced, end) = t.finish()?;
    let config = if engine {
        format!("{system}-{streams}")
    } else {
        system.to_string()
    };
    Ok(json!({
        "workload": "table53", "variant": variant, "config": config, "streams": streams,
        "a_bytes": a_bytes,
        "write_a_secs": write_a,
        "fsync_secs": fsync_s,
        "fsync_bytes": c2.since(&c1).bytes, "fsync_flushes": c2.since(&c1).flushes,
        "total_bytes_synced": synced.since(&c0).bytes,
        "total_bytes": end.since(&c0).bytes, "total_flushes": end.since(&c0).flushes,
        "engine_fsync": stats_delta(s1, s2),
        "engine_total_synced": stats_delta(s0, s3),
    }))
}

fn run() -> Res<()> {
    let a = Args::parse()?;
    let Some(workload) = a.positional.first().cloned() else {
        eprintln!("usage: engine_bench [--backend engine|posix] [--dir DIR] [--blockdev loopN] [--unmount-at-end] [--device-mib N | --device-file F] [--label L] create|append|overwrite|table53 [options]");
        std::process::exit(2);
    };
    let backend = a.str("backend", "engine").to_string();
    let blockdev = a.opts.get("blockdev").map(|b| stat_path(b));
    let before = blockdev.as_deref().map(read_stat).transpose()?;
    let dir = PathBuf::from(a.str("dir", "/var/tmp"));
    let mut target: Box<dyn Target> = match backend.as_str() {
        "engine" => Box::new(Engine::new(
            &dir,
            a.opts.get("device-file").map(Path::new),
            a.num("device-mib", 1024)?,
        )?),
        "posix" | "ext4" => Box::new(Posix::new(
            &dir,
            a.opts.get("blockdev").map(|s| s.as_str()),
            a.flags.contains("unmount-at-end"),
        )?),
        b => return Err(format!("--backend {b}: engine or posix").into()),
    };
    let system = a.str("label", &backend).to_string();
    let t = target.as_mut();
    let mut out = match workload.as_str() {
        "create" => create(t, &a)?,
        "append" => ops_fsync(t, &a, false)?,
        "overwrite" => ops_fsync(t, &a, true)?,
        "table53" => table53(t, &a, &system, backend == "engine")?,
        w => return Err(format!("unknown workload {w}").into()),
    };
    if let (Some(b), Some(d), Some(dev)) = (before, target.device_total(), &blockdev) {
        // The engine on a block device: what the device counted over the whole run (mkfs,
        // mount, workload, unmount) against what the engine sent it.
        let now = read_stat(dev)?;
        out["whole_run_engine_bytes"] = json!(d.bytes);
        out["whole_run_blockdev_bytes"] = json!(now.since(&b).bytes);
        out["whole_run_engine_flushes"] = json!(d.flushes);
        out["whole_run_blockdev_flushes"] = json!(now.since(&b).flushes);
    }
    out["backend"] = json!(backend);
    out["system"] = json!(system);
    println!("{out}");
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("engine_bench: {e}");
        std::process::exit(1);
    }
}
