//! The FUSE mount end to end, through the real `intact` binary: streams decide what a
//! crash (the daemon killed with SIGKILL) keeps; unmounting writes everything back; bad
//! input, busy and stale mounts get clear errors. Needs root and /dev/fuse, as the
//! machines this project runs on have (docs/platform facts).

mod common;
use common::intact;
use common::mount::{in_stream, mounted_on, run, text, wait_exit, Mount};
use intactfs_fuse::control;
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::process::{Command, Output};

fn write_file(p: &Path, data: &[u8], sync: bool) {
    let mut f = fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o644)
        .open(p)
        .unwrap();
    f.write_all(data).unwrap();
    if sync {
        f.sync_all().unwrap();
    }
}

/// Thesis Table 5.3 through the mount: B's fsync in its own stream does not carry A's
/// unsynced 8 MiB; in A's stream it must (program order within a stream).
#[test]
fn streams_decide_what_a_crash_keeps() {
    for same in [false, true] {
        let m = Mount::new("1G");
        m.mount(&[]);
        let big = vec![7u8; 8 << 20];
        in_stream(&m, "A", 0, || write_file(&m.p("a"), &big, false));
        in_stream(&m, if same { "A" } else { "B" }, 0, || {
            write_file(&m.p("b"), b"x", true)
        });
        m.crash();
        m.fsck_clean();
        m.mount(&[]);
        assert_eq!(fs::read(m.p("b")).unwrap(), b"x", "B was fsynced");
        if same {
            assert_eq!(
                fs::read(m.p("a")).unwrap(),
                big,
                "one stream: A precedes B in program order"
            );
        } else {
            assert!(
                !m.p("a").exists(),
                "two streams: A was never synced and is not related to B"
            );
        }
        let o = m.umount();
        assert!(o.status.success(), "{}", text(&o));
        m.fsck_clean();
    }
}

#[test]
fn children_adopt_the_stream_and_exec_wrapper_sets_it() {
    let m = Mount::new("256M");
    m.mount(&[]);
    // A shell run by `intact fs exec` and the python it starts both report stream "S".
    let script = format!(
        "import fcntl, struct, os\nfd = os.open({:?}, os.O_RDONLY)\nb = fcntl.ioctl(fd, 0x8010CC02, bytes(16))\nprint(struct.unpack('QII', b)[0], struct.unpack('QII', b)[1])",
        m.mnt.to_str().unwrap()
    );
    let o = run(intact()
        .args(["fs", "exec", "--mount"])
        .arg(&m.mnt)
        .args(["--stream", "S", "--ignore-fsync", "--", "sh", "-c"])
        .arg("python3 -c \"$0\"")
        .arg(&script));
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("{} {}", control::stream_id("S"), control::FLAG_IGNORE_FSYNC)
    );
    // The harness itself is still in the init stream.
    let d = fs::File::open(&m.mnt).unwrap();
    assert_eq!(
        control::getstream(d.as_raw_fd()).unwrap(),
        control::StreamArg { id: 0, flags: 0 }
    );
    // Not an intactfs directory: a clear refusal, exit 2.
    let o = run(intact().args([
        "fs", "exec", "--mount", "/tmp", "--stream", "S", "--", "true",
    ]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("not on an intactfs mount"),
        "{}",
        text(&o)
    );
}

/// IGNORE_FSYNC (per stream, or for the whole mount): fsync returns without committing;
/// streamsync still commits.
#[test]
fn ignore_fsync_stream_and_mount_option() {
    for mount_option in [false, true] {
        let opts: &[&str] = if mount_option {
            &["-o", "fsync=ignore"]
        } else {
            &[]
        };
        let flags = if mount_option {
            0
        } else {
            control::FLAG_IGNORE_FSYNC
        };
        let m = Mount::new("256M");
        m.mount(opts);
        in_stream(&m, "S", flags, || write_file(&m.p("fsynced"), b"1", true));
        m.crash();
        m.mount(opts);
        assert!(
            !m.p("fsynced").exists(),
            "fsync was ignored (mount option: {mount_option})"
        );
        in_stream(&m, "S", flags, || {
            write_file(&m.p("streamsynced"), b"2", false);
            let d = fs::File::open(&m.mnt).unwrap();
            control::streamsync(d.as_raw_fd()).unwrap();
        });
        m.crash();
        m.mount(&[]);
        assert_eq!(
            fs::read(m.p("streamsynced")).unwrap(),
            b"2",
            "streamsync is durable (mount option: {mount_option})"
        );
        assert!(m.umount().status.success());
        m.fsck_clean();
    }
}

#[test]
fn unmount_and_sigterm_write_everything_back() {
    let m = Mount::new("256M");
    m.mount(&[]);
    fs::create_dir(m.p("d")).unwrap();
    write_file(&m.p("d/f"), &vec![3u8; 300_000], false);
    std::os::unix::fs::symlink("d/f", m.p("s")).unwrap();
    fs::hard_link(m.p("d/f"), m.p("h")).unwrap();
    let o = m.umount();
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("written back"));
    m.fsck_clean();
    m.mount(&[]);
    assert_eq!(fs::read(m.p("s")).unwrap().len(), 300_000);
    assert_eq!(fs::metadata(m.p("h")).unwrap().len(), 300_000);
    write_file(&m.p("later"), b"later", false);
    let pid = m.pid();
    // SAFETY: the daemon this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    wait_exit(pid, "the daemon did not stop on SIGTERM");
    assert!(!mounted_on(&m.mnt));
    m.fsck_clean();
    m.mount(&[]);
    assert_eq!(fs::read(m.p("later")).unwrap(), b"later");
}

