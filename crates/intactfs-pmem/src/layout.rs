//! The on-pmem layout (docs/fs-pmem.md has the picture): superblock, log area, inode table,
//! data area of 4 KiB blocks. Every field a crash-consistency argument depends on is an
//! aligned 8-byte word, so that [`intactfs_device::PmemDevice::store_u64`] changes it
//! atomically (block pointers, a directory entry's header, an inode's type word).

use crate::error::{PmemFsError, Result};
pub use intactfs_types::{FileType, Time};

pub const BLOCK: u64 = 4096;
pub const LINE: u64 = 64;
pub const LINES_PER_BLOCK: u64 = BLOCK / LINE;
pub const MAGIC: u64 = u64::from_le_bytes(*b"INTPMEM1");
/// Format 2 (issue 26): a file in use may have link count 0 and no name (an orphan:
/// unlinked while open, freed at mount), or several names (hard links, link count = names).
/// Format 3 (issue 26 item 3): symbolic links, FIFOs, sockets and device files (kind codes
/// 3..=7, a device number in inode word 7). An older engine would refuse such an image as
/// corrupt, so older images are refused too (with a message) rather than silently
/// upgraded: the superblock's version and checksum are two words, not one atomic store.
/// Format 4: extended attributes, one block per inode named by inode word [`I_XATTR`]
/// (crate::xattr). Format 3 images hold a zero there, but an engine of format 3 would
/// count an attribute block as free, so they are refused the same way.
/// Format 5: a time stamp is two words, seconds (i64) in the old word and nanoseconds in
/// one of the words [`I_NSEC`].. (format 4 held one i64 of nanoseconds, which ends in
/// 2262); format 4 images are refused the same way.
/// Format 6 (issue 28 item 1): undo and redo entries are written whole, body and valid word
/// in one store under the tag `log::TAG_WHOLE`, and mount frees one whose checksum fails (a
/// torn write) where format 5 refused the image; a format-5 engine would refuse such an
/// image as damaged, so format 5 images are refused the same way.
pub const VERSION: u32 = 6;
pub const INODE_SIZE: u64 = 256;
pub const LOG_ENTRY: u64 = 64;
pub use intactfs_types::{check_name, NAME_MAX};
pub const ROOT: u64 = 1;
/// Most names a file may have (defined once, for every engine).
pub use intactfs_types::MAX_LINKS;

/// Direct pointers in an inode; then one single-, one double-, one triple- and one
/// quadruple-indirect pointer (format 5; formats 3 and 4 stopped at triple, 512 GiB; format
/// 2 at double, about 1 GiB).
pub const NDIRECT: u64 = 12;
pub const PTRS_PER_BLOCK: u64 = BLOCK / 8;
/// The indirect trees: (inode field, depth), in logical-block order after the direct
/// pointers.
pub const TREES: [(u64, u32); MAX_DEPTH as usize] = [
    (I_INDIRECT, 1),
    (I_DINDIRECT, 2),
    (I_TINDIRECT, 3),
    (I_QINDIRECT, 4),
];
/// Levels of the deepest indirect tree.
pub const MAX_DEPTH: u32 = 4;
/// Largest number of blocks a file can map: 12 + 512 + 512^2 + 512^3 + 512^4 (just over
/// 256 TiB of data).
pub const MAX_BLOCKS: u64 = NDIRECT
    + PTRS_PER_BLOCK
    + PTRS_PER_BLOCK * PTRS_PER_BLOCK
    + PTRS_PER_BLOCK * PTRS_PER_BLOCK * PTRS_PER_BLOCK
    + PTRS_PER_BLOCK * PTRS_PER_BLOCK * PTRS_PER_BLOCK * PTRS_PER_BLOCK;
pub const MAX_FILE_SIZE: u64 = MAX_BLOCKS * BLOCK;
/// Largest device mkfs and mount accept: no larger than the largest file, so a file can
/// grow to the size of its device (issue 26, item 3).
pub const MAX_DEVICE_BYTES: u64 = MAX_FILE_SIZE;

/// A directory block holds 15 entry slots of 272 bytes (a multiple of 8, so each slot's
/// header word is aligned): header word (ino u32, name length u8, kind u8), then the name.
pub const DIRENT_SIZE: u64 = 272;
pub const DIRENTS_PER_BLOCK: u64 = 15;

