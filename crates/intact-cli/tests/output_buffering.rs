//! Issue 27 item 7: output where the program made it. A C program that printf's a promise,
//! recorded without a terminal (these tests' stdout is a pipe), gets a pseudo-terminal as
//! stdout by default: the output operation follows the fsync and names the printf line.
//! With --keep-buffering its stdout is the pipe, fully buffered: the output moves to exit.

mod common;
use common::*;

/// The 1-based line of the fixture's printf.
fn promise_line() -> u64 {
    let src = std::fs::read_to_string(fixtures_dir().join("printf_promise.c")).unwrap();
    let i = src
        .lines()
        .position(|l| l.contains("/* PROMISE */"))
        .expect("the fixture marks its printf");
    i as u64 + 1
}

fn record_promise(extra: &[&str]) -> Recorded {
    let bins = tempfile::tempdir().unwrap();
    let bin = build_c("printf_promise", bins.path());
    let mut r = record_in(&[bin.to_str().unwrap()], |_| {}, extra);
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    r.verify();
    r.bins = Some(bins);
    r
}

fn bundle_meta(r: &Recorded) -> serde_json::Value {
    let text = std::fs::read(r.bundle.join("bundle.json")).unwrap();
    serde_json::from_slice(&text).unwrap()
}

#[test]
fn a_printed_promise_stands_after_the_fsync_by_default() {
    let r = record_promise(&[]);
    assert_ops(
        &r,
        &[
            "create data",
            "append data 0->3 \"v1\\n\"",
            "fsync data",
            "output \"saved\\n\"",
            "create log",
            "append log 0->6 \"after\\n\"",
            "unlink log n=0",
        ],
    );
    let ops = r.ops_json();
    let out = ops.iter().find(|o| o["op"] == "output").unwrap();
    let loc = &out["loc"];
    assert!(
        loc["file"]
            .as_str()
            .unwrap_or("")
            .ends_with("printf_promise.c"),
        "the output names libc, not the program: {out}"
    );
    assert_eq!(loc["line"].as_u64(), Some(promise_line()), "{out}");
    // Captured byte for byte: in the bundle and on intact's own stdout (the terminal's copy).
    assert_eq!(std::fs::read(r.bundle.join("stdout")).unwrap(), b"saved\n");
    assert_eq!(r.output.stdout, b"saved\n");
    let meta = bundle_meta(&r);
    assert_eq!(meta["stdout_mode"], "terminal", "{meta}");
    assert_eq!(meta["version"], 2);
    assert!(
        meta["stdout"]
            .as_str()
            .unwrap_or("")
            .starts_with("/dev/pts/"),
        "{meta}"
    );
}

#[test]
fn keep_buffering_moves_the_promise_to_exit() {
    let r = record_promise(&["--keep-buffering"]);
    assert_ops(
        &r,
        &[
            "create data",
            "append data 0->3 \"v1\\n\"",
            "fsync data",
            "create log",
            "append log 0->6 \"after\\n\"",
            "unlink log n=0",
            "output \"saved\\n\"",
        ],
    );
    let ops = r.ops_json();
    let out = ops.iter().find(|o| o["op"] == "output").unwrap();
    assert_ne!(out["loc"]["line"].as_u64(), Some(promise_line()), "{out}");
    assert_eq!(std::fs::read(r.bundle.join("stdout")).unwrap(), b"saved\n");
    assert_eq!(r.output.stdout, b"saved\n");
    assert_eq!(bundle_meta(&r)["stdout_mode"], "inherited");
}
