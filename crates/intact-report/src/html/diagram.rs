//! Protocol diagrams (in the spirit of thesis 004, Figures 4.1–4.6): the update protocol as
//! a timeline, x = operation order, one lane per file (an inode: a file renamed into place
//! keeps its lane, labelled "old → new"), a lane for standard output, sync calls as blue
//! barriers (on their file's lane, or across every lane for sync/syncfs), and the
//! operations of one vulnerability outlined in red with what happened to them in the
//! example state ("torn", "reordered", "lost", …). Ordering and durability dependencies
//! are arrows (dotted for safe rename and safe file flush, as in the thesis); calls that
//! must persist together are bracketed.
//!
//! Long protocols are cut to a window around the highlighted operations, with "… N more"
//! columns for what is left out and runs of alike operations drawn once as "×N".

use super::esc;
use intact_model::op::{LogicalOp, Op};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Protocols up to this many operations are drawn whole.
pub const MAX_FULL: usize = 60;
/// Operations shown on each side of a highlighted one in a windowed diagram.
pub const CONTEXT: usize = 6;
/// Columns at most (the rest is one "… N more" column).
pub const MAX_COLS: usize = 150;
/// Lanes at most (the least busy files share one "other files" lane).
pub const MAX_LANES: usize = 12;

/// What a lane stands for.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LaneKey {
    /// A file, directory or symlink (inode number in the bundle).
    Inode(u64),
    /// A path, when only the report's call summaries are known.
    Name(String),
    /// Standard output.
    Output,
    /// Files the lane cap merged.
    Others,
}

/// One operation as drawn.
#[derive(Clone, Debug)]
pub struct DOp {
    pub id: usize,
    /// The call (group of operations from one system call) it belongs to.
    pub group: usize,
    /// None: a whole-file-system sync (a barrier across every lane).
    pub lane: Option<LaneKey>,
    /// Text in the box: the operation ("append", "rename", "create"; the system call for syncs).
    pub kind: String,
    pub sync: bool,
    pub output: bool,
    /// Names the object had (for the lane label).
    pub names: Vec<String>,
    /// Tooltip.
    pub detail: String,
}

/// What happened to a highlighted operation in the example state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Persisted partly (atomicity; calls that must persist together).
    Torn,
    /// Did not persist while a later call did (ordering).
    Reordered,
    /// Did not persist although output after it was printed (durability).
    Lost,
    /// The later call that persisted without it ("persisted").
    PersistedFirst,
    /// The output that was printed without it.
    Printed,
}

impl Role {
    pub fn label(self) -> &'static str {
        match self {
            Role::Torn => "torn",
            Role::Reordered => "reordered",
            Role::Lost => "lost",
            Role::PersistedFirst => "persisted",
            Role::Printed => "printed",
        }
    }
}

/// A column of the timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Col {
    /// Operations `first..first+count` (indices into the drawn operations): one, or a run of
    /// alike ones drawn once as "×count".
    Ops { first: usize, count: usize },
    /// This many operations left out.
    Gap(usize),
}

fn short_path(p: &Option<String>) -> String {
    p.clone().unwrap_or_else(|| "?".into())
}

