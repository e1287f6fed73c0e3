//! `intact fs mkfs | fsck | dump`: the intactfs tools that work on an image or device.

use crate::size::parse_size;
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
        /// that rewrite file blocks in place) or pmem (emulated persistent memory: a new
        /// image file of --size bytes mapped into memory, formatted for the FCFS-style
        /// engine with AD-transactions over several files; --journal sets its log size,
        /// 64 bytes per entry). Mount, fsck and dump find the kind in the image.
        #[arg(long, value_enum, default_value_t = DeviceArg::Block)]
        device: DeviceArg,
    },
    /// Check every structural invariant of IMAGE without changing it.
    /// Exit 0: clean; 1: damage found, or a read-write mount could not write back (each
    /// problem is listed); 2: cannot be read, not an intactfs image, or of a format version
    /// this build does not read (said as "not checked", not as damage).
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
    /// Unmount, and wait until the daemon has written everything back. Exit 0 when it
    /// did (or the mount was read-only); 1, with the daemon's reason, when it could not.
    Umount(crate::fs_mount::UmountArgs),
    /// Run a program in a stream: `intact fs exec --mount MNT --stream NAME -- CMD ARGS`.
    /// The program and its children write in that stream; fsync in it commits only it.
    Exec(crate::fs_mount::ExecArgs),
}

fn open(image: &Path) -> Result<(ImageDevice, ImageLock), Failure> {
    if !image.exists() {
        return Err(Failure::input(format!(
            "{}: no such file (create one with `intact fs mkfs {} --size 1G`)",
            image.display(),
            image.display()
        )));
    }
    let lock = lock(image)?;
    Ok((
        ImageDevice::open(image, BLOCK)
            .map_err(|e| Failure::input(format!("{}: {e}", image.display())))?,
        lock,
    ))
}

