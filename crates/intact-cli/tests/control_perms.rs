//! Who may call what (docs/fs-api.md): the control calls that can undo writes need the
//! right to make them, and a region, atomic write or transaction can be ended only by its
//! owner (issue 25 item 3). Each test mounts an image as root (`allow_other`, the default
//! for root), makes a 0644 file as root, and runs `tests/perms/actor.c` (over libintact)
//! as `nobody` next to root's own calls; every attack below succeeded before this rule
//! and undid root's fsynced or committed writes.

mod common;

use common::intact;
use common::mount::{run, text, Mount};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// `nobody`'s uid and gid, from the password database.
fn nobody() -> (u32, u32) {
    let name = std::ffi::CString::new("nobody").unwrap();
    // SAFETY: a NUL-terminated name; the result is read at once, before any other call.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    assert!(!pw.is_null(), "the user nobody is missing (/etc/passwd)");
    // SAFETY: non-null, as checked.
    unsafe { ((*pw).pw_uid, (*pw).pw_gid) }
}

/// Compiles the actor with libintact into `dir` (world-readable, so nobody can run it).
fn build_actor(dir: &Path) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = dir.join("actor");
    let st = Command::new("gcc")
        .args(["-Wall", "-O1", "-I"])
        .arg(root.join("libintact/include"))
        .arg("-o")
        .arg(&bin)
        .arg(root.join("crates/intact-cli/tests/perms/actor.c"))
        .arg(root.join("libintact/src/intact.c"))
        .status()
        .expect("gcc must be installed (apt-get install -y gcc)");
    assert!(st.success(), "compiling tests/perms/actor.c");
    bin
}

/// A running actor: its answers one line per step.
struct Actor {
    child: Child,
    stdin: Option<ChildStdin>,
    out: BufReader<ChildStdout>,
    who: &'static str,
}

