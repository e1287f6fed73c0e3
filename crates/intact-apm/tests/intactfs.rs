//! The `intactfs` APM (intactfs's promise: one stream, everything in program order, weak
//! atomicity) on small known workloads. The undo-logging DBMS of thesis 004 Figure 2.1
//! (examples/undolog) is modelled here at the level of atomic units: every set of units
//! closed under the APM's ordering is a crash state, evaluated with the program's own
//! recovery rule. Its ordering vulnerabilities (the overwrite of dbfile before the log,
//! the unlink before the overwrite) exist under ext4-o and default and vanish under
//! intactfs; its durability vulnerability (nothing synced before "committed" is printed)
//! stays, and only the application's own fsync removes it.

mod common;
use common::op;
use intact_apm::{Apm, Micro, Program};
use intact_model::op::{Data, LogicalOp, Op, SyncKind};
use intact_model::state::State;

const ROOT: u64 = 1;
const DB: u64 = 2;
const LOG: u64 = 3;
/// Undo record: 33-byte header + 8000 old bytes (undolog.c, no checksum trailer).
const LOG_LEN: u64 = 8033;

/// `dbfile` (12288 bytes) exists before the workload.
fn initial() -> State {
    let mut s = State::empty();
    s.apply(
        &LogicalOp::Link {
            dir: ROOT,
            name: "dbfile".into(),
            inode: DB,
            link_count: 1,
            created: true,
        },
        &[],
    )
    .unwrap();
    s.apply(
        &LogicalOp::Append {
            inode: DB,
            old_size: 0,
            new_size: 12288,
            data: Data::Zeros { zeros: 12288 },
        },
        &[],
    )
    .unwrap();
    s
}

/// Figure 2.1: creat(log), write(log, record), pwrite(dbfile, [1000, 9000)), unlink(log),
/// print "committed". `fsync_dir_unlink`: Figure 2.2's last measure, fsync(".") before
/// the print.
fn undolog(fsync_dir_unlink: bool) -> Vec<Op> {
    let mut v = vec![
        LogicalOp::Link {
            dir: ROOT,
            name: "log".into(),
            inode: LOG,
            link_count: 1,
            created: true,
        },
        LogicalOp::Append {
            inode: LOG,
            old_size: 0,
            new_size: LOG_LEN,
            data: Data::Bytes {
                at: 0,
                len: LOG_LEN,
            },
        },
        LogicalOp::Overwrite {
            inode: DB,
            offset: 1000,
            count: 8000,
            data: Data::Bytes { at: 0, len: 8000 },
        },
        LogicalOp::Unlink {
            dir: ROOT,
            name: "log".into(),
            inode: LOG,
            link_count: 0,
        },
    ];
    if fsync_dir_unlink {
        v.push(LogicalOp::Sync {
            inode: Some(ROOT),
            how: SyncKind::Fsync,
            range: None,
        });
    }
    v.push(LogicalOp::Output {
        data: Data::Bytes { at: 0, len: 10 },
    });
    v.into_iter().enumerate().map(|(i, o)| op(i, o)).collect()
}

fn build(apm: &str, ops: &[Op]) -> Program {
    Program::build(&Apm::resolve(apm).unwrap(), ops, &initial(), 1 << 20).unwrap()
}

/// Crash states of the undo log whose recovery breaks the checker's rules
/// (examples/undolog/README.md, "The checker"), split by cause.
#[derive(Debug, Default, PartialEq)]
struct Failures {
    /// Inconsistent even without the output: dbfile a mix of old and new, or garbage
    /// restored from a torn log (ordering or atomicity).
    ordering_or_atomicity: usize,
    /// Inconsistent only because "committed" was printed and dbfile is old (durability).
    durability: usize,
    /// Distinct closed unit sets examined.
    states: usize,
}

