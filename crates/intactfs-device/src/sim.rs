//! The simulated block device: a volatile write cache in front of the media.

use crate::{check, check_block_size, BlockDevice, DeviceError, SECTOR};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// Memory-backed device that remembers which writes are still volatile.
///
/// Allowed post-crash images: every sector independently holds its durable content or the
/// content one of the volatile writes gave it. (A cache may have destaged any of a sector's
/// volatile versions before the crash, torn writes land some sectors and not others, and
/// writes reach the media in any order.) A completed flush makes everything durable.
#[derive(Clone, Debug)]
pub struct SimDevice {
    block_size: usize,
    blocks: u64,
    /// What survives any crash.
    media: Vec<u8>,
    /// What reads see: the media with every volatile write applied.
    current: Vec<u8>,
    /// Writes since the last flush, in issue order.
    volatile: Vec<(u64, Vec<u8>)>,
    writes: u64,
    flushes: u64,
}

/// One image a crash may leave, and how it was drawn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashImage {
    pub bytes: Vec<u8>,
    /// e.g. "seed 7: volatile writes 4, 0 (sectors 0,3 of 8), 2 reached the media, in that order"
    pub description: String,
}

impl SimDevice {
    /// A zero-filled device.
    pub fn new(block_size: usize, blocks: u64) -> Result<Self, DeviceError> {
        Self::from_image(block_size, vec![0; block_size * blocks as usize])
    }

    /// A device whose durable content is `image` (e.g. a crash image, to recover from it).
    pub fn from_image(block_size: usize, image: Vec<u8>) -> Result<Self, DeviceError> {
        check_block_size(block_size)?;
        if !image.len().is_multiple_of(block_size) {
            return Err(DeviceError::BadImage {
                len: image.len(),
                block_size,
            });
        }
        let blocks = (image.len() / block_size) as u64;
        Ok(SimDevice {
            block_size,
            blocks,
            media: image.clone(),
            current: image,
            volatile: Vec::new(),
            writes: 0,
            flushes: 0,
        })
    }

    /// Writes since the last completed flush.
    pub fn volatile_writes(&self) -> usize {
        self.volatile.len()
    }

    /// Writes and flushes so far: the crash points a test walks through.
    pub fn counters(&self) -> (u64, u64) {
        (self.writes, self.flushes)
    }

    /// The content that survives every crash.
    pub fn durable(&self) -> &[u8] {
        &self.media
    }

    /// The content reads see now (what a crash-free run would leave after a flush).
    pub fn contents(&self) -> &[u8] {
        &self.current
    }

    /// For each sector some volatile write touched: its durable content followed by each
    /// volatile version, oldest first.
    fn sector_versions(&self) -> BTreeMap<usize, Vec<&[u8]>> {
        let mut m: BTreeMap<usize, Vec<&[u8]>> = BTreeMap::new();
        for (block, data) in &self.volatile {
            let base = *block as usize * self.block_size;
            for (k, chunk) in data.chunks(SECTOR).enumerate() {
                let at = base + k * SECTOR;
                m.entry(at)
                    .or_insert_with(|| vec![&self.media[at..at + SECTOR]])
                    .push(chunk);
            }
        }
        m
    }

