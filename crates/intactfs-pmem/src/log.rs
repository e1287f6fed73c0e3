//! The log area (002 §III-D): an array of 64-byte entries, each exactly one cacheline, so an
//! entry never crosses a line. Layout of an entry (little-endian):
//!
//! | bytes  | field                                                                 |
//! |--------|-----------------------------------------------------------------------|
//! | 0..8   | transaction id                                                        |
//! | 8..16  | sequence number (global, increasing: undo order, diagnostics)         |
//! | 16     | kind: 1 undo (metadata), 2 redo (data), 3 commit                      |
//! | 17     | undo: payload length (8, 16 or 24)                                    |
//! | 24..56 | undo: target offset, old bytes (24) · redo: ino, lbn, pending block, cacheline bitmap · commit: commit sequence, redo count |
//! | 56..64 | valid word: `tag << 32 | crc32c(bytes 0..56)`; 0 = free              |
//!
//! Two protocols (the simulated device may write back any word of a line at any moment, so
//! the paper's same-line ordering argument is not relied on):
//! * **Commit records, in two phases** (tag [`TAG`]): the body is stored and flushed, a
//!   fence makes it persistent, then the valid word is stored with one 8-byte atomic store
//!   and flushed. A valid word therefore always covers a persistent body, and one whose
//!   checksum does not match its body cannot come from a crash: mount refuses the image.
//!   The checksum is only a check against damage here.
//! * **Undo and redo entries, whole** (tag [`TAG_WHOLE`], format 6): body and valid word are
//!   stored together and flushed once; the fence that follows is the caller's. A crash
//!   before that fence may leave any mix of the slot's old and new words, so the
//!   checksum is what tells a whole entry from a torn one: a torn entry is where a torn
//!   write could go unseen, and mount frees it. That is safe because nothing depends on
//!   such an entry yet: an undo entry's target is stored in place only after its fence,
//!   and a redo entry's transaction commits only after the fence (fence A) that follows
//!   it, so a torn entry belongs to a transaction that is not committed and whose in-place
//!   changes never reached pmem. Why not commit records too: a commit record made whole in
//!   one store would need its own checksum over the data it commits to tell a torn commit
//!   from a complete one; the two-phase record needs none. The one gap, accepted as in any
//!   checksummed log: a torn entry whose mix of old and new words happens to match its
//!   CRC-32C (about 1 in 2^32 per torn entry) is read as whole.
//!
//! Freeing an entry stores 0 in its valid word (atomic) and persists it before the slot is
//! written again.

use crate::layout::{Geometry, LOG_ENTRY};
use crate::mutation::{self, Mutation};
use intactfs_device::{PmemDevice, PmemError};
use std::collections::BTreeSet;

/// The valid word's tag of an entry written in two phases (commit records).
pub const TAG: u64 = 0x1a7c_7a61;
/// The valid word's tag of an entry written whole, body and valid word in one go (undo and
/// redo entries, format 6): a checksum mismatch under it is a torn write, not damage.
pub const TAG_WHOLE: u64 = 0x1a7c_7a62;
pub const BODY: usize = 56;
/// Old bytes one undo entry holds.
pub const UNDO_PAYLOAD: usize = 24;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// Old content of `old.len()` bytes at byte offset `target` (word-aligned, a multiple of
    /// 8 bytes, at most [`UNDO_PAYLOAD`]).
    Undo { target: u64, old: Vec<u8> },
    /// The cachelines `bitmap` of pending block `pblk` hold new data of block `lbn` of `ino`.
    Redo {
        ino: u64,
        lbn: u64,
        pblk: u64,
        bitmap: u64,
    },
    /// The transaction committed, as the `cseq`-th commit (commit order for redo).
    Commit { cseq: u64, redo: u64 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub tx: u64,
    pub seq: u64,
    pub body: Body,
}

impl Entry {
    pub fn encode(&self) -> [u8; BODY] {
        let mut b = [0u8; BODY];
        b[0..8].copy_from_slice(&self.tx.to_le_bytes());
        b[8..16].copy_from_slice(&self.seq.to_le_bytes());
        let put =
            |b: &mut [u8; BODY], o: usize, v: u64| b[o..o + 8].copy_from_slice(&v.to_le_bytes());
        match &self.body {
            Body::Undo { target, old } => {
                b[16] = 1;
                b[17] = old.len() as u8;
                put(&mut b, 24, *target);
                b[32..32 + old.len()].copy_from_slice(old);
            }
            Body::Redo {
                ino,
                lbn,
                pblk,
                bitmap,
            } => {
                b[16] = 2;
                put(&mut b, 24, *ino);
                put(&mut b, 32, *lbn);
                put(&mut b, 40, *pblk);
                put(&mut b, 48, *bitmap);
            }
            Body::Commit { cseq, redo } => {
                b[16] = 3;
                put(&mut b, 24, *cseq);
                put(&mut b, 32, *redo);
            }
        }
        b
    }

