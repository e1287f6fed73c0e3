//! Applying an APM to a workload's logical operations: the micro-operations (thesis Table
//! 3.3), the atomic units they group into, and the ordering closure between units.

use crate::preds::Preds;
use crate::spec::{Apm, Class, Rule, When};
use fixedbitset::FixedBitSet;
use intact_model::op::{Data, LogicalOp, Op, SyncKind};
use intact_model::state::{InodeId, Node, State};
use std::collections::HashMap;
use std::ops::Range;

/// One micro-operation's effect on the logical entities.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Micro {
    /// change_file_size: growth exposes whatever the blocks held (garbage).
    SetSize {
        inode: InodeId,
        size: u64,
    },
    /// write(data) or write(zeros) at `offset`; bytes beyond the file's size stay invisible.
    Write {
        inode: InodeId,
        offset: u64,
        data: Data,
    },
    CreateEntry {
        dir: InodeId,
        name: String,
        inode: InodeId,
    },
    /// Removes `dir/name` if it still names `inode`.
    DeleteEntry {
        dir: InodeId,
        name: String,
        inode: InodeId,
    },
    /// Blocks of `inode` below `size` that no persisted write covers read as zeros (not
    /// garbage): the size change after it in the same unit is a shrinking truncate that
    /// may persist before earlier appended data (`truncate_before_data`), whose range then
    /// has no blocks. Bytes already written (in this state or the initial one) stay.
    ZeroFill {
        inode: InodeId,
        size: u64,
    },
    /// A sync point: no effect on the state, only on ordering.
    Sync {
        inode: Option<InodeId>,
    },
    Output {
        data: Data,
    },
    /// Marks a call whose operation changes nothing (e.g. a rename between two names of
    /// one inode): keeps the call visible to exploration.
    Nop,
}

/// A micro-operation with what the ordering rules and the report need to know about it.
#[derive(Clone, Debug)]
pub struct MicroOp {
    pub micro: Micro,
    /// The logical operation (op id) and system call it came from.
    pub op: usize,
    pub call: usize,
    classes: u16,
    /// Inode acted on (a directory for entry operations); None for output and global syncs.
    pub entity: Option<InodeId>,
    /// Byte range written, for same-bytes ordering.
    pub range: Option<(u64, u64)>,
    /// For entry operations of a rename: the renamed inode.
    pub renamed: Option<InodeId>,
    /// For entry operations of a rename: it replaces an existing name (or exchanges two).
    pub replacing: bool,
    /// The intactfs stream of the operation it came from.
    pub stream: u64,
    /// A sync of one stream (intactfs STREAMSYNC), not of the whole file system: under
    /// `related` it relates only to what its stream relates to.
    pub stream_scoped: bool,
    /// For entry operations: the inode the entry names.
    pub names: Option<InodeId>,
    /// For syncs of a file: the file and its ancestor directories at the time.
    pub path: Vec<InodeId>,
    /// Content atomicity does not put this write before later size changes: an append's
    /// data that may trail its size (`zeros_before_data`).
    trails_size: bool,
    /// Part of a shrinking truncate that may persist before earlier data
    /// (`truncate_before_data`): it waits for no earlier data, later size changes of the
    /// file wait for it (one inode's metadata updates commit in order).
    early_shrink: bool,
    /// How many early shrinks of the same file precede this micro-op: content atomicity
    /// orders a size change only after writes of the same epoch (a persisted early
    /// shrink leaves the earlier range as zeros, whatever came before it).
    shrink_epoch: u32,
    /// The zeroed tail of a truncate's last block (`truncate_zeroes_tail`): it follows
    /// earlier writes of its bytes except zeros, with which it commutes (a growing
    /// truncate's zero fill is in the same page, and persisting with it must not drag in
    /// that truncate's size).
    tail_zeros: bool,
}

impl MicroOp {
    /// Class membership. `any` is every disk operation: output is not one, so the file
    /// system cannot hold it back; only rules naming `output` order things before it.
    pub fn is(&self, c: Class) -> bool {
        if c == Class::Any {
            return !matches!(self.micro, Micro::Output { .. });
        }
        self.classes & (1 << c as u16) != 0
    }
    fn any_of(&self, cs: &[Class]) -> bool {
        cs.iter().any(|c| self.is(*c))
    }
    /// Whether this micro-op changes the state (syncs do not).
    pub fn has_effect(&self) -> bool {
        !matches!(self.micro, Micro::Sync { .. } | Micro::Nop)
    }
}

/// A system call's share of the program.
#[derive(Clone, Debug)]
pub struct CallGroup {
    /// Index of the system-call event (Op::call).
    pub call: usize,
    pub ops: Range<usize>,
    pub units: Range<usize>,
    pub micros: Range<usize>,
}

/// Micro-operations, units and the ordering closure of one workload under one APM.
#[derive(Clone, Debug)]
pub struct Program {
    pub apm: String,
    pub micros: Vec<MicroOp>,
    /// Atomic units: contiguous micro-op ranges that persist as a whole.
    pub units: Vec<Range<usize>>,
    pub unit_of: Vec<u32>,
    /// `preds[u]`: every unit that must be on disk if u is (transitively closed).
    pub preds: Vec<Preds>,
    pub calls: Vec<CallGroup>,
    /// For each op id: the micro-op range it produced.
    pub op_micros: Vec<Range<usize>>,
    /// Representation piece size for data operations, and whether the APM allows finer
    /// splits than a piece (byte granularity: the alice strategy splits pieces further).
    pub piece: u64,
    pub divisible: bool,
    pub append_zeros: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    #[error("operation {op} ({name}): {msg}")]
    Op {
        op: usize,
        name: &'static str,
        msg: String,
    },
}

const fn bit(c: Class) -> u16 {
    1 << c as u16
}

/// Splits `[lo, hi)` at multiples of `g`.
pub fn pieces(lo: u64, hi: u64, g: u64) -> Vec<(u64, u64)> {
    assert!(g > 0, "a granularity of 0 bytes");
    let g = coarse_granularity(hi.saturating_sub(lo), g);
    let mut out = Vec::new();
    let mut a = lo;
    while a < hi {
        let b = ((a / g) + 1).saturating_mul(g).min(hi);
        out.push((a, b));
        a = b;
    }
    out
}

