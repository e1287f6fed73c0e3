//! The content hash of a file in a crash state: `blake3::hash` of the bytes the checker
//! sees, computed from the hashes of its 16 KiB windows, those of whole shared chunks
//! cached, so a state that shares most of a file with states hashed before costs what it
//! changed plus one merge per window, not a pass over the whole file (issue 29: with one
//! state per prefix and ~100 states per append, hashing every byte made checking N
//! appends O(N²) in time).
//!
//! Why this is the same hash: BLAKE3 is a left-complete binary tree over 1 KiB chunks
//! (the input's left subtree holds the largest power-of-two number of chunks that is
//! less than the whole). Splitting recursively with [`left_subtree_len`] from the root,
//! every subtree longer than a window starts at a multiple of [`CHUNK_BYTES`] and its
//! left part is a power of two of at least 16 KiB, so the recursion ends in exactly the
//! windows `[16 KiB·w, min(16 KiB·(w+1), size))`. A window's chaining value depends on
//! its bytes and its offset only; the hazmat functions merge them as `blake3::hash` would.
//! The tests compare with `blake3::hash` of the same bytes.
//!
//! Why the cache is sound: it keys a window's chaining value on the address of the chunk
//! that fills it and the window's offset, and keeps a [`Weak`] reference to the chunk.
//! While that reference lives the allocation cannot be reused for another chunk, and a
//! chunk is never written in place while one exists ([`Arc::get_mut`] refuses and
//! [`Arc::make_mut`] moves the value out), so an entry whose chunk is still alive holds
//! that chunk's bytes.

use blake3::hazmat::{
    left_subtree_len, merge_subtrees_non_root, merge_subtrees_root, ChainingValue, HasherExt, Mode,
};
use intact_model::sparse::CHUNK_BYTES;
use intact_model::Sparse;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// Bound on cached windows (about 100 bytes each); past it the cache starts over.
const MAX_CACHED_WINDOWS: usize = 1 << 20;

/// A cached window: the chunk that filled it (kept allocated, so its address stays its
/// own) and the window's chaining value.
type CachedWindow = (Weak<Vec<u8>>, ChainingValue);

/// Chaining values of windows filled by one shared chunk, by (chunk address, offset).
#[derive(Default)]
pub struct WindowCache {
    windows: HashMap<(usize, u64), CachedWindow>,
}

impl WindowCache {
    pub fn len(&self) -> usize {
        self.windows.len()
    }
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }
}

/// What a hole reads as, by offset (the crash state's "uninitialised block" pattern).
pub type Fill = fn(u64) -> u8;

/// `blake3::hash` of the first `size` bytes `buf` shows a checker: its bytes and zeros, and
/// `fill` in its holes and past its end.
pub fn visible_hash(buf: &Sparse, size: u64, fill: Fill, cache: &mut WindowCache) -> [u8; 32] {
    if size <= CHUNK_BYTES {
        return *blake3::hash(&window_bytes(buf, 0, size, fill)).as_bytes();
    }
    let left = left_subtree_len(size);
    assert!(
        left.is_multiple_of(CHUNK_BYTES) && left < size,
        "left subtree of {size} bytes"
    );
    let l = subtree(buf, 0, left, fill, cache);
    let r = subtree(buf, left, size - left, fill, cache);
    *merge_subtrees_root(&l, &r, Mode::Hash).as_bytes()
}

/// The chaining value of the (non-root) subtree `[offset, offset + len)`.
fn subtree(
    buf: &Sparse,
    offset: u64,
    len: u64,
    fill: Fill,
    cache: &mut WindowCache,
) -> ChainingValue {
    assert!(
        offset.is_multiple_of(CHUNK_BYTES) && len > 0,
        "subtree at {offset}"
    );
    if len <= CHUNK_BYTES {
        return window(buf, offset, len, fill, cache);
    }
    let left = left_subtree_len(len);
    assert!(left.is_multiple_of(CHUNK_BYTES) && left < len);
    let l = subtree(buf, offset, left, fill, cache);
    let r = subtree(buf, offset + left, len - left, fill, cache);
    merge_subtrees_non_root(&l, &r, Mode::Hash)
}

