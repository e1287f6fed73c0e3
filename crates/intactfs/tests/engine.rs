//! The engine's POSIX and stream semantics, call by call (the crash behaviour is proven by
//! `intactfs-sim`; the on-disk format's robustness by `hostile.rs`).

use intactfs::fsck::fsck;
use intactfs::prelude::*;
use intactfs::{
    mkfs, FileType, Fs, FsError, MkfsOptions, MountOptions, Owner, RenameFlags, SetAttr,
    StreamFlags, Time, XattrMode, BLOCK, ROOT,
};
use intactfs_device::{FileDevice, SimDevice};

const O: Owner = Owner {
    uid: 1000,
    gid: 100,
};

fn fresh(blocks: u64) -> Fs<SimDevice> {
    let mut dev = SimDevice::new(BLOCK, blocks).unwrap();
    mkfs(
        &mut dev,
        &MkfsOptions {
            uuid: 7,
            ..Default::default()
        },
    )
    .unwrap();
    Fs::mount(dev, MountOptions::default()).unwrap().0
}

fn remount(fs: Fs<SimDevice>) -> Fs<SimDevice> {
    let dev = fs.unmount().unwrap();
    Fs::mount(dev, MountOptions::default()).unwrap().0
}

fn file(fs: &mut Fs<SimDevice>, parent: u64, name: &str) -> u64 {
    fs.create(0, parent, name.as_bytes(), 0o644, O).unwrap().ino
}