#[test]
fn bad_input_busy_and_stale_mounts_get_clear_errors() {
    let m = Mount::new("256M");
    let expect = |o: Output, code: i32, needle: &str| {
        assert_eq!(o.status.code(), Some(code), "{}", text(&o));
        assert!(
            text(&o).contains(needle),
            "expected {needle:?} in: {}",
            text(&o)
        );
    };
    // No image, a file as mount point, an unknown option, garbage instead of an image.
    expect(
        run(intact()
            .args(["fs", "mount", "/nonexistent/img"])
            .arg(&m.mnt)),
        2,
        "no such file",
    );
    expect(
        run(intact().args(["fs", "mount"]).arg(&m.img).arg(&m.img)),
        2,
        "not a directory",
    );
    expect(
        run(intact()
            .args(["fs", "mount"])
            .arg(&m.img)
            .arg(&m.mnt)
            .args(["-o", "fsync=sometimes"])),
        2,
        "expected fsync=durable, fsync=ignore or fsync=osync",
    );
    expect(
        run(intact()
            .args(["fs", "mount"])
            .arg(&m.img)
            .arg(&m.mnt)
            .args(["-o", "sometimes"])),
        2,
        "unknown mount option",
    );
    expect(
        run(intact()
            .args(["fs", "mount"])
            .arg(&m.img)
            .arg(&m.mnt)
            .args(["-o", "durability=0"])),
        2,
        "between 0.01 and 86400",
    );
    expect(
        run(intact()
            .args(["fs", "mount"])
            .arg(&m.img)
            .arg(&m.mnt)
            .args(["-o", "dirty_limit=lots"])),
        2,
        "dirty_limit=lots",
    );
    expect(
        run(intact()
            .args(["fs", "mount"])
            .arg(&m.img)
            .arg(&m.mnt)
            .args(["-o", "commit=soon"])),
        2,
        "whole seconds",
    );
    let junk = m.dir.path().join("junk");
    fs::write(&junk, vec![0x5au8; 1 << 20]).unwrap();
    expect(
        run(intact()
            .args(["fs", "mount"])
            .arg(&junk)
            .arg(&m.mnt)
            .arg("--daemon")),
        2,
        "cannot mount",
    );
    assert!(
        !mounted_on(&m.mnt),
        "a refused mount leaves nothing mounted"
    );
    // In use: a second mount, fsck and mkfs --force are refused while mounted.
    m.mount(&[]);
    let other = m.dir.path().join("other");
    fs::create_dir(&other).unwrap();
    expect(
        run(intact()
            .args(["fs", "mount"])
            .arg(&m.img)
            .arg(&other)
            .arg("--daemon")),
        2,
        "in use",
    );
    expect(run(intact().args(["fs", "fsck"]).arg(&m.img)), 2, "in use");
    expect(
        run(intact().args(["fs", "mkfs", "--force"]).arg(&m.img)),
        2,
        "in use",
    );
    // Busy: a process with its working directory on the mount.
    let mut sleeper = Command::new("sleep")
        .arg("30")
        .current_dir(&m.mnt)
        .spawn()
        .unwrap();
    expect(m.umount(), 1, "busy");
    assert!(mounted_on(&m.mnt));
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    // Stale: the daemon dies; mount and the kernel say so; umount cleans up.
    let pid = m.pid();
    // SAFETY: the daemon this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    std::thread::sleep(std::time::Duration::from_millis(200));
    expect(
        run(intact().args(["fs", "mount"]).arg(&m.img).arg(&m.mnt)),
        2,
        "stale mount",
    );
    expect(m.umount(), 0, "is gone");
    m.fsck_clean();
    expect(
        run(intact().args(["fs", "umount"]).arg(&m.mnt)),
        2,
        "not an intactfs mount",
    );
}

#[test]
fn unlinked_open_files_live_until_closed_and_statfs_is_real() {
    let m = Mount::new("256M");
    m.mount(&[]);
    let st0 = nix_statvfs(&m.mnt);
    let mut f = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(m.p("tmp"))
        .unwrap();
    f.write_all(&vec![1u8; 4 << 20]).unwrap();
    f.sync_all().unwrap();
    fs::remove_file(m.p("tmp")).unwrap();
    let st1 = nix_statvfs(&m.mnt);
    assert!(
        st1.1 + 1000 <= st0.1,
        "4 MiB in use while open: free {} -> {}",
        st0.1,
        st1.1
    );
    use std::io::{Read, Seek};
    f.seek(std::io::SeekFrom::Start(0)).unwrap();
    let mut back = vec![0u8; 4 << 20];
    f.read_exact(&mut back).unwrap();
    assert!(back.iter().all(|&b| b == 1));
    drop(f);
    // Freed once the kernel forgets the inode and the freeing commit is durable.
    let mut freed = false;
    for _ in 0..200 {
        let d = fs::File::open(&m.mnt).unwrap();
        d.sync_all().unwrap();
        if nix_statvfs(&m.mnt).1 + 16 >= st0.1 {
            freed = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(freed, "space of the unlinked file came back after close");
    // df agrees with statvfs and reports the image's size.
    let o = run(Command::new("df").arg("-B4096").arg(&m.mnt));
    let line = String::from_utf8_lossy(&o.stdout)
        .lines()
        .nth(1)
        .unwrap_or("")
        .to_string();
    let total: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(
        total > 60_000 && total <= 65_536,
        "df total {total} blocks of a 256 MiB image"
    );
}

/// (blocks, free blocks) from statvfs.
fn nix_statvfs(p: &Path) -> (u64, u64) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a zeroed statvfs filled by the kernel.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut s) }, 0);
    (s.f_blocks, s.f_bfree)
}

