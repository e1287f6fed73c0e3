#!/usr/bin/env bash
# Self-test for the intact LD_PRELOAD shim (shim/intact_preload.c).
# Usage: bash shim/test_shim.sh        (exits non-zero on failure)
set -u -o pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
T="$(mktemp -d "${TMPDIR:-/tmp}/intact-shim-test.XXXXXX")"
trap 'rm -rf "$T"' EXIT

FAILS=0
PASSES=0
pass() { PASSES=$((PASSES + 1)); echo "PASS: $*"; }
fail() { FAILS=$((FAILS + 1)); echo "FAIL: $*"; }

command -v strace >/dev/null || { echo "strace not found"; exit 2; }
command -v gcc >/dev/null || { echo "gcc not found"; exit 2; }

# The checker runs on whatever python3 is available, never under the shim.
CHECK_PY="$(command -v python3 || echo /usr/bin/python3)"

SO="$T/libintact_preload.so"
if ! gcc -shared -fPIC -O2 -Wall -Werror -o "$SO" "$HERE/intact_preload.c" -ldl -lpthread; then
    echo "FAIL: build"; exit 1
fi
pass "build (gcc -Wall -Werror)"

TRACE_SET="write,pwrite64,msync,munmap,fsync,fdatasync,copy_file_range,sendfile"

# run_traced OUT WORKDIR PROG ARGS...   (60 s timeout)
run_traced() {
    local out="$1" wd="$2"; shift 2
    (cd "$wd" && timeout 60 strace -f -qq -y -s 1000000 -e trace="$TRACE_SET" -o "$out" \
        env LD_PRELOAD="$SO" "$@")
}

# --------------------------------------------------------------------------
# Checker: parses strace output (C-style escaped strings) and the markers.
# --------------------------------------------------------------------------
cat >"$T/check.py" <<'PYEOF'
import re, sys

def decode(s, i):
    """Decode a strace string literal starting at s[i] == '"'. Return (bytes, end)."""
    assert s[i] == '"'
    i += 1
    out = bytearray()
    simple = {'n': 10, 't': 9, 'r': 13, 'v': 11, 'f': 12, '\\': 92, '"': 34, 'a': 7, 'b': 8}
    while i < len(s):
        c = s[i]
        if c == '"':
            return bytes(out), i + 1
        if c == '\\':
            d = s[i + 1]
            if d in simple:
                out.append(simple[d]); i += 2
            elif d == 'x':
                out.append(int(s[i + 2:i + 4], 16)); i += 4
            elif d in '01234567':
                j = i + 1
                while j < len(s) and j < i + 4 and s[j] in '01234567':
                    j += 1
                out.append(int(s[i + 1:j], 8) & 255); i = j
            else:
                out.append(ord(d)); i += 2
        else:
            out += c.encode('latin-1'); i += 1
    raise ValueError("unterminated string")

LINE = re.compile(r'^(\d+)\s+(\w+)\((.*)$')

def parse(path):
    """Events: dicts with pid, name, args (raw text), fd, data (first string arg)."""
    evs = []
    with open(path, encoding='latin-1') as f:
        for raw in f:
            m = LINE.match(raw.rstrip('\n'))
            if not m:
                continue
            pid, name, rest = int(m.group(1)), m.group(2), m.group(3)
            ev = {'pid': pid, 'name': name, 'args': rest, 'fd': None, 'data': None, 'idx': len(evs)}
            fm = re.match(r'(-?\d+)(<[^>]*>)?', rest)
            if fm:
                ev['fd'] = int(fm.group(1))
            q = rest.find('"')
            if q >= 0:
                try:
                    ev['data'], _ = decode(rest, q)
                except Exception:
                    pass
            evs.append(ev)
    return evs

def markers(evs):
    for ev in evs:
        if ev['name'] == 'write' and ev['fd'] == -1 and ev['data'] and ev['data'].startswith(b'INTACT1 '):
            yield ev

def parse_marker(data):
    nl = data.index(b'\n')
    head = data[8:nl].decode().split(' ')
    body = data[nl + 1:]
    if head[0] == 'PY':
        n = int(head[1])
        lines = body.decode().split('\n')
        assert lines[-1] == '' and len(lines) == n + 1, ("bad PY framing", data)
        return ('PY', lines[:-1])
    if head[0] == 'MW':
        addr, ln = int(head[1], 16), int(head[2])
        assert len(body) == ln, ("MW length mismatch", ln, len(body))
        return ('MW', addr, body)
    if head[0] == 'CP':
        ln = int(head[1])
        if ln == -1:
            assert body == b''
            return ('CP', None)
        assert len(body) == ln, ("CP length mismatch", ln, len(body))
        return ('CP', body)
    raise ValueError(data)

