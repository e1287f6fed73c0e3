//! From checker verdicts to vulnerabilities (thesis 004 §3.4): failing crash states become
//! dynamic vulnerabilities (a call, a group of calls, or a pair of calls, with the Table
//! 4.2 category), grouped into static vulnerabilities by the source location of the calls.
//! The JSON form is documented in `docs/report.md` (schema "intact-report/1").

use intact_apm::{Micro, Program};
use intact_explore::{Dropped, Provenance};
use intact_model::op::{LogicalOp, Op};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

pub const SCHEMA: &str = "intact-report/1";

pub mod html;
pub mod junit;
pub mod sarif;

/// What the renderers of other formats (HTML, SARIF, JUnit) work from: the report as JSON
/// (the schema of docs/report.md, whether just computed or read from a saved file), the
/// bundle's logical operations when the bundle is still there (for protocol diagrams), and
/// a way to read source files named by locations ("file:line:function").
pub struct Context<'a> {
    pub report: &'a serde_json::Value,
    pub ops: Option<&'a [intact_model::op::Op]>,
    pub source: &'a dyn Fn(&str) -> Option<String>,
    /// The source tree's root (absolute, no trailing `/`): SARIF names files under it
    /// relative to `%SRCROOT%`, so code scanning can map them to the repository.
    pub source_root: Option<&'a str>,
}

/// Thesis Table 4.2's classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    AcrossCallsAtomicity,
    AppendTruncateAtomicity,
    OverwriteAtomicity,
    RenameUnlinkAtomicity,
    SafeFileFlush,
    SafeRename,
    OtherOrdering,
    Durability,
}

impl Category {
    pub fn label(&self) -> &'static str {
        match self {
            Category::AcrossCallsAtomicity => "atomicity across system calls",
            Category::AppendTruncateAtomicity => "atomicity: appends and truncates",
            Category::OverwriteAtomicity => "atomicity: single-block/multi-block overwrites",
            Category::RenameUnlinkAtomicity => "atomicity: renames and unlinks",
            Category::SafeFileFlush => "ordering: safe file flush",
            Category::SafeRename => "ordering: safe rename",
            Category::OtherOrdering => "ordering: other",
            Category::Durability => "durability",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Several consecutive calls must persist together.
    AcrossCalls,
    /// One call must persist atomically.
    Atomicity,
    /// Call `a` must reach disk before call `b`.
    Ordering,
}

/// A checker's verdict on one distinct state.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    pub pass: bool,
    pub timeout: bool,
    /// The checker's stderr (or stdout when stderr was empty), trimmed.
    pub message: String,
}

/// A distinct state's number, in the order the run first built it (`INTACT_STATE` is `s`
/// and it). Four bytes: the run keeps one in every probe.
pub type StateNo = u32;

