//! On-disk layout (format version 3; version 2 is read too), all in 4 KiB blocks:
//!
//! | blocks | what |
//! |---|---|
//! | 0 | superblock: geometry, written once by mkfs |
//! | 1, 2 | checkpoint headers, written alternately; the valid one with the higher generation wins |
//! | 3 .. 3+J | journal: commit records, restarted at its first block by every checkpoint |
//! | rest | data area: file blocks and metadata snapshots |
//!
//! A checkpoint's metadata is a chain: a base snapshot (all of it) and up to
//! [`MAX_DELTAS`] delta segments (the inodes changed since the previous checkpoint), so a
//! checkpoint costs in proportion to what changed. A header without deltas keeps the shape
//! and magic of the first version of this format (`INTACTCP`); one with deltas has its own
//! magic (`INTACTC2`), so images written before deltas existed still mount.
//!
//! A header holds at most [`MAX_SNAPSHOT_EXTENTS`] extents inline. A chain written into
//! free space split into more pieces than that (a nearly full file system) keeps its extent
//! list in a *run table* instead: a segment of its own, at most [`MAX_TABLE_EXTENTS`]
//! extents, named by a header with magic `INTACTC3` (format version 3). The table belongs
//! to its header alone: the next checkpoint writes a new one and frees the old.
//!
//! Every structure carries a CRC-32C over its bytes. Headers and records are postcard
//! encodings behind a fixed 16-byte frame: magic (8), payload length (4), CRC (4).

use crate::meta::{LogOp, BLOCK};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

/// 2: inodes carry extended attributes. 3: checkpoint headers may keep the chain's extent
/// list in a run table (`INTACTC3`); mkfs writes 3, and version 2 images still mount (a
/// build that reads only version 2 refuses version 3 images instead of missing their
/// tables).
pub const FORMAT_VERSION: u32 = 3;
/// The oldest format version this build reads.
pub const FORMAT_VERSION_MIN: u32 = 2;
pub const SB_MAGIC: &[u8; 8] = b"INTACTSB";
pub const CP_MAGIC: &[u8; 8] = b"INTACTCP";
/// A checkpoint header that lists delta segments after its base.
pub const CP2_MAGIC: &[u8; 8] = b"INTACTC2";
/// A checkpoint header whose chain extents are in a run table ([`RunTable`]).
pub const CP3_MAGIC: &[u8; 8] = b"INTACTC3";
pub const REC_MAGIC: &[u8; 8] = b"INTACTJR";
pub const SUPERBLOCK: u64 = 0;
pub const CHECKPOINT_SLOTS: [u64; 2] = [1, 2];
pub const JOURNAL_START: u64 = 3;
const FRAME: usize = 16;
/// A checkpoint header holds the snapshot's extent list inline: at most this many extents
/// for the base and all deltas together.
pub const MAX_SNAPSHOT_EXTENTS: usize = 200;
/// Most extents a run table itself may occupy (they are listed in the header).
pub const MAX_TABLE_EXTENTS: usize = 64;
/// Most extents a chain may have through a run table: bounds what a damaged table makes a
/// reader allocate.
pub const MAX_CHAIN_EXTENTS: usize = 1 << 22;
/// Most delta segments a chain holds; the checkpoint after that writes a new base.
pub const MAX_DELTAS: usize = 8;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Superblock {
    pub version: u32,
    pub block_size: u32,
    pub blocks: u64,
    pub journal_start: u64,
    pub journal_blocks: u64,
    /// Chosen at mkfs; records and checkpoints of another file system never match.
    pub uuid: u64,
}

