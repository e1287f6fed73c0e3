#!/usr/bin/env python3
"""Compares a pjdfstest run (prove's output) with a kind's known failures.

The known-failures file has one line per test file that fails, `FILE CASES REASON`:
FILE relative to pjdfstest's tests/ (`link/00.t`), CASES the failing case numbers as
ranges (`1-4,7`) or `all` (the file ran no plan), REASON free text; `#` starts a comment.
A case that fails unlisted, or a listed case that passes, is an error: the list can go
neither short nor stale. Cases a file planned but did not run count as failing.

    pjdfstest-check.py --prove OUT --known FILE [--write FILE]

--write prints what the list would be for this run (reasons kept where the cases are
unchanged, else `REASON?`) into FILE, to start or update a list by hand.
Exit: 0 as expected, 1 a difference, 2 bad input.
"""
import argparse
import re
import sys

FILE_RE = re.compile(r"^(\S+\.t)\s+\(Wstat: \d+.*?Tests: (\d+) Failed: (\d+)\)")
RESULT_RE = re.compile(r"^(\S+\.t) \.+ ")
FAILED_RE = re.compile(r"^\s+Failed tests?:\s+(.*)$")
PLAN_RE = re.compile(r"You planned (\d+) tests? but ran (\d+)")
NOPLAN_RE = re.compile(r"No plan found")


def short(path):
    """`.../tests/link/00.t` -> `link/00.t` (the part after the last `tests/`)."""
    i = path.rfind("tests/")
    return path[i + len("tests/"):] if i >= 0 else path


def parse_ranges(text):
    """`1-4, 7` -> {1, 2, 3, 4, 7}; `all` -> None."""
    text = text.strip()
    if text == "all":
        return None
    cases = set()
    for part in re.split(r"[,\s]+", text):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        lo, hi = int(lo), int(hi or lo)
        assert lo <= hi, part
        cases.update(range(lo, hi + 1))
    return cases


def ranges(cases):
    """{1, 2, 3, 7} -> `1-3,7`; None -> `all`."""
    if cases is None:
        return "all"
    out, run = [], []
    for c in sorted(cases):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else "%d-%d" % (run[0], run[-1]))
        run = [c]
    if run:
        out.append(str(run[0]) if len(run) == 1 else "%d-%d" % (run[0], run[-1]))
    return ",".join(out)


def summary_lines(lines):
    """The lines of prove's "Test Summary Report", continuation lines joined."""
    start = next((i for i, l in enumerate(lines) if l.startswith("Test Summary Report")), None)
    if start is None:
        return []
    joined = []
    for l in lines[start + 2:]:
        if l.startswith("Files="):
            break
        if joined and re.match(r"^\s{4,}\S", l) and not re.match(r"^\s+[A-Z][a-z ]+:", l):
            joined[-1] += " " + l.strip()
        else:
            joined.append(l)
    return joined


def failures(text):
    """{file: failing cases or None (no plan)}, and the count of files prove ran."""
    lines = text.splitlines()
    ran = {short(m.group(1)) for m in map(RESULT_RE.match, lines) if m}
    failing, current = {}, None
    for l in summary_lines(lines):
        m = FILE_RE.match(l)
        if m:
            current = short(m.group(1))
            failing.setdefault(current, set())
            continue
        assert current is not None, "a summary detail before any file: %r" % l
        m = FAILED_RE.match(l)
        if m:
            failing[current] |= parse_ranges(m.group(1))
        m = PLAN_RE.search(l)
        if m and failing[current] is not None:
            planned, done = int(m.group(1)), int(m.group(2))
            failing[current] |= set(range(done + 1, planned + 1))
        if NOPLAN_RE.search(l):
            failing[current] = None
    # A file in the report with a non-zero exit but no failing case (a crash after the
    # last case) still counts: as failing with no case numbers it would vanish, so `all`.
    for f, cases in failing.items():
        if cases is not None and not cases:
            failing[f] = None
    return failing, len(ran)


def read_known(path):
    known = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 2)
            if len(parts) < 3:
                sys.exit("%s:%d: expected `FILE CASES REASON`, got %r" % (path, n, line))
            if parts[0] in known:
                sys.exit("%s:%d: %s listed twice" % (path, n, parts[0]))
            known[parts[0]] = (parse_ranges(parts[1]), parts[2])
    return known


def compare(failing, known):
    """Lines describing every difference (empty: as expected)."""
    diffs = []
    for f in sorted(set(failing) | set(known)):
        got = failing.get(f, set())
        want = known[f][0] if f in known else set()
        if got == want:
            continue
        if got is None or want is None:
            diffs.append("%s: fails %s, expected %s" % (f, ranges(got) or "none", ranges(want) or "none"))
            continue
        if got - want:
            diffs.append("UNEXPECTED FAILURE %s: cases %s" % (f, ranges(got - want)))
        if want - got:
            diffs.append("KNOWN FAILURE NOW PASSES %s: cases %s (update the list)" % (f, ranges(want - got)))
    return diffs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prove", required=True, help="prove's output (stdout and stderr)")
    ap.add_argument("--known", required=True, help="the kind's known failures (may be absent: none)")
    ap.add_argument("--write", help="write the list this run implies to this file")
    args = ap.parse_args()
    with open(args.prove, errors="replace") as f:
        text = f.read()
    if "Files=" not in text:
        print("no prove summary in %s (did pjdfstest run?)" % args.prove)
        return 2
    failing, files = failures(text)
    try:
        known = read_known(args.known)
    except FileNotFoundError:
        known = {}
    if args.write:
        with open(args.write, "w") as out:
            for f in sorted(failing):
                same = f in known and known[f][0] == failing[f]
                out.write("%s %s %s\n" % (f, ranges(failing[f]), known[f][1] if same else "REASON?"))
    m = re.search(r"Files=(\d+), Tests=(\d+)", text)
    total = int(m.group(2)) if m else 0
    cases = sum(len(c) for c in failing.values() if c is not None)
    diffs = compare(failing, known)
    for d in diffs:
        print(d)
    print("pjdfstest: %d files, %d cases, %d failing in %d files (%d files listed in %s)%s"
          % (files, total, cases, len(failing), len(known), args.known,
             "" if not diffs else ": %d differences" % len(diffs)))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
