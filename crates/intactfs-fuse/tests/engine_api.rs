//! The one engine interface (`intactfs_types::Engine`) on both engines: the same script of
//! POSIX calls gives the same answers on the block and the pmem engine, and a call the pmem
//! engine lacks answers EOPNOTSUPP (never EINVAL) where the block engine serves it.

use intactfs::{mkfs, Fs, MkfsOptions, MountOptions, BLOCK, INIT_STREAM, ROOT};
use intactfs_device::{PmemSim, SimDevice};
use intactfs_pmem::PmemFs;
use intactfs_types::{Engine, FileType, Owner, RenameFlags, SetAttr};

const EOPNOTSUPP: i32 = 95;
const OWNER: Owner = Owner { uid: 1, gid: 2 };

fn block() -> Fs<SimDevice> {
    let mut dev = SimDevice::new(BLOCK, 4096).unwrap();
    mkfs(&mut dev, &MkfsOptions::default()).unwrap();
    Fs::mount(dev, MountOptions::default()).unwrap().0
}

fn pmem() -> PmemFs<PmemSim> {
    let len = 4 << 20;
    let mut dev = PmemSim::new(len).unwrap();
    PmemFs::mkfs(&mut dev, &intactfs_pmem::MkfsOptions::for_len(len)).unwrap();
    PmemFs::mount(dev).unwrap().0
}

/// Reads a directory one entry per call, following the cookies.
fn names_paged<E: Engine>(e: &E, dir: u64) -> Vec<Vec<u8>> {
    let (mut cookie, mut names) = (0, Vec::new());
    loop {
        let page = e.readdir(dir, cookie, 1).unwrap();
        let Some(d) = page.first() else { break };
        assert!(
            d.cookie > cookie,
            "cookies grow: {} after {cookie}",
            d.cookie
        );
        cookie = d.cookie;
        names.push(d.name.clone());
    }
    names.sort();
    names
}

/// One script of calls through the trait; returns what a reader sees at the end.
fn script<E: Engine>(e: &mut E, c: E::Ctx) -> (Vec<Vec<u8>>, Vec<u8>, u64) {
    let d = e.mkdir(c, ROOT, b"d", 0o755, OWNER).unwrap();
    assert_eq!((d.kind, d.uid, d.gid), (FileType::Dir, 1, 2));
    let f = e.create(c, d.ino, b"f", 0o644, OWNER).unwrap();
    assert_eq!(e.write(c, f.ino, 0, b"hello world").unwrap(), 11);
    e.fsync(c, f.ino, false).unwrap();
    let a = e
        .setattr(
            c,
            f.ino,
            SetAttr {
                size: Some(5),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(a.size, 5);
    for n in [&b"a"[..], b"b", b"c"] {
        e.create(c, d.ino, n, 0o600, OWNER).unwrap();
    }
    e.rename(c, d.ino, b"a", d.ino, b"z", RenameFlags::default())
        .unwrap();
    e.unlink(c, d.ino, b"b").unwrap();
    assert_eq!(e.lookup(d.ino, b"b").unwrap_err().errno(), 2);
    assert_eq!(e.rmdir(c, ROOT, b"d").unwrap_err().errno(), 39);
    assert_eq!(e.readlink(f.ino).unwrap_err().errno(), 22);
    // Symbolic links and special files (pmem since issue 26 item 3).
    let l = e.symlink(c, d.ino, b"s", b"../f", OWNER).unwrap();
    assert_eq!((l.kind, l.size, l.mode), (FileType::Symlink, 4, 0o777));
    assert_eq!(e.readlink(l.ino).unwrap(), b"../f");
    assert_eq!(
        e.symlink(c, d.ino, b"t", b"", OWNER).unwrap_err().errno(),
        22
    );
    let n = e
        .mknod(c, d.ino, b"n", FileType::CharDev, 0o600, 0x0501, OWNER)
        .unwrap();
    assert_eq!((n.kind, n.rdev, n.size), (FileType::CharDev, 0x0501, 0));
    let p = e
        .mknod(c, d.ino, b"p", FileType::Fifo, 0o600, 0, OWNER)
        .unwrap();
    assert_eq!(e.lookup(d.ino, b"p").unwrap().kind, FileType::Fifo);
    assert_eq!(e.write(c, p.ino, 0, b"x").unwrap_err().errno(), 22);
    let bad = e.mknod(c, d.ino, b"q", FileType::Dir, 0o600, 0, OWNER);
    assert_eq!(bad.unwrap_err().errno(), 22);
    e.unlink(c, d.ino, b"p").unwrap();
    let s = e.statfs();
    assert!(s.free_files <= s.files && s.free_blocks <= s.blocks);
    let data = e.read(f.ino, 0, 100).unwrap();
    (names_paged(e, d.ino), data, e.getattr(f.ino).unwrap().size)
}

#[test]
fn the_same_calls_give_the_same_answers_on_both_engines() {
    let on_block = script(&mut block(), INIT_STREAM);
    let on_pmem = script(&mut pmem(), None);
    assert_eq!(on_block, on_pmem);
    assert_eq!(
        on_block.0,
        vec![
            b"c".to_vec(),
            b"f".to_vec(),
            b"n".to_vec(),
            b"s".to_vec(),
            b"z".to_vec()
        ]
    );
    assert_eq!(on_block.1, b"hello");
}

/// The calls the pmem engine does not have yet, each with the errno it answers.
fn lacking<E: Engine>(e: &mut E, c: E::Ctx) -> Vec<(&'static str, i32)> {
    let f = e.create(c, ROOT, b"f", 0o644, OWNER).unwrap().ino;
    e.create(c, ROOT, b"g", 0o644, OWNER).unwrap();
    let err = |r: Result<(), intactfs_types::FsError>| r.err().map_or(0, |e| e.errno());
    let exchange = RenameFlags {
        exchange: true,
        noreplace: false,
    };
    let noreplace = RenameFlags {
        exchange: false,
        noreplace: true,
    };
    vec![
        ("link", err(e.link(c, f, ROOT, b"l").map(drop))),
        (
            "setxattr",
            err(e.setxattr(c, f, b"user.a", b"1", false, false)),
        ),
        ("getxattr", err(e.getxattr(f, b"user.a").map(drop))),
        ("listxattr", err(e.listxattr(f).map(drop))),
        ("removexattr", err(e.removexattr(c, f, b"user.a"))),
        (
            "exchange",
            err(e.rename(c, ROOT, b"f", ROOT, b"g", exchange)),
        ),
        (
            "noreplace",
            err(e.rename(c, ROOT, b"f", ROOT, b"new", noreplace)),
        ),
    ]
}

#[test]
fn calls_the_pmem_engine_lacks_answer_eopnotsupp() {
    for (call, errno) in lacking(&mut pmem(), None) {
        assert_eq!(errno, EOPNOTSUPP, "{call} on pmem");
    }
    // The same script is served by the block engine: the refusals are pmem's, not the
    // script's.
    for (call, errno) in lacking(&mut block(), INIT_STREAM) {
        assert_eq!(errno, 0, "{call} on block");
    }
    assert!(!pmem().capabilities().streams && block().capabilities().streams);
}