/// One constructed state and how. The run keeps one per state it builds (about a hundred
/// per append of a fsync-every-100 workload), so the state is named by its number, not its
/// 32-byte hash, and the description is a boxed string: no spare capacity (issue 29).
#[derive(Clone, Debug)]
pub struct Probe {
    pub prov: Provenance,
    /// The distinct state it built (probes that built the same contents share it).
    pub state: StateNo,
    pub desc: Box<str>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CallRef {
    /// Index of the call among the calls that produced logical operations (including syncs
    /// and output), in protocol order.
    pub index: usize,
    /// First logical operation of the call (`intact ops` numbering).
    pub op: usize,
    pub syscall: String,
    pub summary: String,
    pub location: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Example {
    /// State id (`INTACT_STATE` of the checker run); a directory of that name under
    /// `--keep-failing` holds the state.
    pub state: String,
    pub description: String,
    pub checker_message: String,
}

/// How durability vulnerabilities become static ones (`intact check --group`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Grouping {
    /// One per missing sync: every call lost before the same output since the last sync,
    /// named by the call after which the sync is needed.
    #[default]
    Sync,
    /// One per call site (the view before issue 27).
    PerCall,
}

impl Grouping {
    pub fn parse(s: &str) -> Option<Grouping> {
        match s {
            "sync" => Some(Grouping::Sync),
            "per-call" => Some(Grouping::PerCall),
            _ => None,
        }
    }
}

/// The sync a durability vulnerability says is missing.
#[derive(Clone, Debug, Serialize)]
pub struct MissingSync {
    /// The last call that changed the file system before the output (and after the last
    /// sync before it): the sync is needed after this call.
    pub after: CallRef,
    /// What to sync: the files the lost calls changed, or for a directory operation its
    /// directory (`.` for the recorded directory).
    pub files: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Dynamic {
    pub apm: String,
    pub kind: Kind,
    pub category: Category,
    pub calls: Vec<CallRef>,
    pub failing_states: usize,
    /// Of `failing_states`, those that drop more than a smaller failing state of this
    /// vulnerability (a superset of its dropped units, with other calls' units) and are
    /// grouped here as their minimal cause rather than reported under their own first call.
    pub grouped_states: usize,
    pub example: Example,
    /// Durability only: the sync that would have kept the promise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_sync: Option<MissingSync>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Static {
    pub id: usize,
    pub kind: Kind,
    pub categories: Vec<Category>,
    /// The representative source locations (one, or two for ordering).
    pub locations: Vec<String>,
    /// APMs under which it shows.
    pub apms: Vec<String>,
    /// Indices into `dynamic`.
    pub dynamic: Vec<usize>,
    pub calls: Vec<CallRef>,
    pub example: Example,
    /// `title()`, kept in the JSON so that readers of the report need not re-derive it.
    pub title: String,
    /// Grouped by missing sync (`--group sync`): the sync, with every file its calls
    /// changed; `calls` lists the lost calls it explains, then the output.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_sync: Option<MissingSync>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ApmStats {
    pub apm: String,
    /// What the APM stands for (its `description`): which real file systems, in which mode.
    pub models: String,
    pub explore: String,
    pub micro_ops: usize,
    pub units: usize,
    pub calls: usize,
    /// States constructed, and how many distinct by content (the ones checked).
    pub constructed: usize,
    pub distinct: usize,
    /// Distinct states first seen under this APM and checked for it (others reused a
    /// verdict from another APM).
    pub checked: usize,
    pub failed: usize,
    pub timeouts: usize,
    /// False when --max-states cut an exhaustive search short.
    pub complete: bool,
    pub seconds: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub bundle: String,
    pub checker: Vec<String>,
    pub apms: Vec<ApmStats>,
    #[serde(rename = "static")]
    pub statics: Vec<Static>,
    pub dynamic: Vec<Dynamic>,
    /// States whose checker run timed out (not counted as failures).
    pub timeouts: Vec<Example>,
    pub seconds: f64,
}

/// Calls k..=m (group indices) that must persist together, from prefix verdicts: a failing
/// prefix after a passing one opens a group that closes at the next passing prefix
/// (thesis §3.3 "Atomicity across System Calls"). Returns (first call, last call, failing k).
pub fn atomic_groups(prefix: &BTreeMap<usize, bool>) -> Vec<(usize, usize, usize)> {
    let mut out: Vec<(usize, usize, usize)> = Vec::new();
    let mut open = false;
    for (&k, &pass) in prefix {
        if !pass && !open && k > 0 {
            // Prefix k (calls 0..k) fails: the last call added, k-1, opened the group.
            out.push((k - 1, k - 1, k));
            open = true;
        } else if pass && open {
            out.last_mut().expect("open group").1 = k - 1;
            open = false;
        }
    }
    if open {
        let last = prefix
            .keys()
            .next_back()
            .copied()
            .unwrap_or(0)
            .saturating_sub(1);
        let g = out.last_mut().expect("open group");
        g.1 = g.1.max(last);
    }
    out
}

/// Pass/fail of each prefix state that has a verdict (timeouts left out), by call count.
pub fn prefix_verdicts(
    probes: &[Probe],
    verdict: &dyn Fn(StateNo) -> Option<Verdict>,
) -> BTreeMap<usize, bool> {
    probes
        .iter()
        .filter_map(|p| match p.prov {
            Provenance::Prefix { calls } => verdict(p.state)
                .filter(|v| !v.timeout)
                .map(|v| (calls, v.pass)),
            _ => None,
        })
        .collect()
}

/// What the report needs about one APM's exploration.
pub struct ApmRun<'a> {
    pub prog: &'a Program,
    pub ops: &'a [Op],
    pub probes: &'a [Probe],
    /// The id of a distinct state (by number), for examples.
    pub state_ids: &'a dyn Fn(StateNo) -> Option<String>,
}

impl ApmRun<'_> {
    fn call_ref(
        &self,
        g: usize,
        loc: &dyn Fn(&Op) -> String,
        summary: &dyn Fn(&Op) -> String,
    ) -> CallRef {
        let c = &self.prog.calls[g];
        let op = &self.ops[c.ops.start];
        CallRef {
            index: g,
            op: op.id,
            syscall: op.syscall.clone(),
            summary: summary(op),
            location: loc(op),
        }
    }

    fn call_ops(&self, g: usize) -> &[Op] {
        &self.ops[self.prog.calls[g].ops.clone()]
    }