/// Ranges up to this size are split at the APM's granularity, as the thesis does.
pub const FINE_SPAN_BYTES: u64 = 64 << 20;
/// Larger ranges (a truncate to 1 TiB, a zeroing fallocate of a large file) are split in
/// at most this many pieces, at a multiple of the granularity: their micro-operations and
/// crash states stay bounded, and a partly persisted size change is still among them.
pub const MAX_COARSE_PIECES: u64 = 64;

fn coarse_granularity(span: u64, g: u64) -> u64 {
    if span <= FINE_SPAN_BYTES {
        return g;
    }
    // span / G <= MAX - 2 leaves room for the partial pieces at both ends.
    let coarse = g.saturating_mul((span / g).div_ceil(MAX_COARSE_PIECES - 2).max(1));
    assert!(coarse >= g && (coarse.is_multiple_of(g) || coarse == u64::MAX));
    coarse
}

struct Builder<'a> {
    apm: &'a Apm,
    piece: u64,
    micros: Vec<MicroOp>,
    /// tie[i]: micro i belongs to the same unit as micro i-1.
    tie: Vec<bool>,
    sizes: HashMap<InodeId, u64>,
    /// Early shrinks so far per file (`MicroOp::shrink_epoch`).
    shrink_epochs: HashMap<InodeId, u32>,
    meta: State,
}

