//! A transactional flash device (X-FTL style) kept in a file, or on any [`BlockDevice`] of
//! [`SECTOR`]-sized blocks (a [`SimDevice`](crate::SimDevice) in the crash tests).
//!
//! Logical blocks live in physical *slots*; there are `spare` more slots than blocks. A
//! transactional write goes out of place into a free slot; a commit makes the new
//! block → slot mapping durable. A plain write goes in place into the block's slot.
//!
//! # Layout (little-endian; `bs` = block size, `N` = blocks, `S` = N + spare slots)
//!
//! | offset | size | content |
//! |---|---|---|
//! | 0, 512 | one sector each | root records 0 and 1 (generation `g` lives in root `g % 2`) |
//! | `H` = 1024 rounded up to `bs` | `T` = 8N rounded up to `bs` | mapping table 0: N × u64 slot |
//! | `H + T` | `T` | mapping table 1 (generation `g` uses table `g % 2`) |
//! | `H + 2T` | `log_bytes` | commit log |
//! | `H + 2T + log_bytes` | S × bs | slots |
//!
//! Root record (64 bytes of its sector): magic `INTACTTX`, version u32, block size u32,
//! generation u64, N u64, spare u64, log_bytes u64, seq u64 (the last commit the table
//! holds), CRC32C of the table u32, CRC32C of the 60 bytes before u32.
//!
//! Commit record (at a sector boundary of the log, padded to whole sectors): magic `TXLG`,
//! CRC32C u32 (of the record with this field zero), root generation u64, seq u64, count
//! u32, then count × (block u64, slot u64, CRC32C of the slot's data u32).
//!
//! # Commit: one flush
//!
//! The data went to free slots at `tx_write`. `tx_commit` appends one record and flushes
//! once. A crash before that flush completes may leave the record without some of its data,
//! so recovery checks the data CRCs of the *last* record (only: record k+1 is written after
//! commit k's flush returned, so every earlier record's data is durable) and drops it on a
//! mismatch. That check needs the last record's slots unchanged until the next record: a
//! plain write into one of them first appends an empty "seal" record (one sector write and
//! one extra flush; only for a plain write to a block the latest commit moved).
//!
//! When a record does not fit in the log, the commit is a checkpoint instead: the whole
//! table (with the transaction) goes to the other table area, flush, the next root record
//! points at it and restarts the log, flush. Two flushes, amortised over a log's worth of
//! commits (the default log is as large as a table).
//!
//! Recovery: the valid root with the highest generation, its table (CRC), then the log's
//! records of that generation with consecutive seqs from the root's; the last one's data
//! checked as above. A dropped last record gets its first sector zeroed (and a flush), so
//! equal data written into its slots later can never revive it.

use crate::{check, check_run, BlockDevice, DeviceError, FileDevice, SECTOR};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Read;
use std::path::Path;

/// Magic at the start of each root record.
pub const TX_MAGIC: [u8; 8] = *b"INTACTTX";
const VERSION: u32 = 1;
const REC_MAGIC: [u8; 4] = *b"TXLG";
const REC_HEAD: usize = 28;
const REC_ENTRY: usize = 20;
const SEC: u64 = SECTOR as u64;

/// The shape of a txflash device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxGeometry {
    pub block_size: usize,
    /// Logical blocks.
    pub blocks: u64,
    /// Slots beyond one per block: how many blocks open transactions may hold at once.
    pub spare: u64,
    /// Commit log size (a multiple of `block_size`).
    pub log_bytes: u64,
}

impl TxGeometry {
    /// The default log: as large as a mapping table, at least 64 KiB, so a checkpoint (which
    /// writes a table) comes at most once per log's worth of commit records.
    pub fn new(block_size: usize, blocks: u64, spare: u64) -> Self {
        let bs = block_size.max(1) as u64;
        let log = blocks
            .saturating_mul(8)
            .max(64 << 10)
            .div_ceil(bs)
            .saturating_mul(bs);
        TxGeometry {
            block_size,
            blocks,
            spare,
            log_bytes: log,
        }
    }

    pub fn slots(&self) -> u64 {
        self.blocks.saturating_add(self.spare)
    }

    /// Bytes the backing file or device needs.
    pub fn file_bytes(&self) -> Result<u64, DeviceError> {
        Ok(self.layout().map_err(DeviceError::BadTxGeometry)?.total)
    }

    fn layout(&self) -> Result<Layout, String> {
        let bs = self.block_size;
        if bs == 0 || !bs.is_multiple_of(SECTOR) || bs > u32::MAX as usize {
            return Err(format!(
                "block size {bs} is not a positive multiple of {SECTOR} below 4 GiB"
            ));
        }
        if self.blocks == 0 {
            return Err("a device of no blocks".into());
        }
        if self.spare == 0 {
            return Err(
                "no spare slots (transactional writes go out of place: at least one is needed)"
                    .into(),
            );
        }
        let bs = bs as u64;
        if self.log_bytes < bs || !self.log_bytes.is_multiple_of(bs) {
            return Err(format!(
                "a log of {} bytes is not a positive multiple of the block size {bs}",
                self.log_bytes
            ));
        }
        let over = || "the geometry overflows 64-bit offsets".to_string();
        let up = |x: u64| x.checked_next_multiple_of(bs).ok_or_else(over);
        let header = up(2 * SEC)?;
        let table_len = self.blocks.checked_mul(8).ok_or_else(over)?;
        let table_pad = up(table_len)?;
        let slots = self.blocks.checked_add(self.spare).ok_or_else(over)?;
        let log_at = table_pad
            .checked_mul(2)
            .and_then(|t| t.checked_add(header))
            .ok_or_else(over)?;
        let slot_at = log_at.checked_add(self.log_bytes).ok_or_else(over)?;
        let total = slots
            .checked_mul(bs)
            .and_then(|s| s.checked_add(slot_at))
            .ok_or_else(over)?;
        if usize::try_from(table_pad).is_err() || usize::try_from(self.log_bytes).is_err() {
            return Err(over());
        }
        Ok(Layout {
            table_len,
            table_pad,
            table_at: [header, header + table_pad],
            log_at,
            slot_at,
            total,
        })
    }
}

#[derive(Clone, Copy, Debug)]
struct Layout {
    /// 8 × blocks: the bytes the table CRC covers.
    table_len: u64,
    table_pad: u64,
    table_at: [u64; 2],
    log_at: u64,
    slot_at: u64,
    total: u64,
}

