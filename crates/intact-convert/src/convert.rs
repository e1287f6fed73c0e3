//! The replay of system calls into logical operations.

use crate::args::{self, range_end, size_arg};
use crate::resolve::{Loc, Res, Resolver};
use crate::TraceInput;
use intact_model::{
    Data, IgnoreSet, InodeId, LogicalOp, Node, Op, State, SyncKind, TaskExit, Unsupported,
};
use intact_symbol::{parse_strace_frame, Frame, FrameFilter, Lang, Symbolizer};
use intact_trace::marker::{self, Marker, SourceFrame};
use intact_trace::{Arg, Call, Event, Ret, TraceEnd};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::rc::Rc;

// dispatch's system calls, by family.
mod control;
mod data;
mod fds;
mod mapping;
mod names;
mod process;
mod sync;

#[derive(Clone, Debug)]
pub struct ConvertOptions {
    /// Canonical absolute path of the recorded directory.
    pub root_abs: PathBuf,
    /// Working directory the workload started in (absolute).
    pub cwd: PathBuf,
    pub ignore: IgnoreSet,
    pub filter: FrameFilter,
    /// Symbolize stacks (off: keep the raw strace frames only, as function names).
    pub symbolize: bool,
    /// What the workload's standard output is, as strace's `-y` names it (`pipe:[123]`,
    /// `/dev/pts/0`, a file path). Writes by any process to that object are `output`
    /// operations; `None`: writes to fd 1 of any process are.
    pub stdout: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("raw trace line {line} ({syscall}): {message}")]
    Call {
        line: usize,
        syscall: String,
        message: String,
    },
    /// The line cannot come from strace: missing or mistyped arguments, offsets past the
    /// largest file size. An input error (the trace was edited or damaged).
    #[error("raw trace line {line} ({syscall}) is malformed: {message}")]
    Malformed {
        line: usize,
        syscall: String,
        message: String,
    },
    /// The sink of [`convert_into`] refused an operation (writing the bundle failed).
    #[error("writing logical operation {op}: {message}")]
    Output { op: usize, message: String },
    /// A line of the raw trace does not parse (read as the conversion goes).
    #[error("{0}")]
    Parse(intact_trace::ParseError),
    /// The raw trace file cannot be read.
    #[error("reading the raw trace {path}: {message}")]
    Read { path: String, message: String },
}

impl ConvertError {
    /// The 1-based line of the raw trace the error is about.
    pub fn line(&self) -> usize {
        match self {
            ConvertError::Call { line, .. } | ConvertError::Malformed { line, .. } => *line,
            ConvertError::Parse(intact_trace::ParseError::Line { line, .. }) => *line,
            ConvertError::Output { .. } | ConvertError::Read { .. } => 0,
        }
    }
    /// Whether the trace itself is at fault (exit 2), rather than the converter.
    pub fn is_malformed_input(&self) -> bool {
        matches!(self, ConvertError::Malformed { .. })
    }
}

#[derive(Debug)]
pub struct Conversion {
    /// The operations, from [`convert`]; empty from [`convert_into`], which hands each to
    /// its sink instead.
    pub ops: Vec<Op>,
    /// How many operations there are, and how many of each kind (by name).
    pub op_count: usize,
    pub op_names: BTreeMap<&'static str, usize>,
    /// Bytes referenced by `Data::Bytes` in the operations.
    pub blob: Vec<u8>,
    /// The logical state after all operations.
    pub state: State,
    pub unsupported: Vec<Unsupported>,
    /// How the first task (the workload's main process) ended, if the trace says.
    pub root_exit: Option<TaskExit>,
    /// Everything written to standard output, in order.
    pub stdout: Vec<u8>,
    pub calls: usize,
    pub tasks: usize,
    /// Calls that named a path under an `--ignore` pattern (left out of the operations).
    pub ignored_calls: usize,
    /// Events read (calls, exits and kills).
    pub events: usize,
    /// What the trace left besides its events (unfinished calls, a cut-off last line).
    pub trace_end: intact_trace::TraceEnd,
}

#[derive(Clone, Debug)]
enum Target {
    File(InodeId),
    Dir(InodeId),
    Out(String),
}

#[derive(Debug)]
struct OpenFile {
    target: Target,
    offset: u64,
    append: bool,
    sync: Option<SyncKind>,
}

#[derive(Clone, Debug)]
struct Fd {
    of: Rc<RefCell<OpenFile>>,
    cloexec: bool,
}

#[derive(Clone, Debug)]
struct Mapping {
    addr: u64,
    len: u64,
    inode: InodeId,
    file_off: u64,
}

type FdTable = HashMap<i64, Fd>;

#[derive(Clone)]
struct Task {
    tgid: u32,
    fds: Rc<RefCell<FdTable>>,
    cwd: Rc<RefCell<Loc>>,
    maps: Rc<RefCell<Vec<Mapping>>>,
    /// Python or Java stack from the last PY or JV marker of this task.
    source_stack: Vec<Frame>,
    /// Bytes announced by a CP marker for the next copy.
    copy: Option<Option<Vec<u8>>>,
    /// The process's intactfs stream and its flags (shared by threads, copied by fork:
    /// children start in their parent's stream).
    stream: Rc<std::cell::Cell<(u64, u32)>>,
}

struct Birth {
    parent: u32,
    flags: Vec<String>,
}

struct Conv<'a> {
    opts: &'a ConvertOptions,
    state: State,
    blob: Vec<u8>,
    /// Takes each operation as it is made: nothing here holds them all (issue 29).
    sink: &'a mut dyn FnMut(Op) -> Result<(), String>,
    op_count: usize,
    op_names: BTreeMap<&'static str, usize>,
    tasks: HashMap<u32, Task>,
    births: HashMap<u32, Birth>,
    unsupported: BTreeMap<(String, String), Unsupported>,
    symbolizer: Symbolizer,
    stdout: Vec<u8>,
    root_dev: Option<u64>,
    // per-call cache
    cur_stack: Option<Vec<Frame>>,
    /// A path of the current call resolved into an ignored part of the directory.
    hit_ignored: std::cell::Cell<bool>,
    /// Last name given to each inode (parent, name): paths for display without scanning.
    names: HashMap<InodeId, (InodeId, String)>,
}

/// Converts a trace (parsed, or a raw file read as it goes), starting from `initial` (the
/// snapshot of the directory), keeping the operations.
pub fn convert(
    trace: &dyn TraceInput,
    initial: State,
    opts: &ConvertOptions,
) -> Result<Conversion, ConvertError> {
    let mut ops = Vec::new();
    let mut conv = convert_into(trace, initial, opts, &mut |op| {
        ops.push(op);
        Ok(())
    })?;
    assert_eq!(ops.len(), conv.op_count, "every operation reached the sink");
    conv.ops = ops;
    Ok(conv)
}

/// Converts a trace as [`convert`] does, handing each operation to `sink` in order
/// (ids 0, 1, ...) instead of keeping them: a million-call trace's operations go to the
/// bundle as they are made. An error from the sink stops the conversion.
pub fn convert_into(
    trace: &dyn TraceInput,
    initial: State,
    opts: &ConvertOptions,
    sink: &mut dyn FnMut(Op) -> Result<(), String>,
) -> Result<Conversion, ConvertError> {
    let mut c = Conv::new(initial, opts, sink);
    c.learn_names();
    // Children may run before their parent's clone() returns: learn who created whom first.
    let first = trace.each_event(Some(&["clone", "clone3", "fork", "vfork"]), &mut |ev| {
        c.learn_birth(ev);
        Ok(())
    })?;
    let mut pass = Pass::default();
    let end = trace.each_event(None, &mut |ev| c.event(ev, &mut pass))?;
    assert_eq!(first, end, "both passes read the same trace");
    c.note_unfinished(&end);
    Ok(c.finish(pass, end))
}