    fn atomicity_category(&self, g: usize) -> Category {
        for o in self.call_ops(g) {
            match o.op {
                LogicalOp::Append { .. } | LogicalOp::Truncate { .. } => {
                    return Category::AppendTruncateAtomicity
                }
                LogicalOp::Overwrite { .. } => return Category::OverwriteAtomicity,
                ref op if op.is_namespace() => return Category::RenameUnlinkAtomicity,
                _ => {}
            }
        }
        Category::AcrossCallsAtomicity
    }

    /// Whether the reordering state (a, b) that drops `dropped` — all of a, and of calls
    /// a+1..b every one with a file-system change — is a prefix of the protocol on disk:
    /// then only output got ahead of the disk.
    fn prefix_like(&self, a: usize, b: usize, dropped: &Dropped) -> bool {
        let whole = |g: usize| {
            self.prog.calls[g]
                .units
                .clone()
                .all(|u| dropped.contains(u))
        };
        if !whole(a) {
            return false; // part of a persisted: the files are no prefix
        }
        for g in a + 1..b {
            if whole(g) {
                continue;
            } else if self
                .call_ops(g)
                .iter()
                .any(|o| !matches!(o.op, LogicalOp::Output { .. } | LogicalOp::Sync { .. }))
            {
                return false;
            }
        }
        true
    }

    /// The sync whose absence the durability vulnerability (a lost, output b printed)
    /// shows: after the last call before b that changed the file system, of what a changed.
    fn missing_sync(
        &self,
        a: usize,
        b: usize,
        loc: &dyn Fn(&Op) -> String,
        summary: &dyn Fn(&Op) -> String,
    ) -> MissingSync {
        assert!(a < b, "call {a} is lost before output {b}");
        let changes = |g: usize| {
            self.call_ops(g)
                .iter()
                .any(|o| !matches!(o.op, LogicalOp::Output { .. } | LogicalOp::Sync { .. }))
        };
        let after = (a..b).rev().find(|&g| changes(g)).unwrap_or(a);
        let files = self
            .call_ops(a)
            .iter()
            .filter_map(|o| {
                let path = o.path2.as_deref().or(o.path.as_deref())?;
                Some(if o.op.is_namespace() {
                    path.rsplit_once('/')
                        .map(|(d, _)| d)
                        .unwrap_or(".")
                        .to_string()
                } else {
                    path.to_string()
                })
            })
            .collect::<BTreeSet<String>>()
            .into_iter()
            .collect();
        MissingSync {
            after: self.call_ref(after, loc, summary),
            files,
        }
    }

    /// Table 4.2 class of "b persisted without a".
    fn ordering_category(&self, a: usize, b: usize) -> Category {
        let data_inodes: BTreeSet<u64> = self
            .call_ops(a)
            .iter()
            .filter_map(|o| match o.op {
                LogicalOp::Overwrite { inode, .. }
                | LogicalOp::Append { inode, .. }
                | LogicalOp::Truncate { inode, .. } => Some(inode),
                _ => None,
            })
            .collect();
        let named: BTreeSet<u64> = self.prog.calls[a]
            .micros
            .clone()
            .filter_map(|i| match &self.prog.micros[i].micro {
                Micro::CreateEntry { inode, .. } => Some(*inode),
                _ => None,
            })
            .collect();
        let later = a + 1..b + 1;
        let flushed_later = later
            .clone()
            .flat_map(|g| self.prog.calls[g].micros.clone())
            .any(|i| {
                let m = &self.prog.micros[i];
                matches!(m.micro, Micro::Sync { inode: Some(_) })
                    && m.path.iter().any(|p| named.contains(p))
            });
        // The earliest failing b is the output itself: the same files without that output
        // passed (at b-1), so only the promise the output made is broken — durability, even
        // when a later rename also outran a (under ext3-j, where nothing is reordered, only
        // the missing fsync is to blame). A safe-file-flush durability loss stays that.
        let b_ops = self.call_ops(b);
        if !b_ops.is_empty()
            && b_ops
                .iter()
                .all(|o| matches!(o.op, LogicalOp::Output { .. }))
        {
            return if flushed_later {
                Category::SafeFileFlush
            } else {
                Category::Durability
            };
        }
        let renamed_later = later.clone().flat_map(|g| self.call_ops(g)).any(
            |o| matches!(o.op, LogicalOp::Rename { inode, .. } if data_inodes.contains(&inode)),
        );
        if renamed_later {
            return Category::SafeRename;
        }
        if flushed_later {
            return Category::SafeFileFlush;
        }
        if later
            .flat_map(|g| self.call_ops(g))
            .any(|o| matches!(o.op, LogicalOp::Output { .. }))
        {
            return Category::Durability;
        }
        Category::OtherOrdering
    }

