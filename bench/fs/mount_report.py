#!/usr/bin/env python3
"""Tables for bench/fs/mount.sh: reads the JSON lines of its runs (one per workload, system
and repetition), takes each metric's median over the repetitions, checks the issue's goals
and writes its section of docs/benchmarks.md (between the bench/fs/mount.sh markers; the
engine section written by bench/fs/engine.sh is left alone)."""

import argparse
import json
import statistics
from collections import defaultdict

from report import fmt_bytes, machine, write_section

SYSTEMS = ["ext4", "passthrough", "intactfs"]  # the three: the goals and the reading
# Every system mount.sh knows, in the order of the tables; bindfs and fuse-overlayfs are the
# optional ones (Debian's FUSE file systems a user would compare with).
ALL_SYSTEMS = ["ext4", "passthrough", "bindfs", "fuse-overlayfs", "intactfs"]
OTHER_FUSE = ["bindfs", "fuse-overlayfs"]
SHORT = {"passthrough": "pt", "fuse-overlayfs": "ovl"}


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


class Results:
    def __init__(self, path):
        self.runs = defaultdict(list)
        self.failed = []
        for line in open(path):
            r = json.loads(line)
            if r.get("failed"):
                self.failed.append(r)
                continue
            self.runs[(r["name"], r["system"])].append(r)

    def rows(self, name, system):
        return self.runs.get((name, system), [])

    def m(self, name, system, field, f=None):
        """Median over the repetitions of `field` (or of f(run))."""
        rows = self.rows(name, system)
        return med([(f(r) if f else r.get(field)) for r in rows])

    def spread(self, name, system, field, scale=1.0, digits=0, f=None):
        vals = [(f(r) if f else r.get(field)) for r in self.rows(name, system)]
        vals = [v * scale for v in vals if v is not None]
        if len(vals) < 2:
            return ""
        return f" ({min(vals):,.{digits}f}–{max(vals):,.{digits}f})"

    def n(self, name, system):
        return len(self.rows(name, system))

    def has_system(self, system):
        return any(s == system for _, s in self.runs) or any(r["system"] == system for r in self.failed)

    def failed_on(self, name, system):
        return any(r["name"] == name and r["system"] == system for r in self.failed)

    def cell(self, name, system, text):
        """`text` if the workload ran on `system`; else "failed" (see Failures) or "–"."""
        if self.n(name, system):
            return text
        return "failed" if self.failed_on(name, system) else "–"


def ratio(a, b, digits=2):
    if a is None or b is None or b == 0:
        return "–"
    return f"{a / b:.{digits}f}×"


