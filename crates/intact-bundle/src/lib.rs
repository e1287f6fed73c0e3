//! The bundle: everything `intact record` learned about one run, in a directory.
//! Format documented in docs/bundle.md; `FORMAT_VERSION` changes when a reader of the
//! previous version could misread a new bundle.

use intact_model::{Inode, InodeId, Node, Op, Run, Sparse, State, TaskExit, Unsupported};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};

pub const FORMAT: &str = "intact-bundle";
/// Version 2 adds `stdout_mode` (issue 27 item 7).
pub const FORMAT_VERSION: u32 = 2;
/// The oldest version this build still reads (a version 1 bundle has no `stdout_mode`).
pub const FORMAT_VERSION_MIN: u32 = 1;

pub const META: &str = "bundle.json";
pub const INITIAL: &str = "initial";
pub const FINAL: &str = "final";
pub const RAW_TRACE: &str = "trace.raw";
pub const OPS: &str = "ops.jsonl";
pub const DATA: &str = "data.bin";
pub const STDOUT: &str = "stdout";
pub const UNSUPPORTED: &str = "unsupported.json";

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a valid bundle file: {message}")]
    Format { path: PathBuf, message: String },
    #[error("{path}: bundle format version {found} is not supported by this intact (reads versions {FORMAT_VERSION_MIN} to {FORMAT_VERSION}); re-record it with this version")]
    Version { path: PathBuf, found: u32 },
    #[error("{path}: {what}, not an explorer bundle (no {META}); {todo}")]
    NotBundle {
        path: PathBuf,
        what: &'static str,
        todo: &'static str,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BundleError + '_ {
    move |source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Metadata of a recording.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    pub format: String,
    pub version: u32,
    pub intact_version: String,
    /// Seconds since the Unix epoch when recording started.
    pub recorded_at: u64,
    pub command: Vec<String>,
    /// Canonical absolute path of the recorded directory.
    pub dir: String,
    /// Working directory of the workload.
    pub cwd: String,
    pub ignore: Vec<String>,
    pub strace: String,
    pub kernel: String,
    pub stacks: bool,
    pub frame_skip: Vec<String>,
    /// `--frame-keep` patterns (frames never skipped).
    #[serde(default)]
    pub frame_keep: Vec<String>,
    /// The workload's standard output as strace names it (see ConvertOptions::stdout).
    #[serde(default)]
    pub stdout: Option<String>,
    /// How the workload's stdout was buffered; `None` in version 1 bundles (it inherited
    /// intact's stdout, usually not a terminal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdout_mode: Option<StdoutMode>,
    /// How the workload's main process ended.
    pub workload: Option<TaskExit>,
    pub duration_secs: f64,
    pub counts: Counts,
    /// Result of the replay oracle: `None` when it passed, else the first difference.
    pub oracle_mismatch: Option<String>,
}

/// How `intact record` gave the workload its standard output.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StdoutMode {
    /// A pseudo-terminal (the default): the program buffers output as on a terminal, so
    /// an output operation stands where the program printed it.
    Terminal,
    /// intact's own stdout (`--keep-buffering`): the program's own buffering for it, e.g.
    /// full buffering for a pipe, which moves printed lines to a later flush or exit.
    Inherited,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Counts {
    pub calls: usize,
    pub tasks: usize,
    pub ops: usize,
    pub unsupported: usize,
}

#[derive(Serialize, Deserialize)]
struct Manifest {
    root: InodeId,
    next_id: InodeId,
    inodes: Vec<ManifestInode>,
}

#[derive(Serialize, Deserialize)]
struct ManifestInode {
    #[serde(flatten)]
    inode: Inode,
    /// For regular files without holes: where the contents are in `contents.bin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    contents: Option<(u64, u64)>,
    /// For sparse files: the size, and the runs written in it as (file offset, offset in
    /// `contents.bin`, length); the rest reads as zeros.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sparse: Option<SparseRef>,
}

#[derive(Serialize, Deserialize)]
struct SparseRef {
    size: u64,
    runs: Vec<(u64, u64, u64)>,
}

/// Writes a state as `DIR/manifest.json` + `DIR/contents.bin`.
pub fn write_state(dir: &Path, state: &State) -> Result<(), BundleError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let cpath = dir.join("contents.bin");
    let mut contents = BufWriter::new(std::fs::File::create(&cpath).map_err(io(&cpath))?);
    let mut ids: Vec<_> = state.inodes.keys().copied().collect();
    ids.sort();
    let mut at = 0u64;
    let mut inodes = Vec::with_capacity(ids.len());
    for id in ids {
        let inode = state.inodes[&id].clone();
        let (mut dense, mut sparse) = (None, None);
        if let Node::File { data } = &inode.node {
            let mut runs = Vec::new();
            for (off, run) in data.runs() {
                if let Run::Bytes(b) = run {
                    contents.write_all(b).map_err(io(&cpath))?;
                    runs.push((off, at, b.len() as u64));
                    at += b.len() as u64;
                }
            }
            let covered: u64 = runs.iter().map(|r| r.2).sum();
            if covered == data.len() {
                // No hole: the format every earlier reader knows.
                dense = Some((at - covered, covered));
            } else {
                sparse = Some(SparseRef {
                    size: data.len(),
                    runs,
                });
            }
        }
        inodes.push(ManifestInode {
            inode,
            contents: dense,
            sparse,
        });
    }
    contents.flush().map_err(io(&cpath))?;
    let m = Manifest {
        root: state.root,
        next_id: state.next_id,
        inodes,
    };
    let mpath = dir.join("manifest.json");
    let f = std::fs::File::create(&mpath).map_err(io(&mpath))?;
    serde_json::to_writer(BufWriter::new(f), &m).map_err(|e| BundleError::Format {
        path: mpath.clone(),
        message: e.to_string(),
    })?;
    Ok(())
}

