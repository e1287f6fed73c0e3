//! File contents held sparse: a logical size and the runs written in it, so a file
//! truncated to 1 TiB costs what was written, not its size (issue 25, finding 4).
//!
//! A run is bytes or a stretch of zeros; the rest of the file below its size is a *hole*,
//! which reads as whatever the reader's fill says: zeros in the logical model (a hole of a
//! real file), the "uninitialised block" pattern in a crash state. Runs never overlap,
//! are never empty, and lie below the size; a run of bytes never crosses a multiple of
//! [`CHUNK_BYTES`]: [`Sparse::check`] asserts it.
//!
//! Cloning is cheap and a write copies only what it touches (issue 29): the runs live in a
//! persistent map (a clone shares it, a write copies the O(log n) path to its entry), and
//! each run of bytes is a chunk shared by reference count until written. The explorer keeps
//! many states of one file's history at once (prefixes of the trace, states in flight), so
//! a file appended to N times costs O(N) memory across all of them instead of a full copy
//! each (O(N²)).

use rpds::RedBlackTreeMapSync;
use std::sync::Arc;

/// The most bytes one run holds: a write into a chunk a clone shares copies at most this.
/// 16 KiB (four 4 KiB blocks) keeps that copy small, while a chunk's map entry (about 64
/// bytes) costs under 0.5 % of a full chunk.
pub const CHUNK_BYTES: u64 = 16 << 10;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Run {
    /// Shared with the clones of the file until written; within one chunk.
    Bytes(Arc<Vec<u8>>),
    Zeros(u64),
}

impl Run {
    pub fn len(&self) -> u64 {
        match self {
            Run::Bytes(b) => b.len() as u64,
            Run::Zeros(n) => *n,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The part `[from, to)` of the run (offsets relative to its start).
    fn part(&self, from: u64, to: u64) -> Run {
        debug_assert!(from < to && to <= self.len());
        match self {
            Run::Bytes(b) => Run::Bytes(Arc::new(b[from as usize..to as usize].to_vec())),
            Run::Zeros(_) => Run::Zeros(to - from),
        }
    }
}

/// A piece of a file's contents, as [`Sparse::segments`] yields them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seg<'a> {
    Bytes(&'a [u8]),
    Zeros,
    Hole,
}

#[derive(Clone)]
pub struct Sparse {
    size: u64,
    runs: RedBlackTreeMapSync<u64, Run>,
}

impl Default for Sparse {
    fn default() -> Sparse {
        Sparse {
            size: 0,
            runs: RedBlackTreeMapSync::new_sync(),
        }
    }
}

impl std::fmt::Debug for Sparse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Sparse {{ size: {}, runs: {} }}",
            self.size,
            self.runs.size()
        )
    }
}

/// Equality of contents with holes read as zeros (the logical model's reading).
impl PartialEq for Sparse {
    fn eq(&self, other: &Sparse) -> bool {
        self.size == other.size && self.first_difference(other, |_| 0).is_none()
    }
}
impl Eq for Sparse {}

impl From<Vec<u8>> for Sparse {
    fn from(bytes: Vec<u8>) -> Sparse {
        let mut s = Sparse::new();
        s.write(0, &bytes)
            .expect("a slice's length fits in a u64 from offset 0");
        s
    }
}

impl Sparse {
    pub fn new() -> Sparse {
        Sparse::default()
    }
    pub fn len(&self) -> u64 {
        self.size
    }
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
    /// Bytes held in memory for the runs (not the size).
    pub fn stored_bytes(&self) -> u64 {
        self.runs
            .values()
            .map(|r| match r {
                Run::Bytes(b) => b.len() as u64,
                Run::Zeros(_) => 0,
            })
            .sum()
    }
    pub fn runs(&self) -> impl Iterator<Item = (u64, &Run)> {
        self.runs.iter().map(|(o, r)| (*o, r))
    }

