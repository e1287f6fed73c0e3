//! A file's content, sparse: files reach hundreds of GiB with a few chunks written.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

/// Chunk size of the sparse contents, and the unit a snapshot of an engine hashes in (the
/// model's own choice; an engine's snapshot reads its blocks in these).
pub const CHUNK: u64 = 4096;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MData {
    size: u64,
    /// Chunk index → its bytes (absent: zeros).
    chunks: BTreeMap<u64, Vec<u8>>,
}

impl MData {
    pub fn from_bytes(b: &[u8]) -> MData {
        let mut d = MData::default();
        d.write(0, b);
        d
    }

    pub fn len(&self) -> u64 {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Writes `data` at `off`, growing the size to its end (the gap before reads as zeros).
    pub fn write(&mut self, off: u64, data: &[u8]) {
        let end = off + data.len() as u64;
        let mut pos = off;
        while pos < end {
            let c = pos / CHUNK;
            let cend = ((c + 1) * CHUNK).min(end);
            let chunk = self
                .chunks
                .entry(c)
                .or_insert_with(|| vec![0; CHUNK as usize]);
            chunk[(pos % CHUNK) as usize..(pos % CHUNK + cend - pos) as usize]
                .copy_from_slice(&data[(pos - off) as usize..(cend - off) as usize]);
            pos = cend;
        }
        self.size = self.size.max(end);
    }

    /// Truncates (bytes past `size` read as zeros if it grows again) or extends.
    pub fn resize(&mut self, size: u64) {
        if size < self.size {
            self.chunks.retain(|&c, _| c * CHUNK < size);
            if let Some(last) = self.chunks.get_mut(&(size / CHUNK)) {
                last[(size % CHUNK) as usize..].fill(0);
            }
        }
        self.size = size;
    }

    /// [off, off+len) reads as zeros, clipped at the size (which stays).
    pub fn zero(&mut self, off: u64, len: u64) {
        let end = off.saturating_add(len).min(self.size);
        if off < end {
            self.write(off, &vec![0u8; (end - off) as usize]);
        }
    }

    /// Hash of the size and the chunks that are not all zeros.
    pub fn digest(&self) -> u64 {
        sparse_hash(
            self.size,
            self.chunks
                .iter()
                .filter(|(_, b)| b.iter().any(|&x| x != 0))
                .map(|(&c, b)| (c, &b[..])),
        )
    }
}

/// The content hash the model and an engine's snapshot share: size, then each chunk
/// holding a nonzero byte, in order (a chunk of zeros and a hole are the same content).
pub fn sparse_hash<'a>(size: u64, chunks: impl Iterator<Item = (u64, &'a [u8])>) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    size.hash(&mut h);
    for (c, b) in chunks {
        c.hash(&mut h);
        b.hash(&mut h);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_and_zeros_hash_alike() {
        let mut d = MData::default();
        d.write(3 * CHUNK + 5, b"abc");
        d.zero(3 * CHUNK, CHUNK);
        let mut e = MData::default();
        e.resize(3 * CHUNK + 8);
        assert_eq!(d.digest(), e.digest());
        d.resize(2);
        d.resize(3 * CHUNK + 8);
        assert_eq!(
            d.digest(),
            e.digest(),
            "a truncate forgets what lay past it"
        );
    }
}