def annotate(evs):
    """Attach to every event the innermost frame of the last PY marker of its pid."""
    last = {}
    for ev in evs:
        ev['py'] = last.get(ev['pid'])
        if ev['name'] == 'write' and ev['fd'] == -1 and ev['data'] and ev['data'].startswith(b'INTACT1 PY'):
            ev['marker'] = parse_marker(ev['data'])
            frames = ev['marker'][1]
            last[ev['pid']] = frames
    return evs

def tags(script):
    t = {}
    for n, line in enumerate(open(script), 1):
        m = re.search(r'# @(\w+)', line)
        if m:
            t[m.group(1)] = n
    return t

failures = []
def expect(cond, msg):
    if not cond:
        failures.append(msg)

def check_dedup(evs):
    prev = {}
    for ev in markers(evs):
        k = parse_marker(ev['data'])
        if k[0] != 'PY':
            continue
        expect(prev.get(ev['pid']) != k[1], "pid %d emitted the same PY stack twice in a row" % ev['pid'])
        prev[ev['pid']] = k[1]

def frame_is(frames, script, line):
    if not frames:
        return False
    f, l, fn = frames[0].rsplit(':', 2)
    return f == script and int(l) == line

def first(evs, pred):
    for ev in evs:
        if pred(ev):
            return ev
    return None

def mode_mw(trace, addrfile, syncname):
    evs = parse(trace)
    base = int(open(addrfile).read().split()[0], 16)
    mws = [(ev, parse_marker(ev['data'])) for ev in markers(evs) if ev['data'].startswith(b'INTACT1 MW')]
    want = {base + 100: b'HELLO_MAPPED', base + 200: b'X' + b'a' * 29 + b'Y', base + 5000: b'Z'}
    for addr, data in want.items():
        hits = [ev for ev, m in mws if m[1] == addr and m[2] == data]
        expect(len(hits) == 1, "expected exactly one MW at %x with %r, got %r" %
               (addr, data, [(hex(m[1]), m[2][:40]) for _, m in mws]))
        if hits and syncname != 'exit':
            sync = first(evs, lambda e: e['name'] == syncname and (
                e['args'].startswith(hex(base)) if syncname != 'fsync' else True))
            expect(sync is not None, "no %s line" % syncname)
            if sync:
                expect(hits[0]['idx'] < sync['idx'], "MW marker not before %s" % syncname)
    expect(len(mws) == len(want), "unexpected extra MW markers: %r" % [(hex(m[1]), m[2][:20]) for _, m in mws])
    expect(not any(ev['data'].startswith(b'INTACT1 PY') for ev in markers(evs)), "PY marker from a C program")

def mode_beyond(trace, addrfile):
    evs = parse(trace)
    base = int(open(addrfile).read().split()[0], 16)
    mws = [parse_marker(ev['data']) for ev in markers(evs) if ev['data'].startswith(b'INTACT1 MW')]
    expect([(m[1], m[2]) for m in mws] == [(base + 5990, b'Q')],
           "beyond-EOF mapping: got %r" % [(hex(m[1]), m[2]) for m in mws])

def mode_mx(trace, addrfile):
    evs = parse(trace)
    A = dict(l.split('=') for l in open(addrfile).read().split())
    a, b, b2, c, d = (int(A[k], 16) for k in ('a', 'b', 'b2', 'c', 'd'))
    P = 4096
    mws = [(ev['idx'], parse_marker(ev['data'])) for ev in markers(evs) if ev['data'].startswith(b'INTACT1 MW')]
    got = [(m[1], m[2]) for _, m in mws]
    want = [(a + P + 10, b'B'), (b + 5, b'E'), (b2 + P + 7, b'F')]
    at_fsync = {(a + 10, b'A.........C'), (a + 2 * P + 20, b'D'), (c + 9, b'G')}
    expect(got[:3] == want, "partial munmap / mremap / msync markers: %r" % got[:3])
    expect(set(got[3:6]) == at_fsync, "fsync markers (all mappings of the file): %r" % got[3:6])
    expect(got[6:] == [(d + 1, b'H')], "MAP_FIXED replacement marker (and nothing after): %r" % got[6:])
    ms = first(evs, lambda e: e['name'] == 'msync')
    fs = first(evs, lambda e: e['name'] == 'fsync')
    if len(mws) == 7 and ms and fs:
        expect(mws[2][0] < ms['idx'] < mws[3][0], "F marker not right before msync")
        expect(mws[5][0] < fs['idx'] < mws[6][0], "fsync markers not before fsync")

