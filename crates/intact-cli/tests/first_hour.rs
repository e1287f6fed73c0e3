//! Issue 31, the first hour: the exact commands a new user types by mistake get a message
//! that says what happened and what to do, a non-zero exit, and leave nothing behind.

mod common;
use common::*;
use std::path::Path;
use std::process::Output;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn no_panic(o: &Output) {
    assert!(!stderr(o).contains("panicked"), "{}", stderr(o));
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_workload_without_double_dash_gets_the_command_with_it() {
    let t = tempfile::tempdir().unwrap();
    for (args, fixed) in [
        (
            vec!["record", "--dir", ".", "--out", "b", "./save", "v2"],
            "intact record --dir . --out b -- ./save v2",
        ),
        (vec!["run", "./save", "v2"], "intact run -- ./save v2"),
        (
            vec!["blk", "record", "./save"],
            "intact blk record -- ./save",
        ),
    ] {
        let o = intact().current_dir(t.path()).args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("goes after `--`"), "{}", stderr(&o));
        assert!(stderr(&o).contains(fixed), "{args:?}: {}", stderr(&o));
        no_panic(&o);
    }
    // A misspelt option of intact's own is not a workload: no `--` hint.
    let o = intact().args(["record", "--bogus"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(!stderr(&o).contains("goes after `--`"), "{}", stderr(&o));
    assert!(names_in(t.path()).is_empty(), "{:?}", names_in(t.path()));
}

#[test]
fn the_wrong_kind_of_directory_is_named() {
    let t = tempfile::tempdir().unwrap();
    let plain = t.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let o = intact()
        .args(["check", "--checker", "true"])
        .arg(&plain)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not an explorer bundle") && stderr(&o).contains("intact record --out"),
        "{}",
        stderr(&o)
    );
    // A block log given to `intact check`, and an explorer bundle given to `intact blk check`.
    let blklog = t.path().join("blklog");
    std::fs::create_dir(&blklog).unwrap();
    std::fs::write(blklog.join("meta.json"), "{}").unwrap();
    std::fs::write(blklog.join("blocks.log"), "").unwrap();
    let o = intact()
        .args(["check", "--checker", "true"])
        .arg(&blklog)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("intact blk check"), "{}", stderr(&o));
    let bundle = t.path().join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    std::fs::write(bundle.join("bundle.json"), "{}").unwrap();
    let o = intact()
        .args(["blk", "check", "--checker", "true"])
        .arg(&bundle)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("explorer bundle"), "{}", stderr(&o));
    // `intact report` given a bundle directory instead of its JSON report.
    let o = intact()
        .args(["report", "--html", "r.html"])
        .arg(&bundle)
        .current_dir(t.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("a bundle directory") && stderr(&o).contains("--json"),
        "{}",
        stderr(&o)
    );
    no_panic(&o);
    assert_eq!(names_in(t.path()), ["blklog", "bundle", "plain"]);
}

#[test]
fn a_crlf_checker_is_said_not_to_start_not_to_time_out() {
    let t = tempfile::tempdir().unwrap();
    let bundle = record_kv(t.path());
    // Both shebang forms (through env, an interpreter named directly) are refused up
    // front; an interpreter that does not exist is named when the checker first runs.
    for (first, said) in [
        ("#!/usr/bin/env python3\r\n", "carriage return"),
        ("#!/usr/bin/python3\r\n", "carriage return"),
        (
            "#!/nonexistent/python9\n",
            "`/nonexistent/python9` (first line) was not found",
        ),
    ] {
        let checker = t.path().join("check.py");
        std::fs::write(&checker, format!("{first}import sys\n")).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&checker, mode).unwrap();
        let o = intact()
            .arg("check")
            .arg(&bundle)
            .arg("--checker")
            .arg(&checker)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(said) && e.contains("could not be run"), "{e}");
        assert!(!e.contains("raise --timeout"), "{e}");
        no_panic(&o);
    }
}

#[test]
fn run_does_not_print_the_path_of_the_bundle_it_removes() {
    let t = tempfile::tempdir().unwrap();
    let o = intact()
        .current_dir(t.path())
        .args([
            "run",
            "--checker",
            "true",
            "--apm",
            "default",
            "--",
            "sh",
            "-c",
        ])
        .arg("echo x > f && sync f")
        .env("TMPDIR", t.path())
        .output()
        .unwrap();
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", stderr(&o));
    assert!(!stderr(&o).contains("bundle written to"), "{}", stderr(&o));
    // The temporary directory is gone; only the workload's file stays.
    assert_eq!(names_in(t.path()), ["f"]);
}

