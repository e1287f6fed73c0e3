//! The device semantics, checked: reads see writes, flushes make them durable, every crash
//! image is allowed (and the allowed set is exactly what the enumeration gives), images are
//! reproducible from their seed, FileDevice round-trips and reports bad input.

use intactfs_device::{BlockDevice, DeviceError, FileDevice, SimDevice, SECTOR};
use proptest::prelude::*;

const BS: usize = 1024; // two sectors per block: tearing is visible

#[derive(Clone, Debug)]
enum Step {
    Write(u64, u8),
    Flush,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(
        prop_oneof![4 => (0u64..4, any::<u8>()).prop_map(|(b, v)| Step::Write(b, v)), 1 => Just(Step::Flush)],
        0..12,
    )
}

fn block(v: u8) -> Vec<u8> {
    // The two sectors differ so a torn write is recognisable.
    let mut d = vec![v; BS];
    d[SECTOR..].fill(v.wrapping_add(1));
    d
}

fn run(steps: &[Step]) -> SimDevice {
    let mut d = SimDevice::new(BS, 4).unwrap();
    for s in steps {
        match s {
            Step::Write(b, v) => d.write(*b, &block(*v)).unwrap(),
            Step::Flush => d.flush().unwrap(),
        }
    }
    d
}

proptest! {
    #[test]
    fn reads_see_the_latest_write(steps in steps()) {
        let mut d = run(&steps);
        let mut expect = vec![vec![0u8; BS]; 4];
        for s in &steps {
            if let Step::Write(b, v) = s {
                expect[*b as usize] = block(*v);
            }
        }
        for b in 0..4u64 {
            let mut buf = vec![0; BS];
            d.read(b, &mut buf).unwrap();
            prop_assert_eq!(&buf, &expect[b as usize]);
        }
    }

    #[test]
    fn crash_images_are_allowed_and_reproducible(steps in steps(), seed in any::<u64>()) {
        let d = run(&steps);
        let a = d.crash(seed);
        prop_assert!(d.allows(&a.bytes), "{}", a.description);
        prop_assert_eq!(&a, &d.crash(seed));
        // Everything flushed survives: with nothing volatile the image is the contents.
        if d.volatile_writes() == 0 {
            prop_assert_eq!(&a.bytes[..], d.contents());
        }
        // The durable content and the crash-free content are both allowed.
        prop_assert!(d.allows(d.durable()));
        prop_assert!(d.allows(d.contents()));
    }

    #[test]
    fn enumeration_is_the_allowed_set(steps in steps()) {
        let d = run(&steps);
        if let Some(all) = d.all_images(4096) {
            for img in &all {
                prop_assert!(d.allows(img));
            }
            // Every sampled image is among them.
            for seed in 0..20 {
                let c = d.crash(seed);
                prop_assert!(all.contains(&c.bytes), "{}", c.description);
            }
            let mut uniq = all.clone();
            uniq.sort();
            uniq.dedup();
            prop_assert_eq!(uniq.len(), all.len());
        }
    }
}

#[test]
fn a_torn_write_and_a_reordering_are_both_possible() {
    let mut d = SimDevice::new(BS, 2).unwrap();
    d.write(0, &block(1)).unwrap();
    d.write(1, &block(2)).unwrap();
    let all = d.all_images(100).unwrap();
    assert_eq!(all.len(), 16, "4 touched sectors, 2 choices each");
    let zero = vec![0u8; SECTOR];
    // Block 1 durable without block 0 (reordering), and block 0 half-written (torn).
    assert!(all
        .iter()
        .any(|i| i[..BS] == vec![0u8; BS][..] && i[BS..] == block(2)[..]));
    assert!(all
        .iter()
        .any(|i| i[..SECTOR] == block(1)[..SECTOR] && i[SECTOR..BS] == zero[..]));
    // Not allowed: a byte pattern nobody wrote.
    let mut bad = d.contents().to_vec();
    bad[7] = 0xee;
    assert!(!d.allows(&bad));
    d.flush().unwrap();
    assert_eq!(d.all_images(100).unwrap(), vec![d.contents().to_vec()]);
}

#[test]
fn older_versions_of_a_sector_may_survive() {
    // A cache may destage v1, then take v2 and lose it: the media keeps v1.
    let mut d = SimDevice::new(BS, 1).unwrap();
    d.write(0, &block(1)).unwrap();
    d.write(0, &block(2)).unwrap();
    assert!(d.allows(&block(1)));
    assert!(d.allows(&block(2)));
    assert_eq!(d.all_images(100).unwrap().len(), 9);
}

#[test]
fn bad_arguments_are_errors() {
    let mut d = SimDevice::new(BS, 2).unwrap();
    assert!(matches!(
        d.write(2, &block(0)),
        Err(DeviceError::OutOfRange { block: 2, .. })
    ));
    assert!(matches!(
        d.write(0, &[0; 10]),
        Err(DeviceError::BadLength { got: 10, .. })
    ));
    assert!(matches!(
        SimDevice::new(1000, 1),
        Err(DeviceError::BadBlockSize(1000))
    ));
    assert!(matches!(
        SimDevice::from_image(BS, vec![0; BS + 1]),
        Err(DeviceError::BadImage { .. })
    ));
    let e = d.read(5, &mut [0; BS]).unwrap_err().to_string();
    assert!(e.contains("block 5 is outside the device"), "{e}");
}

#[test]
fn file_device_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("img");
    let mut d = FileDevice::create(&p, 4096, 8).unwrap();
    assert_eq!((d.block_size(), d.blocks()), (4096, 8));
    d.write(3, &[7u8; 4096]).unwrap();
    d.flush().unwrap();
    drop(d);
    let mut d = FileDevice::open(&p, 4096).unwrap();
    let mut buf = vec![0; 4096];
    d.read(3, &mut buf).unwrap();
    assert_eq!(buf, vec![7u8; 4096]);
    d.read(0, &mut buf).unwrap();
    assert_eq!(buf, vec![0u8; 4096]);
    assert!(matches!(
        d.write(8, &buf),
        Err(DeviceError::OutOfRange { .. })
    ));
    let e = FileDevice::open(&dir.path().join("missing"), 4096)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("opening ") && e.contains("missing"), "{e}");
}
