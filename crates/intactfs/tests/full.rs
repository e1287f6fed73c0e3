//! A full file system still writes back and mounts (issue 25 finding 2), on the block and
//! the transactional-flash device:
//! - the metadata reserve is kept current as the namespace grows (creates, extended
//!   attributes, extents), so filling the file system refuses writes with ENOSPC early
//!   instead of leaving no room for the unmount's snapshot;
//! - a snapshot can be written into free space split into more than 200 pieces (a run
//!   table, header `INTACTC3`);
//! - an image that an earlier build filled past that point (fixtures made with the build
//!   before this change: 2,000 files and a `dd` to ENOSPC) mounts read-only with the
//!   reason, and fsck reports it.

use intactfs::fsck::fsck;
use intactfs::layout::Checkpoint;
use intactfs::prelude::*;
use intactfs::{
    mkfs, Fs, FsError, MkfsOptions, MountOptions, Owner, XattrMode, BLOCK, INIT_STREAM, ROOT,
};
use intactfs_device::{BlockDevice, ImageDevice, SimDevice, TxSimDevice};
use std::path::{Path, PathBuf};

const O: Owner = Owner { uid: 0, gid: 0 };
const S: u64 = INIT_STREAM;

fn fresh<D: BlockDevice>(mut dev: D) -> Fs<D> {
    let opts = MkfsOptions {
        uuid: 25,
        ..Default::default()
    };
    mkfs(&mut dev, &opts).unwrap();
    Fs::mount(dev, MountOptions::default()).unwrap().0
}

fn remount<D: BlockDevice>(fs: Fs<D>) -> Fs<D> {
    let dev = fs
        .unmount()
        .expect("a full file system must write back at unmount");
    let (fs, report) = Fs::mount(dev, MountOptions::default()).expect("and mount again");
    assert_eq!(report.read_only, None, "mounted read-write");
    fs
}

fn create(fs: &mut Fs<impl BlockDevice>, name: &str) -> Result<u64, FsError> {
    fs.create(S, ROOT, name.as_bytes(), 0o644, O).map(|a| a.ino)
}

/// Writes 1 MiB chunks until the file system refuses with ENOSPC; returns the bytes
/// written. Any other error fails the test.
fn fill(fs: &mut Fs<impl BlockDevice>, ino: u64) -> u64 {
    let chunk = vec![0u8; 1 << 20];
    let mut off = 0u64;
    loop {
        match fs.write(S, ino, off, &chunk) {
            Ok(n) => off += n as u64,
            Err(FsError::NoSpace(_)) => return off,
            Err(e) => panic!("writing at {off}: {e}"),
        }
    }
}

/// Finding 2's reproduction: 2,000 small files, then one file written until ENOSPC.
fn many_files_then_fill<D: BlockDevice>(dev: D) {
    let mut fs = fresh(dev);
    for i in 0..2000 {
        let ino = create(&mut fs, &format!("f{i}")).unwrap();
        fs.write(S, ino, 0, b"x\n").unwrap();
    }
    let big = create(&mut fs, "big").unwrap();
    let written = fill(&mut fs, big);
    assert!(written > 0 && written < 100 << 20, "{written} bytes");
    fs.sync().expect("what was accepted commits");
    let mut fs = remount(fs);
    // Deleting works, and then writing again.
    fs.unlink(S, ROOT, b"big").unwrap();
    let ino = create(&mut fs, "after").unwrap();
    fs.write(S, ino, 0, &vec![7u8; 1 << 20]).unwrap();
    let mut dev = fs.unmount().unwrap();
    let r = fsck(&mut dev, true);
    assert!(r.clean(), "{:?}", r.problems);
}

#[test]
fn block_full_of_files_writes_back_and_mounts() {
    many_files_then_fill(SimDevice::new(BLOCK, 16384).unwrap());
}

#[test]
fn txflash_full_of_files_writes_back_and_mounts() {
    many_files_then_fill(TxSimDevice::new(BLOCK, 16384).unwrap());
}

/// Large extended attributes added to a full file system: refused with ENOSPC or kept,
/// never a file system that cannot write back.
fn xattrs_on_full<D: BlockDevice>(dev: D) {
    let mut fs = fresh(dev);
    let big = create(&mut fs, "big").unwrap();
    fill(&mut fs, big);
    fs.sync().unwrap();
    let value = vec![0x5au8; 60_000];
    let (mut kept, mut refused) = (0, 0);
    for f in 0..8 {
        let ino = create(&mut fs, &format!("x{f}")).unwrap();
        for k in 0..4 {
            match fs.setxattr(
                S,
                ino,
                format!("user.a{k}").as_bytes(),
                &value,
                XattrMode::Any,
            ) {
                Ok(()) => kept += 1,
                Err(FsError::NoSpace(_)) => refused += 1,
                Err(e) => panic!("setxattr: {e}"),
            }
        }
    }
    assert!(refused > 0, "the file system was full: {kept} kept");
    fs.sync().unwrap();
    let mut fs = remount(fs);
    let kept_after: usize = (0..8)
        .map(|f| {
            let ino = fs.lookup(ROOT, format!("x{f}").as_bytes()).unwrap().ino;
            fs.listxattr(ino).unwrap().len()
        })
        .sum();
    assert_eq!(kept_after, kept, "every accepted attribute survives");
    fs.unlink(S, ROOT, b"big").unwrap();
    fs.unmount().unwrap();
}

