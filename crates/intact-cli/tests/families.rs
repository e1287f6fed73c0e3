//! One small C fixture per family of system calls (thesis "ALICE" Table 3.1 and the calls
//! around it): each records the fixture under strace, asserts the exact logical operations
//! and (through `record_c`) that the replay oracle holds.
//!
//! Inode numbers in `<unlinked #N>` come from the snapshot: an empty work directory is
//! inode 1 and new inodes are numbered from 2 in the order they appear.

mod common;
use common::*;
use std::path::Path;

fn write_file(dir: &Path, name: &str, data: &str) {
    std::fs::write(dir.join(name), data).unwrap();
}

#[test]
fn open_flags_family() {
    let r = record_c("open_flags", |w| {
        write_file(w, "old", "0123456789");
        write_file(w, "empty", "");
    });
    assert_ops(
        &r,
        &[
            "create new",
            "append new 0->1 \"n\"",
            "truncate old 10->0",
            "append old 0->1 \"o\"",
            "create ap",
            "append ap 0->2 \"ab\"",
            "append ap 2->4 \"cd\"",
            "append ap 4->6 \"ef\"",
            "create sy",
            "append sy 0->2 \"s1\"",
            "o_sync sy 0+2",
            "overwrite sy @0 \"S\"",
            "o_sync sy 0+1",
            "create ds",
            "append ds 0->2 \"d1\"",
            "o_dsync ds 0+2",
            "create cr",
            "append cr 0->1 \"c\"",
            "truncate cr 1->0",
            "append cr 0->1 \"C\"",
            "mkdir sub",
            "create sub/f1",
            "append sub/f1 0->1 \"1\"",
            "create sub/f2",
            "append sub/f2 0->1 \"2\"",
            "create sub/f3",
            "append sub/f3 0->3 \"333\"",
            "truncate sub/f3 3->0",
            "append sub/f3 0->1 \"3\"",
        ],
    );
    // The syscalls behind the ops: creat and openat2 are recognised as such.
    let calls: Vec<String> = r
        .ops_json()
        .iter()
        .map(|o| o["syscall"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        calls.iter().filter(|c| *c == "creat").count(),
        2,
        "{calls:?}"
    );
    assert_eq!(
        calls.iter().filter(|c| *c == "openat2").count(),
        2,
        "{calls:?}"
    );
}

#[test]
fn tmpfile_family() {
    let r = record_c("tmpfile", |_| {});
    assert_ops(
        &r,
        &[
            "mkdir d",
            "append <unlinked #3> 0->4 \"tmp1\"",
            "link =>d/one n=1",
            "append d/one 4->8 \"more\"",
            "append <unlinked #4> 0->4 \"tmp2\"",
            "link =>d/two n=1",
            "link d/two=>three n=2",
            "append three 4->5 \"!\"", // an op's path is the inode's newest name
            "append <unlinked #5> 0->4 \"gone\"",
        ],
    );
}

#[test]
fn write_family() {
    let r = record_c("writes", |_| {});
    assert_ops(
        &r,
        &[
            "create f",
            "append f 0->10 \"0123456789\"",
            "overwrite f @2 \"AB\"",
            "truncate f 10->15",
            "append f 15->16 \"Z\"",
            "overwrite f @4 \"abcd\"",
            "overwrite f @10 \"abcd\"",
            "overwrite f @0 \"ab\"",
            "o_dsync f 0+2",
            "overwrite f @14 \"WX\"",
            "append f 16->18 \"YZ\"",
            "append f 18->21 \"xyz\"",
            "truncate f 21->30",
            "append f 30->33 \"xyz\"",
            "append f 33->35 \"ab\"",
            "overwrite f @21 \"cd\"",
            "o_sync f 21+2",
        ],
    );
}

#[test]
fn truncate_family() {
    let r = record_c("truncate", |w| write_file(w, "t", "0123456789"));
    assert_ops(
        &r,
        &[
            "truncate t 10->4",
            "truncate t 4->8",
            "create u",
            "append u 0->6 \"abcdef\"",
            "truncate u 6->2",
            "truncate u 2->5",
            "truncate u 5->6",
            "append u 6->7 \"X\"",
            "truncate u 7->0",
        ],
    );
}

#[test]
fn fallocate_family() {
    let r = record_c("fallocate", |_| {});
    assert_ops(
        &r,
        &[
            "create f",
            "append f 0->8 \"abcdefgh\"",
            "truncate f 8->16",
            "overwrite f @2 <3 zeros>",
            "overwrite f @14 <2 zeros>",
            "overwrite f @4 <2 zeros>",
            "overwrite f @12 <4 zeros>",
            "truncate f 16->20",
            "overwrite f @18 <2 zeros>",
            "truncate f 20->28",
        ],
    );
}

#[test]
fn copy_family() {
    let r = record_c("copy", |_| {});
    assert_ops(
        &r,
        &[
            "create src",
            "append src 0->11 \"hello world\"",
            "create dst",
            "append dst 0->5 \"hello\"",
            "overwrite dst @2 \"wor\"",
            "append dst 5->7 \"ld\"",
            "overwrite dst @5 \" w\"",
            "append dst 7->8 \"o\"",
            "create snd",
            "append snd 0->5 \"world\"",
            "append snd 5->8 \"rld\"",
        ],
    );
}

#[test]
fn rename_family() {
    let r = record_c("rename", |_| {});
    assert_ops(
        &r,
        &[
            "create a",
            "append a 0->1 \"A\"",
            "create b",
            "append b 0->1 \"B\"",
            "create c",
            "append c 0->1 \"C\"",
            "rename a=>a2",
            "rename a2=>b replace",
            "rename b=>b2",
            "rename b2=>n",
            "rename n=>c exchange",
            "rename c=>n replace",
            "mkdir d",
            "mkdir d/e",
            "create d/x",
            "append d/x 0->1 \"x\"",
            "create d/e/y",
            "append d/e/y 0->1 \"y\"",
            "rename d=>d2",
            "append d2/x 1->2 \"y\"",
            "rename d2/e=>e2",
            "rename e2/y=>d2/y",
            "link n=>h n=2",
            "rename h=>d2/x exchange",
        ],
    );
}

#[test]
fn namespace_family() {
    let r = record_c("namespace", |_| {});
    // The fixture makes a symlink with an absolute target: the work directory's real path.
    let abs = format!(
        "symlink abs->{}/c2",
        std::fs::canonicalize(&r.work).unwrap().display()
    );
    assert_ops(
        &r,
        &[
            "mkdir d",
            "mkdir d/e",
            "mkdir d/f",
            "create d/a",
            "append d/a 0->1 \"a\"",
            "link d/a=>d/b n=2",
            "link d/b=>c n=3",
            "unlink d/a n=2",
            "unlink d/b n=1",
            "rmdir d/f",
            "rmdir d/e",
            "symlink d/s->../c",
            "symlink d/t->dangling",
            "symlink l->d",
            "append c 1->2 \"!\"",
            "overwrite c @0 \"?\"",
            "link c=>c2 n=2",
            "unlink l n=0",
            "create d/dangling",
            "append d/dangling 0->1 \"t\"",
            &abs,
            "append c2 2->3 \"@\"", // c and c2 are one inode, shown under its newest name
            "create g",
            "append g 0->2 \"gg\"",
            "unlink g n=0",
            "append <unlinked #11> 2->6 \"more\"",
        ],
    );
}

#[test]

fn symlink_hardlink_family() {
    let r = record_c("symlink_hardlink", |_| {});
    assert_ops(
        &r,
        &["symlink s->target", "link s=>s2 n=2", "link s=>s3 n=3"],
    );
}

#[test]
fn sync_family() {
    let r = record_c("sync", |_| {});
    assert_ops(
        &r,
        &[
            "create f",
            "append f 0->11 \"hello world\"",
            "fsync f",
            "fdatasync f",
            "sync_file_range f 2+3",
            "sync_file_range f 4+7",
            "syncfs *",
            "sync *",
            "mkdir d",
            "fsync d",
            "fdatasync .",
        ],
    );
}

#[test]
fn fd_table_family() {
    let r = record_c("fdtable", |_| {});
    assert_ops(
        &r,
        &[
            "create f",
            "append f 0->2 \"ab\"",
            "append f 2->4 \"cd\"",
            "create g",
            "append g 0->1 \"x\"",
            "append f 4->6 \"ef\"",
            "append f 6->8 \"gh\"",
            "overwrite f @0 \"AB\"",
            "overwrite f @2 \"CD\"",
            "append f 8->10 \"ij\"",
            "append f 10->12 \"kl\"",
            "overwrite f @1 \"Q\"",
            "create h",
            "append h 0->1 \"h\"",
        ],
    );
}

#[test]
fn cwd_family() {
    let r = record_c("cwd", |_| {});
    assert_ops(
        &r,
        &[
            "mkdir d",
            "mkdir d/sub",
            "create d/a",
            "append d/a 0->1 \"+\"",
            "create d/b",
            "append d/b 0->1 \"+\"",
            "create c",
            "append c 0->1 \"+\"",
            "create q",
            "append q 0->1 \"+\"",
            "create d/sub/x",
            "append d/sub/x 0->1 \"+\"",
            "mkdir d/sub/m",
            "rename d=>e",
            "create e/sub/y",
            "append e/sub/y 0->1 \"+\"",
            "unlink e/sub/x n=0",
            "create e/z",
            "append e/z 0->1 \"+\"",
            "create e/sub/w",
            "append e/sub/w 0->1 \"+\"",
            "rename e=>f",
            "create f/sub/v",
            "append f/sub/v 0->1 \"+\"",
            "mkdir f/sub/m/n",
            "create f/sub/u",
            "append f/sub/u 0->1 \"+\"",
        ],
    );
}

#[test]
fn process_family() {
    let r = record_c("procs", |_| {});
    assert_ops(
        &r,
        &[
            "create f",
            "append f 0->2 \"P0\"",
            "append f 2->4 \"C1\"",
            "output \"child\\n\"",
            "mkdir cd",
            "create cd/g",
            "append cd/g 0->1 \"g\"",
            "append f 4->6 \"P1\"",
            "create h",
            "append h 0->1 \"h\"",
            "append f 6->7 \"V\"",
            "append f 7->8 \"R\"",
            "create t1",
            "append t1 0->3 \"one\"",
            "append t1 3->7 \"main\"",
            "create t2",
            "append t2 0->3 \"two\"",
            "create e6",
            "create e7",
            "create e5",
            "append e5 0->3 \"hi\\n\"",
            "append e5 3->4 \"p\"",
            "mkdir s",
            "create s/shf",
            "append s/shf 0->2 \"z\\n\"",
            "create s/k",
            "append s/k 0->1 \"k\"",
            "append f 8->11 \"END\"",
        ],
    );
    // Who did what: processes get their own pid, threads share the main pid.
    let ops = r.ops_json();
    let pid = |i: usize| ops[i]["pid"].as_u64().unwrap();
    let tid = |i: usize| ops[i]["tid"].as_u64().unwrap();
    let main = pid(0);
    assert_eq!(tid(0), main);
    for i in [2, 3, 4, 10, 11, 20, 21, 23, 25] {
        assert_ne!(
            pid(i),
            main,
            "op {i} was done by a child process: {}",
            ops[i]
        );
    }
    for i in [7, 14, 27] {
        assert_eq!((pid(i), tid(i)), (main, main), "op {i}: {}", ops[i]);
    }
    for i in [12, 15] {
        assert_eq!(pid(i), main, "op {i} was done by a thread: {}", ops[i]);
        assert_ne!(tid(i), main, "op {i} was done by a thread: {}", ops[i]);
    }
    assert_ne!(tid(12), tid(15));
    assert_eq!(ops[20]["syscall"], "write"); // the exec'd shell's `echo hi >&5`
}

#[test]
fn outside_family() {
    let r = record_c("outside", |_| {});
    assert_ops(
        &r,
        &[
            "create inside",
            "append inside 0->2 \"in\"",
            "create leaving",
            "append leaving 0->3 \"bye\"",
            "unlink leaving n=0",
        ],
    );
    // Nothing was reported either: the outside calls are simply not the directory's business.
    let un = std::fs::read_to_string(r.bundle.join("unsupported.json")).unwrap();
    let un: Vec<serde_json::Value> = serde_json::from_str(&un).unwrap();
    assert!(un.is_empty(), "{un:?}");
}

#[test]
fn ignore_family() {
    let bins = tempfile::tempdir().unwrap();
    let bin = build_c("ignore", bins.path());
    let r = record_in(&[bin.to_str().unwrap()], |_| {}, &["--ignore", "*.lock"]);
    assert_eq!(
        r.output.status.code(),
        Some(0),
        "intact record failed:\n{}",
        r.stderr()
    );
    r.verify();
    assert_ops(
        &r,
        &[
            "create data",
            "append data 0->1 \"d\"",
            "fsync data",
            "mkdir sub",
        ],
    );
}

fn unsupported_entries(r: &Recorded) -> Vec<serde_json::Value> {
    let un = std::fs::read_to_string(r.bundle.join("unsupported.json")).unwrap();
    serde_json::from_str(&un).unwrap()
}

#[test]
fn unsupported_family() {
    let r = record_c("unsupported", |_| {});
    assert_ops(&r, &["create f", "append f 0->1 \"f\""]);
    let err = r.stderr();
    let warning = err
        .lines()
        .find(|l| l.contains("warning") && l.contains(" chmod "))
        .unwrap_or_else(|| panic!("no chmod warning:\n{err}"));
    assert!(warning.contains("not modelled"), "{warning}");
    assert!(
        err.lines()
            .any(|l| l.contains("warning") && l.contains(" fchmod ") && l.contains("not modelled")),
        "{err}"
    );
    let un = unsupported_entries(&r);
    let find = |name: &str| {
        un.iter()
            .find(|u| u["syscall"] == name)
            .unwrap_or_else(|| panic!("no {name} in {un:?}"))
            .clone()
    };
    let chmod = find("chmod");
    assert_eq!(
        chmod["count"], 1,
        "chmod of /tmp (outside) must not count: {chmod}"
    );
    assert_eq!(chmod["first_path"], "f");
    assert_eq!(find("fchmod")["first_path"], "f");
    assert_eq!(un.len(), 2, "{un:?}");
}

#[test]

fn unsupported_warning_names_the_workload_source() {
    let r = record_c("unsupported", |_| {});
    let err = r.stderr();
    for name in [" chmod ", " fchmod "] {
        let warning = err
            .lines()
            .find(|l| l.contains("warning") && l.contains(name))
            .unwrap_or_else(|| panic!("no{name}warning:\n{err}"));
        assert!(warning.contains("fixtures/unsupported.c:"), "{warning}");
        assert!(warning.ends_with(":main"), "{warning}");
    }
}

// ---- Edge cases found by these fixtures (each was a converter, parser or snapshot bug, now fixed). ----

/// `record_c` with extra `intact record` options.
fn record_c_with(name: &str, extra: &[&str]) -> Recorded {
    let bins = tempfile::tempdir().unwrap();
    let bin = build_c(name, bins.path());
    let mut r = record_in(&[bin.to_str().unwrap()], |_| {}, extra);
    assert_eq!(
        r.output.status.code(),
        Some(0),
        "intact record failed:\n{}",
        r.stderr()
    );
    r.verify();
    r.bins = Some(bins);
    r
}

#[test]

fn proc_fd_reopen() {
    let r = record_c("proc_fd_reopen", |_| {});
    assert_ops(
        &r,
        &[
            "create f",
            "append f 0->3 \"abc\"",
            "append f 3->6 \"def\"",
            "truncate f 6->0",
            "append f 0->1 \"X\"",
        ],
    );
}

#[test]

fn link_fd_paths() {
    let r = record_c("link_fd_paths", |_| {});
    assert_ops(
        &r,
        &[
            "mkdir d",
            "append <unlinked #3> 0->3 \"pid\"",
            "link =>d/a n=1",
            "append <unlinked #4> 0->3 \"dev\"",
            "link =>d/b n=1",
        ],
    );
}

#[test]

fn openat2_in_root() {
    let r = record_c("openat2_in_root", |_| {});
    assert_ops(
        &r,
        &[
            "mkdir jail",
            "create jail/abs",
            "append jail/abs 0->1 \"a\"",
            "create jail/up",
            "append jail/up 0->1 \"u\"",
        ],
    );
}

#[test]

fn exec_fionclex() {
    let r = record_c("exec_fionclex", |_| {});
    assert_ops(
        &r,
        &[
            "create log",
            "append log 0->3 \"abc\"",
            "append log 3->6 \"hi\\n\"",
            "append log 6->7 \"!\"",
        ],
    );
    assert_eq!(unsupported_entries(&r), Vec::<serde_json::Value>::new());
}

#[test]

fn thread_exec() {
    let r = record_c_with("thread_exec", &["--no-stacks"]);
    assert_ops(
        &r,
        &[
            "create log",
            "append log 0->3 \"abc\"",
            "append log 3->6 \"hi\\n\"",
            "create end",
            "append end 0->5 \"done\\n\"",
        ],
    );
}

#[test]

fn rwf_noappend() {
    let r = record_c("rwf_noappend", |_| {});
    assert_ops(
        &r,
        &[
            "create f",
            "append f 0->6 \"abcdef\"",
            "overwrite f @1 \"XY\"",
            "append f 6->7 \"g\"",
        ],
    );
}

#[test]

fn exchange_same_inode() {
    let r = record_c("exchange_same_inode", |_| {});
    assert_ops(&r, &["create a", "append a 0->1 \"a\"", "link a=>b n=2"]);
}