    /// The chunk of bytes that fills the whole chunk-aligned window at `offset`
    /// ([`CHUNK_BYTES`] bytes), if one run does: what a cache of per-chunk hashes keys on.
    pub fn full_chunk_at(&self, offset: u64) -> Option<&Arc<Vec<u8>>> {
        assert!(
            offset.is_multiple_of(CHUNK_BYTES),
            "window at {offset} is not chunk-aligned"
        );
        match self.runs.get(&offset) {
            Some(Run::Bytes(b)) if b.len() as u64 == CHUNK_BYTES => Some(b),
            _ => None,
        }
    }

    /// Asserts the invariants: runs non-empty, ordered without overlap, below the size.
    pub fn check(&self) {
        let mut end = 0;
        for (&off, r) in &self.runs {
            assert!(!r.is_empty(), "empty run at {off}");
            assert!(off >= end, "run at {off} overlaps the one ending at {end}");
            end = off.checked_add(r.len()).expect("run end overflows");
            if let Run::Bytes(_) = r {
                assert!(
                    off / CHUNK_BYTES == (end - 1) / CHUNK_BYTES,
                    "run of bytes {off}..{end} crosses a chunk boundary"
                );
            }
        }
        assert!(
            end <= self.size,
            "runs end at {end}, past the size {}",
            self.size
        );
    }

    /// Sets the size: shrinking drops what lies beyond, growing leaves a hole.
    pub fn set_len(&mut self, size: u64) {
        if size < self.size {
            self.carve(size, self.size);
        }
        self.size = size;
    }

    /// Removes the run at `off` and returns it. Once out of the map, a chunk no clone
    /// shares is unique, so [`Arc::make_mut`] writes it in place.
    fn take(&mut self, off: u64) -> Option<Run> {
        let r = self.runs.get(&off).cloned()?;
        self.runs.remove_mut(&off);
        Some(r)
    }

    /// Removes `[from, to)` from the runs (splitting the runs across its ends).
    fn carve(&mut self, from: u64, to: u64) {
        if from >= to {
            return;
        }
        // A run starting before `from` and reaching into the range keeps its head.
        if let Some((off, r)) = self.runs.range(..from).next_back() {
            let (off, r) = (*off, r.clone());
            let end = off + r.len();
            if end > from {
                if end > to {
                    self.runs.insert_mut(to, r.part(to - off, end - off));
                }
                self.runs.insert_mut(off, r.part(0, from - off));
            }
        }
        let inside: Vec<(u64, Run)> = self
            .runs
            .range(from..to)
            .map(|(o, r)| (*o, r.clone()))
            .collect();
        for (off, r) in inside {
            self.runs.remove_mut(&off);
            let end = off + r.len();
            if end > to {
                self.runs.insert_mut(to, r.part(to - off, end - off));
            }
        }
    }

    /// Writes `bytes` at `offset`, growing the size if they reach past it. Err when the
    /// range does not fit in a u64.
    pub fn write(&mut self, offset: u64, bytes: &[u8]) -> Result<(), String> {
        let end = offset
            .checked_add(bytes.len() as u64)
            .ok_or_else(|| format!("write of {} bytes at {offset} overflows", bytes.len()))?;
        if bytes.is_empty() {
            return Ok(());
        }
        // Piece by piece, each within one chunk.
        let (mut pos, mut rest) = (offset, bytes);
        while !rest.is_empty() {
            let n = (CHUNK_BYTES - pos % CHUNK_BYTES).min(rest.len() as u64) as usize;
            self.write_in_chunk(pos, &rest[..n]);
            pos += n as u64;
            rest = &rest[n..];
        }
        assert_eq!(pos, end, "the pieces cover the write");
        self.size = self.size.max(end);
        Ok(())
    }

