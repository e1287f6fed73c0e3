//! `intact fs mount -o uring`: FUSE over io_uring (the vendored fuser's `src/uring.rs`)
//! through the real binary. The tests switch the kernel's
//! `/sys/module/fuse/parameters/enable_uring` for their duration and put back what it was,
//! even when they fail. Needs root, /dev/fuse and a kernel with CONFIG_FUSE_IO_URING; a
//! kernel without that parameter skips them with a note.
//!
//! Only with the `uring` feature (the default build has no io_uring code):
//! `cargo test -p intact-cli --features uring --test fs_uring`, a line of
//! scripts/test.sh. fs_uring_off.rs checks the default build.
#![cfg(feature = "uring")]

mod common;
use common::intact;
use common::mount::{mounted_on, run, text, Mount};
use intactfs_fuse::control;
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::io::AsRawFd;
use std::sync::Mutex;

const PARAM: &str = "/sys/module/fuse/parameters/enable_uring";

/// The tests of this file change one kernel-wide switch: one at a time.
static SWITCH: Mutex<()> = Mutex::new(());

/// Sets the kernel parameter; puts the previous value back when dropped (also on panic).
struct UringSwitch {
    previous: String,
    _one_at_a_time: std::sync::MutexGuard<'static, ()>,
}

impl UringSwitch {
    /// None (the test is skipped) when this kernel has no FUSE over io_uring.
    fn set(on: bool) -> Option<UringSwitch> {
        let guard = SWITCH.lock().unwrap_or_else(|e| e.into_inner());
        let Ok(previous) = fs::read_to_string(PARAM) else {
            common::cannot_run(
                "fs_uring",
                &format!("{PARAM} does not exist (kernel without CONFIG_FUSE_IO_URING)"),
            );
            return None;
        };
        fs::write(PARAM, if on { "Y" } else { "N" })
            .unwrap_or_else(|e| panic!("writing {PARAM}: {e}"));
        Some(UringSwitch {
            previous: previous.trim().to_string(),
            _one_at_a_time: guard,
        })
    }
}

impl Drop for UringSwitch {
    fn drop(&mut self) {
        if let Err(e) = fs::write(PARAM, &self.previous) {
            eprintln!("could not restore {PARAM} to {}: {e}", self.previous);
        }
    }
}

/// The count of the daemon's closing line "N requests were served through FUSE over io_uring".
fn served_through_ring(m: &Mount) -> u64 {
    let log = fs::read_to_string(&m.log).unwrap_or_default();
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("served through FUSE over io_uring"))
        .unwrap_or_else(|| panic!("no io_uring count in the daemon's log:\n{log}"));
    line.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("cannot read the count in {line:?}"))
}

/// The daemon's threads that serve the rings (one per possible CPU).
fn ring_threads(pid: i32) -> usize {
    let tasks = fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .filter_map(|t| fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.starts_with("fuser-uring-"))
        .count()
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .rotate_left(seed as u32 % 31) as u8
                ^ seed
        })
        .collect()
}

