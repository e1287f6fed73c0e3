//! Issue 25, finding 4: no trace makes the explorer panic. Malformed strace lines in a
//! bundle's raw trace are input errors naming the line (exit 2, the bundle untouched), and
//! a real program that makes a 1 TiB sparse file records and checks like any other.

mod common;
use common::*;
use std::path::Path;

/// Lines strace never prints: missing arguments, wrong kinds, offsets and sizes past what
/// a file can hold. `@D` is the recorded directory. Each one panicked or aborted
/// `intact reconvert` before (exit 101 or 134), or was silently accepted.
const MALFORMED: &[&str] = &[
    "fsync() = 0",
    "write() = 3",
    "renameat2() = 0",
    "linkat(AT_FDCWD) = 0",
    "dup2() = 1",
    "lseek() = 0",
    "fchmod() = 0",
    "utimensat() = 0",
    "splice(3) = 3",
    "fchdir() = 0",
    r#"pwrite64(1<@D/f>, "x", 1, 18446744073709551610) = 1"#,
    "ftruncate(1<@D/f>, 9223372036854775808) = 0",
    "fdatasync() = 0",
    "ftruncate() = 0",
    r#"truncate("f") = 0"#,
    "fallocate(1<@D/f>) = 0",
    "copy_file_range(1<@D/f>) = 1",
    "sendfile(1<@D/f>) = 1",
    r#"rename("f") = 0"#,
    "link() = 0",
    "unlinkat(AT_FDCWD<@D>) = 0",
    "mkdirat() = 0",
    r#"symlinkat("x") = 0"#,
    "close() = 0",
    r#"pwrite64(1<@D/f>, "x", 1) = 1"#,
    r#"pwrite64(1<@D/f>, "x", 1, -5) = 1"#,
    "fallocate(1<@D/f>, 0, 9223372036854775000, 4096) = 0",
    "msync(0xfffffffffffff000, 8192, MS_SYNC) = 0",
    "sync_file_range(1<@D/f>, 9223372036854775807, 100, 0) = 0",
    "mmap(NULL, 4096, PROT_READ, MAP_SHARED, 1<@D/f>) = 0x7f0000000000",
    "fchmodat(AT_FDCWD<@D>) = 0",
    "openat(AT_FDCWD<@D>) = 3",
    "ftruncate(1<@D/f>, -1) = 0",
    r#"fsync("f") = 0"#,
    r#"lseek("x", 0, SEEK_SET) = 0"#,
    r#"renameat2(AT_FDCWD<@D>, "f", AT_FDCWD<@D>) = 0"#,
    r#"pwritev(1<@D/f>, [{iov_base="x", iov_len=1}], 1, 9223372036854775807) = 1"#,
    "munmap(0xffffffffffffff00, 4096) = 0",
];

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

#[test]
fn malformed_trace_lines_are_input_errors_naming_the_line() {
    let r = record_in(&["sh", "-c", "echo hi > f"], |_| {}, &["--no-stacks"]);
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    let raw = std::fs::read_to_string(r.bundle.join("trace.raw")).unwrap();
    let lines: Vec<&str> = raw.lines().collect();
    let dir = std::fs::canonicalize(&r.work).unwrap();
    let dir = dir.to_str().unwrap();
    // Right after the shell's write to f: fd 1 is f there.
    let anchor = lines
        .iter()
        .position(|l| l.contains(r#"write(1<"#) && l.contains(r#"/f>, "hi\n", 3) = 3"#))
        .expect("the shell's write(1<.../f>, \"hi\\n\", 3) in the trace");
    let pid = lines[anchor].split_whitespace().next().unwrap();
    let mut failures = Vec::new();
    for (i, bad) in MALFORMED.iter().enumerate() {
        let line = format!("{pid} {}", bad.replace("@D", dir));
        let b = r.tmp.path().join(format!("bad{i}"));
        copy_dir(&r.bundle, &b);
        let mut text: Vec<&str> = lines.clone();
        text.insert(anchor + 1, &line);
        std::fs::write(b.join("trace.raw"), text.join("\n") + "\n").unwrap();
        let ops_before = std::fs::read(b.join("ops.jsonl")).unwrap();
        let out = intact().arg("reconvert").arg(&b).output().unwrap();
        let e = String::from_utf8_lossy(&out.stderr);
        let named = format!("trace.raw:{}:", anchor + 2);
        let ok = out.status.code() == Some(2)
            && !e.contains("panicked")
            && e.contains(&named)
            && e.contains("malformed")
            && e.contains(line.as_str())
            && std::fs::read(b.join("ops.jsonl")).unwrap() == ops_before;
        if !ok {
            failures.push(format!("{line}\n  -> {:?}: {e}", out.status.code()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} malformed lines not refused cleanly:\n{}",
        failures.len(),
        MALFORMED.len(),
        failures.join("\n")
    );
}

#[test]
fn a_terabyte_sparse_file_records_and_checks() {
    let r = record_c("sparse_tib", |_| {});
    let meta = std::fs::metadata(r.work.join("big")).unwrap();
    assert_eq!(meta.len(), 1 << 40);
    // The bundle holds what was written, not the size.
    let mut bytes = 0;
    for sub in ["initial", "final"] {
        bytes += std::fs::metadata(r.bundle.join(sub).join("contents.bin"))
            .unwrap()
            .len();
    }
    assert!(bytes < 1 << 20, "snapshots hold {bytes} bytes");
    let ops = r.sigs();
    assert!(
        ops.iter()
            .any(|o| o.contains("truncate") && o.contains("1099511627776")),
        "{ops:?}"
    );
    let checker = r.tmp.path().join("check.sh");
    std::fs::write(&checker, "#!/bin/sh\n# accepts every state\nexit 0\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&checker, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = intact()
        .arg("check")
        .arg("--checker")
        .arg(&checker)
        .arg(&r.bundle)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "intact check: {e}");
    assert!(!e.contains("panicked"), "{e}");
    // Every process so far (record, check, their crash states) stayed small.
    // SAFETY: rusage is plain integers, for which all zeros is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we own.
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) },
        0
    );
    assert!(ru.ru_maxrss < 1 << 20, "a child used {} KiB", ru.ru_maxrss);
}
