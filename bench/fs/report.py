#!/usr/bin/env python3
"""Tables for bench/fs/engine.sh: reads the JSON lines of engine_bench runs, takes each
metric's median over the runs of one configuration, prints the tables and writes its
section of the Markdown report (docs/benchmarks.md, between the bench/fs/engine.sh markers;
bench/fs/mount.sh's section, after it, is left alone)."""

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from collections import defaultdict


def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return ""


def machine():
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = ""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.0f} GiB RAM"
    root = sh("findmnt", "-no", "SOURCE,FSTYPE,OPTIONS", "/var/tmp") or sh("findmnt", "-no", "SOURCE,FSTYPE", "/")
    rev = sh("git", "rev-parse", "--short", "HEAD")
    dirty = " + uncommitted changes" if sh("git", "status", "--porcelain", "--untracked-files=no") else ""
    load = open("/proc/loadavg").read().split()[:3]
    return {
        "cpu": f"{os.cpu_count()} cores ({model})",
        "kernel": f"Linux {platform.release()}",
        "memory": mem,
        "disk": f"/var/tmp on {root}",
        "commit": f"{rev}{dirty}",
        "load": " ".join(load),
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }


def write_section(path, name, text):
    """Replaces the part of `path` between the markers of `name` (docs/benchmarks.md holds
    one section per script: engine.sh's, then mount.sh's) or, if absent, appends it; the
    other sections are left as they are."""
    begin, end = f"<!-- {name}: begin (generated; do not edit by hand) -->", f"<!-- {name}: end -->"
    block = f"{begin}\n{text.rstrip()}\n{end}\n"
    try:
        doc = open(path).read()
    except FileNotFoundError:
        doc = ""
    i, j = doc.find(begin), doc.find(end)
    if i >= 0 and j > i:
        rest = doc[j + len(end):].lstrip("\n")
        doc = doc[:i] + block + ("\n" + rest if rest else "")
    else:
        doc = (doc.rstrip() + "\n\n" if doc.strip() else "") + block
    with open(path, "w") as f:
        f.write(doc)


def flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[f"{prefix}{k}"] = v
    return out


def medians(rows):
    keys = set().union(*(r.keys() for r in rows))
    return {k: statistics.median([r[k] for r in rows if k in r]) for k in keys}, len(rows)


def fmt_bytes(b):
    if b is None:
        return "–"
    if b >= 2**20:
        return f"{b / 2**20:.2f} MiB"
    if b >= 1024:
        return f"{b / 1024:.1f} KiB"
    return f"{b:.0f} B"


def ratio(a, b, digits=2):
    if a is None or b is None or b == 0:
        return "–"
    return f"{a / b:.{digits}f}×"