/// What the main pass counts.
#[derive(Default)]
struct Pass {
    root_tid: Option<u32>,
    root_exit: Option<TaskExit>,
    events: usize,
    calls: usize,
    ignored_calls: usize,
}

impl<'a> Conv<'a> {
    fn new(
        initial: State,
        opts: &'a ConvertOptions,
        sink: &'a mut dyn FnMut(Op) -> Result<(), String>,
    ) -> Self {
        use std::os::unix::fs::MetadataExt;
        Conv {
            opts,
            state: initial,
            blob: Vec::new(),
            sink,
            op_count: 0,
            op_names: BTreeMap::new(),
            tasks: HashMap::new(),
            births: HashMap::new(),
            unsupported: BTreeMap::new(),
            symbolizer: Symbolizer::new(),
            stdout: Vec::new(),
            root_dev: std::fs::metadata(&opts.root_abs).ok().map(|m| m.dev()),
            cur_stack: None,
            hit_ignored: std::cell::Cell::new(false),
            names: HashMap::new(),
        }
    }

    /// The names of what the snapshot holds, for display.
    fn learn_names(&mut self) {
        for (path, id) in self.state.reachable() {
            let (parent_path, name) = match path.rsplit_once('/') {
                Some((p, n)) => (Some(p.to_string()), n.to_string()),
                None => (None, path.clone()),
            };
            let parent = match parent_path {
                None => self.state.root,
                Some(pp) => match self
                    .resolver()
                    .resolve(&Loc::In(self.state.root), &pp, false)
                {
                    Ok(Res::In {
                        target: Some(d), ..
                    }) => d,
                    _ => continue,
                },
            };
            self.names.insert(id, (parent, name));
        }
    }

    /// A clone, fork or vfork that returned a child: who created it, with which flags.
    fn learn_birth(&mut self, ev: &Event) {
        let Event::Call(call) = ev else { return };
        if !matches!(call.name.as_str(), "clone" | "clone3" | "fork" | "vfork") {
            return;
        }
        let Some(child) = call.ret.ok() else { return };
        let flags = match call.name.as_str() {
            "clone" => call.args.iter().find_map(|a| match a {
                Arg::Sym(s) if s.starts_with("flags=") => {
                    Some(s["flags=".len()..].split('|').map(String::from).collect())
                }
                _ => None,
            }),
            "clone3" => call
                .args
                .first()
                .and_then(|a| a.field("flags"))
                .map(|f| f.flags().into_iter().map(String::from).collect()),
            "vfork" => Some(vec!["CLONE_VM".to_string(), "CLONE_VFORK".to_string()]),
            _ => Some(Vec::new()),
        };
        let birth = Birth {
            parent: call.tid,
            flags: flags.unwrap_or_default(),
        };
        self.births.insert(child as u32, birth);
    }

    /// One event of the main pass.
    fn event(&mut self, ev: &Event, pass: &mut Pass) -> Result<(), ConvertError> {
        pass.events += 1;
        match ev {
            Event::Call(call) => {
                pass.calls += 1;
                pass.root_tid.get_or_insert(call.tid);
                self.cur_stack = None;
                self.hit_ignored.set(false);
                self.call(call, pass.calls - 1)?;
                pass.ignored_calls += usize::from(self.hit_ignored.get());
            }
            Event::Exited { tid, code, .. } if Some(*tid) == pass.root_tid => {
                pass.root_exit = Some(TaskExit::Exited { code: *code })
            }
            Event::Killed { tid, signal, .. } if Some(*tid) == pass.root_tid => {
                pass.root_exit = Some(TaskExit::Killed {
                    signal: signal.clone(),
                })
            }
            _ => {}
        }
        Ok(())
    }

    /// Calls that never completed: their effect is unknown, so they are unsupported.
    fn note_unfinished(&mut self, end: &TraceEnd) {
        for (tid, name, line) in &end.unfinished {
            let key = (
                format!("unfinished {name}"),
                "the call never completed; its effect is unknown".to_string(),
            );
            self.unsupported.entry(key).or_insert_with(|| Unsupported {
                syscall: name.clone(),
                reason: format!("started by task {tid} but never completed (task killed or trace cut short); its effect is unknown"),
                count: 0,
                first_line: *line,
                first_path: None,
                first_stack: Vec::new(),
            }).count += 1;
        }
    }

    fn finish(self, pass: Pass, trace_end: TraceEnd) -> Conversion {
        assert!(pass.calls <= pass.events, "every call is an event");
        assert!(pass.ignored_calls <= pass.calls, "ignored calls are calls");
        Conversion {
            ops: Vec::new(),
            op_count: self.op_count,
            op_names: self.op_names,
            blob: self.blob,
            tasks: self.tasks.len(),
            state: self.state,
            unsupported: self.unsupported.into_values().collect(),
            root_exit: pass.root_exit,
            stdout: self.stdout,
            calls: pass.calls,
            ignored_calls: pass.ignored_calls,
            events: pass.events,
            trace_end,
        }
    }
}

fn has(flags: &Arg, f: &str) -> bool {
    flags.has_flag(f)
}

/// The value before a `before => after` change (or the value itself).
fn before_int(a: &Arg) -> Option<i64> {
    match a {
        Arg::Changed(b, _) => b.as_int(),
        other => other.as_int(),
    }
}

/// An offset passed by reference (`[0] => [5]`: the value before the call), bounded.
fn offset_value(a: &Arg) -> Result<u64, String> {
    let v = before_int(a).unwrap_or(0);
    let v = u64::try_from(v).map_err(|_| format!("offset {v} is negative"))?;
    range_end(v, 0)
}

/// The address range `[addr, addr + len)` of arguments `a` and `l`, which must not wrap.
fn address_range(call: &Call, a: usize, l: usize) -> Result<(u64, u64), String> {
    let addr = int_arg(call, a)? as u64;
    let len = size_arg(call, l, "the length")?;
    let end = addr
        .checked_add(len)
        .ok_or_else(|| format!("address range {addr:#x}+{len} wraps around"))?;
    Ok((addr, end))
}

fn str_arg(call: &Call, i: usize) -> Result<String, String> {
    match call.args.get(i) {
        Some(Arg::Str {
            bytes,
            truncated: false,
        }) => String::from_utf8(bytes.clone())
            .map_err(|_| "a path that is not UTF-8 is not supported".to_string()),
        Some(Arg::Str {
            truncated: true, ..
        }) => Err("path argument was truncated by strace".into()),
        other => Err(format!("argument {i}: expected a string, found {other:?}")),
    }
}

fn int_arg(call: &Call, i: usize) -> Result<i64, String> {
    call.args.get(i).and_then(|a| a.as_int()).ok_or_else(|| {
        format!(
            "argument {i}: expected a number, found {:?}",
            call.args.get(i)
        )
    })
}