impl Superblock {
    pub fn data_start(&self) -> u64 {
        self.journal_start + self.journal_blocks
    }
    pub fn journal_end(&self) -> u64 {
        self.journal_start + self.journal_blocks
    }
    pub fn check(&self, device_blocks: u64) -> Result<(), String> {
        if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&self.version) {
            return Err(format!(
                "format version {} (this build reads versions {FORMAT_VERSION_MIN} to {FORMAT_VERSION})",
                self.version
            ));
        }
        if self.block_size as usize != BLOCK {
            return Err(format!(
                "block size {} (intactfs uses {BLOCK})",
                self.block_size
            ));
        }
        if self.blocks > device_blocks {
            return Err(format!(
                "the superblock says {} blocks but the device has {device_blocks}",
                self.blocks
            ));
        }
        // checked_add: a damaged journal size must not overflow (data_start() is used only
        // after this check).
        if self.journal_start != JOURNAL_START
            || self.journal_blocks < 2
            || self
                .journal_start
                .checked_add(self.journal_blocks)
                .is_none_or(|e| e >= self.blocks)
        {
            return Err(format!(
                "journal at {}+{} does not fit {} blocks",
                self.journal_start, self.journal_blocks, self.blocks
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub uuid: u64,
    /// Higher wins; also the epoch of the journal records that follow it.
    pub generation: u64,
    /// Where the base metadata snapshot lives: (first block, count).
    pub snapshot: Vec<(u64, u64)>,
    pub snapshot_bytes: u64,
    pub snapshot_crc: u32,
    /// The first record to replay: at this block, with this sequence number.
    pub journal_pos: u64,
    pub next_seq: u64,
    /// Every record up to this sequence number is known durable.
    pub durable_upto: u64,
    /// Delta segments applied on the base in this order (each a [`Delta`]). Last, so that
    /// the fields above keep the first version's encoding.
    pub deltas: Vec<Segment>,
    /// Where the run table that lists `snapshot` and `deltas` lives, if the header does
    /// not list them inline (a header with magic `INTACTC3`). Decoding such a header
    /// leaves `snapshot` and `deltas` empty until [`Checkpoint::resolve`] reads the table.
    pub table: Option<Segment>,
}

/// The chain's extents when a header cannot hold them inline: the content of a run table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunTable {
    /// The header's generation: a table left behind by another checkpoint is refused.
    pub generation: u64,
    pub snapshot: Vec<(u64, u64)>,
    pub snapshot_bytes: u64,
    pub snapshot_crc: u32,
    pub deltas: Vec<Segment>,
}

/// The header of a chain with a run table (`INTACTC3`).
#[derive(Serialize, Deserialize)]
struct CheckpointV3 {
    uuid: u64,
    generation: u64,
    journal_pos: u64,
    next_seq: u64,
    durable_upto: u64,
    table: Segment,
}

/// The second version's header, with deltas inline (`INTACTC2`).
#[derive(Serialize, Deserialize)]
struct CheckpointV2 {
    uuid: u64,
    generation: u64,
    snapshot: Vec<(u64, u64)>,
    snapshot_bytes: u64,
    snapshot_crc: u32,
    journal_pos: u64,
    next_seq: u64,
    durable_upto: u64,
    deltas: Vec<Segment>,
}

/// Where one delta segment lives and what its bytes must checksum to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub runs: Vec<(u64, u64)>,
    pub bytes: u64,
    pub crc: u32,
}

/// The content of a delta segment: the inodes changed since the previous checkpoint of
/// the chain, each with its new value or `None` if it was freed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delta<I> {
    /// Its place in the chain (0 = first after the base) and the base's CRC: a delta moved
    /// to another place or chain is refused, not applied out of order.
    pub index: u32,
    pub base_crc: u32,
    pub next_ino: u64,
    pub inodes: Vec<(u64, Option<I>)>,
}

/// The first version's header, without deltas: still written when a chain has none.
#[derive(Serialize, Deserialize)]
struct CheckpointV1 {
    uuid: u64,
    generation: u64,
    snapshot: Vec<(u64, u64)>,
    snapshot_bytes: u64,
    snapshot_crc: u32,
    journal_pos: u64,
    next_seq: u64,
    durable_upto: u64,
}

impl Checkpoint {
    /// The header for snapshot bytes `snap` stored at `runs`: the journal restarts at its
    /// first block with sequence number `next_seq`, and every earlier record is durable.
    pub fn new(
        sb: &Superblock,
        generation: u64,
        runs: Vec<(u64, u64)>,
        snap: &[u8],
        next_seq: u64,
    ) -> Checkpoint {
        Checkpoint {
            uuid: sb.uuid,
            generation,
            snapshot: runs,
            snapshot_bytes: snap.len() as u64,
            snapshot_crc: snapshot_crc(snap),
            journal_pos: sb.journal_start,
            next_seq,
            durable_upto: next_seq - 1,
            deltas: Vec::new(),
            table: None,
        }
    }

