//! `intact blk validate-apm`: does a real file system keep the promise its APM states?
//!
//! Each workload runs once, traced by `intact record` (its logical operations) inside
//! `intact blk record` (its block log), in a directory `w` made before recording starts.
//! The explorer then enumerates every crash state the APM allows for those operations
//! (exhaustively), and every crash image the block log allows is mounted and its `w`
//! read back. An image whose tree is none of the allowed states is a finding: the file
//! system did something its APM says it never does.
//!
//! Trees are compared by what a checker sees: paths, kinds, sizes, contents, symlink
//! targets and which names are hard links of one file; not modes or times (logical
//! operations do not carry them). Where the APM lets a size change expose unwritten
//! blocks, the explorer fills them with a garbage pattern; a real file system shows zeros
//! or older data there, so those bytes match anything.

use crate::check::{check, CheckConfig, CheckError, CheckerVerdict};
use crate::fskind::{FsKind, Tools};
use crate::images::{GenConfig, ImageKind, Torn};
use crate::logdir::LogDir;
use crate::record::{record, RecordConfig, RecordError};
use intact_apm::{Apm, Program};
use intact_bundle::Bundle;
use intact_explore::{garbage, CrashFs, Explorer};
use intact_model::snapshot::{capture, IgnoreSet};
use intact_model::state::{InodeId, Node, State};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// A directory tree as a checker sees it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tree {
    pub entries: BTreeMap<String, Entry>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Entry {
    Dir,
    /// `link`: the first path (in sorted order) of the same file, for hard links.
    File {
        #[serde(with = "hexbytes")]
        data: Vec<u8>,
        #[serde(skip_serializing_if = "Option::is_none", default)]
        link: Option<String>,
    },
    Symlink {
        target: String,
    },
}

mod hexbytes {
    pub fn serialize<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&b.iter().map(|x| format!("{x:02x}")).collect::<String>())
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s: String = serde::Deserialize::deserialize(d)?;
        if !s.len().is_multiple_of(2) {
            return Err(serde::de::Error::custom("odd-length hex"));
        }
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(serde::de::Error::custom))
            .collect()
    }
}

impl Tree {
    pub fn of_state(s: &State) -> Tree {
        let mut entries = BTreeMap::new();
        let mut first: HashMap<InodeId, String> = HashMap::new();
        let mut files: Vec<(String, InodeId)> = Vec::new();
        let mut stack = vec![(String::new(), s.root)];
        let mut visited = 0usize;
        while let Some((path, id)) = stack.pop() {
            visited += 1;
            if visited > 1_000_000 {
                break; // a cycle cannot happen in a State; stay finite anyway
            }
            let Some(ino) = s.inodes.get(&id) else {
                continue;
            };
            match &ino.node {
                Node::Dir { entries: es, .. } => {
                    if !path.is_empty() {
                        entries.insert(path.clone(), Entry::Dir);
                    }
                    for (name, child) in es {
                        let p = if path.is_empty() {
                            name.clone()
                        } else {
                            format!("{path}/{name}")
                        };
                        stack.push((p, *child));
                    }
                }
                Node::File { .. } => files.push((path, id)),
                Node::Symlink { target } => {
                    entries.insert(
                        path,
                        Entry::Symlink {
                            target: target.clone(),
                        },
                    );
                }
            }
        }
        files.sort();
        for (path, id) in files {
            let link = first.get(&id).cloned();
            if link.is_none() {
                first.insert(id, path.clone());
            }
            // Dense: validate-apm compares bytes with images of small workloads.
            let data = match &s.inodes[&id].node {
                Node::File { data } => data.read(0, data.len(), |_| 0),
                _ => Vec::new(),
            };
            entries.insert(path, Entry::File { data, link });
        }
        Tree { entries }
    }

    /// Everything but file contents: what must be equal before bytes are compared.
    pub fn shape(&self) -> [u8; 32] {
        let mut h = blake3::Hasher::new();
        for (p, e) in &self.entries {
            h.update(p.as_bytes());
            h.update(&[0]);
            match e {
                Entry::Dir => {
                    h.update(b"D");
                }
                Entry::File { data, link } => {
                    h.update(b"F");
                    h.update(&(data.len() as u64).to_le_bytes());
                    h.update(link.as_deref().unwrap_or("").as_bytes());
                    h.update(&[0]);
                }
                Entry::Symlink { target } => {
                    h.update(b"S");
                    h.update(target.as_bytes());
                    h.update(&[0]);
                }
            }
        }
        *h.finalize().as_bytes()
    }

