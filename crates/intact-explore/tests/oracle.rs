//! Built-in oracles over random update protocols, for every built-in APM:
//! - applying every micro-operation reproduces the state the logical operations produce;
//! - each prefix state equals the logical operations of those calls applied in order;
//! - every state the exhaustive strategy builds is a constraint-closed set, and under
//!   `strict` (calls atomic and ordered) the distinct states are exactly the prefixes.

use fixedbitset::FixedBitSet;
use intact_apm::{Apm, Program};
use intact_explore::{CrashFs, Explorer, Provenance};
use intact_model::op::{LogicalOp, Op};
use intact_model::state::{Node, State};
use proptest::prelude::*;

mod common;
use common::protocol::{act, protocol, Act};
use std::collections::HashSet;

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
                prop_assert_eq!(exp.prefix_state(k).unwrap().to_state().diff(&want), None, "APM {} prefix {}", apm.name, k);
            }
            // Exhaustive: every emitted set closed; under strict only prefixes are distinct.
            let mut hashes = HashSet::new();
            let mut cache = intact_explore::HashCache::default();
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
                let prefixes: HashSet<_> = (0..=prog.calls.len()).map(|k| exp.prefix_state(k).unwrap().hash(&mut cache)).collect();
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