impl Conv<'_> {
    fn err(&self, call: &Call, message: impl Into<String>) -> ConvertError {
        ConvertError::Call {
            line: call.line,
            syscall: call.name.clone(),
            message: message.into(),
        }
    }

    fn malformed(&self, call: &Call, message: impl Into<String>) -> ConvertError {
        ConvertError::Malformed {
            line: call.line,
            syscall: call.name.clone(),
            message: message.into(),
        }
    }

    fn resolver(&self) -> Resolver<'_> {
        Resolver {
            state: &self.state,
            root_abs: &self.opts.root_abs,
            ignore: &self.opts.ignore,
            hit_ignored: Some(&self.hit_ignored),
        }
    }

    fn task(&mut self, tid: u32) -> Task {
        if let Some(t) = self.tasks.get(&tid) {
            return t.clone();
        }
        let birth = self.births.get(&tid).map(|b| (b.parent, b.flags.clone()));
        let t = match birth {
            Some((parent_tid, flags)) => {
                let parent = self.task(parent_tid);
                let share = |f: &str| flags.iter().any(|x| x == f);
                Task {
                    tgid: if share("CLONE_THREAD") {
                        parent.tgid
                    } else {
                        tid
                    },
                    fds: if share("CLONE_FILES") {
                        parent.fds.clone()
                    } else {
                        Rc::new(RefCell::new(parent.fds.borrow().clone()))
                    },
                    cwd: if share("CLONE_FS") {
                        parent.cwd.clone()
                    } else {
                        Rc::new(RefCell::new(parent.cwd.borrow().clone()))
                    },
                    maps: if share("CLONE_VM") {
                        parent.maps.clone()
                    } else {
                        Rc::new(RefCell::new(parent.maps.borrow().clone()))
                    },
                    source_stack: Vec::new(),
                    copy: None,
                    stream: if share("CLONE_THREAD") {
                        parent.stream.clone()
                    } else {
                        Rc::new(std::cell::Cell::new(parent.stream.get()))
                    },
                }
            }
            None => {
                let cwd = match self.resolver().resolve(
                    &Loc::Out("/".into()),
                    &self.opts.cwd.to_string_lossy(),
                    true,
                ) {
                    Ok(Res::Dir(d)) => Loc::In(d),
                    _ => Loc::Out(self.opts.cwd.clone()),
                };
                Task {
                    tgid: tid,
                    fds: Rc::new(RefCell::new(HashMap::new())),
                    cwd: Rc::new(RefCell::new(cwd)),
                    maps: Rc::new(RefCell::new(Vec::new())),
                    source_stack: Vec::new(),
                    copy: None,
                    stream: Rc::new(std::cell::Cell::new((0, 0))),
                }
            }
        };
        self.tasks.insert(tid, t.clone());
        t
    }

    /// The stack of the current call, symbolized once.
    fn stack(&mut self, call: &Call, task: &Task) -> Vec<Frame> {
        if let Some(s) = &self.cur_stack {
            return s.clone();
        }
        let raws: Vec<_> = call
            .stack
            .iter()
            .filter_map(|l| parse_strace_frame(l))
            .collect();
        let mut frames = if self.opts.symbolize {
            self.symbolizer.resolve_stack(&raws)
        } else {
            raws.iter()
                .map(|r| Frame {
                    binary: r.binary.clone(),
                    function: r.symbol.clone(),
                    file: None,
                    line: None,
                    lang: Lang::Native,
                    offset: Some(r.addr),
                })
                .collect()
        };
        // Python and Java frames apply to calls that went through the shim (or when no native stack exists).
        let via_shim =
            raws.is_empty() || raws.iter().any(|r| r.binary.contains("libintact_preload"));
        if via_shim && !task.source_stack.is_empty() {
            let mut all = task.source_stack.clone();
            all.append(&mut frames);
            frames = all;
        }
        self.cur_stack = Some(frames.clone());
        frames
    }

    fn store(&mut self, bytes: &[u8]) -> Data {
        let at = self.blob.len() as u64;
        self.blob.extend_from_slice(bytes);
        Data::Bytes {
            at,
            len: bytes.len() as u64,
        }
    }

    fn emit(
        &mut self,
        call: &Call,
        idx: usize,
        task: &Task,
        op: LogicalOp,
        path: Option<String>,
        path2: Option<String>,
    ) -> Result<(), ConvertError> {
        self.state.apply(&op, &self.blob).map_err(|e| {
            self.err(
                call,
                format!("{} does not fit the recorded state: {e}", op.name()),
            )
        })?;
        match &op {
            LogicalOp::Link {
                dir, name, inode, ..
            }
            | LogicalOp::Mkdir { dir, name, inode }
            | LogicalOp::Symlink {
                dir, name, inode, ..
            } => {
                self.names.insert(*inode, (*dir, name.clone()));
            }
            LogicalOp::Rename {
                src_dir,
                src_name,
                dst_dir,
                dst_name,
                inode,
                replaced,
                exchange,
            } => {
                self.names.insert(*inode, (*dst_dir, dst_name.clone()));
                if let (Some(r), true) = (replaced, exchange) {
                    self.names.insert(*r, (*src_dir, src_name.clone()));
                }
            }
            _ => {}
        }
        let stack = self.stack(call, task);
        let loc = self.opts.filter.select(&stack).cloned();
        let id = self.op_count;
        let op = Op {
            id,
            call: idx,
            pid: task.tgid,
            tid: call.tid,
            syscall: call.name.clone(),
            op,
            path,
            path2,
            stack,
            loc,
            stream: task.stream.get().0,
        };
        *self.op_names.entry(op.op.name()).or_insert(0) += 1;
        self.op_count += 1;
        (self.sink)(op).map_err(|message| ConvertError::Output { op: id, message })
    }

    fn unsupported(&mut self, call: &Call, task: &Task, reason: &str, path: Option<String>) {
        let key = (call.name.clone(), reason.to_string());
        if let Some(u) = self.unsupported.get_mut(&key) {
            u.count += 1;
            return;
        }
        let stack = self.stack(call, task);
        self.unsupported.insert(
            key,
            Unsupported {
                syscall: call.name.clone(),
                reason: reason.to_string(),
                count: 1,
                first_line: call.line,
                first_path: path,
                first_stack: stack,
            },
        );
    }

    fn size(&self, inode: InodeId) -> u64 {
        self.state.inodes.get(&inode).map(|i| i.size()).unwrap_or(0)
    }

    /// Up to `len` bytes of a file's contents from `offset` (holes read as zeros); the
    /// caller bounds `len` (it is allocated).
    fn file_read(&self, inode: InodeId, offset: u64, len: u64) -> Vec<u8> {
        match self.state.inodes.get(&inode).map(|i| &i.node) {
            Some(Node::File { data }) => data.read(offset, len, |_| 0),
            _ => Vec::new(),
        }
    }

    /// `dir/name` relative to the recorded directory.
    fn join(&self, dir: InodeId, name: &str) -> String {
        match self.path_of(dir, 0) {
            Some(p) if p.is_empty() => name.to_string(),
            Some(p) => format!("{p}/{name}"),
            None => self.state.join(dir, name),
        }
    }

    /// A current path of an inode, for display ("" for the root).
    fn path_of(&self, inode: InodeId, depth: usize) -> Option<String> {
        if inode == self.state.root {
            return Some(String::new());
        }
        let (parent, name) = self.names.get(&inode)?;
        if depth > 256 || self.state.lookup(*parent, name) != Some(inode) {
            return None;
        }
        let pp = self.path_of(*parent, depth + 1)?;
        Some(if pp.is_empty() {
            name.clone()
        } else {
            format!("{pp}/{name}")
        })
    }

    fn path_of_file(&self, inode: InodeId) -> String {
        if let Some(p) = self.path_of(inode, 0) {
            return p;
        }
        // The remembered name is gone (unlinked, or another hard link was removed): scan.
        for (p, id) in self.state.reachable() {
            if id == inode {
                return p;
            }
        }
        format!("<unlinked #{inode}>")
    }

    /// Base location for a dirfd argument.
    fn base(&self, task: &Task, dirfd: &Arg) -> Result<Loc, String> {
        let fd = dirfd.as_int().ok_or("expected a directory fd")?;
        if fd == -100 {
            return Ok(task.cwd.borrow().clone());
        }
        if let Some(f) = task.fds.borrow().get(&fd) {
            match &f.of.borrow().target {
                Target::Dir(d) => return Ok(Loc::In(*d)),
                Target::Out(p) => return Ok(Loc::Out(PathBuf::from(p))),
                Target::File(_) => return Err("directory fd refers to a regular file".into()),
            }
        }
        match dirfd {
            Arg::Fd { path: Some(p), .. } => {
                match self.resolver().resolve(&Loc::Out("/".into()), p, true)? {
                    Res::Dir(d) => Ok(Loc::In(d)),
                    Res::Out(p) => Ok(Loc::Out(p)),
                    Res::In { .. } => Err(format!(
                        "directory fd {fd} ({p}) is not a directory in the recorded state"
                    )),
                }
            }
            _ => Err(format!("unknown directory fd {fd}")),
        }
    }

    fn resolve_at(
        &self,
        task: &Task,
        dirfd: &Arg,
        path: &str,
        follow: bool,
    ) -> Result<Res, String> {
        let base = if path.starts_with('/') {
            Loc::Out("/".into())
        } else {
            self.base(task, dirfd)?
        };
        self.resolver().resolve(&base, path, follow)
    }

    fn resolve_cwd(&self, task: &Task, path: &str, follow: bool) -> Result<Res, String> {
        let base = task.cwd.borrow().clone();
        self.resolver().resolve(&base, path, follow)
    }

    /// The path argument of a call that comes in a plain form (path at `plain`, relative
    /// to the working directory) and an *at form (path at `at`, its dirfd just before).
    fn path_arg(
        &self,
        call: &Call,
        task: &Task,
        plain: usize,
        at: usize,
        follow: bool,
    ) -> Result<Res, String> {
        let n = call.name.as_str();
        if n != "creat" && (n.ends_with("at") || n.ends_with("at2")) {
            self.resolve_at(task, &call.args[at - 1], &str_arg(call, at)?, follow)
        } else {
            self.resolve_cwd(task, &str_arg(call, plain)?, follow)
        }
    }

    /// The open file behind `fd`; falls back to strace's `-y` path for fds opened before
    /// tracing began (e.g. inherited stdout).
    fn fd(&mut self, call: &Call, task: &Task, arg: &Arg) -> Option<Rc<RefCell<OpenFile>>> {
        let fd = arg.as_int()?;
        if let Some(f) = task.fds.borrow().get(&fd) {
            return Some(f.of.clone());
        }
        let path = match arg {
            Arg::Fd { path: Some(p), .. } => p.clone(),
            _ => return None,
        };
        let target = if path.starts_with('/') {
            match self.resolver().resolve(&Loc::Out("/".into()), &path, true) {
                Ok(Res::In {
                    target: Some(t), ..
                }) if matches!(
                    self.state.inodes.get(&t).map(|i| &i.node),
                    Some(Node::File { .. })
                ) =>
                {
                    self.unsupported(call, task, "file descriptor opened before tracing began; its offset is unknown (assumed 0)", Some(path.clone()));
                    Target::File(t)
                }
                Ok(Res::Dir(d))
                | Ok(Res::In {
                    target: Some(d), ..
                }) => Target::Dir(d),
                _ => Target::Out(path),
            }
        } else {
            Target::Out(path) // pipe:[..], socket:[..], anon_inode:...
        };
        let of = Rc::new(RefCell::new(OpenFile {
            target,
            offset: 0,
            append: false,
            sync: None,
        }));
        task.fds.borrow_mut().insert(
            fd,
            Fd {
                of: of.clone(),
                cloexec: false,
            },
        );
        Some(of)
    }

    /// Emits the operations of writing `data` at `pos` of `inode`.
    fn write_at(
        &mut self,
        call: &Call,
        idx: usize,
        task: &Task,
        inode: InodeId,
        pos: u64,
        data: Data,
    ) -> Result<(), ConvertError> {
        let len = data.len();
        range_end(pos, len).map_err(|m| self.malformed(call, m))?;
        let path = Some(self.path_of_file(inode));
        let mut size = self.size(inode);
        if len == 0 {
            return Ok(());
        }
        if pos > size {
            self.emit(
                call,
                idx,
                task,
                LogicalOp::Truncate {
                    inode,
                    old_size: size,
                    new_size: pos,
                },
                path.clone(),
                None,
            )?;
            size = pos;
        }
        let over = len.min(size - pos);
        if over > 0 {
            self.emit(
                call,
                idx,
                task,
                LogicalOp::Overwrite {
                    inode,
                    offset: pos,
                    count: over,
                    data: data.slice(0, over),
                },
                path.clone(),
                None,
            )?;
        }
        if len > over {
            self.emit(
                call,
                idx,
                task,
                LogicalOp::Append {
                    inode,
                    old_size: size,
                    new_size: size + len - over,
                    data: data.slice(over, len - over),
                },
                path,
                None,
            )?;
        }
        Ok(())
    }

    /// Bytes written by a write-family call: `ret` bytes of the buffer argument(s).
    fn written(&self, call: &Call, buf: &Arg, ret: u64) -> Result<Vec<u8>, ConvertError> {
        let mut out = Vec::new();
        let mut truncated = false;
        match buf {
            Arg::Str {
                bytes,
                truncated: t,
            } => {
                out.extend_from_slice(bytes);
                truncated |= t;
            }
            Arg::Array(iovs) => {
                for iov in iovs {
                    match iov.field("iov_base") {
                        Some(Arg::Str {
                            bytes,
                            truncated: t,
                        }) => {
                            out.extend_from_slice(bytes);
                            truncated |= t;
                            if *t {
                                break;
                            }
                        }
                        _ => return Err(self.err(call, "cannot decode the iovec array")),
                    }
                }
            }
            _ => return Err(self.err(call, format!("cannot decode the written buffer {buf:?}"))),
        }
        if (out.len() as u64) < ret {
            let why = if truncated {
                "larger than the capture limit: rerun with a larger --max-write"
            } else {
                "not fully printed by strace"
            };
            return Err(self.err(
                call,
                format!(
                    "the call wrote {ret} bytes but only {} were captured ({why})",
                    out.len()
                ),
            ));
        }
        out.truncate(ret as usize);
        Ok(out)
    }

    fn call(&mut self, call: &Call, idx: usize) -> Result<(), ConvertError> {
        let task = self.task(call.tid);
        // Markers first: they are write(-1, ...) calls that fail with EBADF by design.
        if call.name == "write" && call.args.first().and_then(|a| a.as_int()) == Some(-1) {
            if let Some(Arg::Str { bytes, .. }) = call.args.get(1) {
                if let Some(m) = marker::decode(bytes) {
                    let m = m.map_err(|e| {
                        self.err(call, format!("bad marker from the preload shim: {e}"))
                    })?;
                    return self.marker(call, idx, task, m);
                }
            }
            return Ok(());
        }
        args::check(call).map_err(|m| self.malformed(call, m))?;
        let ret = match &call.ret {
            Ret::Val(v, _) => *v,
            _ => return Ok(()), // failed calls change nothing
        };
        let r = self.dispatch(call, idx, &task, ret);
        r.map_err(|e| match e {
            Fail::Msg(m) => self.err(call, m),
            Fail::Bad(m) => self.malformed(call, m),
            Fail::Conv(e) => e,
        })
    }

    /// A PY or JV marker: the task's language-level stack for the calls that follow.
    fn set_source_stack(&mut self, call: &Call, frames: Vec<SourceFrame>, lang: Lang) {
        let binary = match lang {
            Lang::Java => "java",
            _ => "python",
        };
        let stack: Vec<Frame> = frames
            .into_iter()
            .map(|f| Frame {
                binary: binary.into(),
                function: Some(f.function),
                file: Some(intact_symbol::clean_path(&f.file)),
                line: Some(f.line),
                lang,
                offset: None,
            })
            .collect();
        if let Some(t) = self.tasks.get_mut(&call.tid) {
            t.source_stack = stack;
        }
    }

    fn marker(
        &mut self,
        call: &Call,
        idx: usize,
        task: Task,
        m: Marker,
    ) -> Result<(), ConvertError> {
        match m {
            Marker::Python(frames) => self.set_source_stack(call, frames, Lang::Python),
            Marker::Java(frames) => self.set_source_stack(call, frames, Lang::Java),
            Marker::Copy(bytes) => {
                if let Some(t) = self.tasks.get_mut(&call.tid) {
                    t.copy = Some(bytes);
                }
            }
            Marker::Stream { id, flags } => {
                // What the program asks for, whether or not the file system under the
                // recording is intactfs (elsewhere the ioctl fails with ENOTTY): the
                // protocol is checked under the intactfs APM either way.
                task.stream.set((id, flags));
            }
            Marker::MapWrite { addr, data } => {
                let maps = task.maps.borrow().clone();
                let mut a = addr;
                let end = addr.checked_add(data.len() as u64).ok_or_else(|| {
                    self.malformed(call, format!("mapped write at {addr:#x} wraps around"))
                })?;
                while a < end {
                    let Some(m) = maps.iter().find(|m| m.addr <= a && a < m.addr + m.len) else {
                        // Not a mapping of a file inside the recorded directory.
                        a += 1;
                        continue;
                    };
                    let stop = end.min(m.addr + m.len);
                    let file_off = m.file_off + (a - m.addr);
                    let chunk = &data[(a - addr) as usize..(stop - addr) as usize];
                    // Only bytes inside the file's size can reach it; emit runs that differ.
                    let size = self.size(m.inode);
                    let usable = chunk.len().min(size.saturating_sub(file_off) as usize);
                    let cur = self.file_read(m.inode, file_off, usable as u64);
                    assert_eq!(cur.len(), usable, "the file holds the usable bytes");
                    let mut i = 0;
                    while i < usable {
                        if chunk[i] == cur[i] {
                            i += 1;
                            continue;
                        }
                        let s = i;
                        while i < usable && chunk[i] != cur[i] {
                            i += 1;
                        }
                        let d = self.store(&chunk[s..i]);
                        let path = Some(self.path_of_file(m.inode));
                        self.emit(
                            call,
                            idx,
                            &task,
                            LogicalOp::Overwrite {
                                inode: m.inode,
                                offset: file_off + s as u64,
                                count: (i - s) as u64,
                                data: d,
                            },
                            path,
                            None,
                        )?;
                    }
                    a = stop;
                }
            }
        }
        Ok(())
    }
}

