//! Shared helpers for the integration tests: build C fixtures, record them with the real
//! `intact` binary under strace, read back the logical operations as short signatures.
#![allow(dead_code)]

pub mod mount;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn intact() -> Command {
    Command::new(env!("CARGO_BIN_EXE_intact"))
}

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Compiles `tests/fixtures/NAME.c` with `-g -O0 -pthread` into `out_dir`.
pub fn build_c(name: &str, out_dir: &Path) -> PathBuf {
    let src = fixtures_dir().join(format!("{name}.c"));
    let bin = out_dir.join(name);
    let st = Command::new("gcc")
        .args(["-g", "-O0", "-pthread", "-Wall", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .expect("gcc must be installed (apt-get install -y gcc)");
    assert!(st.success(), "compiling {}", src.display());
    bin
}

pub struct Recorded {
    pub tmp: tempfile::TempDir,
    pub work: PathBuf,
    pub bundle: PathBuf,
    pub output: Output,
    /// Where a C fixture's binary was built: kept as long as the recording (later `ops`
    /// calls symbolise by its path), removed with it.
    pub bins: Option<tempfile::TempDir>,
}

impl Recorded {
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    /// `intact ops --json` parsed.
    pub fn ops_json(&self) -> Vec<serde_json::Value> {
        let out = intact()
            .arg("ops")
            .arg("--json")
            .arg(&self.bundle)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "intact ops failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
    /// One short line per logical operation (see `signature`).
    pub fn sigs(&self) -> Vec<String> {
        self.ops_json().iter().map(signature).collect()
    }
    pub fn verify(&self) {
        let out = intact().arg("verify").arg(&self.bundle).output().unwrap();
        assert!(
            out.status.success(),
            "replay oracle failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Records `cmd` run inside a fresh work directory (set up by `setup`), with `--dir` = the
/// work directory and the workload's cwd = the work directory. Asserts nothing.
pub fn record_in(cmd: &[&str], setup: impl FnOnce(&Path), extra: &[&str]) -> Recorded {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    setup(&work);
    let bundle = tmp.path().join("bundle");
    let output = intact()
        .current_dir(&work)
        .arg("record")
        .arg("--dir")
        .arg(&work)
        .arg("--out")
        .arg(&bundle)
        .args(extra)
        .arg("--")
        .args(cmd)
        .output()
        .unwrap();
    Recorded {
        tmp,
        work,
        bundle,
        output,
        bins: None,
    }
}

/// Builds and records a C fixture; asserts the recording succeeded (exit 0) and that the
/// replay oracle holds.
pub fn record_c(name: &str, setup: impl FnOnce(&Path)) -> Recorded {
    let bins = tempfile::tempdir().unwrap();
    let bin = build_c(name, bins.path());
    let mut r = record_in(&[bin.to_str().unwrap()], setup, &[]);
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

fn preview(hex: &str) -> String {
    let bytes: Vec<u8> = (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    let mut s = String::new();
    for &b in bytes.iter().take(40) {
        match b {
            b'\n' => s.push_str("\\n"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    if bytes.len() > 40 {
        s.push_str(&format!("...({})", bytes.len()));
    }
    s
}

/// A compact, stable description of one operation:
/// `create P`, `link SRC=>P n=K`, `unlink P n=K`, `rename P=>Q [exchange|replace]`,
/// `mkdir P`, `rmdir P`, `symlink P->T`, `append P A->B "data"`, `overwrite P @OFF "data"`,
/// `truncate P A->B`, `HOW P [OFF+N]` for syncs (`HOW *` for whole-fs), `output "data"`.
pub fn signature(v: &serde_json::Value) -> String {
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
    let n = |k: &str| v.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
    let path = s("path");
    let data = || {
        if let Some(z) = v
            .get("data")
            .and_then(|d| d.get("zeros"))
            .and_then(|z| z.as_u64())
        {
            format!("<{z} zeros>")
        } else {
            format!("\"{}\"", preview(&s("data_hex")))
        }
    };
    match s("op").as_str() {
        "overwrite" => format!("overwrite {path} @{} {}", n("offset"), data()),
        "append" => format!(
            "append {path} {}->{} {}",
            n("old_size"),
            n("new_size"),
            data()
        ),
        "truncate" => format!("truncate {path} {}->{}", n("old_size"), n("new_size")),
        "link" if v["created"].as_bool() == Some(true) => format!("create {path}"),
        "link" => format!("link {}=>{path} n={}", s("path2"), n("link_count")),
        "unlink" => format!("unlink {path} n={}", n("link_count")),
        "rename" => {
            let mut r = format!("rename {path}=>{}", s("path2"));
            if v.get("exchange").and_then(|x| x.as_bool()) == Some(true) {
                r.push_str(" exchange");
            } else if !v["replaced"].is_null() {
                r.push_str(" replace");
            }
            r
        }
        "mkdir" => format!("mkdir {path}"),
        "rmdir" => format!("rmdir {path}"),
        "symlink" => format!("symlink {path}->{}", s("target")),
        "sync" => {
            let what = if v["inode"].is_null() {
                "*".to_string()
            } else {
                path
            };
            match v.get("range").and_then(|r| r.as_array()) {
                Some(r) => format!("{} {what} {}+{}", s("how"), r[0], r[1]),
                None => format!("{} {what}", s("how")),
            }
        }
        "output" => format!("output {}", data()),
        other => format!("?{other}"),
    }
}

/// Asserts the signatures equal `expected`, printing both on mismatch.
pub fn assert_ops(r: &Recorded, expected: &[&str]) {
    let got = r.sigs();
    let exp: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        got,
        exp,
        "\n--- got:\n{}\n--- expected:\n{}\n",
        got.join("\n"),
        exp.join("\n")
    );
}

/// Builds examples/kvstore/kv.c into `dir` and records `kv x foo1 y foo2` (the quick
/// start's run) in `dir/db`; returns the bundle `dir/b`.
pub fn record_kv(dir: &Path) -> PathBuf {
    record_kv_as(dir, "b", "db", &[])
}

/// Builds examples/kvstore/kv.c into `dir/kv` (once for the directory) and records
/// `kv ARGS x foo1 y foo2` (`args`: kv's own options, e.g. `--safe`), run in `dir/<db>`;
/// returns the bundle `dir/<bundle>`.
pub fn record_kv_as(dir: &Path, bundle: &str, db: &str, args: &[&str]) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let kv = dir.join("kv");
    if !kv.exists() {
        let st = Command::new("gcc")
            .args(["-g", "-O0", "-o"])
            .arg(&kv)
            .arg(repo.join("examples/kvstore/kv.c"))
            .status()
            .expect("gcc must be installed");
        assert!(st.success(), "gcc could not build examples/kvstore/kv.c");
    }
    let db = dir.join(db);
    std::fs::create_dir(&db).unwrap();
    let bundle = dir.join(bundle);
    let out = intact()
        .arg("record")
        .arg("--out")
        .arg(&bundle)
        .arg("--")
        .arg(&kv)
        .args(args)
        .args(["x", "foo1", "y", "foo2"])
        .current_dir(&db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    bundle
}

/// SQLite built with SQLITE_ENABLE_BATCH_ATOMIC_WRITE and its driver (tools/sqlite-batch):
/// built once per test binary into target/sqlite-batch (the script skips what is up to
/// date). Returns the directory holding `sqlite-batch` and `sqlite-batch-plain`.
pub fn sqlite_batch() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
            let out = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target"))
                .join("sqlite-batch");
            let o = Command::new("bash")
                .arg(root.join("tools/sqlite-batch/build.sh"))
                .arg(&out)
                .output()
                .expect("running tools/sqlite-batch/build.sh");
            assert!(
                o.status.success(),
                "building SQLite with batch atomic write: {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            out
        })
        .clone()
}

/// A test that cannot run here says why. With `INTACT_REQUIRE_ALL=1` (set by
/// `scripts/test.sh` and CI) that is a failure naming what is missing; otherwise (a
/// developer's `cargo test` on a machine without it) a notice, and the caller returns.
pub fn cannot_run(test: &str, why: &str) {
    if std::env::var("INTACT_REQUIRE_ALL").as_deref() == Ok("1") {
        panic!("{test} cannot run: {why} (INTACT_REQUIRE_ALL=1: every test must run; scripts/test.sh installs what the tests need)");
    }
    eprintln!("SKIPPED {test}: {why} (set INTACT_REQUIRE_ALL=1 to make this a failure)");
}
