//! Differential test of the exploration strategies (issue 27 item 5): on random small
//! protocols (at most 12 calls over 3 files, with output), under every built-in APM, every
//! static vulnerability that exhaustive enumeration finds is found by ALICE's default
//! strategy, or is out of its reach for a named reason (docs/report.md, "What the default
//! strategy reaches").
//!
//! The checker is generic: after a crash that printed k outputs, every name the workload
//! leaves in the directory holds what it held at the k-th output or what it holds at the
//! end (other names, such as temporary files, are not looked at).
//!
//! `INTACT_DIFF_CASES` sets the number of random protocols (default 160, a few seconds
//! here); the reasons for misses are printed at the end (`--nocapture`).

mod common;

use common::protocol::{act_over, protocol, Act};
use fixedbitset::FixedBitSet;
use intact_apm::{Apm, Program};
use intact_explore::{CrashFs, Explorer, Provenance, StateHash};
use intact_model::op::{LogicalOp, Op};
use intact_model::state::{Node, State};
use intact_report::{ApmRun, Grouping, Kind, Probe, StateNo, Static, Verdict};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Exhaustive enumerations cut at this many states are left out (not compared).
const MAX_EXHAUSTIVE_STATES: usize = 20_000;

/// What a name holds, for the checker.
#[derive(Clone, Debug, PartialEq)]
enum View {
    Absent,
    Dir,
    File(Node),
}

fn view(s: &State, name: &str) -> View {
    match s.lookup(s.root, name).map(|i| &s.inodes[&i].node) {
        None => View::Absent,
        Some(Node::Dir { .. }) => View::Dir,
        Some(n) => View::File(n.clone()),
    }
}

fn names(s: &State) -> BTreeSet<String> {
    s.entries(s.root)
        .map(|e| e.keys().cloned().collect())
        .unwrap_or_default()
}

/// The generic checker: the logical state at each output (index k: after k outputs) and
/// the final one.
struct Checker {
    at_output: Vec<State>,
    fin: State,
}

impl Checker {
    fn new(initial: &State, ops: &[Op], blob: &[u8]) -> Checker {
        let mut s = initial.clone();
        let mut at_output = vec![s.clone()];
        for o in ops {
            s.apply(&o.op, blob).expect("generated op applies");
            if matches!(o.op, LogicalOp::Output { .. }) {
                at_output.push(s.clone());
            }
        }
        Checker { at_output, fin: s }
    }

    fn verdict(&self, fs: &CrashFs) -> Verdict {
        // Every output prints "ok\n" (the generator's convention).
        assert_eq!(fs.stdout.len() % 3, 0, "outputs are 3 bytes each");
        let k = fs.stdout.len() / 3;
        let promised = &self.at_output[k.min(self.at_output.len() - 1)];
        let crash = fs.to_state();
        // Names the workload leaves behind; others (temporary files) are ignored.
        let bad = names(&self.fin).into_iter().find(|n| {
            let v = view(&crash, n);
            v != view(promised, n) && v != view(&self.fin, n)
        });
        Verdict {
            pass: bad.is_none(),
            timeout: false,
            message: bad
                .map(|n| format!("{n} after {k} outputs"))
                .unwrap_or_default(),
        }
    }
}

/// One strategy's run: every constructed state with its provenance, and the verdicts.
/// States are numbered per run, as `intact check` does; runs compare them by hash.
struct Run {
    probes: Vec<Probe>,
    numbers: HashMap<StateHash, StateNo>,
    /// By state number.
    hashes: Vec<StateHash>,
    verdicts: Vec<Verdict>,
    excluded: Vec<bool>,
}

impl Run {
    fn new(calls: usize) -> Run {
        Run {
            probes: Vec::new(),
            numbers: HashMap::new(),
            hashes: Vec::new(),
            verdicts: Vec::new(),
            excluded: vec![false; calls],
        }
    }

    fn emit(&mut self, chk: &Checker, p: Provenance, s: CrashFs, desc: String) -> bool {
        let hash = s.hash(&mut intact_explore::HashCache::default());
        let state = match self.numbers.get(&hash) {
            Some(n) => *n,
            None => {
                let n = StateNo::try_from(self.hashes.len()).unwrap();
                self.numbers.insert(hash, n);
                self.hashes.push(hash);
                self.verdicts.push(chk.verdict(&s));
                n
            }
        };
        self.probes.push(Probe {
            prov: p,
            state,
            desc: desc.into(),
        });
        true
    }