// Inode field offsets (bytes within the 256-byte slot).
pub const I_TYPE: u64 = 0; // word: kind u8 (0 free), mode u32 in the high half
pub const I_LINKS: u64 = 8; // word: nlink u32, uid u32
pub const I_IDS: u64 = 16; // word: gid u32, parent u32
pub const I_SIZE: u64 = 24;
pub const I_ATIME: u64 = 32;
pub const I_MTIME: u64 = 40;
pub const I_CTIME: u64 = 48;
pub const I_RDEV: u64 = 56; // word: device number (character and block devices; 0 otherwise)
pub const I_DIRECT: u64 = 64;
pub const I_INDIRECT: u64 = I_DIRECT + NDIRECT * 8;
pub const I_DINDIRECT: u64 = I_INDIRECT + 8;
pub const I_TINDIRECT: u64 = I_DINDIRECT + 8;
pub const I_QINDIRECT: u64 = I_TINDIRECT + 8;
/// End of the pointer words (a new inode's are all zeroed).
pub const I_POINTERS_END: u64 = I_QINDIRECT + 8;
/// Word: the block holding the inode's extended attributes, 0 for none (format 4).
pub const I_XATTR: u64 = I_POINTERS_END;
pub const I_XATTR_END: u64 = I_XATTR + 8;
/// Words: the nanoseconds of atime, mtime and ctime (format 5; their seconds are in
/// [`I_ATIME`], [`I_MTIME`], [`I_CTIME`]).
pub const I_NSEC: u64 = I_XATTR_END;
pub const I_NSEC_END: u64 = I_NSEC + 3 * 8;

/// Words of an inode's fixed fields: type .. rdev before the block pointers, then the
/// three nanosecond words after the attribute pointer.
pub const INODE_WORDS: usize = 11;
/// Where each of [`InodeRec::words`] lives in the slot (bytes).
pub const INODE_WORD_OFFS: [u64; INODE_WORDS] = [
    I_TYPE,
    I_LINKS,
    I_IDS,
    I_SIZE,
    I_ATIME,
    I_MTIME,
    I_CTIME,
    I_RDEV,
    I_NSEC,
    I_NSEC + 8,
    I_NSEC + 16,
];

pub const KIND_FILE: u8 = 1;
pub const KIND_DIR: u8 = 2;
pub const KIND_SYMLINK: u8 = 3;
pub const KIND_FIFO: u8 = 4;
pub const KIND_SOCKET: u8 = 5;
pub const KIND_CHARDEV: u8 = 6;
pub const KIND_BLOCKDEV: u8 = 7;
/// Longest symbolic-link target (the block engine's; Linux's PATH_MAX less the NUL). A
/// target fits one data block, mapped at block 0 of the link.
pub use intactfs_types::SYMLINK_MAX;

/// The superblock's fields, all fixed at mkfs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub total_blocks: u64,
    pub log_start: u64,
    pub log_entries: u64,
    pub inode_start: u64,
    pub inodes: u64,
    pub data_start: u64,
}

const SB_LEN: usize = 64;

impl Geometry {
    /// Lays out a device of `len` bytes with `inodes` inode slots and `log_entries` log
    /// entries; refuses geometries that leave fewer than 8 data blocks.
    pub fn new(len: u64, inodes: u64, log_entries: u64) -> Result<Geometry> {
        let total_blocks = len / BLOCK;
        if len > MAX_DEVICE_BYTES {
            return Err(PmemFsError::Invalid(format!(
                "a device of {len} bytes is larger than this format supports ({MAX_DEVICE_BYTES} bytes, the largest file): use a smaller device or namespace"
            )));
        }
        if inodes < 2 || inodes > u32::MAX as u64 {
            return Err(PmemFsError::Invalid(format!("{inodes} inodes: need at least 2 (ino 0 is unused, 1 is the root) and fewer than 2^32")));
        }
        if log_entries < 16 || log_entries > u32::MAX as u64 {
            return Err(PmemFsError::Invalid(format!(
                "{log_entries} log entries: need at least 16 and fewer than 2^32"
            )));
        }
        let log_start = 1;
        let inode_start = log_start + (log_entries * LOG_ENTRY).div_ceil(BLOCK);
        let data_start = inode_start + (inodes * INODE_SIZE).div_ceil(BLOCK);
        if total_blocks < data_start + 8 {
            return Err(PmemFsError::NoSpace(format!(
                "a device of {len} bytes ({total_blocks} blocks) is too small for {log_entries} log entries, {inodes} inodes and 8 data blocks ({} blocks)",
                data_start + 8
            )));
        }
        Ok(Geometry {
            total_blocks,
            log_start,
            log_entries,
            inode_start,
            inodes,
            data_start,
        })
    }