    /// Dynamic vulnerabilities from the verdicts. `loc` gives an op's representative
    /// location, `summary` a one-line description.
    pub fn dynamics(
        &self,
        verdict: &dyn Fn(StateNo) -> Option<Verdict>,
        loc: &dyn Fn(&Op) -> String,
        summary: &dyn Fn(&Op) -> String,
    ) -> Vec<Dynamic> {
        let names = Names { loc, summary };
        let mut out = self.across_calls(verdict, &names);
        let failing: Vec<(&Probe, Verdict)> = self
            .probes
            .iter()
            .filter_map(|p| {
                verdict(p.state)
                    .filter(|v| !v.pass && !v.timeout)
                    .map(|v| (p, v))
            })
            .collect();
        let (per_call, per_pair) = buckets(&failing);
        for (g, k) in per_call {
            out.push(Dynamic {
                apm: self.prog.apm.clone(),
                kind: Kind::Atomicity,
                category: self.atomicity_category(g),
                calls: vec![self.call_ref(g, loc, summary)],
                failing_states: k.states.len(),
                grouped_states: 0,
                example: self.example(k.probe, &k.verdict),
                missing_sync: None,
            });
        }
        out.extend(self.orderings(per_pair, &names));
        out
    }

    fn example(&self, p: &Probe, v: &Verdict) -> Example {
        Example {
            state: (self.state_ids)(p.state).unwrap_or_default(),
            description: p.desc.to_string(),
            checker_message: v.message.clone(),
        }
    }

    /// Stage 1: across-calls groups, from the prefix verdicts.
    fn across_calls(
        &self,
        verdict: &dyn Fn(StateNo) -> Option<Verdict>,
        names: &Names,
    ) -> Vec<Dynamic> {
        let mut out = Vec::new();
        for (first, last, k) in atomic_groups(&prefix_verdicts(self.probes, verdict)) {
            let Some(p) = self
                .probes
                .iter()
                .find(|p| p.prov == Provenance::Prefix { calls: k })
            else {
                continue;
            };
            let Some(v) = verdict(p.state).filter(|v| !v.pass && !v.timeout) else {
                continue;
            };
            let calls = (first..=last.max(first))
                .map(|g| self.call_ref(g, names.loc, names.summary))
                .collect();
            out.push(Dynamic {
                apm: self.prog.apm.clone(),
                kind: Kind::AcrossCalls,
                category: Category::AcrossCallsAtomicity,
                calls,
                failing_states: 1,
                grouped_states: 0,
                example: self.example(p, &v),
                missing_sync: None,
            });
        }
        out
    }

    /// Stage 3: one ordering vulnerability per first call a that is a minimal cause.
    /// A durability failure in a prefix state (everything from a on lost, the output
    /// there) fails for every earlier a too, since a prefix that stops earlier only loses
    /// more; under ext3-j that blamed every call since the last sync. Only the latest such
    /// a before the same output is reported: the call whose loss breaks the promise.
    fn orderings(&self, per_pair: BTreeMap<usize, Bucket>, names: &Names) -> Vec<Dynamic> {
        let pairs: Vec<_> = per_pair
            .into_iter()
            .map(|(a, k)| {
                let category = self.ordering_category(a, k.b);
                let prefix_durability = category == Category::Durability
                    && matches!(&k.probe.prov, Provenance::Reorder { dropped, .. } if self.prefix_like(a, k.b, dropped));
                (a, k, category, prefix_durability)
            })
            .collect();
        let mut latest_prefix_a: BTreeMap<usize, usize> = BTreeMap::new();
        for (a, k, _, prefix_durability) in &pairs {
            if *prefix_durability {
                let e = latest_prefix_a.entry(k.b).or_insert(*a);
                *e = (*e).max(*a);
            }
        }
        let (loc, summary) = (names.loc, names.summary);
        pairs
            .into_iter()
            .filter(|(a, k, _, pd)| !pd || latest_prefix_a.get(&k.b) == Some(a))
            .map(|(a, k, category, _)| Dynamic {
                apm: self.prog.apm.clone(),
                kind: Kind::Ordering,
                category,
                calls: vec![
                    self.call_ref(a, loc, summary),
                    self.call_ref(k.b, loc, summary),
                ],
                failing_states: k.states.len(),
                grouped_states: k.grouped,
                missing_sync: (category == Category::Durability)
                    .then(|| self.missing_sync(a, k.b, loc, summary)),
                example: self.example(k.probe, &k.verdict),
            })
            .collect()
    }
}

/// How the report names operations: representative location and one-line summary.
struct Names<'a> {
    loc: &'a dyn Fn(&Op) -> String,
    summary: &'a dyn Fn(&Op) -> String,
}