/// Several processes at once (the daemon serves with several threads): each one's files
/// are complete and correct.
#[test]
fn concurrent_writers() {
    let m = Mount::new("512M");
    // A small dirty limit: commits forced by writes, concurrently with other writers.
    m.mount(&["-o", "dirty_limit=1M"]);
    let kids: Vec<_> = (0..4)
        .map(|i| {
            let dir = m.p(&format!("w{i}"));
            Command::new("sh")
                .arg("-c")
                .arg(format!("mkdir {0} && for j in $(seq 1 200); do head -c $((j * 97)) /dev/zero | tr '\\0' '{i}' > {0}/f$j; done; sync", dir.display()))
                .spawn()
                .unwrap()
        })
        .collect();
    for mut k in kids {
        assert!(k.wait().unwrap().success());
    }
    assert!(m.umount().status.success());
    m.fsck_clean();
    m.mount(&[]);
    for i in 0..4 {
        for j in 1..=200u64 {
            let d = fs::read(m.p(&format!("w{i}/f{j}"))).unwrap();
            assert_eq!(d.len() as u64, j * 97);
            assert!(d.iter().all(|&b| b == b'0' + i as u8));
        }
    }
}

/// Writes through a shared mapping reach the daemon from the kernel (pid 0); they belong
/// to the stream of the process that opened the file, so a later fsync in that stream
/// makes them durable (program order within the stream).
#[test]
fn shared_mapping_writes_stay_in_the_openers_stream() {
    let m = Mount::new("256M");
    m.mount(&[]);
    in_stream(&m, "M", 0, || {
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(m.p("x"))
            .unwrap();
        f.set_len(4096).unwrap();
        f.sync_all().unwrap();
        // SAFETY: a 4096-byte shared mapping of a 4096-byte file, unmapped below.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            std::ptr::write_bytes(p as *mut u8, b'X', 4096);
            // Push the pages to the daemon without an fsync of x.
            let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
                | libc::SYNC_FILE_RANGE_WRITE
                | libc::SYNC_FILE_RANGE_WAIT_AFTER;
            assert_eq!(libc::sync_file_range(f.as_raw_fd(), 0, 4096, flags), 0);
            libc::munmap(p, 4096);
        }
        write_file(&m.p("y"), b"y", true);
    });
    m.crash();
    m.mount(&[]);
    assert_eq!(fs::read(m.p("y")).unwrap(), b"y");
    assert_eq!(
        fs::read(m.p("x")).unwrap(),
        vec![b'X'; 4096],
        "the mapping's writes precede y's fsync in stream M"
    );
    // Nobody may turn off fsync for the init stream, which every other program shares.
    let d = fs::File::open(&m.mnt).unwrap();
    let e = control::setstream(d.as_raw_fd(), 0, control::FLAG_IGNORE_FSYNC).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    let o = run(intact().args(["fs", "exec", "--mount"]).arg(&m.mnt).args([
        "--stream",
        "init",
        "--ignore-fsync",
        "--",
        "true",
    ]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// Extended attributes are kept (and survive unmount); `-o noxattr` turns them off.
#[test]
fn extended_attributes_and_noxattr() {
    let set = |p: &Path, v: &[u8]| {
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: valid C strings and buffer.
        let r = unsafe {
            libc::setxattr(
                c.as_ptr(),
                c"user.k".as_ptr(),
                v.as_ptr().cast(),
                v.len(),
                0,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error().raw_os_error())
        }
    };
    let get = |p: &Path| {
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        let mut buf = [0u8; 64];
        // SAFETY: valid C strings and a 64-byte buffer.
        let n = unsafe {
            libc::getxattr(
                c.as_ptr(),
                c"user.k".as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        (n >= 0).then(|| buf[..n as usize].to_vec())
    };
    let m = Mount::new("256M");
    m.mount(&[]);
    write_file(&m.p("f"), b"f", false);
    set(&m.p("f"), b"value").unwrap();
    assert!(m.umount().status.success());
    m.mount(&["-o", "noxattr"]);
    assert_eq!(set(&m.p("f"), b"v2"), Err(Some(libc::EOPNOTSUPP)));
    assert_eq!(get(&m.p("f")), None);
    assert!(m.umount().status.success());
    m.mount(&[]);
    assert_eq!(
        get(&m.p("f")).as_deref(),
        Some(&b"value"[..]),
        "kept through unmount, untouched by the noxattr mount"
    );
}

/// `commit=SECONDS`: what nobody synced is committed within the interval, so a crash after
/// it keeps it; with `commit=0` the same crash loses it (nothing else commits).
#[test]
fn periodic_commits_bound_what_a_crash_loses() {
    for every in [1, 0] {
        let m = Mount::new("256M");
        m.mount(&["-o", &format!("commit={every}")]);
        let data = vec![5u8; 300_000];
        write_file(&m.p("unsynced"), &data, false);
        let mtime = || fs::metadata(&m.img).unwrap().modified().unwrap();
        let before = mtime();
        if every > 0 {
            // The engine writes its image only when it commits: wait for that (bounded).
            let start = std::time::Instant::now();
            while mtime() == before {
                assert!(
                    start.elapsed().as_secs() < 60,
                    "no periodic commit within a minute"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            // The first write of a commit changes the mtime before its record is written and
            // flushed: wait until the image stays unchanged (the commit is over; nothing else
            // is dirty, so nothing else writes).
            let mut last = mtime();
            let mut quiet_since = std::time::Instant::now();
            while quiet_since.elapsed() < std::time::Duration::from_millis(500) {
                assert!(
                    start.elapsed().as_secs() < 60,
                    "the image never stopped changing"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
                let now = mtime();
                if now != last {
                    (last, quiet_since) = (now, std::time::Instant::now());
                }
            }
        } else {
            std::thread::sleep(std::time::Duration::from_millis(2500));
            assert_eq!(mtime(), before, "commit=0: nothing was written");
        }
        m.crash();
        m.fsck_clean();
        m.mount(&[]);
        if every > 0 {
            assert_eq!(
                fs::read(m.p("unsynced")).unwrap(),
                data,
                "committed by the periodic commit"
            );
        } else {
            assert!(
                !m.p("unsynced").exists(),
                "commit=0: never committed, lost in the crash"
            );
        }
        // A process that briefly looks at the mount (under load: a concurrent test's child
        // between fork and exec) can make the unmount busy for a moment: retry a little.
        let mut o = m.umount();
        for _ in 0..20 {
            if o.status.success() || !text(&o).contains("busy") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
            o = m.umount();
        }
        assert!(o.status.success(), "{}", text(&o));
    }
}

/// Missing names are answered as negative entries the kernel caches: creates, renames and
/// mkdirs through the mount must still be seen at once.
#[test]
fn negative_entries_never_hide_new_names() {
    let m = Mount::new("256M");
    m.mount(&[]);
    for _ in 0..3 {
        assert_eq!(
            fs::metadata(m.p("x")).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
    }
    write_file(&m.p("x"), b"1", false);
    assert_eq!(fs::read(m.p("x")).unwrap(), b"1");
    assert!(!m.p("y").exists());
    fs::rename(m.p("x"), m.p("y")).unwrap();
    assert!(!m.p("x").exists());
    assert_eq!(fs::read(m.p("y")).unwrap(), b"1");
    fs::create_dir(m.p("x")).unwrap();
    assert!(fs::metadata(m.p("x")).unwrap().is_dir());
    assert!(!m.p("x/z").exists());
    // Another process (a shell) creates the name the test process just failed to find.
    let st = Command::new("sh")
        .arg("-c")
        .arg("echo 2 > x/z && ln -s z x/l")
        .current_dir(&m.mnt)
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(fs::read(m.p("x/l")).unwrap(), b"2\n");
    let o = m.umount();
    assert!(o.status.success(), "{}", text(&o));
}

/// Unmodified SQLite built with SQLITE_ENABLE_BATCH_ATOMIC_WRITE (tools/sqlite-batch) finds
/// the F2FS atomic-write interface on intactfs and commits each transaction as one atomic
/// region: strace shows START/COMMIT_ATOMIC_WRITE and no journal file; and killing the
/// daemon while transactions run leaves the old or the new database, never a mix.
#[test]
fn sqlite_batch_atomic_write_commits_without_a_journal_and_survives_sigkill() {
    let dir = common::sqlite_batch();
    let sq = dir.join("sqlite-batch");
    let m = Mount::new("256M");
    m.mount(&[]);
    let t = sqlite_batch_traced(&m, &sq, "openat,ioctl,rename,unlink");
    assert!(
        !t.lines().any(|l| l.contains("F2FS") && l.contains("= -1")),
        "an atomic-write ioctl failed:\n{t}"
    );

    // Crashes mid-transaction, at a different moment each round.
    sqlite_batch_crash_rounds(&m, &sq);
    let o = m.umount();
    assert!(o.status.success(), "{}", text(&o));
}

/// The transactional-flash device end to end: mkfs --device txflash, a mount that commits
/// through device transactions (SQLite's batch atomic writes and an overwritten file), a
/// SIGKILL, recovery; and a damaged txflash image refused by fsck and mount with a message
/// that says what is wrong.
#[test]
fn txflash_images_mount_recover_and_refuse_damage() {
    let m = Mount::new("64M");
    let o = run(intact()
        .args([
            "fs", "mkfs", "--force", "--device", "txflash", "--size", "64M",
        ])
        .arg(&m.img));
    assert!(
        o.status.success() && text(&o).contains("txflash device"),
        "{}",
        text(&o)
    );
    let o = run(intact()
        .args(["fs", "mkfs", "--device", "txflash"])
        .arg(m.dir.path().join("nosize")));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("give --size"), "{}", text(&o));
    m.mount(&[]);
    write_file(&m.p("f"), &[7u8; 20000], true);
    {
        // Overwritten (no truncate): rewritten in place, in one device transaction.
        let mut f = fs::OpenOptions::new().write(true).open(m.p("f")).unwrap();
        f.write_all(&[8u8; 20000]).unwrap();
        f.sync_all().unwrap();
    }
    m.crash();
    m.fsck_clean();
    m.mount(&[]);
    assert_eq!(fs::read(m.p("f")).unwrap(), vec![8u8; 20000]);
    let o = m.umount();
    assert!(o.status.success(), "{}", text(&o));
    // Damage the root record that holds the device's mapping (the newest of the two).
    let mut img = fs::read(&m.img).unwrap();
    for b in &mut img[520..540] {
        *b ^= 0x5a;
    }
    for b in &mut img[20..40] {
        *b ^= 0x5a;
    }
    fs::write(&m.img, &img).unwrap();
    for args in [vec!["fs", "fsck"], vec!["fs", "dump"]] {
        let o = run(intact().args(&args).arg(&m.img));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains("txflash image") && text(&o).contains("root"),
            "{args:?}: {}",
            text(&o)
        );
    }
    let o = run(intact()
        .args(["fs", "mount"])
        .arg(&m.img)
        .arg(&m.mnt)
        .arg("--daemon")
        .arg("--pid-file")
        .arg(&m.pidfile));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("txflash image"), "{}", text(&o));
    assert!(!mounted_on(&m.mnt));
}

/// `intact fs exec --atomic`: the command is one atomic region — committed (durably) when
/// it succeeds, aborted when it fails, with its exit status passed on; nested and
/// off-mount use get clear errors.
#[test]
fn exec_atomic_commits_on_success_and_aborts_on_failure() {
    let m = Mount::new("64M");
    m.mount(&[]);
    write_file(&m.p("a"), b"old", true);
    let exec = |script: &str| {
        run(intact()
            .current_dir(&m.mnt)
            .args(["fs", "exec", "--mount"])
            .arg(&m.mnt)
            .args(["--atomic", "--", "sh", "-c", script]))
    };
    let o = exec("echo new > a; echo made > b; mv b c; exit 7");
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    assert!(
        text(&o).contains("exited with status 7: its changes were aborted"),
        "{}",
        text(&o)
    );
    assert_eq!(fs::read(m.p("a")).unwrap(), b"old");
    assert!(!m.p("b").exists() && !m.p("c").exists());
    let o = exec("echo new > a && echo made > c");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // Nested: the inner exec is in the outer one's region.
    let inner = format!(
        "{} fs exec --mount {} --atomic -- true",
        env!("CARGO_BIN_EXE_intact"),
        m.mnt.display()
    );
    let o = exec(&inner);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("regions do not nest"), "{}", text(&o));
    // Off the mount.
    let o = run(intact()
        .current_dir(&m.mnt)
        .args(["fs", "exec", "--mount", "/tmp", "--atomic", "--", "true"]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("not on an intactfs mount"),
        "{}",
        text(&o)
    );
    // What the successful command did is durable: a crash now keeps it.
    m.crash();
    m.mount(&[]);
    assert_eq!(fs::read(m.p("a")).unwrap(), b"new\n");
    assert_eq!(fs::read(m.p("c")).unwrap(), b"made\n");
    let o = m.umount();
    assert!(o.status.success(), "{}", text(&o));
}

/// `-o region_limit=SIZE`: a region's data stays in memory until its end, so a write that
/// would take the regions past the limit fails with ENOSPC (and the region can still be
/// aborted); a limit below 1M is refused at mount.
#[test]
fn region_limit_bounds_what_a_region_keeps_in_memory() {
    let m = Mount::new("64M");
    let o = run(intact()
        .args(["fs", "mount"])
        .arg(&m.img)
        .arg(&m.mnt)
        .args(["-o", "region_limit=4K"]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("at least 1M"), "{}", text(&o));
    m.mount(&["-o", "region_limit=1M"]);
    // SAFETY: the child only does file I/O and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let d = fs::File::open(&m.mnt).unwrap();
            control::region_begin(d.as_raw_fd()).unwrap();
            let mut f = fs::File::create(m.p("big")).unwrap();
            let chunk = vec![1u8; 256 << 10];
            let mut err = None;
            for _ in 0..8 {
                if let Err(e) = f.write_all(&chunk) {
                    err = Some(e);
                    break;
                }
            }
            assert_eq!(
                err.and_then(|e| e.raw_os_error()),
                Some(libc::ENOSPC),
                "2 MiB in a region under a 1M limit"
            );
            control::region_abort(d.as_raw_fd()).unwrap();
        }))
        .map(|_| 0)
        .unwrap_or(1);
        // SAFETY: leaving the forked child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the child's checks failed"
    );
    assert!(!m.p("big").exists(), "the aborted region's file is gone");
    let o = m.umount();
    assert!(o.status.success(), "{}", text(&o));
}

/// A pmem image (`mkfs --device pmem`): the mount serves it with AD-transactions (TX_*
/// ioctls). A two-file transaction open when the daemon is killed leaves neither file
/// changed; a committed one and legacy writes survive; fsck checks a copy without changing
/// the image; a damaged superblock is refused by fsck and mount.
#[test]
fn pmem_images_mount_with_transactions_and_survive_sigkill() {
    let m = Mount::new("16M");
    let o = run(intact()
        .args(["fs", "mkfs", "--force", "--device", "pmem", "--size", "16M"])
        .arg(&m.img));
    assert!(
        o.status.success() && text(&o).contains("pmem device"),
        "{}",
        text(&o)
    );
    m.mount(&[]);
    write_file(&m.p("a"), b"old-a", true);
    write_file(&m.p("b"), b"old-b", false);
    let open_rw = |n: &str| {
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(m.p(n))
            .unwrap()
    };
    let (fa, fb) = (open_rw("a"), open_rw("b"));
    // Committed: both new.
    let tx = control::tx_begin(fa.as_raw_fd()).unwrap();
    control::tx_add(fb.as_raw_fd(), tx).unwrap();
    for f in [&fa, &fb] {
        f.set_len(0).unwrap();
        std::os::unix::fs::FileExt::write_all_at(f, b"new", 0).unwrap();
    }
    control::tx_commit(fa.as_raw_fd(), tx).unwrap();
    assert_eq!(
        control::tx_commit(fa.as_raw_fd(), tx)
            .unwrap_err()
            .raw_os_error(),
        Some(libc::EINVAL),
        "commit of a committed transaction"
    );
    // Open at the crash: neither changes.
    let tx = control::tx_begin(fa.as_raw_fd()).unwrap();
    control::tx_add(fb.as_raw_fd(), tx).unwrap();
    for f in [&fa, &fb] {
        std::os::unix::fs::FileExt::write_all_at(f, b"NEWER!", 0).unwrap();
    }
    assert_eq!(
        fs::read(m.p("b")).unwrap(),
        b"NEWER!",
        "no isolation: the change is visible at once"
    );
    write_file(&m.p("legacy"), &[9u8; 50000], false);
    drop((fa, fb));
    m.crash();
    let o = run(intact().args(["fs", "fsck"]).arg(&m.img));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("1 uncommitted transaction(s) to undo"),
        "{}",
        text(&o)
    );
    m.mount(&[]);
    assert_eq!(
        (fs::read(m.p("a")).unwrap(), fs::read(m.p("b")).unwrap()),
        (b"new".to_vec(), b"new".to_vec())
    );
    assert_eq!(fs::read(m.p("legacy")).unwrap(), vec![9u8; 50000]);
    let o = m.umount();
    assert!(o.status.success(), "{}", text(&o));
    m.fsck_clean();
    // A damaged superblock: refused, nothing mounted.
    let mut img = fs::read(&m.img).unwrap();
    img[20] ^= 0x5a;
    fs::write(&m.img, &img).unwrap();
    let o = run(intact().args(["fs", "fsck"]).arg(&m.img));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("DAMAGE") && text(&o).contains("superblock"),
        "{}",
        text(&o)
    );
    let o = run(intact()
        .args(["fs", "mount"])
        .arg(&m.img)
        .arg(&m.mnt)
        .arg("--daemon")
        .arg("--pid-file")
        .arg(&m.pidfile));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("cannot mount the pmem image"),
        "{}",
        text(&o)
    );
    assert!(!mounted_on(&m.mnt));
}

