//! Reading a file system back: superblock, checkpoint, snapshot, journal replay, and the
//! structural invariants (shared by mount and fsck).
//!
//! Replay follows OptFS's in-order recovery: records are applied in sequence order on top
//! of the checkpoint and replay stops at the first record that is missing, torn, stale
//! (another epoch), or whose data blocks do not match the checksums it carries. A record
//! that *is* intact but does not apply, or a snapshot that breaks an invariant, is damage:
//! mount refuses with the reason rather than guessing.

use crate::error::{FsError, Result};
use crate::layout::{
    self, Checkpoint, Delta, FrameError, Record, Superblock, CHECKPOINT_SLOTS, MAX_CHAIN_EXTENTS,
    MAX_DELTAS, MAX_SNAPSHOT_EXTENTS, MAX_TABLE_EXTENTS, REC_MAGIC, SB_MAGIC, SUPERBLOCK,
};
use crate::meta::{
    dir_key, valid_name, Body, FileType, Ino, Inode, Meta, BLOCK, MAX_FILE_SIZE, ROOT, SYMLINK_MAX,
};
use intactfs_device::BlockDevice;
use std::collections::{HashMap, VecDeque};

/// Everything read from a device, before anything is written back.
#[derive(Debug)]
pub struct Loaded {
    pub sb: Superblock,
    pub cp: Checkpoint,
    /// Which checkpoint slot (0 or 1) holds `cp`.
    pub slot: usize,
    /// The state after replay.
    pub meta: Meta,
    pub replayed: Vec<Record>,
    /// Why replay stopped where it did.
    pub stop: String,
    /// Where the next record goes.
    pub journal_head: u64,
    pub next_seq: u64,
    pub durable_upto: u64,
}

pub(crate) fn read_block<D: BlockDevice>(dev: &mut D, b: u64) -> Result<Vec<u8>> {
    let mut buf = vec![0; BLOCK];
    dev.read(b, &mut buf)?;
    Ok(buf)
}

pub fn read_superblock<D: BlockDevice>(dev: &mut D) -> Result<Superblock> {
    if dev.block_size() != BLOCK {
        return Err(FsError::Invalid(format!(
            "device block size {} (intactfs needs {BLOCK})",
            dev.block_size()
        )));
    }
    if dev.blocks() <= layout::JOURNAL_START {
        return Err(FsError::Corrupt(format!(
            "the device has only {} blocks: not an intactfs image",
            dev.blocks()
        )));
    }
    let raw = read_block(dev, SUPERBLOCK)?;
    let sb: Superblock = layout::decode(SB_MAGIC, &raw).map_err(|e| match e {
        FrameError::Magic => FsError::Corrupt("no intactfs superblock (block 0 does not start with INTACTSB): not an intactfs image, or run `intact fs mkfs`".into()),
        e => FsError::Corrupt(format!("superblock: {e}")),
    })?;
    if !(layout::FORMAT_VERSION_MIN..=layout::FORMAT_VERSION).contains(&sb.version) {
        // Not damage: a format this build does not read (fsck says so apart).
        return Err(FsError::Unsupported(format!(
            "superblock: format version {} (this build reads versions {} to {}); open the image with the intact that made it",
            sb.version,
            layout::FORMAT_VERSION_MIN,
            layout::FORMAT_VERSION
        )));
    }
    sb.check(dev.blocks())
        .map_err(|e| FsError::Corrupt(format!("superblock: {e}")))?;
    Ok(sb)
}

/// Both checkpoint headers, each decoded or with the reason it is unusable.
pub fn read_checkpoints<D: BlockDevice>(
    dev: &mut D,
    sb: &Superblock,
) -> Result<Vec<std::result::Result<Checkpoint, String>>> {
    let mut out = Vec::new();
    for slot in CHECKPOINT_SLOTS {
        let raw = read_block(dev, slot)?;
        out.push(match Checkpoint::decode(&raw) {
            Ok(cp) if cp.uuid != sb.uuid => Err("belongs to another file system (uuid)".into()),
            Ok(cp) => Ok(cp),
            Err(e) => Err(e.to_string()),
        });
    }
    Ok(out)
}