#[test]
fn block_xattrs_on_a_full_fs_write_back() {
    xattrs_on_full(SimDevice::new(BLOCK, 4096).unwrap());
}

#[test]
fn txflash_xattrs_on_a_full_fs_write_back() {
    xattrs_on_full(TxSimDevice::new(BLOCK, 4096).unwrap());
}

/// Free space in single blocks only (every other block of a file that filled the file
/// system punched out), then metadata larger than 200 of them: the snapshot goes into
/// more than 200 extents, listed in a run table; the image mounts again.
fn fragmented<D: BlockDevice>(dev: D, durable: fn(&D) -> Vec<u8>) -> Vec<u8> {
    let mut fs = fresh(dev);
    let big = create(&mut fs, "big").unwrap();
    let written = fill(&mut fs, big);
    fs.sync().unwrap();
    let blocks = written / BLOCK as u64;
    for b in (0..blocks).step_by(2) {
        fs.punch_hole(S, big, b * BLOCK as u64, BLOCK as u64)
            .unwrap();
    }
    fs.sync().unwrap();
    fs.checkpoint().unwrap();
    // About 350 blocks of extended attributes: more than the contiguous reserve holds.
    let value = vec![0xa5u8; 60_000];
    let mut names = Vec::new();
    for f in 0..6 {
        let ino = create(&mut fs, &format!("x{f}")).unwrap();
        for k in 0..4 {
            fs.setxattr(
                S,
                ino,
                format!("user.a{k}").as_bytes(),
                &value,
                XattrMode::Any,
            )
            .unwrap();
        }
        names.push(ino);
    }
    fs.sync().unwrap();
    fs.checkpoint_base()
        .expect("a base snapshot into fragmented free space");
    let dev = fs.unmount().unwrap();
    let img = durable(&dev);
    let magic = |slot: usize| &img[slot * BLOCK..slot * BLOCK + 8];
    assert!(
        magic(1) == b"INTACTC3" || magic(2) == b"INTACTC3",
        "the snapshot's extents are in a run table"
    );
    let (mut fs, report) = Fs::mount(dev, MountOptions::default()).unwrap();
    assert_eq!(report.read_only, None);
    for ino in names {
        assert_eq!(fs.getxattr(ino, b"user.a3").unwrap(), value);
    }
    fs.checkpoint_base().unwrap();
    let mut dev = fs.unmount().unwrap();
    let r = fsck(&mut dev, true);
    assert!(r.clean(), "{:?}", r.problems);
    img
}

#[test]
fn block_snapshot_into_fragmented_free_space() {
    let img = fragmented(SimDevice::new(BLOCK, 4096).unwrap(), |d| {
        d.durable().to_vec()
    });
    // A damaged run table is damage: mount refuses it, naming it (it does not fall back to
    // the older header, whose chain was freed), and fsck reports it.
    let cp = (1..=2)
        .filter_map(|s| Checkpoint::decode(&img[s * BLOCK..(s + 1) * BLOCK]).ok())
        .max_by_key(|c| c.generation)
        .unwrap();
    let table = cp.table.expect("a run table").runs[0].0 as usize;
    let mut bad = img.clone();
    bad[table * BLOCK + 100] ^= 0xff;
    let mut dev = SimDevice::from_image(BLOCK, bad).unwrap();
    let r = fsck(&mut dev, false);
    assert!(
        r.problems.iter().any(|p| p.contains("run table")),
        "{:?}",
        r.problems
    );
    match Fs::mount(dev, MountOptions::default()) {
        Err(FsError::Corrupt(why)) => assert!(why.contains("run table"), "{why}"),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("a damaged run table was accepted"),
    }
}

#[test]
fn txflash_snapshot_into_fragmented_free_space() {
    let _ = fragmented(TxSimDevice::new(BLOCK, 4096).unwrap(), |d| {
        d.durable().to_vec()
    });
}

/// An image the build before issue 25 filled (its reserve was sized at the last
/// checkpoint only), decompressed into a temporary file.
fn old_full_image(name: &str) -> (tempfile::TempDir, PathBuf) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let out = std::process::Command::new("xz")
        .arg("-dc")
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("`xz -dc {}` (package xz-utils): {e}", src.display()));
    assert!(out.status.success(), "xz -dc {}", src.display());
    std::fs::write(&img, out.stdout).unwrap();
    (dir, img)
}