    /// One allowed image, the same for the same seed: a random subset of the volatile
    /// writes reaches the media in a random order, a quarter of them torn (a random subset
    /// of their sectors).
    pub fn crash(&self, seed: u64) -> CrashImage {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut bytes = self.media.clone();
        let mut order: Vec<usize> = (0..self.volatile.len())
            .filter(|_| rng.random_bool(0.5))
            .collect();
        // Fisher-Yates with the same generator.
        for i in (1..order.len()).rev() {
            let j = rng.random_range(0..=i);
            order.swap(i, j);
        }
        let mut what = Vec::new();
        for &w in &order {
            let (block, data) = &self.volatile[w];
            let base = *block as usize * self.block_size;
            let sectors = data.len() / SECTOR;
            let torn = sectors > 1 && rng.random_bool(0.25);
            let mut landed = Vec::new();
            for k in 0..sectors {
                if !torn || rng.random_bool(0.5) {
                    bytes[base + k * SECTOR..base + (k + 1) * SECTOR]
                        .copy_from_slice(&data[k * SECTOR..(k + 1) * SECTOR]);
                    landed.push(k);
                }
            }
            what.push(if torn {
                format!(
                    "{w} (sectors {} of {sectors})",
                    landed
                        .iter()
                        .map(|k| k.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                )
            } else {
                w.to_string()
            });
        }
        let description = if what.is_empty() {
            format!(
                "seed {seed}: none of {} volatile writes reached the media",
                self.volatile.len()
            )
        } else {
            format!(
                "seed {seed}: of {} volatile writes, {} reached the media, in that order",
                self.volatile.len(),
                what.join(", ")
            )
        };
        CrashImage { bytes, description }
    }

    /// Whether a crash may leave `image`: every sector holds its durable content or one of
    /// its volatile versions.
    pub fn allows(&self, image: &[u8]) -> bool {
        if image.len() != self.media.len() {
            return false;
        }
        let versions = self.sector_versions();
        image
            .chunks(SECTOR)
            .zip(self.media.chunks(SECTOR))
            .enumerate()
            .all(|(k, (got, durable))| match versions.get(&(k * SECTOR)) {
                Some(vs) => vs.contains(&got),
                None => got == durable,
            })
    }

    /// Every allowed image, when there are at most `max` (distinct sector choices
    /// multiplied); None when there are more (sample with [`SimDevice::crash`] then).
    pub fn all_images(&self, max: usize) -> Option<Vec<Vec<u8>>> {
        let versions: Vec<(usize, Vec<&[u8]>)> = self
            .sector_versions()
            .into_iter()
            .map(|(at, mut vs)| {
                vs.dedup();
                let mut uniq: Vec<&[u8]> = Vec::new();
                for v in vs {
                    if !uniq.contains(&v) {
                        uniq.push(v);
                    }
                }
                (at, uniq)
            })
            .collect();
        let mut total: usize = 1;
        for (_, vs) in &versions {
            total = total.checked_mul(vs.len()).filter(|&t| t <= max)?;
        }
        let mut out = Vec::with_capacity(total);
        let mut pick = vec![0usize; versions.len()];
        loop {
            let mut img = self.media.clone();
            for ((at, vs), &p) in versions.iter().zip(&pick) {
                img[*at..*at + SECTOR].copy_from_slice(vs[p]);
            }
            out.push(img);
            // Odometer over the per-sector choices.
            let mut i = 0;
            loop {
                if i == pick.len() {
                    return Some(out);
                }
                pick[i] += 1;
                if pick[i] < versions[i].1.len() {
                    break;
                }
                pick[i] = 0;
                i += 1;
            }
        }
    }
}

impl BlockDevice for SimDevice {
    fn block_size(&self) -> usize {
        self.block_size
    }
    fn blocks(&self) -> u64 {
        self.blocks
    }
    fn read(&mut self, block: u64, buf: &mut [u8]) -> Result<(), DeviceError> {
        check(block, buf.len(), self.blocks, self.block_size)?;
        let at = block as usize * self.block_size;
        buf.copy_from_slice(&self.current[at..at + self.block_size]);
        Ok(())
    }
    fn write(&mut self, block: u64, data: &[u8]) -> Result<(), DeviceError> {
        check(block, data.len(), self.blocks, self.block_size)?;
        let at = block as usize * self.block_size;
        self.current[at..at + self.block_size].copy_from_slice(data);
        self.volatile.push((block, data.to_vec()));
        self.writes += 1;
        Ok(())
    }
    fn flush(&mut self) -> Result<(), DeviceError> {
        self.media.copy_from_slice(&self.current);
        self.volatile.clear();
        self.flushes += 1;
        Ok(())
    }
}