/// Work done since the device was created or opened (for benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxCounters {
    /// Block writes into slots (plain and transactional).
    pub data_writes: u64,
    /// Mapping writes: commit and seal records, tables, root records.
    pub map_writes: u64,
    pub map_bytes: u64,
    /// Flushes of the backing device (explicit, and inside commits, checkpoints and seals).
    pub flushes: u64,
    pub commits: u64,
    pub aborts: u64,
    /// Commits that rewrote the table because the log was full.
    pub checkpoints: u64,
    /// Empty records written before a plain write into a slot the last commit wrote.
    pub seals: u64,
}

/// What opening found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxRecovery {
    /// The root record's generation.
    pub generation: u64,
    /// Commit records replayed over the table.
    pub replayed: u64,
    /// Whether the last record was dropped because some of its data had not landed (a
    /// crash during its commit).
    pub dropped_tail: bool,
}

#[derive(Debug, Default)]
struct OpenTx {
    /// block -> (slot, CRC32C of the data).
    writes: BTreeMap<u64, (u64, u32)>,
}

/// The transactional device; `D` is the backing store, [`FileDevice`] of 512-byte blocks
/// unless a test puts it on something else.
#[derive(Debug)]
pub struct TxFileDevice<D: BlockDevice = FileDevice> {
    dev: D,
    geo: TxGeometry,
    lay: Layout,
    gen: u64,
    /// Sequence number of the last commit (in the table or the log).
    seq: u64,
    /// Where the next record goes, from the start of the log.
    cursor: u64,
    /// block -> slot, committed.
    map: Vec<u64>,
    /// Free slots; the top (end) is taken first.
    free: Vec<u64>,
    open: HashMap<u64, OpenTx>,
    owner: HashMap<u64, u64>,
    /// Slots of the last record, whose data recovery would check (until a seal).
    tail: HashSet<u64>,
    broken: bool,
    counters: TxCounters,
    recovery: TxRecovery,
}

impl TxFileDevice<FileDevice> {
    /// Creates (or truncates) `path` as a txflash device of `blocks` blocks and `spare` spare
    /// slots, with the default log.
    pub fn create(
        path: &Path,
        block_size: usize,
        blocks: u64,
        spare: u64,
    ) -> Result<Self, DeviceError> {
        Self::create_with(path, TxGeometry::new(block_size, blocks, spare))
    }

    pub fn create_with(path: &Path, geo: TxGeometry) -> Result<Self, DeviceError> {
        let bytes = geo.file_bytes()?;
        Self::format(FileDevice::create(path, SECTOR, bytes / SEC)?, geo)
    }

    /// Opens and recovers a txflash file: committed transactions are there, open ones gone.
    pub fn open(path: &Path) -> Result<Self, DeviceError> {
        Self::recover(FileDevice::open(path, SECTOR)?)
    }
}

/// Whether `path` holds a txflash device (either root record carries the magic, so one
/// damaged root still identifies it; [`TxFileDevice::open`] then says what is wrong).
pub fn is_txflash(path: &Path) -> Result<bool, DeviceError> {
    let io = |source| DeviceError::Io {
        what: "reading",
        path: path.display().to_string(),
        source,
    };
    let mut head = Vec::with_capacity(2 * SECTOR);
    std::fs::File::open(path)
        .map_err(io)?
        .take(2 * SEC)
        .read_to_end(&mut head)
        .map_err(io)?;
    Ok(head.chunks(SECTOR).any(|s| s.starts_with(&TX_MAGIC)))
}

