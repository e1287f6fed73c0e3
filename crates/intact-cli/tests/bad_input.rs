//! Bad input: a clear message, a non-zero exit, no panic, nothing left behind.

mod common;
use common::*;
use std::path::Path;

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".partial-"))
        .collect()
}

fn no_panic(out: &std::process::Output) {
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn missing_dir() {
    let t = tempfile::tempdir().unwrap();
    let out = intact()
        .current_dir(t.path())
        .args(["record", "--dir", "nope", "--out", "b", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("--dir nope") && e.contains("No such file"),
        "{e}"
    );
    assert!(!t.path().join("b").exists());
    assert!(leftovers(t.path()).is_empty());
    no_panic(&out);
}

#[test]
fn unknown_command() {
    let t = tempfile::tempdir().unwrap();
    let out = intact()
        .current_dir(t.path())
        .args(["record", "--out", "b", "--", "no-such-program-xyz"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("command not found: \"no-such-program-xyz\"")
    );
    assert!(!t.path().join("b").exists());
    assert!(leftovers(t.path()).is_empty());
}

#[test]
fn missing_command_is_a_usage_error() {
    let out = intact().args(["record"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    no_panic(&out);
}

#[test]
fn strace_missing() {
    let t = tempfile::tempdir().unwrap();
    let out = intact()
        .current_dir(t.path())
        .args([
            "record",
            "--strace",
            "/nonexistent/strace",
            "--out",
            "b",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("strace was not found") && e.contains("apt-get install -y strace"),
        "{e}"
    );
    assert!(!t.path().join("b").exists());
    assert!(leftovers(t.path()).is_empty());
}

#[test]
fn workload_fails_or_is_killed() {
    for (script, expect) in [
        ("exit 3", "exited with status 3"),
        ("kill -SEGV $$", "killed by SIGSEGV"),
        ("kill -KILL $$", "killed by SIGKILL"),
    ] {
        let r = record_in(&["sh", "-c", &format!("echo x > f; {script}")], |_| {}, &[]);
        assert_eq!(r.output.status.code(), Some(1), "{script}: {}", r.stderr());
        assert!(r.stderr().contains(expect), "{script}: {}", r.stderr());
        // The bundle records what happened up to that point, and says how it ended.
        r.verify();
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(r.bundle.join("bundle.json")).unwrap()).unwrap();
        assert!(meta["workload"].is_object(), "{meta}");
        assert!(r.sigs().contains(&"create f".to_string()));
        no_panic(&r.output);
    }
}

#[test]
fn trace_cut_short() {
    // A strace wrapper that cuts its output file in the middle of a line.
    let t = tempfile::tempdir().unwrap();
    let fake = t.path().join("fake-strace");
    std::fs::write(
        &fake,
        "#!/bin/sh\nif [ \"$1\" = -V ]; then exec strace -V; fi\nout=''\nprev=''\nfor a in \"$@\"; do [ \"$prev\" = -o ] && out=$a; prev=$a; done\nstrace \"$@\"\ns=$?\nsz=$(stat -c %s \"$out\")\ntruncate -s $((sz - 7)) \"$out\"\nexit $s\n",
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&fake)
        .status()
        .unwrap();
    let work = t.path().join("w");
    std::fs::create_dir(&work).unwrap();
    let out = intact()
        .current_dir(&work)
        .arg("record")
        .arg("--strace")
        .arg(&fake)
        .args(["--out", "../b", "--", "sh", "-c", "echo hi > f"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("cut short"));
    assert!(!t.path().join("b").exists());
    assert!(leftovers(t.path()).is_empty());
    no_panic(&out);
}

#[test]
fn unwritable_output() {
    let t = tempfile::tempdir().unwrap();
    for bad in ["/proc/intact-bundle", "/nonexistent-dir/b"] {
        let out = intact()
            .current_dir(t.path())
            .args(["record", "--out", bad, "--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("--out"), "{e}");
        no_panic(&out);
    }
    // An existing bundle is not replaced without --force.
    std::fs::create_dir(t.path().join("b")).unwrap();
    let out = intact()
        .current_dir(t.path())
        .args(["record", "--out", "b", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
}

#[test]
fn not_a_bundle() {
    let t = tempfile::tempdir().unwrap();
    for cmd in ["ops", "verify"] {
        let out = intact()
            .args([cmd, t.path().to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("bundle.json"));
        let out = intact().args([cmd, "/nonexistent"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        no_panic(&out);
    }
    // A damaged operations file is named.
    let r = record_in(&["sh", "-c", "echo x > f"], |_| {}, &[]);
    std::fs::write(r.bundle.join("ops.jsonl"), "{not json\n").unwrap();
    let out = intact().arg("ops").arg(&r.bundle).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ops.jsonl: not a valid bundle file: line 1")
    );
}

#[test]
fn bundle_inside_recorded_dir_is_ignored() {
    // Default --out is ./intact.bundle inside the default --dir (.): it must not record itself.
    let t = tempfile::tempdir().unwrap();
    let out = intact()
        .current_dir(t.path())
        .args(["record", "--", "sh", "-c", "echo x > f"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = intact()
        .current_dir(t.path())
        .args(["verify", "intact.bundle"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A second recording with --force over the first also works.
    let out = intact()
        .current_dir(t.path())
        .args(["record", "--force", "--", "sh", "-c", "echo y >> f"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(leftovers(t.path()).is_empty());
}
