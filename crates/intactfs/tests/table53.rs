//! Write dependence in bytes (ccfs thesis, Table 5.3, at a small scale): A gets 4 MiB, B one
//! byte, then fsync(B); then nothing / truncate A / overwrite A; then sync. With A and B in
//! one stream, B's fsync must carry A's data; in two streams it must not, a truncate must
//! keep A's data off the device entirely, and an overwrite must write A once. Byte counts
//! only (the engine's `stats()`); timing belongs to `bench/fs/engine.sh`.

use intactfs::prelude::*;
use intactfs::{mkfs, Fs, MkfsOptions, MountOptions, Owner, Stats, BLOCK, ROOT};
use intactfs_device::SimDevice;

const A: u64 = 4 << 20;
const KIB: u64 = 1024;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Variant {
    Append,
    Truncate,
    Overwrite,
}

/// Returns (what fsync(B) wrote, what was written from the start through the final sync).
fn run(variant: Variant, streams: u64) -> (Stats, Stats) {
    let mut dev = SimDevice::new(BLOCK, 4096).unwrap();
    mkfs(&mut dev, &MkfsOptions::default()).unwrap();
    let (mut fs, _) = Fs::mount(dev, MountOptions::default()).unwrap();
    let (sa, sb) = if streams == 1 { (1, 1) } else { (1, 2) };
    let a = fs
        .create(sa, ROOT, b"A", 0o644, Owner::default())
        .unwrap()
        .ino;
    let b = fs
        .create(sb, ROOT, b"B", 0o644, Owner::default())
        .unwrap()
        .ino;
    fs.sync().unwrap();
    let start = fs.stats();
    let first = vec![1u8; 1 << 20];
    for i in 0..A >> 20 {
        fs.write(sa, a, i << 20, &first).unwrap();
    }
    fs.write(sb, b, 0, b"x").unwrap();
    let before = fs.stats();
    fs.fsync(sb, b, false).unwrap();
    let fsync = fs.stats().since(&before);
    let second = vec![2u8; 1 << 20];
    match variant {
        Variant::Append => {}
        Variant::Truncate => fs.truncate(sa, a, 0).unwrap(),
        Variant::Overwrite => {
            for i in 0..A >> 20 {
                fs.write(sa, a, i << 20, &second).unwrap();
            }
        }
    }
    fs.sync().unwrap();
    let total = fs.stats().since(&start);

    // What was written is what was asked for, after a remount.
    let dev = fs.unmount().unwrap();
    let (mut fs, _) = Fs::mount(dev, MountOptions::default()).unwrap();
    assert_eq!(fs.read(b, 0, 10).unwrap(), b"x");
    let want = match variant {
        Variant::Append => first.clone(),
        Variant::Truncate => Vec::new(),
        Variant::Overwrite => second.clone(),
    };
    assert_eq!(
        fs.getattr(a).unwrap().size,
        if variant == Variant::Truncate { 0 } else { A }
    );
    assert_eq!(fs.read(a, A - (1 << 20), 1 << 20).unwrap(), want);
    (fsync, total)
}

#[test]
fn one_stream_fsync_of_b_writes_a() {
    for v in [Variant::Append, Variant::Truncate, Variant::Overwrite] {
        let (fsync, total) = run(v, 1);
        assert!(
            fsync.data_bytes >= A,
            "{v:?}: fsync(B) wrote {} data bytes, A has {A}: {fsync:?}",
            fsync.data_bytes
        );
        assert!(fsync.bytes_written() >= A);
        let min_total = if v == Variant::Overwrite { 2 * A } else { A };
        assert!(total.data_bytes >= min_total, "{v:?}: {total:?}");
    }
}

#[test]
fn two_streams_fsync_of_b_writes_kilobytes() {
    for v in [Variant::Append, Variant::Truncate, Variant::Overwrite] {
        let (fsync, total) = run(v, 2);
        assert!(
            fsync.bytes_written() < 64 * KIB,
            "{v:?}: fsync(B) wrote {} bytes: {fsync:?}",
            fsync.bytes_written()
        );
        assert!(
            fsync.data_bytes <= BLOCK as u64,
            "{v:?}: fsync(B) wrote data beyond B's block: {fsync:?}"
        );
        match v {
            // A's dirty blocks are dropped by the truncate: never written.
            Variant::Truncate => assert!(
                total.data_bytes <= BLOCK as u64,
                "truncate wrote A's data: {total:?}"
            ),
            // A is written once, in its final version.
            Variant::Append | Variant::Overwrite => {
                assert!(
                    total.data_bytes >= A && total.data_bytes <= A + BLOCK as u64,
                    "{v:?}: {total:?}"
                )
            }
        }
    }
}