    /// Whether a recovered tree is this allowed one (same shape; bytes equal, or garbage
    /// in the allowed state).
    pub fn admits(&self, real: &Tree) -> bool {
        self.entries.len() == real.entries.len()
            && self
                .entries
                .iter()
                .zip(&real.entries)
                .all(|((pa, a), (pb, b))| {
                    pa == pb
                        && match (a, b) {
                            (
                                Entry::File { data: x, link: lx },
                                Entry::File { data: y, link: ly },
                            ) => {
                                lx == ly
                                    && x.len() == y.len()
                                    && x.iter()
                                        .zip(y)
                                        .enumerate()
                                        .all(|(i, (u, v))| u == v || *u == garbage(i as u64))
                            }
                            _ => a == b,
                        }
                })
    }

    /// One line per entry, for findings.
    pub fn listing(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|(p, e)| match e {
                Entry::Dir => format!("{p}/"),
                Entry::Symlink { target } => format!("{p} -> {target}"),
                Entry::File {
                    data,
                    link: Some(l),
                } => format!("{p} = hard link of {l} ({} bytes)", data.len()),
                Entry::File { data, link: None } => format!(
                    "{p} ({} bytes, blake3 {})",
                    data.len(),
                    &blake3::hash(data).to_hex()[..12]
                ),
            })
            .collect()
    }

    /// Paths whose entries differ (how far `real` is from this tree).
    pub fn differences(&self, real: &Tree) -> Vec<String> {
        let mut out = Vec::new();
        for (p, e) in &self.entries {
            match real.entries.get(p) {
                None => out.push(format!("{p}: allowed state has it, image lacks it")),
                Some(r)
                    if r != e
                        && !Tree {
                            entries: BTreeMap::from([(p.clone(), e.clone())]),
                        }
                        .admits(&Tree {
                            entries: BTreeMap::from([(p.clone(), r.clone())]),
                        }) =>
                {
                    out.push(format!("{p}: differs ({} vs {})", describe(e), describe(r)))
                }
                _ => {}
            }
        }
        for p in real.entries.keys() {
            if !self.entries.contains_key(p) {
                out.push(format!("{p}: image has it, allowed state lacks it"));
            }
        }
        out
    }
}

fn describe(e: &Entry) -> String {
    match e {
        Entry::Dir => "directory".into(),
        Entry::Symlink { target } => format!("symlink to {target}"),
        Entry::File { data, link } => format!(
            "{} bytes{}",
            data.len(),
            link.as_ref()
                .map(|l| format!(", link of {l}"))
                .unwrap_or_default()
        ),
    }
}

/// The allowed trees, grouped by shape.
#[derive(Default)]
pub struct Allowed {
    by_shape: HashMap<[u8; 32], Vec<Tree>>,
    pub count: usize,
    /// The enumeration finished (otherwise "forbidden" means "not among the first N").
    pub complete: bool,
}

impl Allowed {
    pub fn insert(&mut self, t: Tree) {
        let v = self.by_shape.entry(t.shape()).or_default();
        if !v.contains(&t) {
            v.push(t);
            self.count += 1;
        }
    }

    pub fn admits(&self, real: &Tree) -> bool {
        self.by_shape
            .get(&real.shape())
            .is_some_and(|v| v.iter().any(|a| a.admits(real)))
    }

    /// The allowed tree with the fewest differing paths.
    pub fn nearest(&self, real: &Tree) -> Option<(&Tree, Vec<String>)> {
        self.by_shape
            .values()
            .flatten()
            .map(|a| (a, a.differences(real)))
            .min_by_key(|(_, d)| d.len())
    }
}

/// A workload: a name for reports and the command, run in `w` (its working directory, made
/// before recording starts in the mount's root).
#[derive(Clone, Debug, serde::Serialize)]
pub struct WorkloadSpec {
    pub name: String,
    pub argv: Vec<String>,
}