/// A mounted image must not be checked, dumped or overwritten meanwhile.
fn lock(image: &Path) -> Result<ImageLock, Failure> {
    intactfs_fuse::mount::lock_image(image).map_err(|e| Failure::input(e.to_string()))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DeviceArg {
    Block,
    Txflash,
    Pmem,
}

/// The image a command reads as intactfs, if it reads one.
fn image_read_by(cmd: &FsCmd) -> Option<&Path> {
    match cmd {
        FsCmd::Fsck { image, .. } | FsCmd::Dump { image, .. } => Some(image),
        FsCmd::Mount(a) => Some(&a.image),
        _ => None,
    }
}

/// An image of another file system is the wrong kind of image, not a damaged intactfs:
/// say which it is (exit 2) before any intactfs check calls it damage.
fn refuse_foreign(image: &Path) -> Result<(), Failure> {
    match intactfs::foreign::foreign_file_system(image) {
        None => Ok(()),
        Some(name) => Err(Failure::input(format!(
            "{}: this is an {name} image, not intactfs (check it with that file system's fsck, mount it with `mount -o loop`; make an intactfs image with `intact fs mkfs`)",
            image.display()
        ))),
    }
}

pub fn fs(cmd: FsCmd) -> Result<u8, Failure> {
    if let Some(image) = image_read_by(&cmd) {
        refuse_foreign(image)?;
    }
    match cmd {
        FsCmd::Mkfs { image, size, journal, force, device } => {
            let kind = match device {
                DeviceArg::Block => DeviceKind::Block,
                DeviceArg::Txflash => DeviceKind::TxFlash,
                DeviceArg::Pmem => return mkfs_pmem(&image, size, journal, force),
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
        FsCmd::Fsck { image, no_data: _, json } if intactfs_fuse::pmem::is_pmem_image(&image) => fsck_pmem(&image, json),
        FsCmd::Fsck { image, no_data, json } => {
            let (mut dev, _lock) = open(&image)?;
            let r = fsck(&mut dev, !no_data);
            if json {
                let v = serde_json::json!({"image": image.display().to_string(), "clean": r.clean(), "problems": r.problems, "unsupported": r.unsupported, "notes": r.notes});
                println!("{v}");
            } else {
                for n in &r.notes {
                    println!("{n}");
                }
                for p in &r.problems {
                    println!("DAMAGE: {p}");
                }
                let verdict = match &r.unsupported {
                    Some(m) => format!("not checked: {m}"),
                    None if r.clean() => "clean".to_string(),
                    None => format!("{} problem(s) found", r.problems.len()),
                };
                println!("{}: {verdict}", image.display());
            }
            // As the help says: 2 for an image that cannot be read or is not intactfs.
            Ok(match (r.clean(), r.unreadable) {
                (true, _) => 0,
                (false, true) => 2,
                (false, false) => 1,
            })
        }
        FsCmd::Mount(a) => crate::fs_mount::mount(a),
        FsCmd::Umount(a) => crate::fs_mount::umount(a),
        FsCmd::Exec(a) => crate::fs_mount::exec(a),
        FsCmd::Dump { image, .. } if intactfs_fuse::pmem::is_pmem_image(&image) => Err(Failure::input(format!(
            "{}: a pmem image; dump reads block images only (`intact fs fsck {}` reports the pmem image's geometry and what recovery finds)",
            image.display(),
            image.display()
        ))),
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
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (t.as_nanos() as u64) ^ ((std::process::id() as u64) << 32)
}

/// `mkfs --device pmem`: a new image file of `size` bytes (whole 4 KiB blocks), formatted by
/// the persistent-memory engine (`PmemFs::mkfs` on a `PmemFile`).
fn mkfs_pmem(
    image: &Path,
    size: Option<String>,
    journal: Option<String>,
    force: bool,
) -> Result<u8, Failure> {
    use intactfs_device::PmemFile;
    use intactfs_pmem::{MkfsOptions as PmemMkfs, PmemFs, BLOCK as PBLOCK};
    let Some(size) = size else {
        return Err(Failure::input(format!("--device pmem makes a new image file: give --size (e.g. `intact fs mkfs {} --device pmem --size 64M`)", image.display())));
    };
    let bytes = parse_size(&size).map_err(Failure::input)? / PBLOCK * PBLOCK;
    let exists = image.exists();
    if exists
        && !std::fs::metadata(image)
            .map(|m| m.is_file())
            .unwrap_or(false)
    {
        return Err(Failure::input(format!(
            "{} is not a regular file: a pmem image is a file of its own",
            image.display()
        )));
    }
    if exists
        && !force
        && std::fs::metadata(image)
            .map(|m| m.len() > 0)
            .unwrap_or(true)
    {
        return Err(Failure::input(format!(
            "{} exists and is not empty: pass --force to overwrite it",
            image.display()
        )));
    }
    // Held until mkfs is done: a mounted image is never overwritten.
    let held = if exists { Some(lock(image)?) } else { None };
    let mut opts = PmemMkfs::for_len(bytes);
    if let Some(j) = journal {
        let entries = parse_size(&j).map_err(Failure::input)? / 64;
        if !(16..=u32::MAX as u64).contains(&entries) {
            return Err(Failure::input(format!(
                "--journal {j}: a pmem log holds 16 to 2^32 entries of 64 bytes (at least 1K)"
            )));
        }
        opts.log_entries = entries;
    }
    let made = (|| {
        let mut dev = PmemFile::create(image, bytes).map_err(|e| e.to_string())?;
        let g = PmemFs::mkfs(&mut dev, &opts).map_err(|e| e.to_string())?;
        dev.sync_all().map_err(|e| e.to_string())?;
        Ok::<_, String>(g)
    })();
    drop(held);
    let g = match made {
        Ok(g) => g,
        Err(e) => {
            if !exists {
                let _ = std::fs::remove_file(image);
            }
            return Err(Failure::input(format!("mkfs {}: {e}", image.display())));
        }
    };
    println!(
        "intactfs-pmem on {} (pmem device): {} blocks of {PBLOCK} bytes ({} MiB), log {} entries of 64 bytes, {} inodes, data area from block {} ({} data blocks)",
        image.display(),
        g.total_blocks,
        (g.total_blocks * PBLOCK) >> 20,
        g.log_entries,
        g.inodes - 1,
        g.data_start,
        g.data_blocks()
    );
    Ok(0)
}

/// fsck's answer for a pmem image of a format this build does not read: not damage, and
/// not checked (exit 2, as for an image that cannot be read).
fn unsupported_pmem(image: &Path, m: &str, json: bool) -> Result<u8, Failure> {
    if json {
        let v = serde_json::json!({"image": image.display().to_string(), "kind": "pmem", "clean": false, "problems": [], "unsupported": m, "notes": []});
        println!("{v}");
    } else {
        println!("{}: not checked: {m}", image.display());
    }
    Ok(2)
}

/// `fsck` of a pmem image: the engine's mount-time checks (superblock, log, recovery, every
/// metadata invariant) and its invariant check, run on an in-memory copy (`PmemSim`), so
/// the image itself is not changed, not even by recovery. Exit 0: clean (a mount would
/// succeed); 1: refused as damaged; 2: cannot be read.
fn fsck_pmem(image: &Path, json: bool) -> Result<u8, Failure> {
    use intactfs_device::PmemSim;
    use intactfs_pmem::prelude::*;
    use intactfs_pmem::PmemFs;
    let _lock = lock(image)?;
    let bytes =
        std::fs::read(image).map_err(|e| Failure::input(format!("{}: {e}", image.display())))?;
    let dev = PmemSim::from_image(bytes)
        .map_err(|e| Failure::input(format!("{}: {e}", image.display())))?;
    let checked = PmemFs::mount(dev).and_then(|(fs, rep)| fs.check().map(|_| (fs, rep)));
    let (notes, problem) = match &checked {
        Ok((fs, rep)) => {
            let g = fs.geometry();
            let st = fs.statfs();
            let mut n = vec![
                format!("pmem image (superblock INTPMEM1): {} blocks of 4096 bytes, log {} entries, {} inodes, data area from block {}", g.total_blocks, g.log_entries, g.inodes - 1, g.data_start),
                "checked on an in-memory copy: the image was not changed (a mount runs the same recovery on the image itself)".to_string(),
                format!(
                    "log: {} valid entries; {} committed transaction(s) to redo ({} redo entries, {} already installed), {} uncommitted transaction(s) to undo ({} undo entries)",
                    rep.valid_entries, rep.committed_txs, rep.redo_indexed, rep.redo_installed, rep.uncommitted_txs, rep.undo_applied
                ),
                format!("{} of {} data blocks free, {} of {} inodes free", st.free_blocks, st.blocks, st.free_files, st.files),
            ];
            if rep.valid_entries == 0 {
                n.push("the log is empty: the image was unmounted cleanly".into());
            }
            (n, None)
        }
        Err(intactfs_pmem::PmemFsError::Unsupported(m)) => {
            return unsupported_pmem(image, m, json);
        }
        Err(e) => (vec!["pmem image: the engine's mount-time checks ran on an in-memory copy (the image was not changed)".to_string()], Some(e.to_string())),
    };
    let clean = problem.is_none();
    if json {
        let v = serde_json::json!({"image": image.display().to_string(), "kind": "pmem", "clean": clean, "problems": problem.iter().collect::<Vec<_>>(), "notes": notes});
        println!("{v}");
    } else {
        for n in &notes {
            println!("{n}");
        }
        if let Some(p) = &problem {
            println!("DAMAGE: {p}");
        }
        println!(
            "{}: {}",
            image.display(),
            if clean {
                "clean"
            } else {
                "damaged: a mount refuses it"
            }
        );
    }
    Ok(if clean { 0 } else { 1 })
}
