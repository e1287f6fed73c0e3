//! Which crash states to build (thesis §3.3): ALICE's default strategy (prefixes, per-call
//! atomicity, pairwise reordering), exhaustive enumeration of constraint-closed sets, and
//! seeded random sampling.

use crate::crashfs::{CrashFs, CrashFsError};
use fixedbitset::FixedBitSet;
use intact_apm::{Micro, Program};
use intact_model::op::{Data, LogicalOp, Op};
use rand::{Rng, SeedableRng};

/// How a crash state was constructed; the report turns failing states into dynamic
/// vulnerabilities from this.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Provenance {
    /// The first `calls` system calls persisted, nothing after (atomicity across calls).
    Prefix { calls: usize },
    /// Calls before `group` persisted, `group` (index into Program::calls) partially.
    Atomicity { group: usize },
    /// Every call up to `b` persisted except the units in `dropped`: all of `a` and what
    /// must follow it (pair reordering), only the units of `a` that no call up to `b`
    /// needs (micro-operation reordering), or any closed set (exhaustive, random), where
    /// `a` is the first call not fully persisted.
    Reorder {
        a: usize,
        b: usize,
        dropped: Dropped,
    },
}

// The units a state leaves out among those of calls `..=b` (its horizon): what the report
// compares to find a failure's minimal cause.
pub use crate::dropped::Dropped;

/// Emits a state; returns false to stop the exploration.
pub type Emit<'e> = dyn FnMut(Provenance, CrashFs, String) -> Result<bool, CrashFsError> + 'e;

pub struct Explorer<'a> {
    pub prog: &'a Program,
    pub ops: &'a [Op],
    blob: &'a [u8],
    /// checkpoints[i]: the state after the first i × [`CHECKPOINT_STRIDE_CALLS`] call
    /// groups; the prefixes between are rebuilt from the checkpoint before them.
    checkpoints: Vec<CrashFs>,
    /// The state after every call group.
    full: CrashFs,
}

const MAX_SUBSET_UNITS: usize = 12;

/// Calls between kept prefix states. Keeping every prefix (issue 29) cost 2.3× the written
/// data at 10,000 appends: a kept state holds its own copy of the chunk an append was
/// filling, so a 16 KiB chunk stayed in 4, 8, 12 and 16 KiB versions. Kept every 16 calls,
/// a partly filled chunk is kept about once in 16 calls; rebuilding a prefix applies at
/// most 15 calls, and the phases, which visit prefixes in order, walk one [`Cursor`].
pub const CHECKPOINT_STRIDE_CALLS: usize = 16;

