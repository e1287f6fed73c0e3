//! Background checkpoints (issue 28 item 2; 002 §III-E): commit leaves due checkpoints to
//! units ([`PmemFs::checkpoint_step`]) that run while transactions stay open, from the
//! workload's own thread or a checkpointer thread; a crash inside a unit recovers the
//! committed state (the crash simulation's background seeds, run here on their own).

use intactfs_device::PmemSim;
use intactfs_pmem::background::{Checkpointer, Gate};
use intactfs_pmem::prelude::*;
use intactfs_pmem::sim::{run, with_background, SimConfig};
use intactfs_pmem::{Ino, MkfsOptions, Owner, PmemFs, Tunables, ROOT};
use std::sync::Arc;

const O: Owner = Owner { uid: 0, gid: 0 };
const LEN: u64 = 4 << 20;

fn background_fs() -> PmemFs<PmemSim> {
    let mut dev = PmemSim::new(LEN).unwrap();
    PmemFs::mkfs(&mut dev, &MkfsOptions::for_len(LEN)).unwrap();
    let (mut fs, _) = PmemFs::mount(dev).unwrap();
    fs.set_tunables(Tunables {
        background_checkpoints: true,
        max_pending: 0,
        checkpoint_unit: 1,
        ..Tunables::default()
    });
    fs
}

fn file(fs: &mut PmemFs<PmemSim>, name: &[u8]) -> Ino {
    fs.create(None, ROOT, name, 0o644, O).unwrap().ino
}

fn read_all(fs: &mut PmemFs<PmemSim>, ino: Ino, n: usize) -> Vec<u8> {
    fs.read(ino, 0, n).unwrap()
}

fn crash(fs: PmemFs<PmemSim>) -> PmemFs<PmemSim> {
    let img = fs.into_device().persistent().to_vec();
    PmemFs::mount(PmemSim::from_image(img).unwrap()).unwrap().0
}

#[test]
fn commits_leave_checkpoints_to_units_run_while_a_transaction_is_open() {
    let mut fs = background_fs();
    let (a, b) = (file(&mut fs, b"a"), file(&mut fs, b"b"));
    let t = fs.tx_begin(&[a]).unwrap();
    fs.write(Some(t), a, 0, &[1u8; 5000]).unwrap();
    let before = fs.stats().checkpoints;
    for k in 0..4u8 {
        fs.write(None, b, u64::from(k) * 4096, &[k + 10; 4096])
            .unwrap();
    }
    assert_eq!(
        fs.stats().checkpoints,
        before,
        "a commit checkpointed inline"
    );
    assert!(fs.checkpoint_due());
    let mut units = 0;
    while fs.checkpoint_due() {
        assert!(fs.checkpoint_step().unwrap().blocks > 0);
        units += 1;
    }
    assert!(units >= 4, "one block a unit: {units}");
    assert_eq!(fs.log_usage().0, 0, "every committed version installed");
    assert_eq!(
        fs.open_transactions(),
        vec![t],
        "the transaction stayed open"
    );
    fs.write(Some(t), a, 5000, &[2u8; 100]).unwrap();
    fs.tx_commit(t).unwrap();
    fs.check_invariants().unwrap();
    let mut fs = crash(fs);
    let mut want_a = vec![1u8; 5000];
    want_a.extend([2u8; 100]);
    assert_eq!(read_all(&mut fs, a, 8192), want_a);
    let want_b: Vec<u8> = (0..4u8).flat_map(|k| [k + 10; 4096]).collect();
    assert_eq!(read_all(&mut fs, b, 20000), want_b);
}

#[test]
fn a_checkpointer_thread_installs_while_the_caller_commits() {
    let mut fs = background_fs();
    let files: Vec<Ino> = (0..4u8).map(|k| file(&mut fs, &[b'f', b'0' + k])).collect();
    let shared = Arc::new(Gate::new(fs));
    let s = Arc::clone(&shared);
    let ck = Checkpointer::spawn("test-ckpt", move || {
        s.lock_for_checkpoint().background_unit()
    })
    .unwrap();
    for round in 0..40u64 {
        let f = files[(round % 4) as usize];
        let mut fs = shared.lock();
        let t = fs.tx_begin(&[f]).unwrap();
        fs.write(Some(t), f, (round / 4) * 4096, &[round as u8; 4096])
            .unwrap();
        fs.tx_commit(t).unwrap();
        let due = fs.checkpoint_due();
        drop(fs);
        if due {
            ck.poke();
        }
    }
    ck.stop().unwrap();
    let fs = Arc::try_unwrap(shared).expect("the thread is joined");
    let fs = fs.into_inner();
    assert!(fs.stats().background_units > 0, "{:?}", fs.stats());
    assert_eq!(fs.stats().exhausted_checkpoints, 0);
    fs.check_invariants().unwrap();
    let mut fs = crash(fs);
    for (k, &f) in files.iter().enumerate() {
        let got = read_all(&mut fs, f, 10 * 4096);
        let want: Vec<u8> = (0..10u64)
            .flat_map(|r| [(r * 4 + k as u64) as u8; 4096])
            .collect();
        assert_eq!(got, want, "file {k}");
    }
}

#[test]
fn crashes_inside_background_units_recover_the_committed_state() {
    let (mut images, mut units) = (0, 0);
    for seed in 0..8 {
        let r = run(&with_background(SimConfig {
            seed,
            ..SimConfig::default()
        }))
        .unwrap_or_else(|f| panic!("{f}"));
        images += r.background_unit_images;
        units += r.background_units_open;
    }
    assert!(
        units >= 5 && images >= 50,
        "units with transactions open {units}, crash images in them {images}"
    );
}
