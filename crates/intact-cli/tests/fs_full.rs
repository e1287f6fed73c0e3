//! A full file system through the real mount (issue 25 findings 2 and 8): it still writes
//! back and mounts again, on the block and the txflash device; `-o ro` writes nothing;
//! an image an earlier build filled past the point of writing back mounts read-only with
//! the reason; `intact fs umount` exits non-zero with the daemon's message when the
//! write-back fails; fsck's exit codes are those its help states. Needs root and
//! /dev/fuse, as fs_mount.rs.

mod common;
use common::intact;
use common::mount::{mounted_on, run, text, wait_exit, Mount};
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Command;

/// Finding 2: 2,000 small files, then `dd` of 100 MiB into a 64 MiB file system (ENOSPC).
fn fill(m: &Mount) {
    for i in 0..2000 {
        fs::write(m.p(&format!("f{i}")), b"x\n").unwrap();
    }
    let o = run(Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", m.p("big").display()))
        .args(["bs=1M", "count=100"]));
    assert!(!o.status.success(), "dd must hit ENOSPC: {}", text(&o));
    assert!(text(&o).contains("No space left"), "{}", text(&o));
}

fn full_then_mount_again(device: &str) {
    let m = Mount::new_on("64M", device);
    m.mount(&[]);
    fill(&m);
    m.umount_clean();
    m.fsck_clean();
    m.mount(&[]);
    assert_eq!(fs::read(m.p("f1999")).unwrap(), b"x\n");
    fs::remove_file(m.p("big")).unwrap();
    fs::write(m.p("after"), vec![1u8; 1 << 20]).unwrap();
    m.umount_clean();
    m.fsck_clean();
}

#[test]
fn block_full_fs_writes_back_and_mounts_again() {
    full_then_mount_again("block");
}

#[test]
fn txflash_full_fs_writes_back_and_mounts_again() {
    full_then_mount_again("txflash");
}

#[test]
fn read_only_mount_writes_nothing() {
    let m = Mount::new("16M");
    m.mount(&[]);
    fs::write(m.p("a"), b"kept").unwrap();
    m.umount_clean();
    let before = fs::read(&m.img).unwrap();
    m.mount(&["-o", "ro"]);
    assert_eq!(fs::read(m.p("a")).unwrap(), b"kept");
    let e = fs::write(m.p("b"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    let e = fs::remove_file(m.p("a")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    let pid = m.pid();
    let o = m.umount();
    assert!(o.status.success(), "umount: {}", text(&o));
    assert!(text(&o).contains("nothing was written"), "{}", text(&o));
    wait_exit(pid, "the daemon did not exit");
    assert!(
        fs::read(&m.img).unwrap() == before,
        "a read-only mount changed the image"
    );
    m.fsck_clean();
}

/// An image the build before issue 25 filled (fixture): every mount used to fail; now it
/// mounts read-only, says why, and its files can be copied out; fsck says it cannot be
/// mounted read-write.
fn old_full_image(fixture: &str) {
    let m = Mount::new("1M");
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../intactfs/tests/fixtures")
        .join(fixture);
    let o = run(Command::new("xz").arg("-dc").arg(&src));
    assert!(
        o.status.success(),
        "xz -dc {} (package xz-utils)",
        src.display()
    );
    fs::write(&m.img, o.stdout).unwrap();
    let o = run(intact().args(["fs", "fsck"]).arg(&m.img));
    assert_eq!(o.status.code(), Some(1), "fsck: {}", text(&o));
    assert!(text(&o).contains("cannot write back"), "{}", text(&o));
    let o = run(intact()
        .args(["fs", "mount", "--daemon", "--pid-file"])
        .arg(&m.pidfile)
        .arg("--log")
        .arg(&m.log)
        .arg(&m.img)
        .arg(&m.mnt));
    assert!(o.status.success(), "mount: {}", text(&o));
    assert!(text(&o).contains("mounted read-only"), "{}", text(&o));
    assert_eq!(fs::read(m.p("f1234")).unwrap(), b"x\n");
    let e = fs::remove_file(m.p("big")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    let o = m.umount();
    assert!(o.status.success(), "umount: {}", text(&o));
    assert!(!text(&o).contains("written back"), "{}", text(&o));
}

#[test]
fn old_full_block_image_mounts_read_only() {
    old_full_image("full-block-v2.img.xz");
}

#[test]
fn old_full_txflash_image_mounts_read_only() {
    old_full_image("full-txflash-v2.img.xz");
}

/// A tmpfs of `size`, unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn new(at: &Path, size: &str) -> Tmpfs {
        fs::create_dir_all(at).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .unwrap();
        assert!(st.success(), "mount -t tmpfs on {}", at.display());
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The write-back fails (the image's own file system fills up under it, so the daemon's
/// device writes fail at unmount): `intact fs umount` must exit non-zero with the
/// daemon's reason, not print "written back".
#[test]
fn umount_reports_a_failed_write_back() {
    let m = Mount::new("1M");
    let small = Tmpfs::new(&m.dir.path().join("small"), "6M");
    let img = small.0.join("img");
    // A sparse 64 MiB image on a 6 MiB tmpfs.
    let o = run(intact().args(["fs", "mkfs", "--size", "64M"]).arg(&img));
    assert!(o.status.success(), "mkfs: {}", text(&o));
    let o = run(intact()
        .args(["fs", "mount", "--daemon", "-o", "commit=0", "--pid-file"])
        .arg(&m.pidfile)
        .arg("--log")
        .arg(&m.log)
        .arg(&img)
        .arg(&m.mnt));
    assert!(o.status.success(), "mount: {}", text(&o));
    // Held in memory (commit=0, far below the dirty limit) until the unmount commits it.
    let mut f = fs::File::create(m.p("data")).unwrap();
    f.write_all(&vec![0x33u8; 16 << 20]).unwrap();
    drop(f);
    let pid = m.pid();
    let o = m.umount();
    wait_exit(pid, "the daemon did not exit");
    assert!(!mounted_on(&m.mnt));
    assert_eq!(o.status.code(), Some(1), "umount: {}", text(&o));
    assert!(!text(&o).contains("written back"), "{}", text(&o));
    assert!(text(&o).contains("FAILED"), "{}", text(&o));
    drop(small);
}

#[test]
fn fsck_exit_codes_match_its_help() {
    let m = Mount::new("16M");
    let o = run(intact().args(["fs", "fsck"]).arg(&m.img));
    assert_eq!(o.status.code(), Some(0), "a fresh image: {}", text(&o));
    // Random bytes: not an intactfs image, exit 2 (the help's "cannot be read").
    let mut junk = vec![0u8; 1 << 20];
    use std::io::Read;
    fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut junk)
        .unwrap();
    let rnd = m.dir.path().join("random.img");
    fs::write(&rnd, junk).unwrap();
    let o = run(intact().args(["fs", "fsck"]).arg(&rnd));
    assert_eq!(o.status.code(), Some(2), "random bytes: {}", text(&o));
    let o = run(intact().args(["fs", "fsck", "--json"]).arg(&rnd));
    assert_eq!(
        o.status.code(),
        Some(2),
        "random bytes, --json: {}",
        text(&o)
    );
}