/// The largest inode id a snapshot may use: far beyond any real recording, far from
/// overflow.
pub const MAX_INODE_ID: InodeId = 1 << 48;

pub fn read_state(dir: &Path) -> Result<State, BundleError> {
    let mpath = dir.join("manifest.json");
    let text = std::fs::read(&mpath).map_err(io(&mpath))?;
    let m: Manifest = serde_json::from_slice(&text).map_err(|e| BundleError::Format {
        path: mpath.clone(),
        message: e.to_string(),
    })?;
    let cpath = dir.join("contents.bin");
    let contents = std::fs::read(&cpath).map_err(io(&cpath))?;
    let mut inodes = HashMap::new();
    for mi in m.inodes {
        let mut inode = mi.inode;
        if let Node::File { data } = &mut inode.node {
            let bad = |message: String| BundleError::Format {
                path: cpath.clone(),
                message: format!("inode {}: {message}", inode.id),
            };
            let (size, runs) = match (mi.contents, mi.sparse) {
                (Some((at, len)), None) => (len, vec![(0, at, len)]),
                (None, Some(s)) => (s.size, s.runs),
                (None, None) => (0, Vec::new()),
                (Some(_), Some(_)) => return Err(bad("both dense and sparse contents".into())),
            };
            *data = read_runs(&contents, size, &runs).map_err(bad)?;
        }
        inodes.insert(inode.id, inode);
    }
    // Ids are allocated from next_id on: it must lie above every id, far from the end.
    let max_id = inodes.keys().copied().max().unwrap_or(0);
    if m.next_id <= max_id || m.next_id > MAX_INODE_ID {
        return Err(BundleError::Format {
            path: mpath,
            message: format!(
                "next_id {} is not above every inode id (up to {max_id}) and at most {MAX_INODE_ID}",
                m.next_id
            ),
        });
    }
    if !inodes.get(&m.root).is_some_and(|i| i.is_dir()) {
        return Err(BundleError::Format {
            path: mpath,
            message: format!("root inode {} is missing or not a directory", m.root),
        });
    }
    for ino in inodes.values() {
        if let Node::Dir { entries, .. } = &ino.node {
            if let Some((name, id)) = entries.iter().find(|(_, id)| !inodes.contains_key(id)) {
                return Err(BundleError::Format {
                    path: mpath,
                    message: format!(
                        "directory inode {} names {name:?}, inode {id}, which is missing",
                        ino.id
                    ),
                });
            }
        }
    }
    Ok(State {
        inodes,
        root: m.root,
        next_id: m.next_id,
    })
}

