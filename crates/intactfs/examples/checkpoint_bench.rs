//! What a checkpoint costs with incremental checkpoints (a delta of the changed inodes) and
//! without (a new base of all the metadata), on the same file system in the same run.
//!
//! ```text
//! checkpoint_bench [--files 100000] [--dirs 100] [--rounds 60] [--dir /var/tmp]
//! ```
//!
//! Builds `--files` empty files spread over `--dirs` directories on a `FileDevice` (a
//! sparse file in `--dir`, removed at the end; flushes are real `fdatasync`s), commits
//! them, then runs `--rounds` rounds of a small change (one 4 KiB write to an existing
//! file, one new file in a small directory), a `sync`, and a timed checkpoint: rounds
//! alternate between `checkpoint()` (a delta while the chain allows) and
//! `checkpoint_base()`, so machine noise hits both alike. Prints one JSON line and a
//! Markdown table: median and p90 time per checkpoint, bytes written per checkpoint, and
//! the ratios.

use intactfs::prelude::*;
use intactfs::{mkfs, Fs, MkfsOptions, MountOptions, Owner, ROOT};
use intactfs_device::FileDevice;
use std::path::PathBuf;
use std::time::Instant;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

struct Args {
    files: u64,
    dirs: u64,
    rounds: u64,
    dir: PathBuf,
}

fn args() -> Res<Args> {
    let mut a = Args {
        files: 100_000,
        dirs: 100,
        rounds: 60,
        dir: PathBuf::from("/var/tmp"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or_else(|| format!("{k} needs a value"));
        match k.as_str() {
            "--files" => a.files = v()?.parse().map_err(|e| format!("--files: {e}"))?,
            "--dirs" => a.dirs = v()?.parse().map_err(|e| format!("--dirs: {e}"))?,
            "--rounds" => a.rounds = v()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--dir" => a.dir = PathBuf::from(v()?),
            "-h" | "--help" => {
                println!("checkpoint_bench [--files N] [--dirs N] [--rounds N] [--dir DIR]");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {k:?} (see --help)").into()),
        }
    }
    if a.dirs == 0 || a.files == 0 || a.rounds < 2 {
        return Err("--files and --dirs must be positive and --rounds at least 2".into());
    }
    Ok(a)
}

/// Removes the device file however the run ends.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]
}

fn main() {
    if let Err(e) = run() {
        eprintln!("checkpoint_bench: {e}");
        std::process::exit(2);
    }
}

fn run() -> Res<()> {
    let a = args()?;
    let path = a.dir.join(format!(
        "intactfs-checkpoint-bench-{}.img",
        std::process::id()
    ));
    let _guard = TempFile(path.clone());
    // Room for the data and several full snapshots (about 120 bytes per empty file).
    let mib = 256 + a.files * 2 / 1000;
    let mut dev = FileDevice::create(&path, 4096, mib * 256)
        .map_err(|e| format!("creating the device file in {}: {e}", a.dir.display()))?;
    mkfs(&mut dev, &MkfsOptions::default())?;
    let (mut fs, _) = Fs::mount(dev, MountOptions::default())?;
    let o = Owner::default();
    let per_dir = a.files.div_ceil(a.dirs);
    let mut files = Vec::new();
    for d in 0..a.dirs {
        let dir = fs.mkdir(0, ROOT, format!("d{d}").as_bytes(), 0o755, o)?.ino;
        for i in 0..per_dir.min(a.files - d * per_dir) {
            files.push(fs.create(0, dir, format!("f{i}").as_bytes(), 0o644, o)?.ino);
        }
        fs.sync()?;
    }
    let small = fs.mkdir(0, ROOT, b"new", 0o755, o)?.ino;
    fs.sync()?;
    fs.checkpoint_base()?;
    let (mut t_inc, mut t_base, mut b_inc, mut b_base) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut deltas = 0;
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for r in 0..a.rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let f = files[(x % files.len() as u64) as usize];
        fs.write(0, f, 0, &[r as u8; 4096])?;
        fs.create(0, small, format!("n{r}").as_bytes(), 0o644, o)?;
        fs.sync()?;
        let s0 = fs.stats();
        let t = Instant::now();
        if r % 2 == 0 {
            fs.checkpoint()?;
        } else {
            fs.checkpoint_base()?;
        }
        let dt = t.elapsed().as_secs_f64() * 1e3;
        let s1 = fs.stats();
        let bytes =
            (s1.snapshot_bytes + s1.header_bytes - s0.snapshot_bytes - s0.header_bytes) as f64;
        if r % 2 == 0 {
            deltas += s1.delta_checkpoints - s0.delta_checkpoints;
            t_inc.push(dt);
            b_inc.push(bytes);
        } else {
            t_base.push(dt);
            b_base.push(bytes);
        }
    }
    fs.unmount()?;
    let (ti, tb) = (pct(&mut t_inc.clone(), 0.5), pct(&mut t_base.clone(), 0.5));
    let (bi, bb) = (pct(&mut b_inc, 0.5), pct(&mut b_base, 0.5));
    let (ti90, tb90) = (pct(&mut t_inc, 0.9), pct(&mut t_base, 0.9));
    println!(
        "{{\"files\":{},\"dirs\":{},\"rounds\":{},\"incremental\":{{\"checkpoints\":{},\"deltas\":{deltas},\"p50_ms\":{ti:.3},\"p90_ms\":{ti90:.3},\"bytes_p50\":{bi}}},\"base\":{{\"checkpoints\":{},\"p50_ms\":{tb:.3},\"p90_ms\":{tb90:.3},\"bytes_p50\":{bb}}}}}",
        a.files,
        a.dirs,
        a.rounds,
        t_inc.len(),
        t_base.len()
    );
    println!();
    println!("| checkpoint ({} files in {} dirs; one 4 KiB write and one create per round) | count | p50 ms | p90 ms | KiB written (p50) |", a.files, a.dirs);
    println!("|---|---:|---:|---:|---:|");
    println!("| incremental (`checkpoint()`: {deltas} of them deltas) | {} | {ti:.2} | {ti90:.2} | {:.0} |", t_inc.len(), bi / 1024.0);
    println!(
        "| full base (`checkpoint_base()`) | {} | {tb:.2} | {tb90:.2} | {:.0} |",
        t_base.len(),
        bb / 1024.0
    );
    println!();
    println!(
        "incremental ÷ base: time {:.3}×, bytes {:.4}× (medians)",
        ti / tb,
        bi / bb
    );
    Ok(())
}
