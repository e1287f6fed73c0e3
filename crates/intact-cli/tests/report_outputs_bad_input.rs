//! Bad input to the report outputs (`--html`, `--sarif`, `--junit` of `intact check`, and
//! `intact report`): a clear message, exit 2, and nothing written — neither a partial
//! report file nor the checker's work (the paths are refused before the run).

mod common;
use common::{intact, record_c};
use std::path::Path;

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn unwritable_output_paths_are_refused_before_the_run() {
    let r = record_c("basic", |_| {});
    let marker = r.tmp.path().join("checker-ran");
    let checker = r.tmp.path().join("check.sh");
    std::fs::write(&checker, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&checker, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (flag, path) in [
        ("--html", "/nonexistent-dir/r.html"),
        ("--sarif", "/nonexistent-dir/r.sarif"),
        ("--junit", "/proc/r.xml"),
    ] {
        let o = intact()
            .arg("check")
            .arg(&r.bundle)
            .arg("--checker")
            .arg(&checker)
            .args([flag, path])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{flag} {path}: {}", text(&o));
        assert!(
            text(&o).contains(flag),
            "the message names the flag: {}",
            text(&o)
        );
        assert!(!Path::new(path).exists());
    }
    assert!(
        !marker.exists(),
        "the checker ran although an output path was unusable"
    );
    // A directory is not a file.
    let o = intact()
        .arg("check")
        .arg(&r.bundle)
        .arg("--checker")
        .arg(&checker)
        .arg("--html")
        .arg(r.tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[test]
fn report_refuses_what_is_not_a_json_report() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("r.html");
    let cases: [(&str, &str, &str); 3] = [
        ("missing.json", "", "No such file"),
        ("junk.json", "{not json", "not a JSON report"),
        (
            "other.json",
            "{\"schema\": \"intact-blk-report/1\"}",
            "schema",
        ),
    ];
    for (name, content, msg) in cases {
        let p = d.path().join(name);
        if !content.is_empty() {
            std::fs::write(&p, content).unwrap();
        }
        let o = intact()
            .arg("report")
            .arg(&p)
            .arg("--html")
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{name}: {}", text(&o));
        assert!(text(&o).contains(msg), "{name}: {}", text(&o));
        assert!(!out.exists(), "{name}: an output was written");
    }
    // No output named at all.
    let p = d.path().join("other.json");
    let o = intact().arg("report").arg(&p).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--html"), "{}", text(&o));
}