/// A file's contents from its runs in `contents.bin`, each checked to lie inside both the
/// blob and the file's size.
fn read_runs(contents: &[u8], size: u64, runs: &[(u64, u64, u64)]) -> Result<Sparse, String> {
    let mut data = Sparse::new();
    for &(off, at, len) in runs {
        let end = at
            .checked_add(len)
            .filter(|&e| e <= contents.len() as u64)
            .ok_or_else(|| {
                format!(
                    "refers to bytes {at}+{len}, past the end of contents.bin ({} bytes)",
                    contents.len()
                )
            })?;
        if off.checked_add(len).is_none_or(|e| e > size) {
            return Err(format!("a run at {off}+{len} lies past the size {size}"));
        }
        data.write(off, &contents[at as usize..end as usize])?;
    }
    data.set_len(size);
    Ok(data)
}

pub fn write_ops(path: &Path, ops: &[Op]) -> Result<(), BundleError> {
    let mut w = OpWriter::create(path)?;
    for op in ops {
        w.write(op)?;
    }
    w.finish()
}

/// Writes `ops.jsonl` one operation at a time, as a conversion makes them (issue 29: a
/// million-call trace's operations are never all in memory). Ids must come in sequence.
pub struct OpWriter {
    path: PathBuf,
    w: BufWriter<std::fs::File>,
    next_id: usize,
}

impl OpWriter {
    pub fn create(path: &Path) -> Result<OpWriter, BundleError> {
        let f = std::fs::File::create(path).map_err(io(path))?;
        Ok(OpWriter {
            path: path.into(),
            w: BufWriter::new(f),
            next_id: 0,
        })
    }

