#!/usr/bin/env python3
"""Writes docs/study.md from the study's results (study/out/*/{meta,report}.json) and the
hand analysis in study/<app>/verdicts.toml.

A verdict entry matches a static vulnerability of its application when every regular
expression in `match` finds the vulnerability's title (locations, with the repository
path replaced by `.`) or its calls' summaries; `configs` limits it to some configurations.
Fields: verdict (real-bug | documented | model-artefact), why (the argument), repro (a
one-line command; {crash} is the saved crash state, {stdout} what the workload printed),
intactfs (why the vulnerability remains under the intactfs APM, for those it exposes;
shown in the Table 5.2(a) analog), and the four-way classification (issue 32):
class (exposed | posix-only | known | documented; derived when absent, see classify),
upstream (the issue, commit or list thread, for known), source (the document and section,
for documented), image (a block-level crash image showing it on a real file system).
Vulnerabilities no entry matches are listed as "not analysed" so the gap is visible."""
import argparse
import json
import os
import re
import sys
import time
import tomllib
from pathlib import Path

# The thesis' six models (Table 4.4's columns, in its order), today's validated kernel models
# (docs/validation.md), then the reference model and intactfs's promise.
THESIS_APMS = ["ext3-j", "ext3-o", "ext3-w", "ext4-o", "btrfs", "default"]
TODAY_APMS = ["ext4", "ext4-dioread_lock", "xfs", "btrfs-linux6"]
APMS = THESIS_APMS + TODAY_APMS + ["strict", "intactfs"]
CATS = [
    ("across_calls_atomicity", "Across calls"),
    ("append_truncate_atomicity", "Appends/truncates"),
    ("overwrite_atomicity", "Overwrites"),
    ("rename_unlink_atomicity", "Renames/unlinks"),
    ("safe_file_flush", "Safe file flush"),
    ("safe_rename", "Safe rename"),
    ("other_ordering", "Other ordering"),
    ("durability", "Durability"),
]
CONSEQUENCES = ["silent-error", "data-loss", "cannot-open", "failed-reads-writes", "other"]
# Thesis 004 Table 4.4 whole, in its row order: (thesis row, its counts under THESIS_APMS
# (blank cells are 0), the prefix of the runs it stands beside in the per-APM table, the
# run that stands for it in the side-by-side table, why there is none when the output has no
# such run).
# The run is the configuration closest to the thesis': Debian's default synchronous
# setting for SQLite, git with core.fsync=all (the thesis ran git with stronger options
# than its defaults), GDBM without GDBM_SYNC (the thesis' GDBM durability loss is a
# missing fsync on a file).
TABLE_44 = [
    ("Leveldb1.10", [1, 1, 3, 2, 4, 10], None, None, "one version today (1.23) stands for both: see Leveldb1.15"),
    ("Leveldb1.15", [1, 1, 2, 2, 3, 6], "leveldb", "leveldb", None),
    ("LMDB", [0, 0, 0, 0, 0, 1], "lmdb", "lmdb", None),
    ("GDBM", [2, 3, 3, 3, 4, 5], "gdbm", "gdbm", None),
    ("HSQLDB", [0, 0, 0, 0, 4, 10], "hsqldb", "hsqldb", None),
    ("Sqlite-Roll", [1, 1, 1, 1, 1, 1], "sqlite-rollback", "sqlite-rollback-full", None),
    ("Sqlite-WAL", [0, 0, 0, 0, 0, 0], "sqlite-wal", "sqlite-wal-full", None),
    ("PostgreSQL", [0, 0, 0, 0, 0, 1], "postgres", "postgres", None),
    ("Git", [2, 2, 2, 2, 5, 9], "git", "git-fsync", None),
    ("Mercurial", [3, 3, 4, 6, 8, 10], "mercurial", "mercurial", None),
    ("VMWare", [0, 0, 0, 0, 0, 1], None, None, "out of reach: the player is proprietary"),
    ("HDFS", [0, 0, 0, 0, 1, 2], "hdfs", "hdfs",
     "not run to the end yet: its check takes hours here (`study/hdfs/README.md`, \"Results\")"),
    ("ZooKeeper", [0, 1, 1, 1, 1, 4], "zookeeper", "zookeeper", None),
]
# The thesis' counts of the runs named by a prefix (`sqlite-rollback` for every SQLite
# rollback configuration), for the per-APM table.
THESIS = {prefix: (row, counts) for row, counts, prefix, _run, _why in TABLE_44 if prefix}
# Thesis 004 Table 5.2(a) (ALICE; ext4 vs c2fs, i.e. intactfs's promise; newer application
# versions than Table 4.4; durability not checked for Git, which never calls fsync in its
# default configuration, the one Table 5.2 uses).
THESIS_52 = {
    "sqlite-rollback": ("SQLite-Roll", 0, 0),
    "leveldb": ("LevelDB", 1, 0),
    "git": ("Git", 2, 0),
    "mercurial": ("Mercurial", 5, 2),
    "zookeeper": ("ZooKeeper", 1, 0),
}
VERDICTS = {"real-bug": "against the application", "documented": "documented behaviour", "model-artefact": "artefact of the model"}
# APMs with 0 forbidden crash images at block level on Linux 6.18 (docs/validation.md).
# ext3-j/-o/-w (no ext3 driver any more) and default (POSIX's weakest reading) were never
# validated; the thesis' ext4-o and btrfs failed validation (today's kernels leave images
# they forbid); strict is a lower bound by construction.
VALIDATED_APMS = TODAY_APMS + ["intactfs"]
# The four classes (issue 32), in precedence order: a vulnerability the application
# documents (or that only a checker stricter than its documentation reports) is not its
# bug; one already reported upstream is not new; one no validated model exposes rests on
# POSIX's weakest reading only. What is left is new.
CLASSES = {
    "documented": "(4) documented behaviour or checker stricter",
    "known": "(3) known upstream",
    "posix-only": "(2) POSIX-only or unvalidated model",
    "exposed": "(1) exposed on a validated file system, new",
}
CLASS_ORDER = ["exposed", "posix-only", "known", "documented"]


