//! `intact fs fsck`: every structural invariant, without writing anything.

use crate::alloc::Allocator;
use crate::error::FsError;
use crate::layout::{self, MAX_SNAPSHOT_EXTENTS};
use crate::meta::{Body, BLOCK};
use crate::recovery;
use intactfs_device::BlockDevice;

#[derive(Debug, Default)]
pub struct FsckReport {
    /// Damage: each line names the structure and what is wrong.
    pub problems: Vec<String>,
    /// Normal findings (journal replayed, orphans that mount will free, ...).
    pub notes: Vec<String>,
    /// The image could not be read at all, or is not an intactfs image (no valid
    /// superblock, a device error): fsck's exit status 2, not 1.
    pub unreadable: bool,
    /// An image of a format this build does not read (not damage; also `unreadable`).
    pub unsupported: Option<String>,
}

impl FsckReport {
    pub fn clean(&self) -> bool {
        self.problems.is_empty() && self.unsupported.is_none()
    }
}

/// Checks the image on `dev`. `verify_data`: also read every written data block and compare
/// it with its checksum.
pub fn fsck<D: BlockDevice>(dev: &mut D, verify_data: bool) -> FsckReport {
    let mut r = FsckReport::default();
    let sb = match recovery::read_superblock(dev) {
        Ok(sb) => sb,
        Err(FsError::Unsupported(m)) => {
            r.unsupported = Some(m);
            r.unreadable = true;
            return r;
        }
        Err(e) => {
            r.problems.push(e.to_string());
            r.unreadable = true;
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
            r.unreadable = true;
            return r;
        }
    }
    let loaded = match recovery::load(dev) {
        Ok(l) => l,
        Err(FsError::Device(e)) => {
            r.problems.push(format!("reading the device: {e}"));
            r.unreadable = true;
            return r;
        }
        Err(e) => {
            r.problems.push(e.to_string());
            return r;
        }
    };
    r.notes.push(format!(
        "checkpoint generation {}; {} journal record(s) replayed; the journal ends there (normal): {}",
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
    if let Err(why) = mount_checkpoint_fits(&loaded) {
        r.problems.push(why);
    }
    r
}

/// Whether a read-write mount can write its checkpoint (a new base snapshot of the
/// recovered metadata, and a run table if free space is split into many pieces), as mount
/// allocates it: `Err(why)` names the shortfall and what to do. A base, not a delta: the
/// mount writes one whenever it replayed records or the chain is full, and the engine's
/// reserve keeps room for it in every state it acknowledges (engine/reserve.rs).
fn mount_checkpoint_fits(l: &recovery::Loaded) -> Result<(), String> {
    let mut alloc = Allocator::new(l.sb.data_start(), l.sb.blocks);
    let extents = l.meta.inodes.values().filter_map(|n| n.extents());
    for (s, n) in
        l.cp.meta_runs()
            .into_iter()
            .chain(extents.flat_map(|e| e.values().map(|e| (e.pblk, e.len))))
    {
        // A block used twice is reported by load's invariant check; here only space counts.
        alloc.take(s, n);
    }
    let bytes = postcard::experimental::serialized_size(&l.meta).map_err(|e| e.to_string())?;
    let need = (bytes.div_ceil(BLOCK) as u64).max(1);
    let free = alloc.free_blocks();
    let runs = alloc.alloc(need);
    let got: u64 = runs.iter().map(|r| r.1).sum();
    let table = if runs.len() > MAX_SNAPSHOT_EXTENTS {
        // A run-table entry takes at most 20 bytes.
        (runs.len() as u64 * 20).div_ceil(BLOCK as u64)
    } else {
        0
    };
    if got < need || alloc.free_blocks() < table {
        return Err(format!(
            "a read-write mount cannot write back: its checkpoint needs a {need}-block metadata snapshot{}, and {free} blocks are free. Mount it with `-o ro` to copy files out",
            if table > 0 { format!(" and a {table}-block run table") } else { String::new() }
        ));
    }
    Ok(())
}