    pub fn data_blocks(&self) -> u64 {
        self.total_blocks - self.data_start
    }
    pub fn log_off(&self, slot: u64) -> u64 {
        self.log_start * BLOCK + slot * LOG_ENTRY
    }
    pub fn inode_off(&self, ino: u64) -> u64 {
        self.inode_start * BLOCK + ino * INODE_SIZE
    }
    pub fn is_data_block(&self, b: u64) -> bool {
        b >= self.data_start && b < self.total_blocks
    }

    pub fn encode(&self) -> [u8; SB_LEN + 8] {
        let mut b = [0u8; SB_LEN + 8];
        b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(BLOCK as u32).to_le_bytes());
        for (i, v) in [
            self.total_blocks,
            self.log_start,
            self.log_entries,
            self.inode_start,
            self.inodes,
            self.data_start,
        ]
        .iter()
        .enumerate()
        {
            b[16 + i * 8..24 + i * 8].copy_from_slice(&v.to_le_bytes());
        }
        let crc = crc32c::crc32c(&b[..SB_LEN]);
        b[SB_LEN..SB_LEN + 4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks a superblock read from a device of `len` bytes.
    pub fn decode(b: &[u8; SB_LEN + 8], len: u64) -> Result<Geometry> {
        let u64at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let u32at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        if u64at(0) != MAGIC {
            return Err(PmemFsError::Corrupt(format!(
                "no intactfs-pmem superblock (magic {:#018x}, want {MAGIC:#018x})",
                u64at(0)
            )));
        }
        let crc = crc32c::crc32c(&b[..SB_LEN]);
        if u32at(SB_LEN) != crc {
            return Err(PmemFsError::Corrupt(format!(
                "superblock checksum {:#010x} does not match its content ({crc:#010x})",
                u32at(SB_LEN)
            )));
        }
        if u32at(8) != VERSION {
            // Not damage: a format this engine does not read (fsck says so apart).
            return Err(PmemFsError::Unsupported(format!(
                "superblock version {} (this engine reads version {VERSION}{})",
                u32at(8),
                if u32at(8) < VERSION {
                    "; the image was made by an older engine: copy its files out with that engine and mkfs again"
                } else {
                    ""
                }
            )));
        }
        if u32at(12) as u64 != BLOCK {
            return Err(PmemFsError::Corrupt(format!(
                "block size {} (this engine uses {BLOCK})",
                u32at(12)
            )));
        }
        let g = Geometry {
            total_blocks: u64at(16),
            log_start: u64at(24),
            log_entries: u64at(32),
            inode_start: u64at(40),
            inodes: u64at(48),
            data_start: u64at(56),
        };
        let expect = Geometry::new(
            g.total_blocks.saturating_mul(BLOCK),
            g.inodes,
            g.log_entries,
        )
        .map_err(|e| {
            PmemFsError::Corrupt(format!("superblock geometry {g:?} is impossible: {e}"))
        })?;
        if expect != g {
            return Err(PmemFsError::Corrupt(format!(
                "superblock geometry {g:?} is not the layout mkfs makes ({expect:?})"
            )));
        }
        if g.total_blocks.checked_mul(BLOCK).is_none_or(|n| n > len) {
            return Err(PmemFsError::Corrupt(format!(
                "superblock says {} blocks, the device has {} bytes",
                g.total_blocks, len
            )));
        }
        Ok(g)
    }
}

pub const SB_BYTES: usize = SB_LEN + 8;

/// A time stamp on the media (format 5): seconds since the epoch as an i64 in one word,
/// nanoseconds (below 10^9) in another, so every time `Time` holds is kept exactly (one
/// i64 of nanoseconds, format 4, ended in 2262).
fn time_words(t: Time) -> (u64, u64) {
    assert!(
        t.nsec < NSEC_PER_SEC,
        "time {t:?} has {} nanoseconds",
        t.nsec
    );
    (t.sec as u64, t.nsec as u64)
}

/// The time of a seconds word and a nanoseconds word; an error for nanoseconds past 10^9
/// (damage: nothing stores them).
fn time_of(sec: u64, nsec: u64) -> Result<Time, String> {
    if nsec >= NSEC_PER_SEC as u64 {
        return Err(format!("nanoseconds word {nsec} is not below 10^9"));
    }
    Ok(Time {
        sec: sec as i64,
        nsec: nsec as u32,
    })
}

const NSEC_PER_SEC: u32 = 1_000_000_000;

/// File types on the media: one byte in the inode's type word and the entry header.
pub trait KindCode: Sized {
    fn code(self) -> u8;
    fn from_code(c: u8) -> Option<Self>;
}

impl KindCode for FileType {
    fn code(self) -> u8 {
        match self {
            FileType::File => KIND_FILE,
            FileType::Dir => KIND_DIR,
            FileType::Symlink => KIND_SYMLINK,
            FileType::Fifo => KIND_FIFO,
            FileType::Socket => KIND_SOCKET,
            FileType::CharDev => KIND_CHARDEV,
            FileType::BlockDev => KIND_BLOCKDEV,
        }
    }
    fn from_code(c: u8) -> Option<FileType> {
        match c {
            KIND_FILE => Some(FileType::File),
            KIND_DIR => Some(FileType::Dir),
            KIND_SYMLINK => Some(FileType::Symlink),
            KIND_FIFO => Some(FileType::Fifo),
            KIND_SOCKET => Some(FileType::Socket),
            KIND_CHARDEV => Some(FileType::CharDev),
            KIND_BLOCKDEV => Some(FileType::BlockDev),
            _ => None,
        }
    }
}

/// The fixed fields of an inode slot (pointers are read and written word by word).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InodeRec {
    pub kind: FileType,
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    /// For a directory, the directory holding it (the root: itself).
    pub parent: u32,
    pub size: u64,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
    /// Device number of a character or block device (0 for every other kind).
    pub rdev: u32,
}

