//! fsstress (xfstests' random concurrent namespace and data operations, built from
//! `../shared/peer-suites` with its build script) fills an intactfs image; afterwards the
//! image unmounts honestly (exit 0 and "written back", fsck clean) and mounts again, also
//! after the daemon is killed with SIGKILL (issue 25 finding 2: the 4 GiB run
//! `fsstress -n 50000 -p 8 -s 7` used to leave an image no mount could write back).
//!
//! CI runs a scaled-down fill (a 64 MiB image, `-n 2000`: it fills the image in about
//! 6 s here); `INTACT_SLOW_TESTS=1` runs the full 4 GiB one. The peer suites are looked
//! for in `INTACT_PEER_SUITES`, else `../shared/peer-suites` beside the repository; if
//! they are missing or fsstress does not build (it needs `xfslibs-dev`), the test fails
//! under `INTACT_REQUIRE_ALL=1` and is skipped, saying so, otherwise. Needs root and
//! /dev/fuse, as fs_mount.rs.

mod common;
use common::mount::{run, text, Mount};
use std::path::{Path, PathBuf};
use std::process::Command;

/// fsstress built into `out`, or why it cannot be.
fn build_fsstress(out: &Path) -> Result<PathBuf, String> {
    let suites = std::env::var_os("INTACT_PEER_SUITES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/peer-suites")
        });
    let script = suites.join("build.sh");
    if !script.is_file() {
        return Err(format!(
            "{} is missing (the peer suites: set INTACT_PEER_SUITES)",
            script.display()
        ));
    }
    let o = Command::new("bash")
        .arg(&script)
        .arg(out)
        .output()
        .map_err(|e| format!("running {}: {e}", script.display()))?;
    if !o.status.success() {
        return Err(format!(
            "{} failed (fsstress needs gcc and xfslibs-dev): {}",
            script.display(),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(out.join("fsstress"))
}

/// fsstress, or `None` after saying why not (a failure under INTACT_REQUIRE_ALL=1).
fn fsstress(test: &str, out: &Path) -> Option<PathBuf> {
    build_fsstress(out)
        .map_err(|why| common::cannot_run(test, &format!("fsstress cannot be built: {why}")))
        .ok()
}

/// Runs fsstress in `m` until it is done; asserts that it filled the file system.
/// (A fill with seed 7 at 64 MiB also passed on the build before issue 25, whose failures
/// needed more metadata: the 4 GiB run; fs_full.rs reproduces finding 2 at 64 MiB.)
fn stress(m: &Mount, bin: &Path, ops: u32) {
    let dir = m.p("stress");
    std::fs::create_dir(&dir).unwrap();
    let o = run(Command::new(bin).arg("-d").arg(&dir).args([
        "-n",
        &ops.to_string(),
        "-p",
        "8",
        "-s",
        "7",
    ]));
    assert!(o.status.success(), "fsstress: {}", text(&o));
    // fsstress' 8 processes interleave differently from run to run, so its seed does not
    // decide how full it leaves the image (CI once stopped at 1.2 % free): a file written
    // until ENOSPC fills the rest, so the remount below always starts from a full image.
    let created = top_up(&dir.join("top-up"));
    let st = nix_statvfs(&m.mnt);
    // Either under 1 % of the blocks free, or no room for even an empty file.
    assert!(
        full(&m.mnt) || !created,
        "fsstress and the top-up must fill the file system: {} of {} blocks free",
        st.0,
        st.1
    );
}

/// Appends 64 KiB chunks to `path`, then 4 KiB ones, until the file system says ENOSPC.
/// False when not even the file could be created (ENOSPC at create: fsstress already
/// used the last room, which CI saw on txflash).
fn top_up(path: &Path) -> bool {
    use std::io::Write;
    let mut f = match std::fs::File::create(path) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => return false,
        Err(e) => panic!("creating {}: {e}", path.display()),
    };
    for chunk_bytes in [64usize << 10, 4 << 10] {
        let chunk = vec![7u8; chunk_bytes];
        loop {
            match f.write_all(&chunk) {
                Ok(()) => continue,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("topping up {}: {e}", path.display()),
            }
        }
    }
    true
}

/// Less than 1% free.
fn full(mnt: &Path) -> bool {
    let (free, total) = nix_statvfs(mnt);
    free * 100 < total
}

/// (free blocks for users, total blocks).
fn nix_statvfs(p: &Path) -> (u64, u64) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string and a zeroed out-parameter of the right type.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut s) }, 0);
    (s.f_bavail as u64, s.f_blocks as u64)
}