    /// Decodes a 64-byte slot: free (valid word 0), torn (a whole-written entry whose
    /// checksum does not match: a crash before its fence), or an entry; an error when a
    /// two-phase valid word does not match its body, the tag is unknown, an entry carries
    /// the other protocol's tag, or the body is malformed.
    pub fn decode(slot: &[u8; LOG_ENTRY as usize]) -> Result<Slot, String> {
        let vw = u64::from_le_bytes(slot[56..64].try_into().expect("8 bytes"));
        if vw == 0 {
            return Ok(Slot::Free);
        }
        let body: &[u8; BODY] = slot[..BODY].try_into().expect("56 bytes");
        let whole = match vw >> 32 {
            TAG => false,
            TAG_WHOLE => true,
            t => return Err(format!("valid word {vw:#018x} has the unknown tag {t:#x}")),
        };
        if vw != tagged(vw >> 32, body) {
            if whole {
                return Ok(Slot::Torn);
            }
            return Err(format!("valid word {vw:#018x} does not match the entry's checksum ({:#018x}): a valid flag is only ever written over a persistent body", valid_word(body)));
        }
        if whole != matches!(body[16], 1 | 2) {
            return Err(format!(
                "an entry of kind {} under the tag {:#x}: undo and redo entries are written whole, commit records in two phases",
                body[16],
                vw >> 32
            ));
        }
        let at = |o: usize| u64::from_le_bytes(body[o..o + 8].try_into().expect("8 bytes"));
        let (tx, seq) = (at(0), at(8));
        let body = match body[16] {
            1 => {
                let len = body[17] as usize;
                if len == 0 || len > UNDO_PAYLOAD || !len.is_multiple_of(8) {
                    return Err(format!("undo entry with payload length {len}"));
                }
                Body::Undo {
                    target: at(24),
                    old: body[32..32 + len].to_vec(),
                }
            }
            2 => Body::Redo {
                ino: at(24),
                lbn: at(32),
                pblk: at(40),
                bitmap: at(48),
            },
            3 => Body::Commit {
                cseq: at(24),
                redo: at(32),
            },
            k => return Err(format!("entry of unknown kind {k}")),
        };
        Ok(Slot::Entry(Entry { tx, seq, body }))
    }
}

/// What a log slot holds at mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slot {
    Free,
    /// A whole-written entry a crash tore before its fence: nothing depends on it.
    Torn,
    Entry(Entry),
}

fn tagged(tag: u64, body: &[u8; BODY]) -> u64 {
    tag << 32 | crc32c::crc32c(body) as u64
}

/// The valid word of a two-phase entry (a commit record).
pub fn valid_word(body: &[u8; BODY]) -> u64 {
    tagged(TAG, body)
}

/// The valid word of a whole-written entry (undo, redo).
pub fn valid_word_whole(body: &[u8; BODY]) -> u64 {
    tagged(TAG_WHOLE, body)
}

/// The volatile log allocator: free slots (lowest first, so slots are reused soon and the
/// simulation sees reuse), and slots promised to open transactions (their redo entries and
/// commit record, written at commit).
#[derive(Debug, Default)]
pub struct LogSpace {
    pub free: BTreeSet<u64>,
    pub reserved: u64,
    pub total: u64,
}

impl LogSpace {
    /// Free slots not promised to anyone.
    pub fn available(&self) -> u64 {
        (self.free.len() as u64).saturating_sub(self.reserved)
    }
    pub fn used(&self) -> u64 {
        let free = self.free.len() as u64;
        assert!(
            free <= self.total,
            "log free slots {free} exceed its {} entries",
            self.total
        );
        self.total - free
    }
    pub fn take(&mut self) -> Option<u64> {
        self.free.pop_first()
    }
}

/// Stores entry bodies and schedules their write-back (the caller fences, then calls
/// [`set_valid`]). Returns each slot's valid word.
pub fn write_bodies<P: PmemDevice>(
    dev: &mut P,
    g: &Geometry,
    items: &[(u64, Entry)],
) -> Result<Vec<(u64, u64)>, PmemError> {
    let mut out = Vec::with_capacity(items.len());
    for (slot, e) in items {
        let b = e.encode();
        let off = g.log_off(*slot);
        dev.write(off, &b)?;
        dev.clwb(off, LOG_ENTRY)?;
        let vw = valid_word(&b);
        if mutation::active(Mutation::ValidFlagFirst) {
            // The bug: the valid flag goes out with the body, before the body is persistent.
            dev.store_u64(off + BODY as u64, vw)?;
        }
        out.push((*slot, vw));
    }
    Ok(out)
}

/// Stores valid words (after the bodies were made persistent by a fence) and schedules
/// their write-back; the caller fences.
pub fn set_valid<P: PmemDevice>(
    dev: &mut P,
    g: &Geometry,
    flags: &[(u64, u64)],
) -> Result<(), PmemError> {
    for &(slot, vw) in flags {
        let off = g.log_off(slot) + BODY as u64;
        dev.store_u64(off, vw)?;
        dev.clwb(off, 8)?;
    }
    Ok(())
}

/// Frees entries: stores 0 in each valid word (atomic) and schedules the write-back; the
/// caller fences before reusing the slots.
pub fn invalidate<P: PmemDevice>(
    dev: &mut P,
    g: &Geometry,
    slots: &[u64],
) -> Result<(), PmemError> {
    for &slot in slots {
        let off = g.log_off(slot) + BODY as u64;
        dev.store_u64(off, 0)?;
        dev.clwb(off, 8)?;
    }
    Ok(())
}

/// Stores undo or redo entries whole, body and valid word (tag [`TAG_WHOLE`]) in one
/// store each, and schedules the write-back of each line once; the caller fences before
/// anything may depend on them (an undo entry's target, a commit record's valid word).
pub fn write_whole<P: PmemDevice>(
    dev: &mut P,
    g: &Geometry,
    items: &[(u64, Entry)],
) -> Result<(), PmemError> {
    let mut line = [0u8; LOG_ENTRY as usize];
    for (slot, e) in items {
        assert!(
            matches!(e.body, Body::Undo { .. } | Body::Redo { .. }),
            "slot {slot}: only undo and redo entries are written whole"
        );
        let b = e.encode();
        line[..BODY].copy_from_slice(&b);
        line[BODY..].copy_from_slice(&valid_word_whole(&b).to_le_bytes());
        let off = g.log_off(*slot);
        dev.write(off, &line)?;
        dev.clwb(off, LOG_ENTRY)?;
    }
    Ok(())
}
