//! `intact blk record` and `intact blk check` end to end, through the real binary: what the
//! recorder logs, a known crash bug caught and its fixed twin passing, bad input refused
//! with exit 2, Ctrl-C. Needs root, loop devices and FUSE (as the machines this project
//! runs on have); without them every test prints why and passes.
//!
//! Every run is given a scratch directory inside the test's temporary directory, so "left
//! nothing behind" means: no mount, no loop device and no staging or scratch directory
//! under it — other runs of `intact blk` on the machine do not disturb the check.

mod common;
use common::intact;
use intact_blk::images::{write_pieces, GenConfig, Generator, ImageKind};
use intact_blk::log::{BlockLog, Kind};
use intact_blk::logdir::hex;
use serde_json::Value;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// ext4 writes its 4 KiB superblock block at every mount and commit; torn into 512-byte
/// sectors it fails its checksum and the image does not mount, whatever the application
/// did. The tests that expect every image to mount model 4 KiB atomic writes.
const TEAR: &str = "4096";

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A temporary directory for one test, with `scratch/` for everything `intact blk` builds.
/// Dropping it unmounts and detaches whatever is left under it, so a failing test leaves
/// the machine clean too.
struct Env {
    dir: tempfile::TempDir,
}

/// Why these tests cannot run here, if they cannot.
fn unsupported() -> Option<String> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (intact blk attaches loop devices and mounts file systems)".into());
    }
    for dev in ["/dev/loop-control", "/dev/fuse"] {
        if !Path::new(dev).exists() {
            return Some(format!("{dev} is missing"));
        }
    }
    None
}

impl Env {
    fn new(test: &str) -> Option<Env> {
        if let Some(why) = unsupported() {
            common::cannot_run(&format!("blk test {test}"), &why);
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("intact-blk-test.")
            .tempdir()
            .unwrap();
        fs::create_dir(dir.path().join("scratch")).unwrap();
        Some(Env { dir })
    }

    fn p(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn scratch(&self) -> PathBuf {
        self.p("scratch")
    }

    /// An executable shell script.
    fn script(&self, name: &str, body: &str) -> PathBuf {
        let p = self.p(name);
        fs::write(&p, format!("#!/bin/sh\nset -e\n{body}")).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn record_cmd(&self, out: &str, args: &[&str], cmd: &[&str]) -> Command {
        let mut c = intact();
        c.args(["blk", "record"])
            .arg("--scratch")
            .arg(self.scratch())
            .arg("--out")
            .arg(self.p(out))
            .args(args)
            .arg("--")
            .args(cmd);
        c
    }

    fn record(&self, out: &str, args: &[&str], cmd: &[&str]) -> Output {
        self.record_cmd(out, args, cmd)
            .output()
            .expect("running intact blk record")
    }

    /// `intact blk check LOG` with this test's scratch, two jobs, no progress lines.
    fn check(&self, log: &str, args: &[&str]) -> Output {
        intact()
            .args(["blk", "check"])
            .arg(self.p(log))
            .arg("--scratch")
            .arg(self.scratch())
            .args(["-j", "2", "-q"])
            .args(args)
            .output()
            .expect("running intact blk check")
    }

    /// Mount points under the directory, deepest first.
    fn mounts(&self) -> Vec<String> {
        let root = self.dir.path().to_str().unwrap();
        let info = fs::read_to_string("/proc/self/mountinfo").unwrap();
        let mut v: Vec<String> = info
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|m| m.starts_with(root))
            .map(str::to_string)
            .collect();
        v.sort_by_key(|m| std::cmp::Reverse(m.len()));
        v
    }

    /// Loop devices whose backing file is under the directory.
    fn loops(&self) -> Vec<String> {
        let root = self.dir.path().to_str().unwrap();
        let mut v = Vec::new();
        for e in fs::read_dir("/sys/block").unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Ok(b) = fs::read_to_string(e.path().join("loop/backing_file")) {
                if b.trim().starts_with(root) {
                    v.push(format!("/dev/{name} ({})", b.trim()));
                }
            }
        }
        v
    }

    /// Everything a run may leave behind: mounts, loop devices, `.NAME.partial-*` staging
    /// directories next to the outputs, `intact-blk*` / `intact-check*` scratch directories.
    fn leftovers(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .mounts()
            .into_iter()
            .map(|m| format!("mounted: {m}"))
            .collect();
        v.extend(self.loops().into_iter().map(|l| format!("attached: {l}")));
        for d in [self.dir.path().to_path_buf(), self.scratch()] {
            for e in fs::read_dir(&d).unwrap().flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if n.contains(".partial-")
                    || n.starts_with("intact-blk")
                    || n.starts_with("intact-check")
                {
                    v.push(format!("left: {}", e.path().display()));
                }
            }
        }
        v
    }

