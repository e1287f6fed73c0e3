//! Issue 31 on intactfs: the mistakes a new user makes with `intact fs` get a message that
//! names what is wrong and what to do, exit 2, and leave nothing mounted. Needs root and
//! /dev/fuse, as fs_mount.rs.

mod common;
use common::mount::*;
use common::*;
use std::path::Path;

#[test]
fn an_ext4_image_is_named_not_called_damaged() {
    let m = Mount::new("16M");
    let st = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F"])
        .arg(&m.img)
        .status()
        .expect("mkfs.ext4 (e2fsprogs) must be installed");
    assert!(st.success());
    let o = run(intact().args(["fs", "fsck"]).arg(&m.img));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("this is an ext2/ext3/ext4 image"),
        "{}",
        text(&o)
    );
    assert!(!text(&o).contains("DAMAGE"), "{}", text(&o));
    let o = run(intact()
        .args(["fs", "mount", "--daemon"])
        .arg(&m.img)
        .arg(&m.mnt));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("this is an ext2/ext3/ext4 image"),
        "{}",
        text(&o)
    );
    assert_eq!(mounts_on(&m.mnt), 0);
}

#[test]
fn a_failed_daemon_is_reported_with_one_prefix() {
    let m = Mount::new("16M");
    std::fs::write(&m.img, vec![0x5a; 1 << 20]).unwrap();
    let o = run(intact()
        .args(["fs", "mount", "--daemon"])
        .arg(&m.img)
        .arg(&m.mnt));
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("the mount daemon failed: "), "{e}");
    assert_eq!(e.matches("intact: error:").count(), 1, "{e}");
    assert_eq!(mounts_on(&m.mnt), 0);
}

#[test]
fn a_second_mount_on_a_mount_point_is_refused() {
    let m = Mount::new("16M");
    m.mount(&[]);
    let pm = m.dir.path().join("pm.img");
    let o = run(intact()
        .args(["fs", "mkfs", "--device", "pmem", "--size", "16M"])
        .arg(&pm));
    assert!(o.status.success(), "{}", text(&o));
    let o = run(intact()
        .args(["fs", "mount", "--daemon"])
        .arg(&pm)
        .arg(&m.mnt));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("already a mount point") && text(&o).contains("intact fs umount"),
        "{}",
        text(&o)
    );
    assert_eq!(mounts_on(&m.mnt), 1, "the first mount stays, alone");
    m.umount_clean();
}

#[test]
fn fsck_of_a_clean_image_does_not_sound_an_alarm() {
    let m = Mount::new("16M");
    m.mount(&[]);
    std::fs::write(m.p("a"), b"hello").unwrap();
    m.umount_clean();
    m.mount(&[]);
    std::fs::write(m.p("b"), b"again").unwrap();
    m.umount_clean();
    let o = run(intact().args(["fs", "fsck"]).arg(&m.img));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains("stale"), "{}", text(&o));
    assert!(text(&o).contains("clean"), "{}", text(&o));
}

#[test]
fn block_interfaces_on_pmem_point_to_transactions() {
    let m = Mount::new_on("16M", "pmem");
    m.mount(&[]);
    for args in [
        vec!["--atomic", "--", "true"],
        vec!["--stream", "s", "--", "true"],
    ] {
        let o = run(intact()
            .args(["fs", "exec", "--mount"])
            .arg(&m.mnt)
            .args(&args));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains("AD-transactions"),
            "{args:?}: {}",
            text(&o)
        );
    }
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python");
    let o = run(std::process::Command::new("python3")
        .env("PYTHONPATH", &python)
        .arg("-c")
        .arg(concat!(
            "import sys, intact.fs as f\n",
            "def atomic(p):\n    with f.atomic(p):\n        pass\n",
            "for call in (f.begin, atomic, lambda p: f.setstream(p, 'a')):\n",
            "    try:\n        call(sys.argv[1])\n    except OSError as e:\n        print(e)\n",
        ))
        .arg(&m.mnt));
    // begin, the `with intact.fs.atomic(...)` block and setstream each point there.
    assert_eq!(
        text(&o).matches("AD-transactions").count(),
        3,
        "{}",
        text(&o)
    );
    m.umount_clean();
}

/// An image of another format version is not damage: fsck says it was not checked, which
/// build reads it, and exits 2 (as for an image it cannot read), without a DAMAGE line.
#[test]
fn an_image_of_another_format_version_is_not_called_damaged() {
    let m = Mount::new("16M");
    let pm = m.dir.path().join("old.img");
    let o = run(intact()
        .args(["fs", "mkfs", "--device", "pmem", "--size", "16M"])
        .arg(&pm));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // The pmem superblock: version at bytes 8..12, CRC32C of bytes 0..64 at 64..68.
    let mut img = std::fs::read(&pm).unwrap();
    img[8..12].copy_from_slice(&1u32.to_le_bytes());
    let crc = crc32c(&img[..64]);
    img[64..68].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&pm, &img).unwrap();
    for json in [false, true] {
        let mut cmd = intact();
        cmd.args(["fs", "fsck"]).arg(&pm);
        if json {
            cmd.arg("--json");
        }
        let o = run(&mut cmd);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("older engine"), "{}", text(&o));
        assert!(!text(&o).contains("DAMAGE"), "{}", text(&o));
        let said = if json {
            "\"clean\":false"
        } else {
            "not checked"
        };
        assert!(text(&o).contains(said), "{}", text(&o));
    }
}

/// CRC32C (Castagnoli), bitwise: the pmem superblock's checksum.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
