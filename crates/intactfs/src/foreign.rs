//! Which other file system an image holds, when it is not intactfs: so that `fsck` and
//! `mount` of an ext4 image say "this is an ext4 image" rather than "damaged".
//! The signatures are the file systems' published superblock magics.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::layout::{SB_MAGIC, SUPERBLOCK};
use crate::meta::BLOCK;

/// (name, byte offset, magic bytes).
const SIGNATURES: [(&str, u64, &[u8]); 6] = [
    // ext2/3/4: s_magic 0xEF53 (little-endian) at 1024 + 0x38.
    ("ext2/ext3/ext4", 1080, &[0x53, 0xEF]),
    ("xfs", 0, b"XFSB"),
    // btrfs: the primary superblock at 64 KiB, magic at +0x40.
    ("btrfs", 0x10040, b"_BHRfS_M"),
    ("f2fs", 1024, &[0x10, 0x20, 0xF5, 0xF2]),
    ("squashfs", 0, b"hsqs"),
    ("iso9660", 0x8001, b"CD001"),
];

/// The name of the foreign file system on the image, if a known signature matches.
/// Unreadable or short images give `None` (the caller's own checks report those).
pub fn foreign_file_system(image: &Path) -> Option<&'static str> {
    let mut f = std::fs::File::open(image).ok()?;
    let mut own = [0u8; 8];
    f.seek(SeekFrom::Start(SUPERBLOCK * BLOCK as u64)).ok()?;
    if f.read_exact(&mut own).is_ok() && &own == SB_MAGIC {
        return None;
    }
    SIGNATURES.iter().find_map(|&(name, offset, magic)| {
        let mut buf = vec![0u8; magic.len()];
        f.seek(SeekFrom::Start(offset)).ok()?;
        f.read_exact(&mut buf).ok()?;
        (buf == magic).then_some(name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_found_at_their_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("img");
        let mut bytes = vec![0u8; 0x10100];
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(foreign_file_system(&p), None);
        bytes[1080..1082].copy_from_slice(&[0x53, 0xEF]);
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(foreign_file_system(&p), Some("ext2/ext3/ext4"));
        let mut b2 = vec![0u8; 0x10100];
        b2[0x10040..0x10048].copy_from_slice(b"_BHRfS_M");
        std::fs::write(&p, &b2).unwrap();
        assert_eq!(foreign_file_system(&p), Some("btrfs"));
        std::fs::write(&p, b"XF").unwrap();
        assert_eq!(foreign_file_system(&p), None, "short image");
    }
}