    /// Nothing left behind. A loop device set to detach itself on last close (as `blk
    /// check` attaches images) can stay attached a few hundred milliseconds after intact has
    /// exited, while another program (a concurrent mkfs or fsck scanning loop devices) has
    /// it open: allow it a few seconds to go.
    fn assert_clean(&self, after: &str) {
        let start = Instant::now();
        let mut l = self.leftovers();
        while !l.is_empty() && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
            l = self.leftovers();
        }
        assert!(l.is_empty(), "after {after}, left behind: {l:#?}");
    }

    fn meta(&self, log: &str) -> Value {
        serde_json::from_str(&fs::read_to_string(self.p(log).join("meta.json")).unwrap()).unwrap()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        for m in self.mounts() {
            let _ = Command::new("umount").arg("-l").arg(&m).status();
        }
        for l in self.loops() {
            let dev = l.split(' ').next().unwrap_or_default().to_string();
            let _ = Command::new("losetup").arg("-d").arg(dev).status();
        }
    }
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn kinds(report: &Value, kind: &str) -> Vec<Value> {
    report["images"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == kind)
        .cloned()
        .collect()
}

/// The recorder sees the fsync as a flush, the log round-trips, and checking a clean
/// workload builds exactly the images the generator promises, all consistent, the final
/// one equal to the device at the end of recording.
#[test]
fn record_logs_flushes_and_check_builds_the_promised_images() {
    let Some(env) = Env::new("record_logs_flushes_and_check_builds_the_promised_images") else {
        return;
    };
    let w = env.script(
        "w.sh",
        "printf 'hello world\\n' > f.tmp\nsync f.tmp\nmv f.tmp f\necho done\n",
    );
    let o = env.record(
        "log",
        &["--fs", "ext4", "--size", "64M"],
        &[w.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("recorded"), "{}", text(&o));
    env.assert_clean("record");

    let log_dir = env.p("log");
    let meta = env.meta("log");
    let counts = &meta["counts"];
    let (writes, flushes) = (
        counts["writes"].as_u64().unwrap(),
        counts["flushes"].as_u64().unwrap(),
    );
    // The fsync (a journal commit with its cache flush) and the unmount each flush at least once.
    assert!(flushes >= 2, "{meta}");
    assert!(writes > 0, "{meta}");
    assert_eq!(meta["epochs"].as_u64(), Some(flushes + 1), "{meta}");
    assert_eq!(meta["workload"]["ok"], true, "{meta}");
    assert_eq!(meta["workload"]["exit_code"], 0, "{meta}");
    assert_eq!(meta["fs"], "ext4");
    assert_eq!(meta["size"], 64 << 20);
    assert_eq!(
        fs::read_to_string(log_dir.join("stdout")).unwrap(),
        "done\n"
    );
    assert_eq!(
        fs::metadata(log_dir.join("initial.img")).unwrap().len(),
        64 << 20
    );

    // The log agrees with its metadata, and the file's data went through the recorder.
    let log = BlockLog::open(&log_dir.join("blocks.log")).unwrap();
    let c = log.counts();
    assert_eq!(
        (c.writes, c.flushes, c.bytes),
        (writes, flushes, counts["bytes"].as_u64().unwrap())
    );
    assert_eq!(log.epochs().len() as u64, flushes + 1);
    assert_eq!(hex(&log.final_hash), meta["final_hash"].as_str().unwrap());
    let data_at = (0..log.records.len())
        .find(|&i| log.data(i).windows(12).any(|w| w == b"hello world\n"))
        .expect("the file's data is in the log");
    assert!(matches!(log.records[data_at].kind, Kind::Write { .. }));
    assert!(
        log.records[data_at..].iter().any(|r| r.kind == Kind::Flush),
        "no flush after the data"
    );

    let report_path = env.p("report.json");
    let o = env.check(
        "log",
        &[
            "--no-fsck",
            "--tear",
            TEAR,
            "--json",
            report_path.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    env.assert_clean("check");
    let report = json(&report_path);
    let images = report["images"].as_array().unwrap();
    let s = &report["summary"];
    assert_eq!(s["checked"].as_u64(), Some(images.len() as u64));
    assert_eq!(s["distinct"], s["checked"], "nothing sampled away");
    assert_eq!(s["consistent"], s["checked"], "{s}");
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains(&format!("consistent: {n}/{n}", n = images.len())),
        "{}",
        text(&o)
    );
    assert_eq!(kinds(&report, "final").len(), 1);
    let prefixes = kinds(&report, "prefix").len() as u64;
    // One per epoch, less those equal to another image (an epoch that changed nothing).
    assert!(
        (1..=flushes + 1).contains(&prefixes),
        "{prefixes} prefixes for {} epochs",
        flushes + 1
    );

    // Exactly the images the generator makes with the same bounds, in the same order.
    let gen = Generator::new(&log).unwrap();
    let (specs, distinct) = gen.generate(&GenConfig {
        tear: TEAR.parse().unwrap(),
        ..GenConfig::default()
    });
    assert_eq!(s["distinct"].as_u64(), Some(distinct as u64));
    assert_eq!(specs.len(), images.len());
    for (spec, image) in specs.iter().zip(images) {
        let want = serde_json::to_value(spec).unwrap();
        for k in ["id", "kind", "epoch", "members", "torn", "hash"] {
            assert_eq!(want[k], image[k], "image {}: {k}", spec.id);
        }
        assert_eq!(image["checker"]["verdict"], "pass");
    }
    // The final image, built as check builds it, is the device as recording left it.
    let last = specs.iter().find(|s| s.kind == ImageKind::Final).unwrap();
    let img = env.p("final.img");
    intact_blk::sys::clone_file(&log_dir.join("initial.img"), &img).unwrap();
    let f = fs::OpenOptions::new().write(true).open(&img).unwrap();
    write_pieces(&log, &f, &gen.pieces(&gen.sector_map(last))).unwrap();
    drop(f);
    assert_eq!(
        hex(&intact_blk::recorder::hash_file(&img).unwrap()),
        meta["final_hash"].as_str().unwrap()
    );
}

/// The stdout file each image's checker gets holds what the workload had printed before
/// that crash point (the log keeps output in order with the device's requests): a durability
/// check holds for a file synced before the message, and fails for one that was not.
#[test]
fn each_image_sees_only_the_output_printed_before_its_crash() {
    let Some(env) = Env::new("each_image_sees_only_the_output_printed_before_its_crash") else {
        return;
    };
    let w = env.script(
        "w.sh",
        "echo start\necho one > a\nsync a\necho 'a synced'\necho two > b\necho 'b written'\n",
    );
    let o = env.record(
        "log",
        &["--fs", "ext4", "--size", "64M"],
        &[w.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let synced = env.script("synced.sh", "if grep -q 'a synced' \"$2\"; then [ \"$(cat \"$1/a\" 2>/dev/null)\" = one ] || { echo 'a lost after a synced' >&2; exit 1; }; fi\n");
    let o = env.check("log", &["--checker", synced.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "a was synced before its message: {}",
        text(&o)
    );
    let unsynced = env.script("unsynced.sh", "if grep -q 'b written' \"$2\"; then [ \"$(cat \"$1/b\" 2>/dev/null)\" = two ] || { echo 'b lost after b written' >&2; exit 1; }; fi\n");
    let report = env.p("r.json");
    let o = env.check(
        "log",
        &[
            "--checker",
            unsynced.to_str().unwrap(),
            "--json",
            report.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "b was never synced: {}", text(&o));
    let r = json(&report);
    assert!(
        r["summary"]["checker_failures"].as_u64().unwrap() >= 1,
        "{}",
        r["summary"]
    );
    // The final image has everything: b is there.
    assert_eq!(kinds(&r, "final")[0]["checker"]["verdict"], "pass");
    env.assert_clean("checks");
}

/// A warm checker server (`--checker-server`, docs/checkers.md) judges every image as the
/// per-process checker does: the same verdict per image.
#[test]
fn a_warm_checker_server_gives_the_per_process_verdicts() {
    let Some(env) = Env::new("a_warm_checker_server_gives_the_per_process_verdicts") else {
        return;
    };
    let w = env.script(
        "w.sh",
        "echo one > a\nsync a\necho 'a synced'\necho two > b\necho 'b written'\n",
    );
    let o = env.record(
        "log",
        &["--fs", "ext4", "--size", "64M"],
        &[w.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let rule = "if grep -q 'b written' \"$out\"; then [ \"$(cat \"$dir/b\" 2>/dev/null)\" = two ] || fail='b lost after b written'; fi";
    let per_process = env.script(
        "pp.sh",
        &format!(
            "dir=$1 out=$2 fail=\n{rule}\n[ -z \"$fail\" ] || {{ echo \"$fail\" >&2; exit 1; }}\n"
        ),
    );
    let server = env.script("server.sh", &format!(
        "while IFS= read -r line; do\n  dir=$(printf '%s' \"$line\" | sed 's/.*\"crash_dir\":\"\\([^\"]*\\)\".*/\\1/')\n  out=$(printf '%s' \"$line\" | sed 's/.*\"stdout_file\":\"\\([^\"]*\\)\".*/\\1/')\n  fail=\n  {rule}\n  if [ -z \"$fail\" ]; then echo '{{\"verdict\":\"pass\"}}'; else echo '{{\"verdict\":\"fail\",\"message\":\"'\"$fail\"'\"}}'; fi\ndone\n"
    ));
    let verdicts = |flag: &str, cmd: &Path, name: &str| {
        let report = env.p(name);
        let o = env.check(
            "log",
            &[
                flag,
                cmd.to_str().unwrap(),
                "--json",
                report.to_str().unwrap(),
            ],
        );
        assert_eq!(o.status.code(), Some(1), "b was never synced: {}", text(&o));
        let r = json(&report);
        let images = r["images"].as_array().unwrap().clone();
        images
            .iter()
            .map(|i| {
                (
                    i["id"].as_u64().unwrap(),
                    i["checker"]["verdict"].as_str().unwrap().to_string(),
                    i["checker"]["stderr"]
                        .as_str()
                        .unwrap_or("")
                        .trim()
                        .to_string(),
                )
            })
            .collect::<Vec<_>>()
    };
    let a = verdicts("--checker", &per_process, "pp.json");
    let b = verdicts("--checker-server", &server, "server.json");
    assert!(a.iter().any(|v| v.1 == "fail"), "{a:?}");
    assert_eq!(a, b, "per-process and warm-server verdicts differ");
    env.assert_clean("checks");
}

/// Images built as reflinks of per-epoch base images (a scratch directory on a file system
/// that shares blocks) are the same images, with the same verdicts, as the default sparse
/// copies plus changed sectors.
#[test]
fn reflink_materialisation_gives_the_same_images_and_verdicts() {
    let Some(env) = Env::new("reflink_materialisation_gives_the_same_images_and_verdicts") else {
        return;
    };
    let w = env.script("w.sh", "i=0\nwhile [ $i -lt 12 ]; do printf 'record %s\\n' $i > f$i.tmp; [ $((i % 3)) -eq 0 ] && sync f$i.tmp; mv f$i.tmp f$i; i=$((i + 1)); done\n");
    let o = env.record(
        "log",
        &["--fs", "ext4", "--size", "64M"],
        &[w.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A scratch xfs (reflink=1) in a file of this test's directory.
    let xfs_img = env.p("scratch.xfs");
    fs::File::create(&xfs_img)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    assert!(Command::new("mkfs.xfs")
        .args(["-q", "-f", "-m", "reflink=1"])
        .arg(&xfs_img)
        .status()
        .unwrap()
        .success());
    let xfs = env.p("xfs");
    fs::create_dir(&xfs).unwrap();
    assert!(Command::new("mount")
        .args(["-o", "loop"])
        .arg(&xfs_img)
        .arg(&xfs)
        .status()
        .unwrap()
        .success());
    assert!(intact_blk::sys::supports_reflink(&xfs));
    let checker = env.script("check.sh", "cd \"$1\"\nfor f in f*; do case \"$(cat \"$f\")\" in 'record '*) ;; *) echo \"$f: torn\" >&2; exit 1;; esac; done\n");
    let (a, b) = (env.p("a.json"), env.p("b.json"));
    let o = env.check(
        "log",
        &[
            "--checker",
            checker.to_str().unwrap(),
            "--json",
            a.to_str().unwrap(),
        ],
    );
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    let o2 = intact()
        .args(["blk", "check"])
        .arg(env.p("log"))
        .arg("--scratch")
        .arg(&xfs)
        .args([
            "-j",
            "2",
            "-q",
            "--checker",
            checker.to_str().unwrap(),
            "--json",
            b.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        o2.status.code(),
        o.status.code(),
        "{}\n{}",
        text(&o),
        text(&o2)
    );
    // The reflink run really built base images (its scratch is gone, so look at the report).
    let (ra, rb) = (json(&a), json(&b));
    let (ia, ib) = (
        ra["images"].as_array().unwrap(),
        rb["images"].as_array().unwrap(),
    );
    assert!(ia.len() >= 10, "{}", ia.len());
    assert_eq!(ia.len(), ib.len());
    for (x, y) in ia.iter().zip(ib) {
        for k in ["id", "kind", "epoch", "members", "hash", "consistent"] {
            assert_eq!(x[k], y[k], "image {}: {k}", x["id"]);
        }
        assert_eq!(
            x["checker"]["verdict"], y["checker"]["verdict"],
            "image {}",
            x["id"]
        );
    }
    assert!(Command::new("umount").arg(&xfs).status().unwrap().success());
    env.assert_clean("reflink check");
}

/// Replacing a file by rename without fsync loses it on ext4 (data=writeback, and
/// noauto_da_alloc so that ext4 does not flush the data for the application): some crash
/// image has `data` neither old nor new. With fsync of the new file before the rename (and
/// of the directory after) every image has one or the other.
#[test]
fn rename_without_fsync_is_caught_and_with_fsync_passes() {
    let Some(env) = Env::new("rename_without_fsync_is_caught_and_with_fsync_passes") else {
        return;
    };
    let (old, new) = (env.p("old"), env.p("new"));
    fs::write(&old, "old content\n").unwrap();
    fs::write(&new, vec![b'N'; 64 << 10]).unwrap();
    let checker = env.script(
        "checker.sh",
        &format!(
            "f=\"$1/data\"\n[ -f \"$f\" ] || {{ echo 'data is missing' >&2; exit 1; }}\n\
             cmp -s \"$f\" {old} || cmp -s \"$f\" {new} || {{ echo \"data is neither old nor new ($(stat -c %s \"$f\") bytes)\" >&2; exit 1; }}\n",
            old = old.display(),
            new = new.display()
        ),
    );
    let write_new = "head -c 65536 /dev/zero | tr '\\0' N > data.tmp\n";
    let bad = env.script("bad.sh", &format!("{write_new}mv data.tmp data\n"));
    let safe = env.script(
        "safe.sh",
        &format!("{write_new}sync data.tmp\nmv data.tmp data\nsync .\n"),
    );
    // `data` with its old content is in the initial image, made durable by a clean unmount.
    let opts = [
        "--fs",
        "ext4",
        "--size",
        "64M",
        "--mount-opts",
        "data=writeback,noauto_da_alloc",
        "--setup",
        "printf 'old content\\n' > data",
    ];
    for (name, w) in [("bad", &bad), ("safe", &safe)] {
        let o = env.record(name, &opts, &[w.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o));
    }
    env.assert_clean("record");

    let run = |name: &str| {
        let r = env.p(&format!("{name}.json"));
        let o = env.check(
            name,
            &[
                "--checker",
                checker.to_str().unwrap(),
                "--tear",
                TEAR,
                "--json",
                r.to_str().unwrap(),
            ],
        );
        (o, json(&r))
    };
    let (o, report) = run("bad");
    assert_eq!(
        o.status.code(),
        Some(1),
        "the unsafe rename passed: {}",
        text(&o)
    );
    let s = &report["summary"];
    assert!(s["checker_failures"].as_u64().unwrap() >= 1, "{s}");
    assert_eq!(s["unmountable"], 0, "{s}");
    assert_eq!(s["fsck_errors"], 0, "{s}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("data is neither old nor new"),
        "{}",
        text(&o)
    );
    // Issue 31: one line per distinct failure with its count and one example image, kinds
    // in lower case as in the JSON; the counts add up to the inconsistent images.
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let counts: u64 = stdout
        .lines()
        .filter_map(|l| l.trim_start().split_once(" image(s): "))
        .map(|(n, _)| n.parse::<u64>().unwrap())
        .sum();
    let inconsistent = s["checked"].as_u64().unwrap() - s["consistent"].as_u64().unwrap();
    assert_eq!(counts, inconsistent, "{stdout}");
    assert!(stdout.contains("    e.g. image "), "{stdout}");
    assert!(
        !stdout.contains("Prefix") && !stdout.contains("Subset"),
        "{stdout}"
    );
    // The failures are crash images: what the workload left at unmount is fine.
    let last = &kinds(&report, "final")[0];
    assert_eq!(last["consistent"], true, "{last}");
    assert_eq!(report["checker"][0], checker.to_str().unwrap());

    let (o, report) = run("safe");
    assert_eq!(
        o.status.code(),
        Some(0),
        "the fsynced rename failed: {}",
        text(&o)
    );
    let s = &report["summary"];
    assert_eq!(s["checker_failures"], 0, "{s}");
    assert_eq!(s["consistent"], s["checked"], "{s}");
    assert!(s["checked"].as_u64().unwrap() > 1);
    assert!(
        report["images"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["fsck"]["clean"] == true),
        "fsck ran on every image and found it clean"
    );
    env.assert_clean("check");
}

/// `intact blk record` refuses what it cannot do with exit 2 and a message naming the
/// problem, and leaves nothing behind (an existing --out untouched).
#[test]
fn record_refuses_bad_input() {
    let Some(env) = Env::new("record_refuses_bad_input") else {
        return;
    };
    let expect = |o: Output, code: i32, needles: &[&str], what: &str| {
        assert_eq!(o.status.code(), Some(code), "{what}: {}", text(&o));
        let t = text(&o);
        for n in needles {
            assert!(t.contains(n), "{what}: {n:?} not in: {t}");
        }
        env.assert_clean(what);
    };
    expect(
        env.record("log", &["--fs", "zfs"], &["true"]),
        2,
        &["--fs", "unknown file system \"zfs\"", "ext4"],
        "an unknown --fs",
    );
    assert!(!env.p("log").exists());

    fs::create_dir(env.p("exists")).unwrap();
    fs::write(env.p("exists/keep"), "mine").unwrap();
    expect(
        env.record("exists", &["--fs", "ext4", "--size", "64M"], &["true"]),
        2,
        &["already exists"],
        "an existing --out",
    );
    assert_eq!(fs::read_to_string(env.p("exists/keep")).unwrap(), "mine");
    assert_eq!(fs::read_dir(env.p("exists")).unwrap().count(), 1);

    expect(
        env.record("log", &["--fs", "ext4", "--size", "1M"], &["true"]),
        2,
        &["--size", "too small"],
        "a 1M image",
    );
    expect(
        env.record("log", &["--fs", "ext4", "--size", "lots"], &["true"]),
        2,
        &["--size"],
        "an unreadable --size",
    );
    assert!(!env.p("log").exists());

    // A missing mkfs: PATH holds everything ext4 needs but mkfs.ext4.
    let bin = env.p("bin");
    fs::create_dir(&bin).unwrap();
    for prog in ["sh", "true", "e2fsck", "losetup", "mount", "umount"] {
        let found = ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(prog))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{prog} not installed"));
        std::os::unix::fs::symlink(found, bin.join(prog)).unwrap();
    }
    let o = env
        .record_cmd("log", &["--fs", "ext4", "--size", "64M"], &["true"])
        .env("PATH", &bin)
        .output()
        .unwrap();
    expect(
        o,
        2,
        &["mkfs.ext4", "not found", "apt-get install -y e2fsprogs"],
        "a missing mkfs.ext4",
    );
    assert!(!env.p("log").exists());
    assert_eq!(
        fs::read_dir(env.scratch()).unwrap().count(),
        0,
        "scratch space used before the tools were checked"
    );
}

/// A workload that fails is recorded (exit 1, the log kept and marked), and checking that
/// log is refused.
#[test]
fn a_failed_workload_is_kept_marked_and_not_checked() {
    let Some(env) = Env::new("a_failed_workload_is_kept_marked_and_not_checked") else {
        return;
    };
    let o = env.record(
        "log",
        &["--fs", "ext4", "--size", "64M"],
        &["sh", "-c", "echo partial > f; exit 3"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("the workload failed (exit status 3)"),
        "{}",
        text(&o)
    );
    env.assert_clean("the failed workload");
    let meta = env.meta("log");
    assert_eq!(meta["workload"]["ok"], false, "{meta}");
    assert_eq!(meta["workload"]["exit_code"], 3, "{meta}");
    assert!(
        meta["counts"]["writes"].as_u64().unwrap() > 0,
        "what it did is logged: {meta}"
    );

    let o = env.check("log", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("the recorded workload failed"),
        "{}",
        text(&o)
    );
    assert!(o.stdout.is_empty(), "a report was printed: {}", text(&o));
    env.assert_clean("check of the failed workload");
}

/// A truncated or damaged block log, a missing log directory and an unwritable --json are
/// refused with exit 2 before any image is built.
#[test]
fn check_refuses_bad_logs_and_outputs() {
    let Some(env) = Env::new("check_refuses_bad_logs_and_outputs") else {
        return;
    };
    let o = env.record(
        "log",
        &["--fs", "ext4", "--size", "64M"],
        &["sh", "-c", "echo x > f"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let good = env.p("log");
    let bytes = fs::read(good.join("blocks.log")).unwrap();
    let log = BlockLog::open(&good.join("blocks.log")).unwrap();

    // Copies of the log directory (the image hard-linked) with blocks.log replaced.
    let variant = |name: &str, blocks: &[u8]| {
        let d = env.p(name);
        fs::create_dir(&d).unwrap();
        for f in ["meta.json", "initial.img", "stdout"] {
            fs::hard_link(good.join(f), d.join(f)).unwrap();
        }
        fs::write(d.join("blocks.log"), blocks).unwrap();
    };
    variant("truncated", &bytes[..bytes.len() - 20]);
    // One byte flipped inside the data of the write in the middle of the log.
    let writes: Vec<usize> = (0..log.records.len())
        .filter(|&i| matches!(log.records[i].kind, Kind::Write { .. }))
        .collect();
    let mid = log.records[writes[writes.len() / 2]];
    let mut flipped = bytes.clone();
    flipped[mid.data_at + mid.len as usize / 2] ^= 0x40;
    variant("damaged", &flipped);

    let refused = |log: &str, args: &[&str], needles: &[&str]| {
        let o = env.check(log, args);
        assert_eq!(o.status.code(), Some(2), "{log}: {}", text(&o));
        for n in needles {
            assert!(text(&o).contains(n), "{log}: {n:?} not in: {}", text(&o));
        }
        assert!(
            o.stdout.is_empty(),
            "{log}: a report was printed: {}",
            text(&o)
        );
        assert_eq!(
            fs::read_dir(env.scratch()).unwrap().count(),
            0,
            "{log}: scratch space used"
        );
        env.assert_clean(log);
    };
    refused(
        "truncated",
        &[],
        &["blocks.log", "truncated", "record it again"],
    );
    refused(
        "damaged",
        &[],
        &["blocks.log", "damaged", "checksum mismatch"],
    );
    refused("no-such-log", &[], &["no-such-log", "not a directory"]);
    refused(
        "log",
        &["--json", "/nonexistent/x.json"],
        &["--json", "/nonexistent/x.json"],
    );
    refused("log", &["--tear", "100"], &["--tear"]);
    refused("log", &["--max-images", "0"], &["--max-images"]);

    // The untouched log still checks.
    let o = env.check("log", &["--no-fsck", "--tear", TEAR]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    env.assert_clean("check of the good log");
}

/// Ctrl-C while the workload runs: exit 130, no output, nothing mounted or attached, the
/// workload gone.
#[test]
fn ctrl_c_during_record_leaves_nothing() {
    let Some(env) = Env::new("ctrl_c_during_record_leaves_nothing") else {
        return;
    };
    let mut child = env
        .record_cmd("log", &["--fs", "ext4", "--size", "64M"], &["sleep", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    // Wait until the file system is mounted and the workload runs in it.
    let start = Instant::now();
    let workload = loop {
        let mnt = env.mounts().into_iter().any(|m| m.ends_with("/mnt"));
        let sleeper = children_of(pid)
            .into_iter()
            .find(|(_, comm)| comm == "sleep");
        if let (true, Some((p, _))) = (mnt, sleeper) {
            break p;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!(
                "intact exited early ({st}): {}",
                text(&child.wait_with_output().unwrap())
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the workload never started under a mount"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // SAFETY: signalling the process this test started.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("intact did not stop within 30 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    assert!(text(&o).contains("interrupted"), "{}", text(&o));
    assert!(!env.p("log").exists(), "an output was written");
    env.assert_clean("Ctrl-C");
    assert_eq!(
        fs::read_dir(env.scratch()).unwrap().count(),
        0,
        "scratch space left"
    );
    assert!(
        !Path::new(&format!("/proc/{workload}")).exists(),
        "the workload {workload} still runs"
    );
}

/// (pid, command name) of the children of `parent`.
fn children_of(parent: i32) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let ppid = stat[close + 1..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<i32>().ok());
        if ppid == Some(parent) {
            out.push((pid, comm));
        }
    }
    out
}

/// OptFS's promise on a real intactfs mount, checked on crash images of its device: a
/// gedit-style update (write a temporary file, fsync, rename over the document) and an
/// append to a log after each, run under `intact fs exec --fsync-as osync`, so every fsync
/// is an osync. Every crash image recovers to a prefix of the updates (the document whole,
/// the log at most one step behind it, never ahead), though the osync'd updates are not all
/// durable (some images lose the last ones) and the workload issued almost no flushes;
/// with plain fsync every sync is a flush.
#[test]
fn intactfs_osync_keeps_each_stream_a_prefix_on_every_crash_image() {
    let Some(env) = Env::new("intactfs_osync_keeps_each_stream_a_prefix_on_every_crash_image")
    else {
        return;
    };
    let w = env.script(
        "w.sh",
        "for i in 1 2 3 4 5; do\n  head -c 20000 /dev/zero | tr '\\0' \"$i\" > doc.tmp\n  sync doc.tmp\n  mv doc.tmp doc\n  echo \"$i\" >> log\n  sync log\ndone\necho saved 5\n",
    );
    let prefix = env.script(
        "prefix.sh",
        "d=\"$1\"\n[ -f \"$d/doc\" ] || { echo 'doc is missing' >&2; exit 1; }\n\
         k=$(head -c 1 \"$d/doc\")\n\
         [ \"$(stat -c %s \"$d/doc\")\" = 20000 ] && [ \"$(tr -d \"$k\" < \"$d/doc\" | wc -c)\" = 0 ] || { echo \"doc is torn or mixed\" >&2; exit 1; }\n\
         m=0; [ -f \"$d/log\" ] && m=$(wc -l < \"$d/log\")\n\
         [ \"$m\" = 0 ] || [ \"$(cat \"$d/log\")\" = \"$(seq 1 \"$m\")\" ] || { echo \"log is not 1..$m\" >&2; exit 1; }\n\
         [ \"$m\" = \"$k\" ] || [ \"$m\" = $((k - 1)) ] || { echo \"doc version $k with log up to $m: out of order\" >&2; exit 1; }\n",
    );
    let durable = env.script("durable.sh", "[ \"$(head -c 1 \"$1/doc\")\" = 5 ] || { echo 'the last osync is not durable' >&2; exit 1; }\n");
    let intact_bin = env!("CARGO_BIN_EXE_intact");
    let opts = [
        "--fs",
        "intactfs",
        "--size",
        "64M",
        "--mount-opts",
        "commit=0,durability=3600",
        "--setup",
        "head -c 20000 /dev/zero | tr '\\0' 0 > doc",
    ];
    let o = env.record(
        "osync",
        &opts,
        &[
            intact_bin,
            "fs",
            "exec",
            "--mount",
            ".",
            "--fsync-as",
            "osync",
            "--",
            w.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = env.record("fsync", &opts, &[w.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    env.assert_clean("record");
    let flushes = |log: &str| env.meta(log)["counts"]["flushes"].as_u64().unwrap();
    // Ten fsyncs, each a flush with fsync; with osync the only flushes are the mount's and
    // unmount's (one of which, with fsync, finds nothing left to flush).
    assert!(
        flushes("fsync") >= 9 + flushes("osync"),
        "osync log: {} flushes, fsync log: {}",
        flushes("osync"),
        flushes("fsync")
    );

    let r = env.p("osync.json");
    let o = env.check(
        "osync",
        &[
            "--checker",
            prefix.to_str().unwrap(),
            "--json",
            r.to_str().unwrap(),
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "a crash image broke osync's prefix promise: {}",
        text(&o)
    );
    let s = &json(&r)["summary"];
    assert!(s["checked"].as_u64().unwrap() > 10, "{s}");
    assert_eq!(s["consistent"], s["checked"], "{s}");
    let o = env.check("osync", &["--checker", durable.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "every image held the last osync'd update: osync flushed? {}",
        text(&o)
    );
    env.assert_clean("check");
}

/// SQLite with batch atomic write (tools/sqlite-batch) on intactfs, block by block: the
/// writer's transactions go through the F2FS atomic-write ioctls (one atomic region each,
/// no journal file), and every crash image the recorded device writes allow holds a
/// database of one generation: the old or the new transaction, never a mix (issue 13).
#[test]
fn intactfs_sqlite_batch_atomic_write_is_old_or_new_on_every_crash_image() {
    let Some(env) =
        Env::new("intactfs_sqlite_batch_atomic_write_is_old_or_new_on_every_crash_image")
    else {
        return;
    };
    let sq = common::sqlite_batch().join("sqlite-batch");
    let sq = sq.to_str().unwrap();
    let check = env.script("check.sh", &format!("{sq} \"$1/t.db\" check >/dev/null\n[ ! -e \"$1/t.db-journal\" ] || {{ echo 'a journal was left' >&2; exit 1; }}\n"));
    // The setup makes the database (its first transaction journals: SQLite's rule for a
    // new file); the recorded run is six batch transactions of 18 pages each.
    let setup = format!("{sq} t.db loop 1 >/dev/null");
    let opts = [
        "--fs",
        "intactfs",
        "--size",
        "64M",
        "--mount-opts",
        "commit=0",
        "--setup",
        &setup,
    ];
    let o = env.record("sq", &opts, &[sq, "t.db", "loop", "6"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    env.assert_clean("record");
    let r = env.p("sq.json");
    let o = env.check(
        "sq",
        &[
            "--checker",
            check.to_str().unwrap(),
            "--json",
            r.to_str().unwrap(),
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "a crash image held a torn SQLite database: {}",
        text(&o)
    );
    let s = &json(&r)["summary"];
    assert!(s["checked"].as_u64().unwrap() > 6, "{s}");
    assert_eq!(s["consistent"], s["checked"], "{s}");
    env.assert_clean("check");
}

/// Issue 31: `intact blk record -- ./save` means the caller's ./save, although the
/// workload runs in the new file system; a program found nowhere is refused saying where
/// it was looked for, with nothing left behind.
#[test]
fn a_relative_workload_is_the_callers() {
    let Some(env) = Env::new("a_relative_workload_is_the_callers") else {
        return;
    };
    env.script("save", "echo v2 > data\nsync data\n");
    let o = env
        .record_cmd("log", &["--fs", "ext4"], &["./save"])
        .current_dir(env.dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(env.p("log").join("meta.json").exists());
    let o = env
        .record_cmd("log2", &["--fs", "ext4"], &["./nope"])
        .current_dir(env.dir.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("runs in the new file system"),
        "{}",
        text(&o)
    );
    assert!(!env.p("log2").exists());
    assert_eq!(fs::read_dir(env.scratch()).unwrap().count(), 0);
}