    /// Every extent the checkpoint holds: base, deltas in order, then its run table's.
    pub fn meta_runs(&self) -> Vec<(u64, u64)> {
        self.chain_runs()
            .into_iter()
            .chain(self.table.iter().flat_map(|t| t.runs.iter().copied()))
            .collect()
    }

    /// The extents of the base and the deltas (what a run table lists).
    pub fn chain_runs(&self) -> Vec<(u64, u64)> {
        self.snapshot
            .iter()
            .chain(self.deltas.iter().flat_map(|d| d.runs.iter()))
            .copied()
            .collect()
    }

    /// Whether the chain's extents fit the header inline (else they need a run table).
    pub fn fits_inline(&self) -> bool {
        self.chain_runs().len() <= MAX_SNAPSHOT_EXTENTS
    }

    /// The run table's content for this header's chain.
    pub fn run_table(&self) -> RunTable {
        RunTable {
            generation: self.generation,
            snapshot: self.snapshot.clone(),
            snapshot_bytes: self.snapshot_bytes,
            snapshot_crc: self.snapshot_crc,
            deltas: self.deltas.clone(),
        }
    }

    /// Fills in the chain from its run table's bytes (read from `self.table`'s extents and
    /// checked against its CRC by the caller).
    pub fn resolve(&mut self, table_bytes: &[u8]) -> Result<(), String> {
        let t: RunTable = postcard::from_bytes(table_bytes)
            .map_err(|e| format!("run table does not decode: {e}"))?;
        if t.generation != self.generation {
            return Err(format!(
                "run table of generation {}, not {}",
                t.generation, self.generation
            ));
        }
        self.snapshot = t.snapshot;
        self.snapshot_bytes = t.snapshot_bytes;
        self.snapshot_crc = t.snapshot_crc;
        self.deltas = t.deltas;
        Ok(())
    }

    /// The framed header block: the first version's shape when there are no deltas, the
    /// third's when the chain's extents are in a run table.
    pub fn encode(&self) -> Vec<u8> {
        if let Some(table) = &self.table {
            let v3 = CheckpointV3 {
                uuid: self.uuid,
                generation: self.generation,
                journal_pos: self.journal_pos,
                next_seq: self.next_seq,
                durable_upto: self.durable_upto,
                table: table.clone(),
            };
            return encode(CP3_MAGIC, &v3);
        }
        if self.deltas.is_empty() {
            let v1 = CheckpointV1 {
                uuid: self.uuid,
                generation: self.generation,
                snapshot: self.snapshot.clone(),
                snapshot_bytes: self.snapshot_bytes,
                snapshot_crc: self.snapshot_crc,
                journal_pos: self.journal_pos,
                next_seq: self.next_seq,
                durable_upto: self.durable_upto,
            };
            encode(CP_MAGIC, &v1)
        } else {
            let v2 = CheckpointV2 {
                uuid: self.uuid,
                generation: self.generation,
                snapshot: self.snapshot.clone(),
                snapshot_bytes: self.snapshot_bytes,
                snapshot_crc: self.snapshot_crc,
                journal_pos: self.journal_pos,
                next_seq: self.next_seq,
                durable_upto: self.durable_upto,
                deltas: self.deltas.clone(),
            };
            encode(CP2_MAGIC, &v2)
        }
    }