/// The chaining value of one window: cached when a whole chunk fills it.
fn window(
    buf: &Sparse,
    offset: u64,
    len: u64,
    fill: Fill,
    cache: &mut WindowCache,
) -> ChainingValue {
    assert!(len > 0 && len <= CHUNK_BYTES, "window of {len} bytes");
    let chunk = (len == CHUNK_BYTES)
        .then(|| buf.full_chunk_at(offset))
        .flatten();
    let Some(chunk) = chunk else {
        return window_cv(offset, &window_bytes(buf, offset, offset + len, fill));
    };
    let key = (Arc::as_ptr(chunk) as usize, offset);
    if let Some((weak, cv)) = cache.windows.get(&key) {
        if weak.strong_count() > 0 && std::ptr::eq(weak.as_ptr(), Arc::as_ptr(chunk)) {
            return *cv;
        }
    }
    let cv = window_cv(offset, chunk);
    if cache.windows.len() >= MAX_CACHED_WINDOWS {
        cache.windows.clear();
    }
    cache.windows.insert(key, (Arc::downgrade(chunk), cv));
    cv
}

fn window_cv(offset: u64, bytes: &[u8]) -> ChainingValue {
    assert!(!bytes.is_empty() && bytes.len() as u64 <= CHUNK_BYTES);
    blake3::Hasher::new()
        .set_input_offset(offset)
        .update(bytes)
        .finalize_non_root()
}

/// The visible bytes of `[from, to)`: `fill` in holes and past the buffer's end.
fn window_bytes(buf: &Sparse, from: u64, to: u64, fill: Fill) -> Vec<u8> {
    assert!(
        from <= to && to - from <= CHUNK_BYTES,
        "window {from}..{to}"
    );
    let mut v = buf.read(from, to - from, fill);
    let got = from + v.len() as u64;
    v.extend((got..to).map(fill));
    assert_eq!(v.len() as u64, to - from);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A fill unlike zeros and unlike the written bytes' patterns.
    fn garbage(offset: u64) -> u8 {
        0x80 | (offset.wrapping_mul(31) >> 3) as u8
    }

    fn plain(buf: &Sparse, size: u64) -> [u8; 32] {
        let mut v = buf.read(0, size, garbage);
        let got = v.len() as u64;
        v.extend((got..size).map(garbage));
        *blake3::hash(&v).as_bytes()
    }

    #[test]
    fn equals_blake3_at_window_and_tree_boundaries() {
        let mut cache = WindowCache::default();
        let k = CHUNK_BYTES;
        for size in [
            0,
            1,
            1023,
            1024,
            1025,
            k - 1,
            k,
            k + 1,
            2 * k,
            3 * k + 7,
            5 * k,
            17 * k - 1,
        ] {
            let bytes: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
            let buf = Sparse::from(bytes);
            assert_eq!(
                visible_hash(&buf, size, garbage, &mut cache),
                plain(&buf, size),
                "{size}"
            );
            // Twice: the second time from the cache.
            assert_eq!(
                visible_hash(&buf, size, garbage, &mut cache),
                plain(&buf, size),
                "{size}"
            );
        }
        assert!(!cache.is_empty(), "whole chunks were cached");
    }

    #[test]
    fn a_chunk_written_after_caching_is_hashed_anew() {
        let mut cache = WindowCache::default();
        let mut buf = Sparse::from(vec![1u8; 4 * CHUNK_BYTES as usize]);
        let before = visible_hash(&buf, buf.len(), garbage, &mut cache);
        buf.write(CHUNK_BYTES + 5, b"x").unwrap();
        let after = visible_hash(&buf, buf.len(), garbage, &mut cache);
        assert_ne!(before, after);
        assert_eq!(after, plain(&buf, buf.len()));
    }

    proptest! {
        // Each case hashes files of up to ~250 KB several times over (debug build).
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Any sequence of writes, zero runs and size changes, with clones kept (shared
        /// chunks) and a visible size that may differ from the buffer's: the same hash as
        /// `blake3::hash` of the visible bytes.
        #[test]
        fn equals_blake3_of_the_visible_bytes(
            steps in proptest::collection::vec((0u8..3, 0u64..200_000, 1u64..40_000, any::<u8>()), 1..12),
            extra in 0u64..50_000,
        ) {
            let mut cache = WindowCache::default();
            let mut buf = Sparse::new();
            let mut kept = Vec::new();
            for (kind, off, len, byte) in steps {
                match kind {
                    0 => buf.write(off, &vec![byte; len as usize]).unwrap(),
                    1 => buf.write_zeros(off, len).unwrap(),
                    _ => buf.set_len(off),
                }
                kept.push(buf.clone());
                for size in [buf.len(), buf.len() + extra, buf.len() / 2] {
                    prop_assert_eq!(visible_hash(&buf, size, garbage, &mut cache), plain(&buf, size));
                }
            }
            for k in &kept {
                prop_assert_eq!(visible_hash(k, k.len(), garbage, &mut cache), plain(k, k.len()));
            }
        }
    }
}