fn bad(msg: impl Into<String>) -> DeviceError {
    DeviceError::BadTxImage(msg.into())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

#[derive(Clone, Copy)]
struct Root {
    gen: u64,
    geo: TxGeometry,
    seq: u64,
    table_crc: u32,
}

fn encode_root(r: &Root) -> Vec<u8> {
    let mut b = vec![0u8; SECTOR];
    b[0..8].copy_from_slice(&TX_MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&(r.geo.block_size as u32).to_le_bytes());
    b[16..24].copy_from_slice(&r.gen.to_le_bytes());
    b[24..32].copy_from_slice(&r.geo.blocks.to_le_bytes());
    b[32..40].copy_from_slice(&r.geo.spare.to_le_bytes());
    b[40..48].copy_from_slice(&r.geo.log_bytes.to_le_bytes());
    b[48..56].copy_from_slice(&r.seq.to_le_bytes());
    b[56..60].copy_from_slice(&r.table_crc.to_le_bytes());
    let crc = crc32c(&b[..60]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    b
}

fn decode_root(b: &[u8], slot: usize) -> Result<Root, String> {
    if b.iter().all(|&x| x == 0) {
        return Err("empty".into());
    }
    if b[0..8] != TX_MAGIC {
        return Err("no txflash magic".into());
    }
    let crc_ok = crc32c(&b[..60]) == u32_at(b, 60);
    let version = u32_at(b, 8);
    if !crc_ok {
        return Err("checksum mismatch (torn or damaged)".into());
    }
    if version != VERSION {
        return Err(format!(
            "format version {version}; this build reads version {VERSION}"
        ));
    }
    let gen = u64_at(b, 16);
    if gen % 2 != slot as u64 {
        return Err(format!(
            "holds generation {gen}, which belongs in root record {}",
            gen % 2
        ));
    }
    let geo = TxGeometry {
        block_size: u32_at(b, 12) as usize,
        blocks: u64_at(b, 24),
        spare: u64_at(b, 32),
        log_bytes: u64_at(b, 40),
    };
    Ok(Root {
        gen,
        geo,
        seq: u64_at(b, 48),
        table_crc: u32_at(b, 56),
    })
}

fn encode_record(gen: u64, seq: u64, entries: &[(u64, u64, u32)]) -> Vec<u8> {
    let len = REC_HEAD + REC_ENTRY * entries.len();
    let mut b = vec![0u8; len.next_multiple_of(SECTOR)];
    b[0..4].copy_from_slice(&REC_MAGIC);
    b[8..16].copy_from_slice(&gen.to_le_bytes());
    b[16..24].copy_from_slice(&seq.to_le_bytes());
    b[24..28].copy_from_slice(&(entries.len() as u32).to_le_bytes());
    for (k, &(blk, slot, crc)) in entries.iter().enumerate() {
        let at = REC_HEAD + k * REC_ENTRY;
        b[at..at + 8].copy_from_slice(&blk.to_le_bytes());
        b[at + 8..at + 16].copy_from_slice(&slot.to_le_bytes());
        b[at + 16..at + 20].copy_from_slice(&crc.to_le_bytes());
    }
    let crc = crc32c_append(crc32c(&b[..4]), &b[8..len]);
    b[4..8].copy_from_slice(&crc.to_le_bytes());
    b
}

struct Rec {
    at: u64,
    /// Padded to whole sectors.
    len: u64,
    gen: u64,
    seq: u64,
    entries: Vec<(u64, u64, u32)>,
}

/// The record at `at` of the log, if one with a good checksum starts there.
fn parse_record(log: &[u8], at: usize) -> Option<Rec> {
    let h = log.get(at..at.checked_add(REC_HEAD)?)?;
    if h[0..4] != REC_MAGIC {
        return None;
    }
    let count = u32_at(h, 24) as usize;
    let len = count.checked_mul(REC_ENTRY)?.checked_add(REC_HEAD)?;
    let b = log.get(at..at.checked_add(len)?)?;
    if crc32c_append(crc32c(&b[..4]), &b[8..]) != u32_at(b, 4) {
        return None;
    }
    let entries = b[REC_HEAD..]
        .chunks(REC_ENTRY)
        .map(|e| (u64_at(e, 0), u64_at(e, 8), u32_at(e, 16)))
        .collect();
    Some(Rec {
        at: at as u64,
        len: len.next_multiple_of(SECTOR) as u64,
        gen: u64_at(b, 8),
        seq: u64_at(b, 16),
        entries,
    })
}

impl<D: BlockDevice> TxFileDevice<D> {
    /// Formats `dev` (512-byte blocks, at least [`TxGeometry::file_bytes`]): block `i` in
    /// slot `i`, reading whatever the slot holds (zeros on a fresh file). Not crash-safe: a
    /// crash during it leaves an image `recover` rejects, or the old one.
    pub fn format(dev: D, geo: TxGeometry) -> Result<Self, DeviceError> {
        let lay = geo.layout().map_err(DeviceError::BadTxGeometry)?;
        check_backing(&dev, &lay).map_err(DeviceError::BadTxGeometry)?;
        let map: Vec<u64> = (0..geo.blocks).collect();
        let mut me = Self::assemble(dev, geo, lay, 1, 0, 0, map, HashSet::new());
        // Zero the log (no stale record from an earlier format can match generation 1) and root 0.
        let zeros = vec![
            0u8;
            geo.block_size
                .max(64 << 10)
                .next_multiple_of(geo.block_size)
        ];
        let mut at = 0;
        while at < geo.log_bytes {
            let n = (geo.log_bytes - at).min(zeros.len() as u64);
            me.put(lay.log_at + at, &zeros[..n as usize])?;
            at += n;
        }
        me.put(0, &zeros[..SECTOR])?;
        let (table, crc) = me.encode_table(&me.map);
        me.put(lay.table_at[1], &table)?;
        me.sync()?;
        me.put(
            SEC,
            &encode_root(&Root {
                gen: 1,
                geo,
                seq: 0,
                table_crc: crc,
            }),
        )?;
        me.sync()?;
        me.counters = TxCounters::default();
        me.recovery = TxRecovery {
            generation: 1,
            replayed: 0,
            dropped_tail: false,
        };
        Ok(me)
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        dev: D,
        geo: TxGeometry,
        lay: Layout,
        gen: u64,
        seq: u64,
        cursor: u64,
        map: Vec<u64>,
        tail: HashSet<u64>,
    ) -> Self {
        let mut used = vec![false; geo.slots() as usize];
        for &s in &map {
            used[s as usize] = true;
        }
        // Descending, so the lowest free slot is taken first.
        let free = (0..geo.slots())
            .rev()
            .filter(|&s| !used[s as usize])
            .collect();
        TxFileDevice {
            dev,
            geo,
            lay,
            gen,
            seq,
            cursor,
            map,
            free,
            open: HashMap::new(),
            owner: HashMap::new(),
            tail,
            broken: false,
            counters: TxCounters::default(),
            recovery: TxRecovery::default(),
        }
    }

    /// Opens a formatted `dev`: validates it, replays the log; open transactions at the
    /// crash are gone. A damaged image is [`DeviceError::BadTxImage`] saying what is wrong.
    pub fn recover(mut dev: D) -> Result<Self, DeviceError> {
        if dev.block_size() != SECTOR {
            return Err(DeviceError::BadTxGeometry(format!(
                "the backing device has {}-byte blocks; txflash needs {SECTOR}",
                dev.block_size()
            )));
        }
        let have = dev.blocks() * SEC;
        if have < 2 * SEC {
            return Err(bad(format!(
                "{have} bytes: too short for the two root records (not a txflash image)"
            )));
        }
        let mut head = vec![0u8; 2 * SECTOR];
        dev.read_run(0, &mut head)?;
        let roots = [
            decode_root(&head[..SECTOR], 0),
            decode_root(&head[SECTOR..], 1),
        ];
        let root = match &roots {
            [Ok(a), Ok(b)] => {
                if a.geo != b.geo {
                    return Err(bad(format!(
                        "the root records disagree on the geometry ({:?} and {:?})",
                        a.geo, b.geo
                    )));
                }
                if a.gen > b.gen {
                    *a
                } else {
                    *b
                }
            }
            [Ok(r), Err(_)] | [Err(_), Ok(r)] => *r,
            [Err(a), Err(b)] => {
                if head.chunks(SECTOR).all(|s| !s.starts_with(&TX_MAGIC)) {
                    return Err(bad(
                        "no txflash magic in either root record: not a txflash image",
                    ));
                }
                return Err(bad(format!(
                    "no valid root record (root 0: {a}; root 1: {b})"
                )));
            }
        };
        let other = |gen: u64| match &roots[((gen % 2) ^ 1) as usize] {
            Ok(r) => format!("root record {}: generation {}", (gen % 2) ^ 1, r.gen),
            Err(e) => format!("root record {}: {e}", (gen % 2) ^ 1),
        };
        let geo = root.geo;
        let lay = geo.layout().map_err(|e| {
            bad(format!(
                "root record {} holds an impossible geometry: {e}",
                root.gen % 2
            ))
        })?;
        if lay.total > have {
            return Err(bad(format!("truncated: {have} bytes, but its layout ({} blocks of {} bytes, {} spare) needs {}", geo.blocks, geo.block_size, geo.spare, lay.total)));
        }

        // The table.
        let mut table = vec![0u8; lay.table_pad as usize];
        let tno = (root.gen % 2) as usize;
        dev.read_run(lay.table_at[tno] / SEC, &mut table)?;
        let table = &table[..lay.table_len as usize];
        if crc32c(table) != root.table_crc {
            return Err(bad(format!(
                "mapping table {tno} (generation {}) fails its checksum: damaged",
                root.gen
            )));
        }
        let slots = geo.slots();
        let mut map: Vec<u64> = table
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        if let Some((b, &s)) = map.iter().enumerate().find(|(_, &s)| s >= slots) {
            return Err(bad(format!(
                "mapping table {tno}: block {b} maps to slot {s}, past the {slots} slots"
            )));
        }

        // The log: the records of this generation with consecutive seqs from the root's.
        let mut log = vec![0u8; geo.log_bytes as usize];
        dev.read_run(lay.log_at / SEC, &mut log)?;
        let mut recs: Vec<Rec> = Vec::new();
        let mut end = 0usize;
        while let Some(r) = parse_record(&log, end)
            .filter(|r| r.gen == root.gen && r.seq == root.seq + 1 + recs.len() as u64)
        {
            end += r.len as usize;
            recs.push(r);
        }
        // Nothing is ever written past the last record of a generation before it is durable,
        // and a newer generation's records only after its root is: a later good record means
        // damage, not a crash.
        let expect = root.seq + 1 + recs.len() as u64;
        for at in (end..log.len()).step_by(SECTOR) {
            let Some(r) = parse_record(&log, at) else {
                continue;
            };
            if r.gen > root.gen {
                return Err(bad(format!(
                    "the log holds a commit record of generation {} (sequence {}, log offset {at}) but the newest valid root is generation {} ({}): a root record is damaged",
                    r.gen,
                    r.seq,
                    root.gen,
                    other(root.gen)
                )));
            }
            if r.gen == root.gen {
                return Err(bad(format!(
                    "commit record {expect} at log offset {end} is missing or fails its checksum, yet a later commit record (sequence {}, log offset {at}) exists: the log is damaged",
                    r.seq
                )));
            }
        }
        for r in &recs {
            let mut seen = HashSet::new();
            for &(b, s, _) in &r.entries {
                if b >= geo.blocks || s >= slots || !seen.insert(b) {
                    return Err(bad(format!("commit record {} (log offset {}) maps block {b} to slot {s}: out of range or repeated", r.seq, r.at)));
                }
            }
        }
        // The last record's data may not all have landed (a crash during its commit).
        let mut dropped = false;
        if let Some(last) = recs.last() {
            let mut buf = vec![0u8; geo.block_size];
            for &(_, s, crc) in &last.entries {
                dev.read_run((lay.slot_at + s * geo.block_size as u64) / SEC, &mut buf)?;
                if crc32c(&buf) != crc {
                    dropped = true;
                    break;
                }
            }
        }
        let dropped_at = if dropped {
            recs.pop().map(|r| r.at)
        } else {
            None
        };
        for r in &recs {
            for &(b, s, _) in &r.entries {
                map[b as usize] = s;
            }
        }
        let mut by_slot: HashMap<u64, u64> = HashMap::with_capacity(map.len());
        for (b, &s) in map.iter().enumerate() {
            if let Some(a) = by_slot.insert(s, b as u64) {
                return Err(bad(format!("blocks {a} and {b} both map to slot {s} (table {tno} and {} log records): damaged", recs.len())));
            }
        }
        let cursor = recs.last().map_or(0, |r| r.at + r.len);
        let seq = recs.last().map_or(root.seq, |r| r.seq);
        let tail = recs
            .last()
            .map(|r| r.entries.iter().map(|e| e.1).collect())
            .unwrap_or_default();
        let replayed = recs.len() as u64;
        let mut me = Self::assemble(dev, geo, lay, root.gen, seq, cursor, map, tail);
        if let Some(at) = dropped_at {
            me.put(lay.log_at + at, &[0u8; SECTOR])?;
            me.sync()?;
        }
        me.counters = TxCounters::default();
        me.recovery = TxRecovery {
            generation: root.gen,
            replayed,
            dropped_tail: dropped,
        };
        Ok(me)
    }

    pub fn geometry(&self) -> TxGeometry {
        self.geo
    }

    pub fn counters(&self) -> TxCounters {
        self.counters
    }

    /// What opening (or formatting) found.
    pub fn recovery(&self) -> TxRecovery {
        self.recovery
    }

    /// Slots neither mapped nor held by an open transaction.
    pub fn free_slots(&self) -> u64 {
        self.free.len() as u64
    }

    /// The backing store (for tests: writing through it bypasses the device).
    pub fn backing(&self) -> &D {
        &self.dev
    }

    pub fn backing_mut(&mut self) -> &mut D {
        &mut self.dev
    }

    pub fn into_backing(self) -> D {
        self.dev
    }

    fn usable(&self) -> Result<(), DeviceError> {
        if self.broken {
            return Err(DeviceError::TxBroken);
        }
        Ok(())
    }

    // Backing I/O. A failed write or flush leaves the media unknown: the device refuses
    // further changes until reopened (recovery sorts it out).
    fn put(&mut self, at: u64, data: &[u8]) -> Result<(), DeviceError> {
        let r = self.dev.write_run(at / SEC, data);
        self.broken |= r.is_err();
        r
    }

    fn sync(&mut self) -> Result<(), DeviceError> {
        self.counters.flushes += 1;
        let r = self.dev.flush();
        self.broken |= r.is_err();
        r
    }

    fn put_map(&mut self, at: u64, data: &[u8]) -> Result<(), DeviceError> {
        self.counters.map_writes += 1;
        self.counters.map_bytes += data.len() as u64;
        self.put(at, data)
    }

    fn slot_at(&self, slot: u64) -> u64 {
        self.lay.slot_at + slot * self.geo.block_size as u64
    }

    fn encode_table(&self, map: &[u64]) -> (Vec<u8>, u32) {
        let mut t = vec![0u8; self.lay.table_pad as usize];
        for (c, s) in t.chunks_mut(8).zip(map) {
            c.copy_from_slice(&s.to_le_bytes());
        }
        let crc = crc32c(&t[..self.lay.table_len as usize]);
        (t, crc)
    }

    /// Makes `entries` the new mapping, their old slots free: after the write that made it durable.
    fn apply(&mut self, entries: &[(u64, u64, u32)]) {
        for &(b, s, _) in entries {
            let old = std::mem::replace(&mut self.map[b as usize], s);
            self.free.push(old);
        }
    }

    /// Appends a record if it fits (one flush), else checkpoints (two).
    fn log_commit(&mut self, entries: &[(u64, u64, u32)]) -> Result<(), DeviceError> {
        let rec = encode_record(self.gen, self.seq + 1, entries);
        if self.cursor + rec.len() as u64 > self.geo.log_bytes {
            return self.checkpoint(entries);
        }
        self.put_map(self.lay.log_at + self.cursor, &rec)?;
        self.sync()?;
        self.cursor += rec.len() as u64;
        self.seq += 1;
        self.apply(entries);
        self.tail = entries.iter().map(|e| e.1).collect();
        Ok(())
    }

    /// The table with `entries` to the other area, flush, the next root, flush.
    fn checkpoint(&mut self, entries: &[(u64, u64, u32)]) -> Result<(), DeviceError> {
        let mut map = self.map.clone();
        for &(b, s, _) in entries {
            map[b as usize] = s;
        }
        let (table, crc) = self.encode_table(&map);
        let (gen, seq) = (self.gen + 1, self.seq + 1);
        self.put_map(self.lay.table_at[(gen % 2) as usize], &table)?;
        self.sync()?;
        self.put_map(
            (gen % 2) * SEC,
            &encode_root(&Root {
                gen,
                geo: self.geo,
                seq,
                table_crc: crc,
            }),
        )?;
        self.sync()?;
        self.gen = gen;
        self.seq = seq;
        self.cursor = 0;
        self.tail.clear();
        self.apply(entries);
        self.counters.checkpoints += 1;
        Ok(())
    }
}

fn check_backing<D: BlockDevice>(dev: &D, lay: &Layout) -> Result<(), String> {
    if dev.block_size() != SECTOR {
        return Err(format!(
            "the backing device has {}-byte blocks; txflash needs {SECTOR}",
            dev.block_size()
        ));
    }
    if dev.blocks() * SEC < lay.total {
        return Err(format!(
            "the backing device has {} bytes; the layout needs {}",
            dev.blocks() * SEC,
            lay.total
        ));
    }
    Ok(())
}

impl<D: BlockDevice> TxFileDevice<D> {
    /// Checks a run of whole blocks from `block`; its block numbers.
    fn run(&self, block: u64, len: usize) -> Result<std::ops::Range<u64>, DeviceError> {
        let n = check_run(len, self.geo.block_size)?;
        check(
            block.saturating_add(n - 1),
            self.geo.block_size,
            self.geo.blocks,
            self.geo.block_size,
        )?;
        Ok(block..block + n)
    }

    /// One backing write per run of consecutive slots.
    fn put_slots(&mut self, slots: &[u64], data: &[u8]) -> Result<(), DeviceError> {
        let bs = self.geo.block_size;
        let mut i = 0;
        while i < slots.len() {
            let j = (i + 1..slots.len())
                .find(|&j| slots[j] != slots[j - 1] + 1)
                .unwrap_or(slots.len());
            self.counters.data_writes += (j - i) as u64;
            self.put(self.slot_at(slots[i]), &data[i * bs..j * bs])?;
            i = j;
        }
        Ok(())
    }
}

impl<D: BlockDevice> BlockDevice for TxFileDevice<D> {
    fn block_size(&self) -> usize {
        self.geo.block_size
    }
    fn blocks(&self) -> u64 {
        self.geo.blocks
    }
    fn read(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        check(block, buf.len(), self.geo.blocks, self.geo.block_size)?;
        self.read_run(block, buf)
    }
    fn read_run(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        let bs = self.geo.block_size;
        let range = self.run(block, buf.len())?;
        let slots: Vec<u64> = range.map(|b| self.map[b as usize]).collect();
        let mut i = 0;
        while i < slots.len() {
            let j = (i + 1..slots.len())
                .find(|&j| slots[j] != slots[j - 1] + 1)
                .unwrap_or(slots.len());
            self.dev
                .read_run(self.slot_at(slots[i]) / SEC, &mut buf[i * bs..j * bs])?;
            i = j;
        }
        Ok(())
    }
    fn write(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        check(block, data.len(), self.geo.blocks, self.geo.block_size)?;
        self.write_run(block, data)
    }
    fn write_run(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        let range = self.run(block, data.len())?;
        self.usable()?;
        if let Some((b, &tx)) = range
            .clone()
            .find_map(|b| self.owner.get(&b).map(|t| (b, t)))
        {
            return Err(DeviceError::TxConflict { block: b, tx });
        }
        let slots: Vec<u64> = range.map(|b| self.map[b as usize]).collect();
        if slots.iter().any(|s| self.tail.contains(s)) {
            // Recovery would check these slots against the last record: an empty record
            // (or a checkpoint, when the log is full) ends that first.
            self.log_commit(&[])?;
            self.counters.seals += 1;
        }
        self.put_slots(&slots, data)
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.usable()?;
        self.sync()
    }
    fn tx_room(&self) -> u64 {
        self.free_slots()
    }
    fn transactional(&self) -> bool {
        true
    }
    fn tx_begin(&mut self, tx: u64) -> Result<(), DeviceError> {
        self.usable()?;
        self.open.entry(tx).or_default();
        Ok(())
    }
    fn tx_write(&mut self, tx: u64, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        check(block, data.len(), self.geo.blocks, self.geo.block_size)?;
        self.tx_write_run(tx, block, data)
    }
    fn tx_write_run(&mut self, tx: u64, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        let range = self.run(block, data.len())?;
        self.usable()?;
        if let Some((b, &other)) = range
            .clone()
            .find_map(|b| self.owner.get(&b).filter(|&&t| t != tx).map(|t| (b, t)))
        {
            return Err(DeviceError::TxConflict {
                block: b,
                tx: other,
            });
        }
        // Rewriting in the same transaction reuses its slot: no durable mapping names it yet.
        let held = |b: &u64| self.open.get(&tx).is_some_and(|t| t.writes.contains_key(b));
        if range.clone().filter(|b| !held(b)).count() > self.free.len() {
            return Err(DeviceError::TxNoSpace {
                tx,
                spare: self.geo.spare,
            });
        }
        let t = self.open.entry(tx).or_default();
        let bs = self.geo.block_size;
        let mut slots = Vec::with_capacity(range.clone().count());
        for (k, b) in range.enumerate() {
            let slot = match t.writes.get(&b) {
                Some(&(s, _)) => s,
                None => self.free.pop().expect("counted above"),
            };
            t.writes
                .insert(b, (slot, crc32c(&data[k * bs..(k + 1) * bs])));
            self.owner.insert(b, tx);
            slots.push(slot);
        }
        self.put_slots(&slots, data)
    }
    fn tx_commit(&mut self, tx: u64) -> Result<(), DeviceError> {
        self.usable()?;
        let t = self.open.remove(&tx).ok_or(DeviceError::UnknownTx(tx))?;
        for b in t.writes.keys() {
            self.owner.remove(b);
        }
        self.counters.commits += 1;
        if t.writes.is_empty() {
            return self.sync();
        }
        let entries: Vec<(u64, u64, u32)> =
            t.writes.iter().map(|(&b, &(s, c))| (b, s, c)).collect();
        self.log_commit(&entries)
    }
    fn tx_abort(&mut self, tx: u64) -> Result<(), DeviceError> {
        let t = self.open.remove(&tx).ok_or(DeviceError::UnknownTx(tx))?;
        for (b, (s, _)) in t.writes {
            self.owner.remove(&b);
            // Never named by a durable mapping: free at once.
            self.free.push(s);
        }
        self.counters.aborts += 1;
        Ok(())
    }
}

// CRC32C (Castagnoli), slice-by-8; a local copy rather than a new dependency.
const fn crc_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82F6_3B78
            } else {
                c >> 1
            };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut j = 1;
        while j < 8 {
            t[j][i] = (t[j - 1][i] >> 8) ^ t[0][(t[j - 1][i] & 0xff) as usize];
            j += 1;
        }
        i += 1;
    }
    t
}

