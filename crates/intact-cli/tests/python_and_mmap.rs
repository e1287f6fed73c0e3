//! Python programs (source lines from the shim, also inside the sqlite3 C extension) and
//! writes through shared mappings (found by the shim's shadow copy).

mod common;
use common::*;

fn tagged_line(src: &str, tag: &str) -> u64 {
    let needle = format!("L:{tag}");
    src.lines()
        .position(|l| l.ends_with(&needle))
        .map(|i| i as u64 + 1)
        .unwrap_or_else(|| panic!("no line tagged {tag}"))
}

fn python_case(python: &str) {
    let script = fixtures_dir().join("app.py");
    let src = std::fs::read_to_string(&script).unwrap();
    let r = record_in(&[python, script.to_str().unwrap()], |_| {}, &[]);
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    r.verify();
    let ops = r.ops_json();
    let line_of = |sig_prefix: &str| -> u64 {
        let op = ops
            .iter()
            .find(|o| signature(o).starts_with(sig_prefix))
            .unwrap_or_else(|| panic!("no op {sig_prefix}"));
        assert_eq!(op["loc"]["lang"], "python", "{op}");
        assert!(
            op["loc"]["file"]
                .as_str()
                .unwrap()
                .ends_with("fixtures/app.py"),
            "{op}"
        );
        op["loc"]["line"].as_u64().unwrap()
    };
    assert_eq!(line_of("create raw.bin"), tagged_line(&src, "os_open"));
    assert_eq!(
        line_of("append raw.bin 0->3"),
        tagged_line(&src, "os_write")
    );
    assert_eq!(line_of("create cfg.txt.tmp"), tagged_line(&src, "open_tmp"));
    assert_eq!(
        line_of("append cfg.txt.tmp 0->6"),
        tagged_line(&src, "flush")
    );
    assert_eq!(line_of("fsync cfg.txt.tmp"), tagged_line(&src, "fsync"));
    assert_eq!(
        line_of("rename cfg.txt.tmp=>cfg.txt"),
        tagged_line(&src, "rename")
    );
    // I/O done by SQLite inside the _sqlite3 extension is attributed to the Python line.
    assert_eq!(
        line_of("create t.db"),
        tagged_line(&src, "create_table") - 1
    );
    let commit = tagged_line(&src, "commit");
    let commit_ops: Vec<_> = ops
        .iter()
        .filter(|o| o["loc"]["line"].as_u64() == Some(commit))
        .map(signature)
        .collect();
    assert!(commit_ops.iter().any(|s| s.starts_with("fdatasync t.db-journal") || s.starts_with("fsync t.db-journal")), "{commit_ops:?}");
    assert!(
        commit_ops.iter().any(|s| s.starts_with("overwrite t.db @")),
        "{commit_ops:?}"
    );
    assert!(
        commit_ops
            .iter()
            .any(|s| s.starts_with("unlink t.db-journal")),
        "{commit_ops:?}"
    );
    // The caller of save() is in the stack too.
    let op = ops
        .iter()
        .find(|o| signature(o).starts_with("rename cfg.txt.tmp"))
        .unwrap();
    assert!(op["stack"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["line"].as_u64() == Some(tagged_line(&src, "call_save"))));
    // What was printed, in order, and after the last file-system operation.
    assert!(std::fs::read_to_string(r.bundle.join("stdout"))
        .unwrap()
        .ends_with("Done\n"));
    assert_eq!(ops.last().unwrap()["op"], "output");
}

#[test]
fn python_file_io_and_sqlite3() {
    python_case("python3");
}

#[test]
fn debian_python_file_io_and_sqlite3() {
    // Debian's own interpreter (statically linked libpython) where present.
    if std::path::Path::new("/usr/bin/python3").exists() {
        python_case("/usr/bin/python3");
    } else {
        common::cannot_run(
            "debian_python_file_io_and_sqlite3",
            "/usr/bin/python3 is missing (apt-get install -y python3)",
        );
    }
}

#[test]
fn mmap_writes() {
    let r = record_c("mmap", |_| {});
    assert_ops(
        &r,
        &[
            "create m",
            "truncate m 0->4096",
            "overwrite m @0 \"hello\"",
            "msync m 0+4096",
            "overwrite m @100 \"world\"",
            "overwrite m @200 \"bye\"",
        ],
    );
}

