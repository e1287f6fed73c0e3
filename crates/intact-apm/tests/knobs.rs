//! The atomicity knobs of today's ext4 (docs/apm.md, "Sizes before data"):
//! `zeros_before_data`, `truncate_before_data` and `truncate_zeroes_tail`, each on a
//! workload small enough to list
//! its crash states by hand. States are built here by a reference model of the
//! micro-operations (a file is a size and bytes, holes read as garbage `G`), sharing no
//! code with the explorer's crash file system, over every set of units closed under the
//! program's ordering.

mod common;
use common::op;
use intact_apm::{Apm, Micro, Program};
use intact_model::op::{Data, LogicalOp, Op};
use intact_model::state::State;
use std::collections::{BTreeSet, HashMap};

const ROOT: u64 = 1;
const F: u64 = 2;
/// data.bin of the workloads: 8 KiB of 'x', then 8 KiB of 'y'.
const Y_AT: u64 = 8192;

fn blob() -> Vec<u8> {
    let mut b = vec![b'x'; Y_AT as usize];
    b.extend(vec![b'y'; 8192]);
    b
}

/// `f` exists, empty, before the workload.
fn initial() -> State {
    let mut s = State::empty();
    let link = LogicalOp::Link {
        dir: ROOT,
        name: "f".into(),
        inode: F,
        link_count: 1,
        created: true,
    };
    s.apply(&link, &[]).unwrap();
    s
}

fn append(old: u64, new: u64, at: u64) -> LogicalOp {
    LogicalOp::Append {
        inode: F,
        old_size: old,
        new_size: new,
        data: Data::Bytes { at, len: new - old },
    }
}

fn truncate(old: u64, new: u64) -> LogicalOp {
    LogicalOp::Truncate {
        inode: F,
        old_size: old,
        new_size: new,
    }
}

/// `f`'s contents as runs: "x100" is 100 bytes of 'x', "Z50" 50 zeros, "G10" 10 bytes
/// never written (garbage); "" an empty file.
fn render(bytes: &[Option<u8>]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let j = (i..bytes.len())
            .find(|&j| bytes[j] != bytes[i])
            .unwrap_or(bytes.len());
        let c = match bytes[i] {
            None => 'G',
            Some(0) => 'Z',
            Some(b) => b as char,
        };
        out.push_str(&format!("{c}{}", j - i));
        i = j;
    }
    out
}

/// Applies the micro-ops of `f` that are in `has`, in program order: the reference model.
fn file_state(p: &Program, blob: &[u8], has: &dyn Fn(usize) -> bool) -> String {
    let mut size = 0u64;
    let mut buf: HashMap<u64, u8> = HashMap::new();
    for (i, m) in p.micros.iter().enumerate().filter(|(i, _)| has(*i)) {
        match &m.micro {
            Micro::SetSize { inode: F, size: s } => size = *s,
            Micro::Write {
                inode: F,
                offset,
                data,
            } => {
                let bytes = data.bytes(blob).unwrap();
                for (k, b) in bytes.iter().enumerate() {
                    buf.insert(offset + k as u64, *b);
                }
            }
            Micro::ZeroFill { inode: F, size: s } => {
                for k in 0..*s {
                    buf.entry(k).or_insert(0);
                }
            }
            Micro::Nop | Micro::Sync { .. } | Micro::Output { .. } => {}
            other => panic!("micro-op {i} outside the model: {other:?}"),
        }
    }
    let bytes: Vec<Option<u8>> = (0..size).map(|k| buf.get(&k).copied()).collect();
    render(&bytes)
}

/// Every closed set of units, as the file's contents.
fn states(apm: &str, ops: &[LogicalOp]) -> BTreeSet<String> {
    let ops: Vec<Op> = ops
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, o)| op(i, o))
        .collect();
    let blob = blob();
    let p = Program::build(
        &Apm::resolve(apm).unwrap(),
        &ops,
        &initial(),
        blob.len() as u64,
    )
    .unwrap();
    let n = p.units.len();
    assert!(n <= 16, "{n} units: too many to enumerate");
    let mut out = BTreeSet::new();
    for mask in 0u32..(1 << n) {
        let closed = (0..n)
            .filter(|u| mask & (1 << u) != 0)
            .all(|u| p.preds[u].ones().all(|q| mask & (1 << q) != 0));
        if closed {
            out.insert(file_state(&p, &blob, &|i| mask & (1 << p.unit_of[i]) != 0));
        }
    }
    out
}

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// An append of 100 bytes. With content atomicity alone (ext4-o, ext4-dioread_lock) the
/// size and data persist together; with zeros_before_data (ext4) the size may also
/// persist alone, reading as zeros. Never garbage.
#[test]
fn zeros_before_data_adds_the_zero_filled_size_only() {
    let ops = [append(0, 100, 0)];
    assert_eq!(states("ext4-o", &ops), set(&["", "x100"]));
    assert_eq!(states("ext4-dioread_lock", &ops), set(&["", "x100"]));
    assert_eq!(states("ext4", &ops), set(&["", "Z100", "x100"]));
    // append_zeros without content atomicity admits garbage too (the thesis' default).
    assert!(states("default", &ops).contains("G100"));
}

