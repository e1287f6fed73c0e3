//! Which crash images a block device may leave, from a [`BlockLog`].
//!
//! A crash during epoch j (after flush j completed, before flush j+1 did) leaves every
//! write of epochs < j on media, and any subset of epoch j's writes — in any order, so a
//! later write may be there without an earlier one — each possibly torn at sector
//! granularity. The images are therefore:
//!
//! * **prefix** j: epochs < j, nothing of epoch j (the crash came right after a flush);
//! * **subset**: epochs < j plus a proper, non-empty subset of epoch j — all of them when
//!   the epoch has at most `exhaustive` writes, otherwise the in-order prefixes, every
//!   "all but one", every "only one", and `samples` random subsets from the seed;
//! * **torn**: epochs < j, the writes of epoch j before w in log order, and a proper
//!   subset of w's sectors (in units of `tear` bytes), for up to `torn` writes w per epoch
//!   larger than one unit;
//! * **final**: everything (what the file system left at unmount).
//!
//! Images with the same content (same sector map) are kept once. Above `max_images`,
//! prefixes and the final image are kept and the rest is sampled from the seed.

use crate::log::{BlockLog, Kind, SECTOR};
use std::collections::{BTreeMap, HashSet};

#[derive(Clone, Debug)]
pub struct GenConfig {
    pub exhaustive: usize,
    pub samples: usize,
    pub torn: usize,
    pub seed: u64,
    pub max_images: usize,
    /// Torn writes keep or lose whole units of this many bytes (a multiple of 512): 512 for
    /// a disk that writes sectors atomically, 4096 for one with 4 KiB atomic writes.
    pub tear: u64,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            exhaustive: 8,
            samples: 32,
            torn: 4,
            seed: 0,
            max_images: 5000,
            tear: 4096,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageKind {
    Prefix,
    Subset,
    Torn,
    Final,
}

/// Part of a write that reached media: these sectors (indices within the write).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Torn {
    pub record: usize,
    pub sectors: Vec<u32>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct ImageSpec {
    pub id: usize,
    pub kind: ImageKind,
    /// Epochs before this one are on media in full.
    pub epoch: usize,
    /// Record indices of this epoch's writes that are on media, in log order.
    pub members: Vec<usize>,
    pub torn: Option<Torn>,
    #[serde(serialize_with = "hex")]
    pub hash: [u8; 32],
}

fn hex<S: serde::Serializer>(h: &[u8; 32], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::logdir::hex(h))
}

#[derive(Debug, thiserror::Error)]
pub enum GenError {
    #[error("record {record} writes {len} bytes at offset {offset}, not whole {SECTOR}-byte sectors; crash images are built per sector")]
    Unaligned {
        record: usize,
        offset: u64,
        len: u64,
    },
}

/// Where a sector's content comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Src {
    /// Sector `k` of write record `record`.
    Log {
        record: usize,
        k: u32,
    },
    Zeros,
}

/// The sectors an image changes relative to the initial image.
pub type SectorMap = BTreeMap<u64, Src>;

/// A contiguous range to write onto a copy of the initial image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece {
    /// `len` bytes of log data starting at record `record`'s byte `from`.
    Log {
        offset: u64,
        record: usize,
        from: u64,
        len: u64,
    },
    Zeros {
        offset: u64,
        len: u64,
    },
}

pub struct Generator<'a> {
    log: &'a BlockLog,
    epochs: Vec<Vec<usize>>,
    /// Content hash of every sector of every write, by record (empty for others).
    sector_hash: Vec<Vec<u64>>,
}

fn h64(b: &[u8]) -> u64 {
    let h = blake3::hash(b);
    u64::from_le_bytes(h.as_bytes()[..8].try_into().unwrap_or_default())
}

pub(crate) struct Rng(pub(crate) u64);
impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