/// Compiles a Java fixture with javac into a temporary class directory.
fn javac(name: &str) -> tempfile::TempDir {
    let classes = tempfile::tempdir().unwrap();
    let src = fixtures_dir().join(name);
    let st = std::process::Command::new("javac")
        .arg("-d")
        .arg(classes.path())
        .arg(&src)
        .status()
        .expect("javac must be installed (apt-get install -y default-jdk-headless)");
    assert!(st.success());
    classes
}

/// Java programs: the shim, loaded into the JVM as a JVMTI agent, names the application's
/// own .java line of each file-system call (the JDK's frames are skipped by default).
#[test]
fn java_names_the_application_s_lines() {
    let classes = javac("JavaOps.java");
    let src = std::fs::read_to_string(fixtures_dir().join("JavaOps.java")).unwrap();
    let cp = classes.path().to_str().unwrap();
    let r = record_in(&["java", "-cp", cp, "JavaOps"], |_| {}, &[]);
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    r.verify();
    let ops = r.ops_json();
    let at = |sig: &str, tag: &str, method: &str| {
        let op = ops.iter().find(|o| signature(o) == sig).unwrap_or_else(|| {
            panic!(
                "no op {sig} in {:?}",
                ops.iter().map(signature).collect::<Vec<_>>()
            )
        });
        assert_eq!(op["loc"]["lang"], "java", "{op}");
        assert_eq!(op["loc"]["file"], "JavaOps.java", "{op}");
        assert_eq!(op["loc"]["function"], format!("JavaOps.{method}"), "{op}");
        assert_eq!(
            op["loc"]["line"].as_u64(),
            Some(tagged_line(&src, tag)),
            "{sig}: {op}"
        );
    };
    at("create chan.bin", "chan_open", "channel");
    at(
        "append chan.bin 0->8 \"channel\\n\"",
        "chan_write",
        "channel",
    );
    at("fsync chan.bin", "chan_force", "channel");
    at("create out.txt", "fos_open", "streams");
    at("append out.txt 0->7 \"stream\\n\"", "fos_write", "streams");
    at("fsync out.txt", "fd_sync", "streams");
    at("create raf.bin", "raf_open", "streams");
    at("append raf.bin 0->7 \"random\\n\"", "raf_write", "streams");
    at("create empty", "create_file", "files");
    at("rename out.txt=>moved.txt", "move", "files");
    at("unlink empty n=0", "delete", "files");
    at("output \"Done\\n\"", "println", "main");
    // The mapped buffer's force: the stores and the msync, both at the force() line.
    let forced: Vec<_> = ops
        .iter()
        .filter(|o| o["loc"]["line"].as_u64() == Some(tagged_line(&src, "map_force")))
        .map(signature)
        .collect();
    assert!(
        forced.iter().any(|s| s.starts_with("msync raf.bin")),
        "{forced:?}"
    );
    // The JVM's notice of the agent is not an output of the workload.
    assert!(
        !ops.iter().any(|o| signature(o).contains("Picked up")),
        "{:?}",
        ops.iter().map(signature).collect::<Vec<_>>()
    );
}

/// --frame-skip works on Java frames: skipping every Java frame leaves the JNI entry.
#[test]
fn java_frames_obey_frame_skip() {
    let classes = javac("JavaWriter.java");
    let cp = classes.path().to_str().unwrap();
    let r = record_in(
        &["java", "-cp", cp, "JavaWriter"],
        |_| {},
        &["--frame-skip", "^java\\|"],
    );
    assert_eq!(r.output.status.code(), Some(0), "{}", r.stderr());
    r.verify();
    let ops = r.ops_json();
    let sigs: Vec<String> = ops.iter().map(signature).collect();
    assert_eq!(
        sigs,
        vec![
            "create data.bin",
            "append data.bin 0->11 \"hello java\\n\"",
            "fsync data.bin",
            "rename data.bin=>final.bin",
            "output \"Done\\n\""
        ]
    );
    let func = |i: usize| ops[i]["loc"]["function"].as_str().unwrap_or("").to_string();
    assert_eq!(func(1), "Java_sun_nio_ch_FileDispatcherImpl_write0");
    assert_eq!(func(2), "Java_sun_nio_ch_FileDispatcherImpl_force0");
    assert!(
        func(3).starts_with("Java_sun_nio_fs_UnixNativeDispatcher_rename"),
        "{}",
        func(3)
    );
}
