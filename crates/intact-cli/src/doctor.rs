//! `intact doctor`: what this machine has for each of intact's jobs, and what to install
//! for what is missing. It only looks (runs `--version`-style probes, opens device files
//! read-only); it changes nothing.

use crate::Failure;
use std::path::Path;
use std::process::{Command, Stdio};

/// One finding: a thing a job needs, whether it is here, and how to get it.
struct Finding {
    job: &'static str,
    what: &'static str,
    found: Result<String, String>,
    /// Optional things (Dask, other file systems) do not make the exit status non-zero.
    optional: bool,
}

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 everything the explorer, intactfs and the validator need is here; 1 something is missing (each line says what to install)."
)]
pub struct DoctorArgs {}

pub fn doctor(_a: DoctorArgs) -> Result<u8, Failure> {
    let findings: Vec<Finding> = [
        explorer_checks(),
        fs_checks(),
        blk_checks(),
        python_checks(),
    ]
    .into_iter()
    .flatten()
    .collect();
    let mut missing_required = 0usize;
    for f in &findings {
        let (mark, text) = match &f.found {
            Ok(have) => ("ok     ", have.clone()),
            Err(fix) if f.optional => ("absent ", fix.clone()),
            Err(fix) => {
                missing_required += 1;
                ("MISSING", fix.clone())
            }
        };
        println!("{mark} {:<10} {:<29} {text}", f.job, f.what);
    }
    if missing_required == 0 {
        println!("\nintact has what it needs here.");
        return Ok(0);
    }
    println!("\n{missing_required} thing(s) missing: install them as the lines above say, then run `intact doctor` again.");
    Ok(1)
}

/// The output of a command, or why it did not run.
fn probe(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("{program} failed: {}", text.trim()));
    }
    Ok(text)
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").trim().to_string()
}

fn tool(
    job: &'static str,
    what: &'static str,
    (program, version_flag): (&str, &str),
    package: &str,
) -> Finding {
    let found = probe(program, &[version_flag])
        .map(|t| first_line(&t))
        .map_err(|_| format!("not found: apt-get install {package}"));
    Finding {
        job,
        what,
        found,
        optional: false,
    }
}

fn explorer_checks() -> Vec<Finding> {
    let strace = match probe("strace", &["-V"]) {
        Err(_) => Err("not found: apt-get install strace".to_string()),
        Ok(t) if !t.contains("stack-trace=") => Err(format!(
            "{} has no stack tracing (-k): source lines cannot be named; install Debian's strace (built with libunwind or libdw)",
            first_line(&t)
        )),
        Ok(t) => Ok(first_line(&t) + " with stack tracing"),
    };
    vec![
        Finding {
            job: "explorer",
            what: "strace (record)",
            found: strace,
            optional: false,
        },
        tool(
            "explorer",
            "gcc (examples, C fixtures)",
            ("gcc", "--version"),
            "gcc",
        ),
    ]
}

fn device_rw(path: &str) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map(|_| ())
        .map_err(|e| format!("{path}: {e}"))
}

fn fs_checks() -> Vec<Finding> {
    let fuse = device_rw("/dev/fuse").map(|_| "/dev/fuse can be opened".to_string()).map_err(|e| {
        format!("{e}: load the module (`modprobe fuse`) and run as root, or in a container pass --device /dev/fuse")
    });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|v| format!("Linux {}", v.trim()))
        .map_err(|e| format!("/proc/sys/kernel/osrelease: {e}"));
    vec![
        Finding {
            job: "intactfs",
            what: "FUSE (intact fs mount)",
            found: fuse,
            optional: false,
        },
        Finding {
            job: "intactfs",
            what: "kernel",
            found: kernel,
            optional: false,
        },
    ]
}

fn blk_checks() -> Vec<Finding> {
    let root = if unsafe { libc::geteuid() } == 0 {
        Ok("running as root".to_string())
    } else {
        Err(
            "not root: `intact blk` mounts crash images on loop devices; run it as root"
                .to_string(),
        )
    };
    let loops = if Path::new("/dev/loop-control").exists() {
        Ok("/dev/loop-control present".to_string())
    } else {
        Err(
            "/dev/loop-control missing: `modprobe loop` (in a container: run it privileged)"
                .to_string(),
        )
    };
    let mut v = vec![
        Finding {
            job: "validator",
            what: "root (intact blk)",
            found: root,
            optional: false,
        },
        Finding {
            job: "validator",
            what: "loop devices",
            found: loops,
            optional: false,
        },
        // mkfs.ext4 prints its version with -V, not --version.
        tool(
            "validator",
            "mkfs.ext4 (blk --fs ext4)",
            ("mkfs.ext4", "-V"),
            "e2fsprogs",
        ),
    ];
    for (what, program, package) in [
        ("mkfs.xfs (blk --fs xfs)", ("mkfs.xfs", "-V"), "xfsprogs"),
        (
            "mkfs.btrfs (blk --fs btrfs)",
            ("mkfs.btrfs", "--version"),
            "btrfs-progs",
        ),
    ] {
        let mut f = tool("validator", what, program, package);
        f.optional = true;
        v.push(f);
    }
    v
}

fn python_module(module: &str) -> Result<String, String> {
    let code = format!("import {module}; print(getattr({module}, '__file__', ''))");
    probe("python3", &["-c", &code]).map(|t| first_line(&t))
}

fn python_checks() -> Vec<Finding> {
    let python = probe("python3", &["--version"])
        .map(|t| first_line(&t))
        .map_err(|_| "not found: apt-get install python3".to_string());
    let intact = python_module("intact").map(|f| format!("import intact: {f}")).map_err(|_| {
        "python3 cannot import intact (checker helpers, intact.fs): `pip install ./python` from the source tree, or PYTHONPATH=<source>/python".to_string()
    });
    let dask = python_module("distributed")
        .map(|_| "dask.distributed importable".to_string())
        .map_err(|_| "for --dask only: pip install \"dask[distributed]\"".to_string());
    vec![
        Finding {
            job: "python",
            what: "python3 (checkers)",
            found: python,
            optional: false,
        },
        Finding {
            job: "python",
            what: "intact module",
            found: intact,
            optional: true,
        },
        Finding {
            job: "python",
            what: "dask (check --dask)",
            found: dask,
            optional: true,
        },
    ]
}
