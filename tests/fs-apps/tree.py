#!/usr/bin/env python3
"""Deterministic file trees for the fs-apps tests, and a normalized listing of a tree.

  tree.py gen DIR            make the tar/rsync source tree in DIR (must not exist)
  tree.py change DIR         the second rsync round's changes to that tree
  tree.py list DIR           one line per entry, sorted, independent of the file system
                             (no inode numbers, no block counts, no atime/ctime)
  tree.py sparse FILE        "sparse" if FILE occupies fewer bytes than its size, else "dense"

Run as root (gen chowns a few entries to other users).
"""
import hashlib
import os
import random
import stat
import sys

T0 = 1_700_000_000  # fixed mtimes (whole seconds: GNU tar's format keeps seconds only)
SPARSE_SIZE = 64 << 20


def data(rng, n):
    return rng.randbytes(n)


def put(path, content, mode=0o644, mtime=T0):
    with open(path, "wb") as f:
        f.write(content)
    os.chmod(path, mode)
    os.utime(path, (mtime, mtime))


def gen(root):
    rng = random.Random(6)
    os.mkdir(root)
    # Plain files of awkward sizes, spread over nested directories.
    sizes = [0, 1, 511, 512, 4095, 4096, 4097, 65536, 65537, 300_000, 1 << 20]
    for d in range(8):
        dd = os.path.join(root, f"dir{d}", f"sub{d % 3}")
        os.makedirs(dd)
        for i in range(12):
            n = sizes[(d * 12 + i) % len(sizes)]
            mode = [0o644, 0o600, 0o755, 0o444, 0o640][i % 5]
            put(os.path.join(dd, f"file{i:02d}.bin"), data(rng, n), mode, T0 + d * 100 + i)
    # Text files that compress well (and that the rsync round edits).
    os.makedirs(os.path.join(root, "text"))
    for i in range(40):
        lines = "".join(f"line {j} of text file {i}: {'abcdefgh' * (j % 9)}\n" for j in range(200 + i * 10))
        put(os.path.join(root, "text", f"t{i:02d}.txt"), lines.encode(), 0o644, T0 + 5000 + i)
    # Names that need care.
    odd = os.path.join(root, "odd names")
    os.mkdir(odd)
    for name in ["with space", "ünïcødé", "tab\there", "-starts-with-dash", "x" * 200, ".hidden", "new\nline"]:
        put(os.path.join(odd, name), name.encode() * 3, 0o644, T0 + 7000)
    deep = root
    for i in range(20):
        deep = os.path.join(deep, f"d{i}")
    os.makedirs(deep)
    put(os.path.join(deep, "bottom"), b"deep\n", 0o644, T0 + 7100)
    # Hard links: a group of three across directories, and a pair.
    put(os.path.join(root, "dir0", "linked-a"), data(rng, 10_000), 0o640, T0 + 8000)
    os.link(os.path.join(root, "dir0", "linked-a"), os.path.join(root, "dir1", "linked-b"))
    os.link(os.path.join(root, "dir0", "linked-a"), os.path.join(root, "dir2", "linked-c"))
    put(os.path.join(root, "pair-1"), b"pair\n", 0o600, T0 + 8001)
    os.link(os.path.join(root, "pair-1"), os.path.join(root, "pair-2"))
    # Symbolic links: relative, to a directory, absolute and dangling, a chain.
    links = os.path.join(root, "links")
    os.mkdir(links)
    os.symlink("../dir0/sub0/file00.bin", os.path.join(links, "rel"))
    os.symlink("../dir3", os.path.join(links, "to-dir"))
    os.symlink("/nonexistent/target/of/a/dangling/link", os.path.join(links, "dangling"))
    os.symlink("rel", os.path.join(links, "chain"))
    os.symlink("y" * 1000, os.path.join(links, "long-target"))
    # A sparse file: data at the start, in the middle and at the end of 64 MiB.
    sp = os.path.join(root, "sparse.img")
    with open(sp, "wb") as f:
        f.write(data(rng, 8192))
        f.seek(20 << 20)
        f.write(data(rng, 100_000))
        f.seek(SPARSE_SIZE - 4096)
        f.write(data(rng, 4096))
    os.utime(sp, (T0 + 9000, T0 + 9000))
    # A file that ends in a hole.
    tail = os.path.join(root, "hole-at-end")
    with open(tail, "wb") as f:
        f.write(b"head")
        f.truncate(3 << 20)
    os.utime(tail, (T0 + 9001, T0 + 9001))
    # Special files (named *.fifo so diff -r can leave them out).
    os.mkfifo(os.path.join(root, "pipe.fifo"), 0o620)
    os.utime(os.path.join(root, "pipe.fifo"), (T0 + 9100, T0 + 9100))
    # Permissions and ownership: setgid, sticky, setuid, other owners, an unreadable dir.
    perm = os.path.join(root, "perm")
    os.mkdir(perm)
    os.mkdir(os.path.join(perm, "setgid-dir"))
    os.chown(os.path.join(perm, "setgid-dir"), 0, 100)
    os.chmod(os.path.join(perm, "setgid-dir"), 0o2775)
    os.mkdir(os.path.join(perm, "sticky-dir"))
    os.chmod(os.path.join(perm, "sticky-dir"), 0o1777)
    put(os.path.join(perm, "setuid-prog"), b"#!/bin/sh\n", 0o4755, T0 + 9200)
    put(os.path.join(perm, "owned-by-nobody"), b"nobody\n", 0o640, T0 + 9201)
    os.chown(os.path.join(perm, "owned-by-nobody"), 65534, 65534)
    put(os.path.join(perm, "owned-by-1234"), b"1234\n", 0o600, T0 + 9202)
    os.chown(os.path.join(perm, "owned-by-1234"), 1234, 4321)
    os.mkdir(os.path.join(perm, "closed"))
    put(os.path.join(perm, "closed", "inside"), b"x\n", 0o644, T0 + 9203)
    os.chmod(os.path.join(perm, "closed"), 0o700)
    os.mkdir(os.path.join(root, "empty-dir"))
    os.symlink("perm/setuid-prog", os.path.join(root, "top-link"))
    os.lchown(os.path.join(root, "top-link"), 1234, 4321)
    os.utime(os.path.join(root, "top-link"), (T0 + 9300, T0 + 9300), follow_symlinks=False)
    fix_dir_times(root)


