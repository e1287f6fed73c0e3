//! Crash-image generation against a naive model, on random block logs.
//!
//! Each case writes a random log (sector-aligned writes of 1..16 sectors, flushes and
//! discards on a 64 KiB device) with [`LogWriter`], reads it back with [`BlockLog::open`]
//! and generates the images with a random small [`GenConfig`]. The model materialises an
//! image the obvious way — a byte vector holding the initial pattern, every record of the
//! earlier epochs applied in order, then the members, then the torn sectors — and that must
//! be exactly what the generator's pieces write onto a file holding the same pattern.
//!
//! Every sector a write carries is unique (it names its record and its index), and differs
//! from the initial pattern and from zeros, so two images have equal contents exactly when
//! their sector maps are equal: content dedup can be checked through contents.

use intact_blk::images::{write_pieces, GenConfig, Generator, ImageKind, ImageSpec};
use intact_blk::log::{BlockLog, LogWriter, SECTOR};
use proptest::prelude::*;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::FileExt;

const SECTORS: u64 = 128;
const DEV: u64 = SECTORS * SECTOR;
const S: usize = SECTOR as usize;

#[derive(Clone, Debug)]
enum Op {
    Write { at: u64, n: u64 },
    Flush,
    Discard { at: u64, n: u64 },
}

/// `n` sectors starting at sector `at`, inside the device.
fn range() -> impl Strategy<Value = (u64, u64)> {
    (1u64..=16).prop_flat_map(|n| (0..=SECTORS - n, Just(n)))
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => range().prop_map(|(at, n)| Op::Write { at, n }),
        2 => Just(Op::Flush),
        1 => range().prop_map(|(at, n)| Op::Discard { at, n }),
    ]
}

fn ops(max: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 0..max)
}

/// Up to four epochs of at most six writes and discards each, flushes between.
fn small_epochs() -> impl Strategy<Value = Vec<Op>> {
    let io = prop_oneof![
        4 => range().prop_map(|(at, n)| Op::Write { at, n }),
        1 => range().prop_map(|(at, n)| Op::Discard { at, n }),
    ];
    prop::collection::vec(prop::collection::vec(io, 0..=6), 1..=4).prop_map(|epochs| {
        let mut out = Vec::new();
        for (j, e) in epochs.into_iter().enumerate() {
            if j > 0 {
                out.push(Op::Flush);
            }
            out.extend(e);
        }
        out
    })
}

/// Small bounds; `max_images` either effectively unbounded or a real cap; tears of one
/// sector, two, or a 4 KiB page.
fn config() -> impl Strategy<Value = GenConfig> {
    (
        0usize..=6,
        0usize..=6,
        0usize..=4,
        any::<u64>(),
        prop_oneof![Just(1_000_000usize), 1usize..40],
        prop_oneof![Just(SECTOR), Just(2 * SECTOR), Just(4096)],
    )
        .prop_map(
            |(exhaustive, samples, torn, seed, max_images, tear)| GenConfig {
                exhaustive,
                samples,
                torn,
                seed,
                max_images,
                tear,
            },
        )
}

/// Sector `k` of write record `record`: tagged 0x22, names its record and index.
fn write_sector(record: usize, k: u64) -> [u8; S] {
    let mut b = [0u8; S];
    b[0] = 0x22;
    b[1..9].copy_from_slice(&(record as u64).to_le_bytes());
    b[9..17].copy_from_slice(&k.to_le_bytes());
    for (j, x) in b.iter_mut().enumerate().skip(17) {
        *x = (record as u64 * 7 + k * 13 + j as u64) as u8;
    }
    b
}

/// The device before the log: tagged 0x11, each sector names itself.
fn initial() -> Vec<u8> {
    let mut d = vec![0u8; DEV as usize];
    for (s, sec) in d.chunks_mut(S).enumerate() {
        sec[0] = 0x11;
        sec[1..9].copy_from_slice(&(s as u64).to_le_bytes());
        for (j, x) in sec.iter_mut().enumerate().skip(9) {
            *x = (s as u64 * 3 + j as u64) as u8 ^ 0x5a;
        }
    }
    d
}

