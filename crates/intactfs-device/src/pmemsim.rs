//! The simulated persistent memory: what reads see, what is guaranteed persistent, and per
//! word every value a crash may still leave there.

use crate::pmem::{
    check_range, check_size, check_word, lines, PmemCounters, PmemDevice, PmemError, CACHELINE,
    WORD,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};

/// Memory-backed twin of [`crate::PmemFile`] that remembers what is still volatile.
///
/// Allowed post-crash images: every aligned [`WORD`] independently holds its persistent value
/// or any value stored to it since (the cache may write a line back at any moment, as often
/// as it likes, in any order with other lines; a word never tears). A `clwb` followed by a
/// `fence` makes each word of the line persistent with its value at the time of the `clwb`;
/// the values stored after the `clwb` stay possible (the write-back may have caught them)
/// but are not guaranteed. Nothing stored after a fence is guaranteed by it.
///
/// `write` is modelled as whole-word stores (each word it touches takes its value after the
/// write): a byte-wise `memcpy` could leave a word half-written, which this twin does not
/// show, so a protocol that needs a word atomic uses [`PmemDevice::store_u64`].
#[derive(Clone, Debug)]
pub struct PmemSim {
    /// What reads see.
    current: Vec<u8>,
    /// What survives any crash.
    persistent: Vec<u8>,
    /// Words (by index) that a crash may leave other than persistent.
    dirty: BTreeMap<usize, Dirty>,
    /// Lines `clwb`'d since the last fence.
    unfenced: BTreeSet<usize>,
    counters: PmemCounters,
}

#[derive(Clone, Debug, Default)]
struct Dirty {
    /// Values stored since the word was last guaranteed, other than its persistent value (a
    /// set: a crash may leave any of them, in no particular order).
    stored: BTreeSet<u64>,
    /// Set by a `clwb` of the line: the word's value then, which the next fence makes
    /// persistent, and the values stored after it (still volatile after that fence).
    flushed: Option<(u64, BTreeSet<u64>)>,
}

/// One image a crash may leave, and how it was drawn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmemCrashImage {
    pub bytes: Vec<u8>,
    /// e.g. "seed 7: per word (p 0.31): 3 of 10 dirty words took a stored value (0x40 0x48 0x80)"
    pub description: String,
}

fn word_at(bytes: &[u8], w: usize) -> u64 {
    u64::from_le_bytes(
        bytes[w * WORD..(w + 1) * WORD]
            .try_into()
            .expect("a word is 8 bytes"),
    )
}

fn set_word(bytes: &mut [u8], w: usize, v: u64) {
    bytes[w * WORD..(w + 1) * WORD].copy_from_slice(&v.to_le_bytes());
}

const WORDS_PER_LINE: usize = CACHELINE / WORD;

impl PmemSim {
    /// A zero-filled device of `len` bytes (a positive multiple of [`CACHELINE`]).
    pub fn new(len: u64) -> Result<Self, PmemError> {
        check_size(|| "a simulated device".into(), len)?;
        // An absurd size is an error, not an allocation panic.
        let mut image = Vec::new();
        usize::try_from(len)
            .ok()
            .and_then(|n| image.try_reserve_exact(n).ok())
            .ok_or_else(|| PmemError::Io {
                what: "allocating",
                path: format!("a simulated device of {len} bytes"),
                source: std::io::Error::new(std::io::ErrorKind::OutOfMemory, "not enough memory"),
            })?;
        image.resize(len as usize, 0);
        Self::from_image(image)
    }

    /// A device whose persistent content is `image` (a crash image, to run recovery on it and
    /// crash again during recovery).
    pub fn from_image(image: Vec<u8>) -> Result<Self, PmemError> {
        check_size(|| "an image".into(), image.len() as u64)?;
        Ok(PmemSim {
            current: image.clone(),
            persistent: image,
            dirty: BTreeMap::new(),
            unfenced: BTreeSet::new(),
            counters: PmemCounters::default(),
        })
    }

    /// The content that survives every crash.
    pub fn persistent(&self) -> &[u8] {
        &self.persistent
    }

    /// The content reads see now (what a crash-free run leaves once it persists everything).
    pub fn contents(&self) -> &[u8] {
        &self.current
    }

    /// Words a crash may leave other than persistent (each has at least one alternative).
    pub fn dirty_words(&self) -> usize {
        self.dirty.len()
    }

    /// Lines holding at least one dirty word.
    pub fn dirty_lines(&self) -> usize {
        let mut n = 0;
        let mut last = None;
        for &w in self.dirty.keys() {
            let l = w / WORDS_PER_LINE;
            if last != Some(l) {
                n += 1;
                last = Some(l);
            }
        }
        n
    }

