//! `intact fs dump`: the on-disk structures in readable form (for debugging).

use crate::error::Result;
use crate::layout::{self, Record, REC_MAGIC};
use crate::meta::{Body, BLOCK};
use crate::recovery;
use intactfs_device::BlockDevice;
use std::fmt::Write;

/// Superblock, checkpoint headers, the inode table after replay, and (with `journal`)
/// every record in the journal area, replayed or not.
pub fn dump<D: BlockDevice>(dev: &mut D, journal: bool) -> Result<String> {
    let mut o = String::new();
    let sb = recovery::read_superblock(dev)?;
    let _ = writeln!(o, "superblock: {sb:?}");
    for (i, c) in recovery::read_checkpoints(dev, &sb)?.iter().enumerate() {
        match c {
            Ok(c) => {
                let _ = writeln!(o, "checkpoint {}: {c:?}", i + 1);
            }
            Err(e) => {
                let _ = writeln!(o, "checkpoint {}: unusable: {e}", i + 1);
            }
        }
    }
    let l = recovery::load(dev)?;
    let _ = writeln!(
        o,
        "replayed {} record(s); stop: {}",
        l.replayed.len(),
        l.stop
    );
    let _ = writeln!(
        o,
        "inodes ({}), next_ino {}:",
        l.meta.inodes.len(),
        l.meta.next_ino
    );
    for (ino, n) in &l.meta.inodes {
        let _ = write!(
            o,
            "  {ino}: {:?} mode {:o} uid {} gid {} nlink {} size {}",
            n.kind, n.mode, n.uid, n.gid, n.nlink, n.size
        );
        match &n.body {
            Body::Dir { entries, parent } => {
                let names: Vec<String> = entries
                    .iter()
                    .map(|((_, nm), i)| format!("{}={i}", String::from_utf8_lossy(nm)))
                    .collect();
                let _ = writeln!(o, " parent {parent} entries [{}]", names.join(", "));
            }
            Body::File { extents } => {
                let ex: Vec<String> = extents
                    .iter()
                    .map(|(lb, e)| {
                        format!(
                            "{lb}+{}@{}{}",
                            e.len,
                            e.pblk,
                            if e.written() { "" } else { " unwritten" }
                        )
                    })
                    .collect();
                let _ = writeln!(o, " extents [{}]", ex.join(", "));
            }
            Body::Symlink { target } => {
                let _ = writeln!(o, " -> {}", String::from_utf8_lossy(target));
            }
            Body::Special { rdev } => {
                let _ = writeln!(o, " rdev {rdev}");
            }
        }
    }
    if journal {
        let _ = writeln!(o, "journal area:");
        let mut pos = sb.journal_start;
        while pos < sb.journal_end() {
            let head = recovery::read_block(dev, pos)?;
            let Ok(len) = layout::framed_len(REC_MAGIC, &head) else {
                pos += 1;
                continue;
            };
            let nb = len.div_ceil(BLOCK as u64).max(1);
            if pos + nb > sb.journal_end() {
                let _ = writeln!(
                    o,
                    "  block {pos}: record header claiming {nb} blocks past the end"
                );
                pos += 1;
                continue;
            }
            let mut raw = vec![0u8; nb as usize * BLOCK];
            dev.read_run(pos, &mut raw)?;
            match layout::decode::<Record>(REC_MAGIC, &raw) {
                Ok(r) => {
                    let _ = writeln!(
                        o,
                        "  block {pos}+{nb}: epoch {} seq {} durable_upto {} streams {:?}",
                        r.epoch, r.seq, r.durable_upto, r.streams
                    );
                    for op in &r.ops {
                        let _ = writeln!(o, "    {op:?}");
                    }
                    pos += nb;
                }
                Err(e) => {
                    let _ = writeln!(o, "  block {pos}: record {e}");
                    pos += 1;
                }
            }
        }
    }
    Ok(o)
}