const RWF_APPEND_BIT: u64 = 0x10;
const RWF_NOAPPEND_BIT: u64 = 0x20;

enum Fail {
    Msg(String),
    /// Malformed input: an argument out of its range.
    Bad(String),
    Conv(ConvertError),
}
impl From<String> for Fail {
    fn from(s: String) -> Fail {
        Fail::Msg(s)
    }
}
impl From<&str> for Fail {
    fn from(s: &str) -> Fail {
        Fail::Msg(s.to_string())
    }
}
impl From<ConvertError> for Fail {
    fn from(e: ConvertError) -> Fail {
        Fail::Conv(e)
    }
}

/// `/proc/self/fd/N`, `/proc/thread-self/fd/N`, `/proc/PID/fd/N`, `/dev/fd/N`: the pid
/// (None: the caller) and fd named by a magic fd path.
fn fd_alias(path: &str) -> Option<(Option<u32>, i64)> {
    let rest = path
        .strip_prefix("/dev/fd/")
        .map(|r| (None, r))
        .or_else(|| {
            let r = path.strip_prefix("/proc/")?;
            let (who, r) = r.split_once('/')?;
            let r = r.strip_prefix("fd/")?;
            let pid = match who {
                "self" | "thread-self" => None,
                n => Some(n.parse().ok()?),
            };
            Some((pid, r))
        })?;
    Some((rest.0, rest.1.parse().ok()?))
}

