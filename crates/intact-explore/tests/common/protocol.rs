//! Random update protocols for the explorer's property tests: actions over a few files in
//! one directory, turned into a consistent list of logical operations.

use intact_model::op::{Data, LogicalOp, Op, SyncKind};
use intact_model::state::{Node, State};
use proptest::prelude::*;

#[derive(Clone, Debug)]
pub enum Act {
    Create(u8),
    Append(u8, u16),
    Overwrite(u8, u16, u16),
    Truncate(u8, u16),
    Rename(u8, u8),
    Unlink(u8),
    Link(u8, u8),
    Mkdir(u8),
    Fsync(u8),
    Fdatasync(u8),
    Output,
}

/// Actions over files f0..f3.
pub fn act() -> impl Strategy<Value = Act> {
    act_over(4, 9000)
}

/// Actions over files f0..f{files-1}, data operations up to about `bytes` long.
pub fn act_over(files: u8, bytes: u16) -> impl Strategy<Value = Act> {
    assert!(files >= 2 && bytes >= 2, "at least two files and two bytes");
    let f = 0u8..files;
    prop_oneof![
        f.clone().prop_map(Act::Create),
        (f.clone(), 1u16..bytes).prop_map(|(f, n)| Act::Append(f, n)),
        (f.clone(), 0u16..bytes, 1u16..bytes.div_ceil(3) * 2)
            .prop_map(|(f, o, n)| Act::Overwrite(f, o, n)),
        (f.clone(), 0u16..bytes.saturating_mul(4) / 3).prop_map(|(f, n)| Act::Truncate(f, n)),
        (f.clone(), f.clone()).prop_map(|(a, b)| Act::Rename(a, b)),
        f.clone().prop_map(Act::Unlink),
        (f.clone(), f.clone()).prop_map(|(a, b)| Act::Link(a, b)),
        (0u8..2).prop_map(Act::Mkdir),
        f.clone().prop_map(Act::Fsync),
        f.prop_map(Act::Fdatasync),
        Just(Act::Output),
    ]
}

/// Turns actions into a consistent list of logical operations (skipping impossible ones),
/// with a data blob; returns (ops, blob, final state).
pub fn protocol(acts: &[Act]) -> (Vec<Op>, Vec<u8>, State, State) {
    let initial = State::empty();
    let mut s = initial.clone();
    let mut blob = Vec::new();
    let mut ops = Vec::new();
    let name = |f: u8| format!("f{f}");
    let push = |s: &mut State, ops: &mut Vec<Op>, blob: &[u8], op: LogicalOp| {
        s.apply(&op, blob).expect("generated op applies");
        let id = ops.len();
        ops.push(Op {
            id,
            call: id,
            pid: 1,
            tid: 1,
            syscall: op.name().into(),
            op,
            path: None,
            path2: None,
            stack: vec![],
            loc: None,
            stream: 0,
        });
    };
    let size = |s: &State, i: u64| match &s.inodes[&i].node {
        Node::File { data } => data.len(),
        _ => 0,
    };
    for a in acts {
        let look = |s: &State, f: u8| s.lookup(1, &name(f)).filter(|i| !s.inodes[i].is_dir());
        match *a {
            Act::Create(f) if s.lookup(1, &name(f)).is_none() => {
                let inode = s.next_id;
                push(
                    &mut s,
                    &mut ops,
                    &blob,
                    LogicalOp::Link {
                        dir: 1,
                        name: name(f),
                        inode,
                        link_count: 1,
                        created: true,
                    },
                );
            }
            Act::Append(f, n) => {
                if let Some(i) = look(&s, f) {
                    let old = size(&s, i);
                    let at = blob.len() as u64;
                    blob.extend((0..n).map(|k| (k as u8).wrapping_mul(7).wrapping_add(f)));
                    push(
                        &mut s,
                        &mut ops,
                        &blob,
                        LogicalOp::Append {
                            inode: i,
                            old_size: old,
                            new_size: old + n as u64,
                            data: Data::Bytes { at, len: n as u64 },
                        },
                    );
                }
            }
            Act::Overwrite(f, o, n) => {
                if let Some(i) = look(&s, f) {
                    let sz = size(&s, i);
                    let (o, n) = (o as u64, n as u64);
                    if o + n <= sz {
                        let at = blob.len() as u64;
                        blob.extend((0..n).map(|k| (k as u8) ^ 0x5a));
                        push(
                            &mut s,
                            &mut ops,
                            &blob,
                            LogicalOp::Overwrite {
                                inode: i,
                                offset: o,
                                count: n,
                                data: Data::Bytes { at, len: n },
                            },
                        );
                    }
                }
            }
            Act::Truncate(f, n) => {
                if let Some(i) = look(&s, f) {
                    let old = size(&s, i);
                    push(
                        &mut s,
                        &mut ops,
                        &blob,
                        LogicalOp::Truncate {
                            inode: i,
                            old_size: old,
                            new_size: n as u64,
                        },
                    );
                }
            }
            Act::Rename(a, b) if a != b => {
                if let Some(i) = look(&s, a) {
                    let replaced = look(&s, b);
                    if s.lookup(1, &name(b)).is_some() && replaced.is_none() {
                        continue; // destination is a directory
                    }
                    push(
                        &mut s,
                        &mut ops,
                        &blob,
                        LogicalOp::Rename {
                            src_dir: 1,
                            src_name: name(a),
                            dst_dir: 1,
                            dst_name: name(b),
                            inode: i,
                            replaced,
                            exchange: false,
                        },
                    );
                }
            }
            Act::Unlink(f) => {
                if let Some(i) = look(&s, f) {
                    let left = s.inodes[&i].nlink - 1;
                    push(
                        &mut s,
                        &mut ops,
                        &blob,
                        LogicalOp::Unlink {
                            dir: 1,
                            name: name(f),
                            inode: i,
                            link_count: left,
                        },
                    );
                }
            }
            Act::Link(a, b) if a != b => {
                if let (Some(i), None) = (look(&s, a), s.lookup(1, &name(b))) {
                    let n = s.inodes[&i].nlink + 1;
                    push(
                        &mut s,
                        &mut ops,
                        &blob,
                        LogicalOp::Link {
                            dir: 1,
                            name: name(b),
                            inode: i,
                            link_count: n,
                            created: false,
                        },
                    );
                }
            }
            Act::Mkdir(d) => {
                let nm = format!("d{d}");
                if s.lookup(1, &nm).is_none() {
                    let inode = s.next_id;
                    push(
                        &mut s,
                        &mut ops,
                        &blob,
                        LogicalOp::Mkdir {
                            dir: 1,
                            name: nm,
                            inode,
                        },
                    );
                }
            }
            Act::Fsync(f) | Act::Fdatasync(f) => {
                if let Some(i) = look(&s, f) {
                    let how = match a {
                        Act::Fsync(_) => SyncKind::Fsync,
                        _ => SyncKind::Fdatasync,
                    };
                    push(
                        &mut s,
                        &mut ops,
                        &blob,
                        LogicalOp::Sync {
                            inode: Some(i),
                            how,
                            range: None,
                        },
                    );
                }
            }
            Act::Output => {
                let at = blob.len() as u64;
                blob.extend_from_slice(b"ok\n");
                push(
                    &mut s,
                    &mut ops,
                    &blob,
                    LogicalOp::Output {
                        data: Data::Bytes { at, len: 3 },
                    },
                );
            }
            _ => {}
        }
    }
    (ops, blob, initial, s)
}
