//! A real intactfs mount for the mount tests (fs_mount.rs, fs_stress.rs): an image and a
//! mount point in a temporary directory, mounted with `intact fs mount --daemon`; dropping
//! unmounts (killing the daemon if it hangs) so that a failing test leaves nothing mounted.

use super::intact;
use intactfs_fuse::control;
use std::fs;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub fn run(c: &mut Command) -> Output {
    c.output().expect("running intact")
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub fn mounted_on(mnt: &Path) -> bool {
    mounts_on(mnt) > 0
}

/// How many mounts are stacked on `mnt`.
pub fn mounts_on(mnt: &Path) -> usize {
    let m = fs::read_to_string("/proc/self/mountinfo").unwrap();
    m.lines()
        .filter(|l| l.split(' ').nth(4) == Some(mnt.to_str().unwrap()))
        .count()
}

/// Waits (at most a minute) until process `pid` has exited: gone, or a zombie nobody
/// reaped *with every thread gone*. A killed multithreaded daemon's main thread can be a
/// zombie while another thread still finishes a write or flush of the image and holds its
/// descriptor, so its lock (the flaky `periodic_commits_bound_what_a_crash_loses`, whose
/// commit thread may be flushing at the kill, found the image locked on the remount).
pub fn wait_exit(pid: i32, why: &str) {
    let start = Instant::now();
    while threads_alive(pid) > 0 {
        assert!(start.elapsed().as_secs() < 60, "{why}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Threads of process `pid` that are not zombies (0 once the process is gone).
fn threads_alive(pid: i32) -> usize {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(|t| fs::read_to_string(t.ok()?.path().join("stat")).ok())
        .filter(|s| !s.contains(") Z") && !s.contains(") X"))
        .count()
}

pub struct Mount {
    pub dir: tempfile::TempDir,
    pub img: PathBuf,
    pub mnt: PathBuf,
    pub pidfile: PathBuf,
    pub log: PathBuf,
}

impl Mount {
    pub fn new(size: &str) -> Mount {
        // SAFETY: geteuid cannot fail.
        assert_eq!(
            unsafe { libc::geteuid() },
            0,
            "the mount tests need root (FUSE mount(2))"
        );
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        let mnt = dir.path().join("mnt");
        fs::create_dir(&mnt).unwrap();
        let o = run(intact()
            .args(["fs", "mkfs"])
            .arg(&img)
            .args(["--size", size]));
        assert!(o.status.success(), "mkfs: {}", text(&o));
        let pidfile = dir.path().join("pid");
        let log = dir.path().join("log");
        Mount {
            dir,
            img,
            mnt,
            pidfile,
            log,
        }
    }

    /// Mounts with periodic commits off (`commit=0`, which `opts` may override with a later
    /// `-o commit=N`): the crash tests decide what is committed, and a slow machine must not
    /// commit it for them. `opts` are more arguments of `intact fs mount`.
    pub fn mount(&self, opts: &[&str]) {
        let o = run(intact()
            .args(["fs", "mount"])
            .arg(&self.img)
            .arg(&self.mnt)
            .arg("--daemon")
            .arg("--pid-file")
            .arg(&self.pidfile)
            .arg("--log")
            .arg(&self.log)
            .args(["-o", "commit=0"])
            .args(opts));
        assert!(o.status.success(), "mount: {}", text(&o));
        assert!(mounted_on(&self.mnt));
    }

    pub fn pid(&self) -> i32 {
        fs::read_to_string(&self.pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    pub fn umount(&self) -> Output {
        run(intact().args(["fs", "umount"]).arg(&self.mnt))
    }

    /// Unmounts cleanly (retrying a moment if something briefly keeps the mount busy) and
    /// checks that the daemon is gone; returns the daemon's closing message.
    pub fn umount_clean(&self) -> String {
        let pid = self.pid();
        let mut o = self.umount();
        for _ in 0..20 {
            if o.status.success() || !text(&o).contains("busy") {
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
            o = self.umount();
        }
        assert!(o.status.success(), "umount: {}", text(&o));
        assert!(text(&o).contains("written back"), "umount: {}", text(&o));
        wait_exit(pid, "the daemon did not exit after the unmount");
        assert!(!mounted_on(&self.mnt), "still mounted after umount");
        // The daemon's own last word (its counts) is in its log.
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        log.lines()
            .rev()
            .find(|l| l.contains("written back ("))
            .unwrap_or(text(&o).trim())
            .to_string()
    }

    /// A power cut as far as the daemon is concerned: what it had not committed is gone.
    pub fn crash(&self) {
        let pid = self.pid();
        // SAFETY: signalling the daemon this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        wait_exit(pid, "the daemon did not die on SIGKILL");
        let o = self.umount();
        assert!(
            o.status.success(),
            "umount of the stale mount: {}",
            text(&o)
        );
        assert!(text(&o).contains("is gone"), "{}", text(&o));
        assert!(!mounted_on(&self.mnt));
    }

    pub fn fsck_clean(&self) {
        let o = run(intact().args(["fs", "fsck"]).arg(&self.img));
        assert_eq!(o.status.code(), Some(0), "fsck: {}", text(&o));
    }

    pub fn p(&self, name: &str) -> PathBuf {
        self.mnt.join(name)
    }

    /// As [`Mount::new`], on `device` (block or txflash: `intact fs mkfs --device`).
    pub fn new_on(size: &str, device: &str) -> Mount {
        let m = Mount::new(size);
        if device != "block" {
            let o = run(intact()
                .args(["fs", "mkfs", "--force", "--device", device, "--size", size])
                .arg(&m.img));
            assert!(o.status.success(), "mkfs --device {device}: {}", text(&o));
        }
        m
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Ok(l) = fs::read_to_string(&self.log) {
                let tail: Vec<&str> = l.lines().rev().take(40).collect();
                eprintln!(
                    "the daemon's log (last lines):\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
        }
        if mounted_on(&self.mnt) {
            let o = self.umount();
            if !o.status.success() {
                let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
            }
        }
        if let Ok(pid) =
            fs::read_to_string(&self.pidfile).map(|s| s.trim().parse::<i32>().unwrap_or(0))
        {
            if pid > 0 {
                // SAFETY: only the daemon this test started.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

/// Runs `f` in a child process in stream `name` (fork keeps the test single-purpose:
/// the stream belongs to a process, and the test harness's own process stays in init).
pub fn in_stream(m: &Mount, name: &str, flags: u32, f: impl FnOnce()) {
    // SAFETY: the child only does file I/O and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let d = fs::File::open(&m.mnt).unwrap();
            control::setstream(d.as_raw_fd(), control::stream_id(name), flags).unwrap();
            assert_eq!(
                control::getstream(d.as_raw_fd()).unwrap().id,
                control::stream_id(name)
            );
            f();
        }))
        .map(|_| 0)
        .unwrap_or(1);
        // SAFETY: leave the forked child without running the harness's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child in stream {name} failed"
    );
}