impl Actor {
    fn spawn(bin: &Path, as_nobody: bool, steps: &[String]) -> Actor {
        let mut c = Command::new(bin);
        c.args(steps).stdin(Stdio::piped()).stdout(Stdio::piped());
        if as_nobody {
            let (uid, gid) = nobody();
            // SAFETY: only async-signal-safe calls between fork and exec.
            unsafe {
                c.pre_exec(move || {
                    if libc::setgroups(0, std::ptr::null()) != 0
                        || libc::setgid(gid) != 0
                        || libc::setuid(uid) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = c.spawn().expect("running the actor");
        let stdin = child.stdin.take();
        let out = BufReader::new(child.stdout.take().unwrap());
        let who = if as_nobody { "nobody" } else { "root" };
        Actor {
            child,
            stdin,
            out,
            who,
        }
    }

    /// The answer to the next step, which must be `step`: "ok", "ok ID" or an errno name.
    fn answer(&mut self, step: &str) -> String {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        let rest = line
            .trim_end()
            .strip_prefix(step)
            .unwrap_or_else(|| panic!("{}'s actor: expected step {step}, got {line:?}", self.who));
        rest.trim().to_string()
    }

    fn expect(&mut self, step: &str, want: &str) {
        let got = self.answer(step);
        assert_eq!(got, want, "{} {step}", self.who);
    }

    /// The id a `tx-begin` step printed.
    fn tx_id(&mut self) -> u64 {
        let got = self.answer("tx-begin");
        let id = got
            .strip_prefix("ok ")
            .unwrap_or_else(|| panic!("{}'s tx-begin failed: {got}", self.who));
        id.parse().unwrap()
    }

    /// Lets the actor past its `wait` step.
    fn go(&mut self) {
        let w = self.stdin.as_mut().unwrap();
        w.write_all(b"go\n").unwrap();
        w.flush().unwrap();
    }

    fn finish(mut self) {
        drop(self.stdin.take());
        let st = self.child.wait().unwrap();
        assert!(st.success(), "{}'s actor exited with {st}", self.who);
    }
}

impl Drop for Actor {
    fn drop(&mut self) {
        // A failed assertion leaves the actor waiting: end it (our own child, by pid).
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A mount of a `device` image that nobody can reach, and the actor built next to it.
fn mounted(device: &str) -> (Mount, PathBuf) {
    let m = Mount::new("64M");
    let o = run(intact()
        .args(["fs", "mkfs", "--force", "--device", device, "--size", "64M"])
        .arg(&m.img));
    assert!(o.status.success(), "mkfs --device {device}: {}", text(&o));
    // The temporary directory is 0700: nobody must reach the mount point and the actor.
    fs::set_permissions(m.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    m.mount(&[]);
    let bin = build_actor(m.dir.path());
    (m, bin)
}

/// A 0644 file of root's holding `old`, durable.
fn roots_file(m: &Mount, name: &str) -> String {
    let p = m.p(name);
    fs::write(&p, b"old").unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
    fs::File::open(&p).unwrap().sync_all().unwrap();
    p.to_str().unwrap().to_string()
}

/// Root overwrites the file with `text` and fsyncs: acknowledged, durable.
fn root_writes(path: &str, text: &str) {
    let f = fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(text.as_bytes(), 0).unwrap();
    f.sync_all().unwrap();
}

fn steps(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| x.to_string()).collect()
}

/// CFS: nobody cannot ADD root's file through a read-only descriptor, so its ABORT does
/// not undo root's fsynced write; nobody cannot end root's region either.
fn regions_need_write_access_and_end_only_by_owner(device: &str) {
    let (m, bin) = mounted(device);
    let v = roots_file(&m, "victim");
    let s = |k: &str| format!("{k}:{v}");
    let mut n = Actor::spawn(
        &bin,
        true,
        &steps(&[
            &s("open-rw"),
            &s("open-ro"),
            "begin",
            "add",
            "wait",
            "abort",
        ]),
    );
    n.expect(&s("open-rw"), "EACCES");
    n.expect(&s("open-ro"), "ok");
    n.expect("begin", "ok");
    n.expect("add", "EBADF");
    root_writes(&v, "new");
    n.go();
    n.expect("abort", "ok");
    n.finish();
    assert_eq!(
        fs::read(&v).unwrap(),
        b"new",
        "root's fsynced write survives"
    );

    // Root's own region: nobody has no way to name it.
    let w = roots_file(&m, "region");
    let mut r = Actor::spawn(
        &bin,
        false,
        &steps(&[
            &format!("open-rw:{w}"),
            "begin",
            "write:new",
            "wait",
            "commit",
        ]),
    );
    for st in [format!("open-rw:{w}").as_str(), "begin", "write:new"] {
        r.expect(st, "ok");
    }
    let mut n = Actor::spawn(
        &bin,
        true,
        &steps(&[&format!("open-ro:{w}"), "commit", "abort"]),
    );
    n.expect(&format!("open-ro:{w}"), "ok");
    n.expect("commit", "EINVAL");
    n.expect("abort", "EINVAL");
    n.finish();
    r.go();
    r.expect("commit", "ok");
    r.finish();
    assert_eq!(
        fs::read(&w).unwrap(),
        b"new",
        "root's region committed whole"
    );

    // A sticky shared directory: nobody's region creates an entry, root creates another
    // and fsyncs; nobody's abort takes back only its own.
    let shared = m.p("shared");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
    let (dir, own) = (
        format!("open-ro:{}", shared.display()),
        format!("create:{}/nobody's", shared.display()),
    );
    let mut n = Actor::spawn(&bin, true, &steps(&[&dir, "begin", &own, "wait", "abort"]));
    for st in [&dir, "begin", &own] {
        n.expect(st, "ok");
    }
    fs::write(shared.join("root's"), b"root's").unwrap();
    fs::File::open(shared.join("root's"))
        .unwrap()
        .sync_all()
        .unwrap();
    fs::File::open(&shared).unwrap().sync_all().unwrap();
    n.go();
    n.expect("abort", "ok");
    n.finish();
    assert!(shared.join("root's").exists(), "root's new file survives");
    assert!(!shared.join("nobody's").exists(), "nobody's region aborted");
    m.umount_clean();
}

/// F2FS: START, COMMIT and ABORT through a read-only descriptor are EBADF, and COMMIT and
/// ABORT through another writable handle of the owner are EINVAL (START: EBUSY); root's
/// atomic write commits whole.
fn f2fs_atomic_writes_belong_to_their_handle(device: &str) {
    let (m, bin) = mounted(device);
    let v = roots_file(&m, "db");
    let (rw, ro) = (format!("open-rw:{v}"), format!("open-ro:{v}"));
    let mut r = Actor::spawn(
        &bin,
        false,
        &steps(&[
            &rw,
            &rw,
            "use:0",
            "f2fs-start",
            "write:new",
            "wait",
            "use:1",
            "f2fs-abort",
            "f2fs-commit",
            "f2fs-start",
            "use:0",
            "f2fs-commit",
        ]),
    );
    for st in [&rw, &rw, "use:0", "f2fs-start", "write:new"] {
        r.expect(st, "ok");
    }
    let mut n = Actor::spawn(
        &bin,
        true,
        &steps(&[&ro, "f2fs-abort", "f2fs-commit", "f2fs-start"]),
    );
    n.expect(&ro, "ok");
    for st in ["f2fs-abort", "f2fs-commit", "f2fs-start"] {
        n.expect(st, "EBADF");
    }
    n.finish();
    r.go();
    r.expect("use:1", "ok");
    r.expect("f2fs-abort", "EINVAL");
    r.expect("f2fs-commit", "EINVAL");
    r.expect("f2fs-start", "EBUSY");
    r.expect("use:0", "ok");
    r.expect("f2fs-commit", "ok");
    r.finish();
    assert_eq!(
        fs::read(&v).unwrap(),
        b"new",
        "root's atomic write committed"
    );
    m.umount_clean();
}

#[test]
fn block_regions_need_write_access_and_end_only_by_owner() {
    regions_need_write_access_and_end_only_by_owner("block");
}

#[test]
fn txflash_regions_need_write_access_and_end_only_by_owner() {
    regions_need_write_access_and_end_only_by_owner("txflash");
}

#[test]
fn block_f2fs_atomic_writes_belong_to_their_handle() {
    f2fs_atomic_writes_belong_to_their_handle("block");
}

#[test]
fn txflash_f2fs_atomic_writes_belong_to_their_handle() {
    f2fs_atomic_writes_belong_to_their_handle("txflash");
}

#[test]
fn pmem_f2fs_atomic_writes_belong_to_their_handle() {
    f2fs_atomic_writes_belong_to_their_handle("pmem");
}

/// Pmem: nobody's TX_BEGIN on root's file (read-only descriptor), root's directory, or a
/// sticky world-writable directory (where nobody may not remove root's entries) fails, so
/// its TX_ABORT cannot undo root's fsynced write or root's new file.
#[test]
fn pmem_tx_begin_needs_the_right_to_change() {
    let (m, bin) = mounted("pmem");
    let v = roots_file(&m, "victim");
    let shared = m.p("shared");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
    let mnt = m.mnt.to_str().unwrap().to_string();
    let sticky = shared.to_str().unwrap().to_string();
    for (target, want, dir) in [
        (&v, "EBADF", &m.mnt),
        (&mnt, "EACCES", &m.mnt),
        (&sticky, "EACCES", &shared),
    ] {
        let open = format!("open-ro:{target}");
        let mut n = Actor::spawn(
            &bin,
            true,
            &steps(&[&open, "tx-begin", "wait", "tx-abort:$1"]),
        );
        n.expect(&open, "ok");
        n.expect("tx-begin", want);
        let text = format!("new {want} {}", dir.display());
        root_writes(&v, &text);
        let made = dir.join(format!("root's {want}"));
        fs::write(&made, b"root's").unwrap();
        fs::File::open(dir).unwrap().sync_all().unwrap();
        n.go();
        n.expect("tx-abort:$1", "EINVAL");
        n.finish();
        assert_eq!(
            fs::read(&v).unwrap(),
            text.as_bytes(),
            "root's write survives"
        );
        assert!(made.exists(), "root's new file {} survives", made.display());
    }
    m.umount_clean();
}

/// Pmem: a transaction cannot claim a shared sticky directory by changing it (renaming its
/// own file into it): its abort would otherwise remove root's fsynced entry made there.
#[test]
fn pmem_transactions_cannot_claim_a_shared_sticky_directory() {
    let (m, bin) = mounted("pmem");
    let shared = m.p("shared");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
    let mine = shared.join("mine");
    let (mine_s, shared_s) = (mine.display().to_string(), shared.display().to_string());
    let st = steps(&[
        &format!("mkdir:{mine_s}"),
        &format!("open-ro:{mine_s}"),
        "tx-begin",
        &format!("create:{mine_s}/x"),
        &format!("rename:{mine_s}/x|{shared_s}/x"),
        "wait",
        "tx-abort:$1",
    ]);
    let mut n = Actor::spawn(&bin, true, &st);
    n.expect(&st[0], "ok");
    n.expect(&st[1], "ok");
    n.tx_id();
    n.expect(&st[3], "ok");
    n.expect(&st[4], "EACCES");
    let made = shared.join("root's");
    fs::write(&made, b"root's").unwrap();
    fs::File::open(&made).unwrap().sync_all().unwrap();
    fs::File::open(&shared).unwrap().sync_all().unwrap();
    n.go();
    n.expect("tx-abort:$1", "ok");
    n.finish();
    assert!(made.exists(), "root's new file survives nobody's abort");
    assert!(!mine.join("x").exists(), "nobody's transaction was aborted");
    m.umount_clean();
}

/// Pmem: root's transactions can be added to, committed or aborted only by root's own
/// process (EPERM for nobody holding the real id), neighbouring ids are unknown
/// (EINVAL), and root too needs a writable descriptor for TX_BEGIN.
#[test]
fn pmem_transactions_end_only_by_their_owner() {
    let (m, bin) = mounted("pmem");
    let (a, b) = (roots_file(&m, "a"), roots_file(&m, "b"));
    let (ra, wa, wb) = (
        format!("open-ro:{a}"),
        format!("open-rw:{a}"),
        format!("open-rw:{b}"),
    );
    let mut r = Actor::spawn(
        &bin,
        false,
        &steps(&[
            &wa,
            "tx-begin",
            "write:new",
            &wb,
            "tx-begin",
            "write:new",
            "wait",
            "tx-commit:$1",
            "tx-commit:$2",
            &ra,
            "tx-begin",
        ]),
    );
    r.expect(&wa, "ok");
    let id1 = r.tx_id();
    r.expect("write:new", "ok");
    r.expect(&wb, "ok");
    let id2 = r.tx_id();
    r.expect("write:new", "ok");
    let guesses: Vec<u64> = [id1 + 1, id1 - 1, id2 + 1, id2 - 1, id1 ^ 1, id2 ^ 1]
        .into_iter()
        .filter(|g| *g != id1 && *g != id2)
        .collect();
    let mut attack = vec![format!("open-ro:{a}")];
    for op in ["tx-add", "tx-commit", "tx-abort"] {
        attack.push(format!("{op}:{id1}"));
    }
    for g in &guesses {
        attack.push(format!("tx-abort:{g}"));
    }
    let mut n = Actor::spawn(&bin, true, &attack);
    n.expect(&attack[0], "ok");
    for st in &attack[1..4] {
        n.expect(st, "EPERM");
    }
    for st in &attack[4..] {
        n.expect(st, "EINVAL");
    }
    n.finish();
    r.go();
    r.expect("tx-commit:$1", "ok");
    r.expect("tx-commit:$2", "ok");
    r.expect(&ra, "ok");
    r.expect("tx-begin", "EBADF");
    r.finish();
    assert_eq!(fs::read(&a).unwrap(), b"new");
    assert_eq!(fs::read(&b).unwrap(), b"new");
    m.umount_clean();
}