/// An append of 5000 bytes: two pieces, [0, 4096) and [4096, 5000). Under ext4 each
/// piece's size and zeros form one unit, its data another (after them: same bytes); the
/// second size waits for the first piece's zeros, not its data. By hand, the closed sets
/// are {}, {1}, {1,2}, {1,3}, {1,2,3}, {1,3,4}, {1,2,3,4} (1, 3 the size units; 2, 4 the
/// data units).
#[test]
fn zeros_before_data_per_piece() {
    let ops = [append(0, 5000, 0)];
    assert_eq!(
        states("ext4", &ops),
        set(&[
            "",
            "Z4096",
            "x4096",
            "Z5000",
            "x4096Z904",
            "Z4096x904",
            "x5000"
        ])
    );
    assert_eq!(
        states("ext4-dioread_lock", &ops),
        set(&["", "x4096", "x5000"])
    );
}

/// An append of 100 bytes, then a truncate to 50. Under ext4-o the truncate's size waits
/// for the append's data. With truncate_before_data (ext4-dioread_lock) it may persist
/// first: the file is 50 zeros (the delayed data had no blocks). With both knobs (ext4)
/// the append's size may persist alone too (100 zeros). Both also zero the cut block's
/// tail (truncate_zeroes_tail, below): `x50Z50`, the old size with zeros past the new.
#[test]
fn truncate_before_data_exposes_zeros_below_the_new_size() {
    let ops = [append(0, 100, 0), truncate(100, 50)];
    assert_eq!(states("ext4-o", &ops), set(&["", "x100", "x50"]));
    assert_eq!(
        states("ext4-dioread_lock", &ops),
        set(&["", "x100", "Z50", "x50", "x50Z50"])
    );
    assert_eq!(
        states("ext4", &ops),
        set(&["", "Z100", "x100", "Z50", "x50", "x50Z50"])
    );
}

/// Correction 3's workload shape (docs/validation.md, gen-1000007): an append of 100
/// bytes, one to 4196, a truncate to 4096. ext4-o allows no 4096 zeros; ext4-dioread_lock
/// does (the truncate before both appends' data), and never garbage.
#[test]
fn truncate_before_data_on_the_validated_shape() {
    let ops = [
        append(0, 100, 0),
        append(100, 4196, Y_AT),
        truncate(4196, 4096),
    ];
    let o = states("ext4-o", &ops);
    assert!(!o.contains("Z4096"), "{o:?}");
    let d = states("ext4-dioread_lock", &ops);
    assert_eq!(
        d,
        set(&["", "x100", "x100y3996", "x100y4096", "Z4096", "x100Z3996"])
    );
    assert!(d.iter().all(|s| !s.contains('G')), "{d:?}");
}

/// truncate_zeroes_tail: an 8 KiB file cut to 5000 bytes. ext4 zeroes the rest of the
/// block the new size ends in ([5000, 8192)) as ordered data before the truncate's size
/// commits, so the old size can show the zeroed tail (found by validate-apm on gen-1000047,
/// docs/validation.md). By hand under ext4-dioread_lock, with units A1 = [0, 4096) with
/// its size, A2 = [4096, 8192) with its size, Z = the tail's zeros (after A2: same bytes),
/// T = the early shrink (zero fill and size 5000): {}, {A1}, {A1,A2}, {A1,A2,Z}, {T},
/// {A1,T}, {A1,A2,T}, {A1,A2,Z,T}.
#[test]
fn truncate_zeroes_tail_shows_the_old_size_with_zeros_past_the_new_one() {
    let ops = [append(0, 8192, 0), truncate(8192, 5000)];
    assert_eq!(
        states("ext4-dioread_lock", &ops),
        set(&[
            "",
            "x4096",
            "x8192",
            "x5000Z3192",
            "Z5000",
            "x4096Z904",
            "x5000"
        ])
    );
    assert_eq!(
        states("ext4-o", &ops),
        set(&["", "x4096", "x8192", "x5000"])
    );
    // A cut on a block boundary zeroes nothing.
    let aligned = [append(0, 8192, 0), truncate(8192, 4096)];
    assert!(states("ext4-dioread_lock", &aligned)
        .iter()
        .all(|s| !s.starts_with("x4096Z")));
}

/// The zeroed tail commutes with earlier zeros of the same bytes: 100 bytes, a growing
/// truncate to 200 (zeros [100, 200), one unit with its size), a cut to 50 (tail zeros
/// [50, 200)). The tail follows the data (x) but not the growth's zeros, so it can persist
/// without the growth's size: the old size 100 with zeros past 50 (`x50Z50`, what
/// validate-apm found on gen-1000066). By hand under ext4-dioread_lock, with A the append,
/// G the growth, Z the tail, T the early shrink: {}, {A}, {A,G}, {A,Z}, {A,G,Z}, {T}, {A,T},
/// {A,G,T}, {A,Z,T}, {A,G,Z,T}.
#[test]
fn the_zeroed_tail_does_not_wait_for_a_growths_size() {
    let ops = [append(0, 100, 0), truncate(100, 200), truncate(200, 50)];
    assert_eq!(
        states("ext4-dioread_lock", &ops),
        set(&["", "x100", "x100Z100", "x50Z50", "x50Z150", "Z50", "x50"])
    );
}

/// The knobs refine content atomicity: without it they are refused, with a message that
/// says what to use instead.
#[test]
fn knobs_need_content_atomicity() {
    for knob in ["zeros_before_data", "truncate_before_data"] {
        let text = format!("name = \"x\"\n[atomicity]\ngranularity = 4096\n{knob} = true\n");
        let e = Apm::parse(&text, "x.toml").unwrap_err().to_string();
        assert!(
            e.contains("content = true") && e.contains("append_zeros"),
            "{e}"
        );
        let ok = format!("{text}content = true\n");
        assert!(Apm::parse(&ok, "x.toml").is_ok());
    }
}