impl Builder<'_> {
    fn push(&mut self, o: &Op, micro: Micro, classes: u16, tie_prev: bool) -> &mut MicroOp {
        let entity = match &micro {
            Micro::SetSize { inode, .. }
            | Micro::Write { inode, .. }
            | Micro::ZeroFill { inode, .. } => Some(*inode),
            Micro::CreateEntry { dir, .. } | Micro::DeleteEntry { dir, .. } => Some(*dir),
            Micro::Sync { inode } => *inode,
            Micro::Output { .. } | Micro::Nop => None,
        };
        let range = match &micro {
            Micro::Write { offset, data, .. } => Some((*offset, offset + data.len())),
            _ => None,
        };
        let names = match &micro {
            Micro::CreateEntry { inode, .. } | Micro::DeleteEntry { inode, .. } => Some(*inode),
            _ => None,
        };
        let shrink_epoch = entity
            .and_then(|i| self.shrink_epochs.get(&i).copied())
            .unwrap_or(0);
        self.tie.push(tie_prev);
        self.micros.push(MicroOp {
            micro,
            op: o.id,
            call: o.call,
            classes,
            entity,
            range,
            renamed: None,
            replacing: false,
            stream: o.stream,
            stream_scoped: false,
            names,
            path: Vec::new(),
            trails_size: false,
            early_shrink: false,
            shrink_epoch,
            tail_zeros: false,
        });
        self.micros.last_mut().unwrap()
    }

    /// Data growth from `old` to `new` in pieces: size change, [zeros], [data].
    /// With `zeros_before_data` the size and zeros of a piece are one unit and its data
    /// another: the data may persist later, never earlier (same bytes, program order).
    fn grow(&mut self, o: &Op, inode: InodeId, old: u64, new: u64, data: Option<Data>, class: u16) {
        let ca = self.apm.atomicity.content;
        let zeros_first = ca && self.apm.atomicity.zeros_before_data;
        for (a, b) in pieces(old, new, self.piece) {
            self.push(
                o,
                Micro::SetSize { inode, size: b },
                class | bit(Class::Size) | bit(Class::Data),
                false,
            );
            if self.apm.atomicity.append_zeros || data.is_none() || zeros_first {
                self.push(
                    o,
                    Micro::Write {
                        inode,
                        offset: a,
                        data: Data::Zeros { zeros: b - a },
                    },
                    class | bit(Class::Write) | bit(Class::Data),
                    ca,
                );
            }
            if let Some(d) = data {
                let m = self.push(
                    o,
                    Micro::Write {
                        inode,
                        offset: a,
                        data: d.slice(a - old, b - a),
                    },
                    class | bit(Class::Write) | bit(Class::Data),
                    ca && !zeros_first,
                );
                m.trails_size = zeros_first;
            }
        }
    }

    /// Shrinking from `old` to `new`: one size change per piece boundary, largest first.
    /// (Inside a directory operation, directory-op atomicity ties them to it: see `build`.)
    fn shrink(&mut self, o: &Op, inode: InodeId, old: u64, new: u64) {
        assert!(new < old, "a shrink from {old} to {new} bytes");
        // Only truncate(2): a last link's truncation comes after its removal regardless.
        let truncate = matches!(o.op, LogicalOp::Truncate { .. });
        if truncate && self.apm.atomicity.truncate_zeroes_tail {
            self.zero_tail(o, inode, old, new);
        }
        if truncate && self.apm.atomicity.content && self.apm.atomicity.truncate_before_data {
            return self.early_shrink(o, inode, new);
        }
        // With content atomicity the size shrinks in one metadata update (thesis §3.2:
        // ext3-j makes truncates atomic); otherwise piece by piece.
        let mut bounds: Vec<u64> = if self.apm.atomicity.content {
            vec![new]
        } else {
            pieces(new, old, self.piece)
                .iter()
                .map(|(a, _)| *a)
                .collect()
        };
        if !self.apm.atomicity.content {
            bounds.reverse();
        }
        for size in bounds {
            self.push(
                o,
                Micro::SetSize { inode, size },
                bit(Class::Truncate) | bit(Class::Size) | bit(Class::Data),
                false,
            );
        }
    }

    /// `truncate_zeroes_tail`: the rest of the block the new size ends in, up to the old
    /// size, becomes zeros in a unit of its own that may persist before the size change.
    fn zero_tail(&mut self, o: &Op, inode: InodeId, old: u64, new: u64) {
        let end = new.div_ceil(self.piece).saturating_mul(self.piece).min(old);
        if end <= new {
            return; // the new size is on a block boundary: nothing to zero
        }
        assert!(end - new < self.piece, "a tail inside one block");
        let m = self.push(
            o,
            Micro::Write {
                inode,
                offset: new,
                data: Data::Zeros { zeros: end - new },
            },
            bit(Class::Truncate) | bit(Class::Write) | bit(Class::Data),
            false,
        );
        m.tail_zeros = true;
    }

    /// `truncate_before_data`: one unit of zero fill and size change, in a new epoch.
    fn early_shrink(&mut self, o: &Op, inode: InodeId, new: u64) {
        let epoch = self.shrink_epochs.entry(inode).or_insert(0);
        *epoch += 1;
        let cls = bit(Class::Truncate) | bit(Class::Data);
        let m = self.push(o, Micro::ZeroFill { inode, size: new }, cls, false);
        m.early_shrink = true;
        let m = self.push(
            o,
            Micro::SetSize { inode, size: new },
            cls | bit(Class::Size),
            true,
        );
        m.early_shrink = true;
    }

    fn file_size(&self, inode: InodeId) -> u64 {
        self.sizes.get(&inode).copied().unwrap_or(0)
    }

    /// Entry removal plus, for the last link of a non-empty file, its truncation.
    fn unlink_entry(
        &mut self,
        o: &Op,
        dir: InodeId,
        name: &str,
        inode: InodeId,
        last: bool,
        renamed: Option<InodeId>,
    ) {
        // A replaced rename destination belongs to the rename.
        let cls = if renamed.is_some() {
            bit(Class::Dir) | bit(Class::Rename)
        } else {
            bit(Class::Dir)
        };
        let m = self.push(
            o,
            Micro::DeleteEntry {
                dir,
                name: name.to_string(),
                inode,
            },
            cls,
            false,
        );
        m.renamed = renamed;
        m.replacing = renamed.is_some();
        let is_file = matches!(
            self.meta.inodes.get(&inode).map(|i| &i.node),
            Some(Node::File { .. })
        );
        let size = self.file_size(inode);
        if last && is_file && size > 0 {
            self.shrink(o, inode, size, 0);
            self.sizes.insert(inode, 0);
        }
    }

    fn op(&mut self, o: &Op, blob_len: u64) -> Result<(), ProgramError> {
        let err = |msg: String| ProgramError::Op {
            op: o.id,
            name: o.op.name(),
            msg,
        };
        let start = self.micros.len();
        let dirop = bit(Class::Dir);
        match &o.op {
            LogicalOp::Overwrite {
                inode,
                offset,
                count,
                data,
            } => {
                if let Data::Bytes { at, len } = data {
                    if at + len > blob_len {
                        return Err(err("data reference past the end of data.bin".into()));
                    }
                }
                for (a, b) in pieces(*offset, offset.saturating_add(*count), self.piece) {
                    self.push(
                        o,
                        Micro::Write {
                            inode: *inode,
                            offset: a,
                            data: data.slice(a - offset, b - a),
                        },
                        bit(Class::Overwrite) | bit(Class::Write) | bit(Class::Data),
                        false,
                    );
                }
            }
            LogicalOp::Append {
                inode,
                old_size,
                new_size,
                data,
            } => {
                if new_size < old_size || data.len() != new_size - old_size {
                    return Err(err(format!(
                        "inconsistent sizes {old_size} -> {new_size} for {} bytes",
                        data.len()
                    )));
                }
                self.grow(
                    o,
                    *inode,
                    *old_size,
                    *new_size,
                    Some(*data),
                    bit(Class::Append),
                );
                self.sizes.insert(*inode, *new_size);
            }
            LogicalOp::Truncate {
                inode,
                old_size,
                new_size,
            } => {
                if new_size > old_size {
                    self.grow(o, *inode, *old_size, *new_size, None, bit(Class::Truncate));
                } else if new_size < old_size {
                    self.shrink(o, *inode, *old_size, *new_size);
                } else {
                    // Same size: a no-op, kept as a size change so the call still exists.
                    self.push(
                        o,
                        Micro::SetSize {
                            inode: *inode,
                            size: *new_size,
                        },
                        bit(Class::Truncate) | bit(Class::Size) | bit(Class::Data),
                        false,
                    );
                }
                self.sizes.insert(*inode, *new_size);
            }
            LogicalOp::Link {
                dir, name, inode, ..
            } => {
                self.push(
                    o,
                    Micro::CreateEntry {
                        dir: *dir,
                        name: name.clone(),
                        inode: *inode,
                    },
                    dirop,
                    false,
                );
            }
            LogicalOp::Unlink {
                dir,
                name,
                inode,
                link_count,
            } => {
                self.unlink_entry(o, *dir, name, *inode, *link_count == 0, None);
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
                let cls = dirop | bit(Class::Rename);
                if *exchange {
                    let other = replaced
                        .ok_or_else(|| err("exchange without a destination inode".into()))?;
                    let m = self.push(
                        o,
                        Micro::CreateEntry {
                            dir: *dst_dir,
                            name: dst_name.clone(),
                            inode: *inode,
                        },
                        cls,
                        false,
                    );
                    m.renamed = Some(*inode);
                    m.replacing = true;
                    let m = self.push(
                        o,
                        Micro::CreateEntry {
                            dir: *src_dir,
                            name: src_name.clone(),
                            inode: other,
                        },
                        cls,
                        false,
                    );
                    m.renamed = Some(other);
                    m.replacing = true;
                } else {
                    if let Some(old) = replaced {
                        if old != inode {
                            let last = self
                                .meta
                                .inodes
                                .get(old)
                                .map(|i| i.nlink <= 1)
                                .unwrap_or(true);
                            self.unlink_entry(o, *dst_dir, dst_name, *old, last, Some(*inode));
                        }
                    }
                    if replaced != &Some(*inode) {
                        let replacing = replaced.is_some();
                        let m = self.push(
                            o,
                            Micro::CreateEntry {
                                dir: *dst_dir,
                                name: dst_name.clone(),
                                inode: *inode,
                            },
                            cls,
                            false,
                        );
                        m.renamed = Some(*inode);
                        m.replacing = replacing;
                        let m = self.push(
                            o,
                            Micro::DeleteEntry {
                                dir: *src_dir,
                                name: src_name.clone(),
                                inode: *inode,
                            },
                            cls,
                            false,
                        );
                        m.renamed = Some(*inode);
                        m.replacing = replacing;
                    }
                    // else: rename between two names of one inode changes nothing (POSIX).
                }
            }
            LogicalOp::Mkdir { dir, name, inode }
            | LogicalOp::Symlink {
                dir, name, inode, ..
            } => {
                self.push(
                    o,
                    Micro::CreateEntry {
                        dir: *dir,
                        name: name.clone(),
                        inode: *inode,
                    },
                    dirop,
                    false,
                );
            }
            LogicalOp::Rmdir { dir, name, inode } => {
                self.push(
                    o,
                    Micro::DeleteEntry {
                        dir: *dir,
                        name: name.clone(),
                        inode: *inode,
                    },
                    dirop,
                    false,
                );
            }
            // sync_file_range only starts (or waits for) writeback of data pages: no
            // metadata, no device cache flush, "no guarantee that the data will be available
            // after a crash" (sync_file_range(2)). It orders and persists nothing.
            LogicalOp::Sync {
                how: SyncKind::SyncFileRange,
                ..
            } => {
                self.push(o, Micro::Nop, 0, false);
            }
            LogicalOp::Sync { inode, how, .. } => {
                let path = match inode {
                    Some(i) => ancestry(&self.meta, *i),
                    None => Vec::new(),
                };
                // A sync of one file (or directory) is also `fsync`; sync(2), syncfs and
                // STREAMSYNC are not (intactfs keeps them durable when fsync is an osync).
                let file_sync = matches!(
                    how,
                    SyncKind::Fsync
                        | SyncKind::Fdatasync
                        | SyncKind::Msync
                        | SyncKind::OSync
                        | SyncKind::ODsync
                );
                let classes = if file_sync {
                    bit(Class::Sync) | bit(Class::Fsync)
                } else {
                    bit(Class::Sync)
                };
                let m = self.push(o, Micro::Sync { inode: *inode }, classes, false);
                m.path = path;
                m.stream_scoped = *how == SyncKind::StreamSync;
            }
            LogicalOp::Output { data } => {
                self.push(o, Micro::Output { data: *data }, bit(Class::Output), false);
            }
        }
        if self.micros.len() == start {
            // Zero-length data operations still mark the call (e.g. write of 0 bytes).
            self.push(o, Micro::Nop, 0, false);
        }
        // Keep the namespace current for file-path rules and last-link decisions.
        if o.op.is_namespace() {
            self.meta
                .apply(&o.op, &[])
                .map_err(|e| err(format!("does not fit the recorded namespace: {e}")))?;
        }
        Ok(())
    }
}

