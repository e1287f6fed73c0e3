//! `intact check` / `run` / `apm` end to end: real workloads recorded under strace, real
//! checkers, answers known from the thesis' undo-logging example (Figures 2.1/2.2) and the
//! key-value store example.

mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The thesis' built-ins and intactfs: the APMs whose fsync is a durability point and
/// whose expectations on the undo log are known (examples/undolog/README.md).
const ALL_APMS: &str = "default,ext3-j,ext3-o,ext3-w,ext4-o,btrfs,strict,intactfs";
/// Every built-in APM, as `intact apm list` shows them.
const BUILTIN_APMS: &str = "default,ext3-j,ext3-o,ext3-w,ext4-o,btrfs,ext4,ext4-dioread_lock,xfs,btrfs-linux6,strict,intactfs,intactfs-osync,nobarrier";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn gcc(src: &Path, out: &Path) {
    let st = Command::new("gcc")
        .args(["-g", "-O0", "-o"])
        .arg(out)
        .arg(src)
        .status()
        .expect("gcc must be installed");
    assert!(st.success(), "compiling {}", src.display());
}

/// Runs `intact check` and returns (exit code, stdout, stderr, parsed JSON report if any).
fn check(bundle: &Path, args: &[&str]) -> (i32, String, String, Option<serde_json::Value>) {
    let json = bundle.with_extension("report.json");
    let _ = std::fs::remove_file(&json);
    let out = intact()
        .arg("check")
        .arg(bundle)
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("-q")
        .output()
        .unwrap();
    let rep = std::fs::read_to_string(&json)
        .ok()
        .map(|t| serde_json::from_str(&t).expect("report is JSON"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        rep,
    )
}

/// APMs that expose at least one static vulnerability.
fn exposing(rep: &serde_json::Value) -> BTreeSet<String> {
    rep["static"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            s["apms"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
        })
        .collect()
}

fn set(names: &str) -> BTreeSet<String> {
    names
        .split(',')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

struct Undolog {
    _tmp: tempfile::TempDir,
    bin: PathBuf,
    root: PathBuf,
}

impl Undolog {
    fn new() -> Undolog {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("undolog");
        gcc(&repo().join("examples/undolog/undolog.c"), &bin);
        let root = tmp.path().to_path_buf();
        Undolog {
            _tmp: tmp,
            bin,
            root,
        }
    }
    /// Records `undolog update --measures M` on a fresh database; returns the bundle.
    fn record(&self, measures: &str, stacks: bool) -> PathBuf {
        let tag = measures.replace(['=', ','], "_");
        let dir = self.root.join(format!("db-{tag}"));
        std::fs::create_dir(&dir).unwrap();
        assert!(Command::new(&self.bin)
            .arg("init")
            .current_dir(&dir)
            .status()
            .unwrap()
            .success());
        let bundle = self.root.join(format!("b-{tag}"));
        let mut c = intact();
        c.arg("record").arg("--out").arg(&bundle);
        if !stacks {
            c.arg("--no-stacks");
        }
        let out = c
            .arg("--")
            .arg(&self.bin)
            .args(["update", "--measures", measures])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "record: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        bundle
    }
    fn checker(&self) -> String {
        // The checker runs `undolog recover` + the invariants; it is the same binary.
        format!("{} check", self.bin.display())
    }
}

/// Figure 2.1 (no measures) is vulnerable under every built-in APM; Figure 2.2 (all
/// measures) under none; each statically found vulnerability points at undolog.c.
#[test]
fn undolog_incorrect_and_correct() {
    let u = Undolog::new();
    let bad = u.record("none", true);
    let (code, text, err, rep) = check(&bad, &["--checker", &u.checker(), "--apm", ALL_APMS]);
    assert_eq!(code, 1, "{text}\n{err}");
    let rep = rep.unwrap();
    assert_eq!(exposing(&rep), set(ALL_APMS), "{text}");
    for s in rep["static"].as_array().unwrap() {
        for l in s["locations"].as_array().unwrap() {
            let l = l.as_str().unwrap();
            assert!(
                l.contains("undolog.c:") || l == "the output that follows it",
                "location {l} should be a line of undolog.c\n{text}"
            );
        }
    }
    // The durability vulnerability of the unlink (thesis §2.2: nothing is durable without fsync).
    assert!(
        rep["static"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["categories"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c == "durability")),
        "{text}"
    );
    assert!(text.contains("static vulnerabilit"), "{text}");

    let good = u.record("all", false);
    let (code, text, err, rep) = check(&good, &["--checker", &u.checker(), "--apm", ALL_APMS]);
    assert_eq!(code, 0, "{text}\n{err}");
    assert!(rep.unwrap()["static"].as_array().unwrap().is_empty());
    assert!(text.contains("No vulnerability found"), "{text}");
}

/// Removing one measure of Figure 2.2 exposes a vulnerability exactly under the APMs whose
/// file systems need it (see examples/undolog/README.md for the comparison with the
/// figure). Exhaustive exploration: the trace is small, and two of the measures only
/// matter in states ALICE's default strategy does not build (a reordering combined with
/// a partially persisted call).
#[test]
fn undolog_each_measure_matters_on_the_right_file_systems() {
    let u = Undolog::new();
    let expected = [
        ("checksum", "default,ext3-w"),
        ("fsync-log", "default,ext3-w,ext4-o,btrfs"),
        ("fsync-dir-log", "default"),
        ("fsync-db", "default,ext3-w,ext4-o,btrfs"),
        ("fsync-dir-unlink", ALL_APMS),
    ];
    for (m, apms) in expected {
        let b = u.record(&format!("all-but={m}"), false);
        let (code, text, err, rep) = check(
            &b,
            &[
                "--checker",
                &u.checker(),
                "--apm",
                ALL_APMS,
                "--explore",
                "exhaustive",
            ],
        );
        assert_eq!(code, 1, "without {m}: {text}\n{err}");
        let rep = rep.unwrap();
        assert_eq!(exposing(&rep), set(apms), "without {m}:\n{text}");
        for a in rep["apms"].as_array().unwrap() {
            assert_eq!(
                a["complete"], true,
                "exhaustive search must complete on this small trace"
            );
        }
    }
}

/// intactfs's promise (`--apm intactfs`: one stream, all updates in program order, weak
/// atomicity) masks the ordering and atomicity vulnerabilities of Figure 2.1 that ext4-o
/// and default expose, but not its durability vulnerability: nothing is synced before
/// `committed` is printed. With Figure 2.2's last measure alone (fsync(".") after the
/// unlink) nothing remains under intactfs, while ext4-o still reorders.
#[test]
fn intactfs_masks_ordering_not_durability() {
    let u = Undolog::new();
    let categories = |rep: &serde_json::Value, apm: &str| -> BTreeSet<String> {
        rep["dynamic"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["apm"] == apm)
            .map(|d| d["category"].as_str().unwrap().to_string())
            .collect()
    };
    // Exhaustive: ext4-o's orderings show only combined with a partly written dbfile.
    let fig21 = u.record("none", true);
    let (code, text, err, rep) = check(
        &fig21,
        &[
            "--checker",
            &u.checker(),
            "--apm",
            "default,ext4-o,intactfs",
            "--explore",
            "exhaustive",
        ],
    );
    assert_eq!(code, 1, "{text}\n{err}");
    let rep = rep.unwrap();
    for apm in ["default", "ext4-o"] {
        let c = categories(&rep, apm);
        assert!(
            c.iter().any(|c| c != "durability"),
            "{apm} reorders Figure 2.1, got only {c:?}:\n{text}"
        );
    }
    assert_eq!(categories(&rep, "intactfs"), set("durability"), "{text}");
    // The one left is the unsynced unlink (the commit point) before the print.
    let left: Vec<_> = rep["static"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["apms"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a == "intactfs")
        })
        .collect();
    assert_eq!(left.len(), 1, "{text}");
    assert!(
        left[0]["locations"][0]
            .as_str()
            .unwrap()
            .contains("undolog.c:"),
        "{text}"
    );
    assert!(
        left[0]["calls"][0]["summary"]
            .as_str()
            .unwrap()
            .starts_with("unlink"),
        "{text}"
    );

    let synced = u.record("fsync-dir-unlink", false);
    let (code, text, err, rep) = check(
        &synced,
        &[
            "--checker",
            &u.checker(),
            "--apm",
            "ext4-o,intactfs",
            "--explore",
            "exhaustive",
        ],
    );
    assert_eq!(code, 1, "{text}\n{err}");
    assert_eq!(exposing(&rep.unwrap()), set("ext4-o"), "{text}");
}

/// Figure 2.2 (every measure) is correct wherever fsync is a durability point, but not
/// where it is only an ordering point (`intactfs-osync`, OptFS's osync, `001` §4.4): there
/// "committed" can outrun the update, and nothing else goes wrong. Without flushes
/// (`nobarrier`) no measure helps: the database itself can be left inconsistent (part of
/// the dbfile write without the log: exhaustive, as ALICE's strategy does not combine a
/// reordering with a partly persisted call).
#[test]
fn undolog_measures_need_durable_fsync() {
    let u = Undolog::new();
    let good = u.record("all", false);
    let (code, text, err, rep) = check(
        &good,
        &[
            "--checker",
            &u.checker(),
            "--apm",
            "intactfs,intactfs-osync,nobarrier",
            "--explore",
            "exhaustive",
        ],
    );
    assert_eq!(code, 1, "{text}\n{err}");
    let rep = rep.unwrap();
    assert_eq!(exposing(&rep), set("intactfs-osync,nobarrier"), "{text}");
    let dynamic = rep["dynamic"].as_array().unwrap();
    let after_output = |d: &serde_json::Value| {
        d["calls"].as_array().unwrap().last().unwrap()["summary"]
            .as_str()
            .unwrap()
            .starts_with("output")
    };
    for d in dynamic.iter().filter(|d| d["apm"] == "intactfs-osync") {
        assert!(
            after_output(d)
                && d["example"]["checker_message"]
                    .as_str()
                    .unwrap()
                    .contains("not durable"),
            "osync: only the output outruns the disk\n{text}"
        );
    }
    assert!(
        dynamic
            .iter()
            .any(|d| d["apm"] == "nobarrier" && !after_output(d)),
        "nobarrier: inconsistent without any output\n{text}"
    );
}

/// The key-value store (Listing 3.1 style): the missing fsync before rename is found under
/// the default APM, classified as a safe-rename ordering vulnerability at kv.c, saved with
/// --keep-failing, and gone under ext4-o (safe rename) and with --safe.
#[test]
fn kvstore_safe_rename() {
    let tmp = tempfile::tempdir().unwrap();
    let kv = tmp.path().join("kv");
    gcc(&repo().join("examples/kvstore/kv.c"), &kv);
    let checker = format!(
        "python3 {}",
        repo().join("examples/kvstore/check.py").display()
    );
    for (safe, tag) in [(false, "plain"), (true, "safe")] {
        let db = tmp.path().join(format!("db-{tag}"));
        std::fs::create_dir(&db).unwrap();
        let bundle = tmp.path().join(format!("b-{tag}"));
        let mut args: Vec<&str> = Vec::new();
        if safe {
            args.push("--safe");
        }
        args.extend(["x", "foo1", "y", "foo2"]);
        let out = intact()
            .arg("record")
            .arg("--out")
            .arg(&bundle)
            .arg("--")
            .arg(&kv)
            .args(&args)
            .current_dir(&db)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let keep = tmp.path().join(format!("failing-{tag}"));
        let (code, text, err, rep) = check(
            &bundle,
            &[
                "--checker",
                &checker,
                "--apm",
                "default,ext4-o",
                "--keep-failing",
                keep.to_str().unwrap(),
            ],
        );
        let rep = rep.unwrap_or_else(|| panic!("no report: {err}"));
        let statics = rep["static"].as_array().unwrap();
        let safe_rename: Vec<_> = statics
            .iter()
            .filter(|s| {
                s["categories"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| c == "safe_rename")
            })
            .collect();
        if !safe {
            assert_eq!(code, 1, "{text}\n{err}");
            assert_eq!(safe_rename.len(), 1, "{text}");
            let s = safe_rename[0];
            assert_eq!(
                s["apms"],
                serde_json::json!(["default"]),
                "ext4-o promises safe rename:\n{text}"
            );
            assert!(
                s["locations"][0].as_str().unwrap().contains("kv.c:")
                    && s["locations"][0].as_str().unwrap().contains("checkpoint"),
                "{text}"
            );
            // The example state was saved and reproduces the failure by hand.
            let state = s["example"]["state"].as_str().unwrap();
            let saved = keep.join(state);
            assert!(
                saved.join("crash").is_dir()
                    && saved.join("stdout").is_file()
                    && saved.join("README").is_file()
            );
            let copy = tmp.path().join("repro");
            assert!(Command::new("cp")
                .arg("-a")
                .arg(saved.join("crash"))
                .arg(&copy)
                .status()
                .unwrap()
                .success());
            let st = Command::new("python3")
                .arg(repo().join("examples/kvstore/check.py"))
                .arg(&copy)
                .arg(saved.join("stdout"))
                .status()
                .unwrap();
            assert!(!st.success(), "the saved state must fail the checker again");
        } else {
            assert!(safe_rename.is_empty(), "--safe fixes the rename:\n{text}");
        }
    }
}

/// The kvstore example's Python checker as a warm server (`--checker-server`, one forked
/// child per state through intact.checker) gives, state by state, the verdicts and messages
/// of one process per state; a server that cannot start is an input error, not a verdict.
#[test]
fn kvstore_warm_checker_matches_per_process_state_by_state() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = record_kv(tmp.path());
    let checker = format!(
        "python3 {}",
        repo().join("examples/kvstore/check.py").display()
    );
    let run = |flag: &str, tag: &str| {
        let keep = tmp.path().join(format!("failing-{tag}"));
        let args = [
            flag,
            &checker,
            "--apm",
            "default,ext4-o",
            "--keep-failing",
            keep.to_str().unwrap(),
        ];
        let (code, text, err, rep) = check(&bundle, &args);
        assert_eq!(code, 1, "{text}\n{err}");
        (keep, rep.unwrap())
    };
    let (keep_a, rep_a) = run("--checker", "process");
    let (keep_b, rep_b) = run("--checker-server", "server");
    let said = |keep: &Path| -> BTreeMap<String, String> {
        std::fs::read_dir(keep)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let readme = std::fs::read_to_string(e.path().join("README")).unwrap();
                let line = readme
                    .lines()
                    .find(|l| l.starts_with("checker said:"))
                    .unwrap_or("")
                    .to_string();
                (e.file_name().to_string_lossy().into_owned(), line)
            })
            .collect()
    };
    let (a, b) = (said(&keep_a), said(&keep_b));
    assert!(
        a.len() >= 10,
        "the kvstore example has failing states: {a:?}"
    );
    assert!(
        a.values().all(|l| l.len() > "checker said: ".len()),
        "every saved state names the checker's reason: {a:?}"
    );
    assert_eq!(a, b, "failing states and their messages differ");
    for k in ["static", "dynamic"] {
        assert_eq!(rep_a[k], rep_b[k], "{k} differs");
    }
    for (x, y) in rep_a["apms"]
        .as_array()
        .unwrap()
        .iter()
        .zip(rep_b["apms"].as_array().unwrap())
    {
        for k in ["distinct", "checked", "failed", "timeouts"] {
            assert_eq!(x[k], y[k], "{k} of {}", x["apm"]);
        }
    }
    // A server that exits at once never judges anything: exit 2, and it says why.
    let broken = tmp.path().join("broken.sh");
    std::fs::write(
        &broken,
        "#!/bin/sh\necho 'cannot import the checker' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&broken, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (code, text, err, _) = check(&bundle, &["--checker-server", broken.to_str().unwrap()]);
    assert_eq!(code, 2, "{text}\n{err}");
    assert!(
        err.contains("could not be run") && err.contains("cannot import the checker"),
        "{err}"
    );
}

