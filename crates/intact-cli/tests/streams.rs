//! intactfs streams in traces: the preload shim reports SETSTREAM, every logical operation
//! carries its stream, and the intactfs APM orders a stream's updates and related updates
//! across streams, but not unrelated updates of different streams (ccfs, `000` §3.5).

mod common;
use common::{build_c, intact, record_in};
use std::path::Path;

fn record(mode: &str) -> common::Recorded {
    let bins = tempfile::tempdir().unwrap();
    let bin = build_c("streams", bins.path());
    let r = record_in(&[bin.to_str().unwrap(), mode], |_| {}, &["--no-stacks"]);
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    r.verify();
    r
}

fn check(bundle: &Path, checker: &Path) -> (i32, String) {
    let o = intact()
        .arg("check")
        .arg(bundle)
        .args([
            "--apm",
            "intactfs",
            "--explore",
            "exhaustive",
            "-q",
            "--checker",
        ])
        .arg(checker)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn script(dir: &Path, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("check.sh");
    std::fs::write(&p, format!("#!/bin/sh\ncd \"$1\"\n{body}")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn operations_carry_their_stream_and_ignore_fsync_drops_syncs() {
    let r = record("unrelated");
    let ops = r.ops_json();
    let stream_of = |path: &str, kind: &str| {
        ops.iter()
            .find(|o| o["path"] == path && o["op"] == kind)
            .map(|o| o["stream"].as_u64().unwrap_or(0))
    };
    assert_eq!(stream_of("a", "append"), Some(0x1111), "{ops:?}");
    assert_eq!(stream_of("b", "append"), Some(0x2222), "{ops:?}");
    assert_eq!(stream_of("c", "append"), Some(0x3333), "{ops:?}");
    assert_eq!(
        stream_of("b", "sync"),
        Some(0x2222),
        "b's fsync is a sync point of stream B"
    );
    assert_eq!(
        stream_of("c", "sync"),
        None,
        "an IGNORE_FSYNC stream's fsync is no sync point"
    );
    // The output comes from the process, which is in the last stream it chose.
    assert!(ops.iter().any(|o| o["op"] == "output"));
}

#[test]
fn unrelated_updates_of_two_streams_may_be_reordered() {
    let r = record("unrelated");
    // "b without a": B's update survives while A's earlier, unrelated one is lost.
    let c = script(
        r.tmp.path(),
        "if [ -e b ] && [ ! -e a ]; then echo 'b without a' >&2; exit 1; fi\n",
    );
    let (code, out) = check(&r.bundle, &c);
    assert_eq!(code, 1, "two streams: a crash may keep b and lose a\n{out}");
    assert!(out.contains("b without a"), "{out}");
    // The same program with both names in one stream: program order, no such state.
    let one = record("same");
    let c = script(
        one.tmp.path(),
        "if [ -e b ] && [ ! -e a ]; then echo 'b without a' >&2; exit 1; fi\n",
    );
    let (code, out) = check(&one.bundle, &c);
    assert_eq!(code, 0, "one stream: a persists before b\n{out}");
}

#[test]
fn related_updates_across_streams_stay_in_order() {
    let r = record("related");
    // Both streams append to f: stream B's "2" never survives without stream A's "1".
    let c = script(
        r.tmp.path(),
        "case \"$(cat f 2>/dev/null)\" in 2*) echo \"f is $(cat f)\" >&2; exit 1;; esac\n",
    );
    let (code, out) = check(&r.bundle, &c);
    assert_eq!(code, 0, "related across streams: in order\n{out}");
}