struct Case {
    _dir: tempfile::TempDir,
    ops: Vec<Op>,
    log: BlockLog,
    /// Record indices of the writes and discards of each epoch, computed here (not by the log).
    epochs: Vec<Vec<usize>>,
    /// A file for `write_pieces`.
    file: File,
    /// The data of each write (empty for others) and the initial pattern, made once.
    data: Vec<Vec<u8>>,
    init: Vec<u8>,
}

impl Case {
    fn new(ops: Vec<Op>) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blocks.log");
        let mut w = LogWriter::create(&path, DEV).unwrap();
        let mut epochs = vec![Vec::new()];
        let data: Vec<Vec<u8>> = ops
            .iter()
            .enumerate()
            .map(|(i, op)| match *op {
                Op::Write { n, .. } => (0..n).flat_map(|k| write_sector(i, k)).collect(),
                _ => Vec::new(),
            })
            .collect();
        for (i, op) in ops.iter().enumerate() {
            match *op {
                Op::Write { at, .. } => {
                    w.write(at * SECTOR, &data[i], false).unwrap();
                    epochs.last_mut().unwrap().push(i);
                }
                Op::Flush => {
                    w.flush().unwrap();
                    epochs.push(Vec::new());
                }
                Op::Discard { at, n } => {
                    w.discard(at * SECTOR, n * SECTOR).unwrap();
                    epochs.last_mut().unwrap().push(i);
                }
            }
        }
        w.finish([0; 32]).unwrap();
        let log = BlockLog::open(&path).unwrap();
        assert_eq!(log.records.len(), ops.len());
        assert_eq!(log.epochs(), epochs);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.path().join("image"))
            .unwrap();
        Case {
            _dir: dir,
            ops,
            log,
            epochs,
            file,
            data,
            init: initial(),
        }
    }

    fn sectors(&self, record: usize) -> u64 {
        match self.ops[record] {
            Op::Write { n, .. } | Op::Discard { n, .. } => n,
            Op::Flush => panic!("record {record} is a flush"),
        }
    }

    /// Applies sectors `only` (all when None) of record `i` to `dev`.
    fn apply(&self, dev: &mut [u8], i: usize, only: Option<&[u32]>) {
        let (at, n, write) = match self.ops[i] {
            Op::Write { at, n } => (at, n, true),
            Op::Discard { at, n } => (at, n, false),
            Op::Flush => panic!("record {i} is a flush"),
        };
        let ks: Vec<u64> = match only {
            Some(ks) => ks.iter().map(|&k| u64::from(k)).collect(),
            None => (0..n).collect(),
        };
        for k in ks {
            let s = ((at + k) * SECTOR) as usize;
            if write {
                let k = k as usize * S;
                dev[s..s + S].copy_from_slice(&self.data[i][k..k + S]);
            } else {
                dev[s..s + S].fill(0);
            }
        }
    }

    /// Every write and discard in log order.
    fn everything(&self) -> Vec<u8> {
        let mut d = self.init.clone();
        for e in &self.epochs {
            for &i in e {
                self.apply(&mut d, i, None);
            }
        }
        d
    }

    /// The image as the model sees it.
    fn naive(&self, spec: &ImageSpec) -> Vec<u8> {
        let mut d = self.init.clone();
        for e in &self.epochs[..spec.epoch.min(self.epochs.len())] {
            for &i in e {
                self.apply(&mut d, i, None);
            }
        }
        for &i in &spec.members {
            self.apply(&mut d, i, None);
        }
        if let Some(t) = &spec.torn {
            self.apply(&mut d, t.record, Some(&t.sectors));
        }
        d
    }

    /// The image as `intact blk check` builds it: the generator's pieces over the initial image.
    fn built(&self, g: &Generator, spec: &ImageSpec) -> Vec<u8> {
        self.file.write_all_at(&self.init, 0).unwrap();
        write_pieces(&self.log, &self.file, &g.pieces(&g.sector_map(spec))).unwrap();
        let mut d = vec![0u8; DEV as usize];
        self.file.read_exact_at(&mut d, 0).unwrap();
        d
    }
}