/// Bad input: clear message, exit 2, nothing left behind.
#[test]
fn check_rejects_bad_input() {
    let r = record_c("basic", |_| {});
    let b = r.bundle.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["check", b, "--checker", "true", "--apm", "ext5"],
            "no APM named \"ext5\"",
        ),
        (
            vec!["check", b, "--checker", "/nonexistent/checker"],
            "--checker",
        ),
        (vec!["check", b, "--checker", ""], "empty"),
        (
            vec!["check", b, "--checker", "true", "--timeout", "0"],
            "--timeout",
        ),
        (
            vec!["check", "/nonexistent/bundle", "--checker", "true"],
            "/nonexistent/bundle",
        ),
        (
            vec!["check", b, "--checker", "false"],
            "rejects the workload's initial state",
        ),
        (vec!["apm", "show", "nope"], "no APM named"),
    ];
    for (args, needle) in cases {
        let out = intact().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: expected {needle:?} in {err}"
        );
    }
    // A broken user APM names the file and the field.
    let apm = r.tmp.path().join("bad.toml");
    std::fs::write(&apm, "name = \"x\"\n[atomicity]\ngranularity = 4096\n[[order]]\nbefore = [\"dirs\"]\nafter = [\"any\"]\n").unwrap();
    let out = intact()
        .args(["check", b, "--checker", "true", "--apm"])
        .arg(&apm)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        err.contains("bad.toml") && err.contains("order[0].before"),
        "{err}"
    );
}