static CRC: [[u32; 256]; 8] = crc_tables();

fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    let mut c = !crc;
    let mut chunks = data.chunks_exact(8);
    for ch in &mut chunks {
        let lo = c ^ u32::from_le_bytes([ch[0], ch[1], ch[2], ch[3]]);
        c = CRC[7][(lo & 0xff) as usize]
            ^ CRC[6][((lo >> 8) & 0xff) as usize]
            ^ CRC[5][((lo >> 16) & 0xff) as usize]
            ^ CRC[4][(lo >> 24) as usize]
            ^ CRC[3][ch[4] as usize]
            ^ CRC[2][ch[5] as usize]
            ^ CRC[1][ch[6] as usize]
            ^ CRC[0][ch[7] as usize];
    }
    for &b in chunks.remainder() {
        c = CRC[0][((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

fn crc32c(data: &[u8]) -> u32 {
    crc32c_append(0, data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimDevice;

    const BS: usize = 1024;

    fn blk(v: u8) -> Vec<u8> {
        let mut d = vec![v; BS];
        d[SECTOR..].fill(v.wrapping_add(1));
        d
    }

    fn geo(blocks: u64, spare: u64, log_bytes: u64) -> TxGeometry {
        TxGeometry {
            block_size: BS,
            blocks,
            spare,
            log_bytes,
        }
    }

    fn sim(g: TxGeometry) -> TxFileDevice<SimDevice> {
        TxFileDevice::format(
            SimDevice::new(SECTOR, g.file_bytes().unwrap() / SEC).unwrap(),
            g,
        )
        .unwrap()
    }

    /// The durable image, reopened (a crash that lost every volatile write).
    fn reopen(d: TxFileDevice<SimDevice>) -> Result<TxFileDevice<SimDevice>, DeviceError> {
        TxFileDevice::recover(
            SimDevice::from_image(SECTOR, d.into_backing().durable().to_vec()).unwrap(),
        )
    }

    fn recover_bytes(img: Vec<u8>) -> Result<TxFileDevice<SimDevice>, DeviceError> {
        TxFileDevice::recover(SimDevice::from_image(SECTOR, img).unwrap())
    }

    fn read(d: &mut impl BlockDevice, b: u64) -> Vec<u8> {
        let mut buf = vec![0; d.block_size()];
        d.read(b, &mut buf).unwrap();
        buf
    }

    fn bad_msg<T>(r: Result<T, DeviceError>) -> String {
        match r {
            Err(DeviceError::BadTxImage(m)) => m,
            Err(e) => panic!("expected BadTxImage, got {e}"),
            Ok(_) => panic!("expected BadTxImage, got a device"),
        }
    }

    #[test]
    fn crc32c_matches_the_check_value_and_the_bytewise_loop() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for n in 0..data.len() {
            let mut c = !0u32;
            for &b in &data[..n] {
                c = CRC[0][((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
            }
            assert_eq!(crc32c(&data[..n]), !c, "length {n}");
        }
    }

    #[test]
    fn file_round_trip_commit_abort_and_open_transactions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tx.img");
        let mut d = TxFileDevice::create(&path, BS, 16, 8).unwrap();
        assert!(d.transactional());
        d.write(0, &blk(1)).unwrap();
        d.tx_write(1, 2, &blk(2)).unwrap();
        d.tx_write_run(1, 3, &[blk(3), blk(4)].concat()).unwrap();
        d.tx_write(2, 5, &blk(5)).unwrap();
        d.tx_write(3, 6, &blk(6)).unwrap();
        assert_eq!(read(&mut d, 2), vec![0; BS], "uncommitted: invisible");
        let before = d.counters();
        d.tx_commit(1).unwrap();
        let after = d.counters();
        assert_eq!(after.flushes - before.flushes, 1, "one flush per commit");
        assert_eq!(
            after.map_writes - before.map_writes,
            1,
            "one record per commit"
        );
        assert_eq!(read(&mut d, 3), blk(3));
        d.tx_abort(2).unwrap();
        assert_eq!(read(&mut d, 5), vec![0; BS]);
        assert_eq!(d.free_slots(), 7, "8 spare, one held by transaction 3");
        drop(d); // transaction 3 still open
        assert!(is_txflash(&path).unwrap());
        let mut d = TxFileDevice::open(&path).unwrap();
        assert_eq!(
            d.recovery(),
            TxRecovery {
                generation: 1,
                replayed: 1,
                dropped_tail: false
            }
        );
        assert_eq!(read(&mut d, 0), blk(1), "a commit is a flush too");
        for b in 2..5 {
            assert_eq!(read(&mut d, b), blk(b as u8));
        }
        assert_eq!(read(&mut d, 6), vec![0; BS], "open at the crash: gone");
        assert_eq!(d.free_slots(), 8);
        assert!(!is_txflash(&dir.path().join("missing")).is_ok_and(|x| x));
        let plain = dir.path().join("plain.img");
        FileDevice::create(&plain, BS, 4).unwrap();
        assert!(!is_txflash(&plain).unwrap());
        std::fs::write(&plain, b"INT").unwrap();
        assert!(!is_txflash(&plain).unwrap());
    }

    #[test]
    fn errors_conflict_unknown_nospace_and_not_transactional() {
        let mut d = sim(geo(8, 2, 4 * BS as u64));
        d.tx_write(1, 0, &blk(1)).unwrap();
        d.tx_write(1, 0, &blk(2)).unwrap();
        assert_eq!(d.free_slots(), 1, "a rewrite reuses the slot");
        assert!(matches!(
            d.write(0, &blk(3)),
            Err(DeviceError::TxConflict { block: 0, tx: 1 })
        ));
        assert!(matches!(
            d.tx_write(2, 0, &blk(3)),
            Err(DeviceError::TxConflict { block: 0, tx: 1 })
        ));
        d.tx_write(2, 1, &blk(3)).unwrap();
        assert!(matches!(
            d.tx_write(2, 2, &blk(3)),
            Err(DeviceError::TxNoSpace { tx: 2, spare: 2 })
        ));
        // Runs are checked whole before any of it is written.
        assert!(matches!(
            d.tx_write_run(3, 4, &[blk(4), blk(5)].concat()),
            Err(DeviceError::TxNoSpace { tx: 3, spare: 2 })
        ));
        assert!(
            matches!(d.tx_commit(3), Err(DeviceError::UnknownTx(3))),
            "a failed first write opens nothing"
        );
        d.tx_write(3, 6, &blk(6)).unwrap_err(); // no space: still nothing
        assert!(matches!(
            d.write_run(0, &[blk(4), blk(5)].concat()),
            Err(DeviceError::TxConflict { block: 0, tx: 1 })
        ));
        d.tx_abort(1).unwrap();
        assert!(matches!(
            d.write_run(0, &[blk(4), blk(5)].concat()),
            Err(DeviceError::TxConflict { block: 1, tx: 2 })
        ));
        assert_eq!(
            read(&mut d, 0),
            vec![0; BS],
            "a conflict anywhere in the run: none of it written"
        );
        d.tx_write(1, 0, &blk(1)).unwrap();
        d.tx_write(1, 0, &blk(2)).unwrap();
        assert!(matches!(d.tx_commit(7), Err(DeviceError::UnknownTx(7))));
        assert!(matches!(d.tx_abort(7), Err(DeviceError::UnknownTx(7))));
        d.tx_commit(1).unwrap();
        assert!(matches!(d.tx_commit(1), Err(DeviceError::UnknownTx(1))));
        assert_eq!(read(&mut d, 0), blk(2));
        d.tx_begin(9).unwrap();
        d.tx_commit(9).unwrap();
        assert!(matches!(
            d.write(9, &blk(1)),
            Err(DeviceError::OutOfRange { .. })
        ));
        assert!(matches!(
            d.tx_write(1, 0, &blk(1)[..512]),
            Err(DeviceError::BadLength { .. })
        ));

        let mut s = SimDevice::new(BS, 4).unwrap();
        assert!(!s.transactional());
        assert!(matches!(
            s.tx_write(1, 0, &blk(1)),
            Err(DeviceError::NotTransactional)
        ));
        assert!(matches!(
            s.tx_write_run(1, 0, &blk(1)),
            Err(DeviceError::NotTransactional)
        ));
        assert!(matches!(s.tx_commit(1), Err(DeviceError::NotTransactional)));
        assert!(matches!(s.tx_abort(1), Err(DeviceError::NotTransactional)));
        assert!(matches!(s.tx_begin(1), Err(DeviceError::NotTransactional)));
        let dir = tempfile::tempdir().unwrap();
        let mut f = FileDevice::create(&dir.path().join("f"), BS, 4).unwrap();
        assert!(!f.transactional());
        let e = f.tx_write(1, 0, &blk(1)).unwrap_err();
        assert!(matches!(e, DeviceError::NotTransactional));
        assert_eq!(
            e.to_string(),
            "this device has no transactions (make it with --device txflash)"
        );
    }

    #[test]
    fn checkpoints_when_the_log_fills_and_for_a_transaction_larger_than_the_log() {
        // A one-block log: two one-sector records fit, then checkpoints.
        let mut d = sim(geo(40, 30, BS as u64));
        for i in 0..10u8 {
            d.tx_write(i as u64, i as u64 % 4, &blk(i)).unwrap();
            d.tx_commit(i as u64).unwrap();
        }
        assert!(d.counters().checkpoints >= 3, "{:?}", d.counters());
        // 30 entries need 628 bytes: two sectors; the log is two sectors, and it is not empty.
        for b in 0..30 {
            d.tx_write(99, b + 10, &blk(b as u8 + 100)).unwrap();
        }
        let c = d.counters().checkpoints;
        d.tx_commit(99).unwrap();
        assert_eq!(d.counters().checkpoints, c + 1);
        let mut d = reopen(d).unwrap();
        for i in 6..10u8 {
            assert_eq!(read(&mut d, i as u64 % 4), blk(i));
        }
        for b in 0..30 {
            assert_eq!(read(&mut d, b + 10), blk(b as u8 + 100));
        }
        assert_eq!(d.free_slots(), 30);
        // Once more after recovery: the generations go on.
        d.tx_write(1, 0, &blk(7)).unwrap();
        d.tx_commit(1).unwrap();
        let g = d.recovery().generation;
        let mut d = reopen(d).unwrap();
        assert!(d.recovery().generation >= g);
        assert_eq!(read(&mut d, 0), blk(7));
    }

    #[test]
    fn a_plain_write_into_the_last_commits_slot_seals_it_first() {
        let mut d = sim(geo(8, 4, 4 * BS as u64));
        d.tx_write(1, 3, &blk(1)).unwrap();
        d.tx_commit(1).unwrap();
        d.write(4, &blk(2)).unwrap();
        assert_eq!(d.counters().seals, 0, "block 4 was not in the last commit");
        let f = d.counters().flushes;
        d.write(3, &blk(3)).unwrap();
        assert_eq!((d.counters().seals, d.counters().flushes), (1, f + 1));
        d.write(3, &blk(4)).unwrap();
        assert_eq!(d.counters().seals, 1, "once");
        d.flush().unwrap();
        let mut d = reopen(d).unwrap();
        assert_eq!(read(&mut d, 3), blk(4));
        assert_eq!(d.recovery().replayed, 2, "the commit and the seal");
    }

    #[test]
    fn a_commit_whose_data_did_not_land_is_dropped_and_erased() {
        let mut d = sim(geo(8, 4, 4 * BS as u64));
        d.tx_write(1, 1, &blk(1)).unwrap();
        d.tx_commit(1).unwrap();
        d.tx_write(2, 2, &blk(2)).unwrap();
        d.tx_commit(2).unwrap();
        let lay = d.geo.layout().unwrap();
        let slot2 = d.map[2];
        let mut img = d.into_backing().durable().to_vec();
        // Transaction 2's data never reached the media: its record is there, its slot zero.
        let at = (lay.slot_at + slot2 * BS as u64) as usize;
        img[at..at + BS].fill(0);
        let mut d = recover_bytes(img).unwrap();
        assert_eq!(
            d.recovery(),
            TxRecovery {
                generation: 1,
                replayed: 1,
                dropped_tail: true
            }
        );
        assert_eq!(read(&mut d, 1), blk(1));
        assert_eq!(read(&mut d, 2), vec![0; BS]);
        // The record was erased: putting the data back cannot revive it.
        let mut img = d.into_backing().durable().to_vec();
        img[at..at + BS].copy_from_slice(&blk(2));
        let mut d = recover_bytes(img).unwrap();
        assert_eq!(read(&mut d, 2), vec![0; BS]);
        assert!(!d.recovery().dropped_tail);
    }

    #[test]
    fn damage_is_reported_never_a_panic() {
        let g = geo(8, 4, 4 * BS as u64);
        let lay = g.layout().unwrap();
        let mut d = sim(g);
        for i in 0..3u8 {
            d.tx_write(i as u64, i as u64, &blk(i + 1)).unwrap();
            d.tx_commit(i as u64).unwrap();
        }
        let good = d.into_backing().durable().to_vec();
        recover_bytes(good.clone()).unwrap();
        let flip = |at: u64| {
            let mut img = good.clone();
            img[at as usize] ^= 0x40;
            img
        };
        // Root 1 holds generation 1; root 0 is empty.
        let m = bad_msg(recover_bytes(flip(SEC + 20)));
        assert!(
            m.contains("no valid root record")
                && m.contains("root 0: empty")
                && m.contains("root 1: checksum mismatch"),
            "{m}"
        );
        let m = bad_msg(recover_bytes(flip(lay.table_at[1] + 9)));
        assert!(
            m.contains("mapping table 1 (generation 1) fails its checksum"),
            "{m}"
        );
        // The first of three records: the later ones show it is damage, not a torn tail.
        let m = bad_msg(recover_bytes(flip(lay.log_at + 30)));
        assert!(
            m.contains("commit record 1 at log offset 0") && m.contains("the log is damaged"),
            "{m}"
        );
        let m = bad_msg(recover_bytes(vec![0; good.len()]));
        assert!(m.contains("not a txflash image"), "{m}");
        let m = bad_msg(recover_bytes(good[..good.len() - SECTOR].to_vec()));
        assert!(m.contains("truncated"), "{m}");
        let m = bad_msg(recover_bytes(good[..SECTOR].to_vec()));
        assert!(m.contains("too short"), "{m}");
        // Another version, checksummed properly.
        let mut img = good.clone();
        img[SECTOR + 8] = 2;
        let crc = crc32c(&img[SECTOR..SECTOR + 60]);
        img[SECTOR + 60..SECTOR + 64].copy_from_slice(&crc.to_le_bytes());
        let m = bad_msg(recover_bytes(img));
        assert!(
            m.contains("format version 2; this build reads version 1"),
            "{m}"
        );
        // A properly checksummed root with an absurd geometry.
        let mut img = good.clone();
        img[SECTOR + 24..SECTOR + 32].copy_from_slice(&u64::MAX.to_le_bytes());
        let crc = crc32c(&img[SECTOR..SECTOR + 60]);
        img[SECTOR + 60..SECTOR + 64].copy_from_slice(&crc.to_le_bytes());
        let m = bad_msg(recover_bytes(img));
        assert!(m.contains("impossible geometry"), "{m}");
        // Every single-byte flip of the metadata: an error or a device, never a panic.
        for at in (0..lay.slot_at).step_by(7) {
            let _ = recover_bytes(flip(at));
        }
    }

    #[test]
    fn a_damaged_newest_root_with_later_commits_is_reported() {
        let g = geo(8, 4, BS as u64);
        let mut d = sim(g);
        for i in 0..4u8 {
            d.tx_write(i as u64, 0, &blk(i)).unwrap();
            d.tx_commit(i as u64).unwrap();
        }
        assert!(d.counters().checkpoints >= 1);
        d.tx_write(9, 1, &blk(9)).unwrap();
        d.tx_commit(9).unwrap();
        let gen = d.gen;
        assert!(d.cursor > 0, "records after the checkpoint");
        let mut img = d.into_backing().durable().to_vec();
        img[(gen % 2 * SEC) as usize + 40] ^= 1;
        let m = bad_msg(recover_bytes(img));
        assert!(
            m.contains(&format!(
                "the log holds a commit record of generation {gen}"
            )) && m.contains("a root record is damaged"),
            "{m}"
        );
    }

    /// Counts the backing's write calls.
    struct Calls(SimDevice, u64);
    impl BlockDevice for Calls {
        fn block_size(&self) -> usize {
            self.0.block_size()
        }
        fn blocks(&self) -> u64 {
            self.0.blocks()
        }
        fn read(&mut self, b: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
            self.0.read(b, buf)
        }
        fn write(&mut self, b: u64, d: &[u8]) -> Result<(), DeviceError> {
            self.1 += 1;
            self.0.write(b, d)
        }
        fn write_run(&mut self, b: u64, d: &[u8]) -> Result<(), DeviceError> {
            self.1 += 1;
            for (k, c) in d.chunks(SECTOR).enumerate() {
                self.0.write(b + k as u64, c)?;
            }
            Ok(())
        }
        fn flush(&mut self) -> Result<(), DeviceError> {
            self.0.flush()
        }
    }

    #[test]
    fn runs_of_consecutive_slots_are_one_backing_write() {
        let g = geo(8, 8, 4 * BS as u64);
        let mut d = TxFileDevice::format(
            Calls(
                SimDevice::new(SECTOR, g.file_bytes().unwrap() / SEC).unwrap(),
                0,
            ),
            g,
        )
        .unwrap();
        let run: Vec<u8> = (0..4).flat_map(|i| blk(i + 1)).collect();
        let n = d.backing().1;
        d.write_run(2, &run).unwrap();
        d.tx_write_run(1, 0, &run).unwrap(); // slots 8..12
        assert_eq!(d.backing().1 - n, 2);
        assert_eq!(d.counters().data_writes, 8);
        let mut back = vec![0; 4 * BS];
        d.tx_commit(1).unwrap();
        d.read_run(0, &mut back).unwrap();
        assert_eq!(back, run);
        d.read_run(2, &mut back).unwrap();
        assert!(
            back[2 * BS..] == run[2 * BS..],
            "blocks 4 and 5: the plain run's last two"
        );
    }

    #[test]
    fn bad_geometry_is_refused() {
        for g in [
            geo(0, 1, BS as u64),
            geo(8, 0, BS as u64),
            geo(8, 1, 100),
            TxGeometry {
                block_size: 700,
                blocks: 8,
                spare: 1,
                log_bytes: 1400,
            },
            geo(u64::MAX / 4, 1, BS as u64),
        ] {
            assert!(
                matches!(g.file_bytes(), Err(DeviceError::BadTxGeometry(_))),
                "{g:?}"
            );
        }
        let g = geo(8, 2, BS as u64);
        let small = SimDevice::new(SECTOR, g.file_bytes().unwrap() / SEC - 1).unwrap();
        assert!(matches!(
            TxFileDevice::format(small, g),
            Err(DeviceError::BadTxGeometry(_))
        ));
        let wide = SimDevice::new(BS, 100).unwrap();
        assert!(matches!(
            TxFileDevice::format(wide, g),
            Err(DeviceError::BadTxGeometry(_))
        ));
        assert_eq!(
            TxGeometry::new(4096, 1 << 20, 64).log_bytes,
            8 << 20,
            "the default log: one table"
        );
        assert_eq!(TxGeometry::new(4096, 100, 64).log_bytes, 64 << 10);
    }
}