impl<'a> Generator<'a> {
    pub fn new(log: &'a BlockLog) -> Result<Generator<'a>, GenError> {
        let mut sector_hash = Vec::with_capacity(log.records.len());
        for (i, r) in log.records.iter().enumerate() {
            if r.kind != Kind::Flush && (r.offset % SECTOR != 0 || r.len % SECTOR != 0) {
                return Err(GenError::Unaligned {
                    record: i,
                    offset: r.offset,
                    len: r.len,
                });
            }
            sector_hash.push(match r.kind {
                Kind::Write { .. } => log.data(i).chunks(SECTOR as usize).map(h64).collect(),
                _ => Vec::new(),
            });
        }
        Ok(Generator {
            log,
            epochs: log.epochs(),
            sector_hash,
        })
    }

    pub fn epochs(&self) -> &[Vec<usize>] {
        &self.epochs
    }

    fn apply(&self, map: &mut SectorMap, record: usize, only: Option<&[u32]>) {
        let r = &self.log.records[record];
        let first = r.offset / SECTOR;
        let n = (r.len / SECTOR) as u32;
        let mut put = |k: u32| {
            let src = match r.kind {
                Kind::Write { .. } => Src::Log { record, k },
                _ => Src::Zeros,
            };
            map.insert(first + u64::from(k), src);
        };
        match only {
            Some(ks) => ks.iter().copied().filter(|&k| k < n).for_each(&mut put),
            None => (0..n).for_each(put),
        }
    }

    /// The sector map of an image.
    pub fn sector_map(&self, spec: &ImageSpec) -> SectorMap {
        let mut map = SectorMap::new();
        for e in &self.epochs[..spec.epoch] {
            for &i in e {
                self.apply(&mut map, i, None);
            }
        }
        self.overlay(&mut map, &spec.members, spec.torn.as_ref());
        map
    }

    /// Only what an image adds to its epoch's base (every epoch before it on media).
    pub fn overlay_map(&self, spec: &ImageSpec) -> SectorMap {
        let mut map = SectorMap::new();
        self.overlay(&mut map, &spec.members, spec.torn.as_ref());
        map
    }

    /// What epoch `j`'s writes change, all of them in log order (base j+1 = base j + this).
    pub fn epoch_map(&self, j: usize) -> SectorMap {
        let mut map = SectorMap::new();
        for &i in self.epochs.get(j).map(|v| v.as_slice()).unwrap_or(&[]) {
            self.apply(&mut map, i, None);
        }
        map
    }

    fn overlay(&self, map: &mut SectorMap, members: &[usize], torn: Option<&Torn>) {
        for &i in members {
            self.apply(map, i, None);
        }
        if let Some(t) = torn {
            self.apply(map, t.record, Some(&t.sectors));
        }
    }

    fn hash(&self, map: &SectorMap) -> [u8; 32] {
        let zero = h64(&[0u8; SECTOR as usize]);
        let mut h = blake3::Hasher::new();
        for (s, src) in map {
            let v = match *src {
                Src::Log { record, k } => self.sector_hash[record][k as usize],
                Src::Zeros => zero,
            };
            h.update(&s.to_le_bytes());
            h.update(&v.to_le_bytes());
        }
        *h.finalize().as_bytes()
    }

    /// Ranges to write onto the initial image to obtain `map` (adjacent sectors of one
    /// record, or adjacent zeros, coalesced).
    pub fn pieces(&self, map: &SectorMap) -> Vec<Piece> {
        let mut out: Vec<Piece> = Vec::new();
        for (&s, &src) in map {
            let offset = s * SECTOR;
            let merged = match (out.last_mut(), src) {
                (
                    Some(Piece::Log {
                        offset: o,
                        record: r,
                        from,
                        len,
                    }),
                    Src::Log { record, k },
                ) if *r == record
                    && *o + *len == offset
                    && *from + *len == u64::from(k) * SECTOR =>
                {
                    *len += SECTOR;
                    true
                }
                (Some(Piece::Zeros { offset: o, len }), Src::Zeros) if *o + *len == offset => {
                    *len += SECTOR;
                    true
                }
                _ => false,
            };
            if !merged {
                out.push(match src {
                    Src::Log { record, k } => Piece::Log {
                        offset,
                        record,
                        from: u64::from(k) * SECTOR,
                        len: SECTOR,
                    },
                    Src::Zeros => Piece::Zeros {
                        offset,
                        len: SECTOR,
                    },
                });
            }
        }
        out
    }

    /// Every distinct image, in epoch order. Returns the images and how many distinct
    /// images there were before `max_images` sampling.
    pub fn generate(&self, cfg: &GenConfig) -> (Vec<ImageSpec>, usize) {
        let mut rng = Rng(cfg.seed ^ 0x1D7A_C7B1_0C4E_0001);
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        let mut base = SectorMap::new();
        let last = self.epochs.len() - 1;
        let mut push = |g: &Generator,
                        base: &SectorMap,
                        kind,
                        epoch,
                        members: Vec<usize>,
                        torn: Option<Torn>,
                        out: &mut Vec<ImageSpec>| {
            let mut map = base.clone();
            g.overlay(&mut map, &members, torn.as_ref());
            let hash = g.hash(&map);
            if seen.insert(hash) {
                out.push(ImageSpec {
                    id: 0,
                    kind,
                    epoch,
                    members,
                    torn,
                    hash,
                });
            }
        };
        for (j, w) in self.epochs.iter().enumerate() {
            push(
                self,
                &base,
                ImageKind::Prefix,
                j,
                Vec::new(),
                None,
                &mut out,
            );
            let n = w.len();
            let pick = |mask: &dyn Fn(usize) -> bool| -> Vec<usize> {
                (0..n).filter(|&k| mask(k)).map(|k| w[k]).collect()
            };
            if n > 1 && n <= cfg.exhaustive {
                for m in 1u64..(1 << n) - 1 {
                    push(
                        self,
                        &base,
                        ImageKind::Subset,
                        j,
                        pick(&|k| m >> k & 1 == 1),
                        None,
                        &mut out,
                    );
                }
            } else if n > 1 {
                for p in 1..n {
                    push(
                        self,
                        &base,
                        ImageKind::Subset,
                        j,
                        pick(&|k| k < p),
                        None,
                        &mut out,
                    );
                }
                for x in 0..n {
                    push(
                        self,
                        &base,
                        ImageKind::Subset,
                        j,
                        pick(&|k| k != x),
                        None,
                        &mut out,
                    );
                    push(
                        self,
                        &base,
                        ImageKind::Subset,
                        j,
                        pick(&|k| k == x),
                        None,
                        &mut out,
                    );
                }
                for _ in 0..cfg.samples {
                    let bits: Vec<bool> = (0..n).map(|_| rng.next() & 1 == 1).collect();
                    if bits.iter().all(|&b| b) || !bits.iter().any(|&b| b) {
                        continue;
                    }
                    push(
                        self,
                        &base,
                        ImageKind::Subset,
                        j,
                        pick(&|k| bits[k]),
                        None,
                        &mut out,
                    );
                }
            }
            // Torn writes: the crash hit while w was being written, after the ones before it.
            let unit = (cfg.tear / SECTOR).max(1) as u32;
            let mut multi: Vec<usize> = (0..n)
                .filter(|&k| {
                    matches!(self.log.records[w[k]].kind, Kind::Write { .. })
                        && self.log.records[w[k]].len > u64::from(unit) * SECTOR
                })
                .collect();
            for i in (1..multi.len()).rev() {
                multi.swap(i, rng.below(i + 1));
            }
            multi.truncate(cfg.torn);
            multi.sort_unstable();
            for k in multi {
                let sectors = (self.log.records[w[k]].len / SECTOR) as u32;
                let units = sectors.div_ceil(unit);
                let mut kept: Vec<u32> = (0..units).filter(|_| rng.next() & 1 == 1).collect();
                if kept.is_empty() || kept.len() == units as usize {
                    kept = vec![0]; // the first unit only: the commonest tear
                }
                let chosen: Vec<u32> = kept
                    .iter()
                    .flat_map(|u| (u * unit..((u + 1) * unit).min(sectors)).collect::<Vec<_>>())
                    .collect();
                push(
                    self,
                    &base,
                    ImageKind::Torn,
                    j,
                    w[..k].to_vec(),
                    Some(Torn {
                        record: w[k],
                        sectors: chosen,
                    }),
                    &mut out,
                );
            }
            for &i in w {
                self.apply(&mut base, i, None);
            }
            if j == last {
                // Everything: equal to the device at the end of recording.
                let hash = self.hash(&base);
                out.retain(|s| s.hash != hash);
                out.push(ImageSpec {
                    id: 0,
                    kind: ImageKind::Final,
                    epoch: last + 1,
                    members: Vec::new(),
                    torn: None,
                    hash,
                });
            }
        }
        let distinct = out.len();
        if out.len() > cfg.max_images {
            let (mut keep, mut rest): (Vec<ImageSpec>, Vec<ImageSpec>) = out
                .into_iter()
                .partition(|s| matches!(s.kind, ImageKind::Prefix | ImageKind::Final));
            for i in (1..rest.len()).rev() {
                rest.swap(i, rng.below(i + 1));
            }
            rest.truncate(cfg.max_images.saturating_sub(keep.len()));
            keep.extend(rest);
            keep.sort_by(|a, b| {
                (a.epoch, a.kind)
                    .cmp(&(b.epoch, b.kind))
                    .then_with(|| a.members.cmp(&b.members))
            });
            out = keep;
        }
        for (i, s) in out.iter_mut().enumerate() {
            s.id = i;
        }
        (out, distinct)
    }
}

/// Applies `pieces` to `image` (a copy of the initial image).
pub fn write_pieces(
    log: &BlockLog,
    image: &std::fs::File,
    pieces: &[Piece],
) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let zeros = vec![0u8; 1 << 16];
    for p in pieces {
        match *p {
            Piece::Log {
                offset,
                record,
                from,
                len,
            } => {
                image.write_all_at(
                    &log.data(record)[from as usize..(from + len) as usize],
                    offset,
                )?;
            }
            Piece::Zeros { offset, len } => {
                let mut done = 0;
                while done < len {
                    let n = (len - done).min(zeros.len() as u64);
                    image.write_all_at(&zeros[..n as usize], offset + done)?;
                    done += n;
                }
            }
        }
    }
    Ok(())
}