/// Background checkpoints on a pmem mount (issue 28, FCFS 002 §III-E): with a small log,
/// overwrites keep checkpoint work due; the daemon's checkpointer thread runs it in units
/// between requests (the unmount's log line counts them, and `pmem_ckpt=inline` runs none);
/// every acknowledged write is read back after a remount and after a SIGKILL that lands
/// while the checkpointer has work.
#[test]
fn pmem_background_checkpoints_run_between_requests_and_survive_sigkill() {
    let m = Mount::new("32M");
    let o = run(intact()
        .args(["fs", "mkfs", "--force", "--device", "pmem", "--size", "32M"])
        .args(["--journal", "64K"])
        .arg(&m.img));
    assert!(o.status.success(), "{}", text(&o));
    const FILES: usize = 8;
    const ROUNDS: usize = 300;
    let contents = |round: usize| vec![(round % 251) as u8; 12 << 10];
    // What each file holds once `rounds` overwrites were acknowledged.
    let expect = |rounds: usize, f: usize| (0..rounds).rev().find(|r| r % FILES == f);
    let check = |rounds: usize| {
        for f in 0..FILES {
            let want = expect(rounds, f).map(contents).unwrap_or_default();
            let got = fs::read(m.p(&format!("f{f}"))).unwrap_or_default();
            assert!(got == want, "f{f} after {rounds} acknowledged overwrites");
        }
    };
    // In place, not O_TRUNC: a truncation checkpoints the file's blocks inline (a redo
    // entry must not name a block it frees), which is not what this test is about.
    let overwrite = |r: usize| {
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o644)
            .open(m.p(&format!("f{}", r % FILES)))
            .unwrap();
        std::os::unix::fs::FileExt::write_all_at(&f, &contents(r), 0).unwrap();
    };
    let units_in_log = || {
        let log = fs::read_to_string(&m.log).unwrap();
        let line = log
            .lines()
            .rev()
            .find(|l| l.contains("background checkpoint units"));
        let line = line.unwrap_or_else(|| panic!("no unmount counts in the log:\n{log}"));
        let before = line.split(" background checkpoint units").next().unwrap();
        before.rsplit(' ').next().unwrap().parse::<u64>().unwrap()
    };
    for (opts, background) in [(&["-o", "pmem_ckpt=inline"][..], false), (&[][..], true)] {
        fs::write(&m.log, "").unwrap();
        m.mount(opts);
        for r in 0..ROUNDS {
            overwrite(r);
        }
        check(ROUNDS);
        let pid = m.pid();
        let o = m.umount();
        assert!(o.status.success(), "{}", text(&o));
        wait_exit(pid, "the daemon did not exit after the unmount");
        let units = units_in_log();
        assert_eq!(
            units > 0,
            background,
            "background units {units} with {opts:?}"
        );
        m.fsck_clean();
        m.mount(&[]);
        check(ROUNDS);
        let pid = m.pid();
        let o = m.umount();
        assert!(o.status.success(), "{}", text(&o));
        wait_exit(pid, "the daemon did not exit after the unmount");
    }
    // A crash while the checkpointer has work: every acknowledged overwrite is there.
    m.mount(&[]);
    for r in 0..ROUNDS / 2 {
        overwrite(r);
    }
    m.crash();
    m.fsck_clean();
    m.mount(&[]);
    check(ROUNDS / 2);
    let o = m.umount();
    assert!(o.status.success(), "{}", text(&o));
}

