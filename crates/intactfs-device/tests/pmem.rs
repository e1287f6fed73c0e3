//! The persistent-memory semantics, checked: persisted ranges survive every crash image, an
//! unfenced clwb guarantees nothing, atomic stores never tear, images are reproducible and
//! the random draws stay within (and cover) the exhaustive set; a log-append protocol with
//! its valid flag written last survives every image, and the twin catches it written early.
//! PmemFile round-trips, reports bad input, and agrees with the twin; Latency charges time.

use intactfs_device::{
    Latency, LatencyModel, PmemCounters, PmemDevice, PmemError, PmemFile, PmemSim, CACHELINE, WORD,
};
use proptest::prelude::*;
use std::collections::BTreeSet;

const LEN: u64 = 4 * CACHELINE as u64;

fn word(img: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(img[off..off + WORD].try_into().unwrap())
}

#[derive(Clone, Debug)]
enum Op {
    /// Bytes at an arbitrary (possibly misaligned) offset.
    Write(u64, Vec<u8>),
    Store(u64, u64),
    Clwb(u64, u64),
    Fence,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..LEN - 24, proptest::collection::vec(any::<u8>(), 1..24)).prop_map(|(o, d)| Op::Write(o, d)),
        3 => (0..LEN / WORD as u64, any::<u64>()).prop_map(|(w, v)| Op::Store(w * WORD as u64, v)),
        2 => (0..LEN - 1, 1..100u64).prop_map(|(o, l)| Op::Clwb(o, l.min(LEN - o))),
        1 => Just(Op::Fence),
    ]
}

fn apply<D: PmemDevice + ?Sized>(d: &mut D, ops: &[Op]) {
    for o in ops {
        match o {
            Op::Write(off, data) => d.write(*off, data).unwrap(),
            Op::Store(off, v) => d.store_u64(*off, *v).unwrap(),
            Op::Clwb(off, len) => d.clwb(*off, *len).unwrap(),
            Op::Fence => d.fence().unwrap(),
        }
    }
}

fn sim(ops: &[Op]) -> PmemSim {
    let mut d = PmemSim::new(LEN).unwrap();
    apply(&mut d, ops);
    d
}