    fn verdict(&self, n: StateNo) -> Option<Verdict> {
        self.verdicts.get(n as usize).cloned()
    }

    fn hash(&self, p: &Probe) -> StateHash {
        self.hashes[p.state as usize]
    }
}

fn alice(exp: &Explorer, chk: &Checker) -> Run {
    let mut run = Run::new(exp.prog.calls.len());
    exp.prefixes(&mut |p, s, d| Ok(run.emit(chk, p, s, d)))
        .unwrap();
    // As `intact check`: calls in atomic groups take no part in the later phases.
    let prefix = intact_report::prefix_verdicts(&run.probes, &|h| run.verdict(h));
    for (a, z, _) in intact_report::atomic_groups(&prefix) {
        for e in run.excluded.iter_mut().take(z + 1).skip(a) {
            *e = true;
        }
    }
    let excluded = run.excluded.clone();
    let mut emit = |p, s, d| Ok(run.emit(chk, p, s, d));
    exp.atomicity(&excluded, &mut emit).unwrap();
    exp.reorderings(&excluded, &mut emit).unwrap();
    let complete = exp
        .micro_reorderings(&excluded, 100_000, &mut emit)
        .unwrap();
    assert!(complete, "at most one micro-reordering state per pair");
    run
}

/// None when the enumeration hit MAX_EXHAUSTIVE_STATES.
fn exhaustive(exp: &Explorer, chk: &Checker) -> Option<Run> {
    let mut run = Run::new(exp.prog.calls.len());
    let complete = exp
        .exhaustive(&mut |p, s, d| {
            run.emit(chk, p, s, d);
            Ok(run.probes.len() < MAX_EXHAUSTIVE_STATES)
        })
        .unwrap();
    complete.then_some(run)
}

fn statics(prog: &Program, ops: &[Op], run: &Run) -> Vec<Static> {
    let id = |n: StateNo| {
        let h = run.hashes.get(n as usize)?;
        Some(h.iter().map(|b| format!("{b:02x}")).collect())
    };
    let apm_run = ApmRun {
        prog,
        ops,
        probes: &run.probes,
        state_ids: &id,
    };
    let loc = |o: &Op| format!("call{}", o.call);
    let dynamic = apm_run.dynamics(&|h| run.verdict(h), &loc, &|_| String::new());
    // Per call: the property is about which calls each strategy blames; grouping by
    // missing sync names the last call before the output, which depends on the states
    // each strategy built.
    intact_report::statics_grouped(&dynamic, Grouping::PerCall)
}

/// How statics are compared: an ordering by the call that must persist first (the later
/// call shown is the earliest failing one, which depends on which states were built).
fn key(s: &Static) -> (Kind, Vec<String>) {
    match s.kind {
        Kind::Ordering => (s.kind, vec![s.locations[0].clone()]),
        _ => (s.kind, s.locations.clone()),
    }
}

/// The failing states exhaustive attributes to `s` as their own (not grouped) cause.
fn own_states(s: &Static, run: &Run) -> Vec<(StateHash, Provenance)> {
    let failing: Vec<(&Probe, Verdict)> = run
        .probes
        .iter()
        .filter_map(|p| run.verdict(p.state).filter(|v| !v.pass).map(|v| (p, v)))
        .collect();
    let causes = intact_report::minimal_causes(&failing);
    let call = s.calls[0].index;
    failing
        .iter()
        .zip(causes)
        .filter(|((p, _), cause)| match (&p.prov, s.kind) {
            (Provenance::Reorder { a, .. }, Kind::Ordering) => *a == call && *cause == Some(*a),
            (Provenance::Atomicity { group }, Kind::Atomicity) => *group == call,
            (Provenance::Prefix { .. }, Kind::AcrossCalls) => true,
            _ => false,
        })
        .map(|((p, _), _)| (run.hash(p), p.prov.clone()))
        .collect()
}

/// A provenance without its dropped units: (kind, call).
fn shape(p: &Provenance) -> (&'static str, usize) {
    match p {
        Provenance::Prefix { .. } => ("prefix", 0),
        Provenance::Atomicity { group } => ("atomicity", *group),
        Provenance::Reorder { a, .. } => ("reorder", *a),
    }
}