/// The pmem twin of `sqlite_batch_atomic_write_commits_without_a_journal_and_survives_sigkill`
/// (issue 14 item 5, the FCFS paper's §VI application case): on a pmem mount the F2FS
/// atomic-write ioctls are AD-transactions, so unmodified SQLite built with
/// SQLITE_ENABLE_BATCH_ATOMIC_WRITE commits each transaction as one transaction of the
/// engine with no journal file; START on a directory is EINVAL, a second START on the file
/// EBUSY, the close of the starting descriptor aborts; a transaction too large for the log
/// gets EFBIG and SQLite falls back to its journal; and killing the daemon while
/// transactions run leaves a whole number of them.
#[test]
fn pmem_sqlite_batch_atomic_write_is_one_transaction_per_commit_and_survives_sigkill() {
    let dir = common::sqlite_batch();
    let sq = dir.join("sqlite-batch");
    let m = Mount::new("64M");
    // A 256-entry log: SQLite's transactions below fit, a 1.2 MB row (~300 pages) does not.
    let o = run(intact()
        .args([
            "fs",
            "mkfs",
            "--force",
            "--device",
            "pmem",
            "--size",
            "64M",
            "--journal",
            "16K",
        ])
        .arg(&m.img));
    assert!(
        o.status.success() && text(&o).contains("log 256 entries"),
        "{}",
        text(&o)
    );
    m.mount(&[]);

    // The ioctls by hand.
    let ioctl = |f: &fs::File, cmd: u32| {
        // SAFETY: the F2FS ioctls here take no argument (GET_FEATURES is not used).
        let r = unsafe { libc::ioctl(f.as_raw_fd(), cmd as _, 0) };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap())
        }
    };
    write_file(&m.p("f"), b"old", false);
    let open_rw = || {
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(m.p("f"))
            .unwrap()
    };
    let (f1, f2) = (open_rw(), open_rw());
    assert_eq!(
        ioctl(
            &fs::File::open(&m.mnt).unwrap(),
            control::F2FS_IOC_START_ATOMIC_WRITE
        ),
        Err(libc::EINVAL),
        "START on a directory"
    );
    ioctl(&f1, control::F2FS_IOC_START_ATOMIC_WRITE).unwrap();
    assert_eq!(
        ioctl(&f2, control::F2FS_IOC_START_ATOMIC_WRITE),
        Err(libc::EBUSY),
        "a second START on the file"
    );
    std::os::unix::fs::FileExt::write_all_at(&f1, b"NEW", 0).unwrap();
    ioctl(&f1, control::F2FS_IOC_ABORT_VOLATILE_WRITE).unwrap();
    assert_eq!(fs::read(m.p("f")).unwrap(), b"old", "aborted");
    ioctl(&f1, control::F2FS_IOC_START_ATOMIC_WRITE).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f1, b"new", 0).unwrap();
    ioctl(&f1, control::F2FS_IOC_COMMIT_ATOMIC_WRITE).unwrap();
    ioctl(&f2, control::F2FS_IOC_START_ATOMIC_WRITE).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f2, b"NEW", 0).unwrap();
    drop(f2);
    assert_eq!(
        fs::read(m.p("f")).unwrap(),
        b"new",
        "the close of the starting descriptor aborts"
    );
    ioctl(&f1, control::F2FS_IOC_START_ATOMIC_WRITE).unwrap();
    ioctl(&f1, control::F2FS_IOC_COMMIT_ATOMIC_WRITE).unwrap();
    drop(f1);

    // Each batch is one AD-transaction here.
    let t = sqlite_batch_traced(&m, &sq, "openat,ioctl,rename,unlink,pwrite64");
    let (db, trace) = (m.p("t.db"), m.dir.path().join("strace.txt"));
    let count = |t: &str, what: &str| t.lines().filter(|l| l.contains(what)).count();
    assert!(
        !t.lines()
            .any(|l| (l.contains("F2FS") || l.contains("pwrite64")) && l.contains("= -1")),
        "an atomic-write ioctl or a page write failed:\n{t}"
    );
    // Too large for the log: EFBIG on a page write, ABORT, then SQLite's rollback journal.
    let o = run(Command::new("strace")
        .args(["-f", "-e", "trace=openat,ioctl,pwrite64", "-o"])
        .arg(&trace)
        .arg(&sq)
        .arg(&db)
        .args(["insert", "1", "1200000"]));
    assert!(o.status.success(), "the large transaction: {}", text(&o));
    let t = fs::read_to_string(&trace).unwrap();
    assert_eq!(count(&t, "EFBIG"), 1, "{t}");
    assert!(
        count(&t, "F2FS_IOC_ABORT") == 1 && count(&t, "-journal") > 0,
        "{t}"
    );
    let log = fs::read_to_string(&m.log).unwrap();
    assert!(log.contains("the F2FS atomic write does not fit"), "{log}");

    // Crashes mid-transaction, at a different moment each round.
    sqlite_batch_crash_rounds(&m, &sq);
    let o = m.umount();
    assert!(o.status.success(), "{}", text(&o));
    m.fsck_clean();
}