def mode_cp(trace):
    evs = parse(trace)
    cps = [(ev, parse_marker(ev['data'])) for ev in markers(evs) if ev['data'].startswith(b'INTACT1 CP')]
    got = [m[1] for _, m in cps]
    expect(got == [b'56789abcde', b'klmnopqrstuvwxyz', b'uvwx', b''],
           "CP markers: %r" % got)
    # every CP marker is followed (same pid) by the copy call it describes
    for ev, m in cps:
        nxt = first(evs[ev['idx'] + 1:], lambda e: e['pid'] == ev['pid'] and not (
            e['name'] == 'write' and e['fd'] == -1))
        expect(nxt is not None and nxt['name'] in ('copy_file_range', 'sendfile'),
               "CP marker not immediately before a copy call: %r" % (nxt and nxt['name']))
    expect(not any(ev['data'].startswith(b'INTACT1 PY') for ev in markers(evs)), "PY marker from a C program")

def mode_py(trace, script):
    evs = annotate(parse(trace))
    t = tags(script)
    check_dedup(evs)
    def at(pred, tag, what):
        ev = first(evs, pred)
        expect(ev is not None, "no %s event" % what)
        if ev is not None:
            expect(frame_is(ev['py'], script, t[tag]),
                   "%s attributed to %r, want %s:%d" % (what, ev['py'] and ev['py'][:2], script, t[tag]))
        return ev
    data_has = lambda name, s: (lambda e: e['name'] == name and e['fd'] != -1 and e['data'] and s in e['data'])
    at(data_has('write', b'OSWRITE_DATA'), 'OSWRITE', 'os.write')
    at(lambda e: e['name'] == 'fsync' and 'a.txt' in e['args'], 'FSYNC', 'os.fsync')
    at(data_has('write', b'BUFFERED_DATA'), 'FLUSH', 'buffered write+flush')
    row = at(data_has('pwrite64', b'SQLROW1'), 'COMMIT', 'sqlite pwrite64')
    if row:
        sync = first(evs[row['idx']:], lambda e: e['name'] in ('fsync', 'fdatasync') and e['pid'] == row['pid'])
        expect(sync is not None and frame_is(sync['py'], script, t['COMMIT']), "sqlite commit sync attribution")
    mw = first(evs, lambda e: e['name'] == 'write' and e['fd'] == -1 and e['data'].startswith(b'INTACT1 MW'))
    expect(mw is not None, "no MW marker for the Python mmap write")
    if mw:
        m = parse_marker(mw['data'])
        expect(m[2] == b'PYMMAP', "MW data %r" % m[2])
        expect(frame_is(mw['py'], script, t['MFLUSH']), "MW marker attributed to %r" % (mw['py'],))
        ms = first(evs[mw['idx']:], lambda e: e['name'] == 'msync')
        expect(ms is not None and frame_is(ms['py'], script, t['MFLUSH']), "msync after MW marker")
    cp = first(evs, lambda e: e['name'] == 'write' and e['fd'] == -1 and e['data'].startswith(b'INTACT1 CP'))
    expect(cp is not None and parse_marker(cp['data'])[1] == b'OSWRITE_DATA', "CP marker for os.copy_file_range")
    if cp:
        expect(frame_is(cp['py'], script, t['CFR']), "CP attributed to %r" % (cp['py'],))
    fk = at(data_has('write', b'FORK1'), 'FORKW', 'forked child write')
    p0 = first(evs, data_has('write', b'FORK0'))
    if fk and p0:
        expect(fk['pid'] != p0['pid'], "fork: child and parent writes from the same pid?")
        expect(fk['py'] is not None and len(fk['py']) >= 2 and
               fk['py'][1].rsplit(':', 2)[1] == str(t['FORKCALL']), "fork: caller frame %r" % (fk['py'],))
    # frames are innermost-first: the write inside w() has <module> as its caller
    ev = first(evs, data_has('write', b'FORK0'))
    if ev and ev['py']:
        expect(ev['py'][0].endswith(':w') and ev['py'][1].endswith(':<module>'), "frame order %r" % ev['py'])

