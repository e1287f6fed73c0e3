//! Helpers for the integration tests: compile C programs with gcc into a
//! temporary directory and run them under `strace -f -k`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use intact_symbol::{parse_strace_frame, RawFrame};

/// True when `prog --version` runs. Tests that need gcc/strace print a
/// notice and return early when the tool is missing.
pub fn have(prog: &str) -> bool {
    Command::new(prog)
        .arg(if prog == "strace" { "-V" } else { "--version" })
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

pub fn have_tools(tools: &[&str]) -> bool {
    for t in tools {
        if !have(t) {
            // Under the test command (scripts/test.sh installs them, and sets
            // INTACT_REQUIRE_ALL=1) a missing tool is a failure, not a skip.
            if std::env::var("INTACT_REQUIRE_ALL").as_deref() == Ok("1")
                || std::env::var_os("CI").is_some()
            {
                panic!("`{t}` is not installed (apt-get install -y {t}); INTACT_REQUIRE_ALL=1: every test must run");
            }
            eprintln!(
                "SKIPPED: `{t}` is not installed (set INTACT_REQUIRE_ALL=1 to make this a failure)"
            );
            return false;
        }
    }
    true
}

pub struct Work {
    pub dir: tempfile::TempDir,
}

impl Work {
    pub fn new() -> Self {
        Work {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, contents).expect("write source");
        p
    }

    /// Runs `cc args...` in the work dir; panics with the compiler output on failure.
    pub fn compile(&self, cc: &str, args: &[&str]) {
        let out = Command::new(cc)
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("run compiler");
        assert!(
            out.status.success(),
            "{cc} {args:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs `exe` under `strace -f -k -e trace=write` and returns the stacks.
    pub fn strace(&self, exe: &Path, args: &[&str]) -> Vec<Stack> {
        let out_file = self.path(&format!(
            "{}.strace",
            exe.file_name().unwrap().to_string_lossy()
        ));
        let out = Command::new("strace")
            .args(["-f", "-k", "-e", "trace=write", "-o"])
            .arg(&out_file)
            .arg(exe)
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("run strace");
        assert!(
            out.status.success(),
            "strace failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&out_file).expect("read strace output");
        parse_stacks(&text)
    }
}

#[derive(Debug, Clone)]
pub struct Stack {
    /// The syscall line, e.g. `1234  write(1, "app\n", 4) = 4`.
    pub header: String,
    pub frames: Vec<RawFrame>,
}

pub fn parse_stacks(text: &str) -> Vec<Stack> {
    let mut stacks: Vec<Stack> = Vec::new();
    for line in text.lines() {
        if line.starts_with(" > ") {
            if let (Some(st), Some(f)) = (stacks.last_mut(), parse_strace_frame(line)) {
                st.frames.push(f);
            }
        } else {
            stacks.push(Stack {
                header: line.to_string(),
                frames: Vec::new(),
            });
        }
    }
    stacks
}

/// The stack of the write whose header contains `needle`.
pub fn stack_with<'a>(stacks: &'a [Stack], needle: &str) -> &'a Stack {
    stacks
        .iter()
        .find(|s| s.header.contains(needle))
        .unwrap_or_else(|| panic!("no syscall containing {needle:?} in {stacks:#?}"))
}

/// 1-based line number of the (single) line containing `marker`.
pub fn marker_line(src: &str, marker: &str) -> u32 {
    let hits: Vec<usize> = src
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(marker))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(hits.len(), 1, "marker {marker} must occur exactly once");
    hits[0] as u32
}

/// Address of `sym` per `nm` (for constructing libdw-style virtual addresses).
pub fn nm_address(bin: &Path, sym: &str) -> Option<u64> {
    let out = Command::new("nm").arg(bin).output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let mut it = l.split_whitespace();
        let (addr, _kind, name) = (it.next()?, it.next()?, it.next()?);
        (name == sym).then(|| u64::from_str_radix(addr, 16).ok())?
    })
}