/// A header with a run table, with its chain read from the table. The table was flushed
/// before its header was written, so a header that checks out with a damaged table is
/// damage (refused, as a damaged snapshot is), not a torn write to fall back from.
fn resolve_table<D: BlockDevice>(
    dev: &mut D,
    sb: &Superblock,
    mut cp: Checkpoint,
) -> Result<Checkpoint> {
    let Some(t) = cp.table.clone() else {
        return Ok(cp);
    };
    let generation = cp.generation;
    let bad = |m: String| {
        FsError::Corrupt(format!(
            "run table of the metadata snapshot (checkpoint generation {generation}): {m}"
        ))
    };
    if t.runs.len() > MAX_TABLE_EXTENTS {
        return Err(bad(format!("{} extents", t.runs.len())));
    }
    let bytes = read_segment(dev, sb, &t.runs, t.bytes, t.crc, &bad)?;
    cp.resolve(&bytes).map_err(bad)?;
    Ok(cp)
}

/// The bytes of one segment of the metadata chain (`what` names it in errors).
fn read_segment<D: BlockDevice>(
    dev: &mut D,
    sb: &Superblock,
    runs: &[(u64, u64)],
    len: u64,
    crc: u32,
    bad: &dyn Fn(String) -> FsError,
) -> Result<Vec<u8>> {
    if runs.is_empty() {
        return Err(bad("no extents".into()));
    }
    let mut total = 0u64;
    for &(s, l) in runs {
        if l == 0 || s < sb.data_start() || s.checked_add(l).is_none_or(|e| e > sb.blocks) {
            return Err(bad(format!("extent {s}+{l} is outside the data area")));
        }
        total += l;
    }
    // The engine writes exactly the blocks a segment needs. Anything else is damage, and
    // extents repeated or overlapping (checked only later) must not make this read allocate
    // up to 200 times the device.
    if total != len.div_ceil(BLOCK as u64).max(1) || total > sb.blocks - sb.data_start() {
        return Err(bad(format!("{len} bytes in {total} blocks")));
    }
    let mut bytes = vec![0u8; (total as usize) * BLOCK];
    let mut at = 0;
    for &(s, l) in runs {
        let n = l as usize * BLOCK;
        dev.read_run(s, &mut bytes[at..at + n])?;
        at += n;
    }
    bytes.truncate(len as usize);
    if layout::snapshot_crc(&bytes) != crc {
        return Err(bad("checksum mismatch".into()));
    }
    Ok(bytes)
}

/// The metadata a checkpoint names: its base snapshot with its deltas applied in order.
fn read_snapshot<D: BlockDevice>(dev: &mut D, sb: &Superblock, cp: &Checkpoint) -> Result<Meta> {
    let bad = |m: String| {
        FsError::Corrupt(format!(
            "metadata snapshot (checkpoint generation {}): {m}",
            cp.generation
        ))
    };
    let extents = cp.meta_runs().len();
    let most = if cp.table.is_some() {
        MAX_CHAIN_EXTENTS
    } else {
        MAX_SNAPSHOT_EXTENTS
    };
    if extents > most || cp.deltas.len() > MAX_DELTAS {
        return Err(bad(format!(
            "{extents} extents in {} delta(s)",
            cp.deltas.len()
        )));
    }
    let bytes = read_segment(
        dev,
        sb,
        &cp.snapshot,
        cp.snapshot_bytes,
        cp.snapshot_crc,
        &bad,
    )?;
    let mut meta: Meta =
        postcard::from_bytes(&bytes).map_err(|e| bad(format!("does not decode: {e}")))?;
    for (k, seg) in cp.deltas.iter().enumerate() {
        let bad = |m: String| {
            FsError::Corrupt(format!(
                "metadata snapshot delta {k} (checkpoint generation {}): {m}",
                cp.generation
            ))
        };
        let bytes = read_segment(dev, sb, &seg.runs, seg.bytes, seg.crc, &bad)?;
        let d: Delta<Inode> =
            postcard::from_bytes(&bytes).map_err(|e| bad(format!("does not decode: {e}")))?;
        if d.index as usize != k || d.base_crc != cp.snapshot_crc {
            return Err(bad(format!("it was written as delta {} of the base with checksum {:#010x}, not this chain's (base {:#010x})", d.index, d.base_crc, cp.snapshot_crc)));
        }
        for (ino, node) in d.inodes {
            if ino == 0 || ino >= d.next_ino {
                return Err(bad(format!("inode {ino} is outside 1..{}", d.next_ino)));
            }
            match node {
                Some(n) => meta.inodes.insert(ino, n),
                None => meta.inodes.remove(&ino),
            };
        }
        meta.next_ino = d.next_ino;
    }
    Ok(meta)
}