def mode_threads(trace, script):
    evs = annotate(parse(trace))
    t = tags(script)
    check_dedup(evs)
    pids = {}
    n = 0
    for ev in evs:
        if ev['name'] == 'write' and ev['fd'] != -1 and ev['data'] and ev['data'][:3] in (b'T1-', b'T2-'):
            tag = 'T1W' if ev['data'].startswith(b'T1-') else 'T2W'
            pids.setdefault(tag, set()).add(ev['pid'])
            expect(frame_is(ev['py'], script, t[tag]), "thread write %r attributed to %r" % (ev['data'], ev['py'] and ev['py'][0]))
            n += 1
    expect(n == 400, "expected 400 thread writes, saw %d" % n)
    expect(len(pids.get('T1W', ())) == 1 and len(pids.get('T2W', ())) == 1 and pids['T1W'] != pids['T2W'],
           "thread pids %r" % pids)

def mode_cthread(trace, _script=None):
    evs = annotate(parse(trace))
    n = 0
    for ev in evs:
        if ev['name'] == 'write' and ev['fd'] != -1 and ev['data'] == b'CTHREAD':
            n += 1
            expect(ev['py'] is None, "C thread (no Python thread state) got a PY marker: %r" % ev['py'])
    expect(n == 50, "expected 50 C-thread writes, saw %d" % n)

def mode_nopy(trace):
    evs = parse(trace)
    bad = [ev for ev in markers(evs) if ev['data'].startswith(b'INTACT1 PY')]
    expect(not bad, "C program emitted %d PY markers" % len(bad))

mode = sys.argv[1]
{'mw': mode_mw, 'beyond': mode_beyond, 'cp': mode_cp, 'py': mode_py,
 'threads': mode_threads, 'mx': mode_mx, 'nopy': mode_nopy, 'cthread': mode_cthread}[mode](*sys.argv[2:])
for f in failures:
    print("   - " + f)
sys.exit(1 if failures else 0)
PYEOF

# --------------------------------------------------------------------------
# C test programs
# --------------------------------------------------------------------------
cat >"$T/mw_test.c" <<'CEOF'
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#define CHECK_ERRNO(what) do { if (errno != 4242) { fprintf(stderr, "errno changed by %s: %d\n", what, errno); exit(3); } } while (0)
int main(int argc, char **argv) {
    const char *mode = argv[2];
    int beyond = strcmp(mode, "beyond") == 0;
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 1;
    static char buf[8192];
    memset(buf, 'a', sizeof buf);
    errno = 4242;
    if (write(fd, buf, beyond ? 6000 : 8192) < 0) return 1;
    CHECK_ERRNO("write");
    size_t maplen = beyond ? 16384 : 8192;
    char *p = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return 1;
    CHECK_ERRNO("mmap");
    FILE *af = fopen(argv[3], "w");
    fprintf(af, "%lx\n", (unsigned long)p);
    fclose(af);
    errno = 4242;
    if (beyond) {
        p[5990] = 'Q';
        if (msync(p, maplen, MS_SYNC) != 0) return 1;
        CHECK_ERRNO("msync");
        if (munmap(p, maplen) != 0) return 1;
        CHECK_ERRNO("munmap");
        return 0;
    }
    memcpy(p + 100, "HELLO_MAPPED", 12);
    p[200] = 'X';
    p[230] = 'Y';
    p[5000] = 'Z';
    if (!strcmp(mode, "msync")) {
        if (msync(p, 8192, MS_SYNC) != 0) return 1;
        CHECK_ERRNO("msync");
        if (munmap(p, 8192) != 0) return 1;
    } else if (!strcmp(mode, "munmap")) {
        if (munmap(p, 8192) != 0) return 1;
        CHECK_ERRNO("munmap");
    } else if (!strcmp(mode, "fsync")) {
        if (fsync(fd) != 0) return 1;
        CHECK_ERRNO("fsync");
    } /* "exit": neither */
    /* failing calls keep their own errno */
    if (write(999, "x", 1) != -1 || errno != EBADF) return 4;
    if (open("/nonexistent/x", O_RDONLY) != -1 || errno != ENOENT) return 4;
    /* file offset untouched by the shim */
    if (lseek(fd, 0, SEEK_CUR) != 8192) return 5;
    close(fd);
    return 0;
}
CEOF