/// Evaluates one crash state: which micro-operations persisted. Returns (consistent
/// without regard to output, consistent given the output).
fn evaluate(p: &Program, has: &dyn Fn(usize) -> bool) -> (bool, bool) {
    let m = |i: usize| &p.micros[i].micro;
    let idx: Vec<usize> = (0..p.micros.len()).collect();
    let linked = idx
        .iter()
        .any(|&i| has(i) && matches!(m(i), Micro::CreateEntry { inode: LOG, .. }))
        && !idx
            .iter()
            .any(|&i| has(i) && matches!(m(i), Micro::DeleteEntry { inode: LOG, .. }));
    let log_writes: Vec<usize> = idx
        .iter()
        .copied()
        .filter(|&i| {
            matches!(
                m(i),
                Micro::Write {
                    inode: LOG,
                    data: Data::Bytes { .. },
                    ..
                }
            )
        })
        .collect();
    let full_size = idx.iter().any(|&i| {
        has(i)
            && matches!(
                m(i),
                Micro::SetSize {
                    inode: LOG,
                    size: LOG_LEN
                }
            )
    });
    let header = log_writes
        .iter()
        .any(|&i| has(i) && matches!(m(i), Micro::Write { offset: 0, .. }));
    let complete = full_size && log_writes.iter().all(|&i| has(i));
    let db: Vec<usize> = idx
        .iter()
        .copied()
        .filter(|&i| matches!(m(i), Micro::Write { inode: DB, .. }))
        .collect();
    let new = db.iter().filter(|&&i| has(i)).count();
    let printed = idx
        .iter()
        .any(|&i| has(i) && matches!(m(i), Micro::Output { .. }));
    // Recovery: a log of the recorded size whose header parses is rolled back.
    let (db_ok, db_new) = if linked && full_size && header {
        (complete, false) // a torn record restores garbage
    } else {
        (new == 0 || new == db.len(), new == db.len())
    };
    (db_ok, db_ok && (!printed || db_new))
}

/// Every set of units closed under the program's ordering (exhaustive; the workloads
/// here have at most 16 units).
fn failures(p: &Program) -> Failures {
    let n = p.units.len();
    assert!(n <= 16, "{} units", n);
    let mut f = Failures::default();
    for mask in 0u32..(1 << n) {
        let closed = (0..n)
            .filter(|u| mask & (1 << u) != 0)
            .all(|u| p.preds[u].ones().all(|q| mask & (1 << q) != 0));
        if !closed {
            continue;
        }
        f.states += 1;
        let has = |i: usize| mask & (1 << p.unit_of[i]) != 0;
        match evaluate(p, &has) {
            (false, _) => f.ordering_or_atomicity += 1,
            (true, false) => f.durability += 1,
            (true, true) => {}
        }
    }
    f
}

/// The acceptance test in miniature: Figure 2.1's ordering vulnerabilities, found
/// under ext4-o and default, vanish under intactfs; its durability vulnerability remains
/// until the application syncs (Figure 2.2's fsync(".") after the unlink).
#[test]
fn intactfs_masks_undolog_ordering_but_not_its_missing_fsync() {
    let plain = undolog(false);
    for apm in ["default", "ext4-o", "btrfs", "ext3-w"] {
        let f = failures(&build(apm, &plain));
        assert!(
            f.ordering_or_atomicity > 0,
            "{apm} reorders Figure 2.1: {f:?}"
        );
        assert!(
            f.durability > 0,
            "{apm}: nothing synced before 'committed': {f:?}"
        );
    }
    let f = failures(&build("intactfs", &plain));
    assert_eq!(
        f.ordering_or_atomicity, 0,
        "intactfs keeps the log before the overwrite before the unlink: {f:?}"
    );
    assert!(
        f.durability > 0,
        "intactfs does not make unsynced work durable: {f:?}"
    );

    let fixed = undolog(true);
    let f = failures(&build("intactfs", &fixed));
    assert_eq!(
        (f.ordering_or_atomicity, f.durability),
        (0, 0),
        "fsync(\".\") after the unlink: {f:?}"
    );
    // On a reordering file system the last fsync alone does not help: dbfile can still
    // persist half new before the log (Figure 2.2 needs fsync-log and fsync-db there).
    let f = failures(&build("ext4-o", &fixed));
    assert!(
        f.ordering_or_atomicity > 0,
        "ext4-o with only the last fsync: {f:?}"
    );
}