impl<'a> Explorer<'a> {
    pub fn new(
        prog: &'a Program,
        ops: &'a [Op],
        blob: &'a [u8],
        universe: CrashFs,
    ) -> Result<Explorer<'a>, CrashFsError> {
        let n = prog.calls.len();
        let mut checkpoints = Vec::with_capacity(n / CHECKPOINT_STRIDE_CALLS + 1);
        let mut cur = universe;
        for (g, c) in prog.calls.iter().enumerate() {
            if g.is_multiple_of(CHECKPOINT_STRIDE_CALLS) {
                checkpoints.push(cur.clone());
            }
            for i in c.micros.clone() {
                cur.apply(&prog.micros[i].micro, blob)?;
            }
        }
        if checkpoints.is_empty() {
            checkpoints.push(cur.clone()); // no calls: prefix 0 is the full state
        }
        assert_eq!(
            checkpoints.len(),
            n.max(1).div_ceil(CHECKPOINT_STRIDE_CALLS)
        );
        Ok(Explorer {
            prog,
            ops,
            blob,
            checkpoints,
            full: cur,
        })
    }

    /// The state with every operation applied (the workload's final directory).
    pub fn full(&self) -> &CrashFs {
        &self.full
    }

    /// The state after the first `k` call groups (all of them past the last).
    pub fn prefix_state(&self, k: usize) -> Result<CrashFs, CrashFsError> {
        let mut c = Cursor::new(self);
        c.advance_to(k)?;
        Ok(c.state)
    }

    /// Every prefix state, 0..=N call groups, built in one walk (work units' delta bases).
    pub fn prefix_states(&self) -> Result<Vec<CrashFs>, CrashFsError> {
        let n = self.prog.calls.len();
        let mut c = Cursor::new(self);
        let mut out = Vec::with_capacity(n + 1);
        for k in 0..=n {
            out.push(c.advance_to(k)?.clone());
        }
        assert_eq!(out.len(), n + 1, "one state per prefix");
        Ok(out)
    }

    /// Applies call group `g` whole.
    fn apply_call(&self, fs: &mut CrashFs, g: usize) -> Result<(), CrashFsError> {
        for i in self.prog.calls[g].micros.clone() {
            fs.apply(&self.prog.micros[i].micro, self.blob)?;
        }
        Ok(())
    }

    fn apply_unit(&self, fs: &mut CrashFs, u: usize) -> Result<(), CrashFsError> {
        for i in self.prog.units[u].clone() {
            fs.apply(&self.prog.micros[i].micro, self.blob)?;
        }
        Ok(())
    }

    fn call_has_effect(&self, g: usize) -> bool {
        self.prog.calls[g]
            .micros
            .clone()
            .any(|i| self.prog.micros[i].has_effect())
    }

    /// Phase 1: one state per prefix of system calls, 0..=N.
    pub fn prefixes(&self, emit: &mut Emit) -> Result<(), CrashFsError> {
        let n = self.prog.calls.len();
        let mut cur = Cursor::new(self);
        for k in 0..=n {
            if k > 0 && k < n && !self.call_has_effect(k - 1) {
                continue; // same state as the previous prefix
            }
            if !emit(
                Provenance::Prefix { calls: k },
                cur.advance_to(k)?.clone(),
                format!("first {k} of {} calls", self.prog.calls.len()),
            )? {
                break;
            }
        }
        Ok(())
    }

    /// Phase 2: intermediate states of each call not in `excluded`.
    pub fn atomicity(&self, excluded: &[bool], emit: &mut Emit) -> Result<(), CrashFsError> {
        let mut cur = Cursor::new(self);
        for (g, call) in self.prog.calls.iter().enumerate() {
            if excluded.get(g).copied().unwrap_or(false) {
                continue;
            }
            let prov = Provenance::Atomicity { group: g };
            if self.prog.divisible {
                // Byte-granular APM: chunked states per operation (thesis §3.3).
                let mut base = cur.advance_to(g)?.clone();
                for o in call.ops.clone() {
                    let variants = self.op_variants(o);
                    for (desc, micros) in variants {
                        let mut s = base.clone();
                        for m in &micros {
                            s.apply(m, self.blob)?;
                        }
                        if !emit(prov.clone(), s, format!("{}; {desc}", self.op_label(o)))? {
                            return Ok(());
                        }
                    }
                    for i in self.prog.op_micros[o].clone() {
                        base.apply(&self.prog.micros[i].micro, self.blob)?;
                    }
                }
            } else {
                let units: Vec<usize> = call.units.clone().collect();
                if units.len() < 2 {
                    continue;
                }
                let base = cur.advance_to(g)?;
                for (desc, subset) in self.unit_subsets(&units) {
                    let mut s = base.clone();
                    for &u in &subset {
                        self.apply_unit(&mut s, u)?;
                    }
                    if !emit(prov.clone(), s, format!("{}; {desc}", self.call_label(g)))? {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    fn op_label(&self, o: usize) -> String {
        let op = &self.ops[o];
        format!(
            "op {} {}({})",
            op.id,
            op.syscall,
            op.path.as_deref().unwrap_or("")
        )
    }
    fn call_label(&self, g: usize) -> String {
        self.op_label(self.prog.calls[g].ops.start)
    }

    /// Subsets of a call's units closed under the constraints within the call: all of them
    /// when few (directory operations), otherwise ALICE's three per unit.
    fn unit_subsets(&self, units: &[usize]) -> Vec<(String, Vec<usize>)> {
        let n = units.len();
        let mut out = Vec::new();
        let closed = |sel: &[usize]| {
            sel.iter().all(|&u| {
                units
                    .iter()
                    .filter(|&&v| v < u && self.prog.preds[u].contains(v))
                    .all(|v| sel.contains(v))
            })
        };
        let mut push = |desc: String, sel: Vec<usize>| {
            if !sel.is_empty()
                && sel.len() < n
                && closed(&sel)
                && !out.iter().any(|(_, s): &(String, Vec<usize>)| *s == sel)
            {
                out.push((desc, sel));
            }
        };
        if n <= MAX_SUBSET_UNITS && self.units_are_dir_ops(units) {
            for mask in 1u32..(1 << n) - 1 {
                let sel: Vec<usize> = (0..n)
                    .filter(|i| mask & (1 << i) != 0)
                    .map(|i| units[i])
                    .collect();
                push(format!("micro-op subset {mask:#b} of {n}"), sel);
            }
        } else {
            for i in 0..n {
                push(format!("only unit {} of {n}", i + 1), vec![units[i]]);
                push(
                    format!("all but unit {} of {n}", i + 1),
                    units.iter().copied().filter(|&u| u != units[i]).collect(),
                );
                push(format!("units 1..={} of {n}", i + 1), units[..=i].to_vec());
            }
        }
        out
    }

    fn units_are_dir_ops(&self, units: &[usize]) -> bool {
        units.iter().any(|&u| {
            self.prog.units[u].clone().any(|i| {
                matches!(
                    self.prog.micros[i].micro,
                    Micro::CreateEntry { .. } | Micro::DeleteEntry { .. }
                )
            })
        })
    }

    /// Intermediate states of one operation under a byte-granular APM.
    fn op_variants(&self, o: usize) -> Vec<(String, Vec<Micro>)> {
        let op = &self.ops[o];
        let mut out: Vec<(String, Vec<Micro>)> = Vec::new();
        let mut push = |desc: String, v: Vec<Micro>| {
            if !out.iter().any(|(_, w)| *w == v) {
                out.push((desc, v));
            }
        };
        match &op.op {
            LogicalOp::Overwrite {
                inode,
                offset,
                count,
                data,
            } => {
                for (cname, parts) in chunkings(*offset, offset + count) {
                    let w = |p: &(u64, u64)| Micro::Write {
                        inode: *inode,
                        offset: p.0,
                        data: data.slice(p.0 - offset, p.1 - p.0),
                    };
                    three_states(&cname, &parts, &mut |d, sel| {
                        push(d, sel.iter().map(w).collect())
                    });
                }
            }
            LogicalOp::Append {
                inode,
                old_size,
                new_size,
                data,
            } => {
                self.grow_variants(*inode, *old_size, *new_size, Some(*data), &mut push);
            }
            LogicalOp::Truncate {
                inode,
                old_size,
                new_size,
            } if new_size > old_size => {
                self.grow_variants(*inode, *old_size, *new_size, None, &mut push);
            }
            LogicalOp::Truncate {
                inode,
                old_size,
                new_size,
            } if new_size < old_size => {
                for (cname, parts) in chunkings(*new_size, *old_size) {
                    for p in parts.iter().skip(1) {
                        push(
                            format!("{cname}: size {}", p.0),
                            vec![Micro::SetSize {
                                inode: *inode,
                                size: p.0,
                            }],
                        );
                    }
                }
            }
            op if op.is_namespace() => {
                // Every subset of the entry operations, with the truncation of a last link
                // none, half, or all done (thesis: selective states for the truncate).
                let r = self.prog.op_micros[o].clone();
                let entries: Vec<&Micro> = r
                    .clone()
                    .map(|i| &self.prog.micros[i].micro)
                    .filter(|m| matches!(m, Micro::CreateEntry { .. } | Micro::DeleteEntry { .. }))
                    .collect();
                let truncs: Vec<&Micro> = r
                    .clone()
                    .map(|i| &self.prog.micros[i].micro)
                    .filter(|m| matches!(m, Micro::SetSize { .. }))
                    .collect();
                let tchoices: Vec<usize> = if truncs.is_empty() {
                    vec![0]
                } else {
                    let mut v = vec![0, truncs.len().div_ceil(2), truncs.len()];
                    v.dedup();
                    v
                };
                let n = entries.len().min(MAX_SUBSET_UNITS);
                // The file loses its data only once its last name is gone (an APM rule; see
                // `mandatory` in intact-apm): no truncation without that entry's removal.
                let freed = truncs.first().and_then(|m| match m {
                    Micro::SetSize { inode, .. } => Some(*inode),
                    _ => None,
                });
                for mask in 0u32..(1 << n) {
                    let removed = |k: usize| {
                        mask & (1 << k) != 0
                            && matches!(entries[k], Micro::DeleteEntry { inode, .. } if Some(*inode) == freed)
                    };
                    let name_gone = (0..n).any(removed);
                    for &t in &tchoices {
                        if (mask == 0 && t == 0)
                            || (mask == (1 << n) - 1 && t == truncs.len())
                            || (t > 0 && !name_gone)
                        {
                            continue;
                        }
                        // Keep program order: entry deletions of a replaced file come first.
                        let mut v = Vec::new();
                        let mut k = 0;
                        let mut tk = 0;
                        for i in r.clone() {
                            let m = &self.prog.micros[i].micro;
                            match m {
                                Micro::CreateEntry { .. } | Micro::DeleteEntry { .. } => {
                                    if k < n && mask & (1 << k) != 0 {
                                        v.push(m.clone());
                                    }
                                    k += 1;
                                }
                                Micro::SetSize { .. } => {
                                    if tk < t {
                                        v.push(m.clone());
                                    }
                                    tk += 1;
                                }
                                _ => {}
                            }
                        }
                        push(
                            format!("entries {mask:#b} of {n}, truncation {t}/{}", truncs.len()),
                            v,
                        );
                    }
                }
            }
            _ => {}
        }
        out
    }

    fn grow_variants(
        &self,
        inode: u64,
        old: u64,
        new: u64,
        data: Option<Data>,
        push: &mut dyn FnMut(String, Vec<Micro>),
    ) {
        let zeros = self.prog.append_zeros || data.is_none();
        let full = |p: &(u64, u64)| {
            let mut v = vec![Micro::SetSize { inode, size: p.1 }];
            if zeros {
                v.push(Micro::Write {
                    inode,
                    offset: p.0,
                    data: Data::Zeros { zeros: p.1 - p.0 },
                });
            }
            if let Some(d) = data {
                v.push(Micro::Write {
                    inode,
                    offset: p.0,
                    data: d.slice(p.0 - old, p.1 - p.0),
                });
            }
            v
        };
        for (cname, parts) in chunkings(old, new) {
            three_states(&cname, &parts, &mut |d, sel| {
                push(d, sel.iter().flat_map(full).collect())
            });
            for (i, p) in parts.iter().enumerate() {
                let mut done: Vec<Micro> = parts[..i].iter().flat_map(full).collect();
                done.push(Micro::SetSize { inode, size: p.1 });
                push(format!("{cname}: {i} earlier part(s) done, part {} of {} size change only (garbage)", i + 1, parts.len()), done.clone());
                if zeros && data.is_some() {
                    done.push(Micro::Write {
                        inode,
                        offset: p.0,
                        data: Data::Zeros { zeros: p.1 - p.0 },
                    });
                    push(
                        format!(
                            "{cname}: {i} earlier part(s) done, part {} of {} zeros only",
                            i + 1,
                            parts.len()
                        ),
                        done,
                    );
                }
            }
        }
    }

    /// Phase 3: for every pair of calls A < B (neither excluded), every call up to B except
    /// A and what must follow A; skipped when B itself must follow A.
    pub fn reorderings(&self, excluded: &[bool], emit: &mut Emit) -> Result<(), CrashFsError> {
        let n = self.prog.calls.len();
        let nu = self.prog.units.len();
        let ex = |g: usize| excluded.get(g).copied().unwrap_or(false);
        let mut cur = Cursor::new(self);
        for a in 0..n {
            if ex(a) || !self.call_has_effect(a) {
                continue;
            }
            // The same set twice: as wide bits for the ordering test, by span for the states.
            let mut removed = FixedBitSet::with_capacity(nu);
            removed.extend(self.prog.calls[a].units.clone());
            let mut dropped: Dropped = self.prog.calls[a].units.clone().collect();
            let mut running = cur.advance_to(a)?.clone();
            for b in a + 1..n {
                let units = self.prog.calls[b].units.clone();
                if self.prog.call_follows(b, &removed) {
                    removed.extend(units.clone());
                    dropped.extend(units);
                    continue;
                }
                for u in units {
                    self.apply_unit(&mut running, u)?;
                }
                if ex(b) || !self.call_has_effect(b) {
                    continue;
                }
                let desc = format!(
                    "calls 1..={} without {} ({} later calls dropped with it)",
                    b + 1,
                    self.call_label(a),
                    dropped.len() - self.prog.calls[a].units.len()
                );
                debug_assert_eq!(dropped.len(), removed.count_ones(..), "one set, two forms");
                let prov = Provenance::Reorder {
                    a,
                    b,
                    dropped: dropped.clone(),
                };
                if !emit(prov, running.clone(), desc)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Phase 3b, micro-operation reordering: for every pair of calls A < B (neither
    /// excluded), every call up to B persisted, and of A only the units some call after A
    /// (up to B) needs; the rest of A is dropped. The pair walk drops A whole and with it
    /// every call that needs any part of A, so it never builds, e.g., under ext3-w an
    /// append whose size change persisted (a later rename needs it) but not its data.
    /// Emitted only when the dropped part is a proper, non-empty part of A with an effect
    /// (all of A is the pair walk's state). At most one state per pair, and at most
    /// `max_states`: returns false when that bound cut the phase short.
    pub fn micro_reorderings(
        &self,
        excluded: &[bool],
        max_states: usize,
        emit: &mut Emit,
    ) -> Result<bool, CrashFsError> {
        let n = self.prog.calls.len();
        let ex = |g: usize| excluded.get(g).copied().unwrap_or(false);
        let mut emitted = 0usize;
        let mut cur = Cursor::new(self);
        for a in 0..n {
            let a_units = self.prog.calls[a].units.clone();
            if ex(a) || a_units.len() < 2 || !self.call_has_effect(a) {
                continue; // a single unit is kept or dropped whole: the pair walk's case
            }
            let mut walk = MicroWalk::new(self, a, cur.advance_to(a)?.clone());
            for b in a + 1..n {
                if !walk.advance(self, b)? {
                    break; // every effect of A is needed from here on
                }
                if ex(b) || !self.call_has_effect(b) || !walk.partial {
                    continue;
                }
                if emitted >= max_states {
                    return Ok(false);
                }
                emitted += 1;
                let desc = format!(
                    "calls 1..={} with only the micro-ops of {} that later calls need ({} of its {} units dropped)",
                    b + 1,
                    self.call_label(a),
                    walk.dropped.len(),
                    a_units.len()
                );
                let prov = Provenance::Reorder {
                    a,
                    b,
                    dropped: walk.dropped.clone(),
                };
                if !emit(prov, walk.state.clone(), desc)? {
                    return Ok(true);
                }
            }
        }
        Ok(true)
    }

    /// Builds the state of an arbitrary closed set of units.
    pub fn build_set(&self, set: &FixedBitSet) -> Result<CrashFs, CrashFsError> {
        let first_missing = (0..self.prog.units.len())
            .find(|u| !set.contains(*u))
            .unwrap_or(self.prog.units.len());
        let k = self
            .prog
            .calls
            .iter()
            .take_while(|c| c.units.end <= first_missing)
            .count();
        let mut s = self.prefix_state(k)?;
        let from = self
            .prog
            .calls
            .get(k)
            .map(|c| c.units.start)
            .unwrap_or(self.prog.units.len());
        for u in set.ones().filter(|u| *u >= from) {
            self.apply_unit(&mut s, u)?;
        }
        Ok(s)
    }

    /// The shape of a set of units, as the report understands it.
    pub fn classify(&self, set: &FixedBitSet) -> Provenance {
        let full = |g: usize| self.prog.calls[g].units.clone().all(|u| set.contains(u));
        let any = |g: usize| self.prog.calls[g].units.clone().any(|u| set.contains(u));
        let Some(b) = (0..self.prog.calls.len()).rev().find(|g| any(*g)) else {
            return Provenance::Prefix { calls: 0 };
        };
        match (0..b).find(|g| !full(*g)) {
            Some(a) => {
                let horizon = self.prog.calls[b].units.end;
                let dropped: Dropped = (0..horizon).filter(|u| !set.contains(*u)).collect();
                Provenance::Reorder { a, b, dropped }
            }
            None if full(b) => Provenance::Prefix { calls: b + 1 },
            None => Provenance::Atomicity { group: b },
        }
    }

    /// Every constraint-closed set of units (depth first), until `emit` says stop.
    /// Returns true when the enumeration completed.
    pub fn exhaustive(&self, emit: &mut Emit) -> Result<bool, CrashFsError> {
        let nu = self.prog.units.len();
        let mut stack: Vec<(usize, FixedBitSet, CrashFs)> = vec![(
            0,
            FixedBitSet::with_capacity(nu),
            self.checkpoints[0].clone(),
        )];
        while let Some((u, set, state)) = stack.pop() {
            if u == nu {
                let prov = self.classify(&set);
                if !emit(prov, state, describe_set(&set))? {
                    return Ok(false);
                }
                continue;
            }
            // Exclude first on the stack, so that include (closer to the workload) is explored first.
            stack.push((u + 1, set.clone(), state.clone()));
            if self.prog.preds[u].is_subset(&set) {
                let mut set2 = set;
                set2.insert(u);
                let mut s2 = state;
                self.apply_unit(&mut s2, u)?;
                stack.push((u + 1, set2, s2));
            }
        }
        Ok(true)
    }

    /// `samples` random closed sets: a crash point uniform over the units, then each earlier
    /// unit persisted with a per-sample probability in [0.5, 1) when its constraints allow.
    pub fn random(&self, samples: u64, seed: u64, emit: &mut Emit) -> Result<(), CrashFsError> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let nu = self.prog.units.len();
        for _ in 0..samples {
            let t = rng.random_range(0..=nu);
            let p: f64 = rng.random_range(0.5..1.0);
            let mut set = FixedBitSet::with_capacity(nu);
            for u in 0..t {
                if self.prog.preds[u].is_subset(&set) && rng.random_bool(p) {
                    set.insert(u);
                }
            }
            let s = self.build_set(&set)?;
            if !emit(self.classify(&set), s, describe_set(&set))? {
                break;
            }
        }
        Ok(())
    }
}

/// The prefix states in increasing order of calls, each built from the one before, or from
/// the checkpoint before it when that is closer (the phases visit calls in order).
struct Cursor<'e, 'a> {
    exp: &'e Explorer<'a>,
    /// The call groups `state` has applied.
    calls: usize,
    state: CrashFs,
}

impl<'e, 'a> Cursor<'e, 'a> {
    fn new(exp: &'e Explorer<'a>) -> Cursor<'e, 'a> {
        Cursor {
            exp,
            calls: 0,
            state: exp.checkpoints[0].clone(),
        }
    }

    /// Moves to the state after the first `k` call groups (all of them past the last);
    /// a cursor never moves back.
    fn advance_to(&mut self, k: usize) -> Result<&CrashFs, CrashFsError> {
        let n = self.exp.prog.calls.len();
        let k = k.min(n);
        assert!(
            k >= self.calls,
            "a cursor moves forwards: {} to {k}",
            self.calls
        );
        if k == n {
            self.state = self.exp.full.clone();
            self.calls = n;
            return Ok(&self.state);
        }
        let checkpoint = k / CHECKPOINT_STRIDE_CALLS;
        if checkpoint * CHECKPOINT_STRIDE_CALLS > self.calls {
            self.state = self.exp.checkpoints[checkpoint].clone();
            self.calls = checkpoint * CHECKPOINT_STRIDE_CALLS;
        }
        while self.calls < k {
            self.exp.apply_call(&mut self.state, self.calls)?;
            self.calls += 1;
        }
        assert_eq!(self.calls, k, "the cursor stops at the prefix asked for");
        Ok(&self.state)
    }
}

/// The micro-operation reordering walk of one call A over the calls after it: which of
/// A's units the calls so far need, and the state of every call so far without the rest.
struct MicroWalk {
    a: usize,
    /// Units of A no call after A (so far) needs: left out of `state`.
    dropped: Dropped,
    /// Whether `dropped` is a proper part of A (not all of A) with an effect.
    partial: bool,
    /// The state before A (what a rebuild starts from).
    before: CrashFs,
    state: CrashFs,
}

impl MicroWalk {
    /// `before`: the state after the calls before A.
    fn new(exp: &Explorer, a: usize, before: CrashFs) -> MicroWalk {
        let dropped: Dropped = exp.prog.calls[a].units.clone().collect();
        MicroWalk {
            a,
            dropped,
            partial: false,
            state: before.clone(),
            before,
        }
    }

    /// Adds call `b`: keeps the units of A that `b` needs (rebuilding the state when that
    /// changes) and applies `b`. Returns false when no unit of A with an effect is left
    /// to drop.
    fn advance(&mut self, exp: &Explorer, b: usize) -> Result<bool, CrashFsError> {
        assert!(b > self.a, "call {b} does not follow call {}", self.a);
        let needed: Vec<usize> = self
            .dropped
            .ones()
            .filter(|&x| {
                exp.prog.calls[b]
                    .units
                    .clone()
                    .any(|u| exp.prog.preds[u].contains(x))
            })
            .collect();
        let effect = |u: usize| {
            exp.prog.units[u]
                .clone()
                .any(|i| exp.prog.micros[i].has_effect())
        };
        if !needed.is_empty() {
            for x in &needed {
                self.dropped.remove(*x);
            }
            if !self.dropped.ones().any(effect) {
                return Ok(false);
            }
            // Rebuild: the prefix before A, A's kept units, then calls A+1..b.
            self.state = self.before.clone();
            for u in exp.prog.calls[self.a].units.clone() {
                if !self.dropped.contains(u) {
                    exp.apply_unit(&mut self.state, u)?;
                }
            }
            for g in self.a + 1..b {
                for u in exp.prog.calls[g].units.clone() {
                    exp.apply_unit(&mut self.state, u)?;
                }
            }
        }
        for u in exp.prog.calls[b].units.clone() {
            exp.apply_unit(&mut self.state, u)?;
        }
        let a_units = exp.prog.calls[self.a].units.len();
        let n_dropped = self.dropped.len();
        assert!(n_dropped > 0 && n_dropped <= a_units);
        self.partial = n_dropped < a_units;
        Ok(true)
    }
}

/// A set of units as ranges, e.g. "units 0-11,13-20".
pub fn describe_set(set: &FixedBitSet) -> String {
    let mut parts = Vec::new();
    let mut it = set.ones().peekable();
    while let Some(a) = it.next() {
        let mut b = a;
        while it.peek() == Some(&(b + 1)) {
            b = it.next().unwrap();
        }
        parts.push(if a == b {
            format!("{a}")
        } else {
            format!("{a}-{b}")
        });
    }
    if parts.is_empty() {
        "no units".into()
    } else {
        format!("units {}", parts.join(","))
    }
}

/// The three chunkings of thesis §3.3 for a byte-granular APM: 4 KiB-aligned, 512 B-aligned,
/// and three equal parts.
fn chunkings(lo: u64, hi: u64) -> Vec<(String, Vec<(u64, u64)>)> {
    let mut out = vec![
        (
            "4K chunks".to_string(),
            intact_apm::program::pieces(lo, hi, 4096),
        ),
        (
            "512B chunks".to_string(),
            intact_apm::program::pieces(lo, hi, 512),
        ),
    ];
    let len = hi - lo;
    if len >= 3 {
        let a = lo + len / 3;
        let b = lo + 2 * len / 3;
        out.push(("thirds".to_string(), vec![(lo, a), (a, b), (b, hi)]));
    }
    out
}

/// ALICE's three states per part: only it, all but it, all up to it.
fn three_states(cname: &str, parts: &[(u64, u64)], f: &mut dyn FnMut(String, Vec<(u64, u64)>)) {
    let m = parts.len();
    for i in 0..m {
        if m > 1 {
            f(
                format!("{cname}: only part {} of {m}", i + 1),
                vec![parts[i]],
            );
            f(
                format!("{cname}: all but part {} of {m}", i + 1),
                parts
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, p)| *p)
                    .collect(),
            );
        }
        if i + 1 < m {
            f(
                format!("{cname}: parts 1..={} of {m}", i + 1),
                parts[..=i].to_vec(),
            );
        }
    }
}