/// SQLite's batch atomic write under crashes: `sqlite-batch loop` commits transactions that
/// each rewrite 18 pages; the daemon is SIGKILLed after a few commits, at a different moment
/// each of three rounds; after fsck and a remount the database passes SQLite's check and
/// holds the last generation the writer printed or the next, with no hot journal.
/// Runs SQLite's batch atomic writes on a new database `t.db` of mount `m`: checks that
/// SQLite finds the interface, makes the table, then inserts 20 rows under strace (tracing
/// `syscalls` into `strace.txt` of the mount's directory) and checks that they were 20
/// START/COMMIT pairs and no journal. Returns the trace.
fn sqlite_batch_traced(m: &Mount, sq: &Path, syscalls: &str) -> String {
    let db = m.p("t.db");
    let o = run(Command::new(sq).arg(&db).arg("features"));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "batch_atomic yes",
        "{}",
        text(&o)
    );
    // The first transaction of a new database (CREATE TABLE) uses a journal (SQLite's rule);
    // every later one is a batch.
    let o = run(Command::new(sq).arg(&db).args(["insert", "1"]));
    assert!(o.status.success(), "{}", text(&o));
    let trace = m.dir.path().join("strace.txt");
    let o = run(Command::new("strace")
        .args(["-f", "-e", &format!("trace={syscalls}"), "-o"])
        .arg(&trace)
        .arg(sq)
        .arg(&db)
        .args(["insert", "20"]));
    assert!(o.status.success(), "strace sqlite-batch: {}", text(&o));
    let t = fs::read_to_string(&trace).unwrap();
    let count = |what: &str| t.lines().filter(|l| l.contains(what)).count();
    assert_eq!(count("F2FS_IOC_START_ATOMIC_WRITE"), 20, "{t}");
    assert_eq!(count("F2FS_IOC_COMMIT_ATOMIC_WRITE"), 20, "{t}");
    assert_eq!(count("-journal"), 0, "a journal file was used:\n{t}");
    t
}