/// One stream: every unit needs every earlier disk unit, so the crash states of a
/// workload without output are exactly the prefixes of its units.
#[test]
fn intactfs_orders_every_update_in_program_order() {
    let ops: Vec<Op> = vec![
        LogicalOp::Link {
            dir: ROOT,
            name: "a".into(),
            inode: 3,
            link_count: 1,
            created: true,
        },
        LogicalOp::Append {
            inode: 3,
            old_size: 0,
            new_size: 10000,
            data: Data::Zeros { zeros: 10000 },
        },
        LogicalOp::Overwrite {
            inode: DB,
            offset: 0,
            count: 12288,
            data: Data::Zeros { zeros: 12288 },
        },
        LogicalOp::Sync {
            inode: Some(DB),
            how: SyncKind::Fdatasync,
            range: None,
        },
        LogicalOp::Rename {
            src_dir: ROOT,
            src_name: "a".into(),
            dst_dir: ROOT,
            dst_name: "b".into(),
            inode: 3,
            replaced: None,
            exchange: false,
        },
        LogicalOp::Truncate {
            inode: DB,
            old_size: 12288,
            new_size: 100,
        },
        LogicalOp::Sync {
            inode: None,
            how: SyncKind::Sync,
            range: None,
        },
        LogicalOp::Unlink {
            dir: ROOT,
            name: "dbfile".into(),
            inode: DB,
            link_count: 0,
        },
    ]
    .into_iter()
    .enumerate()
    .map(|(i, o)| op(i, o))
    .collect();
    let p = build("intactfs", &ops);
    for v in 0..p.units.len() {
        let want: Vec<usize> = (0..v).collect();
        assert_eq!(
            p.preds[v].ones().collect::<Vec<_>>(),
            want,
            "unit {v} ({:?}) needs every earlier unit",
            p.micros[p.units[v].start].micro
        );
    }
    // ext4-o does not: the overwrite of dbfile may persist before the append to a.
    let e = build("ext4-o", &ops);
    let (app, ovw) = (
        e.unit_of[e.op_micros[1].start] as usize,
        e.unit_of[e.op_micros[2].start] as usize,
    );
    assert!(
        !e.preds[ovw].contains(app),
        "ext4-o reorders data of different files"
    );
}

/// Weak atomicity: directory operations whole, data whole per 4 KiB block but not per
/// call (unlike `strict`), appends content-atomic (size and data of a block together, and
/// never a later block's size before an earlier block's data).
#[test]
fn intactfs_atomicity_is_weak() {
    let ops: Vec<Op> = vec![
        LogicalOp::Link {
            dir: ROOT,
            name: "a".into(),
            inode: 3,
            link_count: 1,
            created: true,
        },
        LogicalOp::Append {
            inode: 3,
            old_size: 0,
            new_size: 8192,
            data: Data::Zeros { zeros: 8192 },
        },
        LogicalOp::Overwrite {
            inode: DB,
            offset: 1000,
            count: 8000,
            data: Data::Zeros { zeros: 8000 },
        },
        LogicalOp::Rename {
            src_dir: ROOT,
            src_name: "a".into(),
            dst_dir: ROOT,
            dst_name: "dbfile".into(),
            inode: 3,
            replaced: Some(DB),
            exchange: false,
        },
    ]
    .into_iter()
    .enumerate()
    .map(|(i, o)| op(i, o))
    .collect();
    let p = build("intactfs", &ops);
    let units = |op: usize| -> Vec<usize> {
        let r = p.op_micros[op].clone();
        let mut u: Vec<usize> = r.map(|i| p.unit_of[i] as usize).collect();
        u.dedup();
        u
    };
    // The append: two blocks, each one unit holding its size change and its data.
    let app = units(1);
    assert_eq!(app.len(), 2, "an 8 KiB append is two block-sized units");
    for &u in &app {
        let kinds: Vec<_> = p.units[u].clone().map(|i| &p.micros[i].micro).collect();
        assert!(
            kinds.iter().any(|m| matches!(m, Micro::SetSize { .. }))
                && kinds.iter().any(|m| matches!(m, Micro::Write { .. })),
            "size and data together: {kinds:?}"
        );
    }
    // The overwrite of [1000, 9000): three blocks, three units; strict makes it one.
    assert_eq!(units(2).len(), 3, "data atomic per block, not per call");
    let s = build("strict", &ops);
    let r = s.op_micros[2].clone();
    assert_eq!(
        s.unit_of[r.start],
        s.unit_of[r.end - 1],
        "strict: every call atomic"
    );
    // The rename over dbfile (its entry removal, the truncation of its last link, the new
    // entry and the old name's removal): one unit.
    assert_eq!(units(3).len(), 1, "a rename persists whole");
    assert!(p.op_micros[3].len() >= 3);
    // Appends: the default APM lets the size persist alone (garbage); intactfs never.
    let d = build("default", &ops);
    let r = d.op_micros[1].clone();
    assert_ne!(
        d.unit_of[r.start],
        d.unit_of[r.start + 2],
        "default: size and data are separate units"
    );
}

