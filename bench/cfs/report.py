#!/usr/bin/env python3
"""The report of bench/cfs/bench.sh: medians of its JSON lines, as markdown on stdout and,
with --write-docs FILE, as the section between <!-- cfs:begin --> and <!-- cfs:end --> of
FILE (appended at its end when the markers are absent; the rest of FILE is left as it is).

    python3 bench/cfs/report.py RESULTS.jsonl [--write-docs docs/benchmarks.md] --reps N ...

RESULTS.jsonl: one line per run, {"fs", "method", "workload", "rep", ...the program's JSON}
or {..., "failed": true, "error"}; profile lines {"profile": true, "fs", "method",
"workload", "syscalls", "per_syscall"}; cost lines {"cost": "flush"|"fuse_rtt", "where", ...}.
bench.sh keeps it with RESULTS=FILE (and the arguments in FILE.args) so that the report can
be made again from it.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

BEGIN, END = "<!-- cfs:begin -->", "<!-- cfs:end -->"
FSS = ["ext4", "intactfs", "intactfs-txflash"]
TWO_METHODS = {"master": "master (super-)journal", "region": "CFS region"}
INS_METHODS = {"plain": "rollback journal", "batch": "batch atomic write"}
# The paper's figures (the seeds' `003`).
PAPER_TWO = "§7.2, Figure 4: the CFS version 16.7× faster than the original on ext4 (ordered journal), with 12.9× fewer disk writes and 12.7× fewer cache flushes; §1: the original protocol makes 11 `fsync()` calls, 48 page writes and 8 cache flushes to update two pages"
PAPER_INS = "§7.3, Figure 5: CFS-SQLite about 5× faster than the rollback journal (RBJ) on ext4, with 4.1× fewer writes and 3.9× fewer cache flushes"


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(v, digits=None):
    if v is None:
        return "–"
    if digits is None:
        digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2
    return f"{v:,.{digits}f}"


def ratio(a, b):
    if a is None or b is None:
        return None
    if b == 0:
        return float("inf") if a > 0 else None
    return a / b


def fmt_ratio(r):
    if r is None:
        return "–"
    if r == float("inf"):
        return "∞"
    return f"{r:.2f}×"


def load(path):
    runs, bad = [], 0
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                runs.append(json.loads(line))
            except json.JSONDecodeError:
                bad += 1
    return runs, bad


def machine():
    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 1048576:.0f} GiB"
                break
    except OSError:
        pass
    commit = "?"
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        commit = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
        if dirty:
            commit += " (with uncommitted changes)"
    except (OSError, subprocess.CalledProcessError):
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "mem": mem, "kernel": platform.release(), "commit": commit}


def pct(s):
    """'CPU 61%, I/O 34%' -> (61, 34)."""
    out = []
    for part in s.split(","):
        try:
            out.append(int(part.strip().split()[-1].rstrip("%")))
        except (ValueError, IndexError):
            out.append(0)
    return (out + [0, 0])[:2]


def section(runs, bad, a):
    by, prof, cost, failed = {}, {}, {}, []
    for r in runs:
        if r.get("failed"):
            failed.append(r)
        elif r.get("profile"):
            prof[(r["workload"], r["fs"], r["method"])] = r
        elif "cost" in r:
            cost[(r["cost"], r["where"])] = r
        elif "workload" in r:
            by.setdefault((r["workload"], r["fs"], r["method"]), []).append(r)

    def m(key, wl, fs, method, per_op=False):
        rs = by.get((wl, fs, method), [])
        if per_op:
            return med([r[key] / r["ops"] for r in rs if r.get("ops") and key in r])
        return med([r.get(key) for r in rs])

    def rng(wl, fs, method):
        xs = [r["ops_per_s"] for r in by.get((wl, fs, method), [])]
        return (min(xs), max(xs)) if len(xs) > 1 else None

    def sc(wl, fs, method, names):
        p = prof.get((wl, fs, method))
        if not p:
            return None
        return sum(p["per_syscall"].get(n, 0) for n in names)

    def tot(wl, fs, method):
        p = prof.get((wl, fs, method))
        return p["syscalls"] if p else None

    mc = machine()
    txflash = any(fs == "intactfs-txflash" for (_, fs, _) in by) or any(r.get("fs") == "intactfs-txflash" for r in failed)
    fss = [f for f in FSS if f != "intactfs-txflash" or txflash]
    out = []
    W = out.append
    W("## CFS: atomic regions")
    W("")
    W("Generated by `bench/cfs/bench.sh`; do not edit by hand. CFS (the seeds' paper `003`; intactfs: issue 13,")
    W("the ioctls BEGIN `0xCC07`, COMMIT `0xCC08`, ABORT `0xCC09` of `libintact/include/intact.h`) lets a program")
    W("declare a code region whose file updates reach storage all or nothing, durably at COMMIT, with one")
    W("flush, instead of an fsync-ordered protocol. Two experiments of the paper, side by side in one run:")
    W("the atomic update of two SQLite databases (§1 Figure 1 vs Figure 2; §7.2 Figure 4) and SQLite")
    W("inserts with a rollback journal vs without one (§6, §7.3 Figure 5; here through F2FS's atomic-write")
    W("ioctls, which SQLite 3.54.1 uses when built with `SQLITE_ENABLE_BATCH_ATOMIC_WRITE`). Absolute figures on")
    W("these shared VMs vary between runs; read the ratios, measured side by side. This is performance only:")
    W("crash consistency of regions is tested by the crash simulation with regions and `libintact/test.sh`.")
    W("")
    W("### Machine and run")
    W("")
    W(f"- {mc['nproc']} cores (`nproc`; {mc['cpu']}), {mc['mem']} RAM, Linux {mc['kernel']} (`uname -r`); images in `{a.workdir_fs}`")
    W(f"- commit {mc['commit']}; {a.date}; load average at the start {a.load_start}, at the end {a.load_end}")
    if a.pressure:
        W(f"- time some task was stalled during the run (PSI \"some\", other work on the machine included): {a.pressure}")
    W(f"- command: `{a.command}` (as root); REPS={a.reps}: {a.reps} repetition{'s' if a.reps != 1 else ''}, each on freshly made file")
    W("  systems; within a repetition every workload runs on its configurations in turn, each in a fresh")
    W("  directory, the order rotating between repetitions; every figure is the median over the repetitions")
    W(f"  (each metric separately{', min–max of the throughput in brackets' if a.reps > 1 else ''}); the whole script took {a.elapsed} s")
    W(f"- N: {a.n_two} two-database transactions, {a.n_insert} insert transactions per run; SQLite {a.sqlite_version} (`tools/sqlite-batch`)")
    nfail = len(failed) + bad
    if nfail:
        W(f"- **failed runs: {nfail}**: " + "; ".join(f"{r['workload']} {r['method']} on {r['fs']} (repetition {r['rep']}): {' '.join(r.get('error', '?').split())[-200:]}" for r in failed))
    else:
        W("- failed runs: none")
    if a.txflash_note:
        W(f"- {a.txflash_note}")
    cpu_p, io_p = pct(a.pressure) if a.pressure else (0, 0)
    try:
        load_start = float(a.load_start.split()[0])
    except (ValueError, IndexError):
        load_start = 0
    if cpu_p >= 20 or io_p >= 20 or load_start >= (mc["nproc"] or 1) * 0.75:
        W(f"- **the machine was busy during this run** (another job: load {a.load_start} at the start, CPU stalled {cpu_p}%,")
        W("  I/O stalled {}% of the time): absolute figures are lower and noisier than on an idle machine; the".format(io_p))
        W("  configurations shared the noise, interleaved, so the ratios are the figures to read")
    W("")
    W("### Set-up")
    W("")
    W(f"Each file system sits over a {a.image_mib} MiB file written full of zeros beforehand, in a fresh `mktemp -d`")
    W("directory: **ext4** (`mkfs.ext4 -b 4096 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0`, default mount")
    W("options, barriers on) on its own loop device; **intactfs** (`intact fs mkfs IMG --force`, mounted with")
    W("`intact fs mount IMG MNT --daemon`, defaults: `fsync=durable`, `commit=5`) as a file in a second ext4 (the same")
    W("mkfs) on a second loop device" + (", which also holds the **intactfs-txflash** image: `intact fs mkfs IMG --device txflash" if txflash else "."))
    if txflash:
        W(f"--size {a.image_mib}M --force` (the transactional-flash device, X-FTL-like, [fs-design.md](fs-design.md): a durable commit is")
        W("one device transaction and one flush; a new sparse file each repetition, its holes then written out with")
        W("`cp --sparse=never` so that no write allocates in the ext4 under it), mounted the same way.")
    W("Every flush therefore goes through one loop device to a file on the root disk, and \"device flushes\" /")
    W("\"device KiB\" are that loop device's `/sys/block/loopN/stat` (fields 16 and 7) over the timed part, divided")
    W("by the transactions. The programs run as they are, in intactfs's init stream. Before each run the file")
    W("system is synced (ext4: `sync -f`; intactfs: STREAMSYNC, then `sync -f` of the ext4 under the image).")
    W("")
    W("- **two_db** (`bench/cfs/two_db.c`, linked with `target/sqlite-batch/sqlite3-plain.o`): `db1.db` with `db2.db`")
    W("  ATTACHed, each `t(id INTEGER PRIMARY KEY, n INTEGER, v BLOB)` with 100 rows (set-up, not timed); then N")
    W("  transactions `BEGIN; UPDATE main.t SET n=n+1, v=?blob WHERE id=?k; UPDATE db2.t … (the same); COMMIT`")
    W("  (a fresh random 100-byte blob, k cycling over the rows), each timed from BEGIN to COMMIT's return.")
    W("  - **master**: `journal_mode=DELETE`, `synchronous=FULL` on both: SQLite's multi-database commit, a rollback")
    W("    journal per database and a super-journal (\"master journal\", Figure 2);")
    W("  - **region**: `journal_mode=OFF`, `synchronous=OFF` on both (the CFS port of SQLite, §6), every transaction")
    W("    inside `ioctl(dirfd, 0xCC07)` … `ioctl(dirfd, 0xCC08)` (Figure 1); only on intactfs.")
    W("  - check: after the loop, in the same connection and again in a fresh process (`two_db DIR --mode verify`):")
    W("    `integrity_check` ok for both, both hold exactly N updates, every row equal in both (n and v). A")
    W("    consistency sanity check of the runs, not a crash test.")
    W("- **insert** (`tools/sqlite-batch`'s driver, `journal_mode=DELETE`, `synchronous=FULL`, one INSERT of a")
    W("  100-byte row per transaction): `DB insert 1` first (a new database's first transaction always journals;")
    W("  not timed), then `DB insert N` timed by the driver. **rollback journal**: `sqlite-batch-plain` (no batch")
    W("  support compiled in); **batch atomic write**: `sqlite-batch` (`SQLITE_ENABLE_BATCH_ATOMIC_WRITE`; the run")
    W("  requires `sqlite-batch DB features` to say `batch_atomic yes`: each transaction is START_ATOMIC_WRITE,")
    W("  the page writes, COMMIT_ATOMIC_WRITE, fsync, no journal file). Device counters span the whole")
    W("  `insert N` process. Check: `integrity_check` ok and N + 1 rows (Python's sqlite3, a fresh process).")
    if a.profile_n:
        W(f"- **system calls per transaction** (\"fsyncs\", \"calls\" columns): `strace -f -c` of a run of {a.profile_n} + 1")
        W("  transactions minus one of 1 (so the set-up cancels out), divided by " + str(a.profile_n) + "; outside the timed runs.")
    W("")

    # ------------------------------------------------------------- targets
    tp = lambda wl, fs, me: m("ops_per_s", wl, fs, me)
    fl = lambda wl, fs, me: m("disk_flushes", wl, fs, me, per_op=True)
    rows_t = []

    def verdict(val, target):
        if val is None:
            return "no result"
        return "met" if val >= target else f"**missed** ({val:.2f}×)"

    region_fss = [f for f in fss if f != "ext4"]
    for rf in region_fss:
        lab = "" if rf == "intactfs" else f"{rf} · "
        for other, paper in (("ext4", "16.7× (Figure 4)"), (rf, "–")):
            rows_t.append(dict(name=f"two_db: {lab}region faster than {other} · master", v=ratio(tp("two_db", rf, "region"), tp("two_db", other, "master")),
                               target=5.0, paper=paper, kind="speed", fs=rf, other=other))
        for other, paper in (("ext4", "12.7× (Figure 4)"), (rf, "–")):
            rows_t.append(dict(name=f"two_db: {lab}region: fewer device flushes than {other} · master", v=ratio(fl("two_db", other, "master"), fl("two_db", rf, "region")),
                               target=10.0, paper=paper, kind="flush", fs=rf, other=other))
        kb = lambda wl, f_, me_: m("disk_bytes", wl, f_, me_, per_op=True)
        rows_t.append(dict(name=f"two_db: {lab}region: fewer device bytes written than ext4 · master", v=ratio(kb("two_db", "ext4", "master"), kb("two_db", rf, "region")),
                           target=None, paper="12.9× (Figure 4)", kind="info", fs=rf, other="ext4"))
        for other, paper in (("ext4", "≈5× (Figure 5, RBJ)"), (rf, "–")):
            rows_t.append(dict(name=f"insert: batch atomic write on {rf} faster than the rollback journal on {other}", v=ratio(tp("insert", rf, "batch"), tp("insert", other, "plain")),
                               target=2.0, paper=paper, kind="insert", fs=rf, other=other))
        rows_t.append(dict(name=f"insert: batch atomic write on {rf}: fewer device flushes than the rollback journal on ext4", v=ratio(fl("insert", "ext4", "plain"), fl("insert", rf, "batch")),
                           target=None, paper="3.9× (Figure 5, RBJ)", kind="info", fs=rf, other="ext4"))
        rows_t.append(dict(name=f"insert: batch atomic write on {rf}: fewer device bytes written than the rollback journal on ext4", v=ratio(kb("insert", "ext4", "plain"), kb("insert", rf, "batch")),
                           target=None, paper="4.1× (Figure 5, RBJ)", kind="info", fs=rf, other="ext4"))
    W("### At a glance: the targets (issue 13)")
    W("")
    W("| comparison | measured | target | verdict | paper |")
    W("|---|---:|---:|---|---:|")
    for t in rows_t:
        if t["target"] is None:
            W(f"| {t['name']} | {fmt_ratio(t['v'])} | – | (for comparison) | {t['paper']} |")
        else:
            W(f"| {t['name']} | **{fmt_ratio(t['v'])}** | ≥ {t['target']:g}× | {verdict(t['v'], t['target'])} | {t['paper']} |")
    W("")
    W("The paper's figures (the seeds' `003`):")
    W("")
    W(f"- {PAPER_TWO};")
    W(f"- {PAPER_INS}.")
    W("")
    W("Its storage was an OpenSSD board with X-FTL, where a commit is one flush of the device's cache; here a")
    W("flush is the host's `fdatasync` through a loop device (its cost on this host is measured below).")
    W("")

    # ------------------------------------------------------------- two_db
    W("### Two-database atomic update (Figure 1 vs Figure 2)")
    W("")
    W("| configuration | transactions/s | mean ms | median ms | p99 ms | device flushes / txn | device KiB / txn | fsyncs / txn | system calls / txn | intactfs · region: faster by | flushes fewer by |")
    W("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    ref_tp, ref_fl = tp("two_db", "intactfs", "region"), fl("two_db", "intactfs", "region")
    for fs in fss:
        for me in ("master", "region"):
            if fs == "ext4" and me == "region":
                continue
            name = f"{fs} · {me}"
            if me == "region" and fs == "intactfs":
                name = f"**{name}**"
            rs = by.get(("two_db", fs, me))
            if not rs:
                W(f"| {name} | failed |" + " – |" * 9)
                continue
            t = tp("two_db", fs, me)
            ts = fmt(t)
            g = rng("two_db", fs, me)
            if g:
                ts += f" [{fmt(g[0])}–{fmt(g[1])}]"
            ms = lambda k: None if m(k, "two_db", fs, me) is None else m(k, "two_db", fs, me) / 1000
            f = fl("two_db", fs, me)
            kib = m("disk_bytes", "two_db", fs, me, per_op=True)
            kib = None if kib is None else kib / 1024
            W(f"| {name} | {ts} | {fmt(ms('lat_mean_us'))} | {fmt(ms('lat_median_us'))} | {fmt(ms('lat_p99_us'))} | {fmt(f, 2)} | {fmt(kib, 1)} "
              f"| {fmt(sc('two_db', fs, me, ['fsync', 'fdatasync']), 1)} | {fmt(tot('two_db', fs, me), 0)} "
              f"| {fmt_ratio(ratio(ref_tp, t))} | {fmt_ratio(ratio(f, ref_fl))} |")
    W("")
    W("\"faster by\": intactfs · region's transactions/s over this row's; \"flushes fewer by\": this row's device")
    W("flushes per transaction over intactfs · region's. Every run's two databases passed the check (same N")
    W("updates in both, row by row, `integrity_check` ok)" + (" except the failed runs listed above." if failed else "."))
    W("")

    # ------------------------------------------------------------- insert
    W("### SQLite inserts: rollback journal vs batch atomic write")
    W("")
    W("| configuration | transactions/s | mean µs | device flushes / txn | device KiB / txn | fsyncs / txn | ioctls / txn | system calls / txn | intactfs · batch: faster by |")
    W("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    ref = tp("insert", "intactfs", "batch")
    for fs in fss:
        for me in ("plain", "batch"):
            if fs == "ext4" and me == "batch":
                continue
            name = f"{fs} · {INS_METHODS[me]}"
            if me == "batch" and fs == "intactfs":
                name = f"**{name}**"
            rs = by.get(("insert", fs, me))
            if not rs:
                W(f"| {name} | failed |" + " – |" * 7)
                continue
            t = tp("insert", fs, me)
            ts = fmt(t)
            g = rng("insert", fs, me)
            if g:
                ts += f" [{fmt(g[0])}–{fmt(g[1])}]"
            kib = m("disk_bytes", "insert", fs, me, per_op=True)
            kib = None if kib is None else kib / 1024
            W(f"| {name} | {ts} | {fmt(m('lat_mean_us', 'insert', fs, me))} | {fmt(fl('insert', fs, me), 2)} | {fmt(kib, 1)} "
              f"| {fmt(sc('insert', fs, me, ['fsync', 'fdatasync']), 1)} | {fmt(sc('insert', fs, me, ['ioctl']), 1)} | {fmt(tot('insert', fs, me), 0)} "
              f"| {fmt_ratio(ratio(ref, t))} |")
    W("")

    # ------------------------------------------------------------- causes
    W("### What a transaction costs here (measured after the runs, not timed)")
    W("")
    fe, fh, rt = cost.get(("flush", "ext4")), cost.get(("flush", "host")), cost.get(("fuse_rtt", "intactfs"))
    if fe or fh:
        for c, where in ((fe, "the ext4 of the ext4 rows"), (fh, "the ext4 holding the intactfs images")):
            if c:
                W(f"- a 4 KiB overwrite + `fdatasync` on {where}: median {fmt(c['median_us'])} µs, mean {fmt(c['mean_us'])} µs "
                  f"({fmt(c['flushes_per_op'], 2)} device flushes each, {c['ops']} times)")
    if rt:
        W(f"- a FUSE round trip (an intactfs ioctl the daemon answers from memory, {rt['ops']} times): median {fmt(rt['median_us'])} µs, mean {fmt(rt['mean_us'])} µs")
    # What region's transaction is made of, against the master protocol's.
    lat_r = m("lat_mean_us", "two_db", "intactfs", "region")
    lat_e = m("lat_mean_us", "two_db", "ext4", "master")
    lat_i = m("lat_mean_us", "two_db", "intactfs", "master")
    calls_r = tot("two_db", "intactfs", "region")
    if lat_r and fh:
        line = (f"- two_db, intactfs · region: {fmt(lat_r / 1000, 2)} ms per transaction = {fmt(lat_r / fh['median_us'], 2)} × a write + flush "
                f"on the image's ext4 (its one commit flush)")
        if calls_r and rt:
            line += f"; its {fmt(calls_r, 0)} system calls × {fmt(rt['median_us'])} µs per FUSE round trip ≈ {fmt(calls_r * rt['median_us'] / 1000, 2)} ms at most"
        W(line)
    if lat_e and fe:
        W(f"- two_db, ext4 · master: {fmt(lat_e / 1000, 2)} ms per transaction = {fmt(lat_e / fe['median_us'], 1)} × a write + flush on its ext4"
          + (f"; intactfs · master: {fmt(lat_i / 1000, 2)} ms = {fmt(lat_i / fh['median_us'], 1)} ×" if lat_i and fh else ""))
    if prof:
        W("")
        W("System calls per transaction (`strace -f -c`, the largest counts; on intactfs the calls on the mount")
        W("that reach the daemon are FUSE round trips; `fcntl` locks stay in the kernel):")
        W("")
        order = [("two_db", fs, me) for fs in fss for me in ("master", "region")] + [("insert", fs, me) for fs in fss for me in ("plain", "batch")]
        for key in order:
            p = prof.get(key)
            if not p:
                continue
            top = ", ".join(f"{k} {v:g}" for k, v in list(p["per_syscall"].items())[:9])
            W(f"- {key[0]}, {key[1]} · {key[2]}: {fmt(p['syscalls'], 0)} in all: {top}")
    W("")
    missed = [t for t in rows_t if t["target"] is not None and t["v"] is not None and t["v"] < t["target"]]
    if missed:
        W("Missed targets and their measured cause:")
        W("")
        for t in missed:
            W(f"- {t['name']}: {t['v']:.2f}× (target {t['target']:g}×). " + cause(t, m, fl, tot, sc, fe, fh, rt))
        W("")
    else:
        W("Every target was met in this run.")
        W("")
    return "\n".join(out) + "\n", nfail


def cause(t, m, fl, tot, sc, fe, fh, rt):
    """A sentence of measured figures explaining a missed target."""
    parts = []
    us, other, kind = t["fs"], t["other"], t["kind"]
    fo = fe if other == "ext4" else fh  # the write + flush cost on the other's ext4
    if kind == "flush":
        f_r, f_o = fl("two_db", us, "region"), fl("two_db", other, "master")
        n_fs = sc("two_db", other, "master", ["fsync", "fdatasync"])
        parts.append(f"{other} · master makes {fmt(f_o, 2)} device flushes per transaction ({fmt(n_fs, 1)} fsyncs), "
                     f"{us} · region {fmt(f_r, 2)}")
        if f_r is not None and abs(f_r - 1) < 0.05:
            parts.append("a region already costs the minimum, one flush per durable commit, so this ratio is the other "
                         "protocol's flush count per transaction")
        if other != "ext4" and n_fs is not None and f_o is not None and n_fs > f_o:
            parts.append(f"intactfs turns the protocol's {fmt(n_fs, 1)} fsyncs into {fmt(f_o, 2)} flushes: an fsync commits the "
                         f"whole stream (journals, directory entries and databases alike), and one that finds nothing new to "
                         f"commit sends no flush (`commit_with` in crates/intactfs/src/engine.rs); so against {other} · master "
                         f"the target is out of reach by construction: intactfs makes the master protocol cheaper, it does not "
                         f"make the region dearer")
    elif kind == "speed":
        lat_r, lat_o = m("lat_mean_us", "two_db", us, "region"), m("lat_mean_us", "two_db", other, "master")
        calls = tot("two_db", us, "region")
        if fh and lat_r:
            parts.append(f"a region transaction takes {fmt(lat_r / 1000, 2)} ms = {fmt(lat_r / fh['median_us'], 2)} × a write + flush "
                         f"on the image's ext4 ({fmt(fh['median_us'] / 1000, 2)} ms, measured)")
        if rt and calls:
            parts.append(f"its {fmt(calls, 0)} system calls × {fmt(rt['median_us'])} µs per FUSE round trip ≈ "
                         f"{fmt(calls * rt['median_us'] / 1000, 2)} ms at most")
        if fo and lat_o:
            parts.append(f"{other} · master takes {fmt(lat_o / 1000, 2)} ms = {fmt(lat_o / fo['median_us'], 1)} × a write + flush "
                         f"on its ext4, with {fmt(fl('two_db', other, 'master'), 2)} device flushes")
    else:
        lat_b, lat_o = m("lat_mean_us", "insert", us, "batch"), m("lat_mean_us", "insert", other, "plain")
        parts.append(f"the batch transaction takes {fmt(lat_b)} µs with {fmt(fl('insert', us, 'batch'), 2)} device flushes, "
                     f"the rollback journal on {other} {fmt(lat_o)} µs with {fmt(fl('insert', other, 'plain'), 2)}")
        calls = tot("insert", us, "batch")
        if rt and calls:
            parts.append(f"the batch transaction's {fmt(calls, 0)} system calls × {fmt(rt['median_us'])} µs per FUSE round trip ≈ "
                         f"{fmt(calls * rt['median_us'] / 1000, 2)} ms at most")
        if fh:
            parts.append(f"a write + flush costs {fmt(fh['median_us'])} µs on the image's ext4")
    return "; ".join(parts) + "."


def write_docs(path, body):
    text = open(path).read() if os.path.exists(path) else ""
    block = f"{BEGIN}\n{body}{END}\n"
    b, e = text.find(BEGIN), text.find(END)
    if b >= 0 and e > b:
        text = text[:b] + block.rstrip("\n") + text[e + len(END):]
    elif b >= 0 or e >= 0:
        sys.exit(f"report.py: {path} has only one of the markers {BEGIN} / {END}: fix it by hand")
    else:
        if text and not text.endswith("\n"):
            text += "\n"
        text += ("\n" if text else "") + block
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results")
    p.add_argument("--write-docs", metavar="FILE")
    p.add_argument("--reps", type=int, required=True)
    p.add_argument("--command", required=True)
    p.add_argument("--date", required=True)
    p.add_argument("--elapsed", default="?")
    p.add_argument("--load-start", default="?")
    p.add_argument("--load-end", default="?")
    p.add_argument("--pressure", default="")
    p.add_argument("--image-mib", default="?")
    p.add_argument("--n-two", default="?")
    p.add_argument("--n-insert", default="?")
    p.add_argument("--profile-n", type=int, default=0)
    p.add_argument("--sqlite-version", default="?")
    p.add_argument("--txflash-note", default="")
    p.add_argument("--workdir-fs", default="?")
    a = p.parse_args()
    runs, bad = load(a.results)
    body, nfail = section(runs, bad, a)
    sys.stdout.write(body)
    if a.write_docs:
        if nfail:
            print(f"report.py: {nfail} run(s) failed: not writing {a.write_docs}", file=sys.stderr)
            return 1
        write_docs(a.write_docs, body)
        print(f"report.py: wrote the CFS section of {a.write_docs}", file=sys.stderr)
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