    /// Lines `clwb`'d since the last fence.
    pub fn unfenced_lines(&self) -> usize {
        self.unfenced.len()
    }

    /// How many distinct images a crash may leave now (the product of each dirty word's
    /// choices), saturating at `u128::MAX`.
    pub fn image_count(&self) -> u128 {
        self.dirty
            .values()
            .fold(1u128, |n, d| n.saturating_mul(1 + d.stored.len() as u128))
    }

    /// A dirty word's choices: its persistent value first, then the values stored since.
    fn choices(&self, w: usize, d: &Dirty) -> Vec<u64> {
        std::iter::once(word_at(&self.persistent, w))
            .chain(d.stored.iter().copied())
            .collect()
    }

    /// One allowed image, the same for the same seed. The draw mixes shapes that catch
    /// different bugs: all persistent (1/8), all newest (1/8), per line old or newest with a
    /// drawn probability (1/4: whole-line evictions), per word persistent or any stored value
    /// with a drawn probability (1/2: a single lost or early word among many).
    pub fn crash(&self, seed: u64) -> PmemCrashImage {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let total = self.dirty.len();
        match rng.random_range(0..8u32) {
            0 => PmemCrashImage {
                bytes: self.persistent.clone(),
                description: format!(
                    "seed {seed}: all {total} dirty words persistent (nothing written back)"
                ),
            },
            1 => PmemCrashImage {
                bytes: self.current.clone(),
                description: format!(
                    "seed {seed}: all {total} dirty words newest (everything written back)"
                ),
            },
            2 | 3 => {
                let p: f64 = rng.random();
                let mut bytes = self.persistent.clone();
                let mut newest = Vec::new();
                let mut line = None;
                let mut take = false;
                for &w in self.dirty.keys() {
                    let l = w / WORDS_PER_LINE;
                    if line != Some(l) {
                        line = Some(l);
                        take = rng.random_bool(p);
                        if take {
                            newest.push(l * CACHELINE);
                        }
                    }
                    if take {
                        set_word(&mut bytes, w, word_at(&self.current, w));
                    }
                }
                let description = format!(
                    "seed {seed}: per line (p {p:.2}): {} of {} dirty lines newest{}",
                    newest.len(),
                    self.dirty_lines(),
                    list(&newest)
                );
                PmemCrashImage { bytes, description }
            }
            _ => {
                let p: f64 = rng.random();
                let mut bytes = self.persistent.clone();
                let mut changed = Vec::new();
                for (&w, d) in &self.dirty {
                    if rng.random_bool(p) {
                        let k = rng.random_range(0..d.stored.len());
                        let v = *d.stored.iter().nth(k).expect("k < len");
                        set_word(&mut bytes, w, v);
                        changed.push(w * WORD);
                    }
                }
                let description = format!("seed {seed}: per word (p {p:.2}): {} of {total} dirty words took a stored value{}", changed.len(), list(&changed));
                PmemCrashImage { bytes, description }
            }
        }
    }

    /// `n` images: those of seeds `seed`, `seed + 1`, … (each reproducible alone by the
    /// seed its description names).
    pub fn crash_images(&self, seed: u64, n: usize) -> Vec<PmemCrashImage> {
        (0..n as u64)
            .map(|k| self.crash(seed.wrapping_add(k)))
            .collect()
    }

    /// The two extremes: nothing volatile written back (the persistent content), and
    /// everything written back (the contents reads see).
    pub fn extreme_images(&self) -> [PmemCrashImage; 2] {
        let n = self.dirty.len();
        [
            PmemCrashImage {
                bytes: self.persistent.clone(),
                description: format!("all {n} dirty words persistent"),
            },
            PmemCrashImage {
                bytes: self.current.clone(),
                description: format!("all {n} dirty words newest"),
            },
        ]
    }

    /// Whether a crash now may leave `image`.
    pub fn allows(&self, image: &[u8]) -> bool {
        if image.len() != self.persistent.len() {
            return false;
        }
        let mut probe = image.to_vec();
        for (&w, d) in &self.dirty {
            let got = word_at(image, w);
            if d.stored.contains(&got) {
                set_word(&mut probe, w, word_at(&self.persistent, w));
            }
        }
        probe == self.persistent
    }