/// Sync points: output waits for a completed sync (and through it for every earlier
/// update of the stream, not only the synced file's); output without a sync waits for
/// nothing on disk.
#[test]
fn intactfs_sync_makes_the_whole_stream_durable() {
    let ops: Vec<Op> = vec![
        LogicalOp::Link {
            dir: ROOT,
            name: "a".into(),
            inode: 3,
            link_count: 1,
            created: true,
        },
        LogicalOp::Append {
            inode: 3,
            old_size: 0,
            new_size: 10,
            data: Data::Zeros { zeros: 10 },
        },
        LogicalOp::Output {
            data: Data::Zeros { zeros: 1 },
        },
        LogicalOp::Overwrite {
            inode: DB,
            offset: 0,
            count: 10,
            data: Data::Zeros { zeros: 10 },
        },
        LogicalOp::Sync {
            inode: Some(DB),
            how: SyncKind::Fdatasync,
            range: None,
        },
        LogicalOp::Output {
            data: Data::Zeros { zeros: 1 },
        },
    ]
    .into_iter()
    .enumerate()
    .map(|(i, o)| op(i, o))
    .collect();
    let unit = |p: &Program, op: usize| p.unit_of[p.op_micros[op].start] as usize;
    let p = build("intactfs", &ops);
    assert!(
        p.preds[unit(&p, 2)].is_clear(),
        "output before any sync waits for nothing"
    );
    for before in [0, 1, 3, 4] {
        assert!(
            p.preds[unit(&p, 5)].contains(unit(&p, before)),
            "fdatasync(dbfile) persists op {before} too"
        );
    }
    // ext4-o's fsync persists only the synced file (and its path).
    let e = build("ext4-o", &ops);
    assert!(
        !e.preds[unit(&e, 5)].contains(unit(&e, 1)),
        "ext4-o: fdatasync(dbfile) does not persist a's data"
    );
}

/// For one stream, intactfs's promise is the model of ext3 data=journal (thesis 004
/// Table 3.5 row ext3-j: everything ordered, block-granular, content and directory
/// atomicity); the study's intactfs and ext3-j columns agree because of this.
#[test]
fn intactfs_is_ext3_j_for_one_stream() {
    for ops in [undolog(false), undolog(true)] {
        let (a, b) = (build("intactfs", &ops), build("ext3-j", &ops));
        assert_eq!(a.units, b.units);
        assert_eq!(a.preds, b.preds);
    }
    let a = Apm::resolve("intactfs").unwrap();
    assert_eq!(
        (
            a.atomicity.granularity,
            a.atomicity.content,
            a.atomicity.directory_ops,
            a.atomicity.calls
        ),
        (4096, true, true, false)
    );
    assert!(Apm::builtins().iter().any(|b| b.name == "intactfs"));
}

/// With fsync as OptFS's osync (`intactfs-osync`, `001` §4.4) the crash states are as
/// consistent as under intactfs (same units, same order: no state holds a later update
/// without an earlier one), but Figure 2.2's last fsync no longer makes "committed" true.
/// Without flushes (`nobarrier`) that fsync helps with nothing.
#[test]
fn osync_keeps_consistency_not_durability_and_nobarrier_neither() {
    let fixed = undolog(true);
    let f = failures(&build("intactfs-osync", &fixed));
    assert_eq!(
        f.ordering_or_atomicity, 0,
        "intactfs-osync: in order, weakly atomic: {f:?}"
    );
    assert!(
        f.durability > 0,
        "intactfs-osync: fsync(\".\") returns before the unlink is durable: {f:?}"
    );
    let (o, i) = (build("intactfs-osync", &fixed), build("intactfs", &fixed));
    assert_eq!(o.units, i.units);
    let output = fixed.len() - 1;
    let disk = o.unit_of[o.op_micros[output].start] as usize;
    assert_eq!(
        o.preds[..disk],
        i.preds[..disk],
        "the disk updates are ordered exactly as under intactfs"
    );
    let f = failures(&build("nobarrier", &fixed));
    assert!(
        f.ordering_or_atomicity > 0 && f.durability > 0,
        "nobarrier: {f:?}"
    );
}