    /// Reads a header of any shape; one with a run table still needs [`Self::resolve`].
    pub fn decode(bytes: &[u8]) -> Result<Checkpoint, FrameError> {
        if bytes.len() >= 8 && &bytes[..8] == CP3_MAGIC {
            let v: CheckpointV3 = decode(CP3_MAGIC, bytes)?;
            return Ok(Checkpoint {
                uuid: v.uuid,
                generation: v.generation,
                snapshot: Vec::new(),
                snapshot_bytes: 0,
                snapshot_crc: 0,
                journal_pos: v.journal_pos,
                next_seq: v.next_seq,
                durable_upto: v.durable_upto,
                deltas: Vec::new(),
                table: Some(v.table),
            });
        }
        if bytes.len() >= 8 && &bytes[..8] == CP2_MAGIC {
            let v: CheckpointV2 = decode(CP2_MAGIC, bytes)?;
            return Ok(Checkpoint {
                uuid: v.uuid,
                generation: v.generation,
                snapshot: v.snapshot,
                snapshot_bytes: v.snapshot_bytes,
                snapshot_crc: v.snapshot_crc,
                journal_pos: v.journal_pos,
                next_seq: v.next_seq,
                durable_upto: v.durable_upto,
                deltas: v.deltas,
                table: None,
            });
        }
        let v: CheckpointV1 = decode(CP_MAGIC, bytes)?;
        Ok(Checkpoint {
            uuid: v.uuid,
            generation: v.generation,
            snapshot: v.snapshot,
            snapshot_bytes: v.snapshot_bytes,
            snapshot_crc: v.snapshot_crc,
            journal_pos: v.journal_pos,
            next_seq: v.next_seq,
            durable_upto: v.durable_upto,
            deltas: Vec::new(),
            table: None,
        })
    }
}

/// One commit: a transaction of one stream or of streams merged because their operations
/// were related.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub uuid: u64,
    pub epoch: u64,
    pub seq: u64,
    /// Every record up to this one was durable when this one was written (its data blocks
    /// may have been reused since, so recovery checks data only for later records).
    pub durable_upto: u64,
    /// For each stream the record covers: how many of its operations are committed with it.
    pub streams: Vec<(u64, u64)>,
    pub ops: Vec<LogOp>,
}

/// Frames `value` with `magic`, its length and a CRC, padded to whole blocks.
pub fn encode<T: Serialize>(magic: &[u8; 8], value: &T) -> Vec<u8> {
    let payload =
        postcard::to_stdvec(value).expect("in-memory serialization of plain data cannot fail");
    let mut out = Vec::with_capacity(FRAME + payload.len());
    out.extend_from_slice(magic);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    let mut crc = crc32c::crc32c(&out[..12]);
    crc = crc32c::crc32c_append(crc, &payload);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&payload);
    let padded = out.len().div_ceil(BLOCK) * BLOCK;
    out.resize(padded, 0);
    out
}

/// A run table's bytes (raw postcard, checked by the CRC its header's segment carries, as
/// the snapshot's).
pub fn encode_table(t: &RunTable) -> Vec<u8> {
    postcard::to_stdvec(t).expect("in-memory serialization of plain data cannot fail")
}

/// How a framed structure failed to read.
#[derive(Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Not this structure at all (or never written).
    Magic,
    /// The frame claims more bytes than `available`.
    Length(u64),
    Crc,
    Decode(String),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Magic => write!(f, "bad magic number"),
            FrameError::Length(n) => write!(f, "claims {n} bytes, more than there is room for"),
            FrameError::Crc => write!(f, "checksum mismatch"),
            FrameError::Decode(e) => {
                write!(f, "checksum matches but the content does not decode: {e}")
            }
        }
    }
}

/// Total bytes (frame + payload, before padding) a frame in `head` claims, if its magic
/// matches: lets a reader fetch the rest of a multi-block record.
pub fn framed_len(magic: &[u8; 8], head: &[u8]) -> Result<u64, FrameError> {
    if head.len() < FRAME || &head[..8] != magic {
        return Err(FrameError::Magic);
    }
    Ok(FRAME as u64 + u32::from_le_bytes(head[8..12].try_into().expect("4 bytes")) as u64)
}

/// Checks and decodes a frame written by [`encode`].
pub fn decode<T: DeserializeOwned>(magic: &[u8; 8], bytes: &[u8]) -> Result<T, FrameError> {
    let total = framed_len(magic, bytes)?;
    if total > bytes.len() as u64 {
        return Err(FrameError::Length(total));
    }
    let want = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
    let mut crc = crc32c::crc32c(&bytes[..12]);
    crc = crc32c::crc32c_append(crc, &bytes[FRAME..total as usize]);
    if crc != want {
        return Err(FrameError::Crc);
    }
    postcard::from_bytes(&bytes[FRAME..total as usize])
        .map_err(|e| FrameError::Decode(e.to_string()))
}

/// The snapshot is raw postcard bytes, checked by the CRC in the checkpoint header.
pub fn snapshot_crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

pub fn block_crc(block: &[u8]) -> u32 {
    crc32c::crc32c(block)
}