fn sqlite_batch_crash_rounds(m: &Mount, sq: &Path) {
    let db = m.p("loop.db");
    let mut last = 0u64;
    for round in 0..3u64 {
        let mut w = Command::new(sq)
            .arg(&db)
            .arg("loop")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let out = w.stdout.take().unwrap();
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(out));
        let mut seen = 0;
        let want = 5 + 7 * round;
        while let Some(Ok(l)) = lines.next() {
            if let Some(g) = l.strip_prefix("committed ") {
                last = g.parse().unwrap();
                seen += 1;
                if seen >= want {
                    break;
                }
            }
        }
        assert!(seen >= want, "the writer stopped after {seen} commits");
        m.crash();
        let _ = w.kill();
        let _ = w.wait();
        // The writer ran on until the crash: what it printed after the lines read above
        // is still in the pipe, and each printed commit returned before it was printed.
        for l in lines.map_while(Result::ok) {
            if let Some(g) = l.strip_prefix("committed ") {
                last = g.parse().unwrap();
            }
        }
        m.fsck_clean();
        m.mount(&[]);
        let o = run(Command::new(sq).arg(&db).arg("check"));
        let got = String::from_utf8_lossy(&o.stdout).to_string();
        assert!(
            o.status.success(),
            "round {round}: the database after the crash: {}",
            text(&o)
        );
        let g: u64 = got
            .trim()
            .strip_prefix("consistent generation ")
            .and_then(|g| g.parse().ok())
            .unwrap_or_else(|| panic!("{got}"));
        assert!(
            g == last || g == last + 1,
            "round {round}: generation {g} after the crash, the writer had printed {last}"
        );
        assert!(!m.p("loop.db-journal").exists(), "a hot journal was left");
        last = g;
    }
}