def num(v, digits=0):
    return "–" if v is None else f"{v:,.{digits}f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("out")
    for k in ("command", "pressure", "load_start", "load_end", "date", "others", "tree", "intactfs_totals", "params", "commit", "systems", "system_info"):
        ap.add_argument("--" + k.replace("_", "-"), default="")
    for k in ("reps", "elapsed", "image_mib", "failures", "a_mib", "sqlite_rows", "ldb_num", "ldb_sync_num", "duration"):
        ap.add_argument("--" + k.replace("_", "-"), type=int, default=0)
    a = ap.parse_args()
    R = Results(a.results)
    out = []
    w = out.append
    m = machine()
    # The end of the run (a report regenerated later from the same results keeps them).
    m["load"] = a.load_end or m["load"]
    m["date"] = a.date or m["date"]
    m["commit"] = a.commit or m["commit"]
    # The systems the run chose (SYSTEMS), those with results, those left out and why.
    selected = [s for s in ALL_SYSTEMS if s in a.systems.split()] if a.systems else ([s for s in ALL_SYSTEMS if R.has_system(s)] or SYSTEMS)
    info = json.loads(a.system_info) if a.system_info else {}

    def why(s):
        return (info.get(s) or {}).get("unavailable") or ""

    # The columns: the three (as selected) and every other system that has results.
    cols = [s for s in ALL_SYSTEMS if s in selected and (s in SYSTEMS or R.has_system(s))]
    left_out = [s for s in selected if why(s)]
    # Ratio columns: intactfs ÷ each other system, then passthrough ÷ ext4.
    ratio_cols = [("intactfs", b) for b in cols if b != "intactfs" and "intactfs" in cols]
    if "passthrough" in cols and "ext4" in cols:
        ratio_cols.append(("passthrough", "ext4"))
    ratio_heads = [f"{x} ÷ {b}" for x, b in ratio_cols]

    def not_available_note():
        """Under a table whose columns are the systems: the ones left out, and why."""
        if left_out:
            w("")
            for s_ in left_out:
                w(f"- {s_}: not available: {why(s_)}" + (" (figures above: the repetitions before)" if s_ in cols else ""))

    # ------------------------------------------------------------ header
    sel_other = [s_ for s_ in selected if s_ in OTHER_FUSE]

    def and_list(items):
        return ", ".join(items[:-1]) + (" and " if len(items) > 1 else "") + items[-1] if items else ""

    title = {"ext4": "ext4", "passthrough": "a passthrough FUSE file system"}
    w("# intactfs benchmarks: through the FUSE mount, against " + and_list([title.get(s_, s_) for s_ in selected if s_ != "intactfs"]) + "\n")
    where = {"ext4": "the kernel's ext4", "passthrough": "a passthrough FUSE file system over ext4 (the bare cost of FUSE, `passthrough`)"}
    if sel_other:
        where[sel_other[-1]] = " and ".join(sel_other) + " (FUSE file systems Debian packages, which a user would compare with)"
    places = [where[s_] for s_ in selected if s_ in where] + (["the intactfs mount"] if "intactfs" in selected else [])
    w("Generated by `bench/fs/mount.sh`; do not edit by hand. The same workloads run, in one run, on")
    w(", on ".join(places[:-1]) + (" and on " if len(places) > 1 else "") + places[-1] + ". Absolute figures on these shared VMs vary a lot between runs: read")
    w("the ratios, measured side by side.\n")
    w("## Machine and run\n")
    w(f"- {m['cpu']}, {m['memory']}, {m['kernel']}; {m['disk']}")
    w(f"- commit {m['commit']}; {m['date']}; load average at the start {a.load_start}, at the end {m['load']}")
    if a.pressure:
        w(f"- time some task was stalled during the run (PSI \"some\", other work on the machine included): {a.pressure}")
    w(f"- other work on the machine at the start (processes above 20% CPU): {a.others or 'none'}")
    w(f"- command: `{a.command}` (as root); {a.reps} repetition{'s' if a.reps != 1 else ''}, each on freshly made file systems; every workload")
    w(f"  runs on the {len(selected)} systems ({', '.join(selected)}) in turn, the order rotating between repetitions; every figure is the")
    w(f"  median over the repetitions (each metric separately), min–max in brackets; the whole script took {a.elapsed} s")
    nf = len(R.failed)
    w(f"- failed runs: {'none' if not nf else f'{nf} (see *Failures* below)'}\n")

    # ------------------------------------------------------------ set-up
    w("## Set-up\n")
    w(f"Each system has its own loop device over a {a.image_mib} MiB file (written full of zeros first) in a fresh")
    w("`/var/tmp/intact-bench.*` directory on the root disk (ext4 on virtio), so all of them pay the same")
    w("lower stack (loop driver, root file system, virtio disk), and `/sys/block/loopN/stat` (sectors")
    w("written, field 7; flushes, field 16) counts what each sends to its disk:\n")
    w("- **ext4**: `mkfs.ext4 -b 4096 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0`, default mount")
    w("  options (data=ordered, delayed allocation, 5 s commit), on its loop device.")
    w("- **passthrough**: `crates/intactfs-fuse/examples/passthrough.rs` serving a directory of another ext4")
    w("  made the same way (on its own loop device). Every request is forwarded to the same call on the backing ext4")
    w("  (fsync to fsync, fdatasync to fdatasync), with the intactfs mount's fuser configuration: 4 request")
    w("  threads, a cloned `/dev/fuse` descriptor per thread, max_write and max_readahead 1 MiB, no")
    w("  writeback cache, `FOPEN_KEEP_CACHE`, 1 s entry and attribute TTL (missing names as negative")
    w("  entries with that TTL), `default_permissions`,")
    w("  `allow_other`; extended attributes forwarded (intactfs keeps them too), ENOSYS for POSIX locks")
    w("  (the kernel then keeps them locally), as intactfs. Unlike the intactfs daemon it takes no lock")
    w("  while a system call runs. Directories are held open (`O_PATH`), other inodes found again by")
    w("  name (one descriptor per file would pass the descriptor limit after createfiles).")
    for s_ in sel_other:
        v = (info.get(s_) or {}).get("version") or "version unknown"
        o = (info.get(s_) or {}).get("options") or ""
        if s_ == "bindfs":
            w(f"- **bindfs** ({v}): mirrors a directory of another ext4 made the same way (on its own loop")
            w(f"  device): `{o}`. `--multithreaded` (libfuse's multithreaded loop, up to 10 idle threads; bindfs's")
            w("  default is one thread) and `-o big_writes` (write requests of up to 128 KiB; libfuse 2's default")
            w("  is one 4 KiB page per request), its defaults otherwise: as root `allow_other`, `default_permissions`,")
            w("  `use_ino`, libfuse's 1 s entry and attribute timeouts, no writeback cache, the page cache dropped on")
            w("  open (no `kernel_cache`), extended attributes forwarded, POSIX locks kept by the kernel; path-based")
            w("  (libfuse's high-level API), new files chowned to the caller (`--create-as-user`, root's default).")
            w("  fsync and fdatasync are forwarded as such.")
        elif s_ == "fuse-overlayfs":
            w(f"- **fuse-overlayfs** ({v}): an overlay of one empty lower directory and an upper directory, both")
            w(f"  with its work directory on another ext4 made the same way (on its own loop device): `{o}`.")
            w("  `threaded=1` (libfuse's multithreaded loop; fuse-overlayfs then serializes its operations on the")
            w("  file tree with one big lock, data reads and writes run in parallel; the default is one thread) and `writeback=0`: its default")
            w("  turns on the kernel's FUSE writeback cache, which keeps written data in the FUSE mount's page")
            w("  cache, out of reach of the final sync (`syncfs` of the backing ext4) and unlike the passthrough")
            w("  and intactfs, which leave it off. Its defaults otherwise: as root `allow_other`, `default_permissions`,")
            w("  `noatime`, entry and attribute timeouts of 10⁹ s, splice, fsync forwarded (`fsync=1`), extended")
            w("  attributes forwarded; a removed directory leaves a whiteout in the upper directory even with an")
            w("  empty lower one.")
        if why(s_):
            w(f"  **Not available in this run**: {why(s_)}.")
    w("- **intactfs**: `intact fs mkfs IMG --force` on a zero-filled file `IMG` of the same size in another")
    w("  ext4 (on its own loop device, the *host*) that holds nothing else, mounted with `intact fs mount IMG MNT --daemon` (its")
    w("  defaults: 4 threads, fsync=durable, a commit of everything uncommitted every 5 s (`commit=5`), a")
    w("  stream committing once its dirty data pass a tenth of RAM (`dirty_limit`, 2 GiB here)). The engine writes its image with `pwrite` and flushes it with `fdatasync`; the host's loop device")
    w("  therefore counts the engine's bytes and flushes (the image file's blocks are allocated before the")
    w("  run, so its fdatasyncs carry no metadata; that ext4's 5 s commits of the file's mtime add a few KiB).")
    w("  Everything runs in the init stream unless a row says otherwise.")
    w("- **final sync** (\"synced\" figures): `syncfs(2)` on ext4; `syncfs(2)` on the backing ext4 of the passthrough" + "".join(f", {s_}" for s_ in sel_other))
    w("  (`syncfs` on a FUSE mount never reaches the daemon: the kernel sends FUSE_SYNCFS to virtiofs only);")
    w("  on intactfs the `STREAMSYNC` ioctl (commit the caller's stream, here the init stream holding all")
    w("  changes). A workload's \"synced\" throughput counts the time of that final sync.")
    if a.intactfs_totals:
        w(f"- the intactfs daemon's own totals for the last repetition, at its unmount: \"{a.intactfs_totals.strip()}\"")
    w("")

    # ------------------------------------------------------------ goals
    goals = []
    # Goal 1: two streams, B's fsync latency within 1.5x of ext4's.
    g1 = []
    for v in ["append", "truncate", "overwrite"]:
        x, i2 = R.m(f"table53-{v}", "ext4", "fsync_secs"), R.m(f"table53-{v}-2", "intactfs", "fsync_secs")
        if x and i2:
            g1.append((v, i2 / x))
    # Goal 2: create/append-heavy throughput within 2x of ext4 and 25% of the passthrough.
    heavy = [("createfiles", "createfiles (ops/s, synced)", lambda r: r["ops_per_s_synced"]), ("seqwrite", "seqwrite (MB/s, synced)", lambda r: r["mb_per_s_synced"]), ("fileserver", "fileserver (ops/s, synced)", lambda r: r["ops_per_s_synced"]), ("varmail", "varmail (ops/s, fsync each append)", lambda r: r["ops_per_s_synced"]), ("git-default", "tree copy, `cp -a` (speed, synced)", lambda r: 1 / (r["copy_s"] + r["copy_sync_s"]))]
    g2 = []
    for name, label, f in heavy:
        e, p, i = (R.m(name, s, None, f) for s in SYSTEMS)
        if e and p and i:
            g2.append((label, i / e, i / p))
    # Goal 3: SQLite with IGNORE_FSYNC + streamsync >= 10x SQLite with fsync on ext4.
    sx = R.m("sqlite-default", "ext4", "inserts_per_s")
    g3 = [(mode, R.m(f"sqlite-{mode}", "intactfs", "inserts_per_s")) for mode in ("streamsync-commit", "streamsync-end")]

    def verdict_max(r, bound):
        return "met" if r <= bound else f"**missed** by {r / bound:.2f}× ({r:.2f}× > {bound}×)"

    def verdict_min(r, bound):
        return "met" if r >= bound else f"**missed**: {r:.2f}× < {bound}× ({bound / r:.2f}× too slow)"

    w("## The goals (issue 6) at a glance\n")
    w("| goal | workload | measured (intactfs ÷ baseline) | verdict |")
    w("|---|---|---|---|")
    for v, r in g1:
        w(f"| two streams: B's fsync latency ≤ 1.5× ext4's | Table 5.3 {v} | {r:.2f}× ext4 | {verdict_max(r, 1.5)} |")
    for label, re_, rp in g2:
        w(f"| create/append-heavy throughput ≥ 0.5× ext4 | {label} | {re_:.2f}× ext4 | {verdict_min(re_, 0.5)} |")
        w(f"| … and ≥ 0.75× the passthrough | {label} | {rp:.2f}× passthrough | {verdict_min(rp, 0.75)} |")
    for mode, v in g3:
        if v and sx:
            what = "STREAMSYNC after every COMMIT" if mode == "streamsync-commit" else "one STREAMSYNC at the end (thesis c²fs+)"
            w(f"| SQLite, IGNORE_FSYNC + streamsync ≥ 10× SQLite with fsync on ext4 | {what} | {v / sx:.2f}× ext4 | {verdict_min(v / sx, 10)} |")
    w("")
    w("Why each missed goal is missed: see *Reading* at the end of this section.\n")

    # Issue 17: intactfs adds nothing over FUSE's own cost: each personality and the tree
    # copy within 10% of the passthrough (seqwrite within 5%).
    t17 = [(n_, lambda r: r["ops_per_s_synced"], 0.9) for n_ in ("createfiles", "varmail", "fileserver", "webserver", "randwrite")]
    t17.insert(4, ("seqwrite", lambda r: r["mb_per_s_synced"], 0.95))
    t17.append(("tree copy, `cp -a`", None, 0.9))
    rows17 = []
    for name, f, bound in t17:
        if f is None:
            p_, i_ = (R.m("git-default", s_, None, lambda r: 1 / (r["copy_s"] + r["copy_sync_s"])) for s_ in ("passthrough", "intactfs"))
        else:
            p_, i_ = R.m(name, "passthrough", None, f), R.m(name, "intactfs", None, f)
        if p_ and i_:
            rows17.append((name, i_ / p_, bound))
    if rows17:
        w("## The targets of issue 17 at a glance\n")
        w("intactfs should add nothing over FUSE's own cost: every personality and the tree copy within 10% of the")
        w("passthrough (seqwrite within 5%), synced throughput. The third target, fsync throughput of 4 concurrent")
        w("workers ≥ 3× the single-lock commit, is measured by `bench/fs/fsync_threads.sh` (its own section).\n")
        w("| workload | intactfs ÷ passthrough | target | verdict |")
        w("|---|---|---|---|")
        for name, r_, bound in rows17:
            w(f"| {name} | {r_:.2f}× | ≥ {bound}× | {verdict_min(r_, bound)} |")
        w("")

    # ------------------------------------------------------------ Table 5.3
    w("## Write dependence through the mount: the Table 5.3 microbenchmarks\n")
    w(f"ccfs thesis §5.6, Table 5.3: write A ({a.a_mib} MiB in 1 MiB `pwrite`s), write 1 byte to B, `fsync(B)`")
    w("(timed); then *append*: nothing more; *truncate*: truncate A to 0; *overwrite*: write all of A again;")
    w("then fsync(A) and the final sync. A and B exist and are durable before the start. A is written by one")
    w("process and B by another (`bench/fs/mount_bench.py table53`); on intactfs the A process joins stream")
    w("`t53-a` with SETSTREAM and the B process joins `t53-a` too (`-1`, one stream) or `t53-b` (`-2`, two")
    w("streams). The other systems have no streams. *fsync written* / *flushes*: what its loop device received")
    w("during `fsync(B)`; *total*: from the start through the final sync. The thesis's figures (HDD,")
    w("100 MB): fsync 0.08 s on ext4 and c²fs-2 against 1.28 s on c²fs-1; written by that fsync 0.03 MB")
    w("against 100.04 MB; totals 100.2 / 0.2 / 100.2 MB on ext4 and c²fs-2, 100.2 / 100.2 / 300.7 MB on c²fs-1.\n")
    w("| benchmark | system | fsync(B) latency ms | fsync written | flushes | total written | latency vs ext4 | latency vs passthrough |")
    w("|---|---|---|---|---|---|---|---|")
    for v in ["append", "truncate", "overwrite"]:
        base_e = R.m(f"table53-{v}", "ext4", "fsync_secs")
        base_p = R.m(f"table53-{v}", "passthrough", "fsync_secs")
        cfgs = []
        for s_ in cols:
            cfgs += [("intactfs-1", f"table53-{v}-1", "intactfs"), ("intactfs-2", f"table53-{v}-2", "intactfs")] if s_ == "intactfs" else [(s_, f"table53-{v}", s_)]
        for cfg, name, sysname in cfgs:
            if not R.n(name, sysname):
                if R.failed_on(name, sysname):
                    w(f"| {v} | {cfg} | failed (see *Failures*) | | | | | |")
                continue
            lat = R.m(name, sysname, "fsync_secs")
            row = [v, cfg, f"{lat * 1e3:.2f}{R.spread(name, sysname, 'fsync_secs', 1e3, 2)}", fmt_bytes(R.m(name, sysname, "fsync_bytes")), num(R.m(name, sysname, "fsync_flushes")), fmt_bytes(R.m(name, sysname, "total_bytes_synced"))]
            row += ["" if cfg == "ext4" else ratio(lat, base_e), "" if not cfg.startswith("intactfs") else ratio(lat, base_p)]
            w("| " + " | ".join(row) + " |")
    for s_ in left_out:
        w(f"| all | {s_} | not available: {why(s_)} | | | | | |")
    w("")

    # ------------------------------------------------------------ personalities
    w("## Filebench-style personalities\n")
    w("Filebench is not packaged for Debian 12; `bench/fs/personalities.c` runs its flowop loops (filebench")
    w("1.4/1.5 `workloads/*.f`) with pthreads, counting every flowop as one op as filebench does. Files are")
    w("`DIR/dNNNN/fNNNNNNN`, `--dirwidth` per directory (filebench builds a tree of that mean width; one level")
    w("here); file sizes are fixed (filebench's newer workloads draw them from a gamma distribution);")
    w("`appendfilerand` appends 1..appendsize bytes, uniformly. Sizes are scaled to a 2-core VM and runs of")
    w(f"{a.duration} s (the thesis ran 300 s on 4 GB of RAM, so its workloads were disk-bound; here the data fits in")
    w("memory, so every run ends with the final sync, and the *synced* figures count it).\n")
    w("| personality | flowops per loop | parameters here | filebench default (thesis, Figure 5.4) |")
    w("|---|---|---|---|")
    desc = {
        "createfiles": ("createfile, writewholefile, closefile", "nfiles 50,000, dirwidth 100, 16 KiB, 16 threads (thesis: 1M files, 64 threads)"),
        "varmail": ("deletefile; createfile, appendfilerand, fsync, closefile; openfile, readwholefile, appendfilerand, fsync, closefile; openfile, readwholefile, closefile (13)", "nfiles 1,000 in one directory, 16 KiB, appends ≤ 16 KiB, 16 threads, 80% preallocated"),
        "fileserver": ("createfile, writewholefile, closefile; openfile, appendfilerand, closefile; openfile, readwholefile, closefile; deletefile; statfile (11)", "nfiles 10,000, dirwidth 20, 128 KiB, appends ≤ 16 KiB, 50 threads, 80% preallocated (thesis: 80K files)"),
        "webserver": ("10 × (openfile, readwholefile, closefile); appendfilerand to one log (31)", "nfiles 1,000, dirwidth 20, 16 KiB, appends ≤ 16 KiB, 100 threads, all preallocated"),
        "seqwrite": ("write (1 MiB) to a new file", "1 thread, 1 MiB writes (thesis: 32 GB, 1 KB counted as an op)"),
        "randwrite": ("write (4 KiB, random aligned offset); fsync every 100", "1 thread (thesis: 200K random writes over a 10 GB file, fsync every 100)"),
    }
    for line in a.params.splitlines():
        p = line.split()
        if p:
            w(f"| {p[0]} | {desc.get(p[0], ('', ''))[0]} | `{' '.join(p[1:])}` | {desc.get(p[0], ('', ''))[1]} |")
    w("")
    w("Throughput: ops/s over the timed loop plus the final sync (seqwrite: MB/s); *loop only*: without the")
    w("final sync. *written/op*: bytes the system's loop device received over the loop and the final sync,")
    w("per op. *daemon CPU/op*: user + system CPU of the FUSE daemon over the whole run (set-up included),")
    w("per op of the timed loop.\n")
    fuse_cols = [s_ for s_ in cols if s_ != "ext4"]
    head = ["personality"] + cols + ratio_heads + ["loop only: " + " / ".join(cols), "written/op: " + " / ".join(SHORT.get(s_, s_) for s_ in cols), "daemon CPU/op µs: " + " / ".join(SHORT.get(s_, s_) for s_ in fuse_cols)]
    w("| " + " | ".join(head) + " |")
    w("|" + "---|" * len(head))
    for line in a.params.splitlines():
        p = line.split()
        if not p:
            continue
        name = p[0]
        field = "mb_per_s_synced" if name == "seqwrite" else "ops_per_s_synced"
        loop_field = None if name == "seqwrite" else "ops_per_s"
        val = {s: R.m(name, s, field) for s in cols}
        cell = [R.cell(name, s, f"{num(val[s], 1 if name == 'seqwrite' else 0)}{R.spread(name, s, field, 1, 1 if name == 'seqwrite' else 0)}") for s in cols]
        ratios = [ratio(val[x], val[b]) for x, b in ratio_cols]
        if loop_field:
            loops = " / ".join(num(R.m(name, s, loop_field)) for s in cols)
        else:
            loops = " / ".join(num(R.m(name, s, None, lambda r: r["mb_written"] / r["secs"]), 1) for s in cols)
        wpo = " / ".join(fmt_bytes(R.m(name, s, None, lambda r: r["disk_bytes"] / r["ops"] if "disk_bytes" in r and r["ops"] else None)) for s in cols)
        cpu = " / ".join(num(R.m(name, s, None, lambda r: r["daemon_cpu_s"] * 1e6 / r["ops"] if r["ops"] else None), 1) for s in fuse_cols)
        w("| " + " | ".join([f"{name}{' (MB/s)' if name == 'seqwrite' else ''}"] + cell + ratios + [loops, wpo, cpu]) + " |")
    not_available_note()
    fs_lat = [(s, R.m("varmail", s, "fsync_mean_us"), R.m("randwrite", s, "fsync_mean_us")) for s in cols]
    w("")
    w("Mean fsync latency inside the personalities (µs; varmail: 16 threads fsyncing at once; randwrite: every")
    w("100 writes, so each fsync carries 100 random 4 KiB blocks): " + "; ".join(f"{s} {num(v)} / {num(r)}" for s, v, r in fs_lat) + ".\n")

    # ------------------------------------------------------------ git
    w("## git add + commit of a large tree\n")
    w(f"The tree: {a.tree}. It is unpacked on the root disk first; then, on each system, in an empty directory:")
    w("`cp -a` of the tree (*copy*), the final sync, `git init`, `git add -A`, `git commit`, the final sync")
    w("(git 2.39, `-c gc.auto=0` so no background repack runs; `user.name`/`user.email` set on the command")
    w("line; HOME points to an empty directory). *default*: git's default `core.fsync` (packs and their")
    w("metadata only, so no fsync for loose objects); *committed*: `core.fsync=committed` (every loose object and")
    w("ref fsynced, like the `core.fsyncObjectFiles` the thesis needed for Git to be consistent on ext4). Each")
    w("run ends with `git fsck` and a check that the commit holds every file. Times in seconds; ratios are")
    w("speeds (baseline time ÷ intactfs time; above 1: intactfs faster).\n")
    head = ["config", "phase"] + [f"{s_} s" for s_ in cols] + ratio_heads
    w("| " + " | ".join(head) + " |")
    w("|" + "---|" * len(head))
    phases = [("copy (cp -a + sync)", lambda r: r["copy_s"] + r["copy_sync_s"]), ("git add -A", lambda r: r["add_s"]), ("git commit", lambda r: r["commit_s"]), ("sync after commit", lambda r: r["git_sync_s"]), ("add + commit + sync", lambda r: r["add_s"] + r["commit_s"] + r["git_sync_s"])]
    for mode in ("default", "committed"):
        name = f"git-{mode}"
        for label, f in phases:
            t = {s: R.m(name, s, None, f) for s in cols}
            w("| " + " | ".join([mode, label] + [R.cell(name, s, num(t[s], 2)) for s in cols] + [ratio(t[b], t[x]) for x, b in ratio_cols]) + " |")
    not_available_note()
    fl = " / ".join(f"{num(R.m('git-committed', s, 'dev_flushes'))}" for s in cols)
    by = " / ".join(fmt_bytes(R.m('git-committed', s, 'dev_bytes')) for s in cols)
    byd = " / ".join(fmt_bytes(R.m('git-default', s, 'dev_bytes')) for s in cols)
    w("")
    w(f"Device flushes over a whole *committed* run (copy included), {' / '.join(cols)}: {fl}; bytes")
    w(f"written: {by} (*default*: {byd}).\n")

    # ------------------------------------------------------------ SQLite
    w("## SQLite: inserts, each its own transaction\n")
    w(f"The thesis's Table 5.5 workload: {a.sqlite_rows:,} inserts of 120-byte rows (random bytes) into one table")
    w("(`id INTEGER PRIMARY KEY, v BLOB`), each in its own transaction (`BEGIN; INSERT; COMMIT`), through")
    w("Python's `sqlite3` module (SQLite 3.40, rollback journal: journal_mode DELETE, synchronous FULL, the")
    w("defaults). Timed: the inserts (and, where a row says so, the STREAMSYNCs); the database is then")
    w("checked (row count, bytes, `PRAGMA integrity_check`).\n")
    w("The thesis (§5.6, *Developer Overhead*) obtained its c²fs+ figure by setting IGNORE_FSYNC with setstream")
    w("and adding streamsync calls \"to places in the code where the user is guaranteed durability\" (two in")
    w("SQLite); its Table 5.5 row for c²fs+ shows no flush and no data written during the workload. Without")
    w("changing SQLite, the places where an application is guaranteed durability are the returns of COMMIT, so")
    w("two variants are measured: *streamsync after every COMMIT* (each transaction durable when the")
    w("application sees it committed: the guarantee SQLite gives with fsync; the IGNORE_FSYNC variant the")
    w("goal is judged on first) and *one streamsync at the end* (the thesis's c²fs+ row: durability only at the")
    w("end, ordering kept by the stream).\n")
    w("| system | configuration | inserts/s | vs ext4 default | flushes per insert | written per insert |")
    w("|---|---|---|---|---|---|")
    rows = [(s_, "default", "sqlite-default", "fsync (SQLite default)") for s_ in cols if s_ != "intactfs"]
    if "intactfs" in cols:
        rows += [("intactfs", "default", "sqlite-default", "fsync (SQLite default), own stream"), ("intactfs", "streamsync-commit", "sqlite-streamsync-commit", "stream with IGNORE_FSYNC + STREAMSYNC after every COMMIT"), ("intactfs", "streamsync-end", "sqlite-streamsync-end", "stream with IGNORE_FSYNC + one STREAMSYNC at the end")]
    for s, mode, name, label in rows:
        if s in left_out and not R.n(name, s) and not R.failed_on(name, s):
            continue
        v = R.m(name, s, "inserts_per_s")
        fpi = R.m(name, s, None, lambda r: r["flushes"] / r["rows"])
        bpi = R.m(name, s, None, lambda r: r["bytes"] / r["rows"])
        w(f"| {s} | {label} | {R.cell(name, s, num(v) + R.spread(name, s, 'inserts_per_s'))} | {ratio(v, sx)} | {num(fpi, 2)} | {fmt_bytes(bpi)} |")
    for s_ in left_out:
        w(f"| {s_} | not available: {why(s_)} | | | | |")
    w("")

    # ------------------------------------------------------------ LevelDB
    w("## LevelDB fillrandom and fillsync\n")
    w("`bench/fs/leveldb_fill.cc` against Debian's libleveldb 1.23 (db_bench is not packaged), with db_bench's")
    w(f"definitions: *fillrandom*: {a.ldb_num:,} puts of a 16-byte key (a uniformly random integer below the count,")
    w("`%016d`) and a 100-byte value that compresses to half, one put per write batch, `sync=false`, a fresh")
    w(f"database with the library's default options; *fillsync*: {a.ldb_sync_num:,} such puts with `sync=true`. ops/s")
    w("as db_bench reports it (the put loop); *synced*: put loop + closing the database + the final sync. The")
    w("thesis ran fillrandom with 250K 1000-byte values on a HDD.\n")
    head = ["benchmark", "system", "ops/s", "synced ops/s"] + ratio_heads
    w("| " + " | ".join(head) + " |")
    w("|" + "---|" * len(head))
    for bench in ("leveldb-fillrandom", "leveldb-fillsync"):
        val = {s: R.m(bench, s, "ops_per_s") for s in cols}
        for s in cols:
            if s in left_out and not R.n(bench, s) and not R.failed_on(bench, s):
                continue
            v = val[s]
            extra = [ratio(val[x], val[b]) for x, b in ratio_cols] if s == "intactfs" else [""] * len(ratio_cols)
            w("| " + " | ".join([bench[8:], s, R.cell(bench, s, num(v) + R.spread(bench, s, 'ops_per_s')), num(R.m(bench, s, 'ops_per_s_synced'))] + extra) + " |")
    if "intactfs" in cols:
        v = R.m("leveldb-fillsync-streamsync", "intactfs", "ops_per_s")
        e = R.m("leveldb-fillsync", "ext4", "ops_per_s")
        extra = [ratio(v, e) if b == "ext4" and x == "intactfs" else "" for x, b in ratio_cols]
        w("| " + " | ".join(["fillsync, stream with IGNORE_FSYNC + STREAMSYNC after every put", "intactfs", R.cell('leveldb-fillsync-streamsync', 'intactfs', num(v) + R.spread('leveldb-fillsync-streamsync', 'intactfs', 'ops_per_s')), num(R.m('leveldb-fillsync-streamsync', 'intactfs', 'ops_per_s_synced'))] + extra) + " |")
    for s_ in left_out:
        w("| " + " | ".join(["all", s_, f"not available: {why(s_)}", ""] + [""] * len(ratio_cols)) + " |")
    w("")

    # ------------------------------------------------------------ reading
    w(reading(R, a, g1, g2, sx))

    # ------------------------------------------------------------ failures
    if R.failed:
        w("## Failures\n")
        w("Runs that failed (the workload's exit status and the end of its error output):\n")
        for r in R.failed:
            err = " ".join(r.get("error", "").split())[-600:]
            w(f"- {r['name']} on {r['system']}, repetition {r['rep']}: exit {r.get('rc')}: `{err}`")
        w("")

    w("## By hand\n")
    w("- the passthrough: `cargo run --release -p intactfs-fuse --example passthrough -- BACKING_DIR MNT [--threads N]`")
    w("  (Ctrl-C or `umount MNT` unmounts)")
    if sel_other:
        w("- bindfs / fuse-overlayfs as here (`apt-get install -y bindfs fuse-overlayfs`): `bindfs --multithreaded -o big_writes DIR MNT`;")
        w("  `fuse-overlayfs -o lowerdir=L,upperdir=U,workdir=W,threaded=1,writeback=0 MNT` (`umount MNT` unmounts)")
    w("- one personality: `gcc -O2 -pthread -o personalities bench/fs/personalities.c; ./personalities varmail DIR")
    w("  --files 1000 --dirwidth 1000000 --threads 16 --prealloc 80 --duration 20 --sync syncfs:DIR` (options in its header)")
    w("- Table 5.3 / SQLite: `python3 bench/fs/mount_bench.py table53|sqlite --help`; in a stream by hand:")
    w("  `intact fs exec --mount MNT --stream NAME [--ignore-fsync] -- CMD`")
    w("- LevelDB: `g++ -O2 -o leveldb_fill bench/fs/leveldb_fill.cc -lleveldb; ./leveldb_fill DIR --num 100000`")
    text = "\n".join(out)
    write_section(a.out, "bench/fs/mount.sh", text)
    print(text[text.index("## The goals"):text.index("## Write dependence")])
    print(f"wrote {a.out}")