/// A checker that hangs is killed (with its children) and counted as timed out, not failed.
#[test]
fn timeouts_are_counted_separately() {
    let r = record_c("basic", |_| {});
    let script = r.tmp.path().join("slow.sh");
    // Passes on the initial and final states quickly, hangs on anything else.
    std::fs::write(&script, "#!/bin/sh\nif [ \"$INTACT_STATE\" = s0 ] || [ \"$INTACT_STATE\" = s1 ]; then exit 0; fi\nsleep 30 & wait\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let (code, text, err, rep) = check(
        &r.bundle,
        &["--checker", script.to_str().unwrap(), "--timeout", "0.3"],
    );
    assert_eq!(code, 0, "{text}\n{err}");
    let rep = rep.unwrap();
    assert!(rep["apms"][0]["timeouts"].as_u64().unwrap() > 0, "{text}");
    assert_eq!(rep["apms"][0]["failed"], 0);
    assert!(rep["static"].as_array().unwrap().is_empty());
    assert!(text.contains("timed out"), "{text}");
}

/// Exhaustive and random exploration: the bound is reported, the seed reproduces.
#[test]
fn exhaustive_bound_and_random_seed() {
    let r = record_c("writes", |_| {});
    let (code, text, err, rep) = check(
        &r.bundle,
        &[
            "--checker",
            "true",
            "--explore",
            "exhaustive",
            "--max-states",
            "5",
        ],
    );
    assert_eq!(code, 0, "{text}\n{err}");
    let rep = rep.unwrap();
    assert_eq!(rep["apms"][0]["complete"], false, "{text}");
    assert!(text.contains("cut by --max-states"), "{text}");
    let run = |seed: &str| {
        let (_, _, _, rep) = check(
            &r.bundle,
            &[
                "--checker",
                "true",
                "--explore",
                "random",
                "--samples",
                "40",
                "--seed",
                seed,
            ],
        );
        let rep = rep.unwrap();
        (
            rep["apms"][0]["constructed"].clone(),
            rep["apms"][0]["distinct"].clone(),
        )
    };
    assert_eq!(run("7"), run("7"));
}