cat >"$T/mx_test.c" <<'CEOF'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    static char z[4096 * 8];
    long P = 4096;
    memset(z, '.', sizeof z);
    if (write(fd, z, sizeof z) != sizeof z) return 1;
    FILE *af = fopen(argv[2], "w");
    /* partial munmap: only the unmapped middle page is diffed */
    char *a = mmap(NULL, 3 * P, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    a[10] = 'A';
    a[P + 10] = 'B';
    if (munmap(a + P, P)) return 1;
    a[20] = 'C';
    a[2 * P + 20] = 'D';
    /* mremap: old range diffed before, new range tracked after */
    char *b = mmap(NULL, P, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 3 * P);
    b[5] = 'E';
    char *b2 = mremap(b, P, 3 * P, MREMAP_MAYMOVE);
    if (b2 == MAP_FAILED) return 1;
    b2[P + 7] = 'F';
    if (msync(b2, 3 * P, MS_SYNC)) return 1;
    /* read-only shared mapping made writable with mprotect */
    char *c = mmap(NULL, P, PROT_READ, MAP_SHARED, fd, 6 * P);
    if (mprotect(c, P, PROT_READ | PROT_WRITE)) return 1;
    c[9] = 'G';
    if (fsync(fd)) return 1;
    /* MAP_FIXED anonymous mapping replacing a tracked one */
    char *d = mmap(NULL, P, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 7 * P);
    d[1] = 'H';
    if (mmap(d, P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != d) return 1;
    d[2] = 'I';
    fprintf(af, "a=%lx b=%lx b2=%lx c=%lx d=%lx\n", (unsigned long)a, (unsigned long)b,
            (unsigned long)b2, (unsigned long)c, (unsigned long)d);
    fclose(af);
    return 0;
}
CEOF

cat >"$T/cp_test.c" <<'CEOF'
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/sendfile.h>
#include <unistd.h>
int main(int argc, char **argv) {
    const char *s = "0123456789abcdefghijklmnopqrstuvwxyz";
    int src = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    int dst = open(argv[2], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (src < 0 || dst < 0 || write(src, s, 36) != 36) return 1;
    loff_t off = 5;
    errno = 4242;
    if (copy_file_range(src, &off, dst, NULL, 10, 0) != 10 || off != 15) return 2;
    if (errno != 4242) return 3;
    lseek(src, 20, SEEK_SET);
    if (copy_file_range(src, NULL, dst, NULL, 100, 0) != 16) return 2;
    if (lseek(src, 0, SEEK_CUR) != 36) return 5;
    off_t o2 = 30;
    if (sendfile(dst, src, &o2, 4) != 4 || o2 != 34) return 2;
    int pfd[2];
    if (pipe(pfd)) return 1;
    off_t o3 = 0;
    if (sendfile(pfd[1], src, &o3, 3) != 3) return 2; /* to a pipe: no CP marker */
    loff_t o4 = 36;
    if (copy_file_range(src, &o4, dst, NULL, 10, 0) != 0) return 2; /* at EOF: CP 0 */
    char got[64] = {0};
    if (pread(dst, got, sizeof got, 0) != 30) return 6;
    if (memcmp(got, "56789abcdeklmnopqrstuvwxyzuvwx", 30)) return 6;
    return 0;
}
CEOF

cat >"$T/sig_test.c" <<'CEOF'
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <unistd.h>
static volatile int hits, infohits;
static void h(int s) { (void)s; hits++; write(-2, "", 0); }
static void hi(int s, siginfo_t *si, void *uc) { (void)uc; if (si && si->si_signo == s) infohits++; }
int main(void) {
    struct sigaction sa, old;
    if (signal(SIGUSR1, h) == SIG_ERR) return 1;
    if (signal(SIGUSR1, h) != h) return 2;             /* signal() returns the user's handler */
    memset(&old, 0, sizeof old);
    if (sigaction(SIGUSR1, NULL, &old) || old.sa_handler != h || (old.sa_flags & SA_SIGINFO)) return 3;
    raise(SIGUSR1);
    if (hits != 1) return 4;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = hi;
    sa.sa_flags = SA_SIGINFO;
    if (sigaction(SIGUSR2, &sa, NULL)) return 5;
    if (sigaction(SIGUSR2, NULL, &old) || old.sa_sigaction != hi || !(old.sa_flags & SA_SIGINFO)) return 6;
    raise(SIGUSR2);
    if (infohits != 1) return 7;
    sa.sa_handler = SIG_IGN;
    sa.sa_flags = 0;
    if (sigaction(SIGUSR2, &sa, &old) || old.sa_sigaction != hi) return 8;
    if (sigaction(SIGUSR2, NULL, &old) || old.sa_handler != SIG_IGN) return 9;
    raise(SIGUSR2);
    sa.sa_handler = h;
    sa.sa_flags = SA_RESETHAND;
    if (sigaction(SIGUSR2, &sa, NULL)) return 10;
    raise(SIGUSR2);
    if (hits != 2) return 11;
    if (sigaction(SIGUSR2, NULL, &old) || old.sa_handler != SIG_DFL) return 12;
    return 0;
}
CEOF

cat >"$T/cthr.c" <<'CEOF'
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
static void *thr(void *p) {
    int fd = open((const char *)p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (int i = 0; i < 50; i++) write(fd, "CTHREAD", 7);
    fsync(fd);
    close(fd);
    return 0;
}
/* Called through ctypes.PyDLL: the caller keeps holding the GIL while it
 * joins a native thread that does file I/O. */
int run_writer_thread(const char *path) {
    pthread_t t;
    if (pthread_create(&t, 0, thr, (void *)path)) return 1;
    pthread_join(t, 0);
    return 0;
}
CEOF
if ! gcc -shared -fPIC -O1 -Wall -o "$T/libcthr.so" "$T/cthr.c" -lpthread; then echo "FAIL: compiling cthr"; exit 1; fi

for p in mw_test mx_test cp_test sig_test; do
    if ! gcc -O1 -Wall -o "$T/$p" "$T/$p.c" -lpthread; then echo "FAIL: compiling $p"; exit 1; fi
done

# --------------------------------------------------------------------------
# C cases
# --------------------------------------------------------------------------
for mode in msync munmap fsync exit; do
    wd="$T/mw_$mode"; mkdir -p "$wd"
    if run_traced "$wd/trace" "$wd" "$T/mw_test" "$wd/data" "$mode" "$wd/addr"; then
        if "$CHECK_PY" "$T/check.py" mw "$wd/trace" "$wd/addr" "$mode"; then
            pass "MW markers via shared mapping ($mode)"
        else
            fail "MW markers via shared mapping ($mode)"
        fi
    else
        fail "mw_test $mode exited with $?"
    fi
done

wd="$T/mw_beyond"; mkdir -p "$wd"
if run_traced "$wd/trace" "$wd" "$T/mw_test" "$wd/data" beyond "$wd/addr" &&
    "$CHECK_PY" "$T/check.py" beyond "$wd/trace" "$wd/addr"; then
    pass "mapping larger than the file (no SIGBUS, exact MW)"
else
    fail "mapping larger than the file"
fi

wd="$T/mx"; mkdir -p "$wd"
if run_traced "$wd/trace" "$wd" "$T/mx_test" "$wd/data" "$wd/addr" &&
    "$CHECK_PY" "$T/check.py" mx "$wd/trace" "$wd/addr"; then
    pass "partial munmap, mremap, mprotect(PROT_WRITE), MAP_FIXED replacement"
else
    fail "mapping edge cases"
fi

wd="$T/cp"; mkdir -p "$wd"
if run_traced "$wd/trace" "$wd" "$T/cp_test" "$wd/src" "$wd/dst"; then
    if "$CHECK_PY" "$T/check.py" cp "$wd/trace"; then
        pass "CP markers for copy_file_range/sendfile"
    else
        fail "CP markers"
    fi
else
    fail "cp_test exited with $?"
fi

if "$CHECK_PY" "$T/check.py" nopy "$T/mw_msync/trace" && "$CHECK_PY" "$T/check.py" nopy "$T/cp/trace"; then
    pass "no PY markers from C programs"
else
    fail "PY markers from C programs"
fi

wd="$T/sig"; mkdir -p "$wd"
if (cd "$wd" && timeout 60 env LD_PRELOAD="$SO" "$T/sig_test"); then
    pass "signal()/sigaction() wrappers are transparent"
else
    fail "sig_test exited with $?"
fi

# --------------------------------------------------------------------------
# Python cases
# --------------------------------------------------------------------------
cat >"$T/py_main.py" <<'PYEOF'
import mmap, os, sqlite3, subprocess, sys
d = sys.argv[1]
fd = os.open(os.path.join(d, "a.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"OSWRITE_DATA")  # @OSWRITE
os.fsync(fd)  # @FSYNC
os.close(fd)
with open(os.path.join(d, "b.txt"), "w") as f:
    f.write("BUFFERED_DATA")
    f.flush()  # @FLUSH
con = sqlite3.connect(os.path.join(d, "t.db"))
con.execute("create table t(x)")
con.commit()
con.execute("insert into t values ('SQLROW1')")
con.execute("insert into t values ('SQLROW2')")
con.commit()  # @COMMIT
con.close()
with open(os.path.join(d, "m.bin"), "wb") as f:
    f.write(b"\0" * 8192)
with open(os.path.join(d, "m.bin"), "r+b") as f:
    m = mmap.mmap(f.fileno(), 8192)
    m[10:16] = b"PYMMAP"
    m.flush()  # @MFLUSH
    subprocess.run(["true"], check=True)  # spawn while a tracked mapping exists
    m.close()
src = os.open(os.path.join(d, "a.txt"), os.O_RDONLY)
dst = os.open(os.path.join(d, "c.txt"), os.O_WRONLY | os.O_CREAT, 0o644)
os.copy_file_range(src, dst, 100)  # @CFR
os.close(src)
os.close(dst)
def w(fd, data):
    os.write(fd, data)  # @FORKW
fd = os.open(os.path.join(d, "f.txt"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
pid = -1
for i in range(2):
    if i == 1:
        pid = os.fork()
    if pid <= 0:
        w(fd, b"FORK%d" % i)  # @FORKCALL
    if pid == 0:
        os._exit(0)
os.waitpid(pid, 0)
with open(os.path.join(d, "c.txt"), "rb") as f:
    assert f.read() == b"OSWRITE_DATA"
print("py_main ok")
PYEOF

cat >"$T/py_threads.py" <<'PYEOF'
import os, sys, threading
d = sys.argv[1]
stop = False
def writer(name, n):
    fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT, 0o644)
    for i in range(n):
        if name == "t1":
            os.write(fd, b"T1-%d" % i)  # @T1W
        else:
            os.write(fd, b"T2-%d" % i)  # @T2W
    os.close(fd)
def spin():
    x = 0
    while not stop:
        x += 1
ths = [threading.Thread(target=writer, args=("t1", 200)), threading.Thread(target=writer, args=("t2", 200))]
sp = threading.Thread(target=spin)
sp.start()
for t in ths:
    t.start()
for t in ths:
    t.join()
stop = True
sp.join()
print("py_threads ok")
PYEOF

cat >"$T/py_signals.py" <<'PYEOF'
import os, signal, sys, threading, time
d = sys.argv[1]
r, w = os.pipe()
os.set_blocking(r, False)
os.set_blocking(w, False)
signal.set_wakeup_fd(w)  # Python's C signal handler write()s to this fd
count = 0
def h(sig, frm):
    global count
    count += 1
signal.signal(signal.SIGUSR1, h)
assert signal.getsignal(signal.SIGUSR1) is h
def killer():
    for i in range(300):
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.0005)
th = threading.Thread(target=killer)
th.start()
fd = os.open(os.path.join(d, "s"), os.O_WRONLY | os.O_CREAT, 0o644)
while th.is_alive():
    os.write(fd, b"x")
    try:
        os.read(r, 4096)
    except BlockingIOError:
        pass
th.join()
assert count > 0
print("py_signals ok", count)
PYEOF

cat >"$T/py_cthread.py" <<'PYEOF'
import ctypes, os, sys
lib = ctypes.PyDLL(sys.argv[2])  # PyDLL: the GIL stays held during the call
assert lib.run_writer_thread(os.path.join(sys.argv[1], "c").encode()) == 0
print("py_cthread ok")
PYEOF

PYTHONS=()
if command -v python3 >/dev/null; then
    PYTHONS+=("$(python3 -c 'import sys; print(sys.executable)')")
fi
if [ -x /usr/bin/python3 ]; then
    PYTHONS+=("$(readlink -f /usr/bin/python3)")
fi

# py_case TAG SCRIPT MODE PASS-TEXT FAIL-TEXT [ARGS...]: traces `$PY SCRIPT WORKDIR ARGS...`,
# then, unless MODE is empty, runs `check.py MODE TRACE SCRIPT` on the trace.
py_case() {
    local tag=$1 script=$2 mode=$3 ok=$4 bad=$5 wd
    shift 5
    wd="$T/${tag}_$(echo "$PY" | tr / _)"; mkdir -p "$wd"
    if ! run_traced "$wd/trace" "$wd" "$PY" "$T/$script" "$wd" "$@" >/dev/null; then
        fail "$script under $PY exited with $? (124 = timeout/deadlock)"
    elif [ -z "$mode" ] || "$CHECK_PY" "$T/check.py" "$mode" "$wd/trace" "$T/$script"; then
        pass "$ok ($PY)"
    else
        fail "$bad ($PY)"
    fi
}

for PY in "${PYTHONS[@]}"; do
    py_case py_main py_main.py py "Python attribution" "Python attribution"
    py_case py_thr py_threads.py threads "Python threads, no deadlock, per-thread attribution" "Python threads attribution"
    py_case py_sig py_signals.py "" "Python signals + wakeup fd, no deadlock" "-"
    py_case py_cthr py_cthread.py cthread "native thread I/O while the GIL is held: no deadlock, no PY" \
        "native thread I/O under held GIL" "$T/libcthr.so"
done

# JV markers: the JNI/JVMTI table indices and capability bits the shim declares by hand
# must match the JDK's headers (needs a JDK: default-jdk-headless).
JDK_INC=$(dirname "$(readlink -f "$(command -v javac 2>/dev/null || echo /nonexistent)")")/../include
if [ -f "$JDK_INC/jvmti.h" ]; then
    { grep -E '^#define JV_(GETENV|DELETE_LOCAL_REF|DEALLOCATE|CLASS_SIGNATURE|SOURCE_FILE|METHOD_NAME|DECLARING_CLASS|LINE_TABLE|STACK_TRACE|ADD_CAPS|VERSION_JVMTI_1_2|VERSION_JNI_1_2|CAP_SOURCE_FILE_NAME|CAP_LINE_NUMBERS) ' "$HERE/intact_preload.c"
      cat <<'C'
#include <jvmti.h>
#include <stddef.h>
#include <string.h>
#define SLOT(type, field) (offsetof(type, field) / sizeof(void *))
_Static_assert(SLOT(struct JNIInvokeInterface_, GetEnv) == JV_GETENV, "GetEnv");
_Static_assert(SLOT(struct JNINativeInterface_, DeleteLocalRef) == JV_DELETE_LOCAL_REF, "DeleteLocalRef");
_Static_assert(SLOT(jvmtiInterface_1, Deallocate) == JV_DEALLOCATE, "Deallocate");
_Static_assert(SLOT(jvmtiInterface_1, GetClassSignature) == JV_CLASS_SIGNATURE, "GetClassSignature");
_Static_assert(SLOT(jvmtiInterface_1, GetSourceFileName) == JV_SOURCE_FILE, "GetSourceFileName");
_Static_assert(SLOT(jvmtiInterface_1, GetMethodName) == JV_METHOD_NAME, "GetMethodName");
_Static_assert(SLOT(jvmtiInterface_1, GetMethodDeclaringClass) == JV_DECLARING_CLASS, "GetMethodDeclaringClass");
_Static_assert(SLOT(jvmtiInterface_1, GetLineNumberTable) == JV_LINE_TABLE, "GetLineNumberTable");
_Static_assert(SLOT(jvmtiInterface_1, GetStackTrace) == JV_STACK_TRACE, "GetStackTrace");
_Static_assert(SLOT(jvmtiInterface_1, AddCapabilities) == JV_ADD_CAPS, "AddCapabilities");
_Static_assert(JV_VERSION_JVMTI_1_2 == JVMTI_VERSION_1_2, "JVMTI version");
_Static_assert(JV_VERSION_JNI_1_2 == JNI_VERSION_1_2, "JNI version");
_Static_assert(sizeof(jvmtiFrameInfo) == 16 && sizeof(jvmtiLineNumberEntry) == 16, "frame/line entry sizes");
int main(void) {
    jvmtiCapabilities a, b;
    memset(&a, 0, sizeof a); memset(&b, 0, sizeof b);
    a.can_get_source_file_name = 1; a.can_get_line_numbers = 1;
    unsigned int bits[4] = {JV_CAP_SOURCE_FILE_NAME | JV_CAP_LINE_NUMBERS, 0, 0, 0};
    memcpy(&b, bits, sizeof bits);
    return sizeof a == sizeof bits && memcmp(&a, &b, sizeof a) == 0 ? 0 : 1;
}
C
    } >"$T/jv_abi.c"
    if gcc -I"$JDK_INC" -I"$JDK_INC/linux" -o "$T/jv_abi" "$T/jv_abi.c" && "$T/jv_abi"; then
        pass "JV: JNI/JVMTI indices and capability bits match the JDK's headers"
    else
        fail "JV: the shim's JNI/JVMTI declarations differ from $JDK_INC/jvmti.h"
    fi
else
    fail "JV: no JDK headers (jvmti.h) found next to javac: install default-jdk-headless"
fi

echo
echo "shim: $PASSES passed, $FAILS failed"
[ "$FAILS" -eq 0 ]