impl InodeRec {
    /// The fixed words, at [`INODE_WORD_OFFS`]: type, links, ids, size, the seconds of
    /// the three times, rdev, then the three times' nanoseconds.
    pub fn words(&self) -> [u64; INODE_WORDS] {
        let (a, m, c) = (
            time_words(self.atime),
            time_words(self.mtime),
            time_words(self.ctime),
        );
        [
            self.kind.code() as u64 | (self.mode as u64) << 32,
            self.nlink as u64 | (self.uid as u64) << 32,
            self.gid as u64 | (self.parent as u64) << 32,
            self.size,
            a.0,
            m.0,
            c.0,
            self.rdev as u64,
            a.1,
            m.1,
            c.1,
        ]
    }
    /// Decodes; None for a free slot (kind 0), an error for an unknown kind or a device
    /// number on anything but a device.
    pub fn from_words(w: &[u64; INODE_WORDS]) -> Result<Option<InodeRec>, String> {
        let code = (w[0] & 0xff) as u8;
        if code == 0 {
            return Ok(None);
        }
        let kind = FileType::from_code(code).ok_or_else(|| format!("unknown inode type {code}"))?;
        if w[0] & 0xffff_ff00 != 0 {
            return Err(format!("reserved bits of the type word set ({:#x})", w[0]));
        }
        if w[7] > u32::MAX as u64 || (w[7] != 0 && !kind.has_rdev()) {
            return Err(format!("device number word {:#x} on a {kind:?}", w[7]));
        }
        Ok(Some(InodeRec {
            kind,
            mode: (w[0] >> 32) as u32,
            nlink: w[1] as u32,
            uid: (w[1] >> 32) as u32,
            gid: w[2] as u32,
            parent: (w[2] >> 32) as u32,
            size: w[3],
            atime: time_of(w[4], w[8])?,
            mtime: time_of(w[5], w[9])?,
            ctime: time_of(w[6], w[10])?,
            rdev: w[7] as u32,
        }))
    }
}

/// A directory entry's header word: ino (0: free slot), name length, kind.
pub fn dirent_header(ino: u64, name_len: usize, kind: FileType) -> u64 {
    ino as u32 as u64 | (name_len as u64) << 32 | (kind.code() as u64) << 40
}

pub fn dirent_decode(h: u64) -> (u64, usize, u8, u64) {
    (
        h & 0xffff_ffff,
        ((h >> 32) & 0xff) as usize,
        ((h >> 40) & 0xff) as u8,
        h >> 48,
    )
}

/// Where logical block `lbn` of a file is mapped: the levels of pointers to follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtrPath {
    /// Direct pointer `i` of the inode.
    Direct(u64),
    /// From the inode field `root` down `depth` indirect blocks, taking pointer `idx[k]`
    /// at level `k` (0 is the block `root` names).
    Tree {
        root: u64,
        depth: u32,
        idx: [u64; MAX_DEPTH as usize],
    },
}

/// Blocks one pointer at `depth` levels above the data covers (512^(depth-1)).
pub fn span_blocks(depth: u32) -> u64 {
    assert!((1..=MAX_DEPTH).contains(&depth), "depth {depth}");
    PTRS_PER_BLOCK.pow(depth - 1)
}