/// `intact run` records and checks in one step; `intact apm list/show` work.
#[test]
fn run_and_apm_commands() {
    let tmp = tempfile::tempdir().unwrap();
    let kv = tmp.path().join("kv");
    gcc(&repo().join("examples/kvstore/kv.c"), &kv);
    let db = tmp.path().join("db");
    std::fs::create_dir(&db).unwrap();
    let out = intact()
        .args([
            "run",
            "--dir",
            db.to_str().unwrap(),
            "--no-stacks",
            "-q",
            "--checker",
        ])
        .arg(format!(
            "python3 {}",
            repo().join("examples/kvstore/check.py").display()
        ))
        .arg("--")
        .arg(&kv)
        .args(["x", "foo1", "y", "foo2"])
        .current_dir(&db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("ordering: safe rename"), "{text}");
    let list = intact().args(["apm", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    let lines: Vec<&str> = list.lines().take_while(|l| !l.is_empty()).collect();
    let listed: Vec<&str> = lines
        .iter()
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        listed,
        BUILTIN_APMS.split(',').collect::<Vec<_>>(),
        "{list}"
    );
    // Each model says what it is (its [about] table), and today's are validated.
    let about = |name: &str| {
        let i = lines
            .iter()
            .position(|l| l.starts_with(&format!("{name} ")))
            .unwrap();
        lines[i + 1].trim().to_string()
    };
    assert!(about("ext4-o").starts_with("thesis model"), "{list}");
    for today in ["ext4", "ext4-dioread_lock", "xfs", "btrfs-linux6"] {
        let a = about(today);
        assert!(
            a.starts_with("today's kernel model; validated on Linux"),
            "{a}"
        );
    }
    let show = intact().args(["apm", "show", "ext4-o"]).output().unwrap();
    assert!(String::from_utf8_lossy(&show.stdout).contains("renamed-file"));
}

/// Regressions found by the application study (issue "Explorer 3/3"):
/// - a write that is never fsynced, then renamed into place, then "done" printed: under a
///   fully ordered APM (ext3-j) the only failure is the output getting ahead of the disk,
///   which is durability, not "safe rename" (it used to be filed there because a rename
///   came between); under the default APM the rename can persist without the data, and
///   the checker sees the empty file before any output: a safe-rename ordering;
/// - in a fully ordered APM only the last call before an output is blamed for it;
/// - durability vulnerabilities of one call site are one static vulnerability, whichever
///   print statement exposed them (SQLite's journal unlink used to count once per printf);
/// - `--keep-examples` saves one state per static vulnerability, numbered as in the report.
#[test]
fn study_regressions_categories_grouping_examples() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("w");
    std::fs::create_dir(&dir).unwrap();
    let bundle = tmp.path().join("b");
    let script = "for i in 1 2; do printf x$i > f.tmp; mv f.tmp f; echo done$i; done";
    let out = intact()
        .arg("record")
        .arg("--out")
        .arg(&bundle)
        .args(["--", "sh", "-c", script])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "record: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // f, when it exists, holds x1 or x2 (an empty f is corrupt whatever was printed), and
    // at least what the last printed "doneN" promised.
    let checker = "sh -c '[ ! -e \"$1/f\" ] || grep -qx \"x[12]\" \"$1/f\" || exit 1; n=$(grep -c done \"$2\"); [ \"$n\" = 0 ] || grep -qx \"x[$n-2]\" \"$1/f\"' checker";
    let ex = tmp.path().join("examples");
    let (code, text, err, rep) = check(
        &bundle,
        &[
            "--checker",
            checker,
            "--apm",
            "default,ext3-j",
            "-j",
            "2",
            "--keep-examples",
            ex.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{text}{err}");
    let rep = rep.unwrap();
    let statics = rep["static"].as_array().unwrap();
    let cats = |apm: &str| -> BTreeSet<String> {
        rep["dynamic"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["apm"] == apm)
            .map(|d| d["category"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(cats("ext3-j"), set("durability"), "{text}");
    // Fully ordered: a prefix state that stops earlier only loses more, so one call is
    // blamed per output (the last one whose loss breaks it), not every call since the start.
    let ext3j: Vec<u64> = rep["dynamic"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["apm"] == "ext3-j")
        .map(|d| d["calls"][1]["index"].as_u64().unwrap())
        .collect();
    let outputs: BTreeSet<u64> = ext3j.iter().copied().collect();
    assert_eq!(
        outputs.len(),
        ext3j.len(),
        "one durability vulnerability per output under ext3-j: {text}"
    );
    assert!(cats("default").contains("safe_rename"), "{text}");
    // One durability static vulnerability per call site (the grouping itself is unit-tested
    // in intact-report: durability_groups_by_the_call_that_must_persist).
    let dur: Vec<_> = statics
        .iter()
        .filter(|s| {
            s["categories"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c == "durability")
        })
        .collect();
    let sites: BTreeSet<String> = dur
        .iter()
        .map(|s| s["locations"][0].as_str().unwrap().to_string())
        .collect();
    assert_eq!(sites.len(), dur.len(), "{text}");
    // One saved example per static vulnerability, and the checker fails on each again.
    for s in statics {
        let d = ex.join(format!("v{}", s["id"]));
        assert!(
            d.join("README").is_file() && d.join("crash").is_dir(),
            "{}",
            d.display()
        );
        let copy = tmp.path().join(format!("copy{}", s["id"]));
        assert!(Command::new("cp")
            .arg("-a")
            .arg(d.join("crash"))
            .arg(&copy)
            .status()
            .unwrap()
            .success());
        let st = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{checker} {} {}",
                copy.display(),
                d.join("stdout").display()
            ))
            .status()
            .unwrap();
        assert!(
            !st.success(),
            "saved example v{} passes the checker",
            s["id"]
        );
    }
    assert_eq!(std::fs::read_dir(&ex).unwrap().count(), statics.len());
}

/// Crash dirs patched from the worker's previous state (issue 29) give the verdicts,
/// failing states and checker messages of dirs written whole (`INTACT_FULL_REBUILD=1`), on
/// the kvstore and undolog examples; also when the checker damages every other state's dir
/// after judging it (a write to each file, a new file, a removed one, a chmod), which must
/// not reach the next state's dir.
#[test]
fn patched_crash_dirs_give_the_verdicts_of_dirs_written_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let kv_bundle = record_kv_as(tmp.path(), "kvb", "db", &[]);
    let kv_checker = format!(
        "python3 {}",
        repo().join("examples/kvstore/check.py").display()
    );
    let u = Undolog::new();
    let undo_bundle = u.record("none", false);
    // The real checker, then damage to the dir of every odd-numbered state.
    let damaging = |name: &str, real: &str| -> String {
        let p = tmp.path().join(name);
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\n{real} \"$1\" \"$2\"\nrc=$?\ncase \"$INTACT_STATE\" in *[13579])\n  for f in $(find \"$1\" -type f); do printf junk >> \"$f\"; chmod 600 \"$f\"; done\n  rm -f \"$(find \"$1\" -type f | head -n 1)\"\n  touch \"$1/extra\";;\nesac\nexit $rc\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        p.to_str().unwrap().to_string()
    };
    let kv_damaging = damaging("kv-damaging.sh", &kv_checker);
    let undo_checker = u.checker();
    let undo_damaging = damaging("undo-damaging.sh", &undo_checker);
    let cases = [
        (&kv_bundle, kv_checker.as_str(), "default,ext4-o,ext4", "kv"),
        (
            &kv_bundle,
            kv_damaging.as_str(),
            "default,ext4-o,ext4",
            "kv-damaging",
        ),
        (&undo_bundle, undo_checker.as_str(), "default,ext4", "undo"),
        (
            &undo_bundle,
            undo_damaging.as_str(),
            "default,ext4",
            "undo-damaging",
        ),
    ];
    for (bundle, checker, apms, tag) in cases {
        let run = |full: bool| {
            let keep = tmp.path().join(format!("failing-{tag}-{full}"));
            let json = tmp.path().join(format!("{tag}-{full}.json"));
            let mut c = intact();
            if full {
                c.env("INTACT_FULL_REBUILD", "1");
            } else {
                c.env_remove("INTACT_FULL_REBUILD");
            }
            let out = c
                .arg("check")
                .arg(bundle)
                .args(["--checker", checker, "--apm", apms, "-q", "--json"])
                .arg(&json)
                .arg("--keep-failing")
                .arg(&keep)
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(1),
                "{tag}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let rep: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            let said: BTreeMap<String, String> = std::fs::read_dir(&keep)
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    let readme = std::fs::read_to_string(e.path().join("README")).unwrap();
                    // Its state and message lines (the others name the keep dir).
                    let lines: Vec<&str> = readme
                        .lines()
                        .filter(|l| l.starts_with("state ") || l.starts_with("checker said:"))
                        .collect();
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        lines.join("\n"),
                    )
                })
                .collect();
            (rep, said)
        };
        let (patched, said_p) = run(false);
        let (whole, said_w) = run(true);
        assert!(
            said_w.len() >= 10,
            "{tag}: failing states expected: {said_w:?}"
        );
        assert_eq!(said_p, said_w, "{tag}: failing states or messages differ");
        for k in ["static", "dynamic", "timeouts"] {
            assert_eq!(patched[k], whole[k], "{tag}: {k} differs");
        }
        for (x, y) in patched["apms"]
            .as_array()
            .unwrap()
            .iter()
            .zip(whole["apms"].as_array().unwrap())
        {
            for k in ["distinct", "checked", "failed", "timeouts", "constructed"] {
                assert_eq!(x[k], y[k], "{tag}: {k} of {}", x["apm"]);
            }
        }
    }
}