/// The names of one getdents64(2) call on `dir` (None at the end of the directory).
fn getdents_names(dir: &fs::File) -> Option<Vec<String>> {
    let mut buf = vec![0u8; 1024];
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    let n = unsafe {
        libc::syscall(
            libc::SYS_getdents64,
            dir.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    assert!(n >= 0, "getdents64: {}", std::io::Error::last_os_error());
    let mut names = Vec::new();
    let mut at = 0;
    // struct linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name (NUL-terminated).
    while at < n as usize {
        let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
        assert!(
            reclen > 19 && at + reclen <= n as usize,
            "dirent of {reclen} bytes"
        );
        let name = &buf[at + 19..at + reclen];
        let end = name.iter().position(|&b| b == 0).expect("NUL-terminated");
        names.push(String::from_utf8_lossy(&name[..end]).into_owned());
        at += reclen;
    }
    (n > 0).then_some(names)
}

/// A listing that spans several getdents calls lists every entry once even when the
/// entries already listed are unlinked between the calls (as `rm -r` does): the offsets
/// the server gives are the entries' cookies, not their positions. On block and pmem.
#[test]
fn readdir_offsets_survive_unlinks_between_calls() {
    for device in ["block", "pmem"] {
        let m = Mount::new_on("16M", device);
        m.mount(&[]);
        let d = m.p("d");
        fs::create_dir(&d).unwrap();
        let files = 120;
        for i in 0..files {
            fs::write(d.join(format!("file-{i:03}")), b"").unwrap();
        }
        let dir = fs::File::open(&d).unwrap();
        let (mut seen, mut calls) = (std::collections::BTreeSet::new(), 0);
        while let Some(names) = getdents_names(&dir) {
            calls += 1;
            for n in names.into_iter().filter(|n| n.starts_with("file-")) {
                fs::remove_file(d.join(&n)).unwrap();
                assert!(seen.insert(n.clone()), "{device}: {n} listed twice");
            }
        }
        assert!(
            calls > 2,
            "{device}: the listing took {calls} calls (more wanted)"
        );
        assert_eq!(seen.len(), files, "{device}: entries listed (of {files})");
    }
}

/// An F2FS atomic write ends at the close of the starting descriptor, not at the close of
/// a copy a forked child inherited: a child that exits (or execs, closing its inherited
/// descriptors) sends a FLUSH for the same handle. Before, that FLUSH aborted the parent's
/// atomic write, and the parent's later writes went to the file as plain writes (the
/// flaky `pmem_sqlite_batch_atomic_write...`: a parallel test thread's `Command` forked
/// while the handle was open).
#[test]
fn a_forked_childs_close_does_not_end_the_parents_atomic_write() {
    for device in ["block", "pmem"] {
        let m = Mount::new("16M");
        if device == "pmem" {
            let o = run(intact()
                .args(["fs", "mkfs", "--force", "--device", "pmem", "--size", "16M"])
                .arg(&m.img));
            assert!(o.status.success(), "{}", text(&o));
        }
        m.mount(&[]);
        write_file(&m.p("f"), b"old", true);
        let f = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(m.p("f"))
            .unwrap();
        // SAFETY: the F2FS ioctls here take no argument.
        let start =
            unsafe { libc::ioctl(f.as_raw_fd(), control::F2FS_IOC_START_ATOMIC_WRITE as _, 0) };
        assert_eq!(start, 0, "{device}: START_ATOMIC_WRITE");
        // SAFETY: the child only exits, closing its copy of the descriptor.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: leave the forked child without running the harness's destructors.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        std::os::unix::fs::FileExt::write_all_at(&f, b"NEW", 0).unwrap();
        drop(f);
        assert_eq!(
            fs::read(m.p("f")).unwrap(),
            b"old",
            "{device}: the parent's close aborts its atomic write, whose write stays undone"
        );
        let o = m.umount();
        assert!(o.status.success(), "{}", text(&o));
    }
}