/// The drawn form of a bundle's operations, grouped into calls as the explorer does
/// (consecutive operations of one system call).
pub fn from_ops(ops: &[Op]) -> Vec<DOp> {
    let mut out: Vec<DOp> = Vec::with_capacity(ops.len());
    let mut group = 0usize;
    for (i, o) in ops.iter().enumerate() {
        if i > 0 && ops[i - 1].call != o.call {
            group += 1;
        }
        let path = short_path(&o.path);
        let mut names = vec![path.clone()];
        let (lane, kind, sync, output, what) = match &o.op {
            LogicalOp::Overwrite {
                inode,
                offset,
                count,
                ..
            } => (
                Some(LaneKey::Inode(*inode)),
                "overwrite".to_string(),
                false,
                false,
                format!(
                    "overwrite {path} [{offset}, {}) (inode {inode})",
                    offset.saturating_add(*count)
                ),
            ),
            LogicalOp::Append {
                inode,
                old_size,
                new_size,
                ..
            } => (
                Some(LaneKey::Inode(*inode)),
                "append".into(),
                false,
                false,
                format!("append {path} size {old_size} -> {new_size} (inode {inode})"),
            ),
            LogicalOp::Truncate {
                inode,
                old_size,
                new_size,
            } => (
                Some(LaneKey::Inode(*inode)),
                "truncate".into(),
                false,
                false,
                format!("truncate {path} size {old_size} -> {new_size} (inode {inode})"),
            ),
            LogicalOp::Link { inode, created, .. } => {
                let k = if *created { "create" } else { "link" };
                (
                    Some(LaneKey::Inode(*inode)),
                    k.into(),
                    false,
                    false,
                    format!("{k} {path} (inode {inode})"),
                )
            }
            LogicalOp::Unlink { inode, .. } => (
                Some(LaneKey::Inode(*inode)),
                "unlink".into(),
                false,
                false,
                format!("unlink {path} (inode {inode})"),
            ),
            LogicalOp::Rename { inode, .. } => {
                let dst = short_path(&o.path2);
                names.push(dst.clone());
                (
                    Some(LaneKey::Inode(*inode)),
                    "rename".into(),
                    false,
                    false,
                    format!("rename {path} -> {dst} (inode {inode})"),
                )
            }
            LogicalOp::Mkdir { inode, .. } => (
                Some(LaneKey::Inode(*inode)),
                "mkdir".into(),
                false,
                false,
                format!("mkdir {path} (inode {inode})"),
            ),
            LogicalOp::Rmdir { inode, .. } => (
                Some(LaneKey::Inode(*inode)),
                "rmdir".into(),
                false,
                false,
                format!("rmdir {path} (inode {inode})"),
            ),
            LogicalOp::Symlink { inode, target, .. } => (
                Some(LaneKey::Inode(*inode)),
                "symlink".into(),
                false,
                false,
                format!("symlink {path} -> {target} (inode {inode})"),
            ),
            LogicalOp::Sync {
                inode: Some(inode), ..
            } => (
                Some(LaneKey::Inode(*inode)),
                o.syscall.clone(),
                true,
                false,
                format!("sync {path} (inode {inode})"),
            ),
            LogicalOp::Sync { inode: None, .. } => {
                names.clear();
                (
                    None,
                    o.syscall.clone(),
                    true,
                    false,
                    "sync the whole file system".into(),
                )
            }
            LogicalOp::Output { data } => {
                names.clear();
                (
                    Some(LaneKey::Output),
                    "output".into(),
                    false,
                    true,
                    format!("output, {} bytes", data.len()),
                )
            }
        };
        let at = o
            .loc
            .as_ref()
            .map(|f| format!(" @ {}", f.display()))
            .unwrap_or_default();
        out.push(DOp {
            id: o.id,
            group,
            lane,
            kind,
            sync,
            output,
            names,
            detail: format!("op {} ({}): {what}{at}", o.id, o.syscall),
        });
    }
    // Directories (the parents of entries, and what mkdir/rmdir name) read "name/".
    let dirs: BTreeSet<u64> = ops
        .iter()
        .flat_map(|o| match &o.op {
            LogicalOp::Link { dir, .. }
            | LogicalOp::Unlink { dir, .. }
            | LogicalOp::Symlink { dir, .. } => vec![*dir],
            LogicalOp::Rename {
                src_dir, dst_dir, ..
            } => vec![*src_dir, *dst_dir],
            LogicalOp::Mkdir { dir, inode, .. } | LogicalOp::Rmdir { dir, inode, .. } => {
                vec![*dir, *inode]
            }
            _ => Vec::new(),
        })
        .collect();
    for d in &mut out {
        if matches!(d.lane, Some(LaneKey::Inode(i)) if dirs.contains(&i)) {
            for n in &mut d.names {
                if !n.ends_with('/') {
                    n.push('/');
                }
            }
        }
    }
    out
}