#[test]
fn uring_mount_serves_file_operations_through_the_ring() {
    let Some(_switch) = UringSwitch::set(true) else {
        return;
    };
    let m = Mount::new("512M");
    // durability=0.2: an osync'd commit is flushed soon, answering a DURABLE wait from the
    // committer thread (a reply sent later, from a thread that is not the ring's).
    m.mount(&["-o", "uring,durability=0.2"]);
    assert!(
        ring_threads(m.pid()) >= 1,
        "no fuser-uring-* thread in the daemon"
    );

    // Create, write, read, fsync, rename, readdir, unlink.
    fs::write(m.p("a"), b"hello through the ring").unwrap();
    assert_eq!(fs::read(m.p("a")).unwrap(), b"hello through the ring");
    {
        let mut f = fs::OpenOptions::new().append(true).open(m.p("a")).unwrap();
        f.write_all(b", appended").unwrap();
        f.sync_all().unwrap();
    }
    fs::rename(m.p("a"), m.p("b")).unwrap();
    assert!(!m.p("a").exists());
    assert_eq!(
        fs::read(m.p("b")).unwrap(),
        b"hello through the ring, appended"
    );
    fs::create_dir(m.p("d")).unwrap();
    for i in 0..200 {
        fs::write(m.p(&format!("d/f{i}")), format!("{i}")).unwrap();
    }
    let mut names: Vec<String> = fs::read_dir(m.p("d"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 200);
    assert!(names.contains(&"f199".to_string()));
    for i in (0..200).step_by(2) {
        fs::remove_file(m.p(&format!("d/f{i}"))).unwrap();
    }
    assert_eq!(fs::read_dir(m.p("d")).unwrap().count(), 100);
    assert_eq!(fs::read_to_string(m.p("d/f101")).unwrap(), "101");

    // A write larger than 128 KiB (the kernel sends it in 1 MiB requests), read back
    // whole and at an offset.
    let big = pattern(7, (3 << 20) + 12345);
    {
        let mut f = fs::File::create(m.p("big")).unwrap();
        f.write_all(&big).unwrap();
        f.sync_all().unwrap();
    }
    assert_eq!(fs::read(m.p("big")).unwrap(), big);
    {
        let mut f = fs::File::open(m.p("big")).unwrap();
        f.seek(SeekFrom::Start(1_000_003)).unwrap();
        let mut part = vec![0u8; 200_000];
        f.read_exact(&mut part).unwrap();
        assert_eq!(part, big[1_000_003..1_200_003]);
    }

    // Writers on several threads (so on both CPUs' queues), each with its fsyncs.
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let m = &m;
            s.spawn(move || {
                let mut f = fs::File::create(m.p(&format!("t{t}"))).unwrap();
                for round in 0..8u8 {
                    f.write_all(&pattern(t * 16 + round, 64 << 10)).unwrap();
                    if round % 3 == 0 {
                        f.sync_data().unwrap();
                    }
                }
                f.sync_all().unwrap();
            });
        }
    });
    for t in 0..4u8 {
        let want: Vec<u8> = (0..8u8)
            .flat_map(|round| pattern(t * 16 + round, 64 << 10))
            .collect();
        assert_eq!(
            fs::read(m.p(&format!("t{t}"))).unwrap(),
            want,
            "thread {t}'s file"
        );
    }

    // A reply kept for later: DURABLE with WAIT is answered by the committer thread once
    // the osync'd commit has been flushed.
    {
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(m.p("o"))
            .unwrap();
        (&f).write_all(b"ordered now, durable soon").unwrap();
        let ticket = control::osync(f.as_raw_fd()).unwrap();
        assert!(
            control::durable(f.as_raw_fd(), ticket, true).unwrap(),
            "DURABLE with WAIT returned before the ticket was durable"
        );
    }

    let closing = m.umount_clean();
    let served = served_through_ring(&m);
    // 200 creates alone are 200 requests; the rest (lookups, writes, reads, ...) many more.
    assert!(
        served >= 400,
        "only {served} requests went through the ring ({closing})"
    );

    // Everything is on the image: remount (through the ring again) and look.
    m.fsck_clean();
    m.mount(&["-o", "uring"]);
    assert_eq!(
        fs::read(m.p("b")).unwrap(),
        b"hello through the ring, appended"
    );
    assert_eq!(fs::read(m.p("big")).unwrap(), big);
    assert_eq!(fs::read_dir(m.p("d")).unwrap().count(), 100);
    assert_eq!(fs::read_to_string(m.p("d/f199")).unwrap(), "199");
    assert!(!m.p("d/f198").exists());
    assert_eq!(fs::read(m.p("o")).unwrap(), b"ordered now, durable soon");
    for t in 0..4u8 {
        assert_eq!(
            fs::metadata(m.p(&format!("t{t}"))).unwrap().len(),
            8 * (64 << 10)
        );
    }
    m.umount_clean();
    assert!(served_through_ring(&m) > 0);
    m.fsck_clean();

    // The daemon killed with its rings in use: the mount goes stale (not hung), unmounts,
    // and what was fsynced is there after the next mount.
    m.mount(&["-o", "uring"]);
    {
        let mut f = fs::File::create(m.p("synced")).unwrap();
        f.write_all(b"fsynced before the crash").unwrap();
        f.sync_all().unwrap();
    }
    m.crash();
    m.fsck_clean();
    m.mount(&["-o", "uring"]);
    assert_eq!(
        fs::read(m.p("synced")).unwrap(),
        b"fsynced before the crash"
    );
    m.umount_clean();
}

#[test]
fn uring_mount_fails_clearly_when_the_kernel_has_it_off() {
    let Some(_switch) = UringSwitch::set(false) else {
        return;
    };
    let m = Mount::new("64M");
    for daemon in [true, false] {
        let mut c = intact();
        c.args(["fs", "mount"])
            .arg(&m.img)
            .arg(&m.mnt)
            .args(["-o", "uring"]);
        if daemon {
            c.arg("--daemon").arg("--log").arg(&m.log);
        }
        let o = run(&mut c);
        assert!(
            !o.status.success(),
            "mounted with io_uring off: {}",
            text(&o)
        );
        let t = text(&o);
        assert!(
            t.contains(PARAM) && t.contains("echo Y") && t.contains("-o uring"),
            "unclear error: {t}"
        );
        assert!(
            !mounted_on(&m.mnt),
            "a failed mount left {} mounted",
            m.mnt.display()
        );
    }
    // The image is free again (no daemon kept it) and mounts without the option.
    m.mount(&[]);
    m.umount_clean();
}