    pub fn write(&mut self, op: &Op) -> Result<(), BundleError> {
        assert_eq!(op.id, self.next_id, "operations are written in sequence");
        serde_json::to_writer(&mut self.w, op).map_err(|e| BundleError::Format {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        self.w.write_all(b"\n").map_err(io(&self.path))?;
        self.next_id += 1;
        Ok(())
    }

    /// Flushes what is buffered (the file is complete after this).
    pub fn finish(mut self) -> Result<(), BundleError> {
        self.w.flush().map_err(io(&self.path))
    }

    pub fn written(&self) -> usize {
        self.next_id
    }
}

pub fn read_ops(path: &Path) -> Result<Vec<Op>, BundleError> {
    let mut ops = Vec::new();
    for_each_op(path, |op| {
        ops.push(op);
        Ok(())
    })?;
    Ok(ops)
}

/// Reads `ops.jsonl` one operation at a time (ids checked to run 0, 1, ...), handing each
/// to `f`; stops at the first error, `f`'s included.
pub fn for_each_op(
    path: &Path,
    mut f: impl FnMut(Op) -> Result<(), BundleError>,
) -> Result<usize, BundleError> {
    let file = std::fs::File::open(path).map_err(io(path))?;
    let mut n = 0;
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(io(path))?;
        if line.trim().is_empty() {
            continue;
        }
        let op: Op = serde_json::from_str(&line).map_err(|e| BundleError::Format {
            path: path.into(),
            message: format!("line {}: {e}", i + 1),
        })?;
        if op.id != n {
            return Err(BundleError::Format {
                path: path.into(),
                message: format!("line {}: operation id {} out of sequence", i + 1, op.id),
            });
        }
        n += 1;
        f(op)?;
    }
    Ok(n)
}

/// Why a directory without `bundle.json` is not a bundle: the other directories intact
/// writes are named, so a user who gave the wrong one learns which command wants it.
fn not_a_bundle(path: &Path) -> BundleError {
    let (what, todo) = if path.join("meta.json").exists() && path.join("blocks.log").exists() {
        (
            "a block log (written by `intact blk record`)",
            "check it with `intact blk check`",
        )
    } else if path.join("bundle").join(META).exists() {
        (
            "a directory holding a bundle",
            "give its `bundle` subdirectory",
        )
    } else {
        (
            "a directory",
            "give the directory written by `intact record --out DIR`",
        )
    };
    BundleError::NotBundle {
        path: path.into(),
        what,
        todo,
    }
}

/// An opened bundle.
pub struct Bundle {
    pub path: PathBuf,
    pub meta: Meta,
}

impl Bundle {
    pub fn open(path: &Path) -> Result<Bundle, BundleError> {
        if !path.is_dir() {
            return Err(BundleError::Io {
                path: path.into(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no bundle directory here (record one with `intact record`)",
                ),
            });
        }
        let mpath = path.join(META);
        if !mpath.exists() {
            return Err(not_a_bundle(path));
        }
        let text = std::fs::read(&mpath).map_err(io(&mpath))?;
        let v: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| BundleError::Format {
                path: mpath.clone(),
                message: e.to_string(),
            })?;
        if v.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(BundleError::Format {
                path: mpath,
                message: format!("\"format\" is not {FORMAT:?}"),
            });
        }
        let version = v.get("version").and_then(|f| f.as_u64()).unwrap_or(0) as u32;
        if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&version) {
            return Err(BundleError::Version {
                path: mpath,
                found: version,
            });
        }
        let meta: Meta = serde_json::from_value(v).map_err(|e| BundleError::Format {
            path: mpath,
            message: e.to_string(),
        })?;
        Ok(Bundle {
            path: path.into(),
            meta,
        })
    }
    pub fn ops(&self) -> Result<Vec<Op>, BundleError> {
        read_ops(&self.path.join(OPS))
    }
    pub fn data(&self) -> Result<Vec<u8>, BundleError> {
        let p = self.path.join(DATA);
        std::fs::read(&p).map_err(io(&p))
    }
    pub fn initial(&self) -> Result<State, BundleError> {
        read_state(&self.path.join(INITIAL))
    }
    pub fn final_state(&self) -> Result<State, BundleError> {
        read_state(&self.path.join(FINAL))
    }
    pub fn unsupported(&self) -> Result<Vec<Unsupported>, BundleError> {
        let p = self.path.join(UNSUPPORTED);
        let text = std::fs::read(&p).map_err(io(&p))?;
        serde_json::from_slice(&text).map_err(|e| BundleError::Format {
            path: p,
            message: e.to_string(),
        })
    }
    /// Replays every operation on the initial state and compares with the final state.
    /// `Ok(None)`: identical. `Ok(Some(diff))`: the first difference.
    /// The operations are read one at a time, not all held (issue 29).
    pub fn verify(&self) -> Result<Option<String>, BundleError> {
        let mut s = self.initial()?;
        let blob = self.data()?;
        let mut failed = None;
        for_each_op(&self.path.join(OPS), |op| {
            if failed.is_none() {
                if let Err(e) = s.apply(&op.op, &blob) {
                    failed = Some(format!(
                        "operation #{} ({}) cannot be applied: {e}",
                        op.id,
                        op.op.name()
                    ));
                }
            }
            Ok(())
        })?;
        match failed {
            Some(f) => Ok(Some(f)),
            None => Ok(s.diff(&self.final_state()?)),
        }
    }
}

/// Writes any serializable value as pretty JSON.
pub fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<(), BundleError> {
    let f = std::fs::File::create(path).map_err(io(path))?;
    let mut w = BufWriter::new(f);
    serde_json::to_writer_pretty(&mut w, v).map_err(|e| BundleError::Format {
        path: path.into(),
        message: e.to_string(),
    })?;
    w.write_all(b"\n").map_err(io(path))?;
    w.flush().map_err(io(path))
}

