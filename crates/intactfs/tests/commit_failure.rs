//! Issue 25, finding 1, call by call: a commit refused for want of room leaves its
//! operations pending — every later fsync is refused too, never 0 for what it did not
//! write — and once another stream has made room, the next fsync commits them whole (a
//! crash then keeps them). Since the metadata reserve (finding 2) most of the large
//! attributes are refused up front with ENOSPC, so the fsyncs here usually succeed: the
//! test then checks that what was accepted survives a crash. The refused-commit path
//! itself is driven by the fault-injection simulation (`intactfs-sim`, `faults`: ENOSPC
//! and EIO at every device write and flush) and the `TakeBeforeRoom` mutation.

use intactfs::prelude::*;
use intactfs::{mkfs, Fs, FsError, MkfsOptions, MountOptions, Owner, XattrMode, BLOCK, ROOT};
use intactfs_device::SimDevice;

const VALUE_BYTES: usize = 60_000;

/// 256 blocks (1 MiB) with a 16-block journal: a few large attributes overflow it and
/// must commit by checkpoint.
fn small() -> Fs<SimDevice> {
    let mut dev = SimDevice::new(BLOCK, 256).unwrap();
    let opts = MkfsOptions {
        journal_blocks: Some(16),
        uuid: 25,
        ..Default::default()
    };
    mkfs(&mut dev, &opts).unwrap();
    Fs::mount(dev, MountOptions::default()).unwrap().0
}

fn create(fs: &mut Fs<SimDevice>, stream: u64, name: &str) -> u64 {
    fs.create(stream, ROOT, name.as_bytes(), 0o644, Owner::default())
        .unwrap()
        .ino
}

#[test]
fn a_refused_commit_keeps_its_operations_until_there_is_room() {
    let mut fs = small();
    let cleanup = 7;
    // Durable filler, in a stream of its own, until the file system is nearly full.
    let mut fillers = Vec::new();
    for k in 0.. {
        let ino = create(&mut fs, cleanup, &format!("fill{k}"));
        fillers.push(format!("fill{k}"));
        match fs.write(cleanup, ino, 0, &vec![1u8; 64 * BLOCK]) {
            Ok(_) => fs.fsync(cleanup, ino, false).unwrap(),
            Err(FsError::NoSpace(_)) => break,
            Err(e) => panic!("filling: {e}"),
        }
        assert!(k < 8, "a 1 MiB file system took more than 2 MiB");
    }
    // Attributes the journal cannot hold and the free space may not snapshot. The
    // metadata reserve may refuse some at once (ENOSPC, nothing changed): only the
    // accepted ones are owed.
    let files: Vec<u64> = (0..4)
        .map(|f| create(&mut fs, 0, &format!("x{f}")))
        .collect();
    let mut accepted = Vec::new();
    for &ino in &files {
        for n in 0..3u8 {
            let name = [b"user.".as_slice(), &[b'a' + n]].concat();
            loop {
                match fs.setxattr(0, ino, &name, &vec![n; VALUE_BYTES], XattrMode::Any) {
                    Ok(()) => accepted.push((ino, name)),
                    // Until one is accepted, free a filler (durably, in its own stream).
                    Err(FsError::NoSpace(_)) if accepted.is_empty() && !fillers.is_empty() => {
                        let victim = fillers.pop().expect("a filler");
                        fs.unlink(cleanup, ROOT, victim.as_bytes()).unwrap();
                        fs.streamsync(cleanup).unwrap();
                        continue;
                    }
                    Err(FsError::NoSpace(_)) => {}
                    Err(e) => panic!("setxattr on inode {ino}: {e}"),
                }
                break;
            }
        }
    }
    assert!(
        !accepted.is_empty(),
        "no attribute was accepted with every filler deleted"
    );
    for attempt in 0..3 {
        match fs.fsync(0, files[0], false) {
            // Acknowledged: the crash below must keep it.
            Ok(()) => {}
            Err(FsError::NoSpace(_)) => assert!(
                fs.has_uncommitted(),
                "fsync {attempt}: the refused operations were dropped"
            ),
            Err(e) => panic!("fsync {attempt}: {e} (a refusal must be ENOSPC, not a poison)"),
        }
        // Not poisoned: a poisoned mount fails every call, reads included.
        assert!(fs.getattr(ROOT).is_ok(), "a refusal poisoned the mount");
    }
    // Room, made in the other stream (it commits on its own).
    for name in &fillers {
        fs.unlink(cleanup, ROOT, name.as_bytes()).unwrap();
    }
    fs.streamsync(cleanup).unwrap();
    fs.fsync(0, files[0], false).unwrap();
    // A crash now keeps every accepted attribute.
    let dev = SimDevice::from_image(BLOCK, fs.into_device().durable().to_vec()).unwrap();
    let (fs, _) = Fs::mount(dev, MountOptions::default()).unwrap();
    for (ino, name) in &accepted {
        assert_eq!(
            fs.getxattr(*ino, name).map(|v| v.len()).ok(),
            Some(VALUE_BYTES),
            "inode {ino} lost attribute {}",
            String::from_utf8_lossy(name)
        );
    }
}