/// A file (or directory) and every directory above it, at the current state.
fn ancestry(s: &State, inode: InodeId) -> Vec<InodeId> {
    let mut out = vec![inode];
    let mut dirs: Vec<InodeId> = if s.inodes.get(&inode).map(|i| i.is_dir()).unwrap_or(false) {
        s.parent_of(inode).into_iter().collect()
    } else {
        s.inodes
            .values()
            .filter(|i| matches!(&i.node, Node::Dir { entries, .. } if entries.values().any(|v| *v == inode)))
            .map(|i| i.id)
            .collect()
    };
    while let Some(d) = dirs.pop() {
        if out.contains(&d) {
            continue;
        }
        out.push(d);
        if let Some(p) = s.parent_of(d) {
            if p != d {
                dirs.push(p);
            }
        }
    }
    out
}

fn rule_matches(r: &Rule, a: &MicroOp, b: &MicroOp) -> bool {
    if !a.any_of(&r.before)
        || a.any_of(&r.before_except)
        || !b.any_of(&r.after)
        || b.any_of(&r.after_except)
    {
        return false;
    }
    match r.when {
        When::Always => true,
        When::SameInode => match (a.entity, b.entity) {
            (Some(x), Some(y)) => x == y,
            // A global sync (or a global barrier) relates to everything.
            (_, None) => matches!(b.micro, Micro::Sync { inode: None }),
            (None, _) => matches!(a.micro, Micro::Sync { inode: None }),
        },
        When::SameBytes => same_bytes(a, b),
        When::RenamedFile => b.renamed.is_some() && a.entity == b.renamed,
        When::ReplacingRename => b.replacing && b.renamed.is_some() && a.entity == b.renamed,
        When::SameStream => a.stream == b.stream,
        When::Related => related(a, b),
        When::FilePath => match b.micro {
            Micro::Sync { inode: Some(_) } => a.names.map(|n| b.path.contains(&n)).unwrap_or(false),
            Micro::Sync { inode: None } => a.names.is_some(),
            _ => false,
        },
    }
}

/// Operations related in ccfs's sense (`000` §3.5), which intactfs orders even across
/// streams: on the same file; on the same directory entry (directory and name); a
/// directory entry and the inode it names (its creation, its data); a directory and the
/// entries inside it; a global sync and everything.
fn related(a: &MicroOp, b: &MicroOp) -> bool {
    fn entry(m: &MicroOp) -> Option<(InodeId, &str, InodeId)> {
        match &m.micro {
            Micro::CreateEntry { dir, name, inode } | Micro::DeleteEntry { dir, name, inode } => {
                Some((*dir, name.as_str(), *inode))
            }
            _ => None,
        }
    }
    let global = |m: &MicroOp| matches!(m.micro, Micro::Sync { inode: None }) && !m.stream_scoped;
    if global(a) || global(b) {
        return true;
    }
    match (entry(a), entry(b)) {
        (Some((da, na, ia)), Some((db, nb, ib))) => {
            (da == db && na == nb) || ia == ib || ia == db || ib == da
        }
        (Some((da, _, ia)), None) => b.entity.is_some_and(|e| e == ia || e == da),
        (None, Some((db, _, ib))) => a.entity.is_some_and(|e| e == ib || e == db),
        (None, None) => a.entity.is_some() && a.entity == b.entity,
    }
}

fn same_bytes(a: &MicroOp, b: &MicroOp) -> bool {
    match (a.range, b.range) {
        (Some((a0, a1)), Some((b0, b1))) => a.entity == b.entity && a0 < b1 && b0 < a1,
        _ => false,
    }
}

/// The rules every APM obeys (thesis Table 3.4(b), Table 3.5 caption): writes to the same
/// bytes persist in order (a truncate's zeroed tail not after earlier zeros: they commute),
/// and output precedes everything after it. Also: when an unlink or
/// a rename removes a file's last link, the file's truncation persists after the removal
/// (Table 3.3 lists it after the entry deletion; no file system frees the data of a file
/// that is still linked — found by the study: a linked but emptied SQLite journal or git
/// ref was a state no real crash leaves).
fn mandatory(a: &MicroOp, b: &MicroOp) -> bool {
    let zeros = |m: &MicroOp| {
        matches!(
            m.micro,
            Micro::Write {
                data: Data::Zeros { .. },
                ..
            }
        )
    };
    matches!(a.micro, Micro::Output { .. })
        || (same_bytes(a, b) && !(b.tail_zeros && zeros(a)))
        || matches!((&a.micro, &b.micro), (Micro::DeleteEntry { inode, .. }, Micro::SetSize { inode: freed, .. }) if inode == freed && a.op == b.op)
}

