//! Atomic regions (CFS `003` §4), call by call: no steal, commit all or nothing, abort
//! leaves nothing, legacy work kept apart. The crash behaviour over every image is proven
//! by `intactfs-sim` (`--regions`).

use intactfs::fsck::fsck;
use intactfs::prelude::*;
use intactfs::{mkfs, Fs, FsError, MkfsOptions, MountOptions, Owner, BLOCK, ROOT};
use intactfs_device::SimDevice;
use std::collections::BTreeSet;

const O: Owner = Owner { uid: 0, gid: 0 };

fn fresh() -> Fs<SimDevice> {
    let mut dev = SimDevice::new(BLOCK, 2048).unwrap();
    mkfs(
        &mut dev,
        &MkfsOptions {
            uuid: 11,
            ..Default::default()
        },
    )
    .unwrap();
    Fs::mount(dev, MountOptions::default()).unwrap().0
}

fn content(fs: &mut Fs<SimDevice>, name: &str) -> Option<Vec<u8>> {
    let a = fs.lookup(ROOT, name.as_bytes()).ok()?;
    Some(fs.read(a.ino, 0, a.size as usize).unwrap())
}

/// Every image a crash could leave now, recovered: the contents of `names`.
fn recovered(fs: &Fs<SimDevice>, names: &[&str]) -> BTreeSet<Vec<Option<Vec<u8>>>> {
    let imgs = fs
        .device()
        .all_images(1 << 14)
        .expect("few enough unflushed writes");
    imgs.into_iter()
        .map(|img| {
            let mut d = SimDevice::from_image(BLOCK, img).unwrap();
            assert!(fsck(&mut d, true).clean());
            let mut fs = Fs::mount(d, MountOptions::default()).unwrap().0;
            names.iter().map(|n| content(&mut fs, n)).collect()
        })
        .collect()
}

#[test]
fn a_region_commits_as_one_and_nothing_commits_it_early() {
    let mut fs = fresh();
    let a = fs.create(0, ROOT, b"a", 0o644, O).unwrap().ino;
    let b = fs.create(0, ROOT, b"b", 0o644, O).unwrap().ino;
    fs.write(0, a, 0, b"old-a").unwrap();
    fs.write(0, b, 0, b"old-b").unwrap();
    fs.sync().unwrap();
    let r = fs.region_begin().unwrap();
    assert!(fs.is_region(r));
    fs.write(r, a, 0, b"new-a").unwrap();
    fs.fsync(r, a, false).unwrap(); // inside a region: returns, commits nothing
    fs.write(r, b, 0, b"new-b").unwrap();
    let c = fs.create(r, ROOT, b"c", 0o644, O).unwrap().ino;
    fs.write(r, c, 0, b"new-c").unwrap();
    // Legacy commits of every kind skip the region.
    fs.sync().unwrap();
    fs.fsync(0, a, false).unwrap();
    fs.streamsync(r).unwrap();
    assert_eq!(
        content(&mut fs, "a").unwrap(),
        b"new-a",
        "the region's own view"
    );
    let durable = vec![Some(b"old-a".to_vec()), Some(b"old-b".to_vec()), None];
    assert_eq!(
        recovered(&fs, &["a", "b", "c"]),
        [durable.clone()].into_iter().collect()
    );
    let flushes = fs.stats().flushes;
    fs.region_commit(r).unwrap();
    assert_eq!(fs.stats().flushes, flushes + 1, "one flush per region");
    assert!(!fs.is_region(r));
    let new = vec![
        Some(b"new-a".to_vec()),
        Some(b"new-b".to_vec()),
        Some(b"new-c".to_vec()),
    ];
    assert_eq!(
        recovered(&fs, &["a", "b", "c"]),
        [new].into_iter().collect()
    );
    assert_eq!(fs.stats().regions_committed, 1);
}

#[test]
fn abort_leaves_nothing_and_keeps_everyone_elses_work() {
    let mut fs = fresh();
    let a = fs.create(0, ROOT, b"a", 0o644, O).unwrap().ino;
    fs.write(0, a, 0, b"committed").unwrap();
    fs.sync().unwrap();
    let free0 = fs.statfs().free_blocks;
    // Another stream's uncommitted work, before and during the region.
    let l = fs.create(5, ROOT, b"legacy", 0o644, O).unwrap().ino;
    fs.write(5, l, 0, &[7u8; 3 * BLOCK]).unwrap();
    let r = fs.region_begin().unwrap();
    fs.write(r, a, 0, &[1u8; 2 * BLOCK]).unwrap();
    fs.truncate(r, a, 100).unwrap();
    fs.mkdir(r, ROOT, b"dir", 0o755, O).unwrap();
    fs.create(r, ROOT, b"tmp", 0o644, O).unwrap();
    fs.rename(r, ROOT, b"tmp", ROOT, b"renamed", Default::default())
        .unwrap();
    fs.unlink(r, ROOT, b"renamed").unwrap();
    fs.write(5, l, 3 * BLOCK as u64, b"tail").unwrap();
    fs.region_abort(r).unwrap();
    assert!(!fs.is_region(r));
    assert_eq!(content(&mut fs, "a").unwrap(), b"committed");
    assert!(fs.lookup(ROOT, b"dir").is_err() && fs.lookup(ROOT, b"renamed").is_err());
    let mut want = vec![7u8; 3 * BLOCK];
    want.extend_from_slice(b"tail");
    assert_eq!(
        content(&mut fs, "legacy").unwrap(),
        want,
        "the other stream's work stays"
    );
    fs.sync().unwrap();
    let fs2 = Fs::mount(fs.unmount().unwrap(), MountOptions::default())
        .unwrap()
        .0;
    let mut fs = fs2;
    assert_eq!(content(&mut fs, "a").unwrap(), b"committed");
    assert_eq!(content(&mut fs, "legacy").unwrap(), want);
    assert_eq!(
        fs.statfs().free_blocks,
        free0 - 4,
        "the region left no block behind"
    );
    let _ = l;
}