proptest! {
    #[test]
    fn a_persisted_range_survives_every_crash(before in proptest::collection::vec(op(), 0..16), off in 0..LEN - 40, data in proptest::collection::vec(any::<u8>(), 1..40), after in proptest::collection::vec(op(), 0..16), seed in any::<u64>()) {
        let mut d = sim(&before);
        d.write(off, &data).unwrap();
        d.persist(off, data.len() as u64).unwrap();
        let r = off as usize..off as usize + data.len();
        // Later operations that store no byte of the range (a clwb or fence there is fine; a
        // store to the rest of a word the range shares keeps the range's bytes in every
        // value the word takes).
        let outside = |o: u64, len: usize| o as usize + len <= r.start || o as usize >= r.end;
        let after: Vec<Op> = after.into_iter().filter(|o| match o {
            Op::Write(o, d) => outside(*o, d.len()),
            Op::Store(o, _) => outside(*o, WORD),
            _ => true,
        }).collect();
        apply(&mut d, &after);
        prop_assert_eq!(&d.persistent()[r.clone()], &data[..]);
        for img in d.crash_images(seed, 16).iter().chain(d.extreme_images().iter()) {
            prop_assert_eq!(&img.bytes[r.clone()], &data[..], "{}", img.description);
            prop_assert!(d.allows(&img.bytes), "{}", img.description);
        }
    }

    #[test]
    fn atomic_stores_never_tear(stores in proptest::collection::vec((0..LEN / WORD as u64, any::<u64>(), any::<bool>()), 1..24), seed in any::<u64>()) {
        let mut d = PmemSim::new(LEN).unwrap();
        let mut seen: Vec<BTreeSet<u64>> = vec![BTreeSet::from([0]); LEN as usize / WORD];
        for &(w, v, persist) in &stores {
            d.store_u64(w * WORD as u64, v).unwrap();
            seen[w as usize].insert(v);
            if persist {
                d.persist(w * WORD as u64, WORD as u64).unwrap();
            }
        }
        for img in d.crash_images(seed, 32) {
            for (w, vals) in seen.iter().enumerate() {
                let got = word(&img.bytes, w * WORD);
                prop_assert!(vals.contains(&got), "word {w} holds {got:#x}, never stored: {}", img.description);
            }
        }
    }

    #[test]
    fn crashes_are_reproducible_and_allowed(ops in proptest::collection::vec(op(), 0..24), seed in any::<u64>()) {
        let d = sim(&ops);
        let a = d.crash(seed);
        prop_assert_eq!(&a, &d.crash(seed));
        prop_assert!(d.allows(&a.bytes), "{}", a.description);
        prop_assert!(a.description.starts_with(&format!("seed {seed}:")), "{}", a.description);
        let many = d.crash_images(seed, 4);
        for (k, img) in many.iter().enumerate() {
            prop_assert_eq!(img, &d.crash(seed.wrapping_add(k as u64)));
        }
        let [old, new] = d.extreme_images();
        prop_assert_eq!(&old.bytes[..], d.persistent());
        prop_assert_eq!(&new.bytes[..], d.contents());
        prop_assert!(d.allows(&old.bytes) && d.allows(&new.bytes));
        if d.dirty_words() == 0 {
            prop_assert_eq!(&a.bytes[..], d.contents());
        }
    }

    #[test]
    fn enumeration_is_the_allowed_set(ops in proptest::collection::vec(op(), 0..10)) {
        let d = sim(&ops);
        if let Some(all) = d.all_images(4096) {
            prop_assert_eq!(all.len() as u128, d.image_count());
            let uniq: BTreeSet<&Vec<u8>> = all.iter().collect();
            prop_assert_eq!(uniq.len(), all.len());
            for img in &all {
                prop_assert!(d.allows(img));
            }
            for seed in 0..32 {
                let c = d.crash(seed);
                prop_assert!(uniq.contains(&c.bytes), "{}", c.description);
            }
        }
    }

    #[test]
    fn reads_see_every_store(ops in proptest::collection::vec(op(), 0..24)) {
        let d = sim(&ops);
        let mut model = vec![0u8; LEN as usize];
        for o in &ops {
            match o {
                Op::Write(off, data) => model[*off as usize..*off as usize + data.len()].copy_from_slice(data),
                Op::Store(off, v) => model[*off as usize..*off as usize + WORD].copy_from_slice(&v.to_le_bytes()),
                _ => {}
            }
        }
        let mut buf = vec![0u8; LEN as usize];
        d.read(0, &mut buf).unwrap();
        prop_assert_eq!(&buf, &model);
        prop_assert_eq!(d.contents(), &model[..]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// The file device and the twin are the same memory to a reader.
    #[test]
    fn file_and_sim_agree(ops in proptest::collection::vec(op(), 0..24)) {
        let dir = tempfile::tempdir().unwrap();
        let mut f: Box<dyn PmemDevice> = Box::new(PmemFile::create(&dir.path().join("pm"), LEN).unwrap());
        let mut s: Box<dyn PmemDevice> = Box::new(sim(&[]));
        apply(&mut f, &ops);
        apply(&mut s, &ops);
        let (mut a, mut b) = (vec![0u8; LEN as usize], vec![0u8; LEN as usize]);
        f.read(0, &mut a).unwrap();
        s.read(0, &mut b).unwrap();
        prop_assert_eq!(a, b);
        prop_assert_eq!(f.counters(), s.counters());
        for w in 0..LEN / WORD as u64 {
            prop_assert_eq!(f.load_u64(w * WORD as u64).unwrap(), s.load_u64(w * WORD as u64).unwrap());
        }
    }
}

#[test]
fn an_unfenced_clwb_guarantees_nothing() {
    let mut d = PmemSim::new(LEN).unwrap();
    d.write(0, &[7; 16]).unwrap();
    d.clwb(0, 16).unwrap();
    assert_eq!(
        (d.dirty_words(), d.dirty_lines(), d.unfenced_lines()),
        (2, 1, 1)
    );
    assert!(d.persistent().iter().all(|&b| b == 0));
    let all = d.all_images(100).unwrap();
    assert_eq!(all.len(), 4, "two words, each old or new");
    assert!(all.iter().any(|i| i[..16] == [0; 16]));
    d.fence().unwrap();
    assert_eq!(&d.persistent()[..16], &[7; 16]);
    assert_eq!(d.all_images(100).unwrap(), vec![d.contents().to_vec()]);
    assert_eq!((d.dirty_words(), d.unfenced_lines()), (0, 0));
}

#[test]
fn a_store_after_the_clwb_stays_volatile_but_may_land() {
    let mut d = PmemSim::new(LEN).unwrap();
    d.store_u64(8, 1).unwrap();
    d.clwb(0, 64).unwrap();
    d.store_u64(8, 2).unwrap(); // after the clwb, before the fence
    d.store_u64(16, 3).unwrap(); // a word clean at the clwb
    d.fence().unwrap();
    let all = d.all_images(100).unwrap();
    let w8: BTreeSet<u64> = all.iter().map(|i| word(i, 8)).collect();
    let w16: BTreeSet<u64> = all.iter().map(|i| word(i, 16)).collect();
    assert_eq!(
        w8,
        BTreeSet::from([1, 2]),
        "at least the clwb-time value, maybe the later one"
    );
    assert_eq!(
        w16,
        BTreeSet::from([0, 3]),
        "a word stored after the clwb is not guaranteed"
    );
    // A store after the fence is not guaranteed by it either.
    d.store_u64(24, 4).unwrap();
    assert!(d.all_images(100).unwrap().iter().any(|i| word(i, 24) == 0));
    // A second clwb + fence makes the later values persistent.
    d.persist(0, 64).unwrap();
    assert_eq!(d.all_images(100).unwrap(), vec![d.contents().to_vec()]);
}

#[test]
fn a_word_stored_many_times_may_show_any_value() {
    let mut d = PmemSim::new(LEN).unwrap();
    d.store_u64(64, 0xa).unwrap();
    d.persist(64, 8).unwrap();
    for v in [0xb, 0xc, 0xd, 0xc] {
        d.store_u64(64, v).unwrap();
    }
    let all: BTreeSet<u64> = d
        .all_images(100)
        .unwrap()
        .iter()
        .map(|i| word(i, 64))
        .collect();
    assert_eq!(all, BTreeSet::from([0xa, 0xb, 0xc, 0xd]));
    let drawn: BTreeSet<u64> = d
        .crash_images(0, 200)
        .iter()
        .map(|i| word(&i.bytes, 64))
        .collect();
    assert_eq!(drawn, all, "the random draws reach every value");
    let mut stray = d.contents().to_vec();
    stray[64..72].copy_from_slice(&0xeu64.to_le_bytes());
    assert!(!d.allows(&stray), "a value never stored");
}

#[test]
fn the_random_draws_cover_the_exhaustive_set() {
    // Three words in two lines, one with two stored values: 2 * 2 * 3 = 12 images.
    let mut d = PmemSim::new(LEN).unwrap();
    d.store_u64(0, 1).unwrap();
    d.store_u64(8, 2).unwrap();
    d.store_u64(64, 3).unwrap();
    d.store_u64(64, 4).unwrap();
    let all: BTreeSet<Vec<u8>> = d.all_images(12).unwrap().into_iter().collect();
    assert_eq!(all.len(), 12);
    assert_eq!(d.image_count(), 12);
    assert!(d.all_images(11).is_none());
    let drawn: BTreeSet<Vec<u8>> = d
        .crash_images(1000, 2000)
        .into_iter()
        .map(|i| i.bytes)
        .collect();
    assert_eq!(drawn, all);
}

#[test]
fn counters_count_persistence_points() {
    let mut d = PmemSim::new(LEN).unwrap();
    d.write(3, &[1; 70]).unwrap(); // lines 0 and 1
    d.store_u64(128, 9).unwrap();
    d.clwb(3, 70).unwrap();
    d.persist(128, 8).unwrap();
    d.clwb(0, 0).unwrap(); // an empty range flushes nothing
    assert_eq!(
        d.counters(),
        PmemCounters {
            stores: 2,
            bytes_stored: 78,
            lines_flushed: 3,
            fences: 1,
            latency_ns: 0
        }
    );
}

#[test]
fn a_crash_image_starts_a_device_that_can_crash_again() {
    let mut d = PmemSim::new(LEN).unwrap();
    d.write(0, &[5; 64]).unwrap();
    d.persist(0, 64).unwrap();
    d.write(64, &[6; 64]).unwrap();
    let img = d.crash(3);
    let mut r = PmemSim::from_image(img.bytes.clone()).unwrap();
    assert_eq!(r.persistent(), &img.bytes[..]);
    assert_eq!(r.contents(), &img.bytes[..]);
    assert_eq!(
        (r.dirty_words(), r.counters()),
        (0, PmemCounters::default())
    );
    // "Recovery" rewrites line 1 and crashes before persisting it.
    r.write(64, &[8; 64]).unwrap();
    for again in r.crash_images(0, 16) {
        assert_eq!(&again.bytes[..64], &[5; 64]);
        for w in (64..128).step_by(WORD) {
            let got = &again.bytes[w..w + WORD];
            assert!(
                got == [8; 8] || got == &img.bytes[w..w + WORD],
                "{}",
                again.description
            );
        }
    }
}

#[test]
fn bad_arguments_are_errors() {
    let mut d = PmemSim::new(LEN).unwrap();
    let e = d.write(LEN - 4, &[0; 8]).unwrap_err();
    assert!(
        matches!(
            e,
            PmemError::OutOfRange {
                off: 252,
                len: 8,
                size: 256
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "8 bytes at offset 252 reach outside the persistent memory (256 bytes)"
    );
    assert!(
        matches!(d.clwb(u64::MAX, 2), Err(PmemError::OutOfRange { .. })),
        "no overflow"
    );
    assert!(matches!(
        d.read(LEN, &mut [0; 1]),
        Err(PmemError::OutOfRange { .. })
    ));
    d.read(LEN, &mut []).unwrap(); // empty at the end is fine
    let e = d.store_u64(12, 1).unwrap_err();
    assert!(matches!(e, PmemError::Misaligned { off: 12 }));
    assert!(
        e.to_string().contains("offset 12 is not 8-byte aligned"),
        "{e}"
    );
    assert!(matches!(
        d.load_u64(4),
        Err(PmemError::Misaligned { off: 4 })
    ));
    assert!(matches!(
        d.store_u64(LEN, 1),
        Err(PmemError::OutOfRange { .. })
    ));
    for bad in [0, 100] {
        let e = PmemSim::new(bad).unwrap_err();
        assert!(
            matches!(e, PmemError::BadSize { len, .. } if len == bad),
            "{e:?}"
        );
    }
    let e = PmemSim::new(u64::MAX / 64 * 64).unwrap_err().to_string();
    assert!(e.starts_with("allocating a simulated device of"), "{e}");
    let e = PmemSim::from_image(vec![0; 65]).unwrap_err().to_string();
    assert!(
        e.contains("65 bytes") && e.contains("multiple of 64"),
        "{e}"
    );
    assert_eq!(
        d.counters(),
        PmemCounters::default(),
        "failed calls count nothing"
    );
}

// The log-append protocol an FCFS-style engine uses: an entry, then its valid flag (an
// atomic word) written last, each persisted. Every step is a crash point.

const ENTRY: u64 = 8; // entry at 8..40: spans words of line 0
const ENTRY_LEN: usize = 32;
const FLAG: u64 = 64; // the flag in another line

fn entry() -> Vec<u8> {
    (1..=ENTRY_LEN as u8).collect()
}

/// Flag set and the entry not whole: the state recovery must never see.
fn torn(img: &[u8]) -> bool {
    word(img, FLAG as usize) == 1 && img[ENTRY as usize..ENTRY as usize + ENTRY_LEN] != entry()[..]
}

/// Runs `steps` on a fresh twin and returns, over every crash point (before each step and
/// at the end), whether some exhaustively enumerated image is torn and whether some drawn
/// one is.
fn crash_everywhere(steps: &[&dyn Fn(&mut PmemSim)]) -> (bool, bool) {
    let mut d = PmemSim::new(LEN).unwrap();
    let (mut exhaustive, mut drawn) = (false, false);
    for k in 0..=steps.len() {
        let all = d.all_images(1 << 12).expect("few dirty words");
        exhaustive |= all.iter().any(|i| torn(i));
        drawn |= d.crash_images(0, 64).iter().any(|i| torn(&i.bytes));
        if let Some(step) = steps.get(k) {
            step(&mut d);
        }
    }
    (exhaustive, drawn)
}

#[test]
fn a_valid_flag_written_last_never_shows_a_torn_entry() {
    let (exhaustive, drawn) = crash_everywhere(&[
        &|d| d.write(ENTRY, &entry()).unwrap(),
        &|d| d.clwb(ENTRY, ENTRY_LEN as u64).unwrap(),
        &|d| d.fence().unwrap(),
        &|d| d.store_u64(FLAG, 1).unwrap(),
        &|d| d.persist(FLAG, 8).unwrap(),
    ]);
    assert!(!exhaustive && !drawn);
}

#[test]
fn a_valid_flag_stored_before_the_entry_persists_is_caught() {
    // One persist for both: the cache may write the flag's line back first.
    let (exhaustive, drawn) = crash_everywhere(&[
        &|d| d.write(ENTRY, &entry()).unwrap(),
        &|d| d.store_u64(FLAG, 1).unwrap(),
        &|d| d.clwb(ENTRY, ENTRY_LEN as u64).unwrap(),
        &|d| d.persist(FLAG, 8).unwrap(),
    ]);
    assert!(
        exhaustive && drawn,
        "exhaustive {exhaustive}, drawn {drawn}"
    );
    // The flag persisted first.
    let (exhaustive, drawn) = crash_everywhere(&[
        &|d| d.store_u64(FLAG, 1).unwrap(),
        &|d| d.persist(FLAG, 8).unwrap(),
        &|d| d.write(ENTRY, &entry()).unwrap(),
        &|d| d.persist(ENTRY, ENTRY_LEN as u64).unwrap(),
    ]);
    assert!(
        exhaustive && drawn,
        "exhaustive {exhaustive}, drawn {drawn}"
    );
    // clwb without the fence before the flag: the entry's write-back may not have happened.
    let (exhaustive, drawn) = crash_everywhere(&[
        &|d| d.write(ENTRY, &entry()).unwrap(),
        &|d| d.clwb(ENTRY, ENTRY_LEN as u64).unwrap(),
        &|d| d.store_u64(FLAG, 1).unwrap(),
        &|d| d.persist(FLAG, 8).unwrap(),
    ]);
    assert!(
        exhaustive && drawn,
        "exhaustive {exhaustive}, drawn {drawn}"
    );
}

#[test]
fn file_round_trip_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pm");
    let mut f = PmemFile::create(&p, 8192).unwrap();
    assert_eq!(f.len(), 8192);
    assert!(!f.syncs_on_fence());
    f.write(100, b"hello").unwrap();
    f.store_u64(4096, 0x0102_0304_0506_0708).unwrap();
    f.persist(100, 5).unwrap();
    f.set_sync_on_fence(true);
    f.persist(4096, 8).unwrap();
    f.clwb(0, 8192).unwrap();
    f.fence().unwrap();
    f.sync_all().unwrap();
    assert_eq!(
        f.counters(),
        PmemCounters {
            stores: 2,
            bytes_stored: 13,
            lines_flushed: 130,
            fences: 3,
            latency_ns: 0
        }
    );
    drop(f);
    let raw = std::fs::read(&p).unwrap();
    assert_eq!(&raw[100..105], b"hello");
    assert_eq!(&raw[4096..4104], &0x0102_0304_0506_0708u64.to_le_bytes());
    let f = PmemFile::open(&p).unwrap();
    let mut buf = [0u8; 5];
    f.read(100, &mut buf).unwrap();
    assert_eq!(&buf, b"hello");
    assert_eq!(f.load_u64(4096).unwrap(), 0x0102_0304_0506_0708);
    assert_eq!(f.load_u64(0).unwrap(), 0);
    assert_eq!(f.path(), p);
    // A twin's crash image opens as a file.
    let mut s = PmemSim::new(128).unwrap();
    s.store_u64(8, 42).unwrap();
    s.persist(8, 8).unwrap();
    let q = dir.path().join("crashed");
    std::fs::write(&q, &s.crash(0).bytes).unwrap();
    assert_eq!(PmemFile::open(&q).unwrap().load_u64(8).unwrap(), 42);
}

#[test]
fn file_bad_input_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let e = PmemFile::open(&missing).unwrap_err().to_string();
    assert!(e.starts_with("opening ") && e.contains("missing"), "{e}");
    let odd = dir.path().join("odd");
    std::fs::write(&odd, [0u8; 100]).unwrap();
    let e = PmemFile::open(&odd).unwrap_err();
    assert!(matches!(e, PmemError::BadSize { len: 100, .. }), "{e:?}");
    assert!(
        e.to_string().contains("odd") && e.to_string().contains("100 bytes"),
        "{e}"
    );
    std::fs::write(&odd, []).unwrap();
    assert!(matches!(
        PmemFile::open(&odd),
        Err(PmemError::BadSize { len: 0, .. })
    ));
    let e = PmemFile::create(&dir.path().join("new"), 63).unwrap_err();
    assert!(matches!(e, PmemError::BadSize { len: 63, .. }));
    assert!(
        !dir.path().join("new").exists(),
        "a bad size creates nothing"
    );
    let e = PmemFile::create(&dir.path().join("no/such/dir/pm"), 64)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("creating ") && e.contains("no/such/dir"),
        "{e}"
    );
    let e = PmemFile::open(dir.path()).unwrap_err().to_string();
    assert!(e.contains(&dir.path().display().to_string()), "{e}");

    let mut f = PmemFile::create(&dir.path().join("pm"), 128).unwrap();
    assert!(matches!(
        f.store_u64(4, 1),
        Err(PmemError::Misaligned { off: 4 })
    ));
    assert!(matches!(f.load_u64(130), Err(PmemError::Misaligned { .. })));
    assert!(matches!(
        f.store_u64(128, 1),
        Err(PmemError::OutOfRange { .. })
    ));
    assert!(matches!(
        f.write(120, &[0; 9]),
        Err(PmemError::OutOfRange {
            off: 120,
            len: 9,
            size: 128
        })
    ));
    assert!(matches!(
        f.read(u64::MAX, &mut [0; 2]),
        Err(PmemError::OutOfRange { .. })
    ));
    assert!(matches!(f.clwb(64, 65), Err(PmemError::OutOfRange { .. })));
    assert_eq!(f.counters(), PmemCounters::default());
}

#[test]
fn a_file_that_shrinks_under_its_mapping_is_reported_at_a_syncing_fence() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pm");
    let mut f = PmemFile::create(&p, 16384).unwrap();
    f.set_sync_on_fence(true);
    f.store_u64(0, 1).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(4096)
        .unwrap();
    // Only the first page is touched: it is still backed.
    f.clwb(0, 8).unwrap();
    let e = f.fence().unwrap_err();
    assert!(matches!(e, PmemError::Damaged { .. }), "{e:?}");
    assert!(e.to_string().contains("shrank from 16384 to 4096"), "{e}");
}

