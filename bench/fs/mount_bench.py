#!/usr/bin/env python3
"""Workloads of bench/fs/mount.sh that run through a mounted file system (ext4, the
passthrough FUSE baseline or intactfs) and print one JSON line each.

  mount_bench.py table53 --dir D --variant append|truncate|overwrite --a-mib 100
        [--streams 1|2 --intactfs] --blockdev loopN --sync-path P --system S
  mount_bench.py sqlite --dir D --rows 2000 --row-bytes 120
        [--mode default|streamsync-commit|streamsync-end] [--intactfs] --blockdev loopN
        --sync-path P --system S
  mount_bench.py sync PATH [--intactfs]

--blockdev: the loop device whose /sys/block/NAME/stat counts the bytes that reach the disk
(ext4's own loop device, the passthrough's backing ext4, or the ext4 holding the intactfs
image). --sync-path: where a final sync goes: syncfs(2) on it (ext4: the mount; passthrough:
its backing directory, since syncfs on a FUSE mount never reaches the daemon), or with
--intactfs the STREAMSYNC ioctl in every stream used.

Streams (intactfs): a process joins one with the SETSTREAM ioctl (struct {u64 id; u32 flags;
u32 reserved}, id = FNV-1a 64 of the name, as `intact fs exec --stream` does). Streams
belong to processes, so table53's B is written by a child process.
"""

import argparse
import fcntl
import json
import os
import random
import sqlite3
import struct
import sys
import time

SETSTREAM = 0x4010CC01
GETSTREAM = 0x8010CC02
STREAMSYNC = 0x0000CC03
IGNORE_FSYNC = 1
MIB = 1 << 20


def stream_id(name):
    h = 0xCBF29CE484222325
    for b in name.encode():
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return max(h, 1)


def setstream(path, name, flags=0):
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, SETSTREAM, struct.pack("=QII", stream_id(name), flags, 0))
        got = struct.unpack("=QII", fcntl.ioctl(fd, GETSTREAM, bytes(16)))
        assert got[0] == stream_id(name) and got[1] == flags, f"GETSTREAM says {got}"
    finally:
        os.close(fd)


def streamsync(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, STREAMSYNC, 0)
    finally:
        os.close(fd)


def syncfs(path):
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.syncfs(fd) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    finally:
        os.close(fd)


def disk(dev):
    """(bytes written, flushes) so far on block device `dev` (/sys/block/DEV/stat fields 7, 16)."""
    f = open(f"/sys/block/{dev}/stat").read().split()
    return int(f[6]) * 512, int(f[15]) if len(f) > 15 else 0


def final_sync(a, intactfs_path=None):
    if a.intactfs:
        streamsync(intactfs_path or a.dir)
    else:
        syncfs(a.sync_path)