/// Why the default strategy builds none of a vulnerability's own failing states.
/// None when it is a shape alice builds (a test failure: alice must have found it).
fn reason(prog: &Program, alice: &Run, states: &[(StateHash, Provenance)]) -> Option<String> {
    let (_, prov) = &states[0];
    Some(match prov {
        Provenance::Atomicity { group } if alice.excluded[*group] => {
            "call inside an across-calls atomic group (alice skips it)".into()
        }
        Provenance::Atomicity { .. } => {
            "a call partly persisted in a way alice's per-call states do not build (it builds three per unit, or ALICE's chunkings)".into()
        }
        Provenance::Reorder { a, b, .. } if alice.excluded[*a] || alice.excluded[*b] => {
            "call inside an across-calls atomic group (alice skips it)".into()
        }
        Provenance::Reorder { a, .. }
            if !prog.calls[*a]
                .micros
                .clone()
                .any(|i| prog.micros[i].has_effect()) =>
        {
            "the first call lost changes nothing itself (a sync): alice reorders only calls with an effect".into()
        }
        Provenance::Reorder { a, b, dropped } => {
            let (pair, micro) = alice_drop_sets(prog, *a, *b);
            if dropped.ones().eq(pair.ones()) || dropped.ones().eq(micro.ones()) {
                return None; // a shape alice builds: it must have found it
            }
            let calls: BTreeSet<usize> = dropped
                .ones()
                .map(|u| {
                    prog.calls
                        .iter()
                        .position(|c| c.units.contains(&u))
                        .expect("every unit belongs to a call")
                })
                .collect();
            let partial = calls
                .iter()
                .filter(|&&g| prog.calls[g].units.clone().any(|u| !dropped.contains(u)))
                .count();
            format!(
                "two deviations in one state: {} calls lose units ({partial} of them partly), not one call and what must follow it, nor one call's unneeded part",
                calls.len(),
            )
        }
        Provenance::Prefix { .. } => return None, // always built
    })
}

/// The drop sets of alice's two reorder states for (a, b): a and every call that must
/// follow it (Explorer::reorderings), and a's units no call up to b needs
/// (Explorer::micro_reorderings). Re-derived here from the ordering closure.
fn alice_drop_sets(prog: &Program, a: usize, b: usize) -> (FixedBitSet, FixedBitSet) {
    let nu = prog.units.len();
    let mut pair = FixedBitSet::with_capacity(nu);
    pair.extend(prog.calls[a].units.clone());
    for g in a + 1..=b {
        if prog.call_follows(g, &pair) {
            pair.extend(prog.calls[g].units.clone());
        }
    }
    let mut micro = FixedBitSet::with_capacity(nu);
    micro.extend(prog.calls[a].units.clone().filter(|&x| {
        !(a + 1..=b).any(|g| {
            prog.calls[g]
                .units
                .clone()
                .any(|u| prog.preds[u].contains(x))
        })
    }));
    (pair, micro)
}

/// Counts of the comparison, for the summary.
#[derive(Default)]
struct Tally {
    compared: usize,
    cut: usize,
    misses: BTreeMap<String, usize>,
}

fn compare(acts: &[Act], tally: &RefCell<Tally>) -> Result<(), TestCaseError> {
    let (ops, blob, initial, _) = protocol(acts);
    if ops.is_empty() {
        return Ok(());
    }
    let chk = Checker::new(&initial, &ops, &blob);
    for apm in Apm::builtins() {
        let prog = Program::build(&apm, &ops, &initial, blob.len() as u64).unwrap();
        let universe = CrashFs::universe(&initial, &ops).unwrap();
        let exp = Explorer::new(&prog, &ops, &blob, universe).unwrap();
        let Some(ex) = exhaustive(&exp, &chk) else {
            tally.borrow_mut().cut += 1;
            continue;
        };
        let al = alice(&exp, &chk);
        let found: BTreeSet<_> = statics(&prog, &ops, &al).iter().map(key).collect();
        tally.borrow_mut().compared += 1;
        for s in statics(&prog, &ops, &ex) {
            if found.contains(&key(&s)) {
                continue;
            }
            let own = own_states(&s, &ex);
            prop_assert!(
                !own.is_empty(),
                "{}: {} has no state of its own",
                apm.name,
                s.title
            );
            // Alice built one of these states the very same way (the same drop set): then
            // its minimal cause is the same, and alice must have reported it.
            let same_shape = own.iter().any(|(h, prov)| {
                al.probes
                    .iter()
                    .any(|p| al.hash(p) == *h && p.prov == *prov)
            });
            prop_assert!(
                !same_shape,
                "{}: exhaustive finds `{}` ({:?}); alice builds one of its failing states but does not report it. Protocol: {:?}",
                apm.name,
                s.title,
                s.categories,
                acts
            );
            let why = match own
                .iter()
                .find_map(|(h, prov)| al.probes.iter().find(|p| al.hash(p) == *h).map(|p| (p, prov)))
            {
                Some((p, prov)) if shape(&p.prov) == shape(prov) => {
                    "the same content, built by alice in the same shape from another drop set \
                     (several drop sets leave this content), and reported under that set's cause"
                        .into()
                }
                Some((p, _)) => format!(
                    "the same content, built by alice as another shape ({}) and reported as that",
                    shape(&p.prov).0
                ),
                None => match reason(&prog, &al, &own) {
                    Some(why) => why,
                    None => {
                        return Err(TestCaseError::fail(format!(
                            "{}: exhaustive finds `{}` ({:?}) in a state of a shape alice builds ({:?}), alice does not. Protocol: {:?}",
                            apm.name, s.title, s.categories, own[0].1, acts
                        )))
                    }
                },
            };
            *tally
                .borrow_mut()
                .misses
                .entry(format!("{}: {why}", apm.name))
                .or_default() += 1;
        }
    }
    Ok(())
}