fn old_full_mounts_read_only(name: &str) {
    let (_dir, img) = old_full_image(name);
    let mut dev = ImageDevice::open(&img, BLOCK).unwrap();
    let r = fsck(&mut dev, false);
    assert!(
        r.problems.iter().any(|p| p.contains("cannot write back")),
        "fsck reports that a read-write mount cannot write back: {:?}",
        r.problems
    );
    assert!(!r.unreadable);
    let (mut fs, report) = Fs::mount(dev, MountOptions::default()).expect("mounts");
    let why = report.read_only.expect("falls back to read-only");
    assert!(why.contains("copied out"), "{why}");
    let ino = fs.lookup(ROOT, b"f1999").unwrap().ino;
    assert_eq!(fs.read(ino, 0, 10).unwrap(), b"x\n");
    assert!(matches!(fs.unlink(S, ROOT, b"big"), Err(FsError::ReadOnly)));
    assert!(matches!(create(&mut fs, "new"), Err(FsError::ReadOnly)));
    fs.unmount().unwrap();
    // Nothing was written: still the same verdict.
    let mut dev = ImageDevice::open(&img, BLOCK).unwrap();
    assert!(!fsck(&mut dev, false).clean());
}

#[test]
fn old_full_block_image_mounts_read_only() {
    old_full_mounts_read_only("full-block-v2.img.xz");
}

#[test]
fn old_full_txflash_image_mounts_read_only() {
    old_full_mounts_read_only("full-txflash-v2.img.xz");
}

#[test]
fn fsck_of_random_bytes_is_unreadable() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let img: Vec<u8> = (0..64 * BLOCK)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let mut dev = SimDevice::from_image(BLOCK, img).unwrap();
    let r = fsck(&mut dev, true);
    assert!(!r.clean() && r.unreadable, "{:?}", r.problems);
}

/// A change to a run table's content.
type Forge = Box<dyn Fn(&mut intactfs::layout::RunTable)>;

/// A run table with a valid checksum but forged content (as hostile.rs forges headers):
/// refused as damage, never a panic, never accepted.
#[test]
fn forged_run_tables_are_refused() {
    use intactfs::layout::{self, RunTable, Segment};
    let img = fragmented(SimDevice::new(BLOCK, 4096).unwrap(), |d| {
        d.durable().to_vec()
    });
    let (slot, cp) = (1..=2)
        .filter_map(|s| {
            Some((
                s,
                Checkpoint::decode(&img[s * BLOCK..(s + 1) * BLOCK]).ok()?,
            ))
        })
        .max_by_key(|(_, c)| c.generation)
        .unwrap();
    let t = cp.table.clone().expect("a run table");
    let mut raw = Vec::new();
    for &(s, l) in &t.runs {
        raw.extend_from_slice(&img[s as usize * BLOCK..(s + l) as usize * BLOCK]);
    }
    let room = raw.len();
    raw.truncate(t.bytes as usize);
    let good: RunTable = postcard::from_bytes(&raw).unwrap();
    let forgeries: Vec<(&str, Forge)> = vec![
        ("another generation", Box::new(|r| r.generation += 1)),
        (
            "base over the table",
            Box::new(move |r| r.snapshot = t.runs.clone()),
        ),
        (
            "base outside the data area",
            Box::new(|r| r.snapshot[0] = (0, 1)),
        ),
        (
            "base one block short",
            Box::new(|r| r.snapshot_bytes += BLOCK as u64),
        ),
        (
            "base extents repeated",
            Box::new(|r| r.snapshot.push(r.snapshot[0])),
        ),
        (
            "a delta invented",
            Box::new(|r| {
                r.deltas.push(Segment {
                    runs: vec![r.snapshot[0]],
                    bytes: 1,
                    crc: 0,
                })
            }),
        ),
    ];
    for (what, forge) in forgeries {
        let mut rt = good.clone();
        forge(&mut rt);
        let bytes = layout::encode_table(&rt);
        assert!(
            bytes.len() <= room,
            "{what}: the forged table fits its blocks"
        );
        let mut bad = img.clone();
        let mut padded = bytes.clone();
        padded.resize(room, 0);
        let mut at = 0;
        for &(s, l) in &cp.table.as_ref().unwrap().runs {
            let n = l as usize * BLOCK;
            bad[s as usize * BLOCK..s as usize * BLOCK + n].copy_from_slice(&padded[at..at + n]);
            at += n;
        }
        let mut hdr = cp.clone();
        hdr.table = Some(Segment {
            runs: hdr.table.unwrap().runs,
            bytes: bytes.len() as u64,
            crc: layout::snapshot_crc(&bytes),
        });
        let enc = hdr.encode();
        bad[slot * BLOCK..(slot + 1) * BLOCK].copy_from_slice(&enc);
        let mut dev = SimDevice::from_image(BLOCK, bad).unwrap();
        assert!(
            !fsck(&mut dev, false).clean(),
            "{what}: fsck calls it clean"
        );
        match Fs::mount(dev, MountOptions::default()) {
            Err(FsError::Corrupt(_)) => {}
            Err(e) => panic!("{what}: refused for another reason: {e}"),
            Ok(_) => panic!("{what}: accepted"),
        }
    }
}