#[test]
fn namespace_operations_and_their_errors() {
    let mut fs = fresh(1024);
    let d = fs.mkdir(0, ROOT, b"d", 0o750, O).unwrap();
    assert_eq!(
        (d.kind, d.mode, d.uid, d.gid, d.nlink),
        (FileType::Dir, 0o750, 1000, 100, 2)
    );
    assert_eq!(fs.getattr(ROOT).unwrap().nlink, 3);
    let f = file(&mut fs, d.ino, "f");
    assert!(matches!(
        fs.create(0, d.ino, b"f", 0o644, O),
        Err(FsError::Exists(_))
    ));
    assert!(matches!(
        fs.lookup(d.ino, b"nope"),
        Err(FsError::NotFound(_))
    ));
    assert!(matches!(fs.lookup(f, b"x"), Err(FsError::NotDir(_))));
    assert!(matches!(
        fs.create(0, ROOT, &[b'a'; 256], 0o644, O),
        Err(FsError::NameTooLong(_))
    ));
    assert!(matches!(
        fs.create(0, ROOT, b"a/b", 0o644, O),
        Err(FsError::Invalid(_))
    ));
    assert!(matches!(fs.rmdir(0, ROOT, b"d"), Err(FsError::NotEmpty(_))));
    assert!(matches!(fs.unlink(0, ROOT, b"d"), Err(FsError::IsDir(_))));
    assert!(matches!(fs.rmdir(0, d.ino, b"f"), Err(FsError::NotDir(_))));
    // Hard links and symlinks.
    fs.link(0, f, ROOT, b"g").unwrap();
    assert_eq!(fs.getattr(f).unwrap().nlink, 2);
    assert!(matches!(
        fs.link(0, d.ino, ROOT, b"dd"),
        Err(FsError::NotPermitted(_))
    ));
    let l = fs.symlink(0, ROOT, b"l", b"d/f", O).unwrap();
    assert_eq!((l.kind, l.size), (FileType::Symlink, 3));
    assert_eq!(fs.readlink(l.ino).unwrap(), b"d/f");
    // Rename: NOREPLACE, EXCHANGE, over an existing file, a directory into itself.
    let h = file(&mut fs, ROOT, "h");
    assert!(matches!(
        fs.rename(
            0,
            ROOT,
            b"h",
            ROOT,
            b"g",
            RenameFlags {
                noreplace: true,
                ..Default::default()
            }
        ),
        Err(FsError::Exists(_))
    ));
    fs.rename(
        0,
        ROOT,
        b"h",
        d.ino,
        b"f",
        RenameFlags {
            exchange: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(fs.lookup(ROOT, b"h").unwrap().ino, f);
    assert_eq!(fs.lookup(d.ino, b"f").unwrap().ino, h);
    fs.rename(0, ROOT, b"h", ROOT, b"g", RenameFlags::default())
        .unwrap(); // two links of one file: nothing happens
    assert_eq!(fs.lookup(ROOT, b"g").unwrap().ino, f);
    fs.rename(0, d.ino, b"f", ROOT, b"g", RenameFlags::default())
        .unwrap(); // replaces one link of f
    assert_eq!(fs.getattr(f).unwrap().nlink, 1);
    assert!(matches!(
        fs.rename(0, ROOT, b"d", d.ino, b"x", RenameFlags::default()),
        Err(FsError::Invalid(_))
    ));
    assert!(matches!(
        fs.rename(
            0,
            ROOT,
            b"nope",
            ROOT,
            b"x",
            RenameFlags {
                exchange: true,
                ..Default::default()
            }
        ),
        Err(FsError::NotFound(_))
    ));
    // Attributes.
    let t = Time {
        sec: 12345,
        nsec: 6,
    };
    let a = fs
        .setattr(
            0,
            f,
            SetAttr {
                mode: Some(0o600),
                uid: Some(5),
                gid: Some(6),
                atime: Some(t),
                mtime: Some(t),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(
        (a.mode, a.uid, a.gid, a.atime, a.mtime),
        (0o600, 5, 6, t, t)
    );
    // Everything survives an unmount, and fsck is clean.
    let names = |fs: &Fs<SimDevice>| {
        fs.readdir(ROOT, 0, 100)
            .unwrap()
            .into_iter()
            .map(|e| String::from_utf8(e.name).unwrap())
            .collect::<std::collections::BTreeSet<_>>()
    };
    let before = names(&fs);
    let fs = remount(fs);
    assert_eq!(names(&fs), before);
    assert_eq!(fs.getattr(f).unwrap().mtime, t);
    let mut dev = fs.unmount().unwrap();
    assert!(fsck(&mut dev, true).clean());
}

#[test]
fn data_holes_truncate_and_fallocate() {
    let mut fs = fresh(2048);
    let f = file(&mut fs, ROOT, "f");
    fs.write(0, f, 10, b"hello").unwrap();
    assert_eq!(
        fs.read(f, 0, 100).unwrap(),
        [&[0u8; 10][..], b"hello"].concat()
    );
    // A sparse file of several GiB: one block allocated, the rest reads as zeros.
    let far = 5u64 << 30;
    fs.write(0, f, far, b"end").unwrap();
    fs.sync().unwrap();
    let a = fs.getattr(f).unwrap();
    assert_eq!(a.size, far + 3);
    assert_eq!(a.blocks, 2 * (BLOCK as u64 / 512));
    assert_eq!(fs.read(f, far - 2, 10).unwrap(), b"\0\0end");
    // Truncating inside a block zeroes its tail for when the file grows again.
    fs.truncate(0, f, 12).unwrap();
    fs.truncate(0, f, 20).unwrap();
    assert_eq!(
        fs.read(f, 0, 100).unwrap(),
        [&[0u8; 10][..], b"he", &[0u8; 8][..]].concat()
    );
    // fallocate: default mode grows the file, KEEP_SIZE only reserves.
    fs.fallocate(0, f, 0, 3 * BLOCK as u64, true).unwrap();
    assert_eq!(fs.getattr(f).unwrap().size, 20);
    fs.sync().unwrap();
    assert_eq!(fs.getattr(f).unwrap().blocks, 3 * (BLOCK as u64 / 512));
    fs.fallocate(0, f, 0, 5 * BLOCK as u64, false).unwrap();
    assert_eq!(fs.getattr(f).unwrap().size, 5 * BLOCK as u64);
    let mut fs = remount(fs);
    assert_eq!(
        fs.read(f, 0, 20).unwrap(),
        [&[0u8; 10][..], b"he", &[0u8; 8][..]].concat()
    );
    assert_eq!(
        fs.read(f, 4 * BLOCK as u64, BLOCK).unwrap(),
        vec![0u8; BLOCK]
    );
    assert_eq!(fs.getattr(f).unwrap().blocks, 5 * (BLOCK as u64 / 512));
    let mut dev = fs.unmount().unwrap();
    assert!(fsck(&mut dev, true).clean());
}

#[test]
fn statfs_and_running_out_of_space() {
    let mut fs = fresh(256);
    let s0 = fs.statfs();
    assert!(s0.free_blocks > 100 && s0.free_blocks < s0.blocks, "{s0:?}");
    let f = file(&mut fs, ROOT, "big");
    let chunk = vec![7u8; 16 * BLOCK];
    let mut off = 0u64;
    let err = loop {
        match fs.write(0, f, off, &chunk) {
            Ok(_) => off += chunk.len() as u64,
            Err(e) => break e,
        }
    };
    assert!(matches!(err, FsError::NoSpace(_)), "{err}");
    // Whatever was accepted commits: space was reserved at write time.
    fs.sync().unwrap();
    assert!(fs.statfs().free_blocks < 16);
    // An unlink's space is free at once (statfs), before the unlink commits...
    fs.unlink(0, ROOT, b"big").unwrap();
    let freed = fs.statfs();
    assert!(
        freed.free_blocks + 2 >= s0.free_blocks,
        "{freed:?} vs {s0:?}"
    );
    // ...and a write that needs it commits the unlink instead of failing.
    let g = file(&mut fs, ROOT, "again");
    fs.write(0, g, 0, &vec![9u8; (off as usize).min(32 * BLOCK)])
        .unwrap();
    fs.sync().unwrap();
    fs.unlink(0, ROOT, b"again").unwrap();
    fs.sync().unwrap();
    assert!(
        fs.statfs().free_blocks + 2 >= s0.free_blocks,
        "{:?} vs {s0:?}",
        fs.statfs()
    );
    let mut dev = fs.unmount().unwrap();
    assert!(fsck(&mut dev, true).clean());
}

#[test]
fn has_uncommitted_until_committed() {
    let mut fs = fresh(256);
    assert!(!fs.has_uncommitted());
    let f = file(&mut fs, ROOT, "f");
    assert!(fs.has_uncommitted(), "a create");
    fs.sync().unwrap();
    assert!(!fs.has_uncommitted());
    fs.write(3, f, 0, b"data").unwrap();
    assert!(fs.has_uncommitted(), "a write in another stream");
    fs.fsync(3, f, false).unwrap();
    assert!(!fs.has_uncommitted());
    fs.fallocate(0, f, 0, 64 << 10, true).unwrap();
    assert!(fs.has_uncommitted(), "a preallocation");
    fs.sync().unwrap();
    assert!(!fs.has_uncommitted());
}

#[test]
fn a_full_file_system_reuses_space_freed_by_uncommitted_calls() {
    let mut fs = fresh(256);
    let f = file(&mut fs, ROOT, "old");
    let chunk = vec![3u8; 8 * BLOCK];
    let mut off = 0u64;
    while fs.write(0, f, off, &chunk).is_ok() {
        off += chunk.len() as u64;
    }
    fs.sync().unwrap();
    let full = fs.statfs().free_blocks;
    // Truncate (not yet committed) releases the old blocks: statfs sees them, and a
    // rewrite of the same size succeeds by committing the truncate first.
    fs.truncate(0, f, 0).unwrap();
    assert!(
        fs.statfs().free_blocks >= full + off / BLOCK as u64 - 2,
        "{:?}",
        fs.statfs()
    );
    let mut pos = 0u64;
    while pos < off {
        fs.write(0, f, pos, &chunk).unwrap();
        pos += chunk.len() as u64;
    }
    // fallocate takes the same path.
    let h = file(&mut fs, ROOT, "h");
    fs.sync().unwrap();
    fs.unlink(0, ROOT, b"old").unwrap();
    fs.fallocate(0, h, 0, off, false).unwrap();
    fs.sync().unwrap();
    assert_eq!(fs.getattr(h).unwrap().size, off);
    let mut dev = fs.unmount().unwrap();
    assert!(fsck(&mut dev, true).clean());
}

#[test]
fn unrelated_streams_commit_independently() {
    let mut fs = fresh(8192);
    let a = file(&mut fs, ROOT, "a");
    let b = file(&mut fs, ROOT, "b");
    fs.sync().unwrap();
    fs.write(1, a, 0, &vec![1u8; 4 << 20]).unwrap();
    fs.write(2, b, 0, b"x").unwrap();
    let before = fs.stats();
    fs.fsync(2, b, false).unwrap();
    let d = fs.stats().bytes_written() - before.bytes_written();
    assert!(d < 64 << 10, "B's fsync wrote {d} bytes");
    // A's data is still only in memory: a crash now loses it but keeps B.
    let dev = fs.into_device();
    let mut img = SimDevice::from_image(BLOCK, dev.durable().to_vec()).unwrap();
    assert!(fsck(&mut img, true).clean());
    let (mut fs, _) = Fs::mount(img, MountOptions::default()).unwrap();
    assert_eq!(fs.getattr(a).unwrap().size, 0);
    assert_eq!(fs.read(b, 0, 10).unwrap(), b"x");
}

#[test]
fn one_stream_has_write_dependence() {
    let mut fs = fresh(8192);
    let a = file(&mut fs, ROOT, "a");
    let b = file(&mut fs, ROOT, "b");
    fs.sync().unwrap();
    fs.write(1, a, 0, &vec![1u8; 4 << 20]).unwrap();
    fs.write(1, b, 0, b"x").unwrap();
    let before = fs.stats();
    fs.fsync(1, b, false).unwrap();
    assert!(fs.stats().bytes_written() - before.bytes_written() >= 4 << 20);
}

#[test]
fn related_operations_merge_streams() {
    let mut fs = fresh(4096);
    // Stream 1 creates a directory and writes a big file; stream 2 creates a file inside
    // the directory (related: ccfs §3.5), so fsync in stream 2 must commit stream 1 too.
    let d = fs.mkdir(1, ROOT, b"d", 0o755, O).unwrap().ino;
    let big = fs.create(1, ROOT, b"big", 0o644, O).unwrap().ino;
    fs.write(1, big, 0, &vec![3u8; 1 << 20]).unwrap();
    let f = fs.create(2, d, b"f", 0o644, O).unwrap().ino;
    assert_eq!(fs.merges(), 1);
    fs.fsync(2, f, false).unwrap();
    let dev = fs.into_device();
    let (mut fs, _) = Fs::mount(
        SimDevice::from_image(BLOCK, dev.durable().to_vec()).unwrap(),
        MountOptions::default(),
    )
    .unwrap();
    assert_eq!(fs.lookup(d, b"f").unwrap().ino, f);
    assert_eq!(fs.read(big, 0, 4).unwrap(), [3u8; 4]);
}

#[test]
fn fsync_of_a_file_another_stream_wrote() {
    let mut fs = fresh(4096);
    let f = file(&mut fs, ROOT, "f");
    fs.sync().unwrap();
    fs.write(1, f, 0, b"from stream 1").unwrap();
    fs.fsync(2, f, false).unwrap();
    let dev = fs.into_device();
    let (mut fs, _) = Fs::mount(
        SimDevice::from_image(BLOCK, dev.durable().to_vec()).unwrap(),
        MountOptions::default(),
    )
    .unwrap();
    assert_eq!(fs.read(f, 0, 100).unwrap(), b"from stream 1");
}

#[test]
fn ignore_fsync_and_streamsync() {
    let mut fs = fresh(4096);
    assert_eq!(fs.getstream(42), intactfs::INIT_STREAM);
    fs.setstream(
        42,
        3,
        StreamFlags {
            ignore_fsync: true,
            ..Default::default()
        },
    );
    assert_eq!(fs.getstream(42), 3);
    assert!(fs.stream_flags(3).ignore_fsync);
    let f = fs.create(3, ROOT, b"f", 0o644, O).unwrap().ino;
    fs.write(3, f, 0, b"data").unwrap();
    let c = fs.stats().commits;
    fs.fsync(3, f, false).unwrap();
    assert_eq!(
        fs.stats().commits,
        c,
        "fsync is a no-op in an IGNORE_FSYNC stream"
    );
    fs.streamsync(3).unwrap();
    assert_eq!(fs.stats().commits, c + 1);
    let dev = fs.into_device();
    let (mut fs, _) = Fs::mount(
        SimDevice::from_image(BLOCK, dev.durable().to_vec()).unwrap(),
        MountOptions::default(),
    )
    .unwrap();
    assert_eq!(fs.read(f, 0, 10).unwrap(), b"data");
}

#[test]
fn unlinked_open_files_live_until_closed_or_recovered() {
    let mut fs = fresh(4096);
    let f = file(&mut fs, ROOT, "f");
    fs.open(f).unwrap();
    fs.unlink(0, ROOT, b"f").unwrap();
    fs.write(0, f, 0, b"still here").unwrap();
    assert_eq!(fs.read(f, 0, 100).unwrap(), b"still here");
    fs.sync().unwrap();
    // A crash now: recovery frees the orphan.
    let img = fs.device().durable().to_vec();
    let mut dev = SimDevice::from_image(BLOCK, img.clone()).unwrap();
    let r = fsck(&mut dev, true);
    assert!(
        r.clean() && r.notes.iter().any(|n| n.contains("orphan")),
        "{r:?}"
    );
    let (fs2, report) = Fs::mount(dev, MountOptions::default()).unwrap();
    assert_eq!(report.orphans_freed, 1);
    assert!(fs2.getattr(f).is_err());
    // Without a crash, the last close frees it.
    fs.release(0, f).unwrap();
    assert!(fs.getattr(f).is_err());
    let mut dev = fs.unmount().unwrap();
    assert!(fsck(&mut dev, true).clean());
}

#[test]
fn a_directory_of_100000_entries() {
    let mut fs = fresh(16384);
    let d = fs.mkdir(0, ROOT, b"big", 0o755, O).unwrap().ino;
    for i in 0..100_000u32 {
        fs.create(0, d, format!("file-{i:06}").as_bytes(), 0o644, O)
            .unwrap();
    }
    fs.sync().unwrap();
    let mut fs = remount(fs);
    assert!(fs.lookup(d, b"file-054321").is_ok());
    // readdir in pages of 1000 via cookies sees every entry once.
    let mut seen = std::collections::HashSet::new();
    let mut cookie = 0;
    loop {
        let page = fs.readdir(d, cookie, 1000).unwrap();
        let Some(last) = page.last() else { break };
        cookie = last.cookie;
        for e in page {
            assert!(seen.insert(e.name));
        }
    }
    assert_eq!(seen.len(), 100_000);
    fs.unlink(0, d, b"file-000007").unwrap();
    let mut dev = fs.unmount().unwrap();
    assert!(fsck(&mut dev, false).clean());
}

#[test]
fn file_device_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fs.img");
    let mut dev = FileDevice::create(&path, BLOCK, 2048).unwrap();
    mkfs(&mut dev, &MkfsOptions::default()).unwrap();
    let (mut fs, _) = Fs::mount(dev, MountOptions::default()).unwrap();
    let f = fs.create(0, ROOT, b"f", 0o644, O).unwrap().ino;
    fs.write(0, f, 0, b"on a file").unwrap();
    fs.fsync(0, f, false).unwrap();
    drop(fs.into_device());
    let dev = FileDevice::open(&path, BLOCK).unwrap();
    let (mut fs, report) = Fs::mount(dev, MountOptions::default()).unwrap();
    assert_eq!(report.records_replayed, 1);
    assert_eq!(fs.read(f, 0, 100).unwrap(), b"on a file");
}

#[test]
fn extended_attributes_are_journaled_with_their_stream() {
    let mut fs = fresh(4096);
    let f = file(&mut fs, ROOT, "f");
    fs.setxattr(0, f, b"user.a", b"1", XattrMode::Any).unwrap();
    assert!(
        matches!(
            fs.setxattr(0, f, b"user.a", b"2", XattrMode::Create),
            Err(FsError::Exists(_))
        ),
        "XATTR_CREATE of an existing name"
    );
    assert!(
        matches!(
            fs.setxattr(0, f, b"user.b", b"2", XattrMode::Replace),
            Err(FsError::NoData)
        ),
        "XATTR_REPLACE of a missing name"
    );
    fs.setxattr(0, f, b"user.a", b"22", XattrMode::Replace)
        .unwrap();
    fs.setxattr(
        0,
        f,
        b"user.big",
        &vec![9u8; intactfs::meta::XATTR_VALUE_MAX],
        XattrMode::Any,
    )
    .unwrap();
    assert!(matches!(
        fs.setxattr(
            0,
            f,
            b"user.c",
            &vec![0u8; intactfs::meta::XATTR_VALUE_MAX + 1],
            XattrMode::Any
        ),
        Err(FsError::TooBig(_))
    ));
    assert!(matches!(
        fs.setxattr(0, f, &[b'x'; 256], b"", XattrMode::Any),
        Err(FsError::NameTooLong(_))
    ));
    assert_eq!(
        fs.listxattr(f).unwrap(),
        vec![b"user.a".to_vec(), b"user.big".to_vec()]
    );
    fs.removexattr(0, f, b"user.big").unwrap();
    assert!(matches!(
        fs.removexattr(0, f, b"user.big"),
        Err(FsError::NoData)
    ));
    assert!(matches!(fs.getxattr(f, b"user.big"), Err(FsError::NoData)));
    // Durable after fsync, in the stream that set it: a crash keeps it.
    fs.setstream(1, 5, StreamFlags::default());
    fs.setxattr(5, f, b"user.s", b"five", XattrMode::Any)
        .unwrap();
    fs.fsync(5, f, false).unwrap();
    // Another stream's unsynced attribute on another file is lost by a crash.
    let g = file(&mut fs, ROOT, "g");
    fs.fsync(0, g, false).unwrap();
    fs.setxattr(6, g, b"user.lost", b"x", XattrMode::Any)
        .unwrap();
    let dev = fs.into_device();
    let (fs, _) = Fs::mount(
        SimDevice::from_image(BLOCK, dev.durable().to_vec()).unwrap(),
        MountOptions::default(),
    )
    .unwrap();
    assert_eq!(fs.getxattr(f, b"user.a").unwrap(), b"22");
    assert_eq!(fs.getxattr(f, b"user.s").unwrap(), b"five");
    assert!(matches!(fs.getxattr(g, b"user.lost"), Err(FsError::NoData)));
    // And through a checkpoint (unmount writes one).
    let fs = remount(fs);
    assert_eq!(
        fs.listxattr(f).unwrap(),
        vec![b"user.a".to_vec(), b"user.s".to_vec()]
    );
    let dev = fs.unmount().unwrap();
    let mut dev2 = SimDevice::from_image(BLOCK, dev.durable().to_vec()).unwrap();
    assert!(fsck(&mut dev2, true).clean());
}

#[test]
fn seek_data_and_hole_follow_written_blocks() {
    let mut fs = fresh(8192);
    let f = file(&mut fs, ROOT, "f");
    let b = BLOCK as u64;
    fs.write(0, f, 0, b"head").unwrap();
    fs.write(0, f, 256 * b + 10, b"tail").unwrap();
    for committed in [false, true] {
        // Dirty blocks count before the commit, extents after it.
        assert_eq!(
            fs.seek_data(f, 0, false).unwrap(),
            b,
            "committed: {committed}"
        );
        assert_eq!(fs.seek_data(f, 2, true).unwrap(), 2);
        assert_eq!(fs.seek_data(f, 8192, true).unwrap(), 256 * b);
        assert_eq!(
            fs.seek_data(f, 256 * b + 1, false).unwrap(),
            256 * b + 14,
            "the end is a hole"
        );
        assert!(matches!(
            fs.seek_data(f, 256 * b + 14, true),
            Err(FsError::PastEnd)
        ));
        fs.fsync(0, f, false).unwrap();
    }
    // Preallocated blocks read as zeros and are holes; a file of one huge hole answers at once.
    fs.fallocate(0, f, 8 * b, 8 * b, false).unwrap();
    fs.fsync(0, f, false).unwrap();
    assert_eq!(fs.seek_data(f, 8 * b, true).unwrap(), 256 * b);
    let g = file(&mut fs, ROOT, "g");
    fs.truncate(0, g, 1 << 40).unwrap();
    fs.write(0, g, (1 << 40) - 1, b"z").unwrap();
    assert_eq!(fs.seek_data(g, 0, true).unwrap(), (1 << 40) - b);
    assert_eq!(fs.seek_data(g, 0, false).unwrap(), 0);
}

/// Every image a crash could leave, recovered: the set of (content of `a`, content of `b`).
fn recovered_states(
    dev: &SimDevice,
    a: u64,
    b: u64,
) -> std::collections::BTreeSet<(Vec<u8>, Vec<u8>)> {
    let imgs = dev
        .all_images(1 << 12)
        .expect("few enough unflushed writes to enumerate");
    imgs.into_iter()
        .map(|img| {
            let mut d = SimDevice::from_image(BLOCK, img).unwrap();
            assert!(fsck(&mut d, true).clean());
            let (mut fs, _) = Fs::mount(d, MountOptions::default()).unwrap();
            let size = |fs: &Fs<SimDevice>, i| fs.getattr(i).map(|x| x.size as usize).unwrap_or(0);
            let (sa, sb) = (size(&fs, a), size(&fs, b));
            (fs.read(a, 0, sa).unwrap(), fs.read(b, 0, sb).unwrap())
        })
        .collect()
}

#[test]
fn osync_orders_without_flushing_and_dsync_makes_durable() {
    let mut fs = fresh(1024);
    let a = file(&mut fs, ROOT, "a");
    let b = file(&mut fs, ROOT, "b");
    fs.sync().unwrap();
    let flushes = fs.stats().flushes;
    fs.write(1, a, 0, b"first").unwrap();
    let t1 = fs.osync(1, a).unwrap();
    fs.write(1, b, 0, b"second").unwrap();
    let t2 = fs.osync(1, b).unwrap();
    assert_eq!(fs.stats().flushes, flushes, "osync issues no flush");
    assert_eq!(fs.stats().optimistic_commits, 2);
    assert!(t2 > t1 && fs.durable_ticket() < t1 && fs.has_unflushed());
    // A crash now: nothing, the first update, or both; never the second without the first.
    let states = recovered_states(fs.device(), a, b);
    let none = (Vec::new(), Vec::new());
    let first = (b"first".to_vec(), Vec::new());
    let both = (b"first".to_vec(), b"second".to_vec());
    assert_eq!(
        states,
        [none, first, both.clone()].into_iter().collect(),
        "prefix semantics"
    );
    // dsync of the stream flushes; its point and every osync before it are durable.
    fs.write(1, a, 5, b"+").unwrap();
    fs.dsync(1, a).unwrap();
    assert_eq!(fs.stats().flushes, flushes + 1);
    assert!(fs.durable_ticket() >= t2 && !fs.has_unflushed());
    let states = recovered_states(fs.device(), a, b);
    assert_eq!(
        states,
        [(b"first+".to_vec(), b"second".to_vec())]
            .into_iter()
            .collect()
    );
}

#[test]
fn fsync_as_osync_and_the_durability_flush() {
    let mut fs = fresh(1024);
    fs.setstream(
        9,
        4,
        StreamFlags {
            fsync_as_osync: true,
            ..Default::default()
        },
    );
    let a = fs.create(4, ROOT, b"a", 0o644, O).unwrap().ino;
    fs.write(4, a, 0, b"x").unwrap();
    let flushes = fs.stats().flushes;
    fs.fsync(4, a, true).unwrap();
    assert_eq!(
        fs.stats().flushes,
        flushes,
        "fsync is an osync in this stream"
    );
    assert!(fs.has_unflushed());
    let t = fs.written_ticket();
    fs.flush().unwrap();
    assert!(fs.durable_ticket() >= t && !fs.has_unflushed());
    fs.flush().unwrap();
    assert_eq!(fs.stats().flushes, flushes + 1, "nothing left to flush");
    // dsync with nothing new still waits for earlier osyncs.
    fs.write(4, a, 1, b"y").unwrap();
    fs.osync(4, a).unwrap();
    fs.dsync(4, a).unwrap();
    assert!(!fs.has_unflushed());
}

#[test]
fn blocks_freed_by_osync_commits_wait_for_durability() {
    // Overwrite one block again and again with osync on a small device: copy on write frees
    // the old block each time; none may be reused until a flush (and a record on the media
    // carrying it) makes the freeing commit durable, yet the device never runs out.
    let mut fs = fresh(160);
    let a = file(&mut fs, ROOT, "a");
    fs.sync().unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..400u32 {
        fs.write(1, a, 0, &vec![(i % 251) as u8; BLOCK]).unwrap();
        fs.osync(1, a).unwrap();
        let pblk = fs
            .durable_meta()
            .get(a)
            .unwrap()
            .extents()
            .unwrap()
            .values()
            .next()
            .unwrap()
            .pblk;
        if !fs.has_unflushed() {
            seen.clear();
        }
        assert!(
            seen.insert(pblk),
            "block {pblk} reused before the commit that freed it was durable (round {i})"
        );
    }
    let dev = fs.unmount().unwrap();
    let (mut fs, _) = Fs::mount(dev, MountOptions::default()).unwrap();
    assert_eq!(fs.read(a, 0, 2).unwrap(), vec![(399 % 251) as u8; 2]);
}

#[test]
fn punch_hole_zeroes_frees_and_keeps_the_size() {
    let mut fs = fresh(1024);
    let a = file(&mut fs, ROOT, "a");
    let data: Vec<u8> = (0..10 * BLOCK).map(|i| (i % 251) as u8 + 1).collect();
    fs.write(0, a, 0, &data).unwrap();
    fs.sync().unwrap();
    let blocks0 = fs.getattr(a).unwrap().blocks;
    // Half a block, two whole blocks, half a block: [1.5, 4.5) blocks.
    let (off, len) = (3 * BLOCK as u64 / 2, 3 * BLOCK as u64);
    fs.punch_hole(0, a, off, len).unwrap();
    let mut want = data.clone();
    want[off as usize..(off + len) as usize].fill(0);
    assert_eq!(
        fs.read(a, 0, data.len()).unwrap(),
        want,
        "the range reads as zeros at once"
    );
    assert_eq!(fs.getattr(a).unwrap().size, data.len() as u64, "KEEP_SIZE");
    fs.sync().unwrap();
    assert_eq!(
        fs.getattr(a).unwrap().blocks,
        blocks0 - 2 * (BLOCK as u64 / 512),
        "the two whole blocks are freed"
    );
    // Uncommitted writes inside a hole are dropped; a hole past the end changes nothing
    // visible; preallocation waiting for its commit loses the punched part.
    fs.write(0, a, 6 * BLOCK as u64, &[9u8; 2 * BLOCK]).unwrap();
    fs.fallocate(0, a, 20 * BLOCK as u64, 4 * BLOCK as u64, true)
        .unwrap();
    fs.punch_hole(0, a, 6 * BLOCK as u64, 2 * BLOCK as u64)
        .unwrap();
    fs.punch_hole(0, a, 21 * BLOCK as u64, 2 * BLOCK as u64)
        .unwrap();
    want[6 * BLOCK..8 * BLOCK].fill(0);
    assert_eq!(fs.read(a, 0, data.len()).unwrap(), want);
    assert!(matches!(
        fs.punch_hole(0, a, 0, 0),
        Err(FsError::Invalid(_))
    ));
    let mut fs = remount(fs);
    assert_eq!(
        fs.read(a, 0, data.len()).unwrap(),
        want,
        "durable after the unmount's sync"
    );
    let mut dev = fs.unmount().unwrap();
    assert!(fsck(&mut dev, true).clean());
}

/// O_TMPFILE: a file without a name, linkable once; one never linked is gone after a crash,
/// with its blocks; one linked keeps its data across a remount.
#[test]
fn tmpfiles_are_nameless_until_linked_and_gone_after_a_crash() {
    let mut fs = fresh(1024);
    let free0 = fs.statfs().free_blocks;
    let t = fs.create_tmpfile(0, ROOT, 0o600, O).unwrap();
    assert_eq!((t.kind, t.nlink, t.mode), (FileType::File, 0, 0o600));
    assert!(
        fs.readdir(ROOT, 0, 100).unwrap().is_empty(),
        "the hidden name is gone again"
    );
    fs.write(0, t.ino, 0, &[7u8; 3 * BLOCK]).unwrap();
    fs.link(0, t.ino, ROOT, b"named").unwrap();
    assert_eq!(fs.getattr(t.ino).unwrap().nlink, 1);
    // Linked once, it is an ordinary file: unlinked while open, it cannot come back.
    fs.unlink(0, ROOT, b"named").unwrap();
    assert!(matches!(
        fs.link(0, t.ino, ROOT, b"again"),
        Err(FsError::NotFound(_))
    ));
    fs.release(0, t.ino).unwrap();
    // Linked and durable: survives a remount.
    let u = fs.create_tmpfile(0, ROOT, 0o644, O).unwrap();
    fs.write(0, u.ino, 0, b"kept").unwrap();
    fs.link(0, u.ino, ROOT, b"kept").unwrap();
    fs.release(0, u.ino).unwrap();
    // Never linked: a crash frees it at the next mount.
    let v = fs.create_tmpfile(0, ROOT, 0o644, O).unwrap();
    fs.write(0, v.ino, 0, &[1u8; 8 * BLOCK]).unwrap();
    fs.sync().unwrap();
    let (mut fs, report) = Fs::mount(fs.into_device(), MountOptions::default()).unwrap();
    assert_eq!(report.orphans_freed, 1);
    let k = fs.lookup(ROOT, b"kept").unwrap();
    assert_eq!(fs.read(k.ino, 0, 100).unwrap(), b"kept");
    assert_eq!(fs.readdir(ROOT, 0, 100).unwrap().len(), 1);
    assert!(
        fs.statfs().free_blocks >= free0 - 2,
        "the orphan's blocks are free again"
    );
    let mut dev = fs.unmount().unwrap();
    assert!(fsck(&mut dev, true).clean());
}

/// Incremental checkpoints (issue 17 item 5): after a base, a checkpoint writes only the
/// inodes that changed; the chain reads back to exactly the durable state after a crash at
/// any checkpoint, and a long chain or a large delta makes a new base.
#[test]
fn incremental_checkpoints_write_what_changed_and_read_back() {
    let mut fs = fresh(16384);
    let many = fs.mkdir(0, ROOT, b"many", 0o755, O).unwrap().ino;
    let mut files: Vec<u64> = (0..2000)
        .map(|i| file(&mut fs, many, &format!("f{i:04}")))
        .collect();
    let w = fs.mkdir(0, ROOT, b"w", 0o755, O).unwrap().ino;
    fs.sync().unwrap();
    let before = fs.stats();
    fs.checkpoint_base().unwrap();
    let base_bytes = fs.stats().snapshot_bytes - before.snapshot_bytes;
    assert!(
        base_bytes >= 16 * BLOCK as u64,
        "a base of {base_bytes} bytes is too small for this test"
    );
    // A tiny deterministic generator: the test must not depend on the seed's luck.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let (mut deltas, mut bases, mut largest_delta) = (0, 0, 0);
    for round in 0..40u64 {
        let name = format!("r{round}");
        // A rename out of `many` rewrites that directory whole (deltas are per inode).
        let mut big_dir = false;
        match next(6) {
            0 => files.push(file(&mut fs, w, &name)),
            1 => {
                let f = files[next(files.len() as u64) as usize];
                fs.write(0, f, next(4) * BLOCK as u64, &vec![round as u8; 3000])
                    .unwrap();
            }
            2 => {
                file(&mut fs, w, &name);
                fs.unlink(0, w, name.as_bytes()).unwrap();
            }
            3 => {
                let k = next(files.len() as u64) as usize;
                let (from, to) = (format!("f{k:04}"), format!("moved{round}"));
                big_dir = fs
                    .rename(
                        0,
                        many,
                        from.as_bytes(),
                        w,
                        to.as_bytes(),
                        RenameFlags::default(),
                    )
                    .is_ok();
                if !big_dir {
                    fs.mkdir(0, w, name.as_bytes(), 0o700, O).unwrap();
                }
            }
            4 => {
                let f = files[next(files.len() as u64) as usize];
                fs.setattr(
                    0,
                    f,
                    SetAttr {
                        mode: Some(0o600),
                        ..Default::default()
                    },
                )
                .unwrap();
            }
            _ => {
                let f = files[next(files.len() as u64) as usize];
                fs.truncate(0, f, next(3) * 1000).unwrap();
            }
        }
        fs.sync().unwrap();
        let s0 = fs.stats();
        fs.checkpoint().unwrap();
        let s1 = fs.stats();
        if s1.delta_checkpoints > s0.delta_checkpoints {
            deltas += 1;
            if !big_dir {
                largest_delta = largest_delta.max(s1.snapshot_bytes - s0.snapshot_bytes);
            }
        } else {
            bases += 1;
        }
        // A crash right after this checkpoint: the chain alone must give the durable state.
        if round % 5 == 4 {
            let want = fs.durable_meta().clone();
            let img = fs.into_device().durable().to_vec();
            let (again, report) = Fs::mount(
                SimDevice::from_image(BLOCK, img).unwrap(),
                MountOptions::default(),
            )
            .unwrap();
            assert_eq!(report.records_replayed, 0);
            assert_eq!(
                again.durable_meta(),
                &want,
                "round {round}: the checkpoint chain reads back differently"
            );
            fs = again;
        }
    }
    // The mounts in between add (empty) deltas too; a chain of 8 then gives way to a base.
    assert!(deltas >= 25 && bases >= 3, "{deltas} deltas, {bases} bases");
    assert!(
        largest_delta <= 2 * BLOCK as u64,
        "a delta for one changed call wrote {largest_delta} bytes (base {base_bytes})"
    );
    let mut dev = fs.unmount().unwrap();
    let r = fsck(&mut dev, false);
    assert!(r.clean(), "{:?}", r.problems);
}

/// Found by the crash simulation once it punched holes: a write that grew a file, then a
/// punch over all its uncommitted blocks, lost the new size (the commit recorded a write's
/// size only for files with dirty blocks left).
#[test]
fn a_punch_over_all_uncommitted_blocks_keeps_the_writes_size() {
    let mut fs = fresh(4096);
    let f = file(&mut fs, ROOT, "f");
    fs.sync().unwrap();
    fs.write(0, f, 4199, &[7; 4715]).unwrap();
    fs.punch_hole(0, f, 0, 1 << 40).unwrap();
    fs.fsync(0, f, false).unwrap();
    assert_eq!(fs.durable_meta().get(f).unwrap().size, 8914);
    let mut fs = remount(fs);
    assert_eq!(fs.getattr(f).unwrap().size, 8914);
    assert_eq!(fs.read(f, 0, 9000).unwrap(), vec![0; 8914]);
}