READING = """## Reading

**One stream vs two (write dependence).** A stream is ordered: committing it commits every
earlier change in it. With A and B in one stream, `fsync(B)` therefore writes A's {A} of dirty
data too (`-1`: the fsync writes A's size plus one commit record, and takes as long as writing
A to the disk). With B in its own stream, B's fsync commits only B's group: one data block and
one journal record, kilobytes, like ext4, whose delayed allocation keeps A unallocated and out of
the committing transaction. In the append variant the cost moves rather than vanishes: A is
written when its own stream commits (the final sync), so the totals are equal.

**Truncate.** In two streams A's blocks are still only in the engine's dirty map when A is
truncated; the truncate drops them, so A's data never reaches the device (total: kilobytes, as
with ext4, which has not written A either). In one stream B's fsync already wrote A, for nothing.

**Overwrite.** In two streams the second version of A replaces the first in the dirty map and A
is written once, at the final sync. In one stream A is written by B's fsync and again at the
final sync: twice A's size. (The thesis's c²fs-1 writes three times A's size here, because its
selective data journaling sends the overwrite through the journal and then in place; this
engine never journals data: an overwrite goes to newly allocated blocks, copy on write, and
only their checksums enter the record.)

**Commit cost.** An engine commit is its data blocks, one record and a single flush: the record
carries the data blocks' checksums, so recovery can tell whether they arrived and the data
needs no flush of its own before the record. ext4 (data=ordered) writes data, then journal
blocks and a commit block with flushes around it, which the flushes-per-op column shows. An
engine overwrite costs what an append costs in bytes (data block + record, copy on write),
while ext4 overwrites in place and mostly needs no journal commit at all (the inode's
timestamp did not change within the clock tick), so random overwrite + fsync is the workload
where ext4 writes less.

**Random overwrite is slow for a CPU reason (engine at the commit above).** Every commit
clones the committed inode's whole extent map (`Fs::commit`: `node.extents().cloned()`,
extents with their per-block checksum vectors), although the clone is only used when the inode
has pending preallocation. A commit therefore costs O(extents of the file), not O(blocks
committed), and a 64 MiB file fragmented by copy-on-write overwrites has thousands of extents.
Without a disk (engine on /dev/shm) the overwrite workload runs at ~6,000–8,000 ops/s against
~85,000–110,000 for appends; `perf --call-graph dwarf` puts ~58% of the run in cloning and
dropping that map. Cloning only when `self.falloc.contains_key(&ino)` (or looking the holes up
inside that branch) gave ~117,000 ops/s on /dev/shm and halved the fsync p50 on disk
(~285 → ~145 µs) in a scratch copy of the crate; the engine measured above does not have it.

## Not measured here

FUSE (the engine is called in-process, single-threaded); reads; concurrent streams from
several threads; the thesis's repeated-fsync variant (Figure 5.3) and its HDD/SSD devices;
direct-I/O loop devices. Times are wall-clock on a shared 2-core VM.
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("out")
    ap.add_argument("--command", required=True)
    ap.add_argument("--reps", type=int, required=True)
    ap.add_argument("--elapsed", type=int, required=True)
    ap.add_argument("--device-mib", type=int, required=True)
    ap.add_argument("--params", required=True)
    ap.add_argument("--pressure", default="")
    a = ap.parse_args()

    groups = defaultdict(list)
    checked = mismatched = 0
    for line in open(a.results):
        r = json.loads(line)
        if "whole_run_blockdev_bytes" in r:
            checked += 1
            if (r["whole_run_blockdev_bytes"], r["whole_run_blockdev_flushes"]) != (r["whole_run_engine_bytes"], r["whole_run_engine_flushes"]):
                mismatched += 1
        if r["workload"] == "table53":
            key = ("table53", r["variant"], r["config"])
        else:
            key = (r["workload"], r["system"])
        groups[key].append(flatten(r))
    med = {k: medians(v) for k, v in groups.items()}

    def g(key, field):
        m = med.get(key)
        return m[0].get(field) if m else None

    def spread(key, field, scale=1.0, digits=0):
        vals = [r[field] * scale for r in groups.get(key, []) if field in r]
        if len(vals) < 2:
            return ""
        return f" ({min(vals):,.{digits}f}–{max(vals):,.{digits}f})"

    out = []
    w = out.append
    m = machine()
    systems = [s for s in ["engine", "engine-loop", "ext4"] if any(k[-1] == s for k in med)]
    w("# intactfs benchmarks: the engine alone, against ext4\n")
    w("Generated by `bench/fs/engine.sh`; do not edit by hand. Absolute times vary a lot between")
    w("runs on these shared VMs (see docs/performance.md): read the ratios, measured side by side")
    w("in one run, rather than the absolute figures.\n")
    w("## Machine and run\n")
    w(f"- {m['cpu']}, {m['memory']}, {m['kernel']}; {m['disk']}")
    w(f"- commit {m['commit']}; {m['date']}; load average at the end {m['load']}")
    if a.pressure:
        w(f"- time some task was stalled during the run (PSI \"some\", other work on the machine included): {a.pressure}")
    w(f"- command: `{a.command}` (as root); {a.reps} runs of every configuration, the systems alternating;")
    w(f"  every figure is the median of its runs (each metric separately); the whole script took {a.elapsed} s")
    w("- one workload by hand: `cargo run --release -p intactfs --example engine_bench -- [--backend engine|ext4]")
    w("  [--device-file F] [--dir DIR] [--blockdev loopN] [--unmount-at-end] WORKLOAD [options]`")
    w("  (all options in the example's header)\n")
    w("## Set-up\n")
    w(f"All three systems use {a.device_mib} MiB devices backed by files in a fresh `/var/tmp/intactfs-bench.*`")
    w("directory on the root disk (ext4 on virtio, write-back cache). The backing files are written full")
    w("of zeros first, so no block write allocates in the root file system.\n")
    w("- **engine**: `intactfs` (mkfs + mount, default options: journal 1/32 of the device, dirty limit")
    w("  256 MiB) on a `FileDevice` over `engine.img`: `pwrite` into the root file system's page cache, a")
    w("  flush is `fdatasync`. No FUSE and no kernel file system above it: the calls are library calls.")
    w("  Bytes written = everything the engine sent to its device (a counting wrapper), split by the")
    w("  engine's `stats()` into data / journal / snapshot / header.")
    w("- **engine-loop**: the same engine on a `FileDevice` over `/dev/loopN`, the loop device ext4 uses:")
    w("  the same lower stack as ext4 (block-device page cache, loop driver, whose flush is an `fsync`")
    w("  of the backing file), to tell \"engine vs ext4\" apart from \"file vs loop device\".")
    if checked:
        verdict = "matched exactly" if not mismatched else f"differed in {mismatched} runs"
        w(f"  Cross-check of the byte accounting: in all {checked} engine-loop runs, the bytes and flushes the")
        w(f"  engine's counting wrapper saw over the whole run (mkfs to unmount) and the loop device's")
        w(f"  `/sys/block/loopN/stat` counters {verdict}.")
    w("- **ext4**: the same program with `--backend ext4`, making the same calls as system calls")
    w("  (`open(O_CREAT|O_EXCL)`, `pwrite`, `ftruncate`, `fsync`, `syncfs`, `mkdir`) on a fresh")
    w("  `mkfs.ext4 -b 4096 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0` file system (default")
    w("  mount options: data=ordered, delayed allocation, 5 s commit interval) on `/dev/loopN` (buffered")
    w("  mode) over `ext4.img`. Bytes written = delta of `/sys/block/loopN/stat` field 7 (sectors × 512);")
    w("  flushes = field 16. A new file system is made for every run.")
    w(f"- Parameters: {a.params}.\n")

    # ----- throughput -----
    w("## Throughput and fsync latency\n")
    w("\"op\" = one file for create, one write + fsync otherwise; create's time includes its final sync.")
    w("ops/s: median (min–max over the runs).")
    w("Written per op = bytes the device received during the timed part, divided by the ops.\n")
    w("| workload | system | ops/s | fsync mean µs | fsync p50 µs | fsync p99 µs | written per op | flushes per op |")
    w("|---|---|---|---|---|---|---|---|")
    names = {"create": "create (sync at end)", "create-fsync": "create + fsync each", "append": "append 4 KiB + fsync", "overwrite": "random overwrite 4 KiB + fsync"}

    def rate(k):
        return g(k, "files_per_s") or g(k, "ops_per_s")

    def per(k):
        return g(k, "bytes_per_file") if k[0].startswith("create") else g(k, "bytes_per_op")

    thr = []
    for wl in ["create", "create-fsync", "append", "overwrite"]:
        for sy in systems:
            k = (wl, sy)
            if k not in med:
                continue
            n = g(k, "files") or g(k, "n")
            lat = [g(k, f"fsync_latency.{x}") for x in ("mean_us", "p50_us", "p99_us")]
            lat_s = [f"{x:.0f}" if x is not None else "–" for x in lat]
            rf = "files_per_s" if wl.startswith("create") else "ops_per_s"
            w(f"| {names[wl]} | {sy} | {rate(k):,.0f}{spread(k, rf)} | {' | '.join(lat_s)} | {fmt_bytes(per(k))} | {g(k, 'flushes') / n:.2f} |")
        x = (wl, "ext4")
        for sy in systems[:-1]:
            e = (wl, sy)
            if e in med and x in med:
                thr.append((names[wl], sy, ratio(rate(e), rate(x)), ratio(g(e, "fsync_latency.p50_us"), g(x, "fsync_latency.p50_us")), ratio(g(e, "fsync_latency.p99_us"), g(x, "fsync_latency.p99_us")), ratio(per(e), per(x))))
    w("")
    w("Ratios against ext4 (ops/s > 1: faster than ext4; latency and bytes < 1: less than ext4):\n")
    w("| workload | system | ops/s | fsync p50 | fsync p99 | written per op |")
    w("|---|---|---|---|---|---|")
    for row in thr:
        w("| " + " | ".join(row) + " |")
    w("")

    # ----- Table 5.3 -----
    configs = ["ext4"] + [f"{s}-{n}" for s in systems[:-1] for n in (1, 2)]
    w("## Write dependence: the Table 5.3 microbenchmarks\n")
    w("The single-fsync experiments of the ccfs thesis (Table 5.3, chapter 5, \"Multi-stream Benefits\"):")
    w("write A (size in the parameters) in 1 MiB calls, write 1 byte to B, `fsync(B)` (timed); then")
    w("*append*: nothing more; *truncate*: truncate A to 0; *overwrite*: write all of A again; then a final")
    w("sync and unmount. A and B are created and synced before the measurement starts. `-1`: A and B")
    w("modified in one stream (stream 1); `-2`: A in stream 1, B in stream 2. ext4 has no streams.\n")
    w("- *fsync written*: bytes the device received from the start to the end of `fsync(B)`.")
    w("- *total (synced)*: bytes received from the start (A and B exist and are durable) through the")
    w("  truncate/overwrite and a final sync (engine `sync()`, ext4 `syncfs`).")
    w("- *total incl. unmount*: the same through unmount (engine: its final checkpoint, i.e. metadata")
    w("  snapshot and header; ext4: `umount`, i.e. journal checkpoint and superblock). mkfs and mount")
    w("  are never included. The ratios use this total.")
    varied = [k for k, rows in groups.items() if k[0] == "table53" and any(len({r.get(f) for r in rows}) > 1 for f in ("fsync_bytes", "total_bytes_synced", "total_bytes"))]
    if varied:
        names_v = ", ".join(f"{k[1]}/{k[2]}" for k in sorted(varied))
        w(f"- fsync latency: median (min–max over the runs). Byte counts varied between runs only for {names_v} (medians shown).\n")
    else:
        w("- fsync latency: median (min–max over the runs). The byte counts were identical in every run.\n")
    w("| benchmark | system | fsync latency ms | fsync written | flushes | total (synced) | total incl. unmount | latency vs ext4 | fsync written vs ext4 | total vs ext4 |")
    w("|---|---|---|---|---|---|---|---|---|---|")
    for v in ["append", "truncate", "overwrite"]:
        x = ("table53", v, "ext4")
        for cfg in configs:
            k = ("table53", v, cfg)
            if k not in med:
                continue
            cols = [v, cfg, f"{g(k, 'fsync_secs') * 1e3:.2f}{spread(k, 'fsync_secs', 1e3, 2)}", fmt_bytes(g(k, "fsync_bytes")), f"{g(k, 'fsync_flushes'):.0f}", fmt_bytes(g(k, "total_bytes_synced")), fmt_bytes(g(k, "total_bytes"))]
            if cfg == "ext4":
                cols += ["", "", ""]
            else:
                cols += [ratio(g(k, "fsync_secs"), g(x, "fsync_secs"), 1), ratio(g(k, "fsync_bytes"), g(x, "fsync_bytes"), 1), ratio(g(k, "total_bytes"), g(x, "total_bytes"), 2)]
            w("| " + " | ".join(cols) + " |")
    w("")
    w("The engine's split of its bytes (engine on the file device; data = file blocks, journal = commit records):\n")
    w("| benchmark | config | fsync: data | fsync: journal | total (synced): data | total (synced): journal | commits (synced) |")
    w("|---|---|---|---|---|---|---|")
    for v in ["append", "truncate", "overwrite"]:
        for cfg in ["engine-1", "engine-2"]:
            k = ("table53", v, cfg)
            if k not in med:
                continue
            w(f"| {v} | {cfg} | {fmt_bytes(g(k, 'engine_fsync.data'))} | {fmt_bytes(g(k, 'engine_fsync.journal'))} | {fmt_bytes(g(k, 'engine_total_synced.data'))} | {fmt_bytes(g(k, 'engine_total_synced.journal'))} | {g(k, 'engine_total_synced.commits'):.0f} |")
    w("")
    w(READING.replace("{A}", fmt_bytes(g(("table53", "append", "engine-1"), "a_bytes"))))
    text = "\n".join(out)
    write_section(a.out, "bench/fs/engine.sh", text)
    # The tables on stdout.
    start = text.index("## Throughput")
    print(text[start:text.index("## Reading")])
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
