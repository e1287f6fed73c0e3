//! `intact fs fsck`: every structural invariant, without writing anything.

use crate::error::FsError;
use crate::layout;
use crate::meta::{Body, BLOCK};
use crate::recovery;
use intactfs_device::BlockDevice;

#[derive(Debug, Default)]
pub struct FsckReport {
    /// Damage: each line names the structure and what is wrong.
    pub problems: Vec<String>,
    /// Normal findings (journal replayed, orphans that mount will free, ...).
    pub notes: Vec<String>,
}

impl FsckReport {
    pub fn clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the image on `dev`. `verify_data`: also read every written data block and compare
/// it with its checksum.
pub fn fsck<D: BlockDevice>(dev: &mut D, verify_data: bool) -> FsckReport {
    let mut r = FsckReport::default();
    let sb = match recovery::read_superblock(dev) {
        Ok(sb) => sb,
        Err(e) => {
            r.problems.push(e.to_string());
            return r;
        }
    };
    r.notes.push(format!(
        "{} blocks of {BLOCK} bytes, journal {} blocks at {}",
        sb.blocks, sb.journal_blocks, sb.journal_start
    ));
    match recovery::read_checkpoints(dev, &sb) {
        Ok(cps) => {
            for (i, c) in cps.iter().enumerate() {
                match c {
                    Ok(c) => r.notes.push(format!(
                        "checkpoint header {}: generation {}",
                        i + 1,
                        c.generation
                    )),
                    // One slot is always older or unused; only both failing is damage (load says so).
                    Err(e) => r
                        .notes
                        .push(format!("checkpoint header {}: unusable ({e})", i + 1)),
                }
            }
        }
        Err(e) => {
            r.problems.push(e.to_string());
            return r;
        }
    }
    let loaded = match recovery::load(dev) {
        Ok(l) => l,
        Err(FsError::Device(e)) => {
            r.problems.push(format!("reading the device: {e}"));
            return r;
        }
        Err(e) => {
            r.problems.push(e.to_string());
            return r;
        }
    };
    r.notes.push(format!(
        "checkpoint generation {}; {} journal record(s) replayed; replay stopped: {}",
        loaded.cp.generation,
        loaded.replayed.len(),
        loaded.stop
    ));
    let orphans = recovery::orphans(&loaded.meta);
    if !orphans.is_empty() {
        r.notes.push(format!(
            "{} orphan inode(s) (unlinked while open) will be freed at mount: {orphans:?}",
            orphans.len()
        ));
    }
    let (mut files, mut dirs, mut blocks) = (0u64, 0u64, 0u64);
    for (ino, n) in &loaded.meta.inodes {
        match &n.body {
            Body::Dir { .. } => dirs += 1,
            Body::File { extents } => {
                files += 1;
                for (l, e) in extents {
                    blocks += e.len;
                    if !verify_data {
                        continue;
                    }
                    for (k, crc) in e.crcs.iter().enumerate() {
                        let p = e.pblk + k as u64;
                        match recovery::read_block(dev, p) {
                            Ok(b) if layout::block_crc(&b) == *crc => {}
                            Ok(_) => r.problems.push(format!("file {ino} block {} (device block {p}): data does not match its checksum", l + k as u64)),
                            Err(e) => r.problems.push(format!("file {ino} device block {p}: {e}")),
                        }
                    }
                }
            }
            _ => {}
        }
    }
    r.notes.push(format!(
        "{} inodes: {files} files, {dirs} directories; {blocks} data blocks in use",
        loaded.meta.inodes.len()
    ));
    r
}
