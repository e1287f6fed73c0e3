#!/usr/bin/env bash
# CI subset of the application study: runs `study/run.sh --quick` into a temporary
# directory and checks known answers (thesis 004 §4.4 where it has them):
#   - SQLite rollback + synchronous=FULL: the journal unlink's durability vulnerability
#     (pager_end_transaction), under every APM including ext3-j (thesis: Sqlite-Roll, 1)
#     and intactfs (ordering cannot make an unsynced unlink durable);
#   - dbm.dumb: the index rewrite in _commit needs atomicity across calls; reported at
#     dbm/dumb.py lines (Python frames kept with --frame-keep); it remains under intactfs,
#     and nothing else but durability does (intactfs keeps every update in order), while
#     ext4-o has ordering vulnerabilities;
#   - every static vulnerability has a saved example state on which the checker fails again;
#   - python-dbm's checker runs as a warm server (--checker-server) and gives the report a
#     per-process run gives;
#   - the checkers are two-layered: every failing example names the layer of its
#     consequence (`layer: documented|lay`), and sqlite's rollback-full durability rule is
#     lay (SQLite documents that FULL in rollback mode can lose the last commit);
#   - report.py writes a study document from the results, with the four-way
#     classification, in which dbm.dumb's _commit (not atomic even against a process
#     crash) is the one vulnerability classified new.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d /tmp/intact-study-selftest.XXXXXX)
trap 'rm -rf "$out"' EXIT
bash "$here/run.sh" --quick --jobs "$(nproc)" --out "$out" --no-doc
python3 "$here/report.py" --out "$out" --doc "$out/study.md" --quick
INTACT_BIN=${CARGO_TARGET_DIR:-$(cd "$here/.." && pwd)/target}/release/intact python3 - "$out" <<'PY'
import json, os, re, subprocess, sys, tempfile, shutil
out = sys.argv[1]
bad = []
def report(name):
    return json.load(open(os.path.join(out, name, "report.json")))
r = report("sqlite-rollback-full")
dur = [s for s in r["static"] if "durability" in s["categories"] and "pager_end_transaction" in s["locations"][0]]
if len(dur) != 1 or "ext3-j" not in dur[0]["apms"] or "intactfs" not in dur[0]["apms"]:
    bad.append(f"sqlite-rollback-full: expected one durability vulnerability at pager_end_transaction under ext3-j and intactfs, got {[ (s['locations'], s['apms']) for s in r['static']]}")
r = report("python-dbm")
acr = [s for s in r["static"] if s["kind"] == "across_calls" and all("dbm/dumb.py" in l and "_commit" in l for l in s["locations"])]
if not acr:
    bad.append("python-dbm: no atomicity-across-calls vulnerability in dbm/dumb.py _commit")
elif not any("intactfs" in s["apms"] for s in acr):
    bad.append("python-dbm: the _commit atomicity across calls should remain under intactfs")
left = [s for s in r["static"] if "intactfs" in s["apms"] and not set(s["categories"]) <= {"durability", "across_calls_atomicity"}]
if left:
    bad.append(f"python-dbm: ordering/atomicity vulnerabilities under intactfs: {[(s['id'], s['categories']) for s in left]}")
if not any("ext4-o" in s["apms"] and "durability" not in s["categories"] and s["kind"] == "ordering" for s in r["static"]):
    bad.append("python-dbm: expected an ordering vulnerability under ext4-o")
for name in sorted(os.listdir(out)):
    meta = os.path.join(out, name, "meta.json")
    if not os.path.exists(meta) or name == "build":
        continue
    m = json.load(open(meta))
    if m.get("failed"):
        bad.append(f"{name}: the run failed")
        continue
    for s in report(name)["static"]:
        d = os.path.join(out, name, "failing", f"v{s['id']}")
        if not os.path.isdir(os.path.join(d, "crash")):
            bad.append(f"{name} #{s['id']}: no saved example")
            continue
        tmp = tempfile.mkdtemp()
        shutil.copytree(os.path.join(d, "crash"), os.path.join(tmp, "c"), symlinks=True)
        rc = subprocess.run(m["checker"] + f" {tmp}/c {d}/stdout", shell=True, capture_output=True,
                            env=dict(os.environ, INTACT_WORKER="0", INTACT_STATE="selftest")).returncode
        shutil.rmtree(tmp, ignore_errors=True)
        if rc == 0:
            bad.append(f"{name} #{s['id']}: the checker passes on the saved example")
# The warm checker (CHECKER_PROTOCOL=server) gives the per-process verdicts: python-dbm's
# bundle checked again with one process per state must give the same report.
m = json.load(open(os.path.join(out, "python-dbm", "meta.json")))
if m.get("checker_protocol") != "server":
    bad.append("python-dbm: expected its checker to run as a warm server (CHECKER_PROTOCOL=server)")
else:
    intact = os.environ["INTACT_BIN"]
    warm = report("python-dbm")
    apms = ",".join(a["apm"] for a in warm["apms"])
    pp = os.path.join(out, "python-dbm", "per-process.json")
    subprocess.run([intact, "check", os.path.join(out, "python-dbm", "bundle"), "--checker", m["checker"],
                    "--apm", apms, "-q", "--json", pp] + m["check_opts"], capture_output=True)
    per = json.load(open(pp)) if os.path.exists(pp) else {}
    for k in ("static", "dynamic"):
        if per.get(k) != warm[k]:
            bad.append(f"python-dbm: the per-process run's {k} differs from the warm checker's")
    if [(a["distinct"], a["failed"]) for a in per.get("apms", [])] != [(a["distinct"], a["failed"]) for a in warm["apms"]]:
        bad.append("python-dbm: per-process and warm-checker state counts differ")
for name in sorted(os.listdir(out)):
    if not os.path.exists(os.path.join(out, name, "report.json")):
        continue
    for s in report(name)["static"]:
        if not re.search(r"^layer: (documented|lay)$", s["example"]["checker_message"], re.M):
            bad.append(f"{name} #{s['id']}: the checker's message names no layer (two-layer checkers, study/README.md)")
for s in dur:
    if "layer: lay" not in s["example"]["checker_message"]:
        bad.append("sqlite-rollback-full: the durability vulnerability should fail only the lay layer (synchronous=FULL)")
doc = open(os.path.join(out, "study.md")).read()
if "## Every vulnerability classified four ways" not in doc:
    bad.append("study.md lacks the four-way classification")
dbm = doc[doc.find("### python-dbm"):]
new_ones = re.findall(r"\*\*#\d+\*\* \[([^]]*)\][^\n]*\n(?:[^\n]*\n){3}Class: \*\*\(1\)", dbm[:dbm.find("\n### ", 5)])
if new_ones != ["Across calls"]:
    bad.append(f"python-dbm: expected only the _commit atomicity across calls classified (1), got {new_ones}")
if "## Static vulnerabilities per APM" not in doc:
    bad.append("study.md lacks the per-APM table")
if "## intactfs's promise, checked" not in doc or "not explained" in doc:
    bad.append("study.md lacks the intactfs table, or a vulnerability left under intactfs is not explained")
for b in bad:
    print("study selftest: FAIL:", b)
print("study selftest:", "ok" if not bad else f"{len(bad)} failure(s)")
sys.exit(1 if bad else 0)
PY