    /// Writes `bytes`, which lie within one chunk, at `offset` (the size is the caller's).
    fn write_in_chunk(&mut self, offset: u64, bytes: &[u8]) {
        let end = offset + bytes.len() as u64;
        assert!(!bytes.is_empty(), "an empty piece at {offset}");
        assert!(
            offset / CHUNK_BYTES == (end - 1) / CHUNK_BYTES,
            "piece crosses a chunk"
        );
        // Fast path: inside one run of bytes (overwrites of a dense file).
        if let Some((&off, Run::Bytes(b))) = self.runs.range(..=offset).next_back() {
            let rel = (offset - off) as usize;
            if rel + bytes.len() <= b.len() {
                let Some(Run::Bytes(mut b)) = self.take(off) else {
                    unreachable!("the run just found")
                };
                Arc::make_mut(&mut b)[rel..rel + bytes.len()].copy_from_slice(bytes);
                self.runs.insert_mut(off, Run::Bytes(b));
                return;
            }
        }
        self.carve(offset, end);
        // Appending to the run that ends here in the same chunk keeps a dense chunk one run.
        if let Some((&off, Run::Bytes(b))) = self.runs.range(..offset).next_back() {
            if off + b.len() as u64 == offset && !offset.is_multiple_of(CHUNK_BYTES) {
                let Some(Run::Bytes(mut b)) = self.take(off) else {
                    unreachable!("the run just found")
                };
                extend_chunk(&mut b, bytes);
                self.runs.insert_mut(off, Run::Bytes(b));
                return;
            }
        }
        self.runs
            .insert_mut(offset, Run::Bytes(Arc::new(bytes.to_vec())));
    }

    /// Writes `len` zeros at `offset` (no memory for them), growing the size if needed.
    pub fn write_zeros(&mut self, offset: u64, len: u64) -> Result<(), String> {
        let end = offset
            .checked_add(len)
            .ok_or_else(|| format!("{len} zeros at {offset} overflow"))?;
        if len == 0 {
            return Ok(());
        }
        self.carve(offset, end);
        self.size = self.size.max(end);
        self.runs.insert_mut(offset, Run::Zeros(len));
        Ok(())
    }

    /// The pieces of `[from, to)` (clamped to the size), in order, without gaps.
    pub fn segments(&self, from: u64, to: u64) -> Vec<(u64, u64, Seg<'_>)> {
        let to = to.min(self.size);
        let mut out = Vec::new();
        if from >= to {
            return out; // also keeps the range below ordered
        }
        let mut pos = from;
        let start = match self.runs.range(..=from).next_back() {
            Some((&o, _)) => o,
            None => from,
        };
        for (&off, r) in self.runs.range(start..to) {
            let end = off + r.len();
            if end <= pos {
                continue;
            }
            if off > pos {
                out.push((pos, off, Seg::Hole));
                pos = off;
            }
            let stop = end.min(to);
            let seg = match r {
                Run::Bytes(b) => Seg::Bytes(&b[(pos - off) as usize..(stop - off) as usize]),
                Run::Zeros(_) => Seg::Zeros,
            };
            out.push((pos, stop, seg));
            pos = stop;
        }
        if pos < to {
            out.push((pos, to, Seg::Hole));
        }
        out
    }

    /// The byte at `offset` with holes read through `fill`; `None` past the size.
    pub fn byte_at(&self, offset: u64, fill: impl Fn(u64) -> u8) -> Option<u8> {
        if offset >= self.size {
            return None;
        }
        match self.segments(offset, offset + 1).first() {
            Some((_, _, Seg::Bytes(b))) => b.first().copied(),
            Some((_, _, Seg::Zeros)) => Some(0),
            _ => Some(fill(offset)),
        }
    }

    /// `len` bytes from `offset` (clamped to the size), holes read through `fill`. The
    /// caller bounds `len`: this allocates it.
    pub fn read(&self, offset: u64, len: u64, fill: impl Fn(u64) -> u8) -> Vec<u8> {
        let end = offset.saturating_add(len).min(self.size);
        let mut out = Vec::with_capacity(end.saturating_sub(offset) as usize);
        for (s, e, seg) in self.segments(offset, end) {
            match seg {
                Seg::Bytes(b) => out.extend_from_slice(b),
                Seg::Zeros => out.resize(out.len() + (e - s) as usize, 0),
                Seg::Hole => out.extend((s..e).map(&fill)),
            }
        }
        out
    }