/// Reads and replays; changes nothing on the device.
pub fn load<D: BlockDevice>(dev: &mut D) -> Result<Loaded> {
    let sb = read_superblock(dev)?;
    let cps = read_checkpoints(dev, &sb)?;
    let (slot, cp) = cps
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.as_ref().ok().map(|c| (i, c.clone())))
        .max_by_key(|(_, c)| c.generation)
        .ok_or_else(|| {
            let why: Vec<String> = cps
                .iter()
                .map(|c| c.as_ref().err().cloned().unwrap_or_default())
                .collect();
            FsError::Corrupt(format!(
                "no valid checkpoint header (block 1: {}; block 2: {})",
                why[0], why[1]
            ))
        })?;
    if cp.journal_pos < sb.journal_start || cp.journal_pos >= sb.journal_end() {
        return Err(FsError::Corrupt(format!(
            "checkpoint generation {}: journal position {} is outside the journal",
            cp.generation, cp.journal_pos
        )));
    }
    // Counters the engine never writes (a header whose checksum matches them is damage);
    // they would overflow the sequence arithmetic below and the next checkpoint's generation.
    if cp.generation == 0
        || cp.generation >= MAX_COUNTER
        || cp.next_seq == 0
        || cp.next_seq >= MAX_COUNTER
        || cp.durable_upto >= cp.next_seq
    {
        return Err(FsError::Corrupt(format!(
            "checkpoint header (block {}): generation {}, next sequence number {}, durable up to {}: out of range",
            CHECKPOINT_SLOTS[slot], cp.generation, cp.next_seq, cp.durable_upto
        )));
    }
    let cp = resolve_table(dev, &sb, cp)?;
    let mut meta = read_snapshot(dev, &sb, &cp)?;
    let problems = check_meta(&meta, &sb, &cp.meta_runs());
    if !problems.is_empty() {
        return Err(FsError::Corrupt(format!(
            "metadata snapshot breaks {} invariant(s): {}",
            problems.len(),
            summarize(&problems)
        )));
    }

    // Collect the chain of intact records.
    let mut records = Vec::new();
    let mut pos = cp.journal_pos;
    let mut seq = cp.next_seq;
    let stop;
    loop {
        if pos >= sb.journal_end() {
            stop = "end of the journal area".to_string();
            break;
        }
        let head = read_block(dev, pos)?;
        let len = match layout::framed_len(REC_MAGIC, &head) {
            Ok(l) => l,
            Err(_) => {
                stop = format!("no record at block {pos}");
                break;
            }
        };
        let nb = len.div_ceil(BLOCK as u64);
        if pos + nb > sb.journal_end() {
            stop = format!("record at block {pos} claims {nb} blocks, past the journal's end");
            break;
        }
        let mut raw = vec![0u8; nb as usize * BLOCK];
        dev.read_run(pos, &mut raw)?;
        let rec: Record = match layout::decode(REC_MAGIC, &raw) {
            Ok(r) => r,
            Err(FrameError::Decode(e)) => {
                return Err(FsError::Corrupt(format!(
                    "journal record at block {pos}: checksum matches but it does not decode: {e}"
                )));
            }
            Err(e) => {
                stop = format!("record at block {pos}: {e} (torn or never completed)");
                break;
            }
        };
        // Records of epoch E are written only after checkpoint header E is durable, from the
        // journal's first block on: one of a later epoch there means that header was written
        // and is now unreadable. Replaying from the older header would silently drop
        // everything since. (Only there: mkfs zeroed that block, so it is never left over
        // from an earlier file system with the same uuid.)
        if pos == cp.journal_pos && rec.uuid == sb.uuid && rec.epoch > cp.generation {
            let why: Vec<String> = cps
                .iter()
                .enumerate()
                .filter_map(|(i, c)| {
                    c.as_ref()
                        .err()
                        .map(|e| format!("block {}: {e}", CHECKPOINT_SLOTS[i]))
                })
                .collect();
            return Err(FsError::Corrupt(format!(
                "checkpoint header damaged: journal record at block {pos} belongs to epoch {}, newer than the newest readable checkpoint (generation {}) ({})",
                rec.epoch,
                cp.generation,
                why.join("; ")
            )));
        }
        if rec.uuid != sb.uuid || rec.epoch != cp.generation || rec.seq != seq {
            stop = format!(
                "the record at block {pos} is older than this checkpoint (epoch {}, seq {}; this checkpoint continues with epoch {}, seq {seq}), as after every checkpoint",
                rec.epoch, rec.seq, cp.generation
            );
            break;
        }
        records.push((pos, nb, rec));
        pos += nb;
        seq += 1;
    }
    // A record counts an earlier one as durable only after a flush made it so (osync
    // records are written without one, so any of several unflushed records may be torn).
    // An intact later record of this epoch that counts the one replay stopped at as
    // durable proves that one was complete, so it is damaged: refuse rather than silently
    // drop it and everything after it.
    if pos < sb.journal_end() {
        if let Some((q, later)) = later_record(dev, &sb, pos + 1, cp.generation, seq)? {
            return Err(FsError::Corrupt(format!(
                "journal record {seq} at block {pos} is damaged ({stop}), but record {later} at block {q} was written after it was durable"
            )));
        }
    }
    let durable = records
        .iter()
        .map(|r| r.2.durable_upto)
        .chain([cp.durable_upto])
        .max()
        .unwrap_or(0);

    let mut replayed = Vec::new();
    let mut head = cp.journal_pos;
    let mut next_seq = cp.next_seq;
    let mut stop = stop;
    'records: for (pos, nb, rec) in records {
        if rec.seq > durable
            && !crate::mutation::active(crate::mutation::Mutation::NoRecoveryChecksum)
        {
            for op in &rec.ops {
                for (b, crc) in op.data_blocks() {
                    if b < sb.data_start() || b >= sb.blocks {
                        return Err(FsError::Corrupt(format!(
                            "journal record {} maps device block {b}, outside the data area",
                            rec.seq
                        )));
                    }
                    if layout::block_crc(&read_block(dev, b)?) != crc {
                        stop = format!("record {} at block {pos}: data block {b} does not match its checksum (the crash came before it reached the disk)", rec.seq);
                        break 'records;
                    }
                }
            }
        }
        for (k, op) in rec.ops.iter().enumerate() {
            meta.apply(op).map_err(|e| {
                FsError::Corrupt(format!(
                    "journal record {} (block {pos}), operation {k} {op:?} does not apply: {e}",
                    rec.seq
                ))
            })?;
        }
        head = pos + nb;
        next_seq = rec.seq + 1;
        replayed.push(rec);
    }
    let problems = check_meta(&meta, &sb, &cp.meta_runs());
    if !problems.is_empty() {
        return Err(FsError::Corrupt(format!(
            "after replaying {} journal record(s) the metadata breaks {} invariant(s): {}",
            replayed.len(),
            problems.len(),
            summarize(&problems)
        )));
    }
    Ok(Loaded {
        sb,
        cp,
        slot,
        meta,
        replayed,
        stop,
        journal_head: head,
        next_seq,
        durable_upto: next_seq - 1,
    })
}