/// Contents are compared through their blake3 (SipHash over 64 KiB is slow in debug builds).
fn digest(d: &[u8]) -> [u8; 32] {
    *blake3::hash(d).as_bytes()
}

/// What identifies an image apart from its id: kind, epoch, members, torn record and
/// sectors, hash.
type Key = (
    ImageKind,
    usize,
    Vec<usize>,
    Option<(usize, Vec<u32>)>,
    [u8; 32],
);

fn key(s: &ImageSpec) -> Key {
    (
        s.kind,
        s.epoch,
        s.members.clone(),
        s.torn.as_ref().map(|t| (t.record, t.sectors.clone())),
        s.hash,
    )
}

fn check_well_formed(c: &Case, specs: &[ImageSpec], tear: u64) -> Result<(), TestCaseError> {
    let unit = (tear / SECTOR).max(1) as u32;
    let n_epochs = c.epochs.len();
    let finals: Vec<_> = specs
        .iter()
        .filter(|s| s.kind == ImageKind::Final)
        .collect();
    prop_assert_eq!(finals.len(), 1, "exactly one final image");
    prop_assert_eq!(
        specs.last().map(|s| s.kind),
        Some(ImageKind::Final),
        "the final image comes last"
    );
    for (i, s) in specs.iter().enumerate() {
        prop_assert_eq!(s.id, i);
        if i > 0 {
            prop_assert!(specs[i - 1].epoch <= s.epoch, "images in epoch order");
        }
        if s.kind == ImageKind::Final {
            prop_assert_eq!(s.epoch, n_epochs);
            prop_assert!(s.members.is_empty() && s.torn.is_none());
            continue;
        }
        prop_assert!(
            s.epoch < n_epochs,
            "image {} of epoch {} (there are {})",
            i,
            s.epoch,
            n_epochs
        );
        let epoch = &c.epochs[s.epoch];
        prop_assert!(
            s.members.iter().all(|m| epoch.contains(m)),
            "image {}: members {:?} not all in epoch {:?}",
            i,
            s.members,
            epoch
        );
        prop_assert!(
            s.members.windows(2).all(|w| w[0] < w[1]),
            "image {}: members {:?} not in log order",
            i,
            s.members
        );
        match s.kind {
            ImageKind::Prefix => prop_assert!(
                s.members.is_empty() && s.torn.is_none(),
                "prefix {} has members",
                i
            ),
            ImageKind::Subset => {
                prop_assert!(s.torn.is_none());
                prop_assert!(
                    !s.members.is_empty() && s.members.len() < epoch.len(),
                    "subset {}: {:?} is not a proper non-empty subset of {:?}",
                    i,
                    s.members,
                    epoch
                );
            }
            ImageKind::Torn => {
                let t = s.torn.as_ref().expect("a torn image has a torn record");
                prop_assert!(
                    epoch.contains(&t.record),
                    "torn record {} not in epoch {:?}",
                    t.record,
                    epoch
                );
                prop_assert!(
                    !s.members.contains(&t.record),
                    "torn record {} is also a member",
                    t.record
                );
                // The writes before it in log order, and a proper non-empty subset of its sectors.
                let before: Vec<usize> = epoch.iter().copied().filter(|&r| r < t.record).collect();
                prop_assert_eq!(&s.members, &before);
                let n = c.sectors(t.record);
                prop_assert!(
                    n > u64::from(unit),
                    "torn record {} has {} sectors, not more than one {}-sector unit",
                    t.record,
                    n,
                    unit
                );
                prop_assert!(
                    !t.sectors.is_empty() && (t.sectors.len() as u64) < n,
                    "torn sectors {:?} of {}",
                    t.sectors,
                    n
                );
                prop_assert!(
                    t.sectors.windows(2).all(|w| w[0] < w[1])
                        && t.sectors.iter().all(|&k| u64::from(k) < n)
                );
                // Whole units of `tear` bytes (the last may be short) are kept or lost.
                for &k in &t.sectors {
                    let first = k / unit * unit;
                    let last = (first + unit).min(n as u32);
                    prop_assert!(
                        (first..last).all(|x| t.sectors.contains(&x)),
                        "torn sectors {:?} split a {}-sector unit",
                        t.sectors,
                        unit
                    );
                }
            }
            ImageKind::Final => unreachable!(),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// (a) members and torn records belong to their epoch; (b) the pieces build exactly the
    /// model's image; (c) distinct images have distinct contents; the final image is every
    /// record applied in order.
    #[test]
    fn images_are_well_formed_and_build_like_the_model(ops in ops(28), cfg in config()) {
        let c = Case::new(ops);
        let g = Generator::new(&c.log).unwrap();
        prop_assert_eq!(g.epochs(), &c.epochs[..]);
        let (specs, distinct) = g.generate(&cfg);
        prop_assert!(specs.len() <= distinct);
        check_well_formed(&c, &specs, cfg.tear)?;
        let mut seen: HashMap<[u8; 32], usize> = HashMap::new();
        for s in &specs {
            let naive = c.naive(s);
            let built = c.built(&g, s);
            prop_assert!(naive == built, "image {} ({:?}, epoch {}, members {:?}, torn {:?}): pieces differ from the model", s.id, s.kind, s.epoch, s.members, s.torn);
            if s.kind == ImageKind::Final {
                prop_assert!(naive == c.everything(), "the final image is not every record applied");
            }
            if let Some(other) = seen.insert(digest(&naive), s.id) {
                prop_assert!(false, "images {} and {} have the same content", other, s.id);
            }
        }
        let hashes: HashSet<[u8; 32]> = specs.iter().map(|s| s.hash).collect();
        prop_assert_eq!(hashes.len(), specs.len());
    }

    /// (d) With every epoch within the exhaustive bound and no cap, every subset of every
    /// epoch (over all earlier epochs) is an image, and every image without a tear is one.
    #[test]
    fn every_subset_appears_when_exhaustive(ops in small_epochs(), extra in 0usize..3, samples in 0usize..4, torn in 0usize..3, seed in any::<u64>(), page in any::<bool>()) {
        let c = Case::new(ops);
        let largest = c.epochs.iter().map(Vec::len).max().unwrap_or(0);
        let g = Generator::new(&c.log).unwrap();
        let tear = if page { 4096 } else { SECTOR };
        let cfg = GenConfig { exhaustive: largest + extra, samples, torn, seed, max_images: 1_000_000, tear };
        let (specs, distinct) = g.generate(&cfg);
        prop_assert_eq!(specs.len(), distinct);
        check_well_formed(&c, &specs, tear)?;
        let images: HashSet<[u8; 32]> = specs.iter().map(|s| digest(&c.naive(s))).collect();
        let mut possible: HashSet<[u8; 32]> = HashSet::new();
        let mut base = c.init.clone();
        for e in &c.epochs {
            for mask in 0u32..(1 << e.len()) {
                let mut d = base.clone();
                for (k, &i) in e.iter().enumerate() {
                    if mask >> k & 1 == 1 {
                        c.apply(&mut d, i, None);
                    }
                }
                prop_assert!(images.contains(&digest(&d)), "epoch {:?}, subset mask {:b}: no image has this content", e, mask);
                possible.insert(digest(&d));
            }
            for &i in e {
                c.apply(&mut base, i, None);
            }
        }
        for s in specs.iter().filter(|s| s.kind != ImageKind::Torn) {
            prop_assert!(possible.contains(&digest(&c.naive(s))), "image {} ({:?}) is no subset of an epoch", s.id, s.kind);
        }
        let finals: Vec<_> = specs.iter().filter(|s| s.kind == ImageKind::Final).collect();
        prop_assert!(c.naive(finals[0]) == base);
    }

    /// (e) Same log, same configuration (seed included): the same images, also from a new generator.
    #[test]
    fn same_seed_same_images(ops in ops(28), cfg in config()) {
        let c = Case::new(ops);
        let g = Generator::new(&c.log).unwrap();
        let (a, da) = g.generate(&cfg);
        let (b, db) = Generator::new(&c.log).unwrap().generate(&cfg);
        prop_assert_eq!(da, db);
        prop_assert_eq!(a.iter().map(key).collect::<Vec<_>>(), b.iter().map(key).collect::<Vec<_>>());
    }

    /// (f) A cap keeps every prefix and the final image, samples the rest from the
    /// uncapped images, and reports how many distinct images there were.
    #[test]
    fn a_cap_keeps_prefixes_and_final(ops in ops(28), cfg in config(), cap in 1usize..30) {
        let c = Case::new(ops);
        let g = Generator::new(&c.log).unwrap();
        let all = GenConfig { max_images: 1_000_000, ..cfg.clone() };
        let (full, distinct) = g.generate(&all);
        prop_assert_eq!(full.len(), distinct);
        let capped_cfg = GenConfig { max_images: cap, ..cfg };
        let (capped, d2) = g.generate(&capped_cfg);
        prop_assert_eq!(d2, distinct);
        check_well_formed(&c, &capped, capped_cfg.tear)?;
        let kept = |s: &&ImageSpec| matches!(s.kind, ImageKind::Prefix | ImageKind::Final);
        let must: HashSet<_> = full.iter().filter(kept).map(|s| s.hash).collect();
        let have: HashSet<_> = capped.iter().map(|s| s.hash).collect();
        prop_assert!(must.is_subset(&have), "a prefix or the final image was dropped by the cap");
        let full_keys: BTreeSet<_> = full.iter().map(key).collect();
        prop_assert!(capped.iter().all(|s| full_keys.contains(&key(s))), "the cap made up an image");
        if distinct <= cap {
            prop_assert_eq!(capped.iter().map(key).collect::<Vec<_>>(), full.iter().map(key).collect::<Vec<_>>());
        } else {
            prop_assert_eq!(capped.len(), cap.max(must.len()));
        }
        for s in &capped {
            prop_assert!(c.naive(s) == c.built(&g, s));
        }
    }
}

/// A small log whose images can be counted by hand.
#[test]
fn a_known_log() {
    // Epoch 0: two one-sector writes; epoch 1: three one-sector writes and a four-sector one.
    let c = Case::new(vec![
        Op::Write { at: 0, n: 1 },
        Op::Write { at: 1, n: 1 },
        Op::Flush,
        Op::Write { at: 2, n: 1 },
        Op::Write { at: 3, n: 1 },
        Op::Write { at: 4, n: 1 },
        Op::Write { at: 8, n: 4 },
    ]);
    let g = Generator::new(&c.log).unwrap();
    let cfg = GenConfig {
        exhaustive: 8,
        samples: 0,
        torn: 1,
        seed: 1,
        max_images: 1000,
        tear: SECTOR,
    };
    let (specs, distinct) = g.generate(&cfg);
    let count = |k| specs.iter().filter(|s| s.kind == k).count();
    // Prefixes 0 and 1; {w0}, {w1}; the 14 proper non-empty subsets of four writes; one
    // tear of the four-sector write (after the three before it); the final image.
    assert_eq!(
        (
            count(ImageKind::Prefix),
            count(ImageKind::Subset),
            count(ImageKind::Torn),
            count(ImageKind::Final)
        ),
        (2, 2 + 14, 1, 1)
    );
    assert_eq!(distinct, specs.len());
    let torn = specs.iter().find(|s| s.kind == ImageKind::Torn).unwrap();
    assert_eq!(
        (
            torn.epoch,
            torn.members.clone(),
            torn.torn.as_ref().unwrap().record
        ),
        (1, vec![3, 4, 5], 6)
    );
    for s in &specs {
        assert!(c.naive(s) == c.built(&g, s), "image {}", s.id);
    }
    // An empty log: one image, the final one (equal to the initial image).
    let empty = Case::new(Vec::new());
    let g = Generator::new(&empty.log).unwrap();
    let (specs, _) = g.generate(&GenConfig::default());
    assert_eq!(specs.len(), 1);
    assert_eq!(specs[0].kind, ImageKind::Final);
    assert!(empty.built(&g, &specs[0]) == initial());
    // 4 KiB tears: the four-sector write is one unit and cannot tear.
    let (specs, _) = Generator::new(&c.log)
        .unwrap()
        .generate(&GenConfig { tear: 4096, ..cfg });
    assert_eq!(
        specs.iter().filter(|s| s.kind == ImageKind::Torn).count(),
        0
    );
}
