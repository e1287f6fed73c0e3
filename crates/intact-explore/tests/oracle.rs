//! Built-in oracles over random update protocols, for every built-in APM:
//! - applying every micro-operation reproduces the state the logical operations produce;
//! - each prefix state equals the logical operations of those calls applied in order;
//! - every state the exhaustive strategy builds is a constraint-closed set, and under
//!   `strict` (calls atomic and ordered) the distinct states are exactly the prefixes.

use fixedbitset::FixedBitSet;
use intact_apm::{Apm, Program};
use intact_explore::{CrashFs, Explorer, Provenance};
use intact_model::op::{Data, LogicalOp, Op, SyncKind};
use intact_model::state::{Node, State};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

#[derive(Clone, Debug)]
enum Act {
    Create(u8),
    Append(u8, u16),
    Overwrite(u8, u16, u16),
    Truncate(u8, u16),
    Rename(u8, u8),
    Unlink(u8),
    Link(u8, u8),
    Mkdir(u8),
    Fsync(u8),
    Output,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        (0u8..4).prop_map(Act::Create),
        (0u8..4, 1u16..9000).prop_map(|(f, n)| Act::Append(f, n)),
        (0u8..4, 0u16..9000, 1u16..6000).prop_map(|(f, o, n)| Act::Overwrite(f, o, n)),
        (0u8..4, 0u16..12000).prop_map(|(f, n)| Act::Truncate(f, n)),
        (0u8..4, 0u8..4).prop_map(|(a, b)| Act::Rename(a, b)),
        (0u8..4).prop_map(Act::Unlink),
        (0u8..4, 0u8..4).prop_map(|(a, b)| Act::Link(a, b)),
        (0u8..2).prop_map(Act::Mkdir),
        (0u8..4).prop_map(Act::Fsync),
        Just(Act::Output),
    ]
}