/// Generations and sequence numbers at or past this are damage (the engine would need
/// centuries of commits to reach it), and stay far from overflowing.
const MAX_COUNTER: u64 = 1 << 62;

/// The first intact record from block `from` on of `epoch` (and this file system) that
/// counts record `seq` as durable: (block, its sequence number).
fn later_record<D: BlockDevice>(
    dev: &mut D,
    sb: &Superblock,
    from: u64,
    epoch: u64,
    seq: u64,
) -> Result<Option<(u64, u64)>> {
    let mut pos = from;
    while pos < sb.journal_end() {
        let head = read_block(dev, pos)?;
        if let Ok(len) = layout::framed_len(REC_MAGIC, &head) {
            let nb = len.div_ceil(BLOCK as u64);
            if pos + nb <= sb.journal_end() {
                let mut raw = vec![0u8; nb as usize * BLOCK];
                dev.read_run(pos, &mut raw)?;
                if let Ok(r) = layout::decode::<Record>(REC_MAGIC, &raw) {
                    if r.uuid == sb.uuid && r.epoch == epoch && r.seq > seq && r.durable_upto >= seq
                    {
                        return Ok(Some((pos, r.seq)));
                    }
                    pos += nb;
                    continue;
                }
            }
        }
        pos += 1;
    }
    Ok(None)
}