/// The drawn form of a vulnerability's calls alone (the bundle is gone): one operation per
/// call, its lane by the path in the call's summary ("append    kv.log size …").
pub fn from_calls(calls: &[Value]) -> Vec<DOp> {
    let mut out: Vec<DOp> = Vec::new();
    for c in calls {
        let id = c["op"].as_u64().unwrap_or(0) as usize;
        let group = c["index"].as_u64().unwrap_or(0) as usize;
        let syscall = c["syscall"].as_str().unwrap_or("?").to_string();
        let summary = c["summary"].as_str().unwrap_or("");
        let mut words = summary.split_whitespace();
        let op = words.next().unwrap_or("?").to_string();
        let path = words.next().unwrap_or("").to_string();
        let (lane, kind, sync, output) = match op.as_str() {
            "output" => (Some(LaneKey::Output), op.clone(), false, true),
            "sync" if path.starts_with('<') || path.is_empty() => {
                (None, syscall.clone(), true, false)
            }
            "sync" => (
                Some(LaneKey::Name(path.clone())),
                syscall.clone(),
                true,
                false,
            ),
            _ => (
                Some(LaneKey::Name(path.clone())),
                if op == "link" && summary.contains("(creates inode") {
                    "create".into()
                } else {
                    op.clone()
                },
                false,
                false,
            ),
        };
        let names = match &lane {
            Some(LaneKey::Name(p)) => vec![p.clone()],
            _ => Vec::new(),
        };
        let loc = c["location"]
            .as_str()
            .map(|l| format!(" @ {l}"))
            .unwrap_or_default();
        let detail = format!(
            "op {id} ({syscall}): {}{loc}",
            summary.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        out.push(DOp {
            id,
            group,
            lane,
            kind,
            sync,
            output,
            names,
            detail,
        });
    }
    out.sort_by_key(|d| d.id);
    out.dedup_by_key(|d| d.id);
    out
}

/// Where operation `id` is in `dops` (sorted by id; dense when drawn from a bundle).
fn index_of(dops: &[DOp], id: usize) -> Option<usize> {
    match dops.get(id) {
        Some(d) if d.id == id => Some(id),
        _ => dops.binary_search_by_key(&id, |d| d.id).ok(),
    }
}

/// The role of each drawn operation of a vulnerability, by index into `dops`: every
/// operation of each of its calls (the calls are named by their first operation's id).
/// None when some call's operation is not among `dops` (the bundle does not match).
pub fn roles(
    kind: &str,
    categories: &[String],
    calls: &[Value],
    dops: &[DOp],
) -> Option<BTreeMap<usize, Role>> {
    let durability = !categories.is_empty() && categories.iter().all(|c| c == "durability");
    let mut out = BTreeMap::new();
    for (pos, c) in calls.iter().enumerate() {
        let id = c["op"].as_u64()? as usize;
        let at = index_of(dops, id)?;
        // A call's operations are consecutive.
        let g = dops[at].group;
        let lo = (0..at)
            .rev()
            .take_while(|&i| dops[i].group == g)
            .last()
            .unwrap_or(at);
        let hi = (at..dops.len())
            .take_while(|&i| dops[i].group == g)
            .last()
            .unwrap_or(at);
        let members: Vec<usize> = (lo..=hi).collect();
        let printed = members.iter().all(|&i| dops[i].output);
        let role = match (kind, pos) {
            ("ordering", 0) if durability => Role::Lost,
            // Grouped by missing sync, every call before the output is lost.
            ("ordering", _) if durability && !printed => Role::Lost,
            ("ordering", 0) => Role::Reordered,
            ("ordering", _) if printed => Role::Printed,
            ("ordering", _) => Role::PersistedFirst,
            _ => Role::Torn,
        };
        for i in members {
            out.entry(i).or_insert(role);
        }
    }
    Some(out)
}

/// The columns: every operation when there are at most `MAX_FULL`, otherwise a window of
/// `CONTEXT` operations around each highlighted one, with runs of alike operations (same
/// lane and kind, not highlighted, not syncs) merged. Left-out operations become gaps,
/// counted by operation id (so gaps show between calls drawn without the bundle too).
pub fn columns(dops: &[DOp], highlighted: &BTreeSet<usize>) -> Vec<Col> {
    let n = dops.len();
    let windowed = n > MAX_FULL;
    let keep: Vec<bool> = if !windowed {
        vec![true; n]
    } else if highlighted.is_empty() {
        (0..n).map(|i| i < MAX_FULL).collect()
    } else {
        let mut k = vec![false; n];
        for &h in highlighted {
            for x in &mut k[h.saturating_sub(CONTEXT)..(h + CONTEXT + 1).min(n)] {
                *x = true;
            }
        }
        k
    };
    let mut cols: Vec<Col> = Vec::new();
    let mut prev_id: Option<usize> = None;
    let gap = |cols: &mut Vec<Col>, missing: usize| {
        if missing > 0 {
            match cols.last_mut() {
                Some(Col::Gap(g)) => *g += missing,
                _ => cols.push(Col::Gap(missing)),
            }
        }
    };
    let alike = |a: &DOp, b: &DOp| a.lane == b.lane && a.kind == b.kind && !a.sync && !b.sync;
    for i in 0..n {
        if !keep[i] {
            continue;
        }
        let d = &dops[i];
        // Operations not drawn before this one (by id): left out here, or not in the report.
        let missing = match prev_id {
            None => d.id,
            Some(p) => d.id.saturating_sub(p.saturating_add(1)),
        };
        gap(&mut cols, missing);
        prev_id = Some(d.id);
        if windowed && missing == 0 && !highlighted.contains(&i) {
            if let Some(Col::Ops { first, count }) = cols.last_mut() {
                let last = *first + *count - 1;
                if last + 1 == i && !highlighted.contains(first) && alike(&dops[*first], d) {
                    *count += 1;
                    continue;
                }
            }
        }
        cols.push(Col::Ops { first: i, count: 1 });
    }
    // Operations after the last one drawn (only known with the bundle's operations).
    if let (Some(p), Some(last)) = (prev_id, dops.last()) {
        gap(&mut cols, last.id.saturating_sub(p));
    }
    if cols.len() > MAX_COLS {
        let rest: usize = cols[MAX_COLS - 1..]
            .iter()
            .map(|c| match c {
                Col::Ops { count, .. } => *count,
                Col::Gap(g) => *g,
            })
            .sum();
        cols.truncate(MAX_COLS - 1);
        cols.push(Col::Gap(rest));
    }
    cols
}

/// A lane as drawn.
#[derive(Clone, Debug)]
pub struct Lane {
    pub key: LaneKey,
    pub label: String,
    /// Every name, for the tooltip.
    pub names: Vec<String>,
}

/// The lanes of the shown columns, in order of first appearance, standard output last;
/// with more than `MAX_LANES`, the files without a highlighted operation and with the
/// fewest operations share one lane. Returns the lanes and each lane key's row.
pub fn lanes(
    dops: &[DOp],
    cols: &[Col],
    highlighted: &BTreeSet<usize>,
) -> (Vec<Lane>, BTreeMap<LaneKey, usize>) {
    let mut order: Vec<LaneKey> = Vec::new();
    let mut busy: BTreeMap<LaneKey, (usize, bool)> = BTreeMap::new();
    for c in cols {
        if let Col::Ops { first, count } = c {
            for (i, d) in dops.iter().enumerate().skip(*first).take(*count) {
                if let Some(k) = &d.lane {
                    if !order.contains(k) {
                        order.push(k.clone());
                    }
                    let e = busy.entry(k.clone()).or_default();
                    e.0 += 1;
                    e.1 |= highlighted.contains(&i);
                }
            }
        }
    }
    let has_output = order.contains(&LaneKey::Output);
    order.retain(|k| *k != LaneKey::Output);
    let file_room = MAX_LANES - usize::from(has_output);
    let mut merged: BTreeSet<LaneKey> = BTreeSet::new();
    if order.len() > file_room {
        // Keep the highlighted lanes, then the busiest, in room - 1 lanes.
        let mut rank: Vec<&LaneKey> = order.iter().collect();
        rank.sort_by_key(|k| {
            let (n, h) = busy[*k];
            (!h, std::cmp::Reverse(n))
        });
        merged = rank[file_room - 1..].iter().map(|k| (*k).clone()).collect();
    }
    let mut out: Vec<Lane> = Vec::new();
    let mut row: BTreeMap<LaneKey, usize> = BTreeMap::new();
    for k in order.iter().filter(|k| !merged.contains(k)) {
        let mut names: Vec<String> = Vec::new();
        for d in dops.iter().filter(|d| d.lane.as_ref() == Some(k)) {
            for n in &d.names {
                if !names.contains(n) {
                    names.push(n.clone());
                }
            }
        }
        let label = match names.len() {
            0 => "?".to_string(),
            1 => names[0].clone(),
            _ => format!("{} → {}", names[0], names[names.len() - 1]),
        };
        row.insert(k.clone(), out.len());
        out.push(Lane {
            key: k.clone(),
            label,
            names,
        });
    }
    if !merged.is_empty() {
        let r = out.len();
        for k in &merged {
            row.insert(k.clone(), r);
        }
        out.push(Lane {
            key: LaneKey::Others,
            label: format!("{} other files", merged.len()),
            names: Vec::new(),
        });
    }
    if has_output {
        row.insert(LaneKey::Output, out.len());
        out.push(Lane {
            key: LaneKey::Output,
            label: "stdout".into(),
            names: vec!["standard output".into()],
        });
    }
    if out.is_empty() {
        out.push(Lane {
            key: LaneKey::Others,
            label: "files".into(),
            names: Vec::new(),
        });
    }
    (out, row)
}

const LABEL_W: usize = 170;
const COL_W: usize = 72;
const LANE_H: usize = 52;
const TOP: usize = 44;
const BOX_W: usize = 64;
const BOX_H: usize = 22;

/// Shortens a label to `max` characters (keeping the end, where file names are).
fn clip(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        s.to_string()
    } else {
        let tail: String = s.chars().skip(n - (max - 1)).collect();
        format!("…{tail}")
    }
}

