//! Random damage anywhere in a pmem image (issue 14 item 6): mount either refuses it with a
//! message or gives a file system that passes its own checks and can be walked, read,
//! written and remounted; it never panics. (tests/engine.rs has the named cases.)

use intactfs_device::PmemSim;
use intactfs_pmem::prelude::*;
use intactfs_pmem::{FileType, MkfsOptions, Owner, PmemFs, ROOT};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The owner of every file the tests make.
const O: Owner = Owner { uid: 0, gid: 0 };

const LEN: u64 = 2 << 20;

/// An image with files, a directory, checkpointed and logged data, one committed and one
/// open transaction (so the log holds redo, undo and commit entries).
fn base() -> (Vec<u8>, usize) {
    let mut dev = PmemSim::new(LEN).unwrap();
    PmemFs::mkfs(&mut dev, &MkfsOptions::for_len(LEN)).unwrap();
    let (mut fs, _) = PmemFs::mount(dev).unwrap();
    let d = fs.mkdir(None, ROOT, b"d", 0o755, O).unwrap().ino;
    let a = fs.create(None, d, b"a", 0o644, O).unwrap().ino;
    let b = fs.create(None, ROOT, b"b", 0o644, O).unwrap().ino;
    fs.write(None, a, 0, &[1; 9000]).unwrap();
    fs.checkpoint().unwrap();
    let t = fs.tx_begin(&[a, b]).unwrap();
    fs.write(Some(t), a, 100, &[2; 5000]).unwrap();
    fs.write(Some(t), b, 0, &[3; 700]).unwrap();
    fs.tx_commit(t).unwrap();
    let t = fs.tx_begin(&[b]).unwrap();
    fs.write(Some(t), b, 0, &[4; 300]).unwrap();
    fs.create(Some(t), ROOT, b"c", 0o644, O).unwrap();
    (
        fs.device().persistent().to_vec(),
        (fs.geometry().data_start * 4096) as usize,
    )
}

/// Every file reachable from the root, read whole.
fn walk(fs: &PmemFs<PmemSim>) -> Result<usize, String> {
    let mut stack = vec![ROOT];
    let mut n = 0;
    while let Some(dir) = stack.pop() {
        for e in fs
            .readdir(dir, 0, usize::MAX)
            .map_err(|e| format!("readdir {dir}: {e}"))?
        {
            n += 1;
            match e.kind {
                FileType::Dir => stack.push(e.ino),
                _ => {
                    let size = fs
                        .getattr(e.ino)
                        .map_err(|x| format!("getattr {}: {x}", e.ino))?
                        .size;
                    // A damaged size may be any valid one (up to 256 TiB): read the head
                    // and the tail, not the whole file into memory.
                    const PART: u64 = 1 << 20;
                    fs.read_shared(e.ino, 0, size.min(PART) as usize)
                        .map_err(|x| format!("read {}: {x}", e.ino))?;
                    fs.read_shared(e.ino, size.saturating_sub(PART), PART as usize)
                        .map_err(|x| format!("read {} (tail): {x}", e.ino))?;
                }
            }
        }
    }
    Ok(n)
}

/// What mount made of one damaged image: refused, or a usable file system.
fn try_image(img: Vec<u8>) -> Result<bool, String> {
    let (mut fs, _) = match PmemFs::mount(PmemSim::from_image(img).unwrap()) {
        Ok(x) => x,
        Err(e) => {
            let msg = e.to_string();
            return if msg.is_empty() {
                Err("refused without a message".into())
            } else {
                Ok(false)
            };
        }
    };
    fs.check()
        .map_err(|e| format!("mounted but fails its own check: {e}"))?;
    walk(&fs)?;
    // Still usable: a new file, a write, a remount from what is persistent.
    if let Ok(f) = fs.create(None, ROOT, b"new-after-damage", 0o644, O) {
        fs.write(None, f.ino, 0, b"hello")
            .map_err(|e| format!("write after mount: {e}"))?;
    }
    let img = fs.into_device().persistent().to_vec();
    let (fs, _) = PmemFs::mount(PmemSim::from_image(img).unwrap())
        .map_err(|e| format!("remount after work: {e}"))?;
    fs.check().map_err(|e| format!("after remount: {e}"))?;
    walk(&fs)?;
    Ok(true)
}

#[test]
fn random_damage_is_refused_or_harmless() {
    let (base, meta_end) = base();
    // Bytes that hold something: the metadata (superblock, log, inode table) and the data
    // area's (directory blocks, file data, pending blocks).
    let used: Vec<usize> = (0..base.len()).filter(|&i| base[i] != 0).collect();
    let used_meta: Vec<usize> = used.iter().copied().filter(|&i| i < meta_end).collect();
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    let (mut refused, mut mounted) = (0, 0);
    for case in 0..1500 {
        let mut img = base.clone();
        let hits = 1 + rng.random_range(0..4);
        let mut what = Vec::new();
        for _ in 0..hits {
            // Half in the metadata, a quarter in any byte that holds something, a quarter
            // anywhere; a bit, a byte, or a whole 8-byte word set to an extreme value.
            let at = match rng.random_range(0..4) {
                0 | 1 => used_meta[rng.random_range(0..used_meta.len())],
                2 => used[rng.random_range(0..used.len())],
                _ => rng.random_range(0..img.len()),
            };
            match rng.random_range(0..3) {
                0 => img[at] ^= 1 << rng.random_range(0..8),
                1 => img[at] = rng.random(),
                _ => {
                    let w = at & !7;
                    let v = [0u64, u64::MAX, 1 << 40, rng.random()][rng.random_range(0..4)];
                    img[w..w + 8].copy_from_slice(&v.to_le_bytes());
                }
            }
            what.push(at);
        }
        match catch_unwind(AssertUnwindSafe(|| try_image(img))) {
            Ok(Ok(true)) => mounted += 1,
            Ok(Ok(false)) => refused += 1,
            Ok(Err(e)) => panic!("case {case}, damage at {what:?}: {e}"),
            Err(_) => panic!("case {case}, damage at {what:?}: panicked"),
        }
    }
    eprintln!("random damage: {refused} refused, {mounted} mounted and usable");
    assert!(refused > 100 && mounted > 100, "{refused} refused, {mounted} mounted: the damage should hit both checked and unchecked bytes");
}
