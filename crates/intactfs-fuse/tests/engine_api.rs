//! The one engine interface (`intactfs_types::Engine`) on both engines: the same script of
//! POSIX calls gives the same answers on the block and the pmem engine (hard links,
//! renameat2 flags, files unlinked while open and extended attributes included). The pmem
//! engine lacks no call of the interface since its format 4 (control ioctls an engine lacks
//! are refused in one place, `control::refusal`, tested with the mounts).

use intactfs::{mkfs, Fs, MkfsOptions, MountOptions, BLOCK, INIT_STREAM, ROOT};
use intactfs_device::{PmemSim, SimDevice};
use intactfs_pmem::PmemFs;
use intactfs_types::{
    Engine, EngineBase, FileType, MknodKind, Owner, RenameFlags, SetAttr, XattrMode,
};

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
        .mknod(c, d.ino, b"n", MknodKind::CharDev(0x0501), 0o600, OWNER)
        .unwrap();
    assert_eq!((n.kind, n.rdev, n.size), (FileType::CharDev, 0x0501, 0));
    let p = e
        .mknod(c, d.ino, b"p", MknodKind::Fifo, 0o600, OWNER)
        .unwrap();
    assert_eq!(e.lookup(d.ino, b"p").unwrap().kind, FileType::Fifo);
    assert_eq!(e.write(c, p.ino, 0, b"x").unwrap_err().errno(), 22);
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

/// Extended attributes through the trait (the last calls pmem lacked, until its format 4):
/// each call's errno (0: success) and what a reader sees at the end.
fn xattr_script<E: Engine>(e: &mut E, c: E::Ctx) -> (Vec<(&'static str, i32)>, Vec<Vec<u8>>) {
    let f = e.create(c, ROOT, b"f", 0o644, OWNER).unwrap().ino;
    let err = |r: Result<(), intactfs_types::FsError>| r.err().map_or(0, |e| e.errno());
    let calls = vec![
        (
            "set a",
            err(e.setxattr(c, f, b"user.a", b"1", XattrMode::Any)),
        ),
        (
            "create a again",
            err(e.setxattr(c, f, b"user.a", b"2", XattrMode::Create)),
        ),
        (
            "replace missing b",
            err(e.setxattr(c, f, b"user.b", b"2", XattrMode::Replace)),
        ),
        (
            "replace a",
            err(e.setxattr(c, f, b"user.a", b"3", XattrMode::Replace)),
        ),
        (
            "both flags, a exists",
            err(e.setxattr(c, f, b"user.a", b"4", XattrMode::Both)),
        ),
        (
            "both flags, c missing",
            err(e.setxattr(c, f, b"user.c", b"4", XattrMode::Both)),
        ),
        (
            "set b empty",
            err(e.setxattr(c, f, b"user.b", b"", XattrMode::Any)),
        ),
        ("get missing", err(e.getxattr(f, b"user.z").map(drop))),
        ("remove missing", err(e.removexattr(c, f, b"user.z"))),
        ("remove b", err(e.removexattr(c, f, b"user.b"))),
        (
            "name too long",
            err(e.setxattr(c, f, &[b'x'; 256], b"", XattrMode::Any)),
        ),
    ];
    let mut seen = e.listxattr(f).unwrap();
    seen.push(e.getxattr(f, b"user.a").unwrap());
    (calls, seen)
}

#[test]
fn extended_attributes_answer_the_same_on_both_engines() {
    let on_pmem = xattr_script(&mut pmem(), None);
    let on_block = xattr_script(&mut block(), INIT_STREAM);
    assert_eq!(on_pmem, on_block);
    let errnos: Vec<i32> = on_block.0.iter().map(|(_, e)| *e).collect();
    assert_eq!(errnos, vec![0, EEXIST, 61, 0, EEXIST, 61, 0, 61, 61, 0, 36]);
    assert_eq!(on_block.1, vec![b"user.a".to_vec(), b"3".to_vec()]);
    assert!(!pmem().capabilities().streams && block().capabilities().streams);
}

const EEXIST: i32 = 17;
const ENOENT: i32 = 2;

/// Hard links and renameat2's flags through the trait: what a reader sees at the end.
fn links_and_rename_flags<E: Engine>(e: &mut E, c: E::Ctx) -> (Vec<Vec<u8>>, Vec<u8>, u32) {
    let f = e.create(c, ROOT, b"f", 0o644, OWNER).unwrap().ino;
    e.write(c, f, 0, b"F").unwrap();
    let g = e.create(c, ROOT, b"g", 0o644, OWNER).unwrap().ino;
    e.write(c, g, 0, b"G").unwrap();
    assert_eq!(e.link(c, f, ROOT, b"l").unwrap().nlink, 2);
    assert_eq!(e.link(c, f, ROOT, b"g").unwrap_err().errno(), EEXIST);
    let exchange = RenameFlags {
        exchange: true,
        noreplace: false,
    };
    let noreplace = RenameFlags {
        exchange: false,
        noreplace: true,
    };
    e.rename(c, ROOT, b"f", ROOT, b"g", exchange).unwrap();
    let err = |r: intactfs_types::Result<()>| r.err().map_or(0, |e| e.errno());
    assert_eq!(err(e.rename(c, ROOT, b"f", ROOT, b"g", noreplace)), EEXIST);
    assert_eq!(err(e.rename(c, ROOT, b"f", ROOT, b"nx", exchange)), ENOENT);
    e.rename(c, ROOT, b"l", ROOT, b"m", noreplace).unwrap();
    let at_g = e.lookup(ROOT, b"g").unwrap();
    assert_eq!(at_g.ino, f, "the exchange put f's inode at g");
    (
        names_paged(e, ROOT),
        e.read(at_g.ino, 0, 10).unwrap(),
        at_g.nlink,
    )
}

#[test]
fn links_and_rename_flags_answer_the_same_on_both_engines() {
    let on_block = links_and_rename_flags(&mut block(), INIT_STREAM);
    let on_pmem = links_and_rename_flags(&mut pmem(), None);
    assert_eq!(on_block, on_pmem);
    assert_eq!(
        on_block,
        (
            vec![b"f".to_vec(), b"g".to_vec(), b"m".to_vec()],
            b"F".to_vec(),
            2
        )
    );
}

/// A file unlinked while open: read and written through the trait until its last release,
/// then gone (its inode no longer answers).
fn unlinked_while_open<E: Engine>(e: &mut E, c: E::Ctx) -> (Vec<u8>, u32, i32) {
    let f = e.create(c, ROOT, b"tmp", 0o600, OWNER).unwrap().ino;
    e.open(f).unwrap();
    e.write(c, f, 0, b"before").unwrap();
    e.unlink(c, ROOT, b"tmp").unwrap();
    assert_eq!(e.lookup(ROOT, b"tmp").unwrap_err().errno(), ENOENT);
    e.write(c, f, 6, b" after").unwrap();
    let data = e.read(f, 0, 100).unwrap();
    let nlink = e.getattr(f).unwrap().nlink;
    e.release(c, f).unwrap();
    e.fsync(c, ROOT, false).unwrap();
    let gone = e.getattr(f).err().map_or(0, |e| e.errno());
    (data, nlink, gone)
}

#[test]
fn an_unlinked_open_file_lives_until_its_last_release_on_both_engines() {
    let on_block = unlinked_while_open(&mut block(), INIT_STREAM);
    let on_pmem = unlinked_while_open(&mut pmem(), None);
    assert_eq!(on_block, on_pmem);
    assert_eq!(on_block, (b"before after".to_vec(), 0, ENOENT));
}