/// Numeric value of a flag argument printed as a number, or with unknown bits
/// (`0x20 /* RWF_??? */`).
fn flag_bits(a: &Arg) -> u64 {
    match a {
        Arg::Int(v) => *v as u64,
        Arg::Sym(s) => s
            .split('|')
            .filter_map(|part| {
                let t = part.split("/*").next().unwrap_or("").trim();
                t.strip_prefix("0x")
                    .and_then(|h| u64::from_str_radix(h, 16).ok())
                    .or_else(|| t.parse().ok())
            })
            .fold(0, |a, b| a | b),
        _ => 0,
    }
}

fn open_flags(call: &Call) -> Option<Arg> {
    match call.name.as_str() {
        "open" => call.args.get(1).cloned(),
        "openat" => call.args.get(2).cloned(),
        "openat2" => call.args.get(2).and_then(|a| a.field("flags")).cloned(),
        "creat" => Some(Arg::Sym("O_WRONLY|O_CREAT|O_TRUNC".into())),
        _ => None,
    }
}

impl Conv<'_> {
    fn dispatch(&mut self, call: &Call, idx: usize, task: &Task, ret: i64) -> Result<(), Fail> {
        let name = call.name.as_str();
        match name {
            "open" | "openat" | "openat2" | "creat" => self.open(call, idx, task, ret)?,
            "close" => {
                task.fds.borrow_mut().remove(&int_arg(call, 0)?);
            }
            "close_range" => self.sys_close_range(call, idx, task, ret)?,
            "dup" | "dup2" | "dup3" => self.sys_dup(call, idx, task, ret)?,
            "fcntl" => self.sys_fcntl(call, idx, task, ret)?,
            "lseek" => self.sys_lseek(call, idx, task, ret)?,
            "read" | "readv" => self.sys_read(call, idx, task, ret)?,
            "write" | "writev" | "pwrite64" | "pwritev" | "pwritev2" => {
                self.write(call, idx, task, ret as u64)?
            }
            "truncate" | "ftruncate" => self.sys_truncate(call, idx, task, ret)?,
            "fallocate" => self.fallocate(call, idx, task)?,
            "copy_file_range" | "sendfile" => self.copy(call, idx, task, ret as u64)?,
            "splice" => self.sys_splice(call, idx, task, ret)?,
            "rename" | "renameat" | "renameat2" => self.rename(call, idx, task)?,
            "link" | "linkat" => self.link(call, idx, task)?,
            "unlink" | "unlinkat" | "rmdir" => self.sys_unlink(call, idx, task, ret)?,
            "mkdir" | "mkdirat" => self.sys_mkdir(call, idx, task, ret)?,
            "symlink" | "symlinkat" => self.sys_symlink(call, idx, task, ret)?,
            "mknod" | "mknodat" => self.sys_mknod(call, idx, task, ret)?,
            "fsync" | "fdatasync" if task.stream.get().1 & STREAM_IGNORE_FSYNC != 0 => {
                // IGNORE_FSYNC: intactfs returns at once without committing anything.
            }
            "fsync" | "fdatasync" | "sync_file_range" => self.sys_fsync(call, idx, task, ret)?,
            "syncfs" => self.sys_syncfs(call, idx, task, ret)?,
            "sync" => self.sys_sync(call, idx, task, ret)?,
            "msync" => self.sys_msync(call, idx, task, ret)?,
            "mmap" => self.sys_mmap(call, idx, task, ret)?,
            "munmap" => self.sys_munmap(call, idx, task, ret)?,
            "mremap" => self.sys_mremap(call, idx, task, ret)?,
            "chdir" | "fchdir" => self.sys_chdir(call, idx, task, ret)?,
            "execve" | "execveat" => self.sys_execve(call, idx, task, ret)?,
            "clone" | "clone3" | "fork" | "vfork" => {
                self.task(ret as u32);
            }
            "ioctl" => self.sys_ioctl(call, idx, task, ret)?,
            "io_uring_setup" => self.sys_io_uring_setup(call, idx, task, ret)?,
            "chmod" | "fchmod" | "fchmodat" | "chown" | "fchown" | "lchown" | "fchownat"
            | "utimensat" | "utime" | "utimes" | "futimesat" | "setxattr" | "lsetxattr"
            | "fsetxattr" | "removexattr" | "lremovexattr" | "fremovexattr" => {
                // Attributes are not part of the logical model; report those inside the directory.
                let p = self.attr_target(call, task);
                if let Some(p) = p {
                    self.unsupported(
                        call,
                        task,
                        "file attributes (mode, owner, times, xattrs) are not modelled",
                        Some(p),
                    );
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn display_path(&self, inode: InodeId) -> String {
        match self.state.inodes.get(&inode).map(|i| &i.node) {
            Some(Node::Dir { .. }) => {
                let p = self
                    .path_of(inode, 0)
                    .or_else(|| self.state.dir_path(inode))
                    .unwrap_or_default();
                if p.is_empty() {
                    ".".into()
                } else {
                    p
                }
            }
            _ => self.path_of_file(inode),
        }
    }

    fn attr_target(&mut self, call: &Call, task: &Task) -> Option<String> {
        let name = call.name.as_str();
        let res = match name {
            "fchmod" | "fchown" | "fsetxattr" | "fremovexattr" => {
                return match self
                    .fd(call, task, &call.args[0])
                    .map(|o| o.borrow().target.clone())
                {
                    Some(Target::File(t)) | Some(Target::Dir(t)) => Some(self.display_path(t)),
                    _ => None,
                };
            }
            "fchmodat" | "fchownat" | "utimensat" | "futimesat" => {
                let p = match call.args.get(1) {
                    Some(Arg::Str { bytes, .. }) => String::from_utf8_lossy(bytes).into_owned(),
                    _ => String::new(),
                };
                if p.is_empty() {
                    return match self
                        .fd(call, task, &call.args[0])
                        .map(|o| o.borrow().target.clone())
                    {
                        Some(Target::File(t)) | Some(Target::Dir(t)) => Some(self.display_path(t)),
                        _ => None,
                    };
                }
                self.resolve_at(task, &call.args[0], &p, false).ok()?
            }
            _ => self
                .resolve_cwd(task, &str_arg(call, 0).ok()?, !name.starts_with('l'))
                .ok()?,
        };
        match res {
            Res::In { parent, name, .. } => Some(self.join(parent, &name)),
            Res::Dir(d) => Some(self.display_path(d)),
            Res::Out(_) => None,
        }
    }

    fn open(&mut self, call: &Call, idx: usize, task: &Task, fd: i64) -> Result<(), Fail> {
        let flags = open_flags(call).unwrap_or(Arg::Int(0));
        let path = str_arg(
            call,
            if call.name == "open" || call.name == "creat" {
                0
            } else {
                1
            },
        )?;
        let follow = !has(&flags, "O_NOFOLLOW");
        let in_root = call.name == "openat2"
            && call
                .args
                .get(2)
                .and_then(|a| a.field("resolve"))
                .is_some_and(|r| has(r, "RESOLVE_IN_ROOT"));
        let res = if let Some(target) = self.alias_target(task, &path) {
            // Reopening through /proc/self/fd/N: the same inode, a new open file description.
            target
        } else if in_root {
            let base = self.base(task, &call.args[0])?;
            self.resolver().resolve_in_root(&base, &path, follow)?
        } else {
            self.path_arg(call, task, 0, 1, follow)?
        };
        let append = has(&flags, "O_APPEND");
        let sync = if has(&flags, "O_SYNC") {
            Some(SyncKind::OSync)
        } else if has(&flags, "O_DSYNC") {
            Some(SyncKind::ODsync)
        } else {
            None
        };
        let target = match res {
            Res::Out(p) => Target::Out(match &call.ret {
                Ret::Val(_, Some(a)) => a.clone(),
                _ => p.display().to_string(),
            }),
            Res::Dir(d) if has(&flags, "O_TMPFILE") => self.tmpfile(d),
            Res::Dir(d) => Target::Dir(d),
            Res::In {
                target: Some(d), ..
            } if has(&flags, "O_TMPFILE") => self.tmpfile(d),
            Res::In {
                parent,
                name,
                target,
            } => match target.map(|t| (t, self.state.inodes.get(&t).map(|i| i.node.clone()))) {
                Some((t, Some(Node::File { data }))) => {
                    if has(&flags, "O_TRUNC") && !data.is_empty() && !has(&flags, "O_PATH") {
                        let p = Some(if name.is_empty() {
                            self.path_of_file(t)
                        } else {
                            self.join(parent, &name)
                        });
                        self.emit(
                            call,
                            idx,
                            task,
                            LogicalOp::Truncate {
                                inode: t,
                                old_size: data.len(),
                                new_size: 0,
                            },
                            p,
                            None,
                        )?;
                    }
                    Target::File(t)
                }
                Some((t, Some(Node::Dir { .. }))) => Target::Dir(t),
                Some((_, _)) => Target::Out(format!("<symlink {}>", self.join(parent, &name))),
                None => {
                    if !has(&flags, "O_CREAT") {
                        return Err(format!(
                            "{:?} was opened but does not exist in the recorded state",
                            self.join(parent, &name)
                        )
                        .into());
                    }
                    let inode = self.state.alloc_id();
                    let p = Some(self.join(parent, &name));
                    self.emit(
                        call,
                        idx,
                        task,
                        LogicalOp::Link {
                            dir: parent,
                            name,
                            inode,
                            link_count: 1,
                            created: true,
                        },
                        p,
                        None,
                    )?;
                    Target::File(inode)
                }
            },
        };
        let cloexec = has(&flags, "O_CLOEXEC");
        let of = OpenFile {
            target,
            offset: 0,
            append,
            sync,
        };
        task.fds.borrow_mut().insert(
            fd,
            Fd {
                of: Rc::new(RefCell::new(of)),
                cloexec,
            },
        );
        Ok(())
    }

    /// The file behind a magic fd path (`/proc/self/fd/N`, ...), if `path` is one.
    fn alias_target(&self, task: &Task, path: &str) -> Option<Res> {
        let (pid, fd) = fd_alias(path)?;
        let fds = match pid {
            None => task.fds.clone(),
            Some(p) => self
                .tasks
                .values()
                .find(|t| t.tgid == p)
                .map(|t| t.fds.clone())
                .unwrap_or_else(|| task.fds.clone()),
        };
        let target = fds
            .borrow()
            .get(&fd)
            .map(|f| f.of.borrow().target.clone())?;
        Some(match target {
            Target::File(t) => Res::In {
                parent: 0,
                name: String::new(),
                target: Some(t),
            },
            Target::Dir(d) => Res::Dir(d),
            Target::Out(p) => Res::Out(PathBuf::from(p)),
        })
    }

    /// An O_TMPFILE file: an inode with no name until linkat gives it one.
    fn tmpfile(&mut self, _dir: InodeId) -> Target {
        let id = self.state.alloc_id();
        self.state.ensure_file(id);
        Target::File(id)
    }

    fn write(&mut self, call: &Call, idx: usize, task: &Task, ret: u64) -> Result<(), Fail> {
        let Some(of) = self.fd(call, task, &call.args[0]) else {
            return Ok(());
        };
        let fdnum = call.args[0].as_int().unwrap_or(-1);
        let buf = call.args.get(1).ok_or("missing buffer argument")?;
        let target = of.borrow().target.clone();
        let inode = match target {
            Target::File(i) => i,
            Target::Dir(_) => return Ok(()),
            Target::Out(p) => {
                let is_stdout = match &self.opts.stdout {
                    Some(id) => &p == id,
                    None => fdnum == 1,
                };
                if is_stdout && ret > 0 {
                    let bytes = self.written(call, buf, ret)?;
                    if is_jvm_notice_of_the_shim(&bytes) {
                        return Ok(());
                    }
                    self.stdout.extend_from_slice(&bytes);
                    let d = self.store(&bytes);
                    self.emit(call, idx, task, LogicalOp::Output { data: d }, None, None)?;
                }
                return Ok(());
            }
        };
        let bytes = self.written(call, buf, ret)?;
        let explicit = match call.name.as_str() {
            "pwrite64" | "pwritev" => Some(size_arg(call, 3, "the offset").map_err(Fail::Bad)?),
            // -1: the file's current offset.
            "pwritev2" if int_arg(call, 3)? == -1 => None,
            "pwritev2" => Some(size_arg(call, 3, "the offset").map_err(Fail::Bad)?),
            _ => None,
        };
        let rwf = if call.name == "pwritev2" {
            call.args.get(4).cloned()
        } else {
            None
        };
        let rwf_append = rwf
            .as_ref()
            .is_some_and(|f| has(f, "RWF_APPEND") || flag_bits(f) & RWF_APPEND_BIT != 0);
        // RWF_NOAPPEND (Linux 6.9; strace 6.1 prints it as a number) overrides O_APPEND.
        let rwf_noappend = rwf
            .as_ref()
            .is_some_and(|f| has(f, "RWF_NOAPPEND") || flag_bits(f) & RWF_NOAPPEND_BIT != 0);
        let (pos, moves) = {
            let o = of.borrow();
            // Linux: with O_APPEND even pwrite appends (see pwrite(2), BUGS).
            if (o.append && !(rwf_noappend && explicit.is_some())) || rwf_append {
                (self.size(inode), explicit.is_none())
            } else {
                match explicit {
                    Some(p) => (p, false),
                    None => (o.offset, true),
                }
            }
        };
        let d = self.store(&bytes);
        self.write_at(call, idx, task, inode, pos, d)?;
        if moves {
            // Bounded: write_at checked pos + the bytes written.
            of.borrow_mut().offset = pos + ret;
        }
        let sync = of.borrow().sync.or_else(|| match &rwf {
            Some(f) if has(f, "RWF_SYNC") => Some(SyncKind::OSync),
            Some(f) if has(f, "RWF_DSYNC") => Some(SyncKind::ODsync),
            _ => None,
        });
        if let Some(how) = sync {
            if ret > 0 {
                let p = Some(self.path_of_file(inode));
                self.emit(
                    call,
                    idx,
                    task,
                    LogicalOp::Sync {
                        inode: Some(inode),
                        how,
                        range: Some((pos, ret)),
                    },
                    p,
                    None,
                )?;
            }
        }
        Ok(())
    }

    fn fallocate(&mut self, call: &Call, idx: usize, task: &Task) -> Result<(), Fail> {
        let Some(Target::File(inode)) = self
            .fd(call, task, &call.args[0])
            .map(|o| o.borrow().target.clone())
        else {
            return Ok(());
        };
        let mode = call.args.get(1).cloned().unwrap_or(Arg::Int(0));
        let off = size_arg(call, 2, "the offset").map_err(Fail::Bad)?;
        let len = size_arg(call, 3, "the length").map_err(Fail::Bad)?;
        range_end(off, len).map_err(Fail::Bad)?;
        let keep = has(&mode, "FALLOC_FL_KEEP_SIZE");
        let size = self.size(inode);
        let path = Some(self.path_of_file(inode));
        if has(&mode, "FALLOC_FL_COLLAPSE_RANGE") || has(&mode, "FALLOC_FL_INSERT_RANGE") {
            self.unsupported(
                call,
                task,
                "fallocate collapse/insert range is not modelled",
                path,
            );
            return Ok(());
        }
        let zeroing = has(&mode, "FALLOC_FL_PUNCH_HOLE") || has(&mode, "FALLOC_FL_ZERO_RANGE");
        if zeroing && off < size {
            let n = (off + len).min(size) - off;
            self.emit(
                call,
                idx,
                task,
                LogicalOp::Overwrite {
                    inode,
                    offset: off,
                    count: n,
                    data: Data::Zeros { zeros: n },
                },
                path.clone(),
                None,
            )?;
        }
        if !keep && !has(&mode, "FALLOC_FL_PUNCH_HOLE") && off + len > size {
            self.emit(
                call,
                idx,
                task,
                LogicalOp::Truncate {
                    inode,
                    old_size: size,
                    new_size: off + len,
                },
                path,
                None,
            )?;
        }
        Ok(())
    }

    fn copy(&mut self, call: &Call, idx: usize, task: &Task, ret: u64) -> Result<(), Fail> {
        // copy_file_range(in, off_in, out, off_out, len, flags); sendfile(out, in, offset, count)
        let (in_arg, in_off, out_arg, out_off) = if call.name == "copy_file_range" {
            (
                &call.args[0],
                call.args.get(1),
                &call.args[2],
                call.args.get(3),
            )
        } else {
            (&call.args[1], call.args.get(2), &call.args[0], None)
        };
        let copied = self.tasks.get_mut(&call.tid).and_then(|t| t.copy.take());
        let src = self.fd(call, task, in_arg);
        let dst = self.fd(call, task, out_arg);
        // Source position and offset update.
        let mut src_pos = 0;
        if let Some(src) = &src {
            match in_off.filter(|a| !a.is_null()) {
                Some(a) => src_pos = offset_value(a).map_err(Fail::Bad)?,
                None => {
                    src_pos = src.borrow().offset;
                    let mut s = src.borrow_mut();
                    s.offset = s.offset.saturating_add(ret);
                }
            }
        }
        let Some(dst) = dst else { return Ok(()) };
        let Target::File(inode) = dst.borrow().target.clone() else {
            return Ok(());
        };
        if ret == 0 {
            return Ok(());
        }
        let bytes: Vec<u8> = match (copied, src.as_ref().map(|s| s.borrow().target.clone())) {
            (Some(Some(b)), _) if b.len() as u64 >= ret => b[..ret as usize].to_vec(),
            (_, Some(Target::File(s))) => {
                let size = self.size(s);
                let end = src_pos.saturating_add(ret);
                if end > size {
                    return Err(format!(
                        "copy of {ret} bytes from offset {src_pos} goes past the source's size {size}"
                    )
                    .into());
                }
                self.file_read(s, src_pos, ret)
            }
            _ => {
                let p = self.path_of_file(inode);
                self.unsupported(call, task, "copy from outside the recorded directory without the preload shim's copy of the data", Some(p));
                return Ok(());
            }
        };
        let (pos, moves) = match out_off.filter(|a| !a.is_null()) {
            Some(a) => (offset_value(a).map_err(Fail::Bad)?, false),
            None => {
                let o = dst.borrow();
                (if o.append { self.size(inode) } else { o.offset }, true)
            }
        };
        let d = self.store(&bytes);
        self.write_at(call, idx, task, inode, pos, d)?;
        if moves {
            // Bounded: write_at checked pos + the bytes copied.
            dst.borrow_mut().offset = pos + ret;
        }
        Ok(())
    }

    fn rename(&mut self, call: &Call, idx: usize, task: &Task) -> Result<(), Fail> {
        let src = self.path_arg(call, task, 0, 1, false)?;
        let dst = self.path_arg(call, task, 1, 3, false)?;
        let flags = if call.name == "renameat2" {
            call.args.get(4).cloned()
        } else {
            None
        };
        let exchange = flags.as_ref().is_some_and(|f| has(f, "RENAME_EXCHANGE"));
        match (src, dst) {
            (
                Res::In {
                    parent: sp,
                    name: sn,
                    target: Some(inode),
                },
                Res::In {
                    parent: dp,
                    name: dn,
                    target: dt,
                },
            ) => {
                if dt == Some(inode) {
                    return Ok(()); // both names link the same inode: rename and exchange do nothing
                }
                let (p1, p2) = (Some(self.join(sp, &sn)), Some(self.join(dp, &dn)));
                let op = LogicalOp::Rename {
                    src_dir: sp,
                    src_name: sn,
                    dst_dir: dp,
                    dst_name: dn,
                    inode,
                    replaced: dt,
                    exchange,
                };
                self.emit(call, idx, task, op, p1, p2)?;
            }
            (
                Res::In {
                    parent,
                    name,
                    target: Some(inode),
                },
                Res::Out(_),
            ) => {
                // Leaving the recorded directory looks like a removal from inside it.
                let p = Some(self.join(parent, &name));
                if self.state.get(inode).map(|i| i.is_dir()).unwrap_or(false) {
                    self.unsupported(
                        call,
                        task,
                        "moving a directory out of the recorded directory is not modelled",
                        p,
                    );
                } else {
                    let lc = self
                        .state
                        .get(inode)
                        .map(|i| i.nlink)
                        .unwrap_or(1)
                        .saturating_sub(1);
                    self.emit(
                        call,
                        idx,
                        task,
                        LogicalOp::Unlink {
                            dir: parent,
                            name,
                            inode,
                            link_count: lc,
                        },
                        p,
                        None,
                    )?;
                }
            }
            (Res::Out(_), Res::In { parent, name, .. }) => {
                let p = Some(self.join(parent, &name));
                self.unsupported(call, task, "moving a file into the recorded directory from outside: its contents are unknown", p);
            }
            (Res::Out(_), Res::Out(_)) => {}
            (s, d) => {
                return Err(
                    format!("rename from {s:?} to {d:?} does not fit the recorded state").into(),
                )
            }
        }
        Ok(())
    }

    fn link(&mut self, call: &Call, idx: usize, task: &Task) -> Result<(), Fail> {
        let dst = self.path_arg(call, task, 1, 3, false)?;
        let src = if call.name == "link" {
            self.resolve_cwd(task, &str_arg(call, 0)?, false)?
        } else {
            let flags = call.args.get(4).cloned().unwrap_or(Arg::Int(0));
            let old = str_arg(call, 1)?;
            if old.is_empty() && has(&flags, "AT_EMPTY_PATH") {
                match self
                    .fd(call, task, &call.args[0])
                    .map(|o| o.borrow().target.clone())
                {
                    Some(Target::File(t)) => Res::In {
                        parent: 0,
                        name: String::new(),
                        target: Some(t),
                    },
                    _ => Res::Out(PathBuf::from("<fd>")),
                }
            } else if let Some(r) = self.alias_target(task, &old) {
                r
            } else {
                self.resolve_at(task, &call.args[0], &old, has(&flags, "AT_SYMLINK_FOLLOW"))?
            }
        };
        match (src, dst) {
            (
                Res::In {
                    target: Some(inode),
                    parent: sp,
                    name: sn,
                },
                Res::In { parent, name, .. },
            ) => {
                let lc = self.state.get(inode).map(|i| i.nlink).unwrap_or(0) + 1;
                let p1 = Some(self.join(parent, &name));
                let p2 = if !sn.is_empty() {
                    Some(self.join(sp, &sn))
                } else if self.state.get(inode).map(|i| i.nlink).unwrap_or(0) > 0 {
                    Some(self.path_of_file(inode))
                } else {
                    None
                };
                self.emit(
                    call,
                    idx,
                    task,
                    LogicalOp::Link {
                        dir: parent,
                        name,
                        inode,
                        link_count: lc,
                        created: false,
                    },
                    p1,
                    p2,
                )?;
            }
            (Res::Out(_), Res::In { parent, name, .. }) => {
                let p = Some(self.join(parent, &name));
                self.unsupported(call, task, "hard link into the recorded directory to a file outside it: its contents are unknown", p);
            }
            (_, Res::Out(_)) => {}
            (s, d) => {
                return Err(
                    format!("link from {s:?} to {d:?} does not fit the recorded state").into(),
                )
            }
        }
        Ok(())
    }
}

/// intactfs's IGNORE_FSYNC stream flag (crates/intactfs-fuse/src/control.rs).
const STREAM_IGNORE_FSYNC: u32 = 1;

/// strace prints intactfs's STREAMSYNC, `_IO(0xCC, 3)`, as `_IOC(_IOC_NONE, 0xcc, 0x3, 0)`.
fn is_streamsync(req: &str) -> bool {
    let r: String = req.chars().filter(|c| !c.is_whitespace()).collect();
    r.eq_ignore_ascii_case("_IOC(_IOC_NONE,0xcc,0x3,0)")
}

/// The line every JVM prints when it picks up the JAVA_TOOL_OPTIONS the recorder sets to
/// load the shim (intact_trace::tracer): intact's doing, not the workload's output.
fn is_jvm_notice_of_the_shim(bytes: &[u8]) -> bool {
    const NOTICE: &[u8] = b"Picked up JAVA_TOOL_OPTIONS: -agentpath:";
    let Some(rest) = bytes.strip_prefix(NOTICE) else {
        return false;
    };
    let line = rest.split(|&b| b == b'\n').next().unwrap_or(rest);
    bytes.ends_with(b"\n")
        && bytes.len() == NOTICE.len() + line.len() + 1
        && line
            .split(|&b| b == b' ')
            .next()
            .is_some_and(|path| path.ends_with(b"/libintact_preload.so"))
}

#[cfg(test)]
mod stream_tests {
    #[test]
    fn streamsync_is_recognised_as_strace_prints_it() {
        assert!(super::is_streamsync("_IOC(_IOC_NONE, 0xcc, 0x3, 0)"));
        assert!(!super::is_streamsync("_IOC(_IOC_WRITE, 0xcc, 0x1, 0x10)"));
        assert!(!super::is_streamsync("FIOCLEX"));
    }
}

#[cfg(test)]
mod jvm_notice_tests {
    use super::is_jvm_notice_of_the_shim as notice;

    #[test]
    fn only_the_recorder_s_own_notice_is_dropped() {
        assert!(notice(
            b"Picked up JAVA_TOOL_OPTIONS: -agentpath:/tmp/intact-shim-x/libintact_preload.so\n"
        ));
        assert!(notice(
            b"Picked up JAVA_TOOL_OPTIONS: -agentpath:/t/libintact_preload.so -Xmx1g\n"
        ));
        // The workload's own options alone, another agent, or more output in the same write.
        assert!(!notice(b"Picked up JAVA_TOOL_OPTIONS: -Xmx1g\n"));
        assert!(!notice(
            b"Picked up JAVA_TOOL_OPTIONS: -agentpath:/x/libother.so\n"
        ));
        assert!(!notice(
            b"Picked up JAVA_TOOL_OPTIONS: -agentpath:/t/libintact_preload.so\nsaved\n"
        ));
        assert!(!notice(b"saved\n"));
    }
}