def reading(R, a, g1, g2, sx):
    """The explanations: numbers from this run, plus the by-hand measurements named as such."""
    out = []
    w = out.append

    def med_of(name, system, field, f=None):
        return R.m(name, system, field, f)

    def x(v, d=2):
        return "–" if v is None else f"{v:.{d}f}×"

    w("## Reading\n")
    # Goal 1
    lat = {c: med_of("table53-append" + ("" if c in ("ext4", "passthrough") else "-" + c[-1]), "intactfs" if c.startswith("intactfs") else c, "fsync_secs") for c in ("ext4", "passthrough", "intactfs-1", "intactfs-2")}
    worst = max((r for _, r in g1), default=None)
    w(f"**Goal 1, B's fsync with two streams (≤ 1.5× ext4): {'met' if worst is not None and worst <= 1.5 else 'missed'}** (at most {x(worst)} of ext4's")
    w("latency over the three variants). With B in its own stream, `fsync(B)` commits B's group only: one data")
    w("block and one journal record, one flush (8 KiB). ext4's fsync of B writes 24 KiB with two flushes (its")
    w("journal commit; the loop device has no FUA, so the commit block's FUA becomes a flush). The FUSE round")
    w("trip (~30 µs) is small beside a flush here. With A and B in one stream, `fsync(B)` writes A's")
    a1 = lat["intactfs-1"]
    w(f"{a.a_mib} MiB first (write dependence: {a1 * 1e3 if a1 else 0:.0f} ms in *append*), as the thesis's c²fs-1 does (1.28 s on its HDD). The byte")
    w("counts match the engine benchmark above and the thesis's Table 5.3: *truncate* in two streams never")
    w("writes A (kilobytes in total, as ext4); *overwrite* in one stream writes A twice (the thesis's c²fs-1")
    w("three times: its selective data journaling sends the overwrite through the journal; this engine")
    w("writes overwrites copy-on-write, once).\n")

    # Goal 2
    pe = [(lbl, None) for lbl, _, _ in g2]
    ratios_pt_ext4 = []
    for name in ("createfiles", "fileserver", "varmail"):
        e, p = R.m(name, "ext4", "ops_per_s_synced"), R.m(name, "passthrough", "ops_per_s_synced")
        if e and p:
            ratios_pt_ext4.append(p / e)
    ce, cp = R.m("git-default", "ext4", None, lambda r: r["copy_s"] + r["copy_sync_s"]), R.m("git-default", "passthrough", None, lambda r: r["copy_s"] + r["copy_sync_s"])
    if ce and cp:
        ratios_pt_ext4.append(ce / cp)
    lo, hi = (min(ratios_pt_ext4), max(ratios_pt_ext4)) if ratios_pt_ext4 else (None, None)
    missed_e = [lbl.split(" (")[0] for lbl, re_, _ in g2 if re_ < 0.5]
    missed_p = [lbl.split(" (")[0] for lbl, _, rp in g2 if rp < 0.75]
    w(f"**Goal 2, create/append-heavy throughput (≥ 0.5× ext4 and ≥ 0.75× the passthrough).** Against ext4:")
    w(f"{'met' if not missed_e else 'missed for ' + ', '.join(missed_e)}. The passthrough, which adds nothing but FUSE to the")
    w(f"same ext4, reaches only {x(lo)}–{x(hi)} of ext4 on createfiles, fileserver, varmail and the tree copy: a FUSE")
    w("request costs a round trip through the daemon (~30 µs here, 2 cores shared by the application, the")
    w("daemon's threads and the other work on the machine), and creating a 16 KiB file takes five of them")
    w("(LOOKUP of the new name, CREATE, WRITE, FLUSH, RELEASE), plus a GETXATTR before the write on file systems")
    w("that keep extended attributes without FUSE_HANDLE_KILLPRIV_V2 (the passthrough; below),")
    w("where ext4 does the whole create in a few microseconds of system call. No FUSE file system can be")
    w("within 2× of ext4 on these workloads on this machine; intactfs is as far from it as the passthrough")
    swe = next((re_ for lbl, re_, _ in g2 if lbl.startswith("seqwrite")), None)
    w("(the *intactfs ÷ passthrough* column), except where noted next. seqwrite (1 MiB writes, few requests")
    w(f"per byte) {'meets' if swe is not None and swe >= 0.5 else 'misses'} it ({x(swe)}). Against the passthrough: "
      + ("met everywhere." if not missed_p else "met except for " + ", ".join(missed_p) + "."))
    w("")
    fse, fsp, fsi = (R.m("fileserver", s, None, lambda r: r["disk_bytes"] / r["ops"] if "disk_bytes" in r and r["ops"] else None) for s in SYSTEMS)
    w("- *fileserver* (creates 128 KiB files, appends, reads and deletes them, 50 threads): intactfs writes")
    w(f"  {fmt_bytes(fsi)} to its disk per op against {fmt_bytes(fsp)} for the passthrough and {fmt_bytes(fse)} for ext4. The engine")
    w("  commits everything every 5 s (`commit=5`, ext4's journal interval) and a stream early once its dirty")
    w("  data pass a tenth of RAM (2 GiB here), so each periodic commit writes the files that exist at that")
    w("  moment, including those the workload deletes a moment later; the kernel under ext4 and the")
    w("  passthrough keeps data dirty for up to 30 s (`dirty_expire_centisecs`) and ext4's 5 s commits carry")
    w("  metadata only, so most fileserver files are deleted before their data is ever written. Until the")
    w("  mount's defaults changed (commit 0d2353f and before) the limit was a fixed 256 MiB and the commits it")
    w("  forced ran inside a write under the engine lock: that run of this script measured 0.63× of the")
    w("  passthrough and 9.9 KiB written per op; with the larger limit and the commits still written under")
    w("  the lock, 0.75×. Since issue 17 a commit is only prepared under the lock and written and flushed")
    w("  outside it, and the periodic commit with it: the other 49 threads are no longer held up meanwhile.")
    vm = [R.m("varmail", s, "fsync_mean_us") for s in SYSTEMS]
    w("- *varmail* (16 threads, an fsync after every append): every fsync commits the whole init stream,")
    w("  prepared under the engine lock and then written and `fdatasync`ed outside it, while the other")
    w("  threads' requests go on; fsyncs that arrive during a flush share the next one (group commit), as")
    w("  ext4 under the passthrough batches the fsyncs of 16 threads into shared journal commits. intactfs's")
    w(f"  fsyncs are short (mean {num(vm[2])} µs against {num(vm[1])} on the passthrough: one commit often covers")
    w("  several threads' appends). Before issue 17 nothing else was served while a commit was written and")
    w("  flushed: that run measured 0.79× of the passthrough.")
    gl = {lbl.split(" (")[0]: (re_, rp) for lbl, re_, rp in g2}
    cf, tc, sw = gl.get("createfiles", (None, None)), gl.get("tree copy, `cp -a`", (None, None)), gl.get("seqwrite", (None, None))
    syncs = [R.m("createfiles", s_, "sync_secs") for s_ in SYSTEMS]
    w(f"- *createfiles* ({x(cf[1])} of the passthrough) and the *tree copy* ({x(tc[1])}): bound by FUSE requests. The")
    w("  createfiles data (50,000 × 16 KiB) stays under the dirty limit, but the 5 s periodic commits write")
    w(f"  it during the loop, so the final sync is short ({num(syncs[2], 2)} s against {num(syncs[1], 2)} s for the passthrough's syncfs).")
    lp = [R.m("seqwrite", s_, None, lambda r: r["mb_written"] / r["secs"]) for s_ in SYSTEMS]
    lp_max = [max((r["mb_written"] / r["secs"] for r in R.rows("seqwrite", s_)), default=None) for s_ in SYSTEMS]
    sm = [min((r["mb_per_s_synced"] for r in R.rows("seqwrite", s_)), default=None) for s_ in SYSTEMS]
    cpu = [R.m("seqwrite", s_, None, lambda r: r["daemon_cpu_s"] / (r["mb_written"] / 1024)) for s_ in ("passthrough", "intactfs")]
    w(f"- *seqwrite* ({x(sw[0])} of ext4, {x(sw[1])} of the passthrough{'' if sw[1] is None or sw[1] >= 0.75 else ', missed'}): 1 MiB requests, few per byte. ext4's")
    w("  and the passthrough's figures swing between repetitions (see the ranges) with the kernel's dirty-page")
    w("  throttling: when the 1 GiB may stay dirty, their writer only fills the page cache (loop only up to")
    w(f"  {num(lp_max[0])} and {num(lp_max[1])} MB/s) and the final syncfs alone waits for the disk; when writeback throttles it, they fall")
    ss = [R.m("seqwrite", s_, "sync_secs") for s_ in SYSTEMS]
    w(f"  to {num(sm[0])} and {num(sm[1])} MB/s. intactfs's writer only fills the daemon's memory (the 1 GiB stays under the")
    w(f"  dirty limit: loop only {num(lp[2])} MB/s, median), and its final STREAMSYNC then writes the whole file in one commit:")
    w(f"  {num(ss[2], 2)} s{R.spread('seqwrite', 'intactfs', 'sync_secs', digits=2)} against {num(ss[1], 2)} s{R.spread('seqwrite', 'passthrough', 'sync_secs', digits=2)} for the passthrough's syncfs, which")
    w("  writes back pages the kernel already holds. The commit checksums each dirty 4 KiB block and writes")
    w("  them with `pwritev` from where they lie (since issue 17; before, they were gathered into one buffer")
    w("  first, and the commit held the engine lock throughout) into the image file, one copy into the host's")
    w(f"  page cache, before the `fdatasync`: the daemon spends {num(cpu[1], 1)} s of CPU per GiB against {num(cpu[0], 1)} s for the")
    w("  passthrough (whose writes the kernel copies; intactfs copies each block once into its dirty cache, once")
    w("  into the image).\n")

    # Per-write GETXATTR
    w("**A GETXATTR before every write(2), and how intactfs avoids it.** The kernel asks a FUSE file system")
    w("for `security.capability` before each write to a file (to drop file capabilities on write; FUSE inodes")
    w("are not marked `S_NOSEC` unless the daemon negotiates FUSE_HANDLE_KILLPRIV_V2), unless the daemon once")
    w("answered ENOSYS to GETXATTR. Measured by hand before issue 17 (request opcodes read from the daemon's")
    w("`/dev/fuse` reads with strace): 2,000 writes of 130 bytes reached intactfs as 2,063 WRITE + 2,000")
    w("GETXATTR requests. Since issue 17 intactfs negotiates FUSE_HANDLE_KILLPRIV_V2 (fuser 0.18 can request it;")
    w("the daemon clears set-user-id and set-group-id itself), so its writes cost one round trip (20,000 4 KiB")
    w("pwrites 1.7–2.1× faster than with `-o nokillpriv`, by hand); the passthrough, which forwards extended")
    w("attributes, still pays the GETXATTR, which is part of why intactfs leads it on the small-write rows")
    w("(varmail, randwrite, LevelDB).\n")

    # Goal 3
    sc, se = R.m("sqlite-streamsync-commit", "intactfs", "inserts_per_s"), R.m("sqlite-streamsync-end", "intactfs", "inserts_per_s")
    fpe = R.m("sqlite-default", "ext4", None, lambda r: r["flushes"] / r["rows"])
    w(f"**Goal 3, SQLite with IGNORE_FSYNC + streamsync ≥ 10× SQLite with fsync on ext4: missed**, by")
    w(f"{(10 * sx / sc) if sc and sx else 0:.1f}× with a STREAMSYNC after every COMMIT ({x(sc / sx if sc and sx else None)} of ext4) and by {(10 * sx / se) if se and sx else 0:.1f}× with one")
    w(f"STREAMSYNC at the end ({x(se / sx if se and sx else None)}). The thesis's 685× (Table 5.5: 6.71 transactions/s on c²fs against 4,598")
    w("on c²fs+) compares a HDD, where each of SQLite's ~3 fsyncs per transaction costs a seek and a rotation,")
    w(f"with no flush at all. Here a flush costs well under a millisecond (ext4 does {num(fpe, 1)} flushes per insert")
    w(f"and still runs {num(sx)} inserts/s), and a SQLite transaction is expensive through FUSE even when nothing is")
    w("flushed: by `strace -c` of the workload (by hand, 500 inserts on intactfs), each transaction makes")
    w("10 `pwrite`s, 4 `fdatasync`s (each still a FUSE_FSYNC round trip, answered at once in an IGNORE_FSYNC")
    w("stream), ~5 opens (the journal is created and opened each time), ~3 `stat`s of the missing journal")
    w("(a LOOKUP each, unless the kernel still holds the negative entry the mount now answers with, for 1 s),")
    w("an `unlink`, an `fchown` (SETATTR) and the closes (FLUSH, RELEASE): ~30 requests with the GETXATTRs,")
    w("~1 ms at ~30 µs each, against ~1 ms for ext4's whole transaction with its flushes. One")
    w("STREAMSYNC per COMMIT (one engine commit and one flush, against SQLite's 3 fsyncs) only adds to that.")
    slow = 0.005
    e5 = 1 / (1 / sx + (fpe or 4) * slow) if sx else None
    c5 = 1 / (1 / sc + slow) if sc else None
    w("What would move it: fewer requests per transaction (KILLPRIV_V2 removed the GETXATTRs in issue 17; the")
    w("kernel's writeback cache, which the mount leaves off because")
    w("it loses the writer's identity and program order) or slower flushes: if a flush cost 5 ms more (a")
    w(f"disk without a write cache), ext4 would run ~{num(e5)} inserts/s, the per-COMMIT variant ~{num(c5)} ({x(c5 / e5 if c5 and e5 else None)})")
    w(f"and the end-only variant, which flushes once, still ~{num(se)} ({x(se / e5 if se and e5 else None)}). SQLite in its default configuration on intactfs (3 flushes per insert, one per fsync;")
    w(f"{num(R.m('sqlite-default', 'intactfs', 'inserts_per_s'))} inserts/s) is {x(R.m('sqlite-default', 'intactfs', 'inserts_per_s') / sx if sx and R.m('sqlite-default', 'intactfs', 'inserts_per_s') else None)} of ext4 and {x(R.m('sqlite-default', 'intactfs', 'inserts_per_s') / R.m('sqlite-default', 'passthrough', 'inserts_per_s') if R.m('sqlite-default', 'passthrough', 'inserts_per_s') and R.m('sqlite-default', 'intactfs', 'inserts_per_s') else None)} of the passthrough.\n")

    # Others
    rw = [R.m("randwrite", s, "ops_per_s_synced") for s in SYSTEMS]
    w("**Where intactfs is faster than ext4.** *randwrite* (an fsync every 100 random 4 KiB writes):")
    w(f"{x(rw[2] / rw[0] if rw[0] and rw[2] else None)} of ext4, {x(rw[2] / rw[1] if rw[1] and rw[2] else None)} of the passthrough. The engine writes overwrites copy-on-write, so the 100 blocks of")
    w("an fsync go to one new contiguous run with one record and one flush; ext4 writes them in place at 100")
    w("random offsets and commits its journal with two flushes. The fsync-per-operation workloads gain from")
    w("the single flush per commit too (half the device flushes and under half the bytes of ext4 for git")
    w("with `core.fsync=committed`, see under the git table): LevelDB *fillsync* (an fsync per put) runs at")
    lf = [R.m("leveldb-fillsync", s_, "ops_per_s") for s_ in SYSTEMS]
    gt = [R.m("git-committed", s_, None, lambda r: r["add_s"] + r["commit_s"] + r["git_sync_s"]) for s_ in SYSTEMS]
    gd = [R.m("git-default", s_, None, lambda r: r["add_s"] + r["commit_s"] + r["git_sync_s"]) for s_ in SYSTEMS]
    w(f"{x(lf[2] / lf[0] if lf[0] and lf[2] else None)} of ext4 and {x(lf[2] / lf[1] if lf[1] and lf[2] else None)} of the passthrough; git add + commit with `core.fsync=committed` at")
    w(f"{x(gt[0] / gt[2] if gt[0] and gt[2] else None)} of ext4's speed and {x(gt[1] / gt[2] if gt[1] and gt[2] else None)} of the passthrough's (with git's default, which fsyncs")
    w(f"nothing: {x(gd[0] / gd[2] if gd[0] and gd[2] else None)} and {x(gd[1] / gd[2] if gd[1] and gd[2] else None)}).\n")
    w("**Reads** (*webserver*: 10 whole-file reads per log append) are served from the kernel's page cache on")
    w("all three (`FOPEN_KEEP_CACHE`), so what is left per op is the open/close traffic (LOOKUP when the")
    w("1 s entry TTL has expired, OPEN, FLUSH, RELEASE): the passthrough runs those in parallel on its four")
    w("threads; intactfs runs lookups, getattr and reads side by side under the read side of its engine lock")
    w("(since issue 17), and open, flush and release too since commit 542a472 (later than the builds measured")
    w("on 2026-11-25).\n")
    others = [s_ for s_ in OTHER_FUSE if R.has_system(s_)]
    if others:
        pers = [p_.split()[0] for p_ in a.params.splitlines() if p_.split()]

        def speed(name, s_):
            if name == "tree copy":
                return R.m("git-default", s_, None, lambda r: 1 / (r["copy_s"] + r["copy_sync_s"]))
            return R.m(name, s_, "mb_per_s_synced" if name == "seqwrite" else "ops_per_s_synced")

        w("**The other FUSE file systems** (options and versions under *Set-up*). Over the personalities and")
        w("the tree copy (the *intactfs ÷* columns above):")
        for s_ in others:
            rs = [(n_, speed(n_, "intactfs"), speed(n_, s_), speed(n_, "passthrough")) for n_ in pers + ["tree copy"]]
            vs = [(n_, i_ / o_) for n_, i_, o_, _ in rs if i_ and o_]
            vp = [(n_, o_ / p_) for n_, _, o_, p_ in rs if o_ and p_]
            if not vs and not vp:
                continue
            line = f"- *{s_}*:"
            if vs:
                lo_, hi_ = min(vs, key=lambda t: t[1]), max(vs, key=lambda t: t[1])
                slower = [n_ for n_, r_ in vs if r_ < 1]
                line += f" intactfs runs at {x(lo_[1])} ({lo_[0]}) to {x(hi_[1])} ({hi_[0]}) of its speed, " + (f"slower on {', '.join(slower)}" if slower else "faster on every one") + ";"
            if vp:
                lo_, hi_ = min(vp, key=lambda t: t[1]), max(vp, key=lambda t: t[1])
                line += f" {s_} itself runs at {x(lo_[1])} ({lo_[0]}) to {x(hi_[1])} ({hi_[0]}) of the passthrough's."
            w(line)
            if s_ == "bindfs":
                w("  bindfs answers every open without `FOPEN_KEEP_CACHE` (libfuse's high-level default without")
                w("  `kernel_cache`), so the kernel drops a file's cached pages at each open and *webserver*'s whole-file")
                w("  reads go to the daemon, where the passthrough and intactfs serve them from the page cache; it")
                w("  resolves every request by path (libfuse's high-level API) and chowns each new file to its creator.")
            if s_ == "fuse-overlayfs":
                w("  fuse-overlayfs runs its operations on the file tree one at a time under its big lock (`threaded=1`;")
                w("  its default single thread is slower still: by hand, *varmail* on the root disk ran at ~1,000 ops/s")
                w("  with the default against ~3,000 with `threaded=1` and ~7,500 on bindfs and the passthrough).")
        w("")
    w("**Noise.** The machine is shared; each figure is a median of the repetitions and the ranges show")
    w("how much single runs moved. The ratios between systems are stable where the range is narrow;")
    w("where a repetition coincided with other work (wide ranges), read the medians with that in mind.\n")
    return "\n".join(out)


if __name__ == "__main__":
    main()