#[test]
fn report_finds_the_bundle_beside_its_json_or_says_it_cannot() {
    let t = tempfile::tempdir().unwrap();
    let bundle = record_kv(t.path());
    let o = intact()
        .current_dir(t.path())
        .args(["check", "b", "--apm", "default", "--json", "r.json"])
        .args(["--checker", "true"])
        .output()
        .unwrap();
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", stderr(&o));
    assert!(bundle.is_dir());
    // Each APM says what it models, on screen and in the JSON.
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("    models: ALICE's default"), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(t.path().join("r.json")).unwrap()).unwrap();
    assert!(json["apms"][0]["models"]
        .as_str()
        .unwrap()
        .starts_with("ALICE's default"));
    // From another directory: the report's relative bundle path is found beside the JSON.
    let elsewhere = tempfile::tempdir().unwrap();
    let json = t.path().join("r.json");
    let o = intact()
        .current_dir(elsewhere.path())
        .arg("report")
        .arg(&json)
        .args(["--html", "r.html"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    // Moved away from its bundle: a warning that names --bundle, and --bundle fixes it.
    let moved = elsewhere.path().join("r.json");
    std::fs::copy(&json, &moved).unwrap();
    let o = intact()
        .current_dir(elsewhere.path())
        .args(["report", "r.json", "--html", "r2.html"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("--bundle"), "{}", stderr(&o));
    let o = intact()
        .current_dir(elsewhere.path())
        .args(["report", "r.json", "--html", "r3.html", "--bundle"])
        .arg(&bundle)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
}

#[test]
fn doctor_names_every_job_and_completions_parse() {
    let o = intact().arg("doctor").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    for job in ["explorer", "intactfs", "validator", "python"] {
        assert!(out.contains(job), "{out}");
    }
    // Exit 0 exactly when no line says MISSING (this machine runs the whole suite).
    assert_eq!(
        o.status.code() == Some(0),
        !out.contains("MISSING"),
        "{out}"
    );
    let o = intact().args(["completions", "bash"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let script = String::from_utf8_lossy(&o.stdout);
    assert!(script.contains("doctor") && script.contains("record"));
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("intact.bash"), script.as_bytes()).unwrap();
    let st = std::process::Command::new("bash")
        .arg("-n")
        .arg(t.path().join("intact.bash"))
        .status()
        .unwrap();
    assert!(st.success(), "bash cannot parse the completion script");
}

/// Issue 31: source paths lose their `..` (a program compiled as `gcc ../src/kv.c` from
/// `build/`), and SARIF names files relative to the git work tree (`%SRCROOT%`, declared in
/// `originalUriBaseIds`), as GitHub code scanning maps them; `--source-root` overrides.
#[test]
fn sarif_paths_are_clean_and_relative_to_the_work_tree() {
    let t = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(t.path()).unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join("build")).unwrap();
    std::fs::create_dir_all(root.join("db")).unwrap();
    std::fs::copy(repo.join("examples/kvstore/kv.c"), root.join("src/kv.c")).unwrap();
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&root)
        .status()
        .expect("git must be installed");
    assert!(git.success());
    let cc = std::process::Command::new("gcc")
        .args(["-g", "-O0", "-o", "kv", "../src/kv.c"])
        .current_dir(root.join("build"))
        .status()
        .expect("gcc must be installed");
    assert!(cc.success());
    let o = intact()
        .current_dir(root.join("db"))
        .args(["record", "--out", "../b", "--"])
        .arg(root.join("build/kv"))
        .args(["x", "foo1", "y", "foo2"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let checker = format!(
        "python3 {}",
        repo.join("examples/kvstore/check.py").display()
    );
    let o = intact()
        .current_dir(&root)
        .args(["ops", "b"])
        .output()
        .unwrap();
    let ops = String::from_utf8_lossy(&o.stdout);
    let clean = format!("{}/src/kv.c:", root.display());
    assert!(ops.contains(&clean) && !ops.contains("/../"), "{ops}");
    let o = intact()
        .current_dir(&root)
        .args(["check", "b", "--apm", "default", "--checker"])
        .arg(&checker)
        .env("KV_EXPECT", "x=foo1 y=foo2")
        .args(["--sarif", "r.sarif"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let sarif: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("r.sarif")).unwrap()).unwrap();
    let run = &sarif["runs"][0];
    assert_eq!(
        run["originalUriBaseIds"]["%SRCROOT%"]["uri"],
        format!("file://{}/", root.display())
    );
    let art = &run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"];
    assert_eq!(art["uri"], "src/kv.c", "{art}");
    assert_eq!(art["uriBaseId"], "%SRCROOT%");
    // An explicit root: paths relative to it.
    let o = intact()
        .current_dir(&root)
        .args(["check", "b", "--apm", "default", "--checker"])
        .arg(&checker)
        .env("KV_EXPECT", "x=foo1 y=foo2")
        .args(["--sarif", "r2.sarif", "--source-root", "src"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = std::fs::read_to_string(root.join("r2.sarif")).unwrap();
    let sarif: serde_json::Value = serde_json::from_str(&text).unwrap();
    let art =
        &sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"];
    assert_eq!(art["uri"], "kv.c", "{art}");
}

/// Issue 31: a shell wrapper (a version manager's shim) is traced step by step with
/// stacks; record says so and how to skip it. The real program gets no such note.
#[test]
fn a_shell_wrapper_is_pointed_out() {
    let t = tempfile::tempdir().unwrap();
    let shim = t.path().join("python3");
    std::fs::write(&shim, "#!/usr/bin/env bash\nexec true \"$@\"\n").unwrap();
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&shim, mode).unwrap();
    let work = t.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let o = intact()
        .current_dir(&work)
        .args(["record", "--out", "../b1", "--"])
        .arg(&shim)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is a bash script") && stderr(&o).contains("record that directly"),
        "{}",
        stderr(&o)
    );
    let o = intact()
        .current_dir(&work)
        .args(["record", "--out", "../b2", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("script"), "{}", stderr(&o));
}

/// Issue 31: a program without debug information (here kv built with `-s`) gets offsets
/// as locations, and the report says once how to get names for them.
#[test]
fn stripped_code_gets_a_hint_once() {
    let t = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let kv = t.path().join("kv");
    let cc = std::process::Command::new("gcc")
        .args(["-O0", "-s", "-o"])
        .arg(&kv)
        .arg(repo.join("examples/kvstore/kv.c"))
        .status()
        .expect("gcc must be installed");
    assert!(cc.success());
    std::fs::create_dir(t.path().join("db")).unwrap();
    let o = intact()
        .current_dir(t.path().join("db"))
        .args(["record", "--out", "../b", "--"])
        .arg(&kv)
        .args(["x", "foo1", "y", "foo2"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let checker = format!(
        "python3 {}",
        repo.join("examples/kvstore/check.py").display()
    );
    let o = intact()
        .current_dir(t.path())
        .args(["check", "b", "--apm", "default", "--checker", &checker])
        .env("KV_EXPECT", "x=foo1 y=foo2")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.matches("without debug information").count(), 1, "{out}");
    assert!(
        out.contains("-dbgsym") && out.contains("--frame-skip"),
        "{out}"
    );
}

/// Issue 31: progress is per APM with an estimate of the time left, also when stderr is
/// not a terminal (a line every 10 s). A checker that sleeps 0.3 s on each of the states
/// of two APMs, one at a time, keeps the check running well past 10 s on any machine.
#[test]
fn progress_is_per_apm_with_time_left() {
    let t = tempfile::tempdir().unwrap();
    record_kv(t.path());
    let o = intact()
        .current_dir(t.path())
        .args(["check", "b", "--apm", "default,ext4-o", "-j", "1"])
        .args(["--checker", "sh -c 'sleep 0.3'"])
        .output()
        .unwrap();
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", stderr(&o));
    let e = stderr(&o);
    let lines: Vec<&str> = e.lines().filter(|l| l.contains("states checked")).collect();
    assert!(!lines.is_empty(), "no progress line: {e}");
    assert!(
        lines.iter().all(|l| l.contains("left for those found")),
        "{e}"
    );
    // Each line's counts are the APM's own: checked never exceeds that APM's found states.
    for l in &lines {
        let counts = l.split(": ").nth(2).unwrap();
        let (done, found) = counts.split_once(' ').unwrap().0.split_once('/').unwrap();
        assert!(
            done.parse::<u64>().unwrap() <= found.parse::<u64>().unwrap(),
            "{l}"
        );
    }
}

/// Issue 31: recording shows progress (system calls traced, seconds) while the workload
/// runs, on the terminal the user sees (script(1) gives intact one), and clears the line
/// when it ends; the bundle is written as without a terminal.
#[test]
fn recording_shows_its_progress_on_a_terminal() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        return cannot_run(
            "recording_shows_its_progress_on_a_terminal",
            "script(1) is missing (apt-get install bsdutils)",
        );
    }
    let t = tempfile::tempdir().unwrap();
    let work = t.path().join("work");
    std::fs::create_dir(&work).unwrap();
    // About 1.5 s of work, so that several progress updates (every 250 ms) come.
    let cmd = format!(
        "{} record --no-stacks --out ../b -- sh -c 'for i in 1 2 3 4 5 6; do echo $i >> f; sleep 0.25; done'",
        env!("CARGO_BIN_EXE_intact")
    );
    let o = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(&work)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("intact: recording: ") && out.contains(" system calls traced, "),
        "no progress line on the terminal:\n{out}"
    );
    assert!(
        out.contains("\r\x1b[K"),
        "the progress line is cleared at the end:\n{out}"
    );
    assert!(t.path().join("b/bundle.json").is_file(), "{out}");
    assert_eq!(
        std::fs::read_to_string(work.join("f")).unwrap(),
        "1\n2\n3\n4\n5\n6\n"
    );
}