def thesis_row(name, table=THESIS):
    for k, v in table.items():
        if name == k or name.startswith(k + "-"):
            return v
    return None


def consequence(msg):
    m = re.search(r"consequence: ([a-z-]+): ?(.*)", msg)
    if not m:
        return ("other", msg.strip().splitlines()[-1] if msg.strip() else "")
    cls = m.group(1) if m.group(1) in CONSEQUENCES else "other"
    return (cls, m.group(2).strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--doc", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    here = Path(__file__).resolve().parent
    root = here.parent
    runs = []
    for meta in sorted(out.glob("*/meta.json")):
        m = json.load(open(meta))
        d = meta.parent
        if not m.get("failed"):
            m["report"] = json.load(open(d / "report.json"))
        m["dir"] = d
        runs.append(m)
    if not runs:
        sys.exit(f"report.py: no results under {out} (run study/run.sh first)")
    verdicts = {}
    for r in runs:
        vf = here / r["app"] / "verdicts.toml"
        if r["app"] not in verdicts:
            verdicts[r["app"]] = tomllib.load(open(vf, "rb")).get("vuln", []) if vf.exists() else []

    built = re.compile(re.escape(str(out)) + r"/build/[^/]+/(?:src/tree|leveldb-src/tree|amalgamation)/")

    def norm(s):
        # Sources built by the study read as their own paths (sqlite3.c:1234, refs/files-backend.c:...).
        return built.sub("", s).replace(str(root) + "/", "./").replace(str(out) + "/", "study/out/")

    L = []
    w = L.append
    # Runs may come from several study/run.sh invocations (--apps): the sum of their record
    # and check times, not the last invocation's wall time.
    total = round(sum(r.get("record_seconds", 0) + r.get("check_seconds", 0) for r in runs), 1)
    w("# The application study (thesis 004, chapter 4, today's versions)\n")
    w("Generated by `bash study/run.sh" + (" --quick" if a.quick else "") + "` (`study/report.py`); do not edit by hand: "
      "edit `study/<app>/verdicts.toml` and rerun `python3 study/report.py --out study/out --doc docs/study.md`.\n")
    w(f"Every application's workload was recorded with `intact record` and explored under {len(APMS)} built-in APMs "
      f"(the thesis' six models, under their thesis names; the models of today's kernels, "
      + ", ".join(f"`{a}`" for a in TODAY_APMS) + ", validated on Linux 6.18 ([validation.md](validation.md)); "
      f"`strict` and `intactfs`) "
      f"with `intact check --explore alice` and the application's own checker. Time, the runs' record and check times summed: **{total} s** "
      f"(2-core VM; `-j {runs[0].get('jobs', '?')}`).\n")
    w("## Runs\n")
    w("| run | what | version | logical ops | distinct states | failing | static vulns | record s | check s |")
    w("|---|---|---|---|---|---|---|---|---|")
    for r in runs:
        if r.get("failed"):
            w(f"| {r['name']} | **run failed** (see `study/out/{r['name']}/`) | | | | | | | |")
            continue
        rep = r["report"]
        ops = sum(1 for _ in open(r["dir"] / "bundle" / "ops.jsonl")) if (r["dir"] / "bundle" / "ops.jsonl").exists() else "?"
        distinct = sum(s["checked"] for s in rep["apms"])
        failing = sum(s["failed"] for s in rep["apms"])
        w(f"| {r['name']} | {r['title']} | {r['version']} | {ops} | {distinct} | {failing} | {len(rep['static'])} "
          f"| {r['record_seconds']:.1f} | {r['check_seconds']:.1f} |")
    w("\n`distinct states` counts the states the checker ran on (each distinct state once across the APMs).\n")

    done = [r for r in runs if not r.get("failed")]
    # The hand verdict of every static vulnerability, by (run, id).
    verdict_of = {(r["name"], s["id"]): match(verdicts[r["app"]], r, s, norm) for r in done for s in r["report"]["static"]}

    def per_run_table(columns, cells):
        w("| run | " + " | ".join(columns) + " |")
        w("|---|" + "---|" * len(columns))
        for r in done:
            w(f"| {r['name']} | " + " | ".join(cells(r)) + " |")
        w("")

    def per_apm(r):
        th = thesis_row(r["name"])
        for apm in APMS:
            n = sum(1 for s in r["report"]["static"] if apm in s["apms"])
            yield f"{n} [{th[1][THESIS_APMS.index(apm)]}]" if th and apm in THESIS_APMS else str(n)

    def per_category(r):
        st = [s for s in r["report"]["static"] if "default" in s["apms"]]
        return [str(sum(1 for s in st if c in s["categories"]) or "") for c, _ in CATS] + [str(len(st))]

    def per_consequence(r):
        got = [consequence(s["example"]["checker_message"])[0] for s in r["report"]["static"]]
        return [str(got.count(c) or "") for c in CONSEQUENCES]

    w("## Static vulnerabilities per APM (Table 4.4 analog)\n")
    w("Each cell: static vulnerabilities exposed under that APM (thesis 004 Table 4.4, where the application was in it, in brackets).\n")
    per_run_table(APMS, per_apm)
    side_by_side_section(w, done, here)
    changes_ok = changes_section(w, done, here, verdict_of)
    # This run's counts in study/previous.json's form, for the next run to compare with.
    json.dump({"source": f"study/out written by study/run.sh, report.py run of {time.strftime('%Y-%m-%d')}",
               "runs": {r["name"]: run_counts(r, verdict_of) for r in done}},
              open(out / "counts.json", "w"), indent=1)
    promise_section(w, done, verdict_of, norm, a.quick)
    w("## Categories under the default APM (Table 4.2 analog)\n")
    per_run_table([c[1] for c in CATS] + ["unique"], per_category)
    w("## Consequences (Table 4.3 analog)\n")
    w("From the checker's `consequence:` line on each vulnerability's example state; all APMs.\n")
    per_run_table(CONSEQUENCES, per_consequence)

    classification_section(w, done, verdict_of)

    w("## Every static vulnerability\n")
    w("For each: the source locations, the calls, the APMs that expose it, the consequence the checker "
      "reported on the saved example state, the verdict and its argument, and a command that shows the "
      "consequence on a temporary copy of the saved state (`study/out/<run>/failing/v<N>/crash`, "
      "written by `study/run.sh`; `.../README` reruns the checker).\n")
    for r in done:
        w(f"### {r['name']}\n")
        w(f"{r['title']}. Workload, checker and expectations: [`study/{r['app']}/README.md`](../study/{r['app']}/README.md).\n")
        if not r["report"]["static"]:
            w("No static vulnerability under any APM.\n")
        for s in r["report"]["static"]:
            v = verdict_of[(r["name"], s["id"])]
            cls, detail = consequence(s["example"]["checker_message"])
            cats = ", ".join(dict(CATS).get(c, c) for c in s["categories"])
            w(f"**#{s['id']}** [{cats}] {md(norm(title(s)))}  ")
            w(f"APMs: {', '.join(s['apms'])}; dynamic vulnerabilities: {len(s['dynamic'])}  ")
            calls = "; ".join(f"call {c['index']}: `{trunc(c['summary'])}`" for c in s["calls"])
            w(f"Calls: {calls}  ")
            lay = layer(s["example"]["checker_message"])
            w(f"Consequence: **{cls}** — {md(trunc(detail, 200))}" + (f" (checker layer: {lay})" if lay else "") + "  ")
            crash = f"study/out/{r['name']}/failing/v{s['id']}/crash"
            cls_name, evidence = classify(v, s)
            w(f"Class: **{CLASSES[cls_name] if cls_name else 'not analysed'}**" + (f" — {evidence}" if evidence else "") + "  ")
            if v:
                w(f"Verdict: **{VERDICTS.get(v['verdict'], v['verdict'])}** — {v['why'].strip()}  ")
                if v.get("repro"):
                    # On a copy: opening a crashed database recovers it in place.
                    cmd = v["repro"].replace("{crash}", "$c").replace("{stdout}", f"study/out/{r['name']}/failing/v{s['id']}/stdout")
                    w(f"Reproduce: `c=$(mktemp -d) && cp -a {crash}/. $c && {{ {cmd}; }}; rm -rf $c`")
            else:
                w(f"Verdict: **not analysed**  ")
                w(f"Reproduce: `cat study/out/{r['name']}/failing/v{s['id']}/README`")
            w("")
    comp = here / "comparison.md"
    if comp.exists():
        w(comp.read_text())
    Path(a.doc).write_text("\n".join(L) + "\n")
    print(f"report.py: wrote {a.doc}", file=sys.stderr)
    # The CI subset (--quick) marks an unexplained change but does not fail on it: a full
    # run is where the study's counts are accepted.
    if not changes_ok and not a.quick:
        sys.exit("report.py: some runs changed since study/previous.json with no explanation in "
                 "study/changes.toml (marked **not explained** in the doc): add a [runs.<run>] why = ...")


def side_by_side_section(w, done, here):
    """Thesis Table 4.4 row by row beside today's runs, with today's ext4 model (issue 30
    item 4): what changed since 2014; why, application by application, is in the
    comparison at the end."""
    by_name = {r["name"]: r for r in done}

    def count(r, apm):
        return sum(1 for s in r["report"]["static"] if apm in s["apms"])

    w("## Table 4.4 side by side (all of the thesis' applications)\n")
    w("Every row of thesis 004 Table 4.4 (blank cells there are 0), with the run that stands for it today: "
      "each cell is today's count with the thesis' in brackets, and `ext4` is today's validated ext4 model "
      "(the thesis had none). Why each changed: [Comparison with the thesis](#comparison-with-the-thesis-table-44-2014-versions).\n")
    w("| thesis row | run today | " + " | ".join(THESIS_APMS) + " | ext4 (today) |")
    w("|---|---|" + "---|" * (len(THESIS_APMS) + 1))
    ours = [0] * len(THESIS_APMS)
    theirs = [0] * len(THESIS_APMS)
    ext4 = 0
    for row, thesis, _prefix, run, why in TABLE_44:
        assert len(thesis) == len(THESIS_APMS), row
        r = by_name.get(run) if run else None
        if r is None:
            app = run.split("-")[0] if run else None
            if why:
                note = why
            elif not (here / app / "study.sh").exists():
                note = f"not studied yet (no `study/{app}/`)"
            else:
                note = f"not in this output (no `study/out/{run}`)"
            w(f"| {row} | {note} | " + " | ".join(f"– [{t}]" for t in thesis) + " | – |")
            continue
        got = [count(r, apm) for apm in THESIS_APMS]
        ours = [a + b for a, b in zip(ours, got)]
        theirs = [a + b for a, b in zip(theirs, thesis)]
        ext4 += count(r, "ext4")
        w(f"| {row} | {run} | " + " | ".join(f"{g} [{t}]" for g, t in zip(got, thesis)) + f" | {count(r, 'ext4')} |")
    w("| **Total of the rows run today** | | " + " | ".join(f"**{g}** [{t}]" for g, t in zip(ours, theirs)) + f" | **{ext4}** |")
    w("")


def classify(v, s):
    """(class, evidence) of static vulnerability `s` whose verdict entry is `v`: the entry's
    `class` when it states one, else 'documented' for a documented verdict, else by the APMs
    that expose it: 'exposed' when a validated APM does, 'posix-only' otherwise. (None, "")
    when no entry matches."""
    if not v:
        return (None, "")
    validated = [a for a in VALIDATED_APMS if a in s["apms"]]
    cls = v.get("class") or ("documented" if v["verdict"] == "documented" else "exposed" if validated else "posix-only")
    if cls not in CLASSES:
        sys.exit(f"report.py: verdicts.toml entry {v['match']}: unknown class {cls!r} (one of {', '.join(CLASSES)})")
    if cls == "known" and not v.get("upstream"):
        sys.exit(f"report.py: verdicts.toml entry {v['match']}: class = 'known' needs upstream = '...'")
    parts = []
    for key, label in (("upstream", "upstream"), ("source", "documented in"), ("image", "seen on")):
        if v.get(key):
            parts.append(f"{label}: {' '.join(v[key].split())}")
    if validated:
        parts.append(f"validated APMs exposing it: {', '.join(validated)}")
    else:
        parts.append("no validated APM exposes it (only " + ", ".join(s["apms"]) + ")")
    return (cls, "; ".join(parts))


def layer(msg):
    """The checker layer ('documented' or 'lay') of the rule behind a failing state, from the
    `layer: ...` line two-layer checkers print (study/README.md); None for older checkers."""
    m = re.search(r"^layer: (documented|lay)$", msg, re.M)
    return m.group(1) if m else None


def layer_cells(r):
    """Per run: how many static vulnerabilities' example states fail a documented rule, and
    how many fail only lay rules; '—' when the run's checker does not report layers."""
    got = [layer(s["example"]["checker_message"]) for s in r["report"]["static"] if s.get("example")]
    if not any(got):
        return ["—", "—"]
    return [str(got.count("documented")), str(got.count("lay"))]


def classification_section(w, done, verdict_of):
    """The four-way classification (issue 32) of every static vulnerability, per run, beside
    the thesis' Table 4.4 counts."""
    w("## Every vulnerability classified four ways (replaces the thesis' single count)\n")
    w("Each static vulnerability gets one class, the first that applies: (4) the application "
      "documents the behaviour, or only a checker rule stricter than the application's "
      "documentation reports it; (3) already reported upstream (issue, commit or list thread "
      "named in `study/<app>/verdicts.toml` and below); (2) exposed only by APMs that no Linux file "
      "system's crash images were shown to keep (`default`, `ext3-j`, `ext3-o`, `ext3-w`: never "
      "validated; the thesis' `ext4-o` and `btrfs`: today's kernels leave images they forbid; "
      "[validation.md](validation.md)); (1) exposed by a validated APM (" + ", ".join(VALIDATED_APMS) +
      ": 0 forbidden images on Linux 6.18) and not known upstream: only these are called new. The validator checks that a file "
      "system's crash images fall within its APM, not that it produces every state the APM "
      "allows, so (1) means *allowed by a validated model*; a block-level image that shows it is "
      "named where one exists. Thesis Table 4.4 (ext3-j/ext3-o/ext3-w/ext4-o/btrfs/default) for "
      "comparison; it counted every vulnerability as one kind.\n")
    w("The last two columns count the vulnerabilities' example states by the checker layer "
      "behind their consequence: a documented guarantee (cited next to the rule in the "
      "checker) fails, or only lay expectations do (the checker's `layer:` line; — for a run "
      "made before the checkers had layers).\n")
    w("| run | thesis Table 4.4 | static vulns | " + " | ".join(CLASSES[c] for c in CLASS_ORDER) + " | not analysed | documented layer | lay layer only |")
    w("|---|---|---|" + "---|" * (len(CLASS_ORDER) + 3))
    tot = {c: 0 for c in CLASS_ORDER + [None]}
    for r in done:
        got = [classify(verdict_of[(r["name"], s["id"])], s)[0] for s in r["report"]["static"]]
        for c in tot:
            tot[c] += got.count(c)
        th = thesis_row(r["name"])
        thesis = "/".join(map(str, th[1])) if th else ""
        w(f"| {r['name']} | {thesis} | {len(got)} | " + " | ".join(str(got.count(c)) for c in CLASS_ORDER + [None])
          + " | " + " | ".join(layer_cells(r)) + " |")
    w(f"| **total** | | {sum(tot.values())} | " + " | ".join(str(tot[c]) for c in CLASS_ORDER + [None]) + " | | |")
    w("")


def run_counts(r, verdict_of):
    """The counts study/previous.json keeps for a run, measured now."""
    rep = r["report"]
    classes = [classify(verdict_of[(r["name"], s["id"])], s)[0] for s in rep["static"]]
    return {
        "distinct_states": sum(s["checked"] for s in rep["apms"]),
        "failing": sum(s["failed"] for s in rep["apms"]),
        "static": len(rep["static"]),
        "per_apm": {a: sum(1 for s in rep["static"] if a in s["apms"]) for a in APMS},
        "classes": {CLASSES[c]: classes.count(c) for c in CLASS_ORDER} | {"not analysed": classes.count(None)},
    }


def count_changes(before, now):
    """Human-readable 'what: before → now' items for every count that differs; counts the
    previous run did not have (today's APMs) are not changes."""
    items = [f"{k.replace('_', ' ')} {before[k]} → {now[k]}" for k in ("distinct_states", "failing", "static") if before[k] != now[k]]
    for group in ("per_apm", "classes"):
        items += [f"{k} {v} → {now[group][k]}" for k, v in before[group].items() if now[group].get(k) != v]
    return items


def per_call_cell(r, before):
    """The run's static count in the per-call view (study/per-call.sh) and its per-APM
    counts where they differ from the grouped view's; '' when not measured."""
    f = r["dir"] / "per-call.json"
    if not f.exists():
        return "not measured"
    st = json.load(open(f))["static"]
    grouped = r["report"]["static"]
    cells = [str(len(st))]
    for a in before["per_apm"]:
        n, g = sum(1 for s in st if a in s["apms"]), sum(1 for s in grouped if a in s["apms"])
        if n != g:
            cells.append(f"{a} {n}")
    return "; ".join(cells)


def changes_section(w, done, here, verdict_of):
    """New counts beside the previous run's (study/previous.json) and the thesis', each
    changed run with its explanation from study/changes.toml. False when one is missing."""
    prev_f, why_f = here / "previous.json", here / "changes.toml"
    if not prev_f.exists():
        return True
    prev = json.load(open(prev_f))
    notes = tomllib.load(open(why_f, "rb")) if why_f.exists() else {}
    w("## Changes since the previous study run\n")
    w(f"Previous counts: {prev['source']} (`study/previous.json`). Each run whose counts changed, "
      "every changed count as before → now (thesis Table 4.4 per APM in the table above), and why "
      "(`study/changes.toml`). Reasons that apply to many runs:\n")
    for key, text in notes.get("reasons", {}).items():
        w(f"- **{key}**: {' '.join(text.split())}")
    w("")
    w("The third column is the same run with durability in the per-call view (`--group per-call`, "
      "one vulnerability per call before an output, as the previous run counted; `bash study/per-call.sh`): "
      "what remains of a change there is not the grouping by missing sync.\n")
    w("| run | changed: before → now | per-call view: static, and per APM where it differs | why |")
    w("|---|---|---|---|")
    ok = True
    for r in done:
        before = prev["runs"].get(r["name"])
        if before is None:
            w(f"| {r['name']} | new run | | {' '.join(notes.get('runs', {}).get(r['name'], {}).get('why', 'not in the previous run').split())} |")
            continue
        items = count_changes(before, run_counts(r, verdict_of))
        if not items:
            continue
        why = notes.get("runs", {}).get(r["name"], {}).get("why")
        ok &= why is not None
        w(f"| {r['name']} | {md('; '.join(items))} | {per_call_cell(r, before)} | {' '.join(why.split()) if why else '**not explained**'} |")
    w("")
    return ok


def apm_kind(r, s, apm):
    """'durability' when every dynamic vulnerability of `s` under `apm` is one, else 'ordering'
    (ordering or atomicity); None when `apm` does not expose `s`."""
    cats = {r["report"]["dynamic"][i]["category"] for i in s["dynamic"] if r["report"]["dynamic"][i]["apm"] == apm}
    if not cats:
        return None
    return "durability" if cats == {"durability"} else "ordering"


def promise_section(w, done, verdict_of, norm, quick):
    """The Table 5.2(a) analog: what intactfs's promise leaves of each run's vulnerabilities."""
    cmp = ["ext4-o", "ext4", "default", "intactfs"]
    w("## intactfs's promise, checked (thesis Table 5.2(a) analog)\n")
    w("`--apm intactfs` (`intact apm show intactfs`; [docs/intactfs-promise.md](intactfs-promise.md)) states what "
      "intactfs promises an unmodified application: one stream, so every update persists in program order; each "
      "call weakly atomic (directory operations whole, data whole per 4 KiB block, appends content-atomic); a sync "
      "makes everything before it durable. Each cell: static vulnerabilities that APM exposes, split into "
      "ordering/atomicity (every category but durability) and durability. A durability vulnerability names a sync "
      "that is missing before an output (every call since the last sync, grouped: `--group sync`, the default), "
      "under every APM alike; an ordered file system such as intactfs removes ordering vulnerabilities, not "
      "missing syncs. `ext4-o` is the thesis' model of ext4, `ext4` today's validated one. Thesis 004 Table 5.2(a) (ALICE with "
      "ext4's and c²fs's models, newer application versions than Table 4.4, durability not checked for Git) in "
      "brackets as ext4 → c²fs, for the applications it has; it counted Git in its default configuration. "
      f"Measured by `bash study/run.sh{' --quick' if quick else ''} --jobs {done[0].get('jobs', '?') if done else '?'}`, "
      "which runs `intact check --explore alice --apm " + ",".join(APMS) + "` on each run's bundle.\n")
    w("| run | " + " | ".join(f"{a}: ordering/atomicity | {a}: durability" for a in cmp) + " | thesis 5.2(a) ext4 → c²fs |")
    w("|---|" + "---|" * (2 * len(cmp) + 1))
    tot = {(a, k): 0 for a in cmp for k in ("ordering", "durability")}
    for r in done:
        cells = []
        for a in cmp:
            kinds = [apm_kind(r, s, a) for s in r["report"]["static"]]
            for k in ("ordering", "durability"):
                n = kinds.count(k)
                tot[(a, k)] += n
                cells.append(str(n))
        th = thesis_row(r["name"], THESIS_52)
        if r["name"].startswith("git-"):
            th = None  # Table 5.2 used git's default configuration only
        cells.append(f"{th[0]}: {th[1]} → {th[2]}" if th else "")
        w(f"| {r['name']} | " + " | ".join(cells) + " |")
    w("| **total** | " + " | ".join(str(tot[(a, k)]) for a in cmp for k in ("ordering", "durability")) + " | |")
    w("")
    left = [(r, s) for r in done for s in r["report"]["static"] if "intactfs" in s["apms"]]
    if not left:
        w("No vulnerability remains under intactfs.\n")
        return
    w("Why each vulnerability that intactfs's promise leaves remains (`intactfs` in `study/<app>/verdicts.toml`):\n")
    for r, s in left:
        v = verdict_of[(r["name"], s["id"])]
        why = (v or {}).get("intactfs", "").strip() or "**not explained** (add `intactfs = ...` to the matching entry of " \
            f"`study/{r['app']}/verdicts.toml`)"
        kind = "durability" if apm_kind(r, s, "intactfs") == "durability" else "ordering/atomicity"
        w(f"- **{r['name']} #{s['id']}** ({kind}) {md(norm(title(s)))}: {' '.join(why.split())}")
    w("")


def title(s):
    # Reports written since the JSON carried "title" (intact-report/1, docs/report.md); the
    # derivation below is for saved reports from before.
    if s.get("title"):
        return s["title"]
    if s["kind"] == "across_calls":
        return f"calls from {' to '.join(s['locations'])} persist only together"
    if s["kind"] == "atomicity":
        return f"{s['locations'][0]} is not atomic"
    return f"{s['locations'][0]} must reach disk before {s['locations'][1] if len(s['locations']) > 1 else ''}"


def match(entries, r, s, norm):
    text = norm(title(s)) + "\n" + "\n".join(c["summary"] for c in s["calls"]) + "\n" + " ".join(s["categories"])
    for e in entries:
        if "configs" in e and r["config"] not in e["configs"]:
            continue
        pats = e["match"] if isinstance(e["match"], list) else [e["match"]]
        if all(re.search(p, text) for p in pats):
            return e
    return None


def trunc(s, n=120):
    s = s.replace("\n", " ")
    return s if len(s) <= n else s[: n - 1] + "…"


def md(s):
    return s.replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*").replace("_", "\\_")


if __name__ == "__main__":
    main()
