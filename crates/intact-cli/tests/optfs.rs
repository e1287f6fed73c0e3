//! OptFS's osync (the seeds' `001` §4.4, §7.1) and file systems without flushes, end to
//! end: the gedit-style atomic update of bench/optfs/gedit_update.c (write f.tmp, fsync,
//! rename over f, print "saved"), recorded under strace and explored by `intact check`.
//! With fsync as an osync (`intactfs-osync`) the update stays atomic; without flushes
//! (`nobarrier`) it does not; and osync gives up exactly the durability of "saved".

mod common;
use common::{intact, record_in, Recorded};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Gedit {
    _bins: tempfile::TempDir,
    bin: PathBuf,
}

impl Gedit {
    fn new() -> Gedit {
        let bins = tempfile::tempdir().unwrap();
        let bin = bins.path().join("gedit_update");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/optfs/gedit_update.c");
        let st = Command::new("gcc")
            .args(["-g", "-O0", "-Wall", "-o"])
            .arg(&bin)
            .arg(&src)
            .status()
            .expect("gcc must be installed");
        assert!(st.success(), "compiling {}", src.display());
        Gedit { _bins: bins, bin }
    }
    /// Records `gedit_update save [--durable]` in a directory where f holds the old version.
    fn record(&self, durable: bool) -> Recorded {
        let bin = self.bin.to_str().unwrap();
        let mut cmd = vec![bin, "save"];
        if durable {
            cmd.push("--durable");
        }
        let r = record_in(
            &cmd,
            |work| {
                assert!(Command::new(&self.bin)
                    .arg("init")
                    .current_dir(work)
                    .status()
                    .unwrap()
                    .success())
            },
            &["--no-stacks"],
        );
        assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
        r
    }
    fn checker(&self, durability: bool) -> String {
        format!(
            "{} check{}",
            self.bin.display(),
            if durability { " --durability" } else { "" }
        )
    }
}

/// `intact check` exhaustively under `apms`; returns (exit code, text, JSON report).
fn check(r: &Recorded, checker: &str, apms: &str) -> (i32, String, serde_json::Value) {
    let json = r.tmp.path().join("report.json");
    let _ = std::fs::remove_file(&json);
    let out = intact()
        .arg("check")
        .arg(&r.bundle)
        .args([
            "--checker",
            checker,
            "--apm",
            apms,
            "--explore",
            "exhaustive",
            "-q",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let rep = serde_json::from_str(
        &std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("no report:\n{text}")),
    )
    .unwrap();
    (out.status.code().unwrap_or(-1), text, rep)
}

/// The APMs under which some state failed.
fn exposing(rep: &serde_json::Value) -> BTreeSet<String> {
    rep["dynamic"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["apm"].as_str().unwrap().to_string())
        .collect()
}

/// The APM's line of the report: (distinct states, checked here, failed).
fn counts(rep: &serde_json::Value, apm: &str) -> (u64, u64, u64) {
    let a = rep["apms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["apm"] == apm)
        .unwrap();
    assert_eq!(
        a["complete"], true,
        "{apm}: exhaustive search must complete"
    );
    (
        a["distinct"].as_u64().unwrap(),
        a["checked"].as_u64().unwrap(),
        a["failed"].as_u64().unwrap(),
    )
}

/// `001` §7.1, Table 3: gedit's atomic update with osync in place of fsync always leaves
/// the old or the new version; without flushes it does not (the rename can persist
/// before the data, or the old name's removal without the new one).
#[test]
fn gedit_update_is_atomic_under_osync_not_without_flushes() {
    let g = Gedit::new();
    let r = g.record(false);
    // intactfs-osync first: every one of its states is checked under it.
    let (code, text, rep) = check(
        &r,
        &g.checker(false),
        "intactfs-osync,nobarrier,intactfs,ext4-o",
    );
    assert_eq!(code, 1, "{text}");
    let (distinct, checked, failed) = counts(&rep, "intactfs-osync");
    assert!(distinct > 1 && checked == distinct, "{text}");
    assert_eq!(failed, 0, "intactfs-osync: f is always old or new\n{text}");
    let (_, _, failed) = counts(&rep, "nobarrier");
    assert!(
        failed > 0,
        "nobarrier: some state has f neither old nor new\n{text}"
    );
    assert_eq!(
        exposing(&rep),
        BTreeSet::from(["nobarrier".to_string()]),
        "{text}"
    );
    let messages: Vec<&str> = rep["dynamic"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["example"]["checker_message"].as_str().unwrap())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("neither the old nor the new"))
            && messages.iter().any(|m| m.contains("f is missing")),
        "{messages:?}"
    );
}

/// The same update made durable (fsync(".") after the rename, then "saved"), checked for
/// durability: intactfs (and ext4-o) make "saved" true, an osync does not (`001` §4.4:
/// ordering now, durability eventually), so only intactfs-osync is flagged, and only in
/// states where "saved" was printed.
#[test]
fn durable_save_is_not_durable_under_osync() {
    let g = Gedit::new();
    let r = g.record(true);
    let (code, text, rep) = check(&r, &g.checker(true), "intactfs,intactfs-osync,ext4-o");
    assert_eq!(code, 1, "{text}");
    assert_eq!(counts(&rep, "intactfs").2, 0, "{text}");
    assert_eq!(
        exposing(&rep),
        BTreeSet::from(["intactfs-osync".to_string()]),
        "{text}"
    );
    let dynamic = rep["dynamic"].as_array().unwrap();
    assert!(
        dynamic
            .iter()
            .any(|d| d["category"] == "durability" && d["calls"][0]["syscall"] == "rename"),
        "the rename is lost behind \"saved\"\n{text}"
    );
    for d in dynamic {
        assert!(
            d["example"]["checker_message"]
                .as_str()
                .unwrap()
                .contains("\"saved\" was printed"),
            "{text}"
        );
        assert_eq!(
            d["calls"].as_array().unwrap().last().unwrap()["summary"]
                .as_str()
                .unwrap()
                .split_whitespace()
                .next(),
            Some("output"),
            "the output outran the update\n{text}"
        );
    }
    // The same program without the durability demand: consistent under intactfs-osync.
    let (code, text, _) = check(&r, &g.checker(false), "intactfs-osync");
    assert_eq!(code, 0, "{text}");
}