/// Turns actions into a consistent list of logical operations (skipping impossible ones),
/// with a data blob; returns (ops, blob, final state).
fn protocol(acts: &[Act]) -> (Vec<Op>, Vec<u8>, State, State) {
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
            Act::Fsync(f) => {
                if let Some(i) = look(&s, f) {
                    push(
                        &mut s,
                        &mut ops,
                        &blob,
                        LogicalOp::Sync {
                            inode: Some(i),
                            how: SyncKind::Fsync,
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

fn logical_prefix(initial: &State, ops: &[Op], blob: &[u8], k: usize) -> State {
    let mut s = initial.clone();
    for o in &ops[..k] {
        s.apply(&o.op, blob).unwrap();
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, .. ProptestConfig::default() })]

    #[test]
    fn micro_ops_reproduce_logical_states(acts in proptest::collection::vec(act(), 1..14)) {
        let (ops, blob, initial, fin) = protocol(&acts);
        for apm in Apm::builtins() {
            let prog = Program::build(&apm, &ops, &initial, blob.len() as u64).unwrap();
            let exp = Explorer::new(&prog, &ops, &blob, CrashFs::universe(&initial, &ops).unwrap()).unwrap();
            prop_assert_eq!(exp.full().to_state().diff(&fin), None, "APM {}", apm.name);
            for k in 0..=prog.calls.len() {
                let want = logical_prefix(&initial, &ops, &blob, prog.calls.get(k).map(|c| c.ops.start).unwrap_or(ops.len()));
                prop_assert_eq!(exp.prefix_state(k).to_state().diff(&want), None, "APM {} prefix {}", apm.name, k);
            }
            // Exhaustive: every emitted set closed; under strict only prefixes are distinct.
            let mut hashes = HashSet::new();
            let mut cache = HashMap::new();
            let mut bad = None;
            let mut n = 0;
            // Output is not a disk operation (the file system cannot delay it), so only
            // protocols without output have prefix-only strict states.
            let has_output = ops.iter().any(|o| matches!(o.op, LogicalOp::Output { .. }));
            let strict = apm.name == "strict" && !has_output;
            let mut emit = |p: Provenance, s: CrashFs, _d: String| {
                n += 1;
                hashes.insert(s.hash(&mut cache));
                if strict && !matches!(p, Provenance::Prefix { .. }) {
                    bad = Some(format!("{p:?}"));
                }
                Ok(n < 3000)
            };
            exp.exhaustive(&mut emit).unwrap();
            prop_assert!(bad.is_none(), "strict produced a non-prefix state {:?}", bad);
            if strict {
                let prefixes: HashSet<_> = (0..=prog.calls.len()).map(|k| exp.prefix_state(k).hash(&mut cache)).collect();
                prop_assert_eq!(&hashes, &prefixes);
            }
        }
    }

    #[test]
    fn random_sets_are_closed(acts in proptest::collection::vec(act(), 1..14), seed in 0u64..1000) {
        let (ops, blob, initial, _) = protocol(&acts);
        let apm = Apm::resolve("ext4-o").unwrap();
        let prog = Program::build(&apm, &ops, &initial, blob.len() as u64).unwrap();
        // Closedness of the strategy's sets, re-derived: every unit's predecessors present.
        let nu = prog.units.len();
        let mut rng_sets = Vec::new();
        let mut state = seed;
        for _ in 0..20 {
            let mut set = FixedBitSet::with_capacity(nu);
            for u in 0..nu {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if (state >> 33) % 2 == 0 && prog.preds[u].is_subset(&set) {
                    set.insert(u);
                }
            }
            prop_assert!(prog.closed(&set));
            rng_sets.push(set);
        }
        let exp = Explorer::new(&prog, &ops, &blob, CrashFs::universe(&initial, &ops).unwrap()).unwrap();
        for set in &rng_sets {
            exp.build_set(set).unwrap();
        }
    }
}

/// Found by the application study: the per-call atomicity states of an unlink or a
/// replacing rename never show a file emptied while its last name is still there (SQLite's
/// hot journal cut short, PostgreSQL's replorigin_checkpoint read as empty), under any
/// APM.
#[test]
fn no_emptied_file_keeps_its_last_name() {
    for last in [Act::Unlink(0), Act::Rename(1, 0)] {
        // f0: 9000 bytes, then unlinked or replaced by f1 (10 bytes).
        let acts = vec![
            Act::Create(0),
            Act::Append(0, 9000),
            Act::Create(1),
            Act::Append(1, 10),
            last.clone(),
        ];
        let (ops, blob, initial, _) = protocol(&acts);
        for name in ["default", "btrfs", "ext3-w"] {
            let prog = Program::build(
                &Apm::resolve(name).unwrap(),
                &ops,
                &initial,
                blob.len() as u64,
            )
            .unwrap();
            let exp = Explorer::new(
                &prog,
                &ops,
                &blob,
                CrashFs::universe(&initial, &ops).unwrap(),
            )
            .unwrap();
            let excluded = vec![false; prog.calls.len()];
            let final_call = prog.calls.len() - 1;
            let mut seen = 0;
            exp.atomicity(&excluded, &mut |p, fs, desc| {
                if p != (Provenance::Atomicity { group: final_call }) {
                    return Ok(true);
                }
                seen += 1;
                let st = fs.to_state();
                let f0 = st.lookup(st.root, "f0").map(|i| match &st.inodes[&i].node {
                    Node::File { data } => data.len(),
                    _ => 0,
                });
                // Named f0 holds the old 9000 bytes or (rename done) the new 10.
                assert!(
                    matches!(f0, None | Some(9000) | Some(10)),
                    "{name} {last:?}: f0 named with {f0:?} bytes in `{desc}`"
                );
                Ok(true)
            })
            .unwrap();
            // Directory operations are atomic under btrfs and ext3-w: no intermediate states.
            assert!(
                name != "default" || seen > 0,
                "{name} {last:?}: no intermediate states"
            );
        }
    }
}