def fix_dir_times(root):
    # Directory mtimes last, deepest first (creating entries changes them).
    for d, _dirs, _files in sorted(os.walk(root), key=lambda w: -w[0].count(os.sep)):
        os.utime(d, (T0 + 10_000, T0 + 10_000))


def change(root):
    """Round two for rsync: edits, appends, same-size rewrites, deletions, new files,
    renames, a mode change, a new hard link and a new symlink."""
    rng = random.Random(7)
    t1 = T0 + 20_000
    # Small edits in the middle of text files (the delta algorithm's case).
    for i in range(0, 40, 4):
        p = os.path.join(root, "text", f"t{i:02d}.txt")
        b = bytearray(open(p, "rb").read())
        b[len(b) // 2:len(b) // 2 + 5] = b"EDIT!"
        put(p, bytes(b), 0o644, t1 + i)
    # Appends.
    for i in range(1, 40, 8):
        p = os.path.join(root, "text", f"t{i:02d}.txt")
        with open(p, "ab") as f:
            f.write(b"appended line\n" * 50)
        os.utime(p, (t1 + 100 + i, t1 + 100 + i))
    # Same size, new bytes in one block of a 1 MiB binary file, same mtime is NOT kept
    # (rsync's quick check would skip it).
    p = os.path.join(root, "dir0", "sub0", "file10.bin")
    b = bytearray(open(p, "rb").read())
    b[500_000:500_100] = data(rng, 100)
    put(p, bytes(b), 0o644, t1 + 200)
    # Deletions, renames, new files.
    os.unlink(os.path.join(root, "dir1", "sub1", "file03.bin"))
    os.rename(os.path.join(root, "dir2", "sub2", "file04.bin"), os.path.join(root, "dir2", "sub2", "renamed04.bin"))
    os.rename(os.path.join(root, "text", "t39.txt"), os.path.join(root, "dir5", "moved-t39.txt"))
    for i in range(5):
        put(os.path.join(root, "dir7", f"new{i}.bin"), data(rng, 3000 * (i + 1)), 0o644, t1 + 300 + i)
    import shutil
    shutil.rmtree(os.path.join(root, "dir6"))
    os.chmod(os.path.join(root, "dir4", "sub1", "file00.bin"), 0o700)
    os.link(os.path.join(root, "dir0", "linked-a"), os.path.join(root, "dir3", "linked-d"))
    os.unlink(os.path.join(root, "pair-2"))
    os.symlink("../text/t00.txt", os.path.join(root, "links", "new-link"))
    # Sparse file: rewrite a region in the middle.
    with open(os.path.join(root, "sparse.img"), "r+b") as f:
        f.seek(40 << 20)
        f.write(data(rng, 50_000))
    os.utime(os.path.join(root, "sparse.img"), (t1 + 400, t1 + 400))
    fix_dir_times(root)


def listing(root):
    first = {}  # (dev, ino) -> first path with that inode, in sorted order
    entries = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            entries.append(os.path.join(d, name))
    entries.sort(key=lambda p: os.fsencode(os.path.relpath(p, root)))
    out = []
    st = os.lstat(root)
    out.append(f". dir {stat.S_IMODE(st.st_mode):o} {st.st_uid}:{st.st_gid} mtime={st.st_mtime_ns}")
    for p in entries:
        st = os.lstat(p)
        rel = os.fsencode(os.path.relpath(p, root)).decode("utf-8", "backslashreplace").encode("unicode_escape").decode()
        mode = f"{stat.S_IMODE(st.st_mode):o}"
        own = f"{st.st_uid}:{st.st_gid}"
        if stat.S_ISDIR(st.st_mode):
            out.append(f"{rel} dir {mode} {own} mtime={st.st_mtime_ns}")
        elif stat.S_ISLNK(st.st_mode):
            out.append(f"{rel} symlink {own} -> {os.readlink(p)} mtime={st.st_mtime_ns}")
        elif stat.S_ISREG(st.st_mode):
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            key = (st.st_dev, st.st_ino)
            group = first.setdefault(key, rel)
            out.append(f"{rel} file {mode} {own} nlink={st.st_nlink} size={st.st_size} mtime={st.st_mtime_ns} sha256={h.hexdigest()[:20]} linkgroup={group}")
        else:
            kind = "fifo" if stat.S_ISFIFO(st.st_mode) else f"special({stat.S_IFMT(st.st_mode):o})"
            out.append(f"{rel} {kind} {mode} {own} mtime={st.st_mtime_ns}")
    return out


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    if cmd == "gen":
        gen(path)
    elif cmd == "change":
        change(path)
    elif cmd == "list":
        sys.stdout.write("".join(l + "\n" for l in listing(path)))
    elif cmd == "sparse":
        st = os.stat(path)
        print("sparse" if st.st_blocks * 512 < st.st_size else "dense")
    else:
        sys.exit(f"tree.py: unknown command {cmd}")


if __name__ == "__main__":
    main()