/// Mounts again read-write (not the read-only fallback), deletes everything fsstress
/// made, unmounts honestly, checks.
fn mount_again(m: &Mount) {
    m.mount(&[]);
    let log = std::fs::read_to_string(&m.log).unwrap_or_default();
    assert!(!log.contains("read-only"), "mounted read-only: {log}");
    std::fs::remove_dir_all(m.p("stress")).unwrap();
    std::fs::write(m.p("after"), vec![5u8; 1 << 20]).unwrap();
    m.umount_clean();
    assert_no_room_breaks(m, "mount after the fill");
    m.fsck_clean();
}

/// The engine's room promise (issue 25): every checkpoint of a read-write mount leaves
/// room for the checkpoints the reserve promises. A break is logged by the daemon ("left
/// the metadata reserve short"); this test broke it in about 1 of 10 runs under load until
/// a truncate's tail block and fields widened in place were charged (docs/fs-design.md,
/// "Room for the next snapshot"), and now fails on any such line.
fn assert_no_room_breaks(m: &Mount, when: &str) {
    let log = std::fs::read_to_string(&m.log).unwrap_or_default();
    let breaks: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("left the metadata reserve short"))
        .collect();
    assert!(
        breaks.is_empty(),
        "the room promise broke during the {when}:\n{}",
        breaks.join("\n")
    );
}

fn fill_and_remount(test: &str, size: &str, device: &str, ops: u32) {
    let tmp = tempfile::tempdir().unwrap();
    let Some(bin) = fsstress(test, tmp.path()) else {
        return;
    };
    let m = Mount::new_on(size, device);
    // Filled, then unmounted: exit 0 and "written back" (umount_clean), fsck clean.
    m.mount(&[]);
    stress(&m, &bin, ops);
    m.umount_clean();
    assert_no_room_breaks(&m, "first fill");
    m.fsck_clean();
    mount_again(&m);
    // Filled again, and the daemon killed while fsstress still runs: the next mount
    // recovers read-write.
    m.mount(&[]);
    std::fs::create_dir(m.p("stress")).unwrap();
    let mut child = Command::new(&bin)
        .arg("-d")
        .arg(m.p("stress"))
        .args(["-n", &ops.to_string(), "-p", "8", "-s", "8"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Until the file system is full (or fsstress is done: then it is full, as above).
    while child.try_wait().unwrap().is_none() && !full(&m.mnt) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    m.crash();
    child.wait().unwrap();
    assert_no_room_breaks(&m, "second fill");
    mount_again(&m);
}

#[test]
fn fsstress_fills_block_fs_then_unmounts_and_mounts() {
    fill_and_remount("fsstress_fills_block_fs", "64M", "block", 2000);
}

#[test]
fn fsstress_fills_txflash_fs_then_unmounts_and_mounts() {
    fill_and_remount("fsstress_fills_txflash_fs", "64M", "txflash", 2000);
}

/// The run of the finding: `fsstress -n 50000 -p 8 -s 7` on 4 GiB (INTACT_SLOW_TESTS=1).
#[test]
fn fsstress_full_4g_run() {
    if std::env::var("INTACT_SLOW_TESTS").as_deref() != Ok("1") {
        eprintln!("SKIPPED: the 4 GiB fsstress run needs INTACT_SLOW_TESTS=1");
        return;
    }
    fill_and_remount("fsstress_full_4g_run", "4G", "block", 50_000);
}