    /// The whole contents with holes as zeros, if the size is at most `limit_bytes`.
    pub fn to_vec_within(&self, limit_bytes: u64) -> Option<Vec<u8>> {
        (self.size <= limit_bytes).then(|| self.read(0, self.size, |_| 0))
    }

    /// The first offset below both sizes where the contents differ (holes through `fill`).
    pub fn first_difference(&self, other: &Sparse, fill: impl Fn(u64) -> u8) -> Option<u64> {
        let end = self.size.min(other.size);
        let (a, b) = (self.segments(0, end), other.segments(0, end));
        let mut bounds: Vec<u64> = a.iter().chain(&b).flat_map(|s| [s.0, s.1]).collect();
        bounds.sort_unstable();
        bounds.dedup();
        for w in bounds.windows(2) {
            let (s, e) = (w[0], w[1]);
            let (x, y) = (seg_at(&a, s), seg_at(&b, s));
            if let Some(k) = first_unequal(x, y, s, e, &fill) {
                return Some(k);
            }
        }
        None
    }
}

/// Appends `bytes` to a chunk: in place when no clone shares it (its capacity never past
/// [`CHUNK_BYTES`], since a clone may keep it), else into an exact copy, which the clones
/// keep from then on.
fn extend_chunk(b: &mut Arc<Vec<u8>>, bytes: &[u8]) {
    let need = b.len() + bytes.len();
    assert!(need as u64 <= CHUNK_BYTES, "a chunk of {need} bytes");
    match Arc::get_mut(b) {
        Some(v) => {
            if v.capacity() < need {
                let want = need.max((2 * v.len()).min(CHUNK_BYTES as usize));
                v.reserve_exact(want - v.len());
            }
            v.extend_from_slice(bytes);
        }
        None => {
            let mut v = Vec::with_capacity(need);
            v.extend_from_slice(b);
            v.extend_from_slice(bytes);
            *b = Arc::new(v);
        }
    }
}

/// The segment covering `pos` and where it starts.
fn seg_at<'a>(segs: &[(u64, u64, Seg<'a>)], pos: u64) -> (u64, Seg<'a>) {
    let i = segs.partition_point(|s| s.1 <= pos);
    let (s, _, seg) = segs[i];
    (s, seg)
}

