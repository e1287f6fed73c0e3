//! `intact fs mkfs | fsck | dump`: the intactfs tools that work on an image or device.

use crate::Failure;
use intactfs::fsck::fsck;
use intactfs::{mkfs, MkfsOptions, BLOCK};
use intactfs_device::{BlockDevice, DeviceKind, ImageDevice};
use intactfs_fuse::mount::ImageLock;
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand)]
pub enum FsCmd {
    /// Write an empty intactfs onto IMAGE (a file, created if missing, or a block device).
    Mkfs {
        image: PathBuf,
        /// Size of a new image file, e.g. 512M, 4G (suffixes K, M, G, T; powers of 1024).
        #[arg(long)]
        size: Option<String>,
        /// Journal size (default: 1/32 of the device, 256 KiB to 32 MiB).
        #[arg(long)]
        journal: Option<String>,
        /// Overwrite an existing non-empty image or device.
        #[arg(long)]
        force: bool,
        /// The storage under the file system: block (a disk: writes and flushes) or txflash
        /// (flash with transactions, X-FTL: a new image file of --size blocks plus spare
        /// slots, mapping tables and a commit log; durable commits are device transactions
        /// that rewrite file blocks in place). Mount, fsck and dump find the kind in the image.
        #[arg(long, value_enum, default_value_t = DeviceArg::Block)]
        device: DeviceArg,
    },
    /// Check every structural invariant of IMAGE without changing it.
    /// Exit 0: clean; 1: damage found (each problem is listed); 2: cannot be read.
    Fsck {
        image: PathBuf,
        /// Skip reading every data block to compare it with its checksum.
        #[arg(long)]
        no_data: bool,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Print the on-disk structures of IMAGE (superblock, checkpoints, inodes; with
    /// --journal every record in the journal area) for debugging.
    Dump {
        image: PathBuf,
        #[arg(long)]
        journal: bool,
    },
    /// Mount IMAGE on MOUNTPOINT (FUSE). Foreground until unmounted (Ctrl-C, SIGTERM,
    /// `intact fs umount`), or --daemon.
    Mount(crate::fs_mount::MountArgs),
    /// Unmount, and wait until the daemon has written everything back.
    Umount(crate::fs_mount::UmountArgs),
    /// Run a program in a stream: `intact fs exec --mount MNT --stream NAME -- CMD ARGS`.
    /// The program and its children write in that stream; fsync in it commits only it.
    Exec(crate::fs_mount::ExecArgs),
}

pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        Some('T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let n: u64 = num.trim().parse().map_err(|_| format!("size {s:?}: expected a number with an optional K, M, G or T suffix"))?;
    n.checked_mul(mult).ok_or(format!("size {s:?} is too large"))
}

fn open(image: &Path) -> Result<(ImageDevice, ImageLock), Failure> {
    if !image.exists() {
        return Err(Failure::input(format!("{}: no such file (create one with `intact fs mkfs {} --size 1G`)", image.display(), image.display())));
    }
    let lock = lock(image)?;
    Ok((ImageDevice::open(image, BLOCK).map_err(|e| Failure::input(format!("{}: {e}", image.display())))?, lock))
}

/// A mounted image must not be checked, dumped or overwritten meanwhile.
fn lock(image: &Path) -> Result<ImageLock, Failure> {
    intactfs_fuse::mount::lock_image(image).map_err(|e| Failure::input(e.to_string()))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceArg {
    Block,
    Txflash,
}

pub fn fs(cmd: FsCmd) -> Result<u8, Failure> {
    match cmd {
        FsCmd::Mkfs { image, size, journal, force, device } => {
            let kind = match device {
                DeviceArg::Block => DeviceKind::Block,
                DeviceArg::Txflash => DeviceKind::TxFlash,
            };
            if kind == DeviceKind::TxFlash && size.is_none() {
                return Err(Failure::input(format!("--device txflash makes a new image file: give --size (e.g. `intact fs mkfs {} --device txflash --size 1G`)", image.display())));
            }
            let journal_blocks = journal.map(|j| parse_size(&j).map(|b| b / BLOCK as u64)).transpose().map_err(Failure::input)?;
            let created = !image.exists();
            // Held until mkfs is done: a mounted image is never overwritten.
            let mut held = None;
            let mut dev = match (size, image.exists()) {
                (Some(s), exists) => {
                    let bytes = parse_size(&s).map_err(Failure::input)?;
                    if exists && !force && std::fs::metadata(&image).map(|m| m.len() > 0 || !m.is_file()).unwrap_or(true) {
                        return Err(Failure::input(format!("{} exists and is not empty: pass --force to overwrite it", image.display())));
                    }
                    if exists && !std::fs::metadata(&image).map(|m| m.is_file()).unwrap_or(false) {
                        return Err(Failure::input(format!("{} is not a regular file: --size applies to image files; omit it for a device", image.display())));
                    }
                    if exists {
                        held = Some(lock(&image)?);
                    }
                    ImageDevice::create(&image, kind, BLOCK, bytes / BLOCK as u64).map_err(|e| Failure::input(format!("{}: {e}", image.display())))?
                }
                (None, true) => {
                    if !force {
                        return Err(Failure::input(format!("{} exists: pass --force to write a new file system over it (everything on it is lost)", image.display())));
                    }
                    let (dev, l) = open(&image)?;
                    held = Some(l);
                    dev
                }
                (None, false) => return Err(Failure::input(format!("{} does not exist: give --size to create an image file", image.display()))),
            };
            let dev_kind = dev.kind();
            let sb = mkfs(&mut dev, &MkfsOptions { journal_blocks, uuid: uuid(), ..Default::default() });
            let sb = sb.and_then(|sb| dev.flush().map(|_| sb).map_err(Into::into));
            drop(held);
            let sb = match sb {
                Ok(sb) => sb,
                Err(e) => {
                    // Leave nothing behind that looks like an image.
                    if created {
                        let _ = std::fs::remove_file(&image);
                    }
                    return Err(Failure::input(format!("mkfs {}: {e}", image.display())));
                }
            };
            println!(
                "intactfs on {} ({} device): {} blocks of {BLOCK} bytes ({} MiB), journal {} blocks, data area from block {}",
                image.display(),
                dev_kind.name(),
                sb.blocks,
                (sb.blocks * BLOCK as u64) >> 20,
                sb.journal_blocks,
                sb.data_start()
            );
            Ok(0)
        }
        FsCmd::Fsck { image, no_data, json } => {
            let (mut dev, _lock) = open(&image)?;
            let r = fsck(&mut dev, !no_data);
            if json {
                let v = serde_json::json!({"image": image.display().to_string(), "clean": r.clean(), "problems": r.problems, "notes": r.notes});
                println!("{v}");
            } else {
                for n in &r.notes {
                    println!("{n}");
                }
                for p in &r.problems {
                    println!("DAMAGE: {p}");
                }
                println!("{}: {}", image.display(), if r.clean() { "clean".to_string() } else { format!("{} problem(s) found", r.problems.len()) });
            }
            Ok(if r.clean() { 0 } else { 1 })
        }
        FsCmd::Mount(a) => crate::fs_mount::mount(a),
        FsCmd::Umount(a) => crate::fs_mount::umount(a),
        FsCmd::Exec(a) => crate::fs_mount::exec(a),
        FsCmd::Dump { image, journal } => {
            let (mut dev, _lock) = open(&image)?;
            match intactfs::dump::dump(&mut dev, journal) {
                Ok(s) => {
                    print!("{s}");
                    Ok(0)
                }
                Err(e) => Err(Failure { code: 1, message: format!("{}: {e} (run `intact fs fsck` for a full report)", image.display()) }),
            }
        }
    }
}

/// A file system id: distinguishes records of an earlier file system on the same device.
fn uuid() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    (t.as_nanos() as u64) ^ ((std::process::id() as u64) << 32)
}