/// Content atomicity means no garbage is ever visible: a size change persists only after
/// the earlier writes of the bytes it exposes (what ordered and journaled modes do). The
/// two refinements: data that may trail its size (zeros_before_data) is not waited for,
/// only its zeros; an early shrink waits for no earlier data (truncate_before_data) and
/// every later size change of the file waits for it.
fn content_order(a: &MicroOp, b: &MicroOp) -> bool {
    let Micro::SetSize { inode, size } = &b.micro else {
        return false;
    };
    if a.entity != Some(*inode) {
        return false;
    }
    if a.early_shrink {
        return true;
    }
    if a.trails_size || b.early_shrink || a.shrink_epoch != b.shrink_epoch {
        return false;
    }
    match a.range {
        Some((start, _)) => start < *size && (a.is(Class::Append) || a.is(Class::Truncate)),
        None => false,
    }
}

impl Program {
    /// Translates `ops` (applied to `initial`) under `apm`.
    pub fn build(
        apm: &Apm,
        ops: &[Op],
        initial: &State,
        blob_len: u64,
    ) -> Result<Program, ProgramError> {
        let g = apm.atomicity.granularity;
        let divisible = g < 512;
        let piece = if divisible { 4096 } else { g };
        let mut sizes = HashMap::new();
        for (id, ino) in &initial.inodes {
            if let Node::File { data } = &ino.node {
                sizes.insert(*id, data.len());
            }
        }
        let mut b = Builder {
            apm,
            piece,
            micros: Vec::new(),
            tie: Vec::new(),
            sizes,
            shrink_epochs: HashMap::new(),
            meta: initial.clone(),
        };
        let mut op_micros = Vec::with_capacity(ops.len());
        let mut prev_call = None;
        for o in ops {
            let start = b.micros.len();
            b.op(o, blob_len)?;
            if apm.atomicity.calls && prev_call == Some(o.call) {
                b.tie[start] = true;
            }
            if apm.atomicity.directory_ops && o.op.is_namespace() {
                for t in &mut b.tie[start + 1..] {
                    *t = true;
                }
            }
            if apm.atomicity.calls {
                for t in &mut b.tie[start + 1..] {
                    *t = true;
                }
            }
            prev_call = Some(o.call);
            op_micros.push(start..b.micros.len());
        }
        let Builder { micros, tie, .. } = b;
        // Units from ties.
        let mut units: Vec<Range<usize>> = Vec::new();
        let mut unit_of = vec![0u32; micros.len()];
        for i in 0..micros.len() {
            if i == 0 || !tie[i] {
                units.push(i..i + 1);
            } else {
                units.last_mut().unwrap().end = i + 1;
            }
            unit_of[i] = (units.len() - 1) as u32;
        }
        let nu = units.len();
        // preds[v] holds only units before v, as its longest run and the bits around it
        // (`Preds`): at 100,000 appends (301,002 units) bit sets v bits wide took 5.7 GB.
        // `set` is the one scratch set the closure is built in.
        let mut preds: Vec<Preds> = Vec::with_capacity(nu);
        let mut set = FixedBitSet::with_capacity(nu);
        for (v, vr) in units.iter().enumerate() {
            set.clear();
            // Runs of units known to be in `set` (predecessors' own runs, a few): the
            // downward walk jumps over them, as each of their units would be skipped as
            // implied.
            let mut runs: Vec<(usize, usize)> = Vec::new();
            let mut next = v.checked_sub(1);
            while let Some(u) = next {
                next = u.checked_sub(1);
                if let Some(&(lo, _)) = runs.iter().find(|&&(lo, hi)| lo <= u && u < hi) {
                    next = lo.checked_sub(1);
                    continue;
                }
                if set.contains(u) {
                    continue; // already implied, with its own predecessors
                }
                let ca = apm.atomicity.content;
                let related = units[u].clone().any(|i| {
                    vr.clone().any(|j| {
                        mandatory(&micros[i], &micros[j])
                            || (ca && content_order(&micros[i], &micros[j]))
                            || apm
                                .order
                                .iter()
                                .any(|r| rule_matches(r, &micros[i], &micros[j]))
                    })
                });
                if related {
                    set.insert(u);
                    preds[u].add_to(&mut set);
                    let (lo, hi) = preds[u].run();
                    if hi - lo > 64 && runs.len() < 8 {
                        runs.push((lo, hi));
                    }
                }
            }
            assert!(
                set.maximum().is_none_or(|m| m < v),
                "unit {v} has a predecessor at or after itself"
            );
            preds.push(Preds::from_bits(&set));
        }
        // Call groups.
        let mut calls: Vec<CallGroup> = Vec::new();
        for (id, o) in ops.iter().enumerate() {
            let mr = op_micros[id].clone();
            match calls.last_mut() {
                Some(c) if c.call == o.call => {
                    c.ops.end = id + 1;
                    c.micros.end = mr.end;
                }
                _ => calls.push(CallGroup {
                    call: o.call,
                    ops: id..id + 1,
                    units: 0..0,
                    micros: mr,
                }),
            }
        }
        for c in &mut calls {
            if c.micros.is_empty() {
                continue;
            }
            let u0 = unit_of[c.micros.start] as usize;
            let u1 = unit_of[c.micros.end - 1] as usize + 1;
            c.units = u0..u1;
        }
        Ok(Program {
            apm: apm.name.clone(),
            micros,
            units,
            unit_of,
            preds,
            calls,
            op_micros,
            piece,
            divisible,
            append_zeros: apm.atomicity.append_zeros,
        })
    }

    /// Whether some unit of call `g` must follow a unit in `removed`: dropping `removed`
    /// drops the whole call (the reordering phase and its report walk calls this way).
    pub fn call_follows(&self, g: usize, removed: &FixedBitSet) -> bool {
        self.calls[g]
            .units
            .clone()
            .any(|u| !self.preds[u].is_disjoint(removed))
    }