/// The failing states of one call (atomicity) or one first call a (ordering).
struct Bucket<'p> {
    /// Distinct contents: several probes can build the same state.
    states: BTreeSet<StateNo>,
    /// Ordering: the earliest b among the call's own failing states (the example's).
    b: usize,
    probe: &'p Probe,
    verdict: Verdict,
    /// Ordering: states of other first calls grouped here as their minimal cause.
    grouped: usize,
}

/// Stage 2: failing states by call (atomicity) and by minimal cause (reorder; the states
/// a cause explains counted under it).
type Buckets<'p> = (BTreeMap<usize, Bucket<'p>>, BTreeMap<usize, Bucket<'p>>);

fn buckets<'p>(failing: &[(&'p Probe, Verdict)]) -> Buckets<'p> {
    let causes = minimal_causes(failing);
    let (mut per_call, mut per_pair) = (BTreeMap::new(), BTreeMap::new());
    let mut grouped: BTreeMap<usize, BTreeSet<StateNo>> = BTreeMap::new();
    let bucket = |b: usize, p: &'p Probe, v: &Verdict| Bucket {
        states: BTreeSet::new(),
        b,
        probe: p,
        verdict: v.clone(),
        grouped: 0,
    };
    for (i, (p, v)) in failing.iter().enumerate() {
        match p.prov {
            Provenance::Atomicity { group } => {
                let k: &mut Bucket = per_call.entry(group).or_insert_with(|| bucket(0, p, v));
                k.states.insert(p.state);
            }
            Provenance::Reorder { a, b, .. } if causes[i] == Some(a) => {
                let k: &mut Bucket = per_pair.entry(a).or_insert_with(|| bucket(b, p, v));
                k.states.insert(p.state);
                if b < k.b {
                    (k.b, k.probe, k.verdict) = (b, p, v.clone());
                }
            }
            Provenance::Reorder { .. } => {
                let cause = causes[i].expect("a failing reorder state has a cause");
                grouped.entry(cause).or_default().insert(p.state);
            }
            Provenance::Prefix { .. } => {}
        }
    }
    // Grouped states count under their cause, unless its own states have the same content.
    for (a, states) in grouped {
        let k = per_pair
            .get_mut(&a)
            .expect("a minimal cause is a failing state of its own call");
        let before = k.states.len();
        k.states.extend(states);
        k.grouped = k.states.len() - before;
    }
    (per_call, per_pair)
}

/// The minimal cause of each failing state (docs/report.md, "Minimal causes"): for a
/// reorder state, the first call `a` of the failing reorder state with the fewest dropped
/// units among those whose dropped units are a subset of its own (itself when none is);
/// None for other shapes. A state that drops everything a smaller failing state drops, and
/// more, fails at least for that smaller state's reason, so it is not a cause of its own.
pub fn minimal_causes(failing: &[(&Probe, Verdict)]) -> Vec<Option<usize>> {
    let mut order: Vec<(usize, &Dropped, usize)> = failing
        .iter()
        .enumerate()
        .filter_map(|(i, (p, _))| match &p.prov {
            Provenance::Reorder { a, dropped, .. } => Some((i, dropped, *a)),
            _ => None,
        })
        .collect();
    order.sort_by_key(|(i, d, _)| (d.len(), *i));
    // An antichain of minimal drop sets, smallest first.
    let mut minimal: Vec<(&Dropped, usize)> = Vec::new();
    let mut out = vec![None; failing.len()];
    for (i, dropped, a) in order {
        assert!(!dropped.is_empty(), "a reorder state drops something");
        let cause = match minimal.iter().find(|(m, _)| m.is_subset(dropped)) {
            Some(&(_, cause)) => cause,
            None => {
                minimal.push((dropped, a));
                a
            }
        };
        out[i] = Some(cause);
    }
    out
}

/// Groups dynamic vulnerabilities (of every APM) by kind and source locations.
impl Static {
    /// One line: what must hold, at which source locations.
    pub fn title(&self) -> String {
        match self.kind {
            Kind::AcrossCalls => format!(
                "calls from {} persist only together",
                self.locations.join(" to ")
            ),
            Kind::Atomicity => format!("{} is not atomic", self.locations[0]),
            Kind::Ordering if self.missing_sync.is_some() => {
                let m = self.missing_sync.as_ref().expect("checked");
                let what = if m.files.is_empty() {
                    String::new()
                } else {
                    format!(" (sync {})", m.files.join(", "))
                };
                format!(
                    "{MISSING_SYNC} {}{what} before the output that follows it",
                    self.locations[0]
                )
            }
            Kind::Ordering => format!(
                "{} must reach disk before {}",
                self.locations[0],
                self.locations.get(1).cloned().unwrap_or_default()
            ),
        }
    }