fn summarize(p: &[String]) -> String {
    let mut s = p.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
    if p.len() > 3 {
        s.push_str(&format!(
            "; and {} more (run `intact fs fsck`)",
            p.len() - 3
        ));
    }
    s
}

/// Inodes with no links left (unlinked while open): freed at mount.
pub fn orphans(meta: &Meta) -> Vec<Ino> {
    meta.inodes
        .iter()
        .filter(|(i, n)| **i != ROOT && n.nlink == 0)
        .map(|(i, _)| *i)
        .collect()
}

/// Every structural invariant of the metadata; each problem is one line naming the object.
pub fn check_meta(meta: &Meta, sb: &Superblock, snapshot: &[(u64, u64)]) -> Vec<String> {
    let mut p = Vec::new();
    // Inode numbers are reused lowest first, so every number below next_ino was in use at
    // once, each inode taking at least 4 bytes of snapshot or journal: a larger next_ino is
    // damage (and mount would build a set of that many free numbers).
    if meta.next_ino > sb.blocks.saturating_mul(BLOCK as u64 / 4).saturating_add(2) {
        p.push(format!(
            "next inode number {} is more than {} blocks could ever have held",
            meta.next_ino, sb.blocks
        ));
    }
    match meta.inodes.get(&ROOT) {
        Some(r) if r.kind == FileType::Dir && matches!(r.body, Body::Dir { parent: ROOT, .. }) => {}
        Some(_) => p.push("the root (inode 1) is not a directory that is its own parent".into()),
        None => p.push("the root directory (inode 1) is missing".into()),
    }
    let mut refs: HashMap<Ino, u32> = HashMap::new();
    let mut subdirs: HashMap<Ino, u32> = HashMap::new();
    let mut runs: Vec<(u64, u64, String)> = snapshot
        .iter()
        .map(|&(s, l)| (s, l, "the metadata snapshot".to_string()))
        .collect();
    for (&ino, n) in &meta.inodes {
        if ino == 0 || ino >= meta.next_ino {
            p.push(format!("inode {ino} is outside 1..{}", meta.next_ino));
        }
        if n.mode & !0o7777 != 0 {
            p.push(format!(
                "inode {ino}: mode {:o} has bits beyond 07777",
                n.mode
            ));
        }
        if n.xattrs.iter().any(|(k, v)| {
            !crate::meta::valid_xattr_name(k) || v.len() > crate::meta::XATTR_VALUE_MAX
        }) || crate::meta::xattr_bytes(&n.xattrs) > crate::meta::XATTR_TOTAL_MAX
        {
            p.push(format!(
                "inode {ino}: an extended attribute with a bad name or size"
            ));
        }
        let body_ok = matches!(
            (&n.kind, &n.body),
            (FileType::File, Body::File { .. })
                | (FileType::Dir, Body::Dir { .. })
                | (FileType::Symlink, Body::Symlink { .. })
                | (
                    FileType::Fifo | FileType::Socket | FileType::CharDev | FileType::BlockDev,
                    Body::Special { .. }
                )
        );
        if !body_ok {
            p.push(format!(
                "inode {ino}: type {:?} with the wrong kind of body",
                n.kind
            ));
            continue;
        }
        match &n.body {
            Body::Dir { entries, parent } => {
                if n.nlink > 0
                    && !meta
                        .inodes
                        .get(parent)
                        .is_some_and(|d| d.kind == FileType::Dir)
                {
                    p.push(format!(
                        "directory {ino}: parent {parent} is not a directory"
                    ));
                }
                for ((h, name), &t) in entries {
                    let shown = String::from_utf8_lossy(name);
                    if !valid_name(name) {
                        p.push(format!("directory {ino}: invalid entry name {shown:?}"));
                    }
                    if dir_key(name).0 != *h {
                        p.push(format!(
                            "directory {ino}: entry {shown:?} is filed under the wrong hash"
                        ));
                    }
                    match meta.inodes.get(&t) {
                        None => p.push(format!(
                            "directory {ino}: entry {shown:?} points to missing inode {t}"
                        )),
                        Some(c) => {
                            *refs.entry(t).or_default() += 1;
                            if let Body::Dir { parent, .. } = &c.body {
                                *subdirs.entry(ino).or_default() += 1;
                                if *parent != ino {
                                    p.push(format!("directory {t} ({shown:?} in {ino}) names {parent} as its parent"));
                                }
                            }
                        }
                    }
                }
            }
            Body::Symlink { target } => {
                if target.is_empty() || target.len() > SYMLINK_MAX || n.size != target.len() as u64
                {
                    p.push(format!(
                        "symlink {ino}: target of {} bytes, size {}",
                        target.len(),
                        n.size
                    ));
                }
            }
            Body::File { extents } => {
                let mut end = 0u64;
                let size_blocks = n.size.div_ceil(BLOCK as u64);
                if n.size > MAX_FILE_SIZE {
                    p.push(format!(
                        "file {ino}: size {} is past the largest file size",
                        n.size
                    ));
                }
                for (&l, e) in extents {
                    if e.len == 0 || (e.written() && e.crcs.len() as u64 != e.len) {
                        p.push(format!(
                            "file {ino}: extent at block {l} has length {} and {} checksums",
                            e.len,
                            e.crcs.len()
                        ));
                        continue;
                    }
                    // An unwritten extent may lie past the size (KEEP_SIZE preallocation), but
                    // not past the largest file: its end would overflow block arithmetic.
                    if l.checked_add(e.len)
                        .is_none_or(|x| x > MAX_FILE_SIZE / BLOCK as u64)
                    {
                        p.push(format!("file {ino}: extent at block {l} of {} blocks reaches past the largest file size", e.len));
                    }
                    if l < end {
                        p.push(format!(
                            "file {ino}: extent at block {l} overlaps the one before"
                        ));
                    }
                    end = l.saturating_add(e.len);
                    if e.written() && end > size_blocks {
                        p.push(format!(
                            "file {ino}: written blocks {l}..{end} reach past its size {}",
                            n.size
                        ));
                    }
                    if e.pblk < sb.data_start()
                        || e.pblk.checked_add(e.len).is_none_or(|x| x > sb.blocks)
                    {
                        p.push(format!("file {ino}: extent at block {l} maps device blocks {}+{} outside the data area", e.pblk, e.len));
                    } else {
                        runs.push((e.pblk, e.len, format!("file {ino} block {l}")));
                    }
                }
            }
            Body::Special { .. } => {}
        }
    }
    for (&ino, n) in &meta.inodes {
        let r = refs.get(&ino).copied().unwrap_or(0);
        if ino == ROOT {
            if r != 0 {
                p.push("the root directory has an entry pointing to it".into());
            }
            continue;
        }
        if n.kind == FileType::Dir {
            let want = if r == 0 {
                0
            } else {
                2 + subdirs.get(&ino).copied().unwrap_or(0)
            };
            if r > 1 {
                p.push(format!("directory {ino} has {r} entries pointing to it"));
            } else if n.nlink != want && !(r == 0 && n.nlink == 0) {
                p.push(format!(
                    "directory {ino}: link count {} but {want} expected",
                    n.nlink
                ));
            }
        } else if n.nlink != r {
            p.push(format!(
                "inode {ino}: link count {} but {r} entries point to it",
                n.nlink
            ));
        }
    }
    if let Some(root) = meta.inodes.get(&ROOT) {
        let want = 2 + subdirs.get(&ROOT).copied().unwrap_or(0);
        if root.nlink != want {
            p.push(format!(
                "the root directory: link count {} but {want} expected",
                root.nlink
            ));
        }
    }
    // Reachability (every directory has one entry naming it, so this also rules out cycles).
    let mut seen: HashMap<Ino, ()> = HashMap::new();
    let mut queue = VecDeque::from([ROOT]);
    while let Some(d) = queue.pop_front() {
        if seen.insert(d, ()).is_some() {
            continue;
        }
        if let Some(Body::Dir { entries, .. }) = meta.inodes.get(&d).map(|n| &n.body) {
            queue.extend(entries.values().copied());
        }
    }
    for (&ino, n) in &meta.inodes {
        if n.nlink > 0 && !seen.contains_key(&ino) {
            p.push(format!(
                "inode {ino} has links but cannot be reached from the root"
            ));
        }
    }
    // No device block is used twice.
    runs.sort_by_key(|r| r.0);
    for w in runs.windows(2) {
        if w[0].0 + w[0].1 > w[1].0 {
            p.push(format!(
                "device block {} is used by both {} and {}",
                w[1].0, w[0].2, w[1].2
            ));
        }
    }
    p
}