    /// Whether a set of units is closed under the ordering constraints.
    pub fn closed(&self, set: &FixedBitSet) -> bool {
        set.ones().all(|u| self.preds[u].is_subset(set))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use intact_model::op::Data;

    fn op(id: usize, op: LogicalOp) -> Op {
        Op {
            id,
            call: id,
            pid: 1,
            tid: 1,
            syscall: "x".into(),
            op,
            path: None,
            path2: None,
            stack: vec![],
            loc: None,
            stream: 0,
        }
    }

    fn protocol() -> (Vec<Op>, State) {
        let ops = vec![
            op(
                0,
                LogicalOp::Link {
                    dir: 1,
                    name: "f".into(),
                    inode: 2,
                    link_count: 1,
                    created: true,
                },
            ),
            op(
                1,
                LogicalOp::Append {
                    inode: 2,
                    old_size: 0,
                    new_size: 8192,
                    data: Data::Zeros { zeros: 8192 },
                },
            ),
            op(
                2,
                LogicalOp::Truncate {
                    inode: 2,
                    old_size: 8192,
                    new_size: 0,
                },
            ),
        ];
        (ops, State::empty())
    }

    /// Content atomicity: the second block's size change cannot persist before the first
    /// block's data (no garbage below the size); a shrink is one size change.
    #[test]
    fn content_atomicity_orders_pieces_and_keeps_truncates_whole() {
        let (ops, s) = protocol();
        let p = Program::build(&Apm::resolve("ext4-o").unwrap(), &ops, &s, 0).unwrap();
        let r = p.op_micros[1].clone();
        let (u1, u2) = (p.unit_of[r.start] as usize, p.unit_of[r.end - 1] as usize);
        assert_ne!(u1, u2, "two 4 KiB pieces, two units");
        assert!(
            p.preds[u2].contains(u1),
            "piece 2 requires piece 1 under content atomicity"
        );
        assert_eq!(
            p.op_micros[2].len(),
            1,
            "a shrinking truncate is one size change"
        );
        let d = Program::build(&Apm::resolve("default").unwrap(), &ops, &s, 0).unwrap();
        let r = d.op_micros[1].clone();
        // Per piece: size change, zeros, data. Piece 2's size change needs nothing of piece 1.
        let size2 = d.unit_of[r.start + 3] as usize;
        assert!(matches!(
            d.micros[r.start + 3].micro,
            Micro::SetSize { size: 8192, .. }
        ));
        assert!(
            (r.start..r.start + 3).all(|i| !d.preds[size2].contains(d.unit_of[i] as usize)),
            "default: pieces unordered"
        );
        assert_eq!(d.op_micros[2].len(), 2, "default: shrink piece by piece");
    }

    /// intactfs streams: a stream's updates persist in order, unrelated updates of another
    /// stream do not wait for them, related ones (the same file) do; a STREAMSYNC makes its
    /// own stream durable before the output after it, not the other stream.
    #[test]
    fn intactfs_orders_within_a_stream_and_related_updates_across() {
        let mut ops = vec![
            op(
                0,
                LogicalOp::Link {
                    dir: 1,
                    name: "a".into(),
                    inode: 2,
                    link_count: 1,
                    created: true,
                },
            ),
            op(
                1,
                LogicalOp::Append {
                    inode: 2,
                    old_size: 0,
                    new_size: 10,
                    data: Data::Zeros { zeros: 10 },
                },
            ),
            op(
                2,
                LogicalOp::Link {
                    dir: 1,
                    name: "b".into(),
                    inode: 3,
                    link_count: 1,
                    created: true,
                },
            ),
            op(
                3,
                LogicalOp::Append {
                    inode: 3,
                    old_size: 0,
                    new_size: 10,
                    data: Data::Zeros { zeros: 10 },
                },
            ),
            op(
                4,
                LogicalOp::Append {
                    inode: 2,
                    old_size: 10,
                    new_size: 20,
                    data: Data::Zeros { zeros: 10 },
                },
            ),
            op(
                5,
                LogicalOp::Sync {
                    inode: None,
                    how: SyncKind::StreamSync,
                    range: None,
                },
            ),
            op(
                6,
                LogicalOp::Output {
                    data: Data::Zeros { zeros: 1 },
                },
            ),
        ];
        // Stream A: a's creation and first append. Stream B: b, then the second append to a
        // (related to A's updates of a), its streamsync and the output.
        for o in ops.iter_mut() {
            o.stream = if o.id < 2 { 1 } else { 2 };
        }
        let p =
            Program::build(&Apm::resolve("intactfs").unwrap(), &ops, &State::empty(), 0).unwrap();
        let unit = |op: usize| p.unit_of[p.op_micros[op].start] as usize;
        let last = |op: usize| p.unit_of[p.op_micros[op].end - 1] as usize;
        assert!(
            p.preds[unit(3)].contains(unit(2)),
            "within stream B: b's data after b's creation"
        );
        assert!(
            !p.preds[unit(2)].contains(last(1)),
            "b's creation does not wait for stream A's unrelated append"
        );
        assert!(
            p.preds[unit(4)].contains(last(1)),
            "related across streams: a's second append after its first"
        );
        assert!(
            p.preds[unit(6)].contains(unit(5)) && p.preds[unit(5)].contains(last(3)),
            "the streamsync persists stream B before the output"
        );
        // One stream: the same program is totally ordered.
        for o in ops.iter_mut() {
            o.stream = 0;
        }
        let p =
            Program::build(&Apm::resolve("intactfs").unwrap(), &ops, &State::empty(), 0).unwrap();
        let unit = |op: usize| p.unit_of[p.op_micros[op].start] as usize;
        let last = |op: usize| p.unit_of[p.op_micros[op].end - 1] as usize;
        assert!(
            p.preds[unit(2)].contains(last(1)),
            "one stream: program order"
        );
    }

    /// The workload of the next two tests: a, its data, fsync(a), b, its data, a rename of
    /// b over a (one stream), "saved", then sync(2) and "synced".
    fn osync_workload() -> Vec<Op> {
        vec![
            op(
                0,
                LogicalOp::Link {
                    dir: 1,
                    name: "a".into(),
                    inode: 2,
                    link_count: 1,
                    created: true,
                },
            ),
            op(
                1,
                LogicalOp::Append {
                    inode: 2,
                    old_size: 0,
                    new_size: 10,
                    data: Data::Zeros { zeros: 10 },
                },
            ),
            op(
                2,
                LogicalOp::Sync {
                    inode: Some(2),
                    how: SyncKind::Fsync,
                    range: None,
                },
            ),
            op(
                3,
                LogicalOp::Link {
                    dir: 1,
                    name: "b".into(),
                    inode: 3,
                    link_count: 1,
                    created: true,
                },
            ),
            op(
                4,
                LogicalOp::Append {
                    inode: 3,
                    old_size: 0,
                    new_size: 5000,
                    data: Data::Zeros { zeros: 5000 },
                },
            ),
            op(
                5,
                LogicalOp::Rename {
                    src_dir: 1,
                    src_name: "b".into(),
                    dst_dir: 1,
                    dst_name: "a".into(),
                    inode: 3,
                    replaced: Some(2),
                    exchange: false,
                },
            ),
            op(
                6,
                LogicalOp::Output {
                    data: Data::Zeros { zeros: 1 },
                },
            ),
            op(
                7,
                LogicalOp::Sync {
                    inode: None,
                    how: SyncKind::Sync,
                    range: None,
                },
            ),
            op(
                8,
                LogicalOp::Output {
                    data: Data::Zeros { zeros: 1 },
                },
            ),
        ]
    }

    /// intactfs-osync (OptFS osync, `001` §4.4): the disk updates are ordered exactly as
    /// under intactfs (one stream: every unit needs every earlier disk unit, so no crash
    /// state has a later update without an earlier one), but an fsync is no durability
    /// point: the output after it waits for nothing. sync(2) still flushes.
    #[test]
    fn intactfs_osync_orders_like_intactfs_without_fsync_durability() {
        let ops = osync_workload();
        let o = Program::build(
            &Apm::resolve("intactfs-osync").unwrap(),
            &ops,
            &State::empty(),
            0,
        )
        .unwrap();
        let i =
            Program::build(&Apm::resolve("intactfs").unwrap(), &ops, &State::empty(), 0).unwrap();
        assert_eq!(o.units, i.units, "same atomicity as intactfs");
        let is_output = |p: &Program, u: usize| {
            matches!(p.micros[p.units[u].start].micro, Micro::Output { .. })
        };
        for v in 0..o.units.len() {
            if is_output(&o, v) {
                continue;
            }
            let earlier: Vec<usize> = (0..v).filter(|&u| !is_output(&o, u)).collect();
            assert!(
                earlier.iter().all(|&u| o.preds[v].contains(u)),
                "unit {v} ({:?}) without an earlier update",
                o.micros[o.units[v].start].micro
            );
            assert_eq!(o.preds[v], i.preds[v], "unit {v}: the order is intactfs's");
        }
        let unit = |p: &Program, op: usize| p.unit_of[p.op_micros[op].start] as usize;
        let (saved, synced) = (unit(&o, 6), unit(&o, 8));
        assert!(
            o.preds[saved].is_clear(),
            "osync: 'saved' waits for nothing on disk"
        );
        assert!(
            i.preds[saved].contains(unit(&i, 2)) && i.preds[saved].contains(unit(&i, 1)),
            "intactfs: 'saved' waits for fsync(a) and a's data"
        );
        assert!(
            !i.preds[saved].contains(unit(&i, 5)),
            "intactfs: the rename after the fsync is not durable either"
        );
        for before in [0, 1, 2, 3, 4, 5, 7] {
            assert!(
                o.preds[synced].contains(unit(&o, before)),
                "sync(2) still makes op {before} durable before 'synced'"
            );
        }
        // The class: file syncs are `fsync`, sync(2) is not.
        assert!(
            o.micros[o.op_micros[2].start].is(Class::Fsync)
                && !o.micros[o.op_micros[7].start].is(Class::Fsync)
        );
    }

    /// nobarrier (no cache flushes): nothing orders anything. A later update persists
    /// without an earlier synced one, the output waits for no sync, an append's size
    /// persists without its data (garbage) and a rename persists piecemeal. Only the
    /// rules of every APM stay (here: a file's truncation after its last name's removal).
    #[test]
    fn nobarrier_orders_nothing() {
        let ops = osync_workload();
        let p = Program::build(
            &Apm::resolve("nobarrier").unwrap(),
            &ops,
            &State::empty(),
            0,
        )
        .unwrap();
        let unit = |op: usize| p.unit_of[p.op_micros[op].start] as usize;
        let last = |op: usize| p.unit_of[p.op_micros[op].end - 1] as usize;
        assert!(
            !p.preds[unit(3)].contains(last(1)) && !p.preds[unit(3)].contains(unit(2)),
            "b persists without a's synced data and the fsync"
        );
        assert!(
            !p.preds[unit(4)].contains(unit(3)),
            "b's data without b's entry"
        );
        assert!(p.preds[unit(6)].is_clear(), "'saved' waits for nothing");
        assert_eq!(
            p.preds[unit(8)].ones().collect::<Vec<_>>(),
            vec![unit(6)],
            "'synced' waits only for the earlier output, not for sync(2)"
        );
        let r = p.op_micros[4].clone();
        assert_ne!(
            p.unit_of[r.start],
            p.unit_of[r.start + 1],
            "an append's size change and data are separate units"
        );
        let r = p.op_micros[5].clone();
        assert_eq!(
            p.unit_of[r.end - 1] - p.unit_of[r.start] + 1,
            r.len() as u32,
            "every micro-op of the rename is its own unit"
        );
        // Only the mandatory rules: the replaced file's truncation after its entry's
        // removal (and output before what follows it).
        let is_output = |u: usize| matches!(p.micros[p.units[u].start].micro, Micro::Output { .. });
        let ordered: Vec<(usize, usize)> = (0..p.units.len())
            .flat_map(|v| p.preds[v].ones().map(move |u| (u, v)))
            .filter(|&(u, _)| !is_output(u))
            .collect();
        let del = p.op_micros[5]
            .clone()
            .find(|&i| matches!(p.micros[i].micro, Micro::DeleteEntry { inode: 2, .. }))
            .unwrap();
        let trunc = p.op_micros[5]
            .clone()
            .find(|&i| matches!(p.micros[i].micro, Micro::SetSize { inode: 2, size: 0 }))
            .unwrap();
        assert_eq!(
            ordered,
            vec![(p.unit_of[del] as usize, p.unit_of[trunc] as usize)],
            "no order besides the implicit rules"
        );
    }

    /// Safe rename: under ext4-o a file's data precedes every rename of it; under xfs
    /// ("replacing-rename") only a rename over an existing name.
    #[test]
    fn replacing_rename_orders_data_only_before_replacing_renames() {
        let ops = |replaced: Option<InodeId>| {
            let mut v = vec![
                op(
                    0,
                    LogicalOp::Link {
                        dir: 1,
                        name: "old".into(),
                        inode: 3,
                        link_count: 1,
                        created: true,
                    },
                ),
                op(
                    1,
                    LogicalOp::Link {
                        dir: 1,
                        name: "tmp".into(),
                        inode: 2,
                        link_count: 1,
                        created: true,
                    },
                ),
                op(
                    2,
                    LogicalOp::Append {
                        inode: 2,
                        old_size: 0,
                        new_size: 100,
                        data: Data::Zeros { zeros: 100 },
                    },
                ),
            ];
            let dst = if replaced.is_some() { "old" } else { "new" };
            v.push(op(
                3,
                LogicalOp::Rename {
                    src_dir: 1,
                    src_name: "tmp".into(),
                    dst_dir: 1,
                    dst_name: dst.into(),
                    inode: 2,
                    replaced,
                    exchange: false,
                },
            ));
            v
        };
        let data_before_rename = |apm: &str, replaced: Option<InodeId>| {
            let ops = ops(replaced);
            let p = Program::build(&Apm::resolve(apm).unwrap(), &ops, &State::empty(), 0).unwrap();
            let data = p.op_micros[2]
                .clone()
                .find(|&i| matches!(p.micros[i].micro, Micro::Write { .. }))
                .unwrap();
            let create = p.op_micros[3]
                .clone()
                .find(|&i| matches!(p.micros[i].micro, Micro::CreateEntry { .. }))
                .unwrap();
            p.preds[p.unit_of[create] as usize].contains(p.unit_of[data] as usize)
        };
        assert!(data_before_rename("ext4-o", None) && data_before_rename("ext4-o", Some(3)));
        assert!(
            !data_before_rename("xfs", None),
            "xfs: a rename to a new name may persist before the data"
        );
        assert!(
            data_before_rename("xfs", Some(3)),
            "xfs: a replacing rename waits for the data"
        );
    }

    /// Under every APM, even the default one with non-atomic directory operations, the
    /// truncation of an unlinked file's last link persists after the entry's removal.
    #[test]
    fn last_link_truncation_follows_the_entry_removal() {
        let ops = vec![
            op(
                0,
                LogicalOp::Link {
                    dir: 1,
                    name: "j".into(),
                    inode: 2,
                    link_count: 1,
                    created: true,
                },
            ),
            op(
                1,
                LogicalOp::Append {
                    inode: 2,
                    old_size: 0,
                    new_size: 100,
                    data: Data::Zeros { zeros: 100 },
                },
            ),
            op(
                2,
                LogicalOp::Unlink {
                    dir: 1,
                    name: "j".into(),
                    inode: 2,
                    link_count: 0,
                },
            ),
        ];
        for apm in ["default", "btrfs", "ext3-w"] {
            let p = Program::build(&Apm::resolve(apm).unwrap(), &ops, &State::empty(), 0).unwrap();
            let r = p.op_micros[2].clone();
            let del = r
                .clone()
                .find(|&i| matches!(p.micros[i].micro, Micro::DeleteEntry { .. }))
                .expect("entry removal");
            let trunc = r
                .clone()
                .find(|&i| matches!(p.micros[i].micro, Micro::SetSize { size: 0, .. }))
                .expect("truncation");
            let (ud, ut) = (p.unit_of[del] as usize, p.unit_of[trunc] as usize);
            assert!(
                ud == ut || p.preds[ut].contains(ud),
                "{apm}: truncation may persist before the removal"
            );
        }
    }

    /// sync_file_range is not a sync point (PostgreSQL's checkpoint hints used to count as
    /// fsyncs): output after it does not wait for the file's data.
    #[test]
    fn sync_file_range_is_not_a_sync_point() {
        let ops = vec![
            op(
                0,
                LogicalOp::Link {
                    dir: 1,
                    name: "f".into(),
                    inode: 2,
                    link_count: 1,
                    created: true,
                },
            ),
            op(
                1,
                LogicalOp::Append {
                    inode: 2,
                    old_size: 0,
                    new_size: 10,
                    data: Data::Zeros { zeros: 10 },
                },
            ),
            op(
                2,
                LogicalOp::Sync {
                    inode: Some(2),
                    how: SyncKind::SyncFileRange,
                    range: Some((0, 10)),
                },
            ),
            op(
                3,
                LogicalOp::Output {
                    data: Data::Zeros { zeros: 1 },
                },
            ),
        ];
        for name in ["ext3-j", "default", "ext4-o"] {
            let p = Program::build(&Apm::resolve(name).unwrap(), &ops, &State::empty(), 0).unwrap();
            let out = p.unit_of[p.op_micros[3].start] as usize;
            let data = p.unit_of[p.op_micros[1].end - 1] as usize;
            assert!(
                !p.preds[out].contains(data),
                "{name}: output waits for data after sync_file_range"
            );
        }
    }

    /// Output is not a disk operation: "all ordered" does not put disk writes before it,
    /// a completed sync does.
    #[test]
    fn output_is_ordered_only_by_sync() {
        let ops = vec![
            op(
                0,
                LogicalOp::Link {
                    dir: 1,
                    name: "f".into(),
                    inode: 2,
                    link_count: 1,
                    created: true,
                },
            ),
            op(
                1,
                LogicalOp::Output {
                    data: Data::Zeros { zeros: 1 },
                },
            ),
            op(
                2,
                LogicalOp::Sync {
                    inode: Some(2),
                    how: intact_model::op::SyncKind::Fsync,
                    range: None,
                },
            ),
            op(
                3,
                LogicalOp::Output {
                    data: Data::Zeros { zeros: 1 },
                },
            ),
        ];
        for name in ["ext3-j", "strict", "default", "ext4-o"] {
            let p = Program::build(&Apm::resolve(name).unwrap(), &ops, &State::empty(), 0).unwrap();
            assert!(
                !p.preds[1].contains(0),
                "{name}: output 1 does not wait for the create"
            );
            // fsync(f) persists f's directory entry only with safe file flush (or total order).
            assert_eq!(
                p.preds[3].contains(0),
                name != "default",
                "{name}: output after fsync and the create"
            );
            assert!(
                p.preds[3].contains(2),
                "{name}: output after the fsync call returned"
            );
        }
    }
}