#[test]
fn alice_finds_what_exhaustive_finds_or_says_why_not() {
    let cases = std::env::var("INTACT_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(160);
    // A fixed seed by default, so a CI run is reproducible (the known gap below was found
    // by a random one); INTACT_DIFF_SEED picks another, PROPTEST_RNG_SEED=random any.
    let seed = std::env::var("INTACT_DIFF_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let mut config = ProptestConfig {
        cases,
        ..ProptestConfig::default()
    };
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        config.rng_seed = proptest::test_runner::RngSeed::Fixed(seed);
    }
    let mut runner = TestRunner::new(config);
    let tally = RefCell::new(Tally::default());
    let protocols = proptest::collection::vec(act_over(3, 5000), 1..13);
    if let Err(e) = runner.run(&protocols, |acts| compare(&acts, &tally)) {
        panic!("{e}");
    }
    let t = tally.into_inner();
    eprintln!(
        "differential: {cases} protocols, {} (protocol, APM) pairs compared, {} left out (exhaustive cut at {MAX_EXHAUSTIVE_STATES} states); exhaustive-only static vulnerabilities, out of alice's reach, by reason: {:#?}",
        t.compared, t.cut, t.misses
    );
    assert!(t.compared > 0, "no case was compared");
}

/// Issue 27's example as a fixed case: under ext3-w a file appended and renamed to the name
/// the workload leaves can persist with the rename and the size but not the data; alice
/// reaches it by micro-operation reordering (without it, this case fails).
#[test]
fn append_then_rename_under_ext3_w() {
    let acts = [Act::Create(0), Act::Append(0, 10), Act::Rename(0, 1)];
    let tally = RefCell::new(Tally::default());
    compare(&acts, &tally).unwrap_or_else(|e| panic!("{e}"));
    let t = tally.into_inner();
    assert!(t.misses.is_empty(), "{:#?}", t.misses);
    assert_eq!(t.compared, Apm::builtins().len());
}

/// A case the random search found (seed-dependent, so rare in CI's 160 protocols): under
/// ext3-w, for `create c; mkdir a; append c; output; rename c -> a`, one crash state (the
/// same content) is left by two drop sets of the same shape (call 1 lost, with what follows
/// it): one whose minimal cause is call 1 (it must reach disk before the output), one whose
/// minimal cause is call 2. Exhaustive builds both and blames both calls; alice builds the
/// second and reports the state under call 2. The failing state is reported either way; which
/// call it is blamed on depends on the drop set a strategy happens to build, since the
/// content alone does not say which units were lost. Listed as that reason.
#[test]
fn the_same_state_from_another_drop_set_is_a_named_miss() {
    let acts = [
        Act::Create(2),
        Act::Mkdir(0),
        Act::Append(2, 1),
        Act::Output,
        Act::Rename(2, 0),
    ];
    let tally = RefCell::new(Tally::default());
    compare(&acts, &tally).unwrap_or_else(|e| panic!("{e}"));
    let t = tally.into_inner();
    let named: Vec<_> = t.misses.keys().collect();
    assert!(
        named
            .iter()
            .any(|k| k.starts_with("ext3-w: ") && k.contains("from another drop set")),
        "{named:#?}"
    );
}