pub struct ValidateConfig {
    pub fs: FsKind,
    pub apm: String,
    pub mount_options: String,
    pub gen: GenConfig,
    pub jobs: usize,
    pub max_states: usize,
    pub scratch: Option<PathBuf>,
    pub tools: Tools,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Finding {
    /// forbidden (a tree the APM does not allow), missing (no `w`), unmountable, fsck.
    pub what: String,
    pub image: usize,
    pub kind: ImageKind,
    pub epoch: usize,
    pub members: Vec<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torn: Option<Torn>,
    pub detail: Vec<String>,
    pub recovered: Vec<String>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct WorkloadResult {
    pub fs: FsKind,
    pub apm: String,
    pub mount_options: String,
    pub workload: WorkloadSpec,
    pub ops: Vec<String>,
    pub allowed_states: usize,
    pub enumeration_complete: bool,
    pub images: usize,
    pub distinct_images: usize,
    pub allowed: usize,
    pub forbidden: usize,
    pub unmountable: usize,
    pub fsck_errors: usize,
    pub findings: Vec<Finding>,
    pub seconds: f64,
}

pub const SNAPSHOT_DIR: &str = "w";

/// Records, enumerates, checks one workload on one file system.
pub fn validate_workload(
    w: &WorkloadSpec,
    cfg: &ValidateConfig,
    interrupted: &dyn Fn() -> bool,
) -> Result<WorkloadResult, String> {
    let started = std::time::Instant::now();
    let scratch = cfg.scratch.clone().unwrap_or_else(std::env::temp_dir);
    let work = tempfile::Builder::new()
        .prefix("intact-blk-validate.")
        .tempdir_in(&scratch)
        .map_err(|e| format!("scratch space in {}: {e}", scratch.display()))?;
    let bundle = work.path().join("bundle");
    let logdir = work.path().join("log");
    // The workload runs in `w` (its working directory), traced by `intact record`.
    let script = format!("cd {SNAPSHOT_DIR} && b=\"$1\" && shift && exec \"$0\" record --dir . --out \"$b\" --no-stacks -- \"$@\"");
    let mut command = vec![
        "sh".into(),
        "-c".into(),
        script,
        cfg.tools.intact.display().to_string(),
        bundle.display().to_string(),
    ];
    command.extend(w.argv.iter().cloned());
    let rc = RecordConfig {
        fs: cfg.fs,
        size: cfg.fs.default_size(),
        mkfs_options: Vec::new(),
        mount_options: cfg.mount_options.clone(),
        out: logdir.clone(),
        command,
        setup: Some(format!("mkdir {SNAPSHOT_DIR}")),
        scratch: cfg.scratch.clone(),
        tools: cfg.tools.clone(),
    };
    let meta = record(&rc, interrupted).map_err(|e| match e {
        RecordError::Input(m) | RecordError::Failed(m) => {
            format!("recording {} on {}: {m}", w.name, cfg.fs.name())
        }
        RecordError::Interrupted => "interrupted".into(),
    })?;
    if !meta.workload.ok {
        return Err(format!(
            "workload {} failed under `intact record` on {} (exit {:?}; its messages are above)",
            w.name,
            cfg.fs.name(),
            meta.workload.exit_code
        ));
    }

    // What the APM allows.
    let b = Bundle::open(&bundle).map_err(|e| e.to_string())?;
    let ops = b.ops().map_err(|e| e.to_string())?;
    let blob = b.data().map_err(|e| e.to_string())?;
    let initial = b.initial().map_err(|e| e.to_string())?;
    let apm = Apm::resolve(&cfg.apm).map_err(|e| format!("--apm {}: {e}", cfg.apm))?;
    let prog = Program::build(&apm, &ops, &initial, blob.len() as u64)
        .map_err(|e| format!("{} under {}: {e}", w.name, cfg.apm))?;
    let universe = CrashFs::universe(&initial, &ops).map_err(|e| e.to_string())?;
    let exp = Explorer::new(&prog, &ops, &blob, universe).map_err(|e| e.to_string())?;
    let mut allowed = Allowed::default();
    let max = cfg.max_states;
    let complete = exp
        .exhaustive(&mut |_, fs, _| {
            allowed.insert(Tree::of_state(&fs.to_state()));
            Ok(allowed.count < max && !interrupted())
        })
        .map_err(|e| e.to_string())?;
    allowed.complete = complete;
    if interrupted() {
        return Err("interrupted".into());
    }

    // What the file system did.
    let ld = LogDir::open(&logdir)?;
    let snaps = work.path().join("snapshots");
    std::fs::create_dir(&snaps).map_err(|e| format!("{}: {e}", snaps.display()))?;
    let checker = vec![
        cfg.tools.intact.display().to_string(),
        "blk".into(),
        "snapshot".into(),
        "--sub".into(),
        SNAPSHOT_DIR.into(),
        snaps.display().to_string(),
    ];
    let cc = CheckConfig {
        gen: cfg.gen.clone(),
        checker,
        protocol: intact_runner::Protocol::PerProcess,
        jobs: cfg.jobs,
        timeout: Some(std::time::Duration::from_secs(120)),
        fsck: true,
        scratch: cfg.scratch.clone(),
        mount_options: None,
        full_copy: false,
        tools: cfg.tools.clone(),
    };
    let report = check(&ld, &cc, interrupted, &mut |_, _, _| {}).map_err(|e| match e {
        CheckError::Input(m) | CheckError::Failed(m) => m,
        CheckError::Interrupted => "interrupted".into(),
    })?;

    let mut r = WorkloadResult {
        fs: cfg.fs,
        apm: cfg.apm.clone(),
        mount_options: cfg.mount_options.clone(),
        workload: w.clone(),
        ops: ops.iter().map(describe_op).collect(),
        allowed_states: allowed.count,
        enumeration_complete: complete,
        images: report.summary.checked,
        distinct_images: report.summary.distinct,
        allowed: 0,
        forbidden: 0,
        unmountable: 0,
        fsck_errors: 0,
        findings: Vec::new(),
        seconds: 0.0,
    };
    for img in &report.images {
        let finding = |what: &str, detail: Vec<String>, recovered: Vec<String>| Finding {
            what: what.into(),
            image: img.spec.id,
            kind: img.spec.kind,
            epoch: img.spec.epoch,
            members: img.spec.members.clone(),
            torn: img.spec.torn.clone(),
            detail,
            recovered,
        };
        if let Some(e) = &img.mount_error {
            r.unmountable += 1;
            r.findings
                .push(finding("unmountable", vec![e.clone()], Vec::new()));
            continue;
        }
        if let Some(f) = img.fsck.as_ref().filter(|f| !f.clean) {
            r.fsck_errors += 1;
            r.findings
                .push(finding("fsck", vec![f.output.clone()], Vec::new()));
        }
        let path = snaps.join(format!("image-{}.json", img.spec.id));
        let tree: Tree = match std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
        {
            Some(t) => t,
            None => {
                let why = match &img.checker {
                    CheckerVerdict::Fail { stderr, .. } => stderr.trim().to_string(),
                    v => format!("{v:?}"),
                };
                r.forbidden += 1;
                r.findings.push(finding("missing", vec![why], Vec::new()));
                continue;
            }
        };
        if allowed.admits(&tree) {
            r.allowed += 1;
        } else {
            r.forbidden += 1;
            let detail = allowed.nearest(&tree).map(|(_, d)| d).unwrap_or_default();
            r.findings
                .push(finding("forbidden", detail, tree.listing()));
        }
    }
    r.seconds = started.elapsed().as_secs_f64();
    Ok(r)
}

/// One line per logical operation: the call, its paths, and what it does (sizes, offsets).
fn describe_op(o: &intact_model::op::Op) -> String {
    use intact_model::op::LogicalOp as L;
    let what = match &o.op {
        L::Append {
            old_size, new_size, ..
        } => format!("append {old_size} -> {new_size}"),
        L::Overwrite { offset, count, .. } => format!("overwrite {count} bytes at {offset}"),
        L::Truncate {
            old_size, new_size, ..
        } => format!("truncate {old_size} -> {new_size}"),
        L::Rename { replaced, .. } => {
            if replaced.is_some() {
                "rename (replacing)".into()
            } else {
                "rename".into()
            }
        }
        other => other.name().to_string(),
    };
    let paths = match (&o.path, &o.path2) {
        (Some(a), Some(b)) => format!("{a} -> {b}"),
        (Some(a), None) => a.clone(),
        _ => String::new(),
    };
    format!("#{} {} {paths}: {what}", o.id, o.syscall)
}

/// The hidden checker `intact blk snapshot --sub w OUTDIR CRASH STDOUT`: writes the tree
/// of CRASH/w to OUTDIR/$INTACT_STATE.json.
pub fn snapshot(sub: &str, outdir: &Path, crash: &Path) -> Result<(), String> {
    let dir = crash.join(sub);
    let state = capture(&dir, &IgnoreSet::default())
        .map_err(|e| format!("the recovered directory {sub} cannot be read: {e}"))?;
    let tree = Tree::of_state(&state);
    let id = std::env::var("INTACT_STATE").map_err(|_| {
        "INTACT_STATE is not set (this runs as a checker of `intact blk check`)".to_string()
    })?;
    let text = serde_json::to_string(&tree).map_err(|e| e.to_string())?;
    std::fs::write(outdir.join(format!("{id}.json")), text)
        .map_err(|e| format!("{}: {e}", outdir.display()))
}

/// Small random workloads (deterministic from the seed), as Python programs: creates,
/// writes and appends of distinct bytes, truncates, renames, links, unlinks, mkdir, and
/// fsync/fdatasync/sync between them.
pub fn generated(seed: u64, count: usize, dir: &Path) -> Result<Vec<WorkloadSpec>, String> {
    let runner = dir.join("run_ops.py");
    std::fs::write(&runner, RUN_OPS).map_err(|e| format!("{}: {e}", runner.display()))?;
    // The system's interpreter when there is one: a version manager's shim (pyenv) is a
    // shell script, and tracing every step of it makes each workload several times slower.
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .unwrap_or("python3")
        .to_string();
    let mut out = Vec::new();
    for k in 0..count {
        let s = seed.wrapping_mul(1_000_003).wrapping_add(k as u64);
        let ops = gen_ops(s);
        let f = dir.join(format!("ops-{s}.json"));
        std::fs::write(&f, serde_json::to_string(&ops).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", f.display()))?;
        out.push(WorkloadSpec {
            name: format!("gen-{s}"),
            argv: vec![
                python.clone(),
                runner.display().to_string(),
                f.display().to_string(),
            ],
        });
    }
    Ok(out)
}

const RUN_OPS: &str = r#"import json, os, sys
for op in json.load(open(sys.argv[1])):
    k, a = op[0], op[1:]
    if k == "write":
        fd = os.open(a[0], os.O_WRONLY | os.O_CREAT, 0o644); os.pwrite(fd, bytes([a[3]]) * a[2], a[1]); os.close(fd)
    elif k == "append":
        fd = os.open(a[0], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644); os.write(fd, bytes([a[2]]) * a[1]); os.close(fd)
    elif k == "truncate":
        os.truncate(a[0], a[1])
    elif k == "rename":
        os.rename(a[0], a[1])
    elif k == "link":
        os.link(a[0], a[1])
    elif k == "unlink":
        os.unlink(a[0])
    elif k == "mkdir":
        os.mkdir(a[0])
    elif k in ("fsync", "fdatasync"):
        fd = os.open(a[0] if a else ".", os.O_RDONLY); (os.fsync if k == "fsync" else os.fdatasync)(fd); os.close(fd)
    elif k == "sync":
        os.sync()
    else:
        sys.exit("unknown op " + k)
"#;

fn gen_ops(seed: u64) -> Vec<serde_json::Value> {
    use serde_json::json;
    let mut rng = crate::images::Rng(seed ^ 0x0005_EED0_F0B5);
    let mut files: BTreeMap<String, u64> = BTreeMap::new(); // name -> size
    let mut has_d = false;
    let mut ops = Vec::new();
    let mut byte = 0x41u64;
    let n = 5 + rng.below(6);
    let sizes = [100u64, 4096, 5000, 8192];
    while ops.len() < n {
        byte = if byte >= 0x7a { 0x41 } else { byte + 1 };
        let names: Vec<String> = files.keys().cloned().collect();
        let pick = |r: &mut crate::images::Rng| names[r.below(names.len())].clone();
        let fresh = |r: &mut crate::images::Rng, has_d: bool| -> String {
            let base = ["a", "b", "c"][r.below(3)];
            if has_d && r.below(3) == 0 {
                format!("d/{base}")
            } else {
                base.to_string()
            }
        };
        match rng.below(10) {
            0 | 1 => {
                let f = fresh(&mut rng, has_d);
                let len = sizes[rng.below(4)];
                let size = files.get(&f).copied().unwrap_or(0);
                let off = [0, size, 4096][rng.below(3)];
                files.insert(f.clone(), size.max(off + len));
                ops.push(json!(["write", f, off, len, byte]));
            }
            2 if !names.is_empty() => {
                let f = pick(&mut rng);
                let len = sizes[rng.below(4)];
                *files.get_mut(&f).unwrap_or(&mut 0) += len;
                ops.push(json!(["append", f, len, byte]));
            }
            3 if !names.is_empty() => {
                let f = pick(&mut rng);
                let to = [0u64, 50, 4096, 10000][rng.below(4)];
                files.insert(f.clone(), to);
                ops.push(json!(["truncate", f, to]));
            }
            4 if !names.is_empty() => {
                let f = pick(&mut rng);
                let t = fresh(&mut rng, has_d);
                if t != f {
                    let size = files.remove(&f).unwrap_or(0);
                    files.insert(t.clone(), size);
                    ops.push(json!(["rename", f, t]));
                }
            }
            5 if !names.is_empty() => {
                let f = pick(&mut rng);
                let t = fresh(&mut rng, has_d);
                if !files.contains_key(&t) {
                    // Sizes of links are tracked per name: later writes may desynchronise
                    // them, which only matters for offsets chosen below (any offset works).
                    files.insert(t.clone(), files[&f]);
                    ops.push(json!(["link", f, t]));
                }
            }
            6 if !names.is_empty() => {
                let f = pick(&mut rng);
                files.remove(&f);
                ops.push(json!(["unlink", f]));
            }
            7 if !has_d => {
                has_d = true;
                ops.push(json!(["mkdir", "d"]));
            }
            8 if !names.is_empty() => {
                let f = pick(&mut rng);
                ops.push(json!([
                    if rng.below(2) == 0 {
                        "fsync"
                    } else {
                        "fdatasync"
                    },
                    f
                ]));
            }
            9 => ops.push(if rng.below(2) == 0 {
                json!(["sync"])
            } else {
                json!(["fsync"])
            }),
            _ => {}
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(data: &[u8]) -> Entry {
        Entry::File {
            data: data.to_vec(),
            link: None,
        }
    }

    #[test]
    fn garbage_matches_anything_and_only_garbage_does() {
        let g: Vec<u8> = (0..8).map(garbage).collect();
        let allowed = Tree {
            entries: BTreeMap::from([("a".to_string(), file(&g))]),
        };
        let zeros = Tree {
            entries: BTreeMap::from([("a".to_string(), file(&[0; 8]))]),
        };
        assert!(allowed.admits(&zeros));
        let exact = Tree {
            entries: BTreeMap::from([("a".to_string(), file(b"abcdefgh"))]),
        };
        assert!(!exact.admits(&zeros));
        let shorter = Tree {
            entries: BTreeMap::from([("a".to_string(), file(&[0; 7]))]),
        };
        assert!(!allowed.admits(&shorter));
        let mut set = Allowed::default();
        set.insert(allowed.clone());
        set.insert(exact.clone());
        assert!(set.admits(&zeros) && set.admits(&exact));
        assert!(!set.admits(&shorter));
        assert_eq!(set.nearest(&shorter).unwrap().1.len(), 1);
    }

    #[test]
    fn hard_links_are_part_of_the_shape() {
        let mut s = State::empty();
        let f = s.alloc_id();
        s.inodes.insert(
            f,
            intact_model::state::Inode {
                id: f,
                mode: 0o100644,
                nlink: 2,
                node: Node::File {
                    data: b"x".to_vec().into(),
                },
            },
        );
        if let Node::Dir { entries, .. } = &mut s.inodes.get_mut(&s.root.clone()).unwrap().node {
            entries.insert("b".into(), f);
            entries.insert("a".into(), f);
        }
        let t = Tree::of_state(&s);
        assert_eq!(
            t.entries["b"],
            Entry::File {
                data: b"x".to_vec(),
                link: Some("a".into())
            }
        );
        let copies = Tree {
            entries: BTreeMap::from([("a".to_string(), file(b"x")), ("b".to_string(), file(b"x"))]),
        };
        assert_ne!(t.shape(), copies.shape());
    }
}