fn first_unequal(
    (sa, a): (u64, Seg<'_>),
    (sb, b): (u64, Seg<'_>),
    s: u64,
    e: u64,
    fill: &impl Fn(u64) -> u8,
) -> Option<u64> {
    match (a, b) {
        (Seg::Hole, Seg::Hole) | (Seg::Zeros, Seg::Zeros) => None,
        _ => {
            let byte = |seg: Seg<'_>, start: u64, k: u64| match seg {
                Seg::Bytes(bytes) => bytes[(k - start) as usize],
                Seg::Zeros => 0,
                Seg::Hole => fill(k),
            };
            // A hole against zeros may be long: zero fills compare equal without a walk.
            if matches!((a, b), (Seg::Hole, Seg::Zeros) | (Seg::Zeros, Seg::Hole))
                && fill(s) == 0
                && fill(e - 1) == 0
            {
                return None;
            }
            (s..e).find(|&k| byte(a, sa, k) != byte(b, sb, k))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terabyte_hole_costs_nothing() {
        let mut s = Sparse::new();
        s.set_len(1 << 40);
        s.write((1 << 40) - 4, b"tail").unwrap();
        s.check();
        assert_eq!(s.len(), 1 << 40);
        assert_eq!(s.stored_bytes(), 4);
        assert_eq!(s.byte_at(5, |_| 0), Some(0));
        assert_eq!(s.read((1 << 40) - 6, 10, |_| 0), b"\0\0tail");
        assert!(s.write(u64::MAX, b"x").is_err());
        // Reads past the size are empty, also where no run lies before them.
        assert!(Sparse::new().read(10, 5, |_| 0).is_empty());
        assert!(s.segments(1 << 41, 1 << 42).is_empty());
    }

    #[test]
    fn writes_split_and_merge_runs() {
        let mut s = Sparse::from(b"hello world".to_vec());
        s.write(20, b"XY").unwrap();
        s.write(4, b"O W").unwrap();
        s.write_zeros(1, 2).unwrap();
        s.check();
        assert_eq!(
            s.read(0, 100, |_| b'.'),
            b"h\0\0lO World.........XY".to_vec()
        );
        s.set_len(6);
        s.check();
        assert_eq!(s.read(0, 100, |_| b'.'), b"h\0\0lO ");
        let mut t = Sparse::new();
        for c in b"h\0\0lO " {
            t.write(t.len(), &[*c]).unwrap();
        }
        assert_eq!(t.runs().count(), 1, "appends stay one run");
        assert_eq!(s, t);
        t.write(5, b"!").unwrap();
        assert_eq!(s.first_difference(&t, |_| 0), Some(5));
    }

    #[test]
    fn holes_and_zeros_compare_through_the_fill() {
        let mut a = Sparse::new();
        a.set_len(1 << 40);
        let mut b = Sparse::new();
        b.write_zeros(0, 1 << 40).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.first_difference(&b, |_| 0x80), Some(0));
    }

    /// Applies one generated operation to a sparse file and its dense twin.
    fn apply(s: &mut Sparse, v: &mut Vec<u8>, (kind, off, len): (u8, u64, u64), byte: u8) {
        let end = (off + len) as usize;
        match kind {
            0 | 1 => {
                let fill = if kind == 0 { byte } else { 0 };
                if kind == 0 {
                    s.write(off, &vec![byte; len as usize]).unwrap();
                } else {
                    s.write_zeros(off, len).unwrap();
                }
                if len > 0 {
                    if v.len() < end {
                        v.resize(end, 0);
                    }
                    v[off as usize..end].fill(fill);
                }
            }
            _ => {
                s.set_len(off);
                v.resize(off as usize, 0);
            }
        }
    }

    /// Operations around chunk boundaries, some longer than a chunk.
    fn near_chunks() -> impl proptest::strategy::Strategy<Value = (u8, u64, u64)> {
        use proptest::prelude::*;
        (
            0u8..4,
            0u64..4,
            0u64..64,
            prop_oneof![0u64..48, 0..2 * CHUNK_BYTES + 9],
        )
            .prop_map(|(kind, k, d, len)| (kind, (k * CHUNK_BYTES).saturating_sub(32) + d, len))
    }

    #[test]
    fn appends_share_all_but_the_last_chunk() {
        let mut s = Sparse::new();
        let mut kept = Vec::new();
        for i in 0..64u8 {
            s.write(s.len(), &[i; 4096]).unwrap();
            kept.push(s.clone());
        }
        s.check();
        assert_eq!(s.runs().count(), 16, "one run per 16 KiB chunk");
        // Every kept state still reads what it held when it was cloned.
        for (i, k) in kept.iter().enumerate() {
            k.check();
            assert_eq!(k.len(), 4096 * (i as u64 + 1));
            assert_eq!(k.byte_at(k.len() - 1, |_| 9), Some(i as u8));
        }
        // The chunks are shared, not copied: distinct allocations number about one per
        // append (the growing last chunk), not the sum of all sizes.
        let mut ptrs: Vec<*const Vec<u8>> = kept
            .iter()
            .flat_map(|k| {
                k.runs().filter_map(|(_, r)| match r {
                    Run::Bytes(b) => Some(Arc::as_ptr(b)),
                    Run::Zeros(_) => None,
                })
            })
            .collect();
        ptrs.sort();
        ptrs.dedup();
        assert_eq!(ptrs.len(), 64);
    }

    #[test]
    fn a_chunk_no_clone_shares_is_written_in_place() {
        let ptr = |s: &Sparse| match s.runs().next() {
            Some((_, Run::Bytes(b))) => Arc::as_ptr(b),
            _ => panic!("one run of bytes"),
        };
        let mut s = Sparse::from(vec![1; 100]);
        let p = ptr(&s);
        s.write(10, b"xy").unwrap();
        assert_eq!(
            ptr(&s),
            p,
            "an overwrite of an unshared chunk copies nothing"
        );
        let kept = s.clone();
        s.write(10, b"zz").unwrap();
        assert_ne!(ptr(&s), p, "an overwrite of a shared chunk copies it");
        assert_eq!(kept.read(10, 2, |_| 0), b"xy");
        assert_eq!(ptr(&kept), p);
    }

    proptest::proptest! {
        #[test]
        fn a_clone_is_independent_of_the_original(
            before in proptest::collection::vec(near_chunks(), 0..12),
            ops in proptest::collection::vec((proptest::bool::ANY, near_chunks()), 0..24),
        ) {
            let (mut a, mut va) = (Sparse::new(), Vec::<u8>::new());
            for (i, op) in before.into_iter().enumerate() {
                apply(&mut a, &mut va, op, i as u8 | 1);
            }
            let (mut b, mut vb) = (a.clone(), va.clone());
            for (i, (to_clone, op)) in ops.into_iter().enumerate() {
                let byte = 0x40 | i as u8;
                if to_clone {
                    apply(&mut b, &mut vb, op, byte);
                } else {
                    apply(&mut a, &mut va, op, byte);
                }
                a.check();
                b.check();
                let (ra, rb) = (a.read(0, 1 << 20, |_| 0), b.read(0, 1 << 20, |_| 0));
                proptest::prop_assert_eq!(ra, va.clone());
                proptest::prop_assert_eq!(rb, vb.clone());
            }
        }

        #[test]
        fn agrees_with_a_dense_vector_across_chunks(ops in proptest::collection::vec(near_chunks(), 0..40)) {
            let (mut s, mut v) = (Sparse::new(), Vec::<u8>::new());
            for (i, op) in ops.into_iter().enumerate() {
                apply(&mut s, &mut v, op, i as u8 | 1);
                s.check();
                proptest::prop_assert_eq!(s.read(0, 1 << 20, |_| 0), v.clone());
                proptest::prop_assert_eq!(&s, &Sparse::from(v.clone()));
            }
        }

        #[test]
        fn agrees_with_a_dense_vector(ops in proptest::collection::vec((0u8..4, 0u64..64, 0u64..16), 0..40)) {
            let (mut s, mut v) = (Sparse::new(), Vec::<u8>::new());
            for (i, (kind, off, len)) in ops.into_iter().enumerate() {
                let byte = i as u8 | 1;
                match kind {
                    0 => {
                        s.write(off, &vec![byte; len as usize]).unwrap();
                        if len > 0 {
                            let end = (off + len) as usize;
                            if v.len() < end { v.resize(end, 0); }
                            v[off as usize..end].fill(byte);
                        }
                    }
                    1 => {
                        s.write_zeros(off, len).unwrap();
                        if len > 0 {
                            let end = (off + len) as usize;
                            if v.len() < end { v.resize(end, 0); }
                            v[off as usize..end].fill(0);
                        }
                    }
                    _ => {
                        s.set_len(off);
                        v.resize(off as usize, 0);
                    }
                }
                s.check();
                proptest::prop_assert_eq!(s.read(0, 1000, |_| 0), v.clone());
                proptest::prop_assert_eq!(&s, &Sparse::from(v.clone()));
            }
        }
    }
}