/// A vulnerability's diagram.
pub struct Diagram {
    pub svg: String,
    /// Operations in the protocol (or drawn, without the bundle).
    pub total: usize,
    /// Whether the protocol was cut to a window.
    pub windowed: bool,
}

/// Draws the diagram of one static vulnerability (`v`, as in the JSON report); `uid` makes
/// the SVG's ids unique in the page. Without the bundle's operations, or when they do not
/// match the report, the calls of the vulnerability alone are drawn (`from_bundle` false).
pub fn draw(v: &Value, ops: Option<&[DOp]>, uid: &str) -> (Diagram, bool) {
    let kind = v["kind"].as_str().unwrap_or("");
    let categories: Vec<String> = v["categories"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let calls: Vec<Value> = v["calls"].as_array().cloned().unwrap_or_default();
    let mut from_bundle = false;
    let mut dops: &[DOp] = &[];
    let mut role = None;
    if let Some(ops) = ops {
        dops = ops;
        role = roles(kind, &categories, &calls, dops);
        from_bundle = role.is_some();
    }
    let own;
    if role.is_none() {
        own = from_calls(&calls);
        dops = &own;
        role = roles(kind, &categories, &calls, dops);
    }
    let role = role.unwrap_or_default();
    let highlighted: BTreeSet<usize> = role.keys().copied().collect();
    let cols = columns(dops, &highlighted);
    let (lanes, row) = lanes(dops, &cols, &highlighted);
    let svg = svg(
        dops,
        &cols,
        &lanes,
        &row,
        &role,
        kind,
        &categories,
        &calls,
        uid,
    );
    (
        Diagram {
            svg,
            total: if from_bundle {
                dops.len()
            } else {
                dops.last().map(|d| d.id.saturating_add(1)).unwrap_or(0)
            },
            windowed: dops.len() > MAX_FULL,
        },
        from_bundle,
    )
}

#[allow(clippy::too_many_arguments)]
fn svg(
    dops: &[DOp],
    cols: &[Col],
    lanes: &[Lane],
    row: &BTreeMap<LaneKey, usize>,
    role: &BTreeMap<usize, Role>,
    kind: &str,
    categories: &[String],
    calls: &[Value],
    uid: &str,
) -> String {
    let width = LABEL_W + cols.len().max(1) * COL_W + 16;
    let height = TOP + lanes.len() * LANE_H + 8;
    let bottom = TOP + lanes.len() * LANE_H;
    let cx = |c: usize| LABEL_W + c * COL_W + COL_W / 2;
    let lane_top = |r: usize| TOP + r * LANE_H;
    let box_y = |r: usize| lane_top(r) + 20;
    let mut s = String::new();
    s.push_str(&format!(
        "<svg class=\"protocol\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-labelledby=\"{uid}-t\">\n<title id=\"{uid}-t\">protocol diagram</title>\n"
    ));
    s.push_str(&format!(
        "<defs><marker id=\"{uid}-arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#c62828\"/></marker></defs>\n"
    ));
    // Lanes.
    for (r, l) in lanes.iter().enumerate() {
        let y = lane_top(r);
        let fill = if r % 2 == 0 { "#f6f7f9" } else { "#eceef2" };
        s.push_str(&format!("<rect class=\"lane\" x=\"0\" y=\"{y}\" width=\"{width}\" height=\"{LANE_H}\" fill=\"{fill}\"/>\n"));
        let tip = if l.names.len() > 1 {
            l.names.join(" → ")
        } else {
            l.label.clone()
        };
        s.push_str(&format!(
            "<text class=\"lane-label\" x=\"8\" y=\"{}\"><title>{}</title>{}</text>\n",
            y + LANE_H / 2 + 4,
            esc(&tip),
            esc(&clip(&l.label, 24))
        ));
    }
    s.push_str(&format!("<line x1=\"{LABEL_W}\" y1=\"{TOP}\" x2=\"{LABEL_W}\" y2=\"{bottom}\" stroke=\"#c3c7cf\"/>\n"));
    // Operations (drawn last, over the dependencies).
    let mut boxes = String::new();
    let mut col_of: BTreeMap<usize, usize> = BTreeMap::new();
    for (c, col) in cols.iter().enumerate() {
        match col {
            Col::Gap(n) => {
                let x = cx(c);
                boxes.push_str(&format!(
                    "<g class=\"gap\"><line x1=\"{x}\" y1=\"{TOP}\" x2=\"{x}\" y2=\"{bottom}\" stroke=\"#9aa0aa\" stroke-dasharray=\"2 4\"/><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"18\" rx=\"3\" fill=\"#fff\" stroke=\"#c3c7cf\"/><text x=\"{x}\" y=\"{}\" text-anchor=\"middle\" class=\"gap-label\">… {n} more</text></g>\n",
                    x - (COL_W / 2 - 2),
                    TOP + (bottom - TOP) / 2 - 12,
                    COL_W - 4,
                    TOP + (bottom - TOP) / 2 + 1
                ));
            }
            Col::Ops { first, count } => {
                let d = &dops[*first];
                let last = &dops[first + count - 1];
                let x = cx(c);
                for i in *first..first + count {
                    col_of.entry(i).or_insert(c);
                }
                let ids = if *count > 1 {
                    format!("{}–{}", d.id, last.id)
                } else {
                    d.id.to_string()
                };
                boxes.push_str(&format!("<text class=\"op-id\" x=\"{x}\" y=\"14\" text-anchor=\"middle\">{ids}</text>\n"));
                let r = role.get(first).copied();
                let hl = if r.is_some() { " hl" } else { "" };
                let tip = if *count > 1 {
                    format!(
                        "{}\n… {} alike operations …\n{}",
                        d.detail,
                        count - 2,
                        last.detail
                    )
                } else {
                    d.detail.clone()
                };
                let text = if *count > 1 {
                    format!("{} ×{count}", d.kind)
                } else {
                    d.kind.clone()
                };
                match (&d.lane, d.sync) {
                    (None, _) => {
                        // A whole-file-system sync: a barrier across every lane.
                        let stroke = if r.is_some() { "#c62828" } else { "#1565c0" };
                        boxes.push_str(&format!(
                            "<g class=\"op sync all{hl}\"><title>{}</title><line x1=\"{x}\" y1=\"{TOP}\" x2=\"{x}\" y2=\"{bottom}\" stroke=\"{stroke}\" stroke-width=\"3\" stroke-dasharray=\"6 3\"/><text x=\"{x}\" y=\"{}\" text-anchor=\"middle\" class=\"sync-label\">{}</text></g>\n",
                            esc(&tip),
                            TOP - 4,
                            esc(&clip(&text, 11))
                        ));
                        if let Some(r) = r {
                            boxes.push_str(&role_label(x, TOP + 12, r));
                        }
                    }
                    (Some(k), true) => {
                        let rw = row.get(k).copied().unwrap_or(0);
                        let y = lane_top(rw);
                        let stroke = if r.is_some() {
                            " stroke=\"#c62828\" stroke-width=\"2\""
                        } else {
                            ""
                        };
                        boxes.push_str(&format!(
                            "<g class=\"op sync{hl}\"><title>{}</title><rect x=\"{}\" y=\"{}\" width=\"6\" height=\"{}\" fill=\"#1565c0\"{stroke}/><text x=\"{x}\" y=\"{}\" text-anchor=\"middle\" class=\"sync-label\">{}</text></g>\n",
                            esc(&tip),
                            x - 3,
                            y + 6,
                            LANE_H - 12,
                            y + LANE_H - 1,
                            esc(&clip(&text, 11))
                        ));
                        if let Some(r) = r {
                            boxes.push_str(&role_label(x, y + 12, r));
                        }
                    }
                    (Some(k), false) => {
                        let rw = row.get(k).copied().unwrap_or(0);
                        let y = box_y(rw);
                        let (fill, stroke, sw) = match (r, d.output) {
                            (Some(_), _) => ("#ffebee", "#c62828", "2.5"),
                            (None, true) => ("#fff8e1", "#a1887f", "1"),
                            (None, false) => ("#ffffff", "#7a808a", "1"),
                        };
                        boxes.push_str(&format!(
                            "<g class=\"op{hl}\"><title>{}</title><rect x=\"{}\" y=\"{y}\" width=\"{BOX_W}\" height=\"{BOX_H}\" rx=\"4\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"{sw}\"/><text x=\"{x}\" y=\"{}\" text-anchor=\"middle\" class=\"op-label\">{}</text></g>\n",
                            esc(&tip),
                            x - BOX_W / 2,
                            y + 15,
                            esc(&clip(&text, 11))
                        ));
                        if let Some(r) = r {
                            boxes.push_str(&role_label(x, y - 5, r));
                        }
                    }
                }
            }
        }
    }
    // Dependencies: an arrow from the call that must persist first to the one that must
    // wait for it; a bracket around calls that must persist together.
    let anchor = |pos: usize| -> Option<(usize, usize)> {
        let id = calls.get(pos)?["op"].as_u64()? as usize;
        let at = index_of(dops, id)?;
        let c = *col_of.get(&at)?;
        let y = match &dops[at].lane {
            None => TOP + (bottom - TOP) / 2,
            Some(k) => box_y(row.get(k).copied().unwrap_or(0)) + BOX_H / 2,
        };
        Some((cx(c), y))
    };
    if kind == "ordering" {
        if let (Some((x1, y1)), Some((x2, y2))) = (anchor(0), anchor(1)) {
            let dotted = categories
                .iter()
                .any(|c| c == "safe_rename" || c == "safe_file_flush");
            let dash = if dotted {
                " stroke-dasharray=\"5 4\""
            } else {
                ""
            };
            let path = if y1 == y2 {
                // Same lane: an arc below the boxes.
                let yb = y1 + BOX_H / 2;
                format!("M{x1},{yb} C{x1},{} {x2},{} {x2},{yb}", yb + 22, yb + 22)
            } else {
                let (xa, xb) = (x1 + BOX_W / 2, x2 - BOX_W / 2);
                let xm = (xa + xb) / 2;
                format!("M{xa},{y1} C{xm},{y1} {xm},{y2} {xb},{y2}")
            };
            s.push_str(&format!(
                "<path class=\"dep\" d=\"{path}\" fill=\"none\" stroke=\"#c62828\" stroke-width=\"2\"{dash} marker-end=\"url(#{uid}-arrow)\"><title>must reach disk before</title></path>\n"
            ));
        }
    } else if kind == "across_calls" {
        let hl_cols: Vec<usize> = role.keys().filter_map(|i| col_of.get(i).copied()).collect();
        if let (Some(&a), Some(&b)) = (hl_cols.iter().min(), hl_cols.iter().max()) {
            let x1 = cx(a) - COL_W / 2 + 2;
            let x2 = cx(b) + COL_W / 2 - 2;
            s.push_str(&format!(
                "<g class=\"bracket\"><rect x=\"{x1}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"6\" fill=\"none\" stroke=\"#c62828\" stroke-width=\"1.5\" stroke-dasharray=\"7 4\"/><text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"role\">persist only together</text></g>\n",
                TOP - 2,
                x2 - x1,
                bottom - TOP + 4,
                (x1 + x2) / 2,
                TOP - 22
            ));
        }
    }
    s.push_str(&boxes);
    s.push_str("</svg>");
    s
}

fn role_label(x: usize, y: usize, r: Role) -> String {
    format!(
        "<text class=\"role\" x=\"{x}\" y=\"{y}\" text-anchor=\"middle\">{}</text>\n",
        r.label()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Operations from JSON, as in a bundle's ops.jsonl (robust to new optional fields).
    fn ops(v: Value) -> Vec<Op> {
        serde_json::from_value(v).unwrap()
    }

    /// The key-value store's protocol (examples/kvstore, `intact ops`).
    fn kv() -> Vec<Op> {
        ops(json!([
            {"id":0,"call":22,"pid":1,"tid":1,"syscall":"openat","op":"link","dir":1,"name":"kv.log","inode":2,"link_count":1,"created":true,"path":"kv.log"},
            {"id":1,"call":23,"pid":1,"tid":1,"syscall":"write","op":"append","inode":2,"old_size":0,"new_size":7,"data":{"at":0,"len":7},"path":"kv.log"},
            {"id":2,"call":24,"pid":1,"tid":1,"syscall":"write","op":"append","inode":2,"old_size":7,"new_size":14,"data":{"at":7,"len":7},"path":"kv.log"},
            {"id":3,"call":25,"pid":1,"tid":1,"syscall":"fsync","op":"sync","inode":2,"how":"fsync","path":"kv.log"},
            {"id":4,"call":30,"pid":1,"tid":1,"syscall":"openat","op":"link","dir":1,"name":"table.tmp","inode":3,"link_count":1,"created":true,"path":"table.tmp"},
            {"id":5,"call":31,"pid":1,"tid":1,"syscall":"write","op":"append","inode":3,"old_size":0,"new_size":14,"data":{"at":14,"len":14},"path":"table.tmp"},
            {"id":6,"call":33,"pid":1,"tid":1,"syscall":"rename","op":"rename","src_dir":1,"src_name":"table.tmp","dst_dir":1,"dst_name":"table","inode":3,"replaced":null,"path":"table.tmp","path2":"table"},
            {"id":7,"call":35,"pid":1,"tid":1,"syscall":"fsync","op":"sync","inode":1,"how":"fsync","path":"."},
            {"id":8,"call":37,"pid":1,"tid":1,"syscall":"truncate","op":"truncate","inode":2,"old_size":14,"new_size":0,"path":"kv.log"},
            {"id":9,"call":38,"pid":1,"tid":1,"syscall":"write","op":"output","data":{"at":28,"len":5}}
        ]))
    }

    fn call(index: usize, op: usize, syscall: &str, summary: &str) -> Value {
        json!({"index": index, "op": op, "syscall": syscall, "summary": summary, "location": "kv.c:1:f"})
    }

    #[test]
    fn one_lane_per_file_output_last_renamed_file_keeps_its_lane() {
        let d = from_ops(&kv());
        let cols = columns(&d, &BTreeSet::new());
        assert_eq!(cols.len(), 10, "small protocols are drawn whole: {cols:?}");
        let (lanes, row) = lanes(&d, &cols, &BTreeSet::new());
        let labels: Vec<&str> = lanes.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["kv.log", "table.tmp → table", "./", "stdout"]);
        assert_eq!(row[&LaneKey::Inode(3)], 1);
        assert!(d[3].sync && d[3].kind == "fsync" && d[0].kind == "create");
    }

    #[test]
    fn roles_follow_the_kind() {
        let d = from_ops(&kv());
        let safe_rename = roles(
            "ordering",
            &["safe_rename".into()],
            &[
                call(5, 5, "write", "append table.tmp"),
                call(8, 8, "truncate", "truncate kv.log"),
            ],
            &d,
        )
        .unwrap();
        assert_eq!(
            safe_rename.into_iter().collect::<Vec<_>>(),
            vec![(5, Role::Reordered), (8, Role::PersistedFirst)]
        );
        let dur = roles(
            "ordering",
            &["durability".into()],
            &[
                call(8, 8, "truncate", ""),
                call(9, 9, "write", "output \"Done\\n\""),
            ],
            &d,
        )
        .unwrap();
        assert_eq!(dur[&8], Role::Lost);
        assert_eq!(dur[&9], Role::Printed);
        // Grouped by missing sync: every lost call, then the output.
        let grouped = roles(
            "ordering",
            &["durability".into()],
            &[
                call(5, 5, "write", "append table.tmp"),
                call(8, 8, "truncate", ""),
                call(9, 9, "write", "output \"Done\\n\""),
            ],
            &d,
        )
        .unwrap();
        assert_eq!(
            grouped.into_iter().collect::<Vec<_>>(),
            vec![(5, Role::Lost), (8, Role::Lost), (9, Role::Printed)]
        );
        let torn = roles(
            "atomicity",
            &["append_truncate_atomicity".into()],
            &[call(1, 1, "write", "")],
            &d,
        )
        .unwrap();
        assert_eq!(torn.into_iter().collect::<Vec<_>>(), vec![(1, Role::Torn)]);
        // An op the bundle does not have: the bundle does not match the report.
        assert!(roles("atomicity", &[], &[call(1, 99, "write", "")], &d).is_none());
    }

    #[test]
    fn a_call_with_several_operations_is_highlighted_whole() {
        let mut o = kv();
        // ops 1 and 2 as one write (an overwrite plus an append would look the same).
        o[2].call = o[1].call;
        let d = from_ops(&o);
        let r = roles("atomicity", &[], &[call(1, 1, "write", "")], &d).unwrap();
        assert_eq!(r.keys().copied().collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn long_protocols_are_windowed_around_the_highlighted_operations() {
        // 200 appends to one file, op 100 and op 150 highlighted.
        let mut v = Vec::new();
        for i in 0..200u64 {
            v.push(json!({"id":i,"call":i,"pid":1,"tid":1,"syscall":"write","op":"append","inode":2,"old_size":i,"new_size":i+1,"data":{"at":0,"len":1},"path":"log"}));
        }
        let d = from_ops(&ops(Value::Array(v)));
        let hl: BTreeSet<usize> = [100, 150].into_iter().collect();
        let cols = columns(&d, &hl);
        // Gap, a run of 6 alike appends, the highlighted one, a run of 6, gap, …, gap.
        let shown: usize = cols
            .iter()
            .map(|c| match c {
                Col::Ops { count, .. } => *count,
                Col::Gap(g) => *g,
            })
            .sum();
        assert_eq!(
            shown, 200,
            "every operation is either drawn or counted in a gap: {cols:?}"
        );
        assert_eq!(cols[0], Col::Gap(94));
        assert_eq!(
            cols[1],
            Col::Ops {
                first: 94,
                count: 6
            }
        );
        assert_eq!(
            cols[2],
            Col::Ops {
                first: 100,
                count: 1
            }
        );
        assert_eq!(
            cols[3],
            Col::Ops {
                first: 101,
                count: 6
            }
        );
        assert_eq!(cols[4], Col::Gap(37));
        assert_eq!(*cols.last().unwrap(), Col::Gap(43));
        // The SVG says so.
        let v = json!({"kind":"atomicity","categories":["append_truncate_atomicity"],"calls":[call(100, 100, "write", "append log")]});
        let all = ops(Value::Array((0..200u64).map(|i| json!({"id":i,"call":i,"pid":1,"tid":1,"syscall":"write","op":"append","inode":2,"old_size":i,"new_size":i+1,"data":{"at":0,"len":1},"path":"log"})).collect()));
        let (dg, from_bundle) = draw(&v, Some(&from_ops(&all)), "t");
        assert!(from_bundle && dg.windowed && dg.total == 200);
        assert!(
            dg.svg.contains("… 94 more")
                && dg.svg.contains("append ×6")
                && dg.svg.contains(">torn<"),
            "{}",
            dg.svg
        );
    }

    /// A big protocol (100,000 operations, 1,000 files) and a group of 2,000 calls: drawn
    /// within bounds, quickly.
    #[test]
    fn huge_protocols_stay_bounded() {
        let v: Vec<Value> = (0..100_000u64).map(|i| json!({"id":i,"call":i,"pid":1,"tid":1,"syscall":"write","op":"append","inode":2+i%1000,"old_size":0,"new_size":1,"data":{"at":0,"len":1},"path":format!("f{}", i%1000)})).collect();
        let d = from_ops(&ops(Value::Array(v)));
        let calls: Vec<Value> = (50_000..52_000)
            .map(|i| call(i, i, "write", "append f"))
            .collect();
        let t = std::time::Instant::now();
        let (dg, from_bundle) = draw(
            &json!({"kind":"across_calls","categories":["across_calls_atomicity"],"calls":calls}),
            Some(&d),
            "v1",
        );
        assert!(from_bundle && dg.windowed);
        // The first column is the gap before the window (ops 0..49994), the last one what
        // the column cap cut (every operation after the 148 drawn).
        assert_eq!(dg.svg.matches("class=\"op-id\"").count(), MAX_COLS - 2);
        assert!(
            dg.svg.contains("… 49994 more") && dg.svg.contains("… 49858 more"),
            "{}",
            dg.svg.len()
        );
        assert_eq!(dg.svg.matches("class=\"lane-label\"").count(), MAX_LANES);
        assert!(
            dg.svg.contains("other files</text>"),
            "the files beyond the lane cap share one"
        );
        assert!(dg.svg.len() < 200_000, "{}", dg.svg.len());
        assert!(t.elapsed().as_secs() < 10, "{:?}", t.elapsed());
    }

    #[test]
    fn many_files_share_a_lane_but_highlighted_ones_keep_theirs() {
        let mut v = Vec::new();
        for i in 0..30u64 {
            v.push(json!({"id":i,"call":i,"pid":1,"tid":1,"syscall":"write","op":"append","inode":100+i,"old_size":0,"new_size":1,"data":{"at":0,"len":1},"path":format!("f{i}")}));
        }
        let d = from_ops(&ops(Value::Array(v)));
        let hl: BTreeSet<usize> = [29].into_iter().collect();
        let cols = columns(&d, &hl);
        let (lanes, row) = lanes(&d, &cols, &hl);
        assert_eq!(lanes.len(), MAX_LANES);
        assert_eq!(
            lanes.last().unwrap().label,
            format!("{} other files", 30 - (MAX_LANES - 1))
        );
        assert_ne!(
            lanes[row[&LaneKey::Inode(129)]].key,
            LaneKey::Others,
            "the highlighted file keeps its lane"
        );
    }

    #[test]
    fn without_the_bundle_the_calls_alone_are_drawn_with_gaps() {
        let v = json!({"kind":"ordering","categories":["safe_rename"],"calls":[
            call(5, 5, "write", "append    table.tmp size 0 -> 14 \"x\" (inode 3)"),
            call(8, 8, "truncate", "truncate  kv.log size 14 -> 0 (inode 2)")]});
        let (dg, from_bundle) = draw(&v, None, "v3");
        assert!(!from_bundle);
        let s = &dg.svg;
        assert!(s.contains("… 5 more") && s.contains("… 2 more"), "{s}");
        assert!(
            s.contains(">reordered<") && s.contains(">persisted<"),
            "{s}"
        );
        assert!(s.contains("table.tmp") && s.contains("kv.log"));
        // The dependency arrow, dotted for a safe rename, with this diagram's own marker.
        assert!(
            s.contains("class=\"dep\"")
                && s.contains("stroke-dasharray=\"5 4\"")
                && s.contains("url(#v3-arrow)"),
            "{s}"
        );
        // A bundle that does not match the report falls back to the calls.
        let (_, from_bundle) = draw(
            &json!({"kind":"atomicity","calls":[call(0, 42, "write", "append x")]}),
            Some(&from_ops(&kv())),
            "v1",
        );
        assert!(!from_bundle);
    }

    #[test]
    fn whole_file_system_sync_is_a_barrier_across_lanes() {
        let mut o = kv();
        o[3] = ops(json!([{"id":3,"call":25,"pid":1,"tid":1,"syscall":"sync","op":"sync","inode":null,"how":"sync"}])).remove(0);
        let d = from_ops(&o);
        assert!(d[3].lane.is_none() && d[3].sync);
        let (dg, _) = draw(
            &json!({"kind":"across_calls","categories":["across_calls_atomicity"],"calls":[call(1, 1, "write", ""), call(2, 2, "write", "")]}),
            Some(&from_ops(&o)),
            "v1",
        );
        assert!(dg.svg.contains("class=\"op sync all\""), "{}", dg.svg);
        assert!(dg.svg.contains("persist only together"));
    }

    #[test]
    fn names_are_escaped_in_the_svg() {
        let o = ops(
            json!([{"id":0,"call":1,"pid":1,"tid":1,"syscall":"write","op":"append","inode":2,"old_size":0,"new_size":1,"data":{"at":0,"len":1},"path":"<a href=\"x\">&'"}]),
        );
        let (dg, _) = draw(
            &json!({"kind":"atomicity","calls":[call(0, 0, "write", "")]}),
            Some(&from_ops(&o)),
            "v1",
        );
        assert!(
            dg.svg.contains("&lt;a href=&quot;x&quot;&gt;&amp;&#39;"),
            "{}",
            dg.svg
        );
        assert!(!dg.svg.contains("<a href"));
    }
}