#[test]
fn legacy_work_on_a_regions_file_commits_first() {
    let mut fs = fresh();
    let a = fs.create(0, ROOT, b"a", 0o644, O).unwrap().ino;
    fs.sync().unwrap();
    fs.write(0, a, 0, b"legacy").unwrap(); // uncommitted, init stream
    let r = fs.region_begin().unwrap();
    fs.write(r, a, 6, b"+region").unwrap();
    fs.region_abort(r).unwrap();
    // The legacy write was committed before the region touched the file: it survives the
    // abort, and a crash (after a flush).
    assert_eq!(content(&mut fs, "a").unwrap(), b"legacy");
    fs.flush().unwrap();
    assert_eq!(
        recovered(&fs, &["a"]),
        [vec![Some(b"legacy".to_vec())]].into_iter().collect()
    );
}

#[test]
fn others_that_depend_on_a_region_join_it_and_two_regions_do_not_share() {
    let mut fs = fresh();
    let r = fs.region_begin().unwrap();
    let f = fs.create(r, ROOT, b"f", 0o644, O).unwrap().ino;
    // Another stream writes the file the region created: that write is the region's.
    fs.write(3, f, 0, b"outsider").unwrap();
    let r2 = fs.region_begin().unwrap();
    assert!(matches!(fs.write(r2, f, 0, b"x"), Err(FsError::Busy(_))));
    fs.sync().unwrap();
    assert_eq!(recovered(&fs, &["f"]), [vec![None]].into_iter().collect());
    fs.region_abort(r).unwrap();
    assert!(fs.lookup(ROOT, b"f").is_err());
    fs.region_commit(r2).unwrap();
    assert!(
        matches!(fs.region_commit(r), Err(FsError::Invalid(_))),
        "committing a closed region"
    );
    assert!(matches!(fs.region_abort(r2), Err(FsError::Invalid(_))));
}

#[test]
fn an_added_file_takes_every_write() {
    let mut fs = fresh();
    let a = fs.create(0, ROOT, b"a", 0o644, O).unwrap().ino;
    fs.sync().unwrap();
    let r = fs.region_begin().unwrap();
    fs.region_add(r, a).unwrap();
    assert_eq!(fs.region_of_file(a), Some(r));
    // As mmap write-back arrives: from no particular stream.
    fs.write(0, a, 0, b"mapped").unwrap();
    fs.sync().unwrap();
    assert_eq!(
        recovered(&fs, &["a"]),
        [vec![Some(Vec::new())]].into_iter().collect()
    );
    fs.region_commit(r).unwrap();
    assert_eq!(fs.region_of_file(a), None);
    assert_eq!(
        recovered(&fs, &["a"]),
        [vec![Some(b"mapped".to_vec())]].into_iter().collect()
    );
}

#[test]
fn a_region_larger_than_its_limit_is_refused() {
    let mut dev = SimDevice::new(BLOCK, 2048).unwrap();
    mkfs(
        &mut dev,
        &MkfsOptions {
            uuid: 11,
            ..Default::default()
        },
    )
    .unwrap();
    let mut fs = Fs::mount(
        dev,
        MountOptions {
            region_limit: 4 * BLOCK as u64,
            ..Default::default()
        },
    )
    .unwrap()
    .0;
    let a = fs.create(0, ROOT, b"a", 0o644, O).unwrap().ino;
    let r = fs.region_begin().unwrap();
    fs.write(r, a, 0, &[1u8; 5 * BLOCK]).unwrap();
    let e = fs.write(r, a, 5 * BLOCK as u64, b"more").unwrap_err();
    assert!(
        matches!(e, FsError::NoSpace(ref m) if m.contains("region_limit")),
        "{e}"
    );
    fs.region_abort(r).unwrap();
}

/// Found by the simulation (seed 100825 of `--regions`): a region renamed a file that
/// another stream had uncommitted writes to; the abort kept the file's ctime from the
/// region's rename, and the other stream's commit then left live and durable different.
#[test]
fn abort_undoes_what_the_region_did_to_another_streams_dirty_file() {
    let mut fs = fresh();
    let a = fs.create(0, ROOT, b"a", 0o644, O).unwrap().ino;
    fs.sync().unwrap();
    fs.write(5, a, 0, b"other stream").unwrap();
    fs.fallocate(5, a, 0, 3 * BLOCK as u64, true).unwrap();
    let before = fs.getattr(a).unwrap();
    let r = fs.region_begin().unwrap();
    fs.rename(r, ROOT, b"a", ROOT, b"b", Default::default())
        .unwrap();
    assert_ne!(
        fs.getattr(a).unwrap().ctime,
        before.ctime,
        "a rename changes the file's ctime"
    );
    fs.region_abort(r).unwrap();
    let after = fs.getattr(a).unwrap();
    assert_eq!(
        (after.size, after.mtime, after.ctime),
        (before.size, before.mtime, before.ctime)
    );
    assert!(fs.lookup(ROOT, b"a").is_ok() && fs.lookup(ROOT, b"b").is_err());
    fs.write(5, a, 100, b"+").unwrap();
    fs.sync().unwrap();
    assert_eq!(
        fs.durable_meta(),
        fs.live_meta(),
        "after sync, durable and live agree"
    );
}
