"""What the reports of bench/optfs/bench.sh and bench/cfs/bench.sh (their report.py) share:
medians and number formats, reading the JSON lines, the machine, the arguments every run
passes, the run's lines of "Machine and run", and replacing a marked section of a docs file.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def median_of(rs, key, per_op=False):
    """The median of one field over result lines (per operation: divided by each line's ops)."""
    if per_op:
        return med([r[key] / r["ops"] for r in rs if r.get("ops") and key in r])
    return med([r.get(key) for r in rs])


def ops_range(rs):
    """(min, max) of ops_per_s over result lines, when there are several."""
    xs = [r["ops_per_s"] for r in rs]
    return (min(xs), max(xs)) if len(xs) > 1 else None


def fmt(v, digits=None):
    if v is None:
        return "–"
    if digits is None:
        digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2
    return f"{v:,.{digits}f}"


def ratio(a, b, zero=None):
    """a / b; None if either is missing; if b is 0: `zero` when a > 0, else None."""
    if a is None or b is None:
        return None
    if b == 0:
        return zero if a > 0 else None
    return a / b


def pct(s):
    """'CPU 61%, I/O 34%' -> (61, 34)."""
    out = []
    for part in s.split(","):
        try:
            out.append(int(part.strip().split()[-1].rstrip("%")))
        except (ValueError, IndexError):
            out.append(0)
    return (out + [0, 0])[:2]


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


def run_lines(mc, a):
    """The lines of "Machine and run" after the machine's: commit, date and load; the PSI
    stalls; the start of the command's line (to go on in the report's own words)."""
    out = [f"- commit {mc['commit']}; {a.date}; load average at the start {a.load_start}, at the end {a.load_end}"]
    if a.pressure:
        out.append(f"- time some task was stalled during the run (PSI \"some\", other work on the machine included): {a.pressure}")
    out.append(f"- command: `{a.command}` (as root); REPS={a.reps}: {a.reps} repetition{'s' if a.reps != 1 else ''}, each on freshly made file")
    return out


def parser(doc):
    """The arguments every bench.sh passes (the report's own follow, then --workdir-fs)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    return p


def write_docs(path, body, begin, end):
    """Replace the section between the markers begin and end of the file path with body;
    append it (with the markers) at the end if the file has neither."""
    text = open(path).read() if os.path.exists(path) else ""
    block = f"{begin}\n{body}{end}\n"
    b, e = text.find(begin), text.find(end)
    if b >= 0 and e > b:
        text = text[:b] + block.rstrip("\n") + text[e + len(end):]
    elif b >= 0 or e >= 0:
        sys.exit(f"report.py: {path} has only one of the markers {begin} / {end}: fix it by hand")
    else:
        if text and not text.endswith("\n"):
            text += "\n"
        text += ("\n" if text else "") + block
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main(p, section, begin, end, what):
    """Parse p's arguments, print section(runs, bad, args) and with --write-docs FILE put it
    between begin and end in FILE (not when a run failed). Returns the exit status."""
    a = p.parse_args()
    runs, bad = load(a.results)
    body, nfail = section(runs, bad, a)
    sys.stdout.write(body)
    if a.write_docs:
        if nfail:
            print(f"report.py: {nfail} run(s) failed: not writing {a.write_docs}", file=sys.stderr)
            return 1
        write_docs(a.write_docs, body, begin, end)
        print(f"report.py: wrote the {what} section of {a.write_docs}", file=sys.stderr)
    return 1 if nfail else 0