/// Counts per logical-operation name (for summaries).
pub fn op_histogram(ops: &[Op]) -> BTreeMap<&'static str, usize> {
    let mut h = BTreeMap::new();
    for op in ops {
        *h.entry(op.op.name()).or_insert(0) += 1;
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use intact_model::{Data, LogicalOp};

    fn sync_op(id: usize) -> Op {
        Op {
            id,
            call: id,
            pid: 1,
            tid: 1,
            syscall: "fsync".into(),
            op: LogicalOp::Sync {
                inode: Some(2),
                how: intact_model::SyncKind::Fsync,
                range: None,
            },
            path: Some("a".into()),
            path2: None,
            stack: Vec::new(),
            loc: None,
            stream: 0,
        }
    }

    /// OpWriter writes what write_ops wrote; for_each_op reads them back one at a time and
    /// refuses ids out of sequence, stopping at the first error of its callback.
    #[test]
    fn ops_stream_out_and_back() {
        let t = tempfile::tempdir().unwrap();
        let ops: Vec<Op> = (0..5).map(sync_op).collect();
        let (a, b) = (t.path().join("a.jsonl"), t.path().join("b.jsonl"));
        write_ops(&a, &ops).unwrap();
        let mut w = OpWriter::create(&b).unwrap();
        for op in &ops {
            w.write(op).unwrap();
        }
        assert_eq!(w.written(), 5);
        w.finish().unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        let mut seen = Vec::new();
        let n = for_each_op(&b, |op| {
            seen.push(op.id);
            Ok(())
        })
        .unwrap();
        assert_eq!((n, seen), (5, vec![0, 1, 2, 3, 4]));
        let stop = for_each_op(&b, |op| match op.id {
            2 => Err(BundleError::Format {
                path: b.clone(),
                message: "stop".into(),
            }),
            _ => Ok(()),
        });
        assert!(stop.is_err());
        let line = |op: &Op| serde_json::to_string(op).unwrap();
        std::fs::write(
            &a,
            format!("{}\n{}\n", line(&sync_op(0)), line(&sync_op(2))),
        )
        .unwrap();
        let err = read_ops(&a).unwrap_err().to_string();
        assert!(err.contains("out of sequence"), "{err}");
    }

    #[test]
    fn state_roundtrip() {
        let mut s = State::empty();
        s.apply(
            &LogicalOp::Link {
                dir: 1,
                name: "a".into(),
                inode: 2,
                link_count: 1,
                created: true,
            },
            b"",
        )
        .unwrap();
        s.apply(
            &LogicalOp::Append {
                inode: 2,
                old_size: 0,
                new_size: 3,
                data: Data::Bytes { at: 0, len: 3 },
            },
            b"xyz",
        )
        .unwrap();
        s.apply(
            &LogicalOp::Symlink {
                dir: 1,
                name: "l".into(),
                inode: 3,
                target: "a".into(),
            },
            b"",
        )
        .unwrap();
        let t = tempfile::tempdir().unwrap();
        write_state(t.path(), &s).unwrap();
        let r = read_state(t.path()).unwrap();
        assert_eq!(s.diff(&r), None);
        assert_eq!(r, s);
    }

    /// A version 1 bundle (no `stdout_mode`) still opens; a version 2 one keeps its mode;
    /// versions outside FORMAT_VERSION_MIN..=FORMAT_VERSION are refused.
    #[test]
    fn reads_versions_1_and_2_only() {
        let meta = |version: u32, mode: Option<&str>| {
            let mut v = serde_json::json!({
                "format": FORMAT, "version": version, "intact_version": "0.1.0",
                "recorded_at": 0, "command": ["a"], "dir": "/d", "cwd": "/d", "ignore": [],
                "strace": "", "kernel": "", "stacks": true, "frame_skip": [],
                "stdout": "pipe:[1]", "workload": null, "duration_secs": 0.0,
                "counts": {"calls": 0, "tasks": 0, "ops": 0, "unsupported": 0},
                "oracle_mismatch": null
            });
            if let Some(m) = mode {
                v["stdout_mode"] = m.into();
            }
            let t = tempfile::tempdir().unwrap();
            std::fs::write(t.path().join(META), v.to_string()).unwrap();
            let opened = Bundle::open(t.path()).map(|b| b.meta.stdout_mode);
            (t, opened)
        };
        assert_eq!(meta(1, None).1.unwrap(), None);
        assert_eq!(
            meta(2, Some("terminal")).1.unwrap(),
            Some(StdoutMode::Terminal)
        );
        assert_eq!(
            meta(2, Some("inherited")).1.unwrap(),
            Some(StdoutMode::Inherited)
        );
        for v in [0, FORMAT_VERSION + 1] {
            assert!(
                matches!(meta(v, None).1, Err(BundleError::Version { found, .. }) if found == v),
                "version {v}"
            );
        }
    }
}
