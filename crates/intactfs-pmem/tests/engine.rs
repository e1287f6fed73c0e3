//! The engine's calls, transactions and errors, on the simulated device (crash behaviour is
//! the crash simulation's: tests/crash_simulation.rs).

use intactfs_device::PmemSim;
use intactfs_pmem::prelude::*;
use intactfs_pmem::{
    FileType, MkfsOptions, MknodKind, Owner, PmemFs, PmemFsError, RenameFlags, SetAttr, TxId,
    XattrMode, ROOT,
};

/// The owner of every file the tests make.
const O: Owner = Owner { uid: 0, gid: 0 };

const LEN: u64 = 4 << 20;

fn fresh() -> PmemFs<PmemSim> {
    fresh_with(MkfsOptions::for_len(LEN))
}

fn fresh_with(opts: MkfsOptions) -> PmemFs<PmemSim> {
    let mut dev = PmemSim::new(LEN).unwrap();
    PmemFs::mkfs(&mut dev, &opts).unwrap();
    let (fs, rep) = PmemFs::mount(dev).unwrap();
    assert_eq!(rep.valid_entries, 0);
    fs
}

/// Remounts from what is persistent now (as after a crash right here).
fn crash(fs: PmemFs<PmemSim>) -> PmemFs<PmemSim> {
    let dev = fs.into_device();
    let img = dev.persistent().to_vec();
    PmemFs::mount(PmemSim::from_image(img).unwrap()).unwrap().0
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn namespace_calls_and_errors() {
    let mut fs = fresh();
    let d = fs
        .mkdir(None, ROOT, b"d", 0o755, Owner { uid: 1, gid: 2 })
        .unwrap();
    assert_eq!(d.kind, FileType::Dir);
    assert_eq!(fs.getattr(ROOT).unwrap().nlink, 3);
    let f = fs
        .create(None, d.ino, b"f", 0o644, Owner { uid: 1, gid: 2 })
        .unwrap();
    assert_eq!(fs.lookup(d.ino, b"f").unwrap().ino, f.ino);
    assert_eq!(
        fs.create(None, d.ino, b"f", 0o644, O).unwrap_err().errno(),
        17
    );
    assert_eq!(fs.lookup(d.ino, b"g").unwrap_err().errno(), 2);
    assert_eq!(fs.lookup(f.ino, b"g").unwrap_err().errno(), 20);
    assert_eq!(
        fs.create(None, ROOT, &[b'x'; 256], 0o644, O)
            .unwrap_err()
            .errno(),
        36
    );
    assert_eq!(
        fs.create(None, ROOT, b"a/b", 0o644, O).unwrap_err().errno(),
        22
    );
    assert_eq!(fs.rmdir(None, ROOT, b"d").unwrap_err().errno(), 39);
    assert_eq!(fs.unlink(None, ROOT, b"d").unwrap_err().errno(), 21);
    assert_eq!(fs.rmdir(None, d.ino, b"f").unwrap_err().errno(), 20);
    assert_eq!(fs.read(d.ino, 0, 10).unwrap_err().errno(), 21);
    assert_eq!(fs.write(None, 999_999, 0, b"x").unwrap_err().errno(), 2);
    // A 255-byte name works.
    fs.create(None, ROOT, &[b'n'; 255], 0o600, O).unwrap();
    // Many entries: the directory grows past one block and past the direct pointers.
    for i in 0..250 {
        fs.create(None, d.ino, format!("file-{i}").as_bytes(), 0o644, O)
            .unwrap();
    }
    assert_eq!(fs.readdir(d.ino, 0, usize::MAX).unwrap().len(), 251);
    // rename: replace a file, move a directory, refuse a directory into itself.
    fs.write(None, f.ino, 0, b"hello").unwrap();
    fs.rename(None, d.ino, b"f", d.ino, b"file-3", RenameFlags::NONE)
        .unwrap();
    assert_eq!(fs.lookup(d.ino, b"file-3").unwrap().ino, f.ino);
    assert_eq!(fs.lookup(d.ino, b"f").unwrap_err().errno(), 2);
    let e = fs.mkdir(None, d.ino, b"e", 0o755, O).unwrap();
    assert_eq!(
        fs.rename(None, ROOT, b"d", e.ino, b"x", RenameFlags::NONE)
            .unwrap_err()
            .errno(),
        22
    );
    fs.rename(None, d.ino, b"e", ROOT, b"e2", RenameFlags::NONE)
        .unwrap();
    assert_eq!(fs.getattr(d.ino).unwrap().nlink, 2);
    assert_eq!(fs.getattr(ROOT).unwrap().nlink, 4);
    let empty = fs.mkdir(None, ROOT, b"empty", 0o755, O).unwrap();
    fs.rename(None, ROOT, b"e2", ROOT, b"empty", RenameFlags::NONE)
        .unwrap();
    assert_eq!(fs.getattr(empty.ino).unwrap_err().errno(), 2);
    assert_eq!(
        fs.rename(None, ROOT, b"empty", ROOT, b"d", RenameFlags::NONE)
            .unwrap_err()
            .errno(),
        39
    );
    fs.check().unwrap();
    let mut fs = crash(fs);
    fs.check().unwrap();
    assert_eq!(fs.read(f.ino, 0, 100).unwrap(), b"hello");
    assert_eq!(fs.readdir(d.ino, 0, usize::MAX).unwrap().len(), 250);
    for i in 0..250 {
        if i != 3 {
            fs.unlink(None, d.ino, format!("file-{i}").as_bytes())
                .unwrap();
        }
    }
    fs.unlink(None, d.ino, b"file-3").unwrap();
    fs.rmdir(None, ROOT, b"d").unwrap();
    fs.check().unwrap();
    let s = fs.statfs();
    let fs = crash(fs);
    assert_eq!(fs.statfs().free_blocks, s.free_blocks);
    fs.check().unwrap();
}

#[test]
fn data_reads_writes_truncates_and_checkpoints() {
    let mut fs = fresh();
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    let mut model = vec![0u8; 0];
    let ops: &[(u64, usize)] = &[
        (0, 5000),
        (3, 70),
        (8191, 2),
        (20000, 16384),
        (100, 4096),
        (4096 * 600, 9000),
    ];
    for (k, &(off, len)) in ops.iter().enumerate() {
        let data = pattern(len, k as u8);
        fs.write(None, f, off, &data).unwrap();
        let end = off as usize + len;
        if model.len() < end {
            model.resize(end, 0);
        }
        model[off as usize..end].copy_from_slice(&data);
        assert_eq!(fs.read(f, 0, usize::MAX).unwrap(), model, "after write {k}");
    }
    fs.truncate(None, f, 10_001).unwrap();
    model.truncate(10_001);
    fs.truncate(None, f, 30_000).unwrap();
    model.resize(30_000, 0);
    assert_eq!(fs.read(f, 0, usize::MAX).unwrap(), model);
    fs.checkpoint().unwrap();
    assert_eq!(fs.read(f, 0, usize::MAX).unwrap(), model);
    assert!(fs.stats().pointer_swaps > 0);
    fs.check().unwrap();
    let mut fs = crash(fs);
    assert_eq!(fs.read(f, 0, usize::MAX).unwrap(), model);
    fs.check().unwrap();
    // Unmount checkpoints everything: the log is empty afterwards.
    let dev = fs.unmount().unwrap();
    let (mut fs, rep) = PmemFs::mount(dev).unwrap();
    assert_eq!(rep.valid_entries, 0);
    assert_eq!(fs.read(f, 0, usize::MAX).unwrap(), model);
}

#[test]
fn transactions_commit_abort_and_errors() {
    let mut fs = fresh();
    let a = fs.create(None, ROOT, b"a", 0o644, O).unwrap().ino;
    let b = fs.create(None, ROOT, b"b", 0o644, O).unwrap().ino;
    fs.write(None, a, 0, b"old-a").unwrap();
    let t = fs.tx_begin(&[a, b]).unwrap();
    fs.write(Some(t), a, 0, b"new-a").unwrap();
    fs.write(Some(t), b, 0, b"new-b").unwrap();
    let c = fs.create(Some(t), ROOT, b"c", 0o644, O).unwrap().ino;
    // Another transaction or a legacy call may not change what t owns.
    assert_eq!(fs.write(None, a, 0, b"x").unwrap_err().errno(), 16);
    let t2 = fs.tx_begin(&[]).unwrap();
    assert_eq!(fs.write(Some(t2), b, 0, b"x").unwrap_err().errno(), 16);
    assert_eq!(
        fs.create(Some(t2), ROOT, b"z", 0o644, O)
            .unwrap_err()
            .errno(),
        16
    );
    // A crash now loses all of t.
    {
        let img = fs.device().persistent().to_vec();
        let (mut g, rep) = PmemFs::mount(PmemSim::from_image(img).unwrap()).unwrap();
        assert!(rep.undo_applied > 0);
        assert_eq!(g.read(a, 0, 100).unwrap(), b"old-a");
        assert_eq!(g.read(b, 0, 100).unwrap(), b"");
        assert_eq!(g.lookup(ROOT, b"c").unwrap_err().errno(), 2);
        g.check().unwrap();
    }
    let st = fs.tx_commit(t).unwrap();
    assert!(st.device.fences >= 3 && st.redo_entries == 2, "{st:?}");
    assert_eq!(fs.tx_commit(t).unwrap_err().errno(), 22);
    assert_eq!(fs.tx_abort(t).unwrap_err().errno(), 22);
    assert_eq!(fs.tx_abort(TxId(12345)).unwrap_err().errno(), 22);
    fs.write(Some(t2), b, 0, b"t2-b").unwrap();
    fs.unlink(Some(t2), ROOT, b"c").unwrap();
    fs.truncate(Some(t2), a, 1).unwrap();
    fs.tx_abort(t2).unwrap();
    assert_eq!(fs.tx_commit(t2).unwrap_err().errno(), 22);
    assert_eq!(fs.read(b, 0, 100).unwrap(), b"new-b");
    assert_eq!(fs.read(a, 0, 100).unwrap(), b"new-a");
    assert_eq!(fs.lookup(ROOT, b"c").unwrap().ino, c);
    fs.check().unwrap();
    let mut fs = crash(fs);
    assert_eq!(fs.read(a, 0, 100).unwrap(), b"new-a");
    assert_eq!(fs.read(b, 0, 100).unwrap(), b"new-b");
    assert_eq!(fs.lookup(ROOT, b"c").unwrap().ino, c);
    fs.check().unwrap();
}

#[test]
fn a_transaction_larger_than_the_log_fails_and_stays_abortable() {
    let mut fs = fresh_with(MkfsOptions {
        inodes: 64,
        log_entries: 64,
    });
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    fs.write(None, f, 0, &pattern(8192, 1)).unwrap();
    let t = fs.tx_begin(&[f]).unwrap();
    // 63 blocks need 63 redo entries: more than the log has room for.
    let e = fs.write(Some(t), f, 0, &pattern(63 * 4096, 2)).unwrap_err();
    assert!(matches!(e, PmemFsError::NoSpace(_)), "{e}");
    assert_eq!(e.errno(), 28);
    // Nothing of the failed call is visible, and the transaction still works.
    assert_eq!(fs.read(f, 0, usize::MAX).unwrap(), pattern(8192, 1));
    fs.write(Some(t), f, 10, b"small").unwrap();
    fs.tx_abort(t).unwrap();
    assert_eq!(fs.read(f, 0, usize::MAX).unwrap(), pattern(8192, 1));
    fs.check().unwrap();
}

#[test]
fn setattr_and_statfs() {
    let mut fs = fresh();
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    let a = fs
        .setattr(
            None,
            f,
            SetAttr {
                mode: Some(0o600),
                uid: Some(7),
                gid: Some(8),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!((a.mode, a.uid, a.gid), (0o600, 7, 8));
    assert_eq!(fs.truncate(None, ROOT, 0).unwrap_err().errno(), 21);
    assert_eq!(fs.truncate(None, f, u64::MAX).unwrap_err().errno(), 27);
    let s = fs.statfs();
    assert_eq!(s.name_max, 255);
    fs.write(None, f, 0, &pattern(40960, 3)).unwrap();
    fs.checkpoint().unwrap();
    assert_eq!(fs.statfs().free_blocks, s.free_blocks - 10);
    fs.fsync(None, f, false).unwrap();
}

fn damaged(edit: impl FnOnce(&mut Vec<u8>, &PmemFs<PmemSim>)) -> PmemFsError {
    let mut fs = fresh();
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    fs.write(None, f, 0, &pattern(5000, 1)).unwrap();
    fs.checkpoint().unwrap();
    let t = fs.tx_begin(&[f]).unwrap();
    fs.write(Some(t), f, 0, b"uncommitted").unwrap();
    let mut img = fs.device().persistent().to_vec();
    edit(&mut img, &fs);
    match PmemFs::mount(PmemSim::from_image(img).unwrap()) {
        Ok(_) => panic!("a damaged image mounted"),
        Err(e) => e,
    }
}

#[test]
fn hostile_images_are_refused() {
    let g = fresh().geometry();
    let e = damaged(|img, _| img[0] ^= 1);
    assert!(e.to_string().contains("magic"), "{e}");
    let e = damaged(|img, _| img[20] ^= 1);
    assert!(e.to_string().contains("checksum"), "{e}");
    // A block pointer outside the data area.
    let e = damaged(|img, _| {
        let off = (g.inode_off(2) + 64) as usize;
        img[off..off + 8].copy_from_slice(&(g.total_blocks + 5).to_le_bytes());
    });
    assert!(e.to_string().contains("outside the data area"), "{e}");
    // Two files naming the same block.
    let e = damaged(|img, fs| {
        let _ = fs;
        let off = (g.inode_off(1) + 64 + 8) as usize;
        let p = u64::from_le_bytes(
            img[(g.inode_off(2) + 64) as usize..][..8]
                .try_into()
                .unwrap(),
        );
        img[off..off + 8].copy_from_slice(&p.to_le_bytes());
    });
    assert!(e.to_string().contains("damaged"), "{e}");
    // A log entry written in two phases (valid word tag log::TAG) whose body does not match
    // its checksum: a crash cannot make it (format 6 writes only commit records that way;
    // the undo entry is relabelled to stand for one).
    let first_entry = |img: &Vec<u8>| {
        (0..g.log_entries)
            .find(|&s| img[(g.log_off(s) + 56) as usize..][..8] != [0; 8])
            .expect("an undo entry of the open transaction")
    };
    let e = damaged(|img, _| {
        let at = g.log_off(first_entry(img)) as usize;
        img[at + 30] ^= 0x40;
        img[at + 60..at + 64].copy_from_slice(&(intactfs_pmem::log::TAG as u32).to_le_bytes());
    });
    assert!(e.to_string().contains("checksum"), "{e}");
    // An undo or redo entry (written whole, tag TAG_WHOLE) whose body does not match: a
    // crash tore it before its fence, so mount frees it and nothing depends on it.
    let mut fs = fresh();
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    fs.checkpoint().unwrap();
    let t = fs.tx_begin(&[f]).unwrap();
    fs.write(Some(t), f, 0, b"uncommitted").unwrap();
    let mut img = fs.device().persistent().to_vec();
    let at = g.log_off(first_entry(&img)) as usize;
    img[at + 30] ^= 0x40;
    let (mut fs, rep) = PmemFs::mount(PmemSim::from_image(img).unwrap()).unwrap();
    assert_eq!((rep.torn_entries, rep.committed_txs), (1, 0), "{rep:?}");
    assert!(fs.read(f, 0, usize::MAX).unwrap().is_empty());
    fs.check_invariants().unwrap();
    // A directory entry with an impossible name length.
    let e = damaged(|img, _| {
        let root_blk = u64::from_le_bytes(
            img[(g.inode_off(1) + 64) as usize..][..8]
                .try_into()
                .unwrap(),
        );
        img[(root_blk * 4096 + 4) as usize] = 0;
    });
    assert!(e.to_string().contains("malformed"), "{e}");
    // A named file whose link count says 0 (not an orphan: orphans have no name), or more
    // names than it has (issue 26: link count = names).
    for nlink in [0u32, 2] {
        let e = damaged(|img, _| {
            let off = (g.inode_off(2) + 8) as usize;
            img[off..off + 4].copy_from_slice(&nlink.to_le_bytes());
        });
        assert!(e.to_string().contains("link count"), "{e}");
    }
    // A file no entry names but whose link count says 1: not an orphan, damage.
    let e = damaged(|img, _| {
        let root_blk = u64::from_le_bytes(
            img[(g.inode_off(1) + 64) as usize..][..8]
                .try_into()
                .unwrap(),
        );
        img[(root_blk * 4096) as usize..][..8].fill(0);
    });
    assert!(e.to_string().contains("named by 0"), "{e}");
    // An inode of an unknown type.
    let e = damaged(|img, _| img[g.inode_off(2) as usize] = 9);
    assert!(e.to_string().contains("type"), "{e}");
    // Truncated device.
    assert!(PmemFs::mount(PmemSim::new(64).unwrap()).is_err());
}

#[test]
fn recovery_is_idempotent_after_a_crash_during_recovery() {
    use intactfs_pmem::sim::probe::Probe;
    let mut fs = fresh();
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    fs.write(None, f, 0, &pattern(9000, 1)).unwrap();
    let t = fs.tx_begin(&[f]).unwrap();
    fs.truncate(Some(t), f, 100).unwrap();
    fs.write(Some(t), f, 50, &pattern(3000, 2)).unwrap();
    fs.create(Some(t), ROOT, b"g", 0o644, O).unwrap();
    let img = fs.device().persistent().to_vec();
    let (mut clean, rep) = PmemFs::mount(PmemSim::from_image(img.clone()).unwrap()).unwrap();
    assert!(rep.undo_applied > 0 && rep.redo_indexed > 0, "{rep:?}");
    let want = clean.read(f, 0, usize::MAX).unwrap();
    assert_eq!(want, pattern(9000, 1));
    // Crash at every fence of recovery (every image where few, else draws), recover again.
    let mut p = Probe::new(PmemSim::from_image(img).unwrap(), 7, 4, 64);
    p.capture = true;
    let (_, _) = PmemFs::mount(p).unwrap();
    let mut p2 = Probe::new(
        PmemSim::from_image(fs.device().persistent().to_vec()).unwrap(),
        7,
        4,
        64,
    );
    p2.capture = true;
    let (m, _) = PmemFs::mount(p2).unwrap();
    let images = m.into_device().take();
    assert!(images.len() >= 2, "recovery has fences");
    for i in images {
        let (mut again, _) = PmemFs::mount(PmemSim::from_image(i.bytes).unwrap()).unwrap();
        assert_eq!(
            again.read(f, 0, usize::MAX).unwrap(),
            want,
            "after a crash at fence {} of recovery ({})",
            i.point,
            i.description
        );
        assert_eq!(again.lookup(ROOT, b"g").unwrap_err().errno(), 2);
        again.check().unwrap();
    }
}

/// A fresh file system whose root already has its first directory block (which stays once
/// taken), and its statfs: frees can be counted against it.
fn fresh_counted() -> (PmemFs<PmemSim>, intactfs_pmem::StatFs) {
    let mut fs = fresh();
    fs.create(None, ROOT, b"x", 0o644, O).unwrap();
    fs.unlink(None, ROOT, b"x").unwrap();
    let before = fs.statfs();
    (fs, before)
}

/// Every inode and block taken since `before` is free again (checkpointed first: pending
/// blocks are free only then).
fn assert_all_freed(fs: &mut PmemFs<PmemSim>, before: &intactfs_pmem::StatFs) {
    fs.checkpoint().unwrap();
    let after = fs.statfs();
    assert_eq!(
        (after.free_files, after.free_blocks),
        (before.free_files, before.free_blocks)
    );
}

#[test]
fn an_unlinked_open_file_lives_until_its_last_release() {
    let (mut fs, before) = fresh_counted();
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    fs.write(None, f, 0, &pattern(9000, 3)).unwrap();
    fs.open(f).unwrap();
    fs.open(f).unwrap();
    assert_eq!(fs.open_count(f), 2);
    fs.unlink(None, ROOT, b"f").unwrap();
    assert_eq!(fs.lookup(ROOT, b"f").unwrap_err().errno(), 2);
    assert!(fs.readdir(ROOT, 0, usize::MAX).unwrap().is_empty());
    assert_eq!(fs.getattr(f).unwrap().nlink, 0);
    // Reads and writes through the open descriptors keep working (ENOENT before issue 26).
    assert_eq!(fs.read(f, 0, usize::MAX).unwrap(), pattern(9000, 3));
    fs.write(None, f, 9000, b"tail").unwrap();
    assert_eq!(fs.getattr(f).unwrap().size, 9004);
    fs.check_invariants().unwrap();
    fs.release(None, f).unwrap();
    assert_eq!(fs.read(f, 0, 4).unwrap(), pattern(4, 3));
    assert!(fs.statfs().free_files < before.free_files);
    fs.release(None, f).unwrap();
    assert_eq!(fs.getattr(f).unwrap_err().errno(), 2);
    fs.check_invariants().unwrap();
    assert_eq!(fs.statfs().free_files, before.free_files);
    fs.checkpoint().unwrap();
    assert_eq!(fs.statfs().free_blocks, before.free_blocks);
    // A release of an inode that is not open does nothing.
    fs.release(None, f).unwrap();
    // A file not open is freed by its unlink at once.
    let g = fs.create(None, ROOT, b"g", 0o644, O).unwrap().ino;
    fs.unlink(None, ROOT, b"g").unwrap();
    assert_eq!(fs.getattr(g).unwrap_err().errno(), 2);
}

#[test]
fn a_rename_over_an_open_file_leaves_it_an_orphan() {
    let mut fs = fresh();
    let a = fs.create(None, ROOT, b"a", 0o644, O).unwrap().ino;
    let b = fs.create(None, ROOT, b"b", 0o644, O).unwrap().ino;
    fs.write(None, b, 0, b"old b").unwrap();
    fs.open(b).unwrap();
    fs.rename(None, ROOT, b"a", ROOT, b"b", RenameFlags::NONE)
        .unwrap();
    assert_eq!(fs.lookup(ROOT, b"b").unwrap().ino, a);
    assert_eq!(fs.read(b, 0, 100).unwrap(), b"old b");
    assert_eq!(fs.getattr(b).unwrap().nlink, 0);
    fs.check_invariants().unwrap();
    fs.release(None, b).unwrap();
    assert_eq!(fs.getattr(b).unwrap_err().errno(), 2);
    fs.check_invariants().unwrap();
}

#[test]
fn orphans_are_freed_at_mount_after_a_crash() {
    let (mut fs, before) = fresh_counted();
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    fs.write(None, f, 0, &pattern(20_000, 4)).unwrap();
    fs.open(f).unwrap();
    fs.unlink(None, ROOT, b"f").unwrap();
    let img = fs.into_device().persistent().to_vec();
    let (mut fs, rep) = PmemFs::mount(PmemSim::from_image(img).unwrap()).unwrap();
    assert_eq!(rep.orphans_freed, 1, "{rep:?}");
    assert_eq!(fs.getattr(f).unwrap_err().errno(), 2);
    fs.check_invariants().unwrap();
    assert_all_freed(&mut fs, &before);
    // Freed durably: the next mount finds none.
    let fs = crash(fs);
    fs.check_invariants().unwrap();
    assert_eq!(fs.getattr(f).unwrap_err().errno(), 2);
}

#[test]
fn an_orphans_last_release_inside_a_transaction_waits_for_its_end() {
    let mut fs = fresh();
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    fs.write(None, f, 0, b"keep me").unwrap();
    fs.open(f).unwrap();
    // Aborted: the unlink is undone, and the file is a plain closed file again.
    let t = fs.tx_begin(&[]).unwrap();
    fs.unlink(Some(t), ROOT, b"f").unwrap();
    fs.release(None, f).unwrap();
    assert_eq!(fs.read(f, 0, 100).unwrap(), b"keep me");
    fs.check_invariants().unwrap();
    fs.tx_abort(t).unwrap();
    assert_eq!(fs.lookup(ROOT, b"f").unwrap().nlink, 1);
    assert_eq!(fs.read(f, 0, 100).unwrap(), b"keep me");
    fs.check_invariants().unwrap();
    // Committed: freed right after the commit.
    fs.open(f).unwrap();
    let t = fs.tx_begin(&[]).unwrap();
    fs.unlink(Some(t), ROOT, b"f").unwrap();
    fs.release(None, f).unwrap();
    assert_eq!(fs.getattr(f).unwrap().nlink, 0);
    fs.tx_commit(t).unwrap();
    assert_eq!(fs.getattr(f).unwrap_err().errno(), 2);
    fs.check_invariants().unwrap();
}

#[test]
fn images_of_older_formats_are_refused_with_a_message() {
    // 1: before orphans and hard links; 2: before symbolic links and special files; 3:
    // before extended attributes; 4: before times past 2262; 5: before whole-written undo
    // and redo entries.
    for version in [1u32, 2, 3, 4, 5] {
        let fs = fresh();
        let mut img = fs.into_device().persistent().to_vec();
        img[8..12].copy_from_slice(&version.to_le_bytes());
        let crc = crc32c::crc32c(&img[..64]);
        img[64..68].copy_from_slice(&crc.to_le_bytes());
        let e = PmemFs::mount(PmemSim::from_image(img).unwrap()).unwrap_err();
        assert!(e.to_string().contains("older engine"), "{e}");
        assert!(e.to_string().contains(&format!("version {version}")), "{e}");
    }
}

#[test]
fn symlinks_keep_their_targets_across_a_crash() {
    let (mut fs, before) = fresh_counted();
    let long = vec![b'p'; intactfs_pmem::layout::SYMLINK_MAX];
    let a = fs
        .symlink(None, ROOT, b"short", b"../t", Owner { uid: 1, gid: 2 })
        .unwrap();
    assert_eq!(
        (a.kind, a.mode, a.size, a.nlink),
        (FileType::Symlink, 0o777, 4, 1)
    );
    assert_eq!((a.uid, a.gid, a.rdev), (1, 2, 0));
    let b = fs.symlink(None, ROOT, b"long", &long, O).unwrap().ino;
    // In a transaction: undone by an abort, its block freed.
    let t = fs.tx_begin(&[]).unwrap();
    let c = fs.symlink(Some(t), ROOT, b"aborted", b"x", O).unwrap().ino;
    assert_eq!(fs.readlink(c).unwrap(), b"x");
    fs.tx_abort(t).unwrap();
    assert_eq!(fs.lookup(ROOT, b"aborted").unwrap_err().errno(), 2);
    // Linux's answers: an empty or too long target EINVAL (the block engine's), readlink of
    // anything else EINVAL, data calls on a link EINVAL.
    assert_eq!(
        fs.symlink(None, ROOT, b"e", b"", O).unwrap_err().errno(),
        22
    );
    let too_long = vec![b'p'; long.len() + 1];
    assert_eq!(
        fs.symlink(None, ROOT, b"e", &too_long, O)
            .unwrap_err()
            .errno(),
        22
    );
    assert_eq!(
        fs.symlink(None, ROOT, b"long", b"t", O)
            .unwrap_err()
            .errno(),
        17
    );
    assert_eq!(fs.readlink(ROOT).unwrap_err().errno(), 22);
    assert_eq!(fs.write(None, b, 0, b"no").unwrap_err().errno(), 22);
    assert_eq!(fs.truncate(None, b, 1).unwrap_err().errno(), 22);
    // A hard link to a link (Linux allows it).
    fs.link(None, b, ROOT, b"long2").unwrap();
    fs.check_invariants().unwrap();
    let mut fs = crash(fs);
    fs.check_invariants().unwrap();
    assert_eq!(fs.readlink(a.ino).unwrap(), b"../t");
    assert_eq!(fs.readlink(b).unwrap(), long);
    assert_eq!(fs.lookup(ROOT, b"long2").unwrap().nlink, 2);
    for n in [&b"short"[..], b"long", b"long2"] {
        fs.unlink(None, ROOT, n).unwrap();
    }
    assert_all_freed(&mut fs, &before);
}

#[test]
fn special_files_keep_kind_and_device_number() {
    let (mut fs, before) = fresh_counted();
    let kinds = [
        (&b"fifo"[..], FileType::Fifo, 0),
        (b"sock", FileType::Socket, 0),
        (b"chr", FileType::CharDev, 0x0501),
        (b"blk", FileType::BlockDev, 0x0803),
    ];
    for (name, kind, rdev) in kinds {
        let node = MknodKind::new(kind, rdev).unwrap();
        let a = fs
            .mknod(None, ROOT, name, node, 0o640, Owner { uid: 3, gid: 4 })
            .unwrap();
        assert_eq!((a.kind, a.rdev, a.mode, a.size), (kind, rdev, 0o640, 0));
    }
    // A FIFO's device number is dropped (as the block engine: only devices keep one).
    let fifo = MknodKind::new(FileType::Fifo, 7).unwrap();
    let p = fs.mknod(None, ROOT, b"p2", fifo, 0o600, O).unwrap();
    assert_eq!(p.rdev, 0);
    // mknod of a regular file makes an empty file; of a directory or a link: EINVAL.
    let f = fs
        .mknod(None, ROOT, b"f", MknodKind::File, 0o600, O)
        .unwrap();
    assert_eq!(f.kind, FileType::File);
    for k in [FileType::Dir, FileType::Symlink] {
        assert_eq!(MknodKind::new(k, 0).unwrap_err().errno(), 22);
    }
    let chr = fs.lookup(ROOT, b"chr").unwrap().ino;
    assert_eq!(fs.write(None, chr, 0, b"no").unwrap_err().errno(), 22);
    assert_eq!(fs.rmdir(None, ROOT, b"fifo").unwrap_err().errno(), 20);
    // An open FIFO lives on after its unlink, as an open file does.
    let fifo = fs.lookup(ROOT, b"fifo").unwrap().ino;
    fs.open(fifo).unwrap();
    fs.unlink(None, ROOT, b"fifo").unwrap();
    assert_eq!(fs.getattr(fifo).unwrap().nlink, 0);
    fs.check_invariants().unwrap();
    let mut fs = crash(fs);
    fs.check_invariants().unwrap();
    assert_eq!(
        fs.getattr(fifo).unwrap_err().errno(),
        2,
        "the orphan FIFO is freed at mount"
    );
    for (name, kind, rdev) in kinds.iter().skip(1) {
        let a = fs.lookup(ROOT, name).unwrap();
        assert_eq!((a.kind, a.rdev), (*kind, *rdev));
        fs.unlink(None, ROOT, name).unwrap();
    }
    fs.unlink(None, ROOT, b"p2").unwrap();
    fs.unlink(None, ROOT, b"f").unwrap();
    assert_all_freed(&mut fs, &before);
}

#[test]
fn hard_links_count_names_and_survive_a_crash() {
    let (mut fs, before) = fresh_counted();
    let d = fs.mkdir(None, ROOT, b"d", 0o755, O).unwrap().ino;
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    fs.write(None, f, 0, b"shared").unwrap();
    let a = fs.link(None, f, d, b"g").unwrap();
    assert_eq!((a.ino, a.nlink), (f, 2));
    assert_eq!(fs.lookup(d, b"g").unwrap().ino, f);
    // Errors, in the order the model of the simulation predicts them.
    assert_eq!(fs.link(None, f, d, b"g").unwrap_err().errno(), 17);
    assert_eq!(fs.link(None, d, ROOT, b"h").unwrap_err().errno(), 1);
    assert_eq!(fs.link(None, f, f, b"h").unwrap_err().errno(), 20);
    assert_eq!(fs.link(None, f, d, b"a/b").unwrap_err().errno(), 22);
    assert_eq!(fs.link(None, 40, d, b"h").unwrap_err().errno(), 2);
    // Aborted: the name and the count go back.
    let t = fs.tx_begin(&[]).unwrap();
    fs.link(Some(t), f, ROOT, b"h").unwrap();
    assert_eq!(fs.getattr(f).unwrap().nlink, 3);
    fs.tx_abort(t).unwrap();
    assert_eq!(fs.getattr(f).unwrap().nlink, 2);
    assert_eq!(fs.lookup(ROOT, b"h").unwrap_err().errno(), 2);
    fs.check_invariants().unwrap();
    // Durable, and one name's unlink keeps the file.
    let mut fs = crash(fs);
    fs.check_invariants().unwrap();
    assert_eq!(fs.getattr(f).unwrap().nlink, 2);
    fs.unlink(None, ROOT, b"f").unwrap();
    assert_eq!(fs.read(f, 0, 100).unwrap(), b"shared");
    assert_eq!(fs.getattr(f).unwrap().nlink, 1);
    // A rename over another name of the same file does nothing (rename(2)).
    fs.link(None, f, ROOT, b"f2").unwrap();
    fs.rename(None, ROOT, b"f2", d, b"g", RenameFlags::NONE)
        .unwrap();
    assert_eq!(fs.getattr(f).unwrap().nlink, 2);
    // Open, both names gone: an orphan, which link refuses (ENOENT), freed at release.
    fs.open(f).unwrap();
    fs.unlink(None, ROOT, b"f2").unwrap();
    fs.unlink(None, d, b"g").unwrap();
    assert_eq!(fs.getattr(f).unwrap().nlink, 0);
    assert_eq!(fs.link(None, f, ROOT, b"back").unwrap_err().errno(), 2);
    fs.release(None, f).unwrap();
    fs.rmdir(None, ROOT, b"d").unwrap();
    fs.check_invariants().unwrap();
    assert_all_freed(&mut fs, &before);
}

#[test]
fn rename_flags_noreplace_and_exchange() {
    let mut fs = fresh();
    let d = fs.mkdir(None, ROOT, b"d", 0o755, O).unwrap().ino;
    let e = fs.mkdir(None, d, b"e", 0o755, O).unwrap().ino;
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    let g = fs.create(None, d, b"g", 0o644, O).unwrap().ino;
    // Both flags together: EINVAL (the FUSE layer refuses unknown bits, RENAME_WHITEOUT
    // included: the flags' type has none).
    let both = RenameFlags {
        noreplace: true,
        exchange: true,
    };
    let err = fs.rename(None, ROOT, b"f", d, b"x", both).unwrap_err();
    assert_eq!(err.errno(), 22);
    let err = fs
        .rename(None, ROOT, b"f", d, b"g", RenameFlags::NOREPLACE)
        .unwrap_err();
    assert_eq!(err.errno(), 17);
    fs.rename(None, ROOT, b"f", d, b"f2", RenameFlags::NOREPLACE)
        .unwrap();
    assert_eq!(fs.lookup(d, b"f2").unwrap().ino, f);
    // Exchange needs both; a file and a directory in different parents swap, and the
    // parents' link counts follow the directory.
    let err = fs
        .rename(None, ROOT, b"nope", d, b"g", RenameFlags::EXCHANGE)
        .unwrap_err();
    assert_eq!(err.errno(), 2);
    let err = fs
        .rename(None, d, b"g", ROOT, b"nope", RenameFlags::EXCHANGE)
        .unwrap_err();
    assert_eq!(err.errno(), 2);
    let h = fs.create(None, ROOT, b"h", 0o644, O).unwrap().ino;
    let (root_links, d_links) = (
        fs.getattr(ROOT).unwrap().nlink,
        fs.getattr(d).unwrap().nlink,
    );
    fs.rename(None, ROOT, b"h", d, b"e", RenameFlags::EXCHANGE)
        .unwrap();
    assert_eq!(fs.lookup(ROOT, b"h").unwrap().ino, e);
    assert_eq!(fs.lookup(d, b"e").unwrap().ino, h);
    assert_eq!(fs.getattr(ROOT).unwrap().nlink, root_links + 1);
    assert_eq!(fs.getattr(d).unwrap().nlink, d_links - 1);
    // A directory cannot be swapped into itself.
    let err = fs
        .rename(None, ROOT, b"d", d, b"g", RenameFlags::EXCHANGE)
        .unwrap_err();
    assert_eq!(err.errno(), 22);
    fs.check_invariants().unwrap();
    // Inside an aborted transaction nothing stays; committed, it survives a crash.
    let t = fs.tx_begin(&[]).unwrap();
    fs.rename(Some(t), d, b"g", d, b"f2", RenameFlags::EXCHANGE)
        .unwrap();
    fs.tx_abort(t).unwrap();
    assert_eq!(fs.lookup(d, b"g").unwrap().ino, g);
    fs.rename(None, d, b"g", d, b"f2", RenameFlags::EXCHANGE)
        .unwrap();
    let fs = crash(fs);
    fs.check_invariants().unwrap();
    assert_eq!(fs.lookup(d, b"g").unwrap().ino, f);
    assert_eq!(fs.lookup(d, b"f2").unwrap().ino, g);
    assert_eq!(fs.lookup(ROOT, b"h").unwrap().ino, e);
    assert_eq!(fs.getattr(ROOT).unwrap().nlink, root_links + 1);
}

#[test]
fn readdir_cookies_stay_valid_across_creates_and_unlinks() {
    let mut fs = fresh();
    let name = |i: usize| format!("n{i:03}").into_bytes();
    for i in 0..40 {
        fs.create(None, ROOT, &name(i), 0o644, O).unwrap();
    }
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let mut cookie = 0;
    let mut round = 0;
    loop {
        let page = fs.readdir(ROOT, cookie, 7).unwrap();
        let Some(last) = page.last() else { break };
        assert!(last.cookie > cookie, "cookies advance");
        cookie = last.cookie;
        seen.extend(page.into_iter().map(|e| e.name));
        // Between pages: unlink two listed entries and one not yet listed (the highest),
        // create a new one (it takes a freed slot). A cookie that counted positions
        // would now skip an entry.
        for listed in [seen[seen.len() - 1].clone(), seen[seen.len() - 2].clone()] {
            if listed != name(39 - round) {
                let _ = fs.unlink(None, ROOT, &listed);
            }
        }
        let _ = fs.unlink(None, ROOT, &name(39 - round));
        fs.create(None, ROOT, format!("new{round}").as_bytes(), 0o644, O)
            .unwrap();
        round += 1;
    }
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        seen.len(),
        "an entry was listed twice: {seen:?}"
    );
    // Every entry that lived through the whole listing was listed.
    for i in 0..40 - round {
        let n = name(i);
        if fs.lookup(ROOT, &n).is_ok() {
            assert!(
                seen.contains(&n),
                "{:?} was skipped",
                String::from_utf8_lossy(&n)
            );
        }
    }
    assert_eq!(fs.readdir(ROOT, 0, 3).unwrap().len(), 3);
    assert!(fs.readdir(ROOT, u64::MAX, 3).unwrap().is_empty());
}

/// st_blocks counts blocks written since the last checkpoint too: a freshly written file
/// reports its blocks (GNU tar --sparse archives a file that reports 0 blocks as all holes,
/// i.e. as zeros, which the fs-apps tar workload caught on a pmem mount).
#[test]
fn written_blocks_count_before_a_checkpoint() {
    let mut fs = fresh();
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    fs.write(None, f, 0, &pattern(3 * 4096, 7)).unwrap();
    let before = fs.getattr(f).unwrap().blocks;
    assert_eq!(
        before,
        3 * 4096 / 512,
        "three written blocks, not yet checkpointed"
    );
    fs.checkpoint().unwrap();
    assert_eq!(
        fs.getattr(f).unwrap().blocks,
        before,
        "the same after a checkpoint"
    );
    // A hole stays a hole.
    fs.write(None, f, 10 * 4096, &pattern(100, 8)).unwrap();
    assert_eq!(fs.getattr(f).unwrap().blocks, before + 4096 / 512);
}

/// SEEK_DATA/SEEK_HOLE find written blocks and holes, before and after a checkpoint and
/// after a crash (GNU tar --sparse and cp use them; without them the kernel calls a pmem
/// file all data).
#[test]
fn seek_data_and_holes_follow_the_written_blocks() {
    let mut fs = fresh();
    let b = 4096u64;
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    fs.write(None, f, b, &pattern(2 * b as usize, 1)).unwrap();
    fs.write(None, f, 20 * b, &pattern(100, 2)).unwrap();
    let size = 20 * b + 100;
    let check = |fs: &PmemFs<PmemSim>, when: &str| {
        assert_eq!(fs.seek_data(f, 0, true).unwrap(), b, "{when}");
        assert_eq!(fs.seek_data(f, b, false).unwrap(), 3 * b, "{when}");
        assert_eq!(fs.seek_data(f, 3 * b, true).unwrap(), 20 * b, "{when}");
        assert_eq!(fs.seek_data(f, 20 * b, false).unwrap(), size, "{when}");
        assert_eq!(
            fs.seek_data(f, size, true).unwrap_err().errno(),
            6,
            "{when}"
        );
    };
    check(&fs, "before a checkpoint");
    fs.checkpoint().unwrap();
    check(&fs, "after a checkpoint");
    let fs = crash(fs);
    check(&fs, "after a crash");
}

/// O_TMPFILE: a nameless file, open once, freed at its last release or reclaimed at mount
/// after a crash; linked (linkat through /proc/self/fd), it is an ordinary file that a
/// crash keeps. A file unlinked while open may not be linked again (the kernel never asks).
#[test]
fn tmpfiles_live_nameless_until_linked_or_released() {
    let (mut fs, before) = fresh_counted();
    let t = fs.tmpfile(None, ROOT, 0o600, O).unwrap();
    assert_eq!((t.nlink, fs.open_count(t.ino)), (0, 1));
    assert!(fs.readdir(ROOT, 0, usize::MAX).unwrap().is_empty());
    fs.write(None, t.ino, 0, b"scratch").unwrap();
    fs.check_invariants().unwrap();
    fs.release(None, t.ino).unwrap();
    assert_eq!(fs.getattr(t.ino).unwrap_err().errno(), 2);
    assert_eq!(fs.statfs().free_files, before.free_files);

    // Crashed while open: mount reclaims it.
    let t = fs.tmpfile(None, ROOT, 0o600, O).unwrap().ino;
    fs.write(None, t, 0, &pattern(10_000, 5)).unwrap();
    let (mut fs, rep) =
        PmemFs::mount(PmemSim::from_image(fs.into_device().persistent().to_vec()).unwrap())
            .unwrap();
    assert_eq!(rep.orphans_freed, 1, "{rep:?}");
    assert_eq!(fs.statfs().free_files, before.free_files);

    // Written, then linked: a crash keeps it under its name.
    let t = fs.tmpfile(None, ROOT, 0o600, O).unwrap().ino;
    fs.write(None, t, 0, b"complete").unwrap();
    assert_eq!(fs.link(None, t, ROOT, b"kept").unwrap().nlink, 1);
    fs.release(None, t).unwrap();
    let mut fs = crash(fs);
    let a = fs.lookup(ROOT, b"kept").unwrap();
    assert_eq!(fs.read(a.ino, 0, 100).unwrap(), b"complete");

    // An ordinary file unlinked while open cannot be linked back.
    let g = fs.create(None, ROOT, b"g", 0o644, O).unwrap().ino;
    fs.open(g).unwrap();
    fs.unlink(None, ROOT, b"g").unwrap();
    assert_eq!(fs.link(None, g, ROOT, b"g2").unwrap_err().errno(), 2);
    fs.check_invariants().unwrap();
}

/// Extended attributes (format 4): set, replace, list, remove, the create/replace flags,
/// one block per inode (ENOSPC beyond), all-or-nothing with a transaction, kept by a crash
/// after the call, and their block freed with the inode.
#[test]
fn extended_attributes_are_atomic_and_durable() {
    let (mut fs, before) = fresh_counted();
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    fs.setxattr(None, f, b"user.a", b"1", XattrMode::Any)
        .unwrap();
    fs.setxattr(None, f, b"user.big", &pattern(4000, 9), XattrMode::Any)
        .unwrap();
    assert_eq!(fs.getxattr(f, b"user.a").unwrap(), b"1");
    let err = |r: Result<(), PmemFsError>| r.unwrap_err().errno();
    assert_eq!(
        err(fs.setxattr(None, f, b"user.a", b"2", XattrMode::Create)),
        17
    );
    assert_eq!(
        err(fs.setxattr(None, f, b"user.z", b"2", XattrMode::Replace)),
        61
    );
    assert_eq!(err(fs.removexattr(None, f, b"user.z")), 61);
    // Names and values share one block.
    assert_eq!(
        err(fs.setxattr(None, f, b"user.c", &[0; 200], XattrMode::Any)),
        28
    );
    assert_eq!(fs.getxattr(f, b"user.c").unwrap_err().errno(), 61);
    fs.setxattr(None, f, b"user.a", b"replaced", XattrMode::Replace)
        .unwrap();
    // A transaction's attribute changes go with its abort.
    let t = fs.tx_begin(&[f]).unwrap();
    fs.setxattr(Some(t), f, b"user.t", b"in tx", XattrMode::Any)
        .unwrap();
    fs.removexattr(Some(t), f, b"user.big").unwrap();
    fs.tx_abort(t).unwrap();
    let mut fs = crash(fs);
    assert_eq!(
        fs.listxattr(f).unwrap(),
        vec![b"user.a".to_vec(), b"user.big".to_vec()]
    );
    assert_eq!(fs.getxattr(f, b"user.a").unwrap(), b"replaced");
    assert_eq!(fs.getxattr(f, b"user.big").unwrap(), pattern(4000, 9));
    fs.check_invariants().unwrap();
    // Every attribute removed: no block left; the inode's end frees its block too.
    fs.removexattr(None, f, b"user.big").unwrap();
    fs.removexattr(None, f, b"user.a").unwrap();
    assert!(fs.listxattr(f).unwrap().is_empty());
    fs.setxattr(None, f, b"user.a", b"again", XattrMode::Any)
        .unwrap();
    fs.unlink(None, ROOT, b"f").unwrap();
    fs.checkpoint().unwrap();
    assert_eq!(fs.statfs().free_blocks, before.free_blocks);
    assert_eq!(fs.statfs().free_files, before.free_files);
    fs.check_invariants().unwrap();
}

/// fallocate: mode 0 maps zeroed blocks and grows the size, KEEP_SIZE maps blocks past the
/// end (mount accepts them; a later grow reads zeros there), a punch unmaps whole blocks and
/// zeroes partial ones; all go with an abort, stay after a crash, and free space adds up.
#[test]
fn fallocate_allocates_keeps_size_and_punches() {
    let (mut fs, before) = fresh_counted();
    let b = intactfs_pmem::BLOCK;
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    fs.write(None, f, 0, b"abc").unwrap();
    assert_eq!(fs.fallocate(None, f, 0, 0, false).unwrap_err().errno(), 22);
    // Mode 0 past the triple-indirect start: indirect blocks are made on the way.
    fs.fallocate(None, f, 0, 20 * b, false).unwrap();
    assert_eq!(fs.getattr(f).unwrap().size, 20 * b);
    assert_eq!(fs.read(f, 0, 5).unwrap(), b"abc\0\0");
    let free = fs.statfs().free_blocks;
    assert!(
        free + 21 <= before.free_blocks,
        "20 data blocks and an indirect one"
    );
    // KEEP_SIZE past the end: the size stays, the blocks count.
    fs.fallocate(None, f, 30 * b, 4 * b, true).unwrap();
    assert_eq!(fs.getattr(f).unwrap().size, 20 * b);
    assert_eq!(fs.statfs().free_blocks, free - 4);
    assert_eq!(fs.getattr(f).unwrap().blocks * 512, 25 * b);
    // An aborted fallocate leaves nothing.
    let t = fs.tx_begin(&[f]).unwrap();
    fs.fallocate(Some(t), f, 100 * b, 3 * b, false).unwrap();
    fs.tx_abort(t).unwrap();
    assert_eq!(fs.getattr(f).unwrap().size, 20 * b);
    assert_eq!(fs.statfs().free_blocks, free - 4);
    fs.check_invariants().unwrap();
    // Punch: a partial block, two whole ones, a partial one.
    let data = pattern(6 * b as usize, 3);
    fs.write(None, f, 0, &data).unwrap();
    fs.punch_hole(None, f, b / 2, 3 * b).unwrap();
    let got = fs.read(f, 0, 6 * b as usize).unwrap();
    let (lo, hi) = ((b / 2) as usize, (b / 2 + 3 * b) as usize);
    assert!(got[lo..hi].iter().all(|&x| x == 0));
    assert_eq!(got[..lo], data[..lo]);
    assert_eq!(got[hi..], data[hi..]);
    assert_eq!(fs.getattr(f).unwrap().size, 20 * b);
    fs.check_invariants().unwrap();
    let mut fs = crash(fs);
    fs.check_invariants().unwrap();
    assert_eq!(fs.read(f, 0, 6 * b as usize).unwrap(), got);
    // Growing over the blocks KEEP_SIZE mapped reads zeros; punching them frees them.
    fs.truncate(None, f, 40 * b).unwrap();
    assert!(fs
        .read(f, 30 * b, 4 * b as usize)
        .unwrap()
        .iter()
        .all(|&x| x == 0));
    fs.punch_hole(None, f, 0, 64 * b).unwrap();
    assert!(fs
        .read(f, 0, 40 * b as usize)
        .unwrap()
        .iter()
        .all(|&x| x == 0));
    fs.unlink(None, ROOT, b"f").unwrap();
    fs.checkpoint().unwrap();
    assert_eq!(fs.statfs().free_blocks, before.free_blocks);
    fs.check_invariants().unwrap();
}

/// rmdir (or rename over) an open empty directory leaves an orphan: getattr shows link count
/// 0, readdir lists nothing, no entry can be made in it (ENOENT), the parent loses its
/// link; the last release frees it, an abort gives the name back, and mount frees one a
/// crash left.
#[test]
fn open_directories_removed_live_until_their_last_release() {
    let (mut fs, before) = fresh_counted();
    let d = fs.mkdir(None, ROOT, b"d", 0o755, O).unwrap().ino;
    fs.open(d).unwrap();
    fs.rmdir(None, ROOT, b"d").unwrap();
    let a = fs.getattr(d).unwrap();
    assert_eq!((a.kind, a.nlink), (FileType::Dir, 0));
    assert_eq!(fs.getattr(ROOT).unwrap().nlink, 2);
    assert!(fs.readdir(d, 0, usize::MAX).unwrap().is_empty());
    assert_eq!(fs.lookup(ROOT, b"d").unwrap_err().errno(), 2);
    let enoent = |r: Result<intactfs_pmem::Attr, PmemFsError>| r.unwrap_err().errno();
    assert_eq!(enoent(fs.create(None, d, b"new", 0o644, O)), 2);
    assert_eq!(enoent(fs.mkdir(None, d, b"new", 0o755, O)), 2);
    assert_eq!(enoent(fs.tmpfile(None, d, 0o600, O)), 2);
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    assert_eq!(enoent(fs.link(None, f, d, b"f2")), 2);
    assert_eq!(
        fs.rename(None, ROOT, b"f", d, b"f", RenameFlags::NONE)
            .unwrap_err()
            .errno(),
        2
    );
    fs.setattr(
        None,
        d,
        SetAttr {
            mode: Some(0o700),
            ..Default::default()
        },
    )
    .unwrap();
    fs.check_invariants().unwrap();
    fs.release(None, d).unwrap();
    assert_eq!(fs.getattr(d).unwrap_err().errno(), 2);
    fs.check_invariants().unwrap();
    // In a transaction: an abort gives the name back; replaced by rename, it stays too.
    let e = fs.mkdir(None, ROOT, b"e", 0o755, O).unwrap().ino;
    fs.open(e).unwrap();
    let t = fs.tx_begin(&[ROOT]).unwrap();
    fs.rmdir(Some(t), ROOT, b"e").unwrap();
    fs.release(None, e).unwrap();
    fs.tx_abort(t).unwrap();
    assert_eq!(fs.lookup(ROOT, b"e").unwrap().nlink, 2);
    fs.open(e).unwrap();
    fs.mkdir(None, ROOT, b"g", 0o755, O).unwrap();
    fs.rename(None, ROOT, b"g", ROOT, b"e", RenameFlags::NONE)
        .unwrap();
    assert_eq!(fs.getattr(e).unwrap().nlink, 0);
    assert_eq!(fs.getattr(ROOT).unwrap().nlink, 3);
    fs.check_invariants().unwrap();
    // A crash closes it: mount frees it.
    let mut fs = crash(fs);
    assert_eq!(fs.getattr(e).unwrap_err().errno(), 2);
    fs.check_invariants().unwrap();
    fs.rmdir(None, ROOT, b"e").unwrap();
    fs.unlink(None, ROOT, b"f").unwrap();
    assert_all_freed(&mut fs, &before);
}

/// Format 5 keeps every time exactly: before 1970, at 2^31 and 2^32 seconds, in 2400 and
/// at the ends of an i64 of seconds, across a crash; nanoseconds past 10^9 are EINVAL.
#[test]
fn times_before_1970_and_past_2262_are_kept_exactly() {
    let mut fs = fresh();
    let f = fs.create(None, ROOT, b"f", 0o644, O).unwrap().ino;
    let t = |sec: i64, nsec: u32| intactfs_pmem::Time { sec, nsec };
    let times = [
        t(0, 0),
        t(-2, 500_000_000),
        t(-1, 999_999_999),
        t(-(1 << 31), 0),
        t((1 << 31) + 10, 5),
        t((1 << 32) + 7, 11),
        t(13_569_465_600, 123),
        t(i64::MAX, 999_999_999),
        t(i64::MIN, 0),
    ];
    for (k, &at) in times.iter().enumerate() {
        let mt = times[times.len() - 1 - k];
        let sa = SetAttr {
            atime: Some(at),
            mtime: Some(mt),
            ..Default::default()
        };
        fs.setattr(None, f, sa).unwrap();
        fs = crash(fs);
        let a = fs.getattr(f).unwrap();
        assert_eq!((a.atime, a.mtime), (at, mt));
    }
    let bad = SetAttr {
        mtime: Some(t(5, 1_000_000_000)),
        ..Default::default()
    };
    assert_eq!(fs.setattr(None, f, bad).unwrap_err().errno(), 22);
    fs.check_invariants().unwrap();
}
