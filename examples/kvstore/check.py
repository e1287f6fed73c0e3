#!/usr/bin/env python3
"""intact checker for the key-value store example (kv.c), after thesis 004 Listing 3.1.

    check.py CRASH_DIR STDOUT_FILE     (one state: intact check --checker)
    check.py                           (warm server: intact check --checker-server)

Exit 0 if the crash state is consistent, 1 if not (one-line reason on stderr), 2 on a
usage error. Python 3 standard library only; with no arguments it serves the warm-checker
protocol (docs/checkers.md) through the intact package's `intact.checker` (found on
PYTHONPATH, else in this repository's python/ directory), forking a child per state.

What the workload put, in order, comes from the environment variable KV_EXPECT:
space-separated KEY=VALUE pairs in command-line order, e.g. KV_EXPECT="x=foo1 y=foo2" for
`kv x foo1 y foo2` (the quick start's workload, which is the default when KV_EXPECT is
unset; KV_EXPECT="" means the workload put nothing). The recorded directory must start
empty (no table, no kv.log), as in the quick start.

The store's contents are the records of `table`, then those of `kv.log`; a later record
for a key wins. `table.tmp` is not part of the store and is ignored. Checks:
  well-formed  every line of table and kv.log is a complete record "KEY=VALUE\\n": ends
               with a newline, printable ASCII (no NUL or other garbage), KEY and VALUE
               non-empty. One exception, as in any log: the last line of kv.log may be
               cut short (a crash during an append, or a partly applied truncate) -- if
               those bytes are a prefix of a record the workload put, a reader stops at
               the last newline and the checker ignores them. table gets no such
               leniency: it is written whole and renamed into place.
  atomic       every record is one the workload put (its key and that key's value)
  ordered      the contents equal the result of some prefix of the puts: if a key is
               present, every key put before it is present too (with duplicate keys, each
               key holds the value of the last put of that prefix)
  durable      if "Done" was printed, the contents are the result of all the puts.
               Also if `table` exists: kv creates it only after kv.log was fsynced with
               every put, so a checkpoint must not lose any of them.
"""
import os
import sys

DEFAULT_EXPECT = "x=foo1 y=foo2"


class Inconsistent(Exception):
    pass


def parse_expect(text):
    puts = []
    for item in text.split():
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            sys.stderr.write(f"check.py: bad KV_EXPECT item {item!r}: want KEY=VALUE\n")
            sys.exit(2)
        puts.append((key, value))
    return puts


def read_records(path, name, torn_ok=()):
    """The records of one store file, in order; [] if the file does not exist. A last line
    without its newline is dropped if it is a prefix of one of the byte strings torn_ok,
    and is an error otherwise."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise Inconsistent(f"{name} cannot be read: {e.strerror}")
    if not data:
        return []
    if not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        tail = data[cut:]
        bad = next((b for b in tail if b < 0x20 or b > 0x7E), None)
        if bad is not None:
            no = data.count(b"\n") + 1
            raise Inconsistent(f"{name} line {no} holds garbage (byte 0x{bad:02x}): {short(tail)}")
        if not any(rec.startswith(tail) for rec in torn_ok):
            raise Inconsistent(f"{name} ends with an incomplete record {short(tail)} (no "
                               f"newline) that is not part of any record the workload put")
        data = data[:cut]
        if not data:
            return []
    records = []
    for no, line in enumerate(data[:-1].split(b"\n"), 1):
        bad = next((b for b in line if b < 0x20 or b > 0x7E), None)
        key, sep, value = line.partition(b"=")
        if bad is not None:
            raise Inconsistent(f"{name} line {no} holds garbage (byte 0x{bad:02x}): {short(line)}")
        if not sep or not key or not value:
            raise Inconsistent(f"{name} line {no} is not a KEY=VALUE record: {short(line)}")
        records.append((key.decode(), value.decode()))
    return records


def short(b):
    return repr(b[:40] + (b"..." if len(b) > 40 else b""))


def apply(puts):
    state = {}
    for key, value in puts:
        state[key] = value
    return state


def check(crash_dir, stdout_file, puts):
    try:
        with open(stdout_file, "rb") as f:
            printed = f.read()
    except OSError:
        printed = b""  # no output file: nothing was printed
    done = b"Done" in printed

    has_table = os.path.lexists(os.path.join(crash_dir, "table"))
    records = read_records(os.path.join(crash_dir, "table"), "table")
    put_records = [f"{k}={v}\n".encode() for k, v in puts]
    records += read_records(os.path.join(crash_dir, "kv.log"), "kv.log", put_records)
    state = apply(records)

    allowed = {}
    for key, value in puts:
        allowed.setdefault(key, set()).add(value)
    for key, value in records:
        if key not in allowed:
            raise Inconsistent(f"the store holds key {key!r}, which the workload never put "
                               f"(expected keys: {' '.join(allowed) or 'none'}; set KV_EXPECT)")
        if value not in allowed[key]:
            raise Inconsistent(f"key {key!r} holds {value!r}, a value the workload never put "
                               f"for it (expected {' or '.join(map(repr, sorted(allowed[key])))})")

    prefixes = [apply(puts[:j]) for j in range(len(puts) + 1)]
    if state not in prefixes:
        order = list(dict.fromkeys(k for k, _ in puts))
        for i, key in enumerate(order):
            later = [k for k in order[i + 1:] if k in state]
            if key not in state and later:
                raise Inconsistent(f"ordering: the store holds {later[0]!r} but not {key!r}, "
                                   f"which was put before it")
        raise Inconsistent(f"the store's contents {state} are not the result of any prefix of "
                           f"the puts")

    final = prefixes[-1]
    if (done or has_table) and state != final:
        why = "'Done' was printed" if done else "table exists (kv.log had been fsynced)"
        missing = [k for k in final if k not in state]
        if missing:
            raise Inconsistent(f"durability: {why} but key {missing[0]!r} is missing")
        key = next(k for k in final if state[k] != final[k])
        raise Inconsistent(f"durability: {why} but key {key!r} holds {state[key]!r}, "
                           f"not its final value {final[key]!r}")


def serve(puts):
    """The warm-checker protocol, through intact.checker (one forked child per state)."""
    try:
        import intact.checker
    except ImportError:
        repo_python = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
        sys.path.append(repo_python)
        import intact.checker

    def judge(crash_dir, stdout_file):
        try:
            check(crash_dir, stdout_file, puts)
        except Inconsistent as e:  # the same reason text as the per-process run gives
            raise intact.checker.Inconsistent(str(e)) from None

    intact.checker.serve(judge)


def main():
    if len(sys.argv) not in (1, 3):
        sys.stderr.write("usage: check.py CRASH_DIR STDOUT_FILE, or no arguments to serve "
                         "the warm-checker protocol\n")
        sys.exit(2)
    puts = parse_expect(os.environ.get("KV_EXPECT", DEFAULT_EXPECT))
    if len(sys.argv) == 1:
        serve(puts)
        return
    try:
        check(sys.argv[1], sys.argv[2], puts)
    except Inconsistent as e:
        sys.stderr.write(f"{e}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