#[test]
fn latency_is_charged_per_flushed_line() {
    assert_eq!(
        LatencyModel::FCFS.per_line_ns(),
        150,
        "max(150 ns, 64 B / 4 GB/s = 16 ns)"
    );
    assert_eq!(
        LatencyModel {
            write_ns: 10,
            bytes_per_sec: 1_000_000_000
        }
        .per_line_ns(),
        64
    );
    assert_eq!(LatencyModel::default().per_line_ns(), 0);

    let mut d = Latency::new(PmemSim::new(LEN).unwrap(), LatencyModel::FCFS);
    d.write(0, &[1; 200]).unwrap();
    let t = std::time::Instant::now();
    d.persist(0, 200).unwrap(); // 4 lines
    assert!(t.elapsed() >= std::time::Duration::from_nanos(600));
    let c = d.counters();
    assert_eq!((c.lines_flushed, c.fences, c.latency_ns), (4, 1, 600));
    assert!(matches!(d.clwb(LEN, 1), Err(PmemError::OutOfRange { .. })));
    assert_eq!(d.counters().latency_ns, 600, "a failed clwb costs nothing");
    d.set_model(LatencyModel::default());
    d.persist(0, 64).unwrap();
    assert_eq!(d.counters().latency_ns, 600);
    // The wrapper keeps the crash semantics of what it wraps.
    assert_eq!(d.inner().persistent()[..200], [1; 200]);
    let d = Latency::new(d.into_inner(), LatencyModel::FCFS);
    assert_eq!(d.model(), LatencyModel::FCFS);
    assert_eq!(d.counters().latency_ns, 0);
}