    /// The Table 4.2 categories, comma-separated.
    pub fn categories_label(&self) -> String {
        self.categories
            .iter()
            .map(|c| c.label())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The second location of a durability static vulnerability.
pub const OUTPUT_LOCATION: &str = "the output that follows it";

/// Static vulnerabilities with durability grouped by missing sync (the default).
pub fn statics(dynamic: &[Dynamic]) -> Vec<Static> {
    statics_grouped(dynamic, Grouping::Sync)
}

/// The text after "a sync is missing" in a grouped durability title.
pub const MISSING_SYNC: &str = "a sync is missing after";

/// Static vulnerabilities: dynamic ones with the same kind and source locations, and
/// under `Grouping::Sync` durability ones with the same missing sync.
pub fn statics_grouped(dynamic: &[Dynamic], grouping: Grouping) -> Vec<Static> {
    let mut groups: BTreeMap<(Kind, Vec<String>), Vec<usize>> = BTreeMap::new();
    for (i, d) in dynamic.iter().enumerate() {
        groups.entry(static_key(d, grouping)).or_default().push(i);
    }
    let mut out: Vec<Static> = groups
        .into_iter()
        .map(|((kind, locations), members)| {
            let first = &dynamic[members[0]];
            let categories: BTreeSet<Category> =
                members.iter().map(|&i| dynamic[i].category).collect();
            let mut apms: Vec<String> = Vec::new();
            for &i in &members {
                if !apms.contains(&dynamic[i].apm) {
                    apms.push(dynamic[i].apm.clone());
                }
            }
            let missing_sync = (grouping == Grouping::Sync)
                .then(|| merge_missing_syncs(dynamic, &members))
                .flatten();
            let calls = match &missing_sync {
                Some(_) => lost_calls_then_output(dynamic, &members),
                None => first.calls.clone(),
            };
            Static {
                id: 0,
                kind,
                categories: categories.into_iter().collect(),
                locations,
                apms,
                dynamic: members.clone(),
                calls,
                example: first.example.clone(),
                title: String::new(),
                missing_sync,
            }
        })
        .collect();
    // Order of the protocol: by the first call involved.
    out.sort_by_key(|s| (s.calls.first().map(|c| c.index).unwrap_or(0), s.kind));
    for (i, s) in out.iter_mut().enumerate() {
        s.id = i + 1;
        s.title = s.title();
    }
    out
}

/// What a dynamic vulnerability's static one is keyed by: its kind and locations.
fn static_key(d: &Dynamic, grouping: Grouping) -> (Kind, Vec<String>) {
    let by_sync = d
        .missing_sync
        .as_ref()
        .filter(|_| grouping == Grouping::Sync);
    let locs: Vec<String> = match d.kind {
        // One missing sync explains every call lost before the output since the last
        // sync: the fix is that sync, after the last of them.
        Kind::Ordering if by_sync.is_some() => {
            let m = by_sync.expect("checked");
            vec![m.after.location.clone(), OUTPUT_LOCATION.to_string()]
        }
        Kind::AcrossCalls => {
            let mut v = vec![d.calls[0].location.clone()];
            if let Some(l) = d.calls.last() {
                if l.location != v[0] {
                    v.push(l.location.clone());
                }
            }
            v
        }
        // What must be made durable is the fix; where the workload printed is not:
        // one durability static vulnerability per site, whichever output exposed it.
        Kind::Ordering if d.category == Category::Durability => {
            vec![d.calls[0].location.clone(), OUTPUT_LOCATION.to_string()]
        }
        _ => d.calls.iter().map(|c| c.location.clone()).collect(),
    };
    (d.kind, locs)
}

/// The missing sync of a group whose members all have one: the first member's call, the
/// union of the files.
fn merge_missing_syncs(dynamic: &[Dynamic], members: &[usize]) -> Option<MissingSync> {
    let syncs: Vec<&MissingSync> = members
        .iter()
        .filter_map(|&i| dynamic[i].missing_sync.as_ref())
        .collect();
    if syncs.len() != members.len() || syncs.is_empty() {
        return None;
    }
    let files: BTreeSet<String> = syncs.iter().flat_map(|m| m.files.iter().cloned()).collect();
    Some(MissingSync {
        after: syncs[0].after.clone(),
        files: files.into_iter().collect(),
    })
}

/// The lost calls of a missing-sync group (each once, in protocol order), then the first
/// member's output.
fn lost_calls_then_output(dynamic: &[Dynamic], members: &[usize]) -> Vec<CallRef> {
    let mut lost: BTreeMap<usize, CallRef> = BTreeMap::new();
    for &i in members {
        let c = &dynamic[i].calls[0];
        lost.entry(c.index).or_insert_with(|| c.clone());
    }
    let mut calls: Vec<CallRef> = lost.into_values().collect();
    if let Some(out) = dynamic[members[0]].calls.get(1) {
        calls.push(out.clone());
    }
    calls
}

fn indent(s: &str, pre: &str) -> String {
    s.lines()
        .map(|l| format!("{pre}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Once per report, when some locations are offsets in code without debug information
/// (`libsqlite3.so.0.8.6+0xaa356`): how to get names for them.
pub fn stripped_note<'a>(locations: impl Iterator<Item = &'a String>) -> Option<String> {
    let stripped: Vec<&String> = locations
        .filter(|l| {
            let head = l.split(':').next().unwrap_or("");
            head.contains("+0x") && !head.ends_with(".py")
        })
        .collect();
    let first = stripped.first()?;
    let binary = first.split("+0x").next().unwrap_or(first);
    Some(format!(
        "note: {} location(s) are offsets in code without debug information (e.g. {first}). To name them, install the binary's debug symbols (Debian: the `-dbgsym` package of the one that ships {binary}, from the debian-debug archive), or name its caller instead with --frame-skip '{}'.\n",
        stripped.len(),
        regex_escape(binary.rsplit('/').next().unwrap_or(binary))
    ))
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect()
}

/// The human-readable report.
pub fn render_text(r: &Report, saved: Option<&str>) -> String {
    let mut o = String::new();
    let nd = r.dynamic.len();
    for a in &r.apms {
        o.push_str(&format!(
            "APM {:<8} explore {}: {} calls, {} micro-ops in {} units; {} states built, {} distinct, {} checked here: {} failed, {} timed out{} ({:.1} s)\n",
            a.apm,
            a.explore,
            a.calls,
            a.micro_ops,
            a.units,
            a.constructed,
            a.distinct,
            a.checked,
            a.failed,
            a.timeouts,
            if a.complete { "" } else { "; search cut by --max-states" },
            a.seconds
        ));
        if !a.models.is_empty() {
            o.push_str(&format!("    models: {}\n", a.models));
        }
    }
    o.push('\n');
    if r.statics.is_empty() {
        o.push_str("No vulnerability found.\n");
    }
    for s in &r.statics {
        o.push_str(&format!(
            "#{} [{}] {}\n",
            s.id,
            s.categories_label(),
            s.title()
        ));
        let grouped: usize = s.dynamic.iter().map(|&i| r.dynamic[i].grouped_states).sum();
        o.push_str(&format!(
            "    APMs: {}   dynamic vulnerabilities: {}{}\n",
            s.apms.join(", "),
            s.dynamic.len(),
            if grouped > 0 {
                format!("   (with {grouped} failing state(s) that also drop other calls: minimal cause)")
            } else {
                String::new()
            }
        ));
        for c in &s.calls {
            o.push_str(&format!(
                "    call {:>3} op {:>4}  {}\n",
                c.index, c.op, c.summary
            ));
        }
        let where_ = match saved {
            Some(d) => format!(" (saved: {d}/{})", s.example.state),
            None => String::new(),
        };
        o.push_str(&format!(
            "    example state {}: {}{}\n",
            s.example.state, s.example.description, where_
        ));
        if !s.example.checker_message.is_empty() {
            o.push_str(&format!(
                "    checker said:\n{}\n",
                indent(&s.example.checker_message, "      | ")
            ));
        }
        o.push('\n');
    }
    if !r.timeouts.is_empty() {
        o.push_str(&format!(
            "{} state(s) timed out (not counted as failures), e.g. {}: {}\n",
            r.timeouts.len(),
            r.timeouts[0].state,
            r.timeouts[0].description
        ));
    }
    if let Some(note) = stripped_note(r.statics.iter().flat_map(|s| s.locations.iter())) {
        o.push_str(&note);
    }
    o.push_str(&format!(
        "{} static vulnerabilit{} ({} dynamic) in {:.1} s\n",
        r.statics.len(),
        if r.statics.len() == 1 { "y" } else { "ies" },
        nd,
        r.seconds
    ));
    o
}

#[cfg(test)]
mod tests {
    #[test]
    fn stripped_code_gets_one_note() {
        let locs: Vec<String> = vec![
            "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6+0xaa356".into(),
            "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6+0xab000:sqlite3_step".into(),
            "src/a.c:3:put".into(),
        ];
        let note = super::stripped_note(locs.iter()).unwrap();
        assert!(note.starts_with("note: 2 location(s)"), "{note}");
        assert!(
            note.contains("-dbgsym") && note.contains("--frame-skip 'libsqlite3\\.so\\.0\\.8\\.6'"),
            "{note}"
        );
        let clean: Vec<String> = vec!["src/a.c:3:put".into()];
        assert_eq!(super::stripped_note(clean.iter()), None);
    }

    use super::*;

    #[test]
    fn groups_from_prefixes() {
        let m: BTreeMap<usize, bool> = [
            (0, true),
            (1, true),
            (2, false),
            (3, false),
            (4, true),
            (5, true),
        ]
        .into_iter()
        .collect();
        assert_eq!(atomic_groups(&m), vec![(1, 3, 2)]);
        let m: BTreeMap<usize, bool> = [(0, true), (1, true), (2, true)].into_iter().collect();
        assert!(atomic_groups(&m).is_empty());
        let m: BTreeMap<usize, bool> = [(0, true), (1, false), (2, true), (3, false), (4, true)]
            .into_iter()
            .collect();
        assert_eq!(atomic_groups(&m), vec![(0, 1, 1), (2, 3, 3)]);
    }

    fn call(index: usize, location: &str) -> CallRef {
        CallRef {
            index,
            op: index,
            syscall: "x".into(),
            summary: String::new(),
            location: location.into(),
        }
    }

    fn dynamic(category: Category, a: CallRef, b: CallRef) -> Dynamic {
        Dynamic {
            apm: "default".into(),
            kind: Kind::Ordering,
            category,
            calls: vec![a, b],
            failing_states: 1,
            grouped_states: 0,
            example: Example {
                state: "s1".into(),
                description: String::new(),
                checker_message: String::new(),
            },
            missing_sync: None,
        }
    }

    /// Two lost calls before one output, one missing sync after the second: one static
    /// vulnerability by sync (both calls, the output, both files), two per call.
    #[test]
    fn durability_groups_by_the_missing_sync() {
        let with_sync = |a: CallRef, file: &str| {
            let mut d = dynamic(Category::Durability, a, call(9, "app.c:40"));
            d.missing_sync = Some(MissingSync {
                after: call(8, "log.c:20"),
                files: vec![file.to_string()],
            });
            d
        };
        let d = vec![
            with_sync(call(3, "log.c:10"), "a.log"),
            with_sync(call(8, "log.c:20"), "b.log"),
        ];
        let by_sync = statics_grouped(&d, Grouping::Sync);
        assert_eq!(by_sync.len(), 1, "{by_sync:#?}");
        let s = &by_sync[0];
        assert_eq!(
            s.locations,
            vec!["log.c:20".to_string(), OUTPUT_LOCATION.to_string()]
        );
        assert_eq!(s.dynamic, vec![0, 1]);
        let idx: Vec<usize> = s.calls.iter().map(|c| c.index).collect();
        assert_eq!(idx, vec![3, 8, 9], "the lost calls, then the output");
        let m = s.missing_sync.as_ref().expect("grouped by sync");
        assert_eq!(m.files, vec!["a.log".to_string(), "b.log".to_string()]);
        assert!(s.title.starts_with(MISSING_SYNC) && s.title.contains("(sync a.log, b.log)"));
        let per_call = statics_grouped(&d, Grouping::PerCall);
        assert_eq!(per_call.len(), 2, "{per_call:#?}");
        assert!(per_call.iter().all(|s| s.missing_sync.is_none()));
        assert_eq!(Grouping::parse("per-call"), Some(Grouping::PerCall));
        assert_eq!(Grouping::parse("calls"), None);
    }

    #[test]
    fn durability_groups_by_the_call_that_must_persist() {
        // SQLite: the same unlink site, exposed by two different printf sites.
        let d = vec![
            dynamic(
                Category::Durability,
                call(10, "pager.c:1"),
                call(11, "app.c:53"),
            ),
            dynamic(
                Category::Durability,
                call(27, "pager.c:1"),
                call(28, "app.c:42"),
            ),
            // Ordering between two code sites stays keyed by both.
            dynamic(
                Category::OtherOrdering,
                call(5, "pager.c:1"),
                call(6, "pager.c:2"),
            ),
            dynamic(
                Category::OtherOrdering,
                call(7, "pager.c:1"),
                call(8, "pager.c:3"),
            ),
        ];
        let s = statics(&d);
        assert_eq!(s.len(), 3, "{s:#?}");
        let dur: Vec<_> = s
            .iter()
            .filter(|s| s.categories == [Category::Durability])
            .collect();
        assert_eq!(dur.len(), 1);
        assert_eq!(dur[0].dynamic.len(), 2);
        assert_eq!(
            dur[0].locations,
            vec!["pager.c:1".to_string(), OUTPUT_LOCATION.to_string()]
        );
    }
}