/// The first logical block each indirect tree maps.
pub fn tree_first_lbn(depth: u32) -> u64 {
    (1..depth).fold(NDIRECT, |acc, d| acc + span_blocks(d) * PTRS_PER_BLOCK)
}

pub fn ptr_path(lbn: u64) -> Option<PtrPath> {
    if lbn < NDIRECT {
        return Some(PtrPath::Direct(lbn));
    }
    for (root, depth) in TREES {
        let first = tree_first_lbn(depth);
        let x = lbn - first;
        if x < span_blocks(depth) * PTRS_PER_BLOCK {
            let mut idx = [0u64; MAX_DEPTH as usize];
            for (k, slot) in idx.iter_mut().enumerate().take(depth as usize) {
                *slot = x / span_blocks(depth - k as u32) % PTRS_PER_BLOCK;
            }
            return Some(PtrPath::Tree { root, depth, idx });
        }
    }
    assert!(lbn >= MAX_BLOCKS);
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_paths_cover_every_block_once_at_the_tree_boundaries() {
        let p = PTRS_PER_BLOCK;
        let tree = |root, depth, idx| Some(PtrPath::Tree { root, depth, idx });
        assert_eq!(ptr_path(11), Some(PtrPath::Direct(11)));
        assert_eq!(ptr_path(12), tree(I_INDIRECT, 1, [0, 0, 0, 0]));
        assert_eq!(ptr_path(12 + p - 1), tree(I_INDIRECT, 1, [p - 1, 0, 0, 0]));
        assert_eq!(ptr_path(12 + p), tree(I_DINDIRECT, 2, [0, 0, 0, 0]));
        assert_eq!(ptr_path(12 + p + p + 1), tree(I_DINDIRECT, 2, [1, 1, 0, 0]));
        let t = 12 + p + p * p;
        assert_eq!(ptr_path(t - 1), tree(I_DINDIRECT, 2, [p - 1, p - 1, 0, 0]));
        assert_eq!(ptr_path(t), tree(I_TINDIRECT, 3, [0, 0, 0, 0]));
        assert_eq!(
            ptr_path(t + p * p + 2 * p + 3),
            tree(I_TINDIRECT, 3, [1, 2, 3, 0])
        );
        let q = t + p * p * p;
        assert_eq!(
            ptr_path(q - 1),
            tree(I_TINDIRECT, 3, [p - 1, p - 1, p - 1, 0])
        );
        assert_eq!(ptr_path(q), tree(I_QINDIRECT, 4, [0, 0, 0, 0]));
        assert_eq!(
            ptr_path(q + p * p * p + 2 * p * p + 3 * p + 4),
            tree(I_QINDIRECT, 4, [1, 2, 3, 4])
        );
        assert_eq!(ptr_path(MAX_BLOCKS - 1), tree(I_QINDIRECT, 4, [p - 1; 4]));
        assert_eq!(ptr_path(MAX_BLOCKS), None);
        assert_eq!(tree_first_lbn(3), t);
        assert_eq!(tree_first_lbn(4), q);
        // A file can be as large as the largest device.
        const { assert!(MAX_DEVICE_BYTES <= MAX_FILE_SIZE) };
        assert_eq!(MAX_FILE_SIZE, MAX_BLOCKS * BLOCK);
        // The pointer words end inside the 256-byte inode slot.
        const { assert!(I_POINTERS_END <= INODE_SIZE) };
        const { assert!(I_XATTR >= I_POINTERS_END && I_XATTR_END <= INODE_SIZE) };
        const { assert!(I_NSEC >= I_XATTR_END && I_NSEC_END <= INODE_SIZE) };
    }

    #[test]
    fn a_device_larger_than_the_largest_file_is_refused() {
        assert!(Geometry::new(MAX_DEVICE_BYTES, 64, 64).is_ok());
        let err = Geometry::new(MAX_DEVICE_BYTES + BLOCK, 64, 64).unwrap_err();
        assert!(
            err.to_string().contains("larger than this format supports"),
            "{err}"
        );
    }

    #[test]
    fn every_kind_has_a_code_and_back() {
        for k in [
            FileType::File,
            FileType::Dir,
            FileType::Symlink,
            FileType::Fifo,
            FileType::Socket,
            FileType::CharDev,
            FileType::BlockDev,
        ] {
            assert_eq!(FileType::from_code(k.code()), Some(k));
        }
        assert_eq!(FileType::from_code(0), None);
        assert_eq!(FileType::from_code(8), None);
    }
}