    /// Every image a crash now may leave, when there are at most `max`; None when there are
    /// more (sample with [`PmemSim::crash`] then).
    pub fn all_images(&self, max: usize) -> Option<Vec<Vec<u8>>> {
        if self.image_count() > max as u128 {
            return None;
        }
        let words: Vec<(usize, Vec<u64>)> = self
            .dirty
            .iter()
            .map(|(&w, d)| (w, self.choices(w, d)))
            .collect();
        let mut out = Vec::new();
        let mut pick = vec![0usize; words.len()];
        loop {
            let mut img = self.persistent.clone();
            for ((w, vs), &p) in words.iter().zip(&pick) {
                set_word(&mut img, *w, vs[p]);
            }
            out.push(img);
            // Odometer over the per-word choices.
            let mut i = 0;
            loop {
                if i == pick.len() {
                    return Some(out);
                }
                pick[i] += 1;
                if pick[i] < words[i].1.len() {
                    break;
                }
                pick[i] = 0;
                i += 1;
            }
        }
    }

    /// Records that word `w` now holds `v` (already in `current`).
    fn stored(&mut self, w: usize, v: u64) {
        let durable = word_at(&self.persistent, w);
        let d = self.dirty.entry(w).or_default();
        if v != durable {
            d.stored.insert(v);
        }
        if let Some((at_clwb, after)) = &mut d.flushed {
            if v != *at_clwb {
                after.insert(v);
            }
        }
        if d.stored.is_empty() {
            // Only a store of the persistent value to a clean word gets here.
            self.dirty.remove(&w);
        }
    }
}

/// " (0x40 0x48 …)" for up to 8 offsets.
fn list(offs: &[usize]) -> String {
    if offs.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = offs.iter().take(8).map(|o| format!("{o:#x}")).collect();
    format!(
        " ({}{})",
        shown.join(" "),
        if offs.len() > 8 { " …" } else { "" }
    )
}

impl PmemDevice for PmemSim {
    fn len(&self) -> u64 {
        self.current.len() as u64
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), PmemError> {
        let r = check_range(off, buf.len() as u64, self.len())?;
        buf.copy_from_slice(&self.current[r]);
        Ok(())
    }
    fn write(&mut self, off: u64, data: &[u8]) -> Result<(), PmemError> {
        let r = check_range(off, data.len() as u64, self.len())?;
        self.current[r.clone()].copy_from_slice(data);
        self.counters.stores += 1;
        self.counters.bytes_stored += data.len() as u64;
        if !r.is_empty() {
            for w in r.start / WORD..r.end.div_ceil(WORD) {
                self.stored(w, word_at(&self.current, w));
            }
        }
        Ok(())
    }
    fn store_u64(&mut self, off: u64, v: u64) -> Result<(), PmemError> {
        let at = check_word(off, self.len())?;
        self.current[at..at + WORD].copy_from_slice(&v.to_le_bytes());
        self.counters.stores += 1;
        self.counters.bytes_stored += WORD as u64;
        self.stored(at / WORD, v);
        Ok(())
    }
    fn load_u64(&self, off: u64) -> Result<u64, PmemError> {
        let at = check_word(off, self.len())?;
        Ok(word_at(&self.current, at / WORD))
    }
    fn clwb(&mut self, off: u64, len: u64) -> Result<(), PmemError> {
        let lines = lines(&check_range(off, len, self.len())?);
        self.counters.lines_flushed += lines.len() as u64;
        for l in lines.clone() {
            self.unfenced.insert(l);
        }
        // Each dirty word of these lines: a later clwb supersedes an earlier one (its value
        // is newer, and fewer stores follow it).
        let words = lines.start * WORDS_PER_LINE..lines.end * WORDS_PER_LINE;
        for (&w, d) in self.dirty.range_mut(words) {
            d.flushed = Some((word_at(&self.current, w), BTreeSet::new()));
        }
        Ok(())
    }
    fn fence(&mut self) -> Result<(), PmemError> {
        for l in std::mem::take(&mut self.unfenced) {
            let words: Vec<usize> = self
                .dirty
                .range(l * WORDS_PER_LINE..(l + 1) * WORDS_PER_LINE)
                .map(|(&w, _)| w)
                .collect();
            for w in words {
                let d = self.dirty.get_mut(&w).expect("listed above");
                let Some((v, after)) = d.flushed.take() else {
                    continue;
                };
                set_word(&mut self.persistent, w, v);
                d.stored = after;
                if d.stored.is_empty() {
                    self.dirty.remove(&w);
                }
            }
        }
        self.counters.fences += 1;
        Ok(())
    }
    fn counters(&self) -> PmemCounters {
        self.counters
    }
}
