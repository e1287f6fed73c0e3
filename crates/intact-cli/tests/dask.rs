//! Checking split into work units (docs/distributed.md), without Dask: `intact check
//! --emit-states`, `intact check-unit` on every unit, `intact check --from-verdicts` give the
//! report a local run gives; bad units, bundles and directories are refused with exit 2 and
//! no report. (The Dask driver itself: python/tests/test_dask.py.)

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The interpreter itself: a version manager's `python3` shim costs ~0.3 s per checker run.
fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 must be installed");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

struct Kv {
    tmp: tempfile::TempDir,
    bundle: PathBuf,
    checker: String,
}

fn kv() -> Kv {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = common::record_kv(tmp.path());
    let checker = format!(
        "{} {}",
        python(),
        repo().join("examples/kvstore/check.py").display()
    );
    Kv {
        tmp,
        bundle,
        checker,
    }
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = intact().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The report without its timings, the timed-out states sorted (their order is the order
/// in which verdicts arrived).
fn normalized(path: &Path) -> serde_json::Value {
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    r.as_object_mut().unwrap().remove("seconds");
    for a in r["apms"].as_array_mut().unwrap() {
        a.as_object_mut().unwrap().remove("seconds");
    }
    r["timeouts"]
        .as_array_mut()
        .unwrap()
        .sort_by_key(|v| v.to_string());
    r
}

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

fn pending(dir: &Path) -> Vec<String> {
    manifest(dir)["pending"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// Emits and checks units (two at a time) until the manifest is complete; returns the rounds.
fn emit_and_check_all(bundle: &Path, base: &[&str], dir: &Path) -> usize {
    let b = bundle.to_str().unwrap();
    for round in 1..10 {
        let mut args = vec!["check", b];
        args.extend_from_slice(base);
        args.extend(["--emit-states", dir.to_str().unwrap(), "-q"]);
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(out.is_empty(), "--emit-states prints no report: {out}");
        let m = manifest(dir);
        if m["complete"] == true {
            assert!(pending(dir).is_empty());
            return round - 1;
        }
        let todo = pending(dir);
        assert!(!todo.is_empty());
        for pair in todo.chunks(2) {
            let kids: Vec<_> = pair
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    intact()
                        .args([
                            "check-unit",
                            "--bundle",
                            b,
                            "--worker",
                            &i.to_string(),
                            "--unit",
                        ])
                        .arg(dir.join(format!("units/{s}.json")))
                        .arg("--out")
                        .arg(dir.join(format!("verdicts/{s}.json")))
                        .spawn()
                        .unwrap()
                })
                .collect();
            for mut k in kids {
                assert!(k.wait().unwrap().success());
            }
        }
    }
    panic!("emission did not converge");
}

#[test]
fn units_give_the_local_report() {
    let k = kv();
    let b = k.bundle.to_str().unwrap();
    for (tag, opts, rounds) in [
        ("alice", vec!["--apm", "default,ext4-o"], 2),
        (
            "exhaustive",
            vec![
                "--apm",
                "ext4-o,default",
                "--explore",
                "exhaustive",
                "--max-states",
                "40",
            ],
            1,
        ),
        (
            "random",
            vec![
                "--apm",
                "btrfs",
                "--explore",
                "random",
                "--samples",
                "30",
                "--seed",
                "7",
            ],
            1,
        ),
    ] {
        let mut base: Vec<&str> = vec!["--checker", &k.checker];
        base.extend(opts.iter());
        let local = k.tmp.path().join(format!("{tag}-local.json"));
        let mut args = vec!["check", b];
        args.extend(base.iter());
        args.extend(["-j", "2", "-q", "--json", local.to_str().unwrap()]);
        let (lcode, ltext, lerr) = run(&args);
        assert!(lcode <= 1, "{lerr}");

        let dir = k.tmp.path().join(format!("{tag}-units"));
        assert_eq!(
            emit_and_check_all(&k.bundle, &base, &dir),
            rounds,
            "{tag}: rounds"
        );
        // Every unit names its state, its hash, and how to rebuild it.
        let m = manifest(&dir);
        let units = m["units"].as_array().unwrap();
        assert!(!units.is_empty());
        let u: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(units[0]["file"].as_str().unwrap())).unwrap(),
        )
        .unwrap();
        assert!(
            u["state"].as_str().unwrap().starts_with('s')
                && u["hash"].as_str().unwrap().len() == 64
                && u["delta"].is_object(),
            "{u}"
        );

        let dist = k.tmp.path().join(format!("{tag}-dist.json"));
        let mut args = vec!["check", b];
        args.extend(base.iter());
        args.extend([
            "--from-verdicts",
            dir.to_str().unwrap(),
            "-q",
            "--json",
            dist.to_str().unwrap(),
        ]);
        let (dcode, dtext, derr) = run(&args);
        assert_eq!(dcode, lcode, "{tag}: {derr}");
        assert_eq!(normalized(&dist), normalized(&local), "{tag}");
        let untimed = |t: &str| {
            t.lines()
                .map(|l| {
                    l.split(" (")
                        .next()
                        .unwrap()
                        .split(" in ")
                        .next()
                        .unwrap()
                        .to_string()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(untimed(&dtext), untimed(&ltext), "{tag}: text report");
    }
}

#[test]
fn bad_units_and_directories_are_refused() {
    let k = kv();
    let b = k.bundle.to_str().unwrap();
    let dir = k.tmp.path().join("units");
    let d = dir.to_str().unwrap();
    let (code, _, err) = run(&[
        "check",
        b,
        "--checker",
        &k.checker,
        "--emit-states",
        d,
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    let todo = pending(&dir);
    let unit = dir.join(format!("units/{}.json", todo[0]));
    let verdict = k.tmp.path().join("v.json");
    let v = verdict.to_str().unwrap();

    // Not every state has a verdict: no report.
    let json = k.tmp.path().join("r.json");
    let (code, out, err) = run(&[
        "check",
        b,
        "--checker",
        &k.checker,
        "--from-verdicts",
        d,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("have no verdict") && err.contains("no report written"),
        "{err}"
    );
    assert!(out.is_empty() && !json.exists());

    // Another run's options on the same directory.
    let (code, _, err) = run(&[
        "check",
        b,
        "--checker",
        &k.checker,
        "--apm",
        "ext4-o",
        "--emit-states",
        d,
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("another run") && err.contains("--apm"),
        "{err}"
    );
    let (code, _, err) = run(&["check", b, "--checker", "true", "--from-verdicts", d]);
    assert_eq!(code, 2);
    assert!(err.contains("--checker"), "{err}");
    // A directory that holds something else.
    let (code, _, err) = run(&[
        "check",
        b,
        "--checker",
        &k.checker,
        "--emit-states",
        k.tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("not empty"), "{err}");

    // Corrupt units: truncated, a changed byte of state, a different bundle.
    let text = std::fs::read_to_string(&unit).unwrap();
    let bad = k.tmp.path().join("bad.json");
    // check-unit on the (damaged) unit `bad` of bundle `b`.
    let run_bad_unit = || {
        run(&[
            "check-unit",
            "--bundle",
            b,
            "--unit",
            bad.to_str().unwrap(),
            "--out",
            v,
        ])
    };
    std::fs::write(&bad, &text[..text.len() / 2]).unwrap();
    let (code, _, err) = run_bad_unit();
    assert_eq!(code, 2);
    assert!(err.contains("not a valid work unit"), "{err}");
    assert!(!verdict.exists());
    // A changed state: the workload's output "x" instead of what it printed.
    let mut u: serde_json::Value = serde_json::from_str(&text).unwrap();
    u["delta"]["stdout"] = serde_json::json!("eA==");
    std::fs::write(&bad, u.to_string()).unwrap();
    let (code, _, err) = run_bad_unit();
    assert_eq!(code, 2);
    assert!(err.contains("corrupt unit"), "{err}");
    assert!(!verdict.exists());
    let other = k.tmp.path().join("b2");
    std::fs::create_dir(&other).unwrap();
    assert!(Command::new("cp")
        .arg("-a")
        .arg(format!("{b}/."))
        .arg(&other)
        .status()
        .unwrap()
        .success());
    let mut data = std::fs::read(other.join("data.bin")).unwrap();
    data[0] ^= 1;
    std::fs::write(other.join("data.bin"), data).unwrap();
    let (code, _, err) = run(&[
        "check-unit",
        "--bundle",
        other.to_str().unwrap(),
        "--unit",
        unit.to_str().unwrap(),
        "--out",
        v,
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("is not the bundle"), "{err}");
    // A unit of another format version is refused by name; a version 1 unit (before
    // "protocol") is read as a per-process one.
    let mut u: serde_json::Value = serde_json::from_str(&text).unwrap();
    u["version"] = serde_json::json!(3);
    std::fs::write(&bad, u.to_string()).unwrap();
    let (code, _, err) = run_bad_unit();
    assert_eq!(code, 2);
    assert!(
        err.contains("not a version 1..=2 intact-unit file (version 3"),
        "{err}"
    );
    assert!(!verdict.exists());
    assert_eq!(u["protocol"], "process", "{u}");
    u["version"] = serde_json::json!(1);
    u.as_object_mut().unwrap().remove("protocol");
    std::fs::write(&bad, u.to_string()).unwrap();
    let (code, _, err) = run_bad_unit();
    assert_eq!(code, 0, "{err}");
    std::fs::remove_file(&verdict).unwrap();
    // A worker without the checker: the message names it.
    let mut u: serde_json::Value = serde_json::from_str(&text).unwrap();
    u["checker"] = serde_json::json!(["intact-no-such-checker"]);
    std::fs::write(&bad, u.to_string()).unwrap();
    let (code, _, err) = run_bad_unit();
    assert_eq!(code, 2);
    assert!(
        err.contains("intact-no-such-checker") && err.contains("not found"),
        "{err}"
    );
    assert!(!verdict.exists());
    // The good unit.
    let (code, _, err) = run(&[
        "check-unit",
        "--bundle",
        b,
        "--unit",
        unit.to_str().unwrap(),
        "--out",
        v,
        "--worker",
        "5",
    ]);
    assert_eq!(code, 0, "{err}");
    let vj: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&verdict).unwrap()).unwrap();
    assert_eq!(vj["state"], serde_json::json!(todo[0]));
    assert_eq!(vj["worker"], 5);
    assert_eq!(vj["verdict"]["kind"], "pass", "{vj}");

    // Not with `intact run`.
    let (code, _, err) = run(&["run", "--checker", "true", "--emit-states", d, "--", "true"]);
    assert_eq!(code, 2);
    assert!(err.contains("recorded bundle"), "{err}");
}

/// The verdict file without its timing.
fn untimed_verdict(path: &Path) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("elapsed");
    v
}

fn distinct_lines(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .collect::<std::collections::BTreeSet<_>>()
        .len()
}

/// `check-unit --serve`: units sent through one process get the verdict files one-shot
/// runs write; a malformed request gets an error reply and the process goes on; the units
/// of a `--checker-server` run are judged by one server, started once (each one-shot run
/// starts its own); a unit of another protocol replaces the runner.
#[test]
fn serve_gives_the_one_shot_verdicts_with_one_server() {
    use std::io::{Read, Write};
    let k = kv();
    let b = k.bundle.to_str().unwrap();
    let pids = k.tmp.path().join("pids");
    let server = k.tmp.path().join("server.sh");
    let script = format!(
        "#!/bin/sh\necho $$ >>{}\nexec {}\n",
        pids.display(),
        k.checker
    );
    std::fs::write(&server, script).unwrap();
    assert!(Command::new("chmod")
        .arg("+x")
        .arg(&server)
        .status()
        .unwrap()
        .success());
    let dir = k.tmp.path().join("units");
    let (code, _, err) = run(&[
        "check",
        b,
        "--checker-server",
        server.to_str().unwrap(),
        "--emit-states",
        dir.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    let todo = pending(&dir);
    assert!(todo.len() >= 3, "{todo:?}");
    let (one, served) = (k.tmp.path().join("one"), k.tmp.path().join("served"));
    std::fs::create_dir(&one).unwrap();
    std::fs::create_dir(&served).unwrap();
    let unit = |s: &str| dir.join(format!("units/{s}.json"));
    for s in &todo {
        let out = one.join(format!("{s}.json"));
        let (code, _, err) = run(&[
            "check-unit",
            "--bundle",
            b,
            "--unit",
            unit(s).to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
    }
    assert_eq!(
        distinct_lines(&pids),
        todo.len(),
        "one server per one-shot run"
    );
    std::fs::remove_file(&pids).unwrap();

    let request = |s: &str| {
        let out = served.join(format!("{s}.json"));
        format!("{}\n", serde_json::json!({"unit": unit(s), "out": out}))
    };
    let mut input = request(&todo[0]);
    input.push_str("{\"unit\": \"no out\"}\n");
    input.push_str(&request("no-such-unit"));
    for s in &todo[1..] {
        input.push_str(&request(s));
    }
    // Then a per-process unit of the same state (the runner is replaced, the server ends)
    // and a server unit again (a second server).
    let pdir = k.tmp.path().join("process-units");
    let (code, _, err) = run(&[
        "check",
        b,
        "--checker",
        &k.checker,
        "--emit-states",
        pdir.to_str().unwrap(),
        "-q",
    ]);
    assert_eq!(code, 0, "{err}");
    let (p_out, again) = (served.join("process.json"), served.join("again.json"));
    let punit = pdir.join(format!("units/{}.json", todo[0]));
    input.push_str(&format!(
        "{}\n",
        serde_json::json!({"unit": punit, "out": p_out})
    ));
    input.push_str(&format!(
        "{}\n",
        serde_json::json!({"unit": unit(&todo[0]), "out": again})
    ));
    let mut child = intact()
        .args(["check-unit", "--bundle", b, "--serve"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let mut replies = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut replies)
        .unwrap();
    assert!(child.wait().unwrap().success());
    let replies: Vec<serde_json::Value> = replies
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        replies.len(),
        todo.len() + 4,
        "one reply per request: {replies:?}"
    );
    for (i, r) in replies.iter().enumerate() {
        match i {
            1 | 2 => {
                assert_eq!(
                    (r["ok"].as_bool(), r["code"].as_u64()),
                    (Some(false), Some(2)),
                    "{r}"
                );
                let e = r["error"].as_str().unwrap();
                assert!(
                    e.contains(if i == 1 { "request 2" } else { "no-such-unit" }),
                    "{e}"
                );
            }
            _ => assert_eq!(r, &serde_json::json!({"ok": true})),
        }
    }
    assert!(!served.join("no-such-unit.json").exists());
    for s in &todo {
        let name = format!("{s}.json");
        assert_eq!(
            untimed_verdict(&served.join(&name)),
            untimed_verdict(&one.join(&name)),
            "{s}"
        );
    }
    let first = untimed_verdict(&one.join(format!("{}.json", todo[0])));
    assert_eq!(untimed_verdict(&again), first);
    let process = untimed_verdict(&p_out);
    assert_eq!(
        (&process["state"], &process["verdict"]),
        (&first["state"], &first["verdict"])
    );
    assert_eq!(
        distinct_lines(&pids),
        2,
        "one warm server for the server units in a row, then one more"
    );
}