# ---------------------------------------------------------------- Table 5.3
def table53(a):
    """Thesis Table 5.3 (ccfs §5.6, "Multi-stream Benefits"): write A (a_mib MiB in 1 MiB
    calls), write 1 byte to B, fsync(B) (timed); then append: nothing; truncate: truncate A
    to 0; overwrite: write all of A again; then a final sync. A and B exist and are durable
    before the start. Streams: A in stream "t53-a"; B in "t53-b" (--streams 2) or "t53-a"."""
    d = a.dir
    pa, pb = os.path.join(d, "A"), os.path.join(d, "B")
    b_stream = "t53-b" if a.streams == 2 else "t53-a"
    to_child_r, to_child_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        # The B process.
        try:
            os.close(to_child_w)
            os.close(to_parent_r)
            if a.intactfs:
                setstream(d, b_stream)
            fb = os.open(pb, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
            os.fsync(fb)
            os.write(to_parent_w, b"r")
            assert os.read(to_child_r, 1) == b"g"
            os.pwrite(fb, b"b", 0)
            b0, f0 = disk(a.blockdev)
            t = time.perf_counter()
            os.fsync(fb)
            secs = time.perf_counter() - t
            b1, f1 = disk(a.blockdev)
            os.close(fb)
            os.write(to_parent_w, json.dumps({"fsync_secs": secs, "fsync_bytes": b1 - b0, "fsync_flushes": f1 - f0}).encode() + b"\n")
            assert os.read(to_child_r, 1) == b"s"
            if a.intactfs:
                streamsync(d)
            os.write(to_parent_w, b"d")
            os._exit(0)
        except BaseException as e:  # noqa: BLE001 - report and leave the child
            sys.stderr.write(f"table53 B process: {e!r}\n")
            os._exit(1)
    os.close(to_child_r)
    os.close(to_parent_w)
    if a.intactfs:
        setstream(d, "t53-a")
    fa = os.open(pa, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    os.fsync(fa)
    if os.read(to_parent_r, 1) != b"r":
        raise SystemExit("table53: the B process failed")
    dfd = os.open(d, os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)
    final_sync(a)
    time.sleep(0.2)
    start_b, start_f = disk(a.blockdev)
    chunk = bytes([0x61]) * MIB
    t = time.perf_counter()
    for i in range(a.a_mib):
        os.pwrite(fa, chunk, i * MIB)
    write_secs = time.perf_counter() - t
    os.write(to_child_w, b"g")
    line = b""
    while not line.endswith(b"\n"):
        c = os.read(to_parent_r, 4096)
        if not c:
            raise SystemExit("table53: the B process failed")
        line += c
    res = json.loads(line)
    if a.variant == "truncate":
        os.ftruncate(fa, 0)
    elif a.variant == "overwrite":
        chunk = bytes([0x62]) * MIB
        for i in range(a.a_mib):
            os.pwrite(fa, chunk, i * MIB)
    t = time.perf_counter()
    os.fsync(fa)
    os.write(to_child_w, b"s")
    if os.read(to_parent_r, 1) != b"d":
        raise SystemExit("table53: the B process failed")
    final_sync(a)
    sync_secs = time.perf_counter() - t
    end_b, end_f = disk(a.blockdev)
    size = os.fstat(fa).st_size
    os.close(fa)
    os.waitpid(pid, 0)
    want = 0 if a.variant == "truncate" else a.a_mib * MIB
    if size != want or os.path.getsize(pb) != 1:
        raise SystemExit(f"table53: wrong sizes after the run: A {size} (want {want}), B {os.path.getsize(pb)}")
    res.update({"bench": "table53", "system": a.system, "variant": a.variant, "streams": a.streams if a.intactfs else None, "a_bytes": a.a_mib * MIB, "a_write_secs": write_secs, "total_bytes_synced": end_b - start_b, "total_flushes": end_f - start_f, "final_sync_secs": sync_secs})
    print(json.dumps(res))


# ---------------------------------------------------------------- SQLite
def sqlite(a):
    """Thesis Table 5.5's SQLite workload: rows inserts of row_bytes-byte rows into one
    table, each insert its own transaction, rollback journal (SQLite's default journal_mode
    DELETE, synchronous FULL). Modes (intactfs only, besides default):
      streamsync-commit: the process's stream ignores fsync; STREAMSYNC after every COMMIT
                         returns (each transaction durable when the application sees it
                         committed, as with fsync);
      streamsync-end:    the stream ignores fsync; one STREAMSYNC after the last insert
                         (the thesis's c2fs+ row: no flush during the workload)."""
    d = a.dir
    db = os.path.join(d, "bench.db")
    if a.intactfs:
        setstream(d, "sqlite", IGNORE_FSYNC if a.mode != "default" else 0)
    elif a.mode != "default":
        raise SystemExit("sqlite: --mode other than default needs --intactfs")
    rng = random.Random(1)
    rows = [rng.randbytes(a.row_bytes) for _ in range(a.rows)]
    con = sqlite3.connect(db, isolation_level=None)
    sync_mode = con.execute("PRAGMA synchronous").fetchone()[0]
    journal = con.execute("PRAGMA journal_mode").fetchone()[0]
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
    final_sync(a)
    dfd = os.open(d, os.O_RDONLY)
    b0, f0 = disk(a.blockdev)
    t = time.perf_counter()
    for i, v in enumerate(rows):
        con.execute("BEGIN")
        con.execute("INSERT INTO t (id, v) VALUES (?, ?)", (i, v))
        con.execute("COMMIT")
        if a.mode == "streamsync-commit":
            fcntl.ioctl(dfd, STREAMSYNC, 0)
    if a.mode == "streamsync-end":
        fcntl.ioctl(dfd, STREAMSYNC, 0)
    secs = time.perf_counter() - t
    b1, f1 = disk(a.blockdev)
    os.close(dfd)
    n, total = con.execute("SELECT count(*), sum(length(v)) FROM t").fetchone()
    ok = con.execute("PRAGMA integrity_check").fetchone()[0]
    con.close()
    if n != a.rows or total != a.rows * a.row_bytes or ok != "ok":
        raise SystemExit(f"sqlite: wrong data after the run: {n} rows, {total} bytes, integrity {ok}")
    print(json.dumps({"bench": "sqlite", "system": a.system, "mode": a.mode, "rows": a.rows, "row_bytes": a.row_bytes, "secs": secs, "inserts_per_s": a.rows / secs, "bytes": b1 - b0, "flushes": f1 - f0, "synchronous": sync_mode, "journal_mode": journal, "sqlite_version": sqlite3.sqlite_version}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("table53", "sqlite"):
        p = sub.add_parser(name)
        p.add_argument("--dir", required=True)
        p.add_argument("--blockdev", required=True)
        p.add_argument("--sync-path", required=True)
        p.add_argument("--system", required=True)
        p.add_argument("--intactfs", action="store_true")
        if name == "table53":
            p.add_argument("--variant", choices=["append", "truncate", "overwrite"], required=True)
            p.add_argument("--a-mib", type=int, default=100)
            p.add_argument("--streams", type=int, choices=[1, 2], default=1)
        else:
            p.add_argument("--rows", type=int, default=2000)
            p.add_argument("--row-bytes", type=int, default=120)
            p.add_argument("--mode", choices=["default", "streamsync-commit", "streamsync-end"], default="default")
    p = sub.add_parser("sync", help="make everything durable: syncfs(PATH), or STREAMSYNC on PATH with --intactfs")
    p.add_argument("path")
    p.add_argument("--intactfs", action="store_true")
    a = ap.parse_args()
    if a.cmd == "sync":
        (streamsync if a.intactfs else syncfs)(a.path)
        return
    {"table53": table53, "sqlite": sqlite}[a.cmd](a)


if __name__ == "__main__":
    main()
