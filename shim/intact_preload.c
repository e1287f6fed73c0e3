/*
 * intact_preload.c -- LD_PRELOAD shim for the "intact" crash-consistency
 * explorer.
 *
 * Build:
 *   gcc -shared -fPIC -O2 -Wall -o libintact_preload.so intact_preload.c \
 *       -ldl -lpthread
 *
 * The shim never changes what the workload observes (results, errno, file
 * descriptors, offsets).  It talks to the tracer only through "marker"
 * system calls, write(-1, buf, len): the kernel fails them with EBADF and
 * strace records the buffer in line with the real calls.  Every marker
 * buffer starts with the 8 bytes "INTACT1 ".  See README.md for the exact
 * protocol:
 *
 *   INTACT1 PY <n>\n  + n lines "<file>:<line>:<function>\n" (innermost first)
 *   INTACT1 MW <addr-hex> <len>\n + len raw bytes (store through MAP_SHARED)
 *   INTACT1 CP <len>\n + len raw bytes, or INTACT1 CP -1\n (copy_file_range /
 *                                                          sendfile source data)
 *
 * Rules followed everywhere:
 *   - errno is saved and restored around all shim work;
 *   - the shim's own I/O uses raw syscall(), never interposed libc functions;
 *   - a thread-local guard makes nested entry (and entry from a signal
 *     handler, see the sigaction wrapper) go straight to the real function;
 *   - the mapping-table mutex is never held while taking the Python GIL or
 *     while calling a real (possibly blocking) function.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

/* Fortified entry points (not declared unless _FORTIFY_SOURCE is on). */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

#define TLS_IE __thread __attribute__((tls_model("initial-exec")))
#define UNUSED __attribute__((unused))

#ifndef NSIG
#define NSIG 65
#endif
#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

#define MARKER_MAGIC "INTACT1 "
#define PY_MAX_FRAMES 32
#define PY_HDR_RES 32                     /* room reserved for "INTACT1 PY n\n" */
/* Markers must fit in the tracer's strace -s (64 MiB): a CP marker whose
 * header + data would exceed 64 MiB becomes "CP -1"; MW runs are split into
 * pieces of at most 32 MiB. */
#define MARKER_MAX ((size_t)64 * 1024 * 1024)
#define CP_HDR_MAX 32
#define MW_MAX ((size_t)32 * 1024 * 1024)
#define MW_GAP 64                         /* merge runs closer than this */
#define DIFF_CHUNK ((size_t)4 * 1024 * 1024)
#define PAGE_IOVS 64

/* ------------------------------------------------------------------------ */
/* Thread-local state                                                        */
/* ------------------------------------------------------------------------ */

static TLS_IE int t_busy;  /* shim work in progress on this thread */
static TLS_IE int t_insig; /* inside a signal handler we dispatched */

struct sbuf {
    char *p;
    size_t len, cap;
};
struct pystate {
    struct sbuf cur;  /* scratch: PY_HDR_RES reserved bytes + body */
    struct sbuf last; /* body of the last PY marker this thread emitted */
    int last_valid;   /* 0 => force a re-emission next time */
};
static TLS_IE struct pystate *t_py;

/* ------------------------------------------------------------------------ */
/* Global state                                                              */
/* ------------------------------------------------------------------------ */

static size_t g_pagesz = 4096;
static int g_inited;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_pykey;
static int g_pykey_ok;

/* Python C-API entry points, looked up with dlsym(RTLD_DEFAULT). */
static struct {
    int (*IsInitialized)(void);
    int (*IsFinalizing)(void);
    int (*GILEnsure)(void);
    void (*GILRelease)(int);
    void *(*GILThisThreadState)(void);
    int (*GILCheck)(void);  /* optional (fork safety) */
    int (*GCDisable)(void); /* optional (3.10+) */
    int (*GCEnable)(void);  /* optional (3.10+) */
    void *(*GetFrame)(void);
    void *(*FrameGetBack)(void *);
    void *(*FrameGetCode)(void *);
    int (*FrameGetLineNumber)(void *);
    void *(*GetAttrString)(void *, const char *);
    const char *(*AsUTF8)(void *);
    void (*DecRef)(void *);
    void (*ErrFetch)(void **, void **, void **);
    void (*ErrRestore)(void *, void *, void *);
    void (*ErrClear)(void);
} py;
static int g_py_on;       /* all required Python symbols present */
static int g_py_fork_off; /* forked while another thread owned the GIL */
static pid_t g_pid;       /* our pid as of init / last fork() (atfork child) */
static int g_fork_py_safe = 1;
static TLS_IE int t_fork_locked;

/* ------------------------------------------------------------------------ */
/* Real functions                                                            */
/* ------------------------------------------------------------------------ */

#define FOR_EACH_REAL(X)                                                       \
    X(open) X(open64) X(openat) X(openat64) X(creat) X(creat64)                \
    X(__open_2) X(__open64_2) X(__openat_2) X(__openat64_2)                    \
    X(write) X(pwrite) X(pwrite64) X(writev) X(pwritev) X(pwritev64)           \
    X(pwritev2) X(pwritev64v2)                                                 \
    X(truncate) X(truncate64) X(ftruncate) X(ftruncate64)                      \
    X(fallocate) X(fallocate64) X(posix_fallocate) X(posix_fallocate64)        \
    X(rename) X(renameat) X(renameat2) X(link) X(linkat) X(unlink)             \
    X(unlinkat) X(remove) X(mkdir) X(mkdirat) X(rmdir) X(symlink)              \
    X(symlinkat)                                                               \
    X(fsync) X(fdatasync) X(sync_file_range) X(syncfs) X(sync) X(msync)        \
    X(munmap) X(mmap) X(mmap64) X(mremap) X(mprotect)                          \
    X(copy_file_range) X(sendfile) X(sendfile64) X(close) X(lseek) X(lseek64)  \
    X(exit) X(sigaction) X(ioctl)

#define REAL_DECL(name) static __typeof__(name) *real_##name;
FOR_EACH_REAL(REAL_DECL)

/* Lazy, racy-but-idempotent resolution. */
#define REAL(name)                                                             \
    ({                                                                         \
        __typeof__(name) *p__ = __atomic_load_n(&real_##name, __ATOMIC_RELAXED); \
        if (!p__) {                                                            \
            int e__ = errno;                                                   \
            p__ = (__typeof__(name) *)dlsym(RTLD_NEXT, #name);                 \
            __atomic_store_n(&real_##name, p__, __ATOMIC_RELAXED);             \
            errno = e__;                                                       \
        }                                                                      \
        p__;                                                                   \
    })

static void shim_init(void);

static inline int shim_enter(void)
{
    if (t_busy || t_insig)
        return 0;
    t_busy = 1;
    if (!__atomic_load_n(&g_inited, __ATOMIC_ACQUIRE))
        pthread_once(&g_once, shim_init);
    return 1;
}

/* Run CODE as shim work: guarded, errno preserved. */
#define SHIM(...)                                                              \
    do {                                                                       \
        int se__ = errno;                                                      \
        if (shim_enter()) {                                                    \
            __VA_ARGS__;                                                       \
            errno = se__;                                                      \
            t_busy = 0;                                                        \
        }                                                                      \
    } while (0)

#define ENOSYS_RET(v)                                                          \
    do {                                                                       \
        errno = ENOSYS;                                                        \
        return (v);                                                            \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Small helpers (no libc I/O)                                               */
/* ------------------------------------------------------------------------ */

static void marker_write(const void *buf, size_t len)
{
    syscall(SYS_write, -1, buf, len);
}

static size_t fmt_dec(char *out, long long v)
{
    char tmp[24];
    size_t n = 0, k = 0;
    unsigned long long u = v < 0 ? -(unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        out[k++] = '-';
    while (n)
        out[k++] = tmp[--n];
    return k;
}

static size_t fmt_hex(char *out, unsigned long long u)
{
    char tmp[20];
    size_t n = 0, k = 0;
    do {
        tmp[n++] = "0123456789abcdef"[u & 15];
        u >>= 4;
    } while (u);
    while (n)
        out[k++] = tmp[--n];
    return k;
}

static int raw_fstat(int fd, struct stat *st)
{
#ifdef SYS_fstat
    return (int)syscall(SYS_fstat, fd, st);
#else
    return (int)syscall(SYS_newfstatat, fd, "", st, AT_EMPTY_PATH);
#endif
}

static inline uintptr_t page_down(uintptr_t a) { return a & ~(uintptr_t)(g_pagesz - 1); }
static inline uintptr_t page_up(uintptr_t a) { return (a + g_pagesz - 1) & ~(uintptr_t)(g_pagesz - 1); }

/*
 * Copy [addr, addr+len) of our own address space into dst without ever
 * faulting: process_vm_readv on our own pid.  Returns the length of the
 * readable prefix, or -1 if the syscall is unusable (ENOSYS, EPERM, ...).
 * A single large iovec is tried first; on a short transfer the rest of the
 * chunk is probed with page-sized iovecs, so the result is exact whether
 * the kernel splits iovecs on partial transfers or not.
 */
static ssize_t read_mem(uintptr_t addr, size_t len, void *dst)
{
    pid_t pid = (pid_t)syscall(SYS_getpid);
    size_t done = 0;
    while (done < len) {
        size_t want = len - done;
        if (want > DIFF_CHUNK)
            want = DIFF_CHUNK;
        struct iovec l = {(char *)dst + done, want};
        struct iovec r = {(void *)(addr + done), want};
        ssize_t got = syscall(SYS_process_vm_readv, pid, &l, 1UL, &r, 1UL, 0UL);
        if (got < 0) {
            if (errno != EFAULT)
                return -1;
            got = 0;
        }
        if ((size_t)got == want) {
            done += want;
            continue;
        }
        /* Short: find the exact readable prefix of the remainder. */
        done += (size_t)got;
        size_t end = done + (want - (size_t)got);
        while (done < end) {
            struct iovec rv[PAGE_IOVS];
            int n = 0;
            size_t off = done;
            while (off < end && n < PAGE_IOVS) {
                uintptr_t a = addr + off;
                size_t pl = g_pagesz - (a & (g_pagesz - 1));
                if (pl > end - off)
                    pl = end - off;
                rv[n].iov_base = (void *)a;
                rv[n].iov_len = pl;
                off += pl;
                n++;
            }
            size_t req = off - done;
            struct iovec lv = {(char *)dst + done, req};
            ssize_t g2 = syscall(SYS_process_vm_readv, pid, &lv, 1UL, rv, (unsigned long)n, 0UL);
            if (g2 < 0) {
                if (errno != EFAULT)
                    return -1;
                return (ssize_t)done;
            }
            done += (size_t)g2;
            if ((size_t)g2 < req)
                return (ssize_t)done;
        }
        return (ssize_t)done;
    }
    return (ssize_t)done;
}

/* ------------------------------------------------------------------------ */
/* PY markers                                                                */
/* ------------------------------------------------------------------------ */

static int sb_reserve(struct sbuf *b, size_t extra)
{
    if (b->len + extra <= b->cap)
        return 0;
    size_t nc = b->cap ? b->cap : 1024;
    while (nc < b->len + extra)
        nc *= 2;
    char *np = realloc(b->p, nc);
    if (!np)
        return -1;
    b->p = np;
    b->cap = nc;
    return 0;
}

static int sb_put(struct sbuf *b, const char *s, size_t n)
{
    if (sb_reserve(b, n))
        return -1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

/* Append a string with newlines replaced (they would break the framing). */
static int sb_put_clean(struct sbuf *b, const char *s)
{
    size_t n = strlen(s);
    if (sb_reserve(b, n))
        return -1;
    char *d = b->p + b->len;
    for (size_t i = 0; i < n; i++)
        d[i] = (s[i] == '\n' || s[i] == '\r') ? '?' : s[i];
    b->len += n;
    return 0;
}

static void py_tls_free(void *p)
{
    struct pystate *s = p;
    if (!s)
        return;
    if (t_py == s)
        t_py = NULL;
    free(s->cur.p);
    free(s->last.p);
    free(s);
}

static struct pystate *get_pystate(void)
{
    if (t_py)
        return t_py;
    struct pystate *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->last_valid = 1; /* initial "last" is the empty stack */
    t_py = s;
    if (g_pykey_ok)
        pthread_setspecific(g_pykey, s);
    return s;
}

/* Append one frame "<file>:<line>:<function>\n".  Returns -1 on OOM. */
static int py_append_frame(struct sbuf *b, void *frame)
{
    int rc = 0;
    void *code = py.FrameGetCode(frame);
    int line = py.FrameGetLineNumber(frame);
    if (line < 0)
        line = 0; /* unknown line: the protocol's <line> is unsigned */
    const char *file = "?", *name = "?";
    void *fo = NULL, *no = NULL;
    if (code) {
        fo = py.GetAttrString(code, "co_filename");
        if (!fo)
            py.ErrClear();
        no = py.GetAttrString(code, "co_name");
        if (!no)
            py.ErrClear();
    } else {
        py.ErrClear();
    }
    if (fo) {
        const char *s = py.AsUTF8(fo);
        if (s)
            file = s;
        else
            py.ErrClear();
    }
    if (no) {
        const char *s = py.AsUTF8(no);
        if (s)
            name = s;
        else
            py.ErrClear();
    }
    char num[24];
    size_t nl = fmt_dec(num, line);
    if (sb_put_clean(b, file) || sb_put(b, ":", 1) || sb_put(b, num, nl) ||
        sb_put(b, ":", 1) || sb_put_clean(b, name) || sb_put(b, "\n", 1))
        rc = -1;
    if (fo)
        py.DecRef(fo);
    if (no)
        py.DecRef(no);
    if (code)
        py.DecRef(code);
    return rc;
}

/*
 * Emit "INTACT1 PY <n>\n<frames>" if this thread's current Python stack
 * differs from the last one it emitted.  Must be called with t_busy set and
 * the mapping mutex NOT held.
 */
static void py_note(void)
{
    if (!g_py_on || g_py_fork_off)
        return;
    /* A vfork() child (or raw clone) shares or copies the parent's memory
     * without running our atfork handler: never touch the interpreter (or
     * the parent thread's "last stack") from there. */
    if ((pid_t)syscall(SYS_getpid) != g_pid)
        return;
    struct pystate *ts = get_pystate();
    if (!ts)
        return;
    struct sbuf *c = &ts->cur;
    c->len = 0;
    if (sb_reserve(c, PY_HDR_RES + 512))
        return;
    c->len = PY_HDR_RES;
    int nframes = 0, ok = 1;

    /* Threads without a Python thread state have no frames; never touch
     * the GIL for them (avoids deadlocks with C worker threads). */
    if (py.IsInitialized() && !py.IsFinalizing() && py.GILThisThreadState()) {
        int g = py.GILEnsure();
        int gc_was_on = py.GCDisable ? py.GCDisable() : 0;
        void *et = NULL, *ev = NULL, *etb = NULL;
        py.ErrFetch(&et, &ev, &etb);
        void *f = py.GetFrame(); /* borrowed */
        int owned = 0;
        while (f && nframes < PY_MAX_FRAMES) {
            if (ok && py_append_frame(c, f))
                ok = 0;
            nframes++;
            void *back = py.FrameGetBack(f); /* new reference */
            if (owned)
                py.DecRef(f);
            f = back;
            owned = 1;
        }
        if (f && owned)
            py.DecRef(f);
        py.ErrClear();
        py.ErrRestore(et, ev, etb);
        if (gc_was_on && py.GCEnable)
            py.GCEnable();
        py.GILRelease(g);
    }
    if (!ok)
        return;

    size_t blen = c->len - PY_HDR_RES;
    struct sbuf *l = &ts->last;
    if (ts->last_valid && blen == l->len &&
        (blen == 0 || memcmp(c->p + PY_HDR_RES, l->p, blen) == 0))
        return;

    char hdr[PY_HDR_RES];
    size_t hl = 0;
    memcpy(hdr, MARKER_MAGIC "PY ", 11);
    hl = 11;
    hl += fmt_dec(hdr + hl, nframes);
    hdr[hl++] = '\n';
    memcpy(c->p + PY_HDR_RES - hl, hdr, hl);
    marker_write(c->p + PY_HDR_RES - hl, hl + blen);

    l->len = 0;
    if (sb_put(l, c->p + PY_HDR_RES, blen) == 0) {
        ts->last_valid = 1;
    } else {
        ts->last_valid = 0;
    }
}

/* ------------------------------------------------------------------------ */
/* JV markers: the Java stack, through JVMTI                                 */
/* ------------------------------------------------------------------------ */

/*
 * Loaded into a JVM as an agent too (-agentpath, set by the recorder through
 * JAVA_TOOL_OPTIONS), the shim asks JVMTI for the calling thread's Java stack
 * before a wrapped call and emits "INTACT1 JV <n>\n" + n lines
 * "<package/File.java>:<line>:<package.Class.method>\n" (innermost first) when
 * it differs from the last one that thread emitted, as for PY.
 *
 * Only calls made directly by the JDK's JNI libraries (libjava, libnio) ask:
 * their code runs in a JNI native method, so the thread is in the native state
 * that JVMTI's entry points require. The JVM's own file calls (class loading,
 * logs, perf data) happen in other states, where a JVMTI call would corrupt the
 * thread's state; they are never asked about.
 *
 * The JNI and JVMTI function tables are declared by index rather than through
 * the JDK's headers, so the shim builds without a JDK; the indices are the
 * function numbers of the JVMTI specification (table slot = number - 1) and
 * JNI's invocation interface, and shim/test_shim.sh checks them against
 * jvmti.h and jni.h when a JDK is installed.
 */
#define JV_GETENV 6            /* JNIInvokeInterface_: GetEnv */
#define JV_DELETE_LOCAL_REF 23 /* JNINativeInterface_: DeleteLocalRef */
#define JV_DEALLOCATE 46       /* 47: Deallocate */
#define JV_CLASS_SIGNATURE 47  /* 48: GetClassSignature */
#define JV_SOURCE_FILE 49      /* 50: GetSourceFileName */
#define JV_METHOD_NAME 63      /* 64: GetMethodName */
#define JV_DECLARING_CLASS 64  /* 65: GetMethodDeclaringClass */
#define JV_LINE_TABLE 69       /* 70: GetLineNumberTable */
#define JV_STACK_TRACE 103     /* 104: GetStackTrace */
#define JV_ADD_CAPS 141        /* 142: AddCapabilities */
#define JV_VERSION_JVMTI_1_2 0x30010200
#define JV_VERSION_JNI_1_2 0x00010002
#define JV_CAP_SOURCE_FILE_NAME (1u << 11) /* can_get_source_file_name */
#define JV_CAP_LINE_NUMBERS (1u << 12)     /* can_get_line_numbers */
#define JV_MAX_FRAMES 32

typedef void *const *jv_table; /* a JNI/JVMTI interface: a pointer to its table */
struct jv_frame {
    void *method;
    long long location;
};
struct jv_line {
    long long start;
    int line;
};

static jv_table *g_jvm;   /* JavaVM* */
static jv_table *g_jvmti; /* jvmtiEnv* */
static pthread_key_t g_jvkey;
static int g_jvkey_ok;
static TLS_IE struct pystate *t_jv; /* same shape as the PY state */

#define JV_FN(env, idx, type) ((type)(*(env))[idx])

static void jv_dealloc(void *p)
{
    if (p)
        JV_FN(g_jvmti, JV_DEALLOCATE, int (*)(void *, void *))(g_jvmti, p);
}

static void jv_tls_free(void *p)
{
    struct pystate *s = p;
    if (!s)
        return;
    if (t_jv == s)
        t_jv = NULL;
    free(s->cur.p);
    free(s->last.p);
    free(s);
}

static struct pystate *get_jvstate(void)
{
    if (t_jv)
        return t_jv;
    struct pystate *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->last_valid = 1;
    t_jv = s;
    if (g_jvkey_ok)
        pthread_setspecific(g_jvkey, s);
    return s;
}

/* Called by the JVM for -agentpath: keep the JVMTI environment, ask for the
 * capabilities that give source files and line numbers. */
int Agent_OnLoad(void *vm, char *options, void *reserved)
{
    (void)options;
    (void)reserved;
    jv_table *env = NULL;
    jv_table *jvm = vm;
    if (JV_FN(jvm, JV_GETENV, int (*)(void *, void **, int))(jvm, (void **)&env,
                                                             JV_VERSION_JVMTI_1_2) != 0 ||
        !env)
        return 0; /* no JVMTI: run on without Java stacks */
    unsigned int caps[4] = {JV_CAP_SOURCE_FILE_NAME | JV_CAP_LINE_NUMBERS, 0, 0, 0};
    if (JV_FN(env, JV_ADD_CAPS, int (*)(void *, const void *))(env, caps) != 0)
        return 0;
    if (pthread_key_create(&g_jvkey, jv_tls_free) == 0)
        g_jvkey_ok = 1;
    g_jvm = jvm;
    __atomic_store_n(&g_jvmti, env, __ATOMIC_RELEASE);
    return 0;
}

/* Whether `ret` (the wrapped call's return address) is in libjava or libnio. */
static int jv_from_jdk_jni(void *ret)
{
    Dl_info info;
    if (!ret || !dladdr(ret, &info) || !info.dli_fname)
        return 0;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    return strcmp(base, "libjava.so") == 0 || strcmp(base, "libnio.so") == 0;
}

/* The line of `location` in `method` (0: unknown, e.g. a native method). */
static int jv_line(void *method, long long location)
{
    int n = 0, line = 0;
    struct jv_line *table = NULL;
    if (JV_FN(g_jvmti, JV_LINE_TABLE, int (*)(void *, void *, int *, struct jv_line **))(
            g_jvmti, method, &n, &table) != 0)
        return 0;
    long long best = -1;
    for (int i = 0; i < n; i++)
        if (table[i].start <= location && table[i].start > best) {
            best = table[i].start;
            line = table[i].line;
        }
    jv_dealloc(table);
    return line < 0 ? 0 : line;
}

/* Append "<dir/File.java>:<line>:<pkg.Class.method>\n"; the class signature
 * "Lpkg/Class$Inner;" gives the package directory and the class name. */
static int jv_append_frame(struct sbuf *b, jv_table *jni, const struct jv_frame *f)
{
    void *klass = NULL;
    char *sig = NULL, *src = NULL, *name = NULL;
    JV_FN(g_jvmti, JV_DECLARING_CLASS, int (*)(void *, void *, void **))(g_jvmti, f->method, &klass);
    if (klass) {
        JV_FN(g_jvmti, JV_CLASS_SIGNATURE, int (*)(void *, void *, char **, char **))(
            g_jvmti, klass, &sig, NULL);
        JV_FN(g_jvmti, JV_SOURCE_FILE, int (*)(void *, void *, char **))(g_jvmti, klass, &src);
        JV_FN(jni, JV_DELETE_LOCAL_REF, void (*)(void *, void *))(jni, klass);
    }
    JV_FN(g_jvmti, JV_METHOD_NAME, int (*)(void *, void *, char **, char **, char **))(
        g_jvmti, f->method, &name, NULL, NULL);
    /* "Lpkg/Class;" -> dir "pkg/", class "pkg.Class" */
    const char *cls = (sig && sig[0] == 'L') ? sig + 1 : (sig ? sig : "?");
    size_t clen = strcspn(cls, ";");
    const char *slash = NULL;
    for (const char *q = cls; q < cls + clen; q++)
        if (*q == '/')
            slash = q;
    char num[24];
    size_t nl = fmt_dec(num, jv_line(f->method, f->location));
    int rc = 0;
    if (slash && src)
        rc |= sb_put(b, cls, (size_t)(slash - cls) + 1);
    rc |= sb_put_clean(b, src ? src : "?");
    rc |= sb_put(b, ":", 1) | sb_put(b, num, nl) | sb_put(b, ":", 1);
    size_t at = b->len;
    rc |= sb_put(b, cls, clen);
    for (size_t i = at; rc == 0 && i < b->len; i++)
        if (b->p[i] == '/')
            b->p[i] = '.';
    rc |= sb_put(b, ".", 1) | sb_put_clean(b, name ? name : "?") | sb_put(b, "\n", 1);
    jv_dealloc(sig);
    jv_dealloc(src);
    jv_dealloc(name);
    return rc ? -1 : 0;
}

/* Emit a JV marker if this thread's Java stack differs from its last one. */
static void jv_note(void *ret)
{
    jv_table *jvmti = __atomic_load_n(&g_jvmti, __ATOMIC_ACQUIRE);
    jv_table *jni = NULL;
    if (!jvmti || !jv_from_jdk_jni(ret))
        return;
    if (JV_FN(g_jvm, JV_GETENV, int (*)(void *, void **, int))(g_jvm, (void **)&jni,
                                                               JV_VERSION_JNI_1_2) != 0)
        return; /* not a Java thread */
    struct jv_frame frames[JV_MAX_FRAMES];
    int n = 0;
    if (JV_FN(jvmti, JV_STACK_TRACE, int (*)(void *, void *, int, int, struct jv_frame *, int *))(
            jvmti, NULL, 0, JV_MAX_FRAMES, frames, &n) != 0)
        return;
    struct pystate *ts = get_jvstate();
    if (!ts || sb_reserve(&ts->cur, PY_HDR_RES + 512))
        return;
    struct sbuf *c = &ts->cur;
    c->len = PY_HDR_RES;
    for (int i = 0; i < n; i++)
        if (jv_append_frame(c, jni, &frames[i]))
            return;
    size_t blen = c->len - PY_HDR_RES;
    struct sbuf *l = &ts->last;
    if (ts->last_valid && blen == l->len && (blen == 0 || memcmp(c->p + PY_HDR_RES, l->p, blen) == 0))
        return;
    char hdr[PY_HDR_RES];
    memcpy(hdr, MARKER_MAGIC "JV ", 11);
    size_t hl = 11 + fmt_dec(hdr + 11, n);
    hdr[hl++] = '\n';
    memcpy(c->p + PY_HDR_RES - hl, hdr, hl);
    marker_write(c->p + PY_HDR_RES - hl, hl + blen);
    l->len = 0;
    ts->last_valid = sb_put(l, c->p + PY_HDR_RES, blen) == 0;
}

/* The language stacks before a wrapped call: Python's, then Java's. `ret` is
 * the wrapper's return address (who called it). */
#define NOTE_STACKS() (py_note(), jv_note(__builtin_return_address(0)))

/* ------------------------------------------------------------------------ */
/* MW: shared writable file mappings                                         */
/* ------------------------------------------------------------------------ */

struct mrec {
    uintptr_t addr;
    size_t len; /* page multiple */
    dev_t dev;
    ino_t ino;
    unsigned char *shadow; /* NULL: not (yet) writable / untrackable */
    size_t hiwater;        /* shadow bytes at or past this are all zero */
};

static pthread_mutex_t g_mt_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mrec *g_mt;
static size_t g_mt_n, g_mt_cap, g_mt_hint;
static unsigned char *g_tmp; /* DIFF_CHUNK scratch, used under the lock */

static inline int mt_nonempty(void) { return __atomic_load_n(&g_mt_hint, __ATOMIC_ACQUIRE) != 0; }
static inline void mt_lock(void) { pthread_mutex_lock(&g_mt_lock); }
static inline void mt_unlock(void) { pthread_mutex_unlock(&g_mt_lock); }

static unsigned char *anon_alloc(size_t len)
{
    long r = syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0L);
    if (r == -1 || r == 0)
        return NULL;
    return (unsigned char *)r;
}

static void anon_free(void *p, size_t len)
{
    if (p && len)
        syscall(SYS_munmap, p, len);
}

static int mt_push(const struct mrec *r)
{
    if (g_mt_n == g_mt_cap) {
        size_t nc = g_mt_cap ? g_mt_cap * 2 : 16;
        struct mrec *n = realloc(g_mt, nc * sizeof *n);
        if (!n) {
            anon_free(r->shadow, r->len);
            return -1;
        }
        g_mt = n;
        g_mt_cap = nc;
    }
    g_mt[g_mt_n++] = *r;
    __atomic_store_n(&g_mt_hint, g_mt_n, __ATOMIC_RELEASE);
    return 0;
}

static void mt_remove(size_t i)
{
    g_mt[i] = g_mt[--g_mt_n];
    __atomic_store_n(&g_mt_hint, g_mt_n, __ATOMIC_RELEASE);
}

/* Take the initial shadow of a record (whole mapping). */
static void mt_capture(struct mrec *r)
{
    r->shadow = anon_alloc(r->len);
    r->hiwater = 0;
    if (!r->shadow)
        return;
    ssize_t got = read_mem(r->addr, r->len, r->shadow);
    if (got < 0) {
        anon_free(r->shadow, r->len);
        r->shadow = NULL;
        return;
    }
    r->hiwater = (size_t)got;
}

static void mw_emit_small(uintptr_t addr, const unsigned char *data, size_t len)
{
    char buf[64 + 4096];
    while (len) {
        size_t piece = len > 4096 ? 4096 : len;
        size_t hl = 11;
        memcpy(buf, MARKER_MAGIC "MW ", 11);
        hl += fmt_hex(buf + hl, addr);
        buf[hl++] = ' ';
        hl += fmt_dec(buf + hl, (long long)piece);
        buf[hl++] = '\n';
        memcpy(buf + hl, data, piece);
        marker_write(buf, hl + piece);
        addr += piece;
        data += piece;
        len -= piece;
    }
}

static void mw_emit(uintptr_t addr, const unsigned char *data, size_t len)
{
    while (len) {
        size_t piece = len > MW_MAX ? MW_MAX : len;
        char *buf = malloc(64 + piece);
        if (!buf) {
            mw_emit_small(addr, data, piece);
        } else {
            size_t hl = 11;
            memcpy(buf, MARKER_MAGIC "MW ", 11);
            hl += fmt_hex(buf + hl, addr);
            buf[hl++] = ' ';
            hl += fmt_dec(buf + hl, (long long)piece);
            buf[hl++] = '\n';
            memcpy(buf + hl, data, piece);
            marker_write(buf, hl + piece);
            free(buf);
        }
        addr += piece;
        data += piece;
        len -= piece;
    }
}

struct run {
    size_t s, e;
    int open;
};

static void run_feed(struct mrec *r, struct run *run, size_t s, size_t e)
{
    if (run->open && s - run->e < MW_GAP) {
        run->e = e;
        return;
    }
    if (run->open)
        mw_emit(r->addr + run->s, r->shadow + run->s, run->e - run->s);
    run->s = s;
    run->e = e;
    run->open = 1;
}

/*
 * Diff [off, end) (record-relative, page aligned) of a record against its
 * shadow, emit one MW marker per changed run and update the shadow.
 * Called with the mapping mutex held.
 */
static void diff_range(struct mrec *r, size_t off, size_t end)
{
    if (!r->shadow || off >= end)
        return;
    if (!g_tmp) {
        g_tmp = anon_alloc(DIFF_CHUNK);
        if (!g_tmp)
            return;
    }
    struct run run = {0, 0, 0};
    size_t pos = off, readable_end = end;
    while (pos < end) {
        size_t want = end - pos;
        if (want > DIFF_CHUNK)
            want = DIFF_CHUNK;
        ssize_t got = read_mem(r->addr + pos, want, g_tmp);
        if (got < 0) { /* cannot read at all: leave the shadow alone */
            if (run.open)
                mw_emit(r->addr + run.s, r->shadow + run.s, run.e - run.s);
            return;
        }
        const unsigned char *cur = g_tmp;
        unsigned char *sh = r->shadow + pos;
        size_t n = (size_t)got, i = 0;
        while (i < n) {
            while (i + 64 <= n && memcmp(cur + i, sh + i, 64) == 0)
                i += 64;
            if (i >= n)
                break;
            if (cur[i] == sh[i]) {
                i++;
                continue;
            }
            size_t a = i, b = i + 1, j = i + 1;
            while (j < n && j - b < MW_GAP) {
                if (cur[j] != sh[j])
                    b = j + 1;
                j++;
            }
            memcpy(sh + a, cur + a, b - a);
            run_feed(r, &run, pos + a, pos + b);
            i = j;
        }
        pos += n;
        if (n < want) {
            readable_end = pos;
            break;
        }
    }
    if (run.open)
        mw_emit(r->addr + run.s, r->shadow + run.s, run.e - run.s);

    if (readable_end > r->hiwater)
        r->hiwater = readable_end;
    if (readable_end < end && r->hiwater > readable_end) {
        /* Pages that became unreadable (file shrank): they read as zeros. */
        size_t ze = end < r->hiwater ? end : r->hiwater;
        memset(r->shadow + readable_end, 0, ze - readable_end);
        if (end >= r->hiwater)
            r->hiwater = readable_end;
    }
}

/* Diff (optionally) then forget [a, e) (page aligned). Mutex held. */
static void mt_cut(uintptr_t a, uintptr_t e, int diff)
{
    size_t i = 0;
    while (i < g_mt_n) {
        uintptr_t rs = g_mt[i].addr, re = rs + g_mt[i].len;
        if (re <= a || rs >= e) {
            i++;
            continue;
        }
        uintptr_t cs = rs > a ? rs : a, ce = re < e ? re : e;
        if (diff)
            diff_range(&g_mt[i], cs - rs, ce - rs);
        struct mrec r = g_mt[i];
        mt_remove(i);
        if (r.shadow)
            anon_free(r.shadow + (cs - rs), ce - cs);
        if (cs > rs) {
            struct mrec h = r;
            h.len = cs - rs;
            if (h.hiwater > h.len)
                h.hiwater = h.len;
            mt_push(&h);
        }
        if (re > ce) {
            struct mrec t = r;
            size_t skip = ce - rs;
            t.addr = ce;
            t.len = re - ce;
            t.shadow = r.shadow ? r.shadow + skip : NULL;
            t.hiwater = r.hiwater > skip ? r.hiwater - skip : 0;
            mt_push(&t);
        }
    }
}

static int mt_overlaps(uintptr_t a, uintptr_t e, struct mrec *first)
{
    for (size_t i = 0; i < g_mt_n; i++) {
        uintptr_t rs = g_mt[i].addr, re = rs + g_mt[i].len;
        if (re > a && rs < e) {
            if (first)
                *first = g_mt[i];
            return 1;
        }
    }
    return 0;
}

static void mt_diff_range(uintptr_t a, uintptr_t e)
{
    for (size_t i = 0; i < g_mt_n; i++) {
        uintptr_t rs = g_mt[i].addr, re = rs + g_mt[i].len;
        if (re <= a || rs >= e)
            continue;
        uintptr_t cs = rs > a ? rs : a, ce = re < e ? re : e;
        diff_range(&g_mt[i], cs - rs, ce - rs);
    }
}

static void mw_diff_all(void)
{
    if (!mt_nonempty())
        return;
    mt_lock();
    for (size_t i = 0; i < g_mt_n; i++)
        diff_range(&g_mt[i], 0, g_mt[i].len);
    mt_unlock();
}

/* fsync/fdatasync/sync_file_range(fd): mappings of the same file.
 * syncfs(fd) (whole_dev): mappings on the same device. */
static void mw_sync_fd(int fd, int whole_dev)
{
    if (!mt_nonempty())
        return;
    struct stat st;
    if (raw_fstat(fd, &st) != 0)
        return;
    mt_lock();
    for (size_t i = 0; i < g_mt_n; i++) {
        if (g_mt[i].dev == st.st_dev && (whole_dev || g_mt[i].ino == st.st_ino))
            diff_range(&g_mt[i], 0, g_mt[i].len);
    }
    mt_unlock();
}

/* Range helper: returns 0 if [addr, addr+len) is unusable. */
static int page_range(const void *addr, size_t len, uintptr_t *a, uintptr_t *e)
{
    uintptr_t s = (uintptr_t)addr;
    if (len == 0 || len > UINTPTR_MAX - s - g_pagesz)
        return 0;
    *a = page_down(s);
    *e = page_up(s + len);
    return 1;
}

static void mmap_before(void *addr, size_t len, int flags)
{
    uintptr_t a, e;
    if (!(flags & MAP_FIXED) || !mt_nonempty() || !page_range(addr, len, &a, &e))
        return;
    SHIM({
        mt_lock();
        mt_cut(a, e, 1);
        mt_unlock();
    });
}

static void mmap_after(void *ret, size_t len, int prot, int flags, int fd)
{
    int type = flags & MAP_TYPE;
    int filemap = (type == MAP_SHARED || type == MAP_SHARED_VALIDATE) &&
                  !(flags & MAP_ANONYMOUS) && fd >= 0;
    uintptr_t a, e;
    if (!filemap && !mt_nonempty())
        return;
    if (!page_range(ret, len, &a, &e))
        return;
    SHIM({
        struct stat st;
        int track = filemap && raw_fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
        mt_lock();
        if (g_mt_n)
            mt_cut(a, e, 0); /* stale records (unmapped behind our back) */
        if (track) {
            struct mrec r = {a, e - a, st.st_dev, st.st_ino, NULL, 0};
            if (prot & PROT_WRITE)
                mt_capture(&r);
            mt_push(&r);
        }
        mt_unlock();
    });
}

static inline int mmap_interesting(int flags)
{
    int type = flags & MAP_TYPE;
    return ((type == MAP_SHARED || type == MAP_SHARED_VALIDATE) && !(flags & MAP_ANONYMOUS)) ||
           mt_nonempty();
}

/* ------------------------------------------------------------------------ */
/* CP: data read by copy_file_range / sendfile                               */
/* ------------------------------------------------------------------------ */

static void cp_unknown(void)
{
    static const char m[] = MARKER_MAGIC "CP -1\n";
    marker_write(m, sizeof m - 1);
}

/* offp: user pointer to the source offset (may be NULL or invalid). */
static void cp_note(int in_fd, const void *offp, int out_fd, size_t len)
{
    struct stat so, si;
    if (raw_fstat(out_fd, &so) != 0 || !S_ISREG(so.st_mode))
        return;
    if (raw_fstat(in_fd, &si) != 0 || !S_ISREG(si.st_mode)) {
        cp_unknown();
        return;
    }
    long long off;
    if (offp) {
        int64_t v;
        if (read_mem((uintptr_t)offp, sizeof v, &v) != (ssize_t)sizeof v) {
            cp_unknown();
            return;
        }
        off = v;
    } else {
        off = syscall(SYS_lseek, in_fd, 0L, SEEK_CUR);
    }
    if (off < 0) {
        cp_unknown();
        return;
    }
    size_t avail = si.st_size > off ? (size_t)(si.st_size - off) : 0;
    size_t n = len < avail ? len : avail;
    if (n > MARKER_MAX - CP_HDR_MAX) {
        cp_unknown();
        return;
    }
    char *buf = malloc(CP_HDR_MAX + n + 1);
    if (!buf) {
        cp_unknown();
        return;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = syscall(SYS_pread64, in_fd, buf + CP_HDR_MAX + got, n - got,
                            (long)(off + (long long)got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(buf);
            cp_unknown();
            return;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    char hdr[CP_HDR_MAX];
    size_t hl = 11;
    memcpy(hdr, MARKER_MAGIC "CP ", 11);
    hl += fmt_dec(hdr + hl, (long long)got);
    hdr[hl++] = '\n';
    memcpy(buf + CP_HDR_MAX - hl, hdr, hl);
    marker_write(buf + CP_HDR_MAX - hl, hl + got);
    free(buf);
}

/* ------------------------------------------------------------------------ */
/* Signal handler tracking: a dispatcher marks "in signal handler" so that   */
/* wrappers called from handlers never take the GIL, locks or malloc.        */
/* ------------------------------------------------------------------------ */

struct usig {
    void (*fn)(void);
    int siginfo;
};
static struct usig g_usig[NSIG][2];
static int g_usig_cur[NSIG];

static void intact_sig_dispatch(int sig, siginfo_t *si, void *uc)
{
    t_insig++;
    if (sig > 0 && sig < NSIG) {
        int cur = __atomic_load_n(&g_usig_cur[sig], __ATOMIC_ACQUIRE);
        struct usig u = g_usig[sig][cur & 1];
        if (u.fn) {
            if (u.siginfo)
                ((void (*)(int, siginfo_t *, void *))u.fn)(sig, si, uc);
            else
                ((void (*)(int))u.fn)(sig);
        }
    }
    t_insig--;
}

int sigaction(int sig, const struct sigaction *restrict act, struct sigaction *restrict oact)
{
    __typeof__(sigaction) *fn = REAL(sigaction);
    if (!fn)
        ENOSYS_RET(-1);
    if (sig <= 0 || sig >= NSIG)
        return fn(sig, act, oact);
    int cur = __atomic_load_n(&g_usig_cur[sig], __ATOMIC_ACQUIRE) & 1;
    struct usig prev = g_usig[sig][cur];
    struct sigaction mine;
    const struct sigaction *use = act;
    int newslot = -1;
    if (act && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN) {
        int si = (act->sa_flags & SA_SIGINFO) != 0;
        newslot = cur ^ 1;
        g_usig[sig][newslot].fn = si ? (void (*)(void))act->sa_sigaction
                                     : (void (*)(void))act->sa_handler;
        g_usig[sig][newslot].siginfo = si;
        __atomic_store_n(&g_usig_cur[sig], newslot, __ATOMIC_RELEASE);
        mine = *act;
        mine.sa_sigaction = intact_sig_dispatch;
        mine.sa_flags |= SA_SIGINFO;
        use = &mine;
    }
    int rc = fn(sig, use, oact);
    int e = errno;
    if (rc != 0 && newslot >= 0)
        __atomic_store_n(&g_usig_cur[sig], cur, __ATOMIC_RELEASE);
    if (rc == 0 && oact && oact->sa_sigaction == intact_sig_dispatch && prev.fn) {
        if (prev.siginfo) {
            oact->sa_sigaction = (void (*)(int, siginfo_t *, void *))prev.fn;
        } else {
            oact->sa_flags &= ~SA_SIGINFO;
            oact->sa_handler = (void (*)(int))prev.fn;
        }
    }
    errno = e;
    return rc;
}

sighandler_t signal(int sig, sighandler_t handler)
{
    struct sigaction a, o;
    if (handler == SIG_ERR || sig <= 0 || sig >= NSIG) {
        errno = EINVAL;
        return SIG_ERR;
    }
    memset(&a, 0, sizeof a);
    memset(&o, 0, sizeof o);
    a.sa_handler = handler;
    sigemptyset(&a.sa_mask);
    sigaddset(&a.sa_mask, sig);
    a.sa_flags = SA_RESTART; /* BSD semantics, as glibc's signal() */
    if (sigaction(sig, &a, &o) < 0)
        return SIG_ERR;
    return o.sa_handler;
}

/* ------------------------------------------------------------------------ */
/* Initialisation, fork, exit                                                */
/* ------------------------------------------------------------------------ */

#define PYSYM(field, name) (*(void **)&py.field = dlsym(RTLD_DEFAULT, name))

static void atfork_prepare(void)
{
    g_fork_py_safe = 1;
    if (g_py_on && !g_py_fork_off && py.GILCheck && py.IsInitialized() &&
        py.GILThisThreadState() && !py.GILCheck())
        g_fork_py_safe = 0; /* the child would inherit a GIL owned by a thread
                               that does not exist there */
    t_fork_locked = 0;
    if (!t_busy) {
        mt_lock();
        t_fork_locked = 1;
    }
}

static void atfork_parent(void)
{
    if (t_fork_locked)
        mt_unlock();
    t_fork_locked = 0;
}

static void atfork_child(void)
{
    pthread_mutex_init(&g_mt_lock, NULL);
    t_fork_locked = 0;
    g_pid = (pid_t)syscall(SYS_getpid);
    if (!g_fork_py_safe)
        g_py_fork_off = 1;
    /* A new process: the tracer knows no Python stack for it yet. */
    if (t_py) {
        t_py->last.len = 0;
        t_py->last_valid = 1;
    }
}

static void shim_init(void)
{
    long ps = sysconf(_SC_PAGESIZE);
    if (ps > 0)
        g_pagesz = (size_t)ps;
    g_pid = (pid_t)syscall(SYS_getpid);

#define REAL_RESOLVE(name) (void)REAL(name);
    FOR_EACH_REAL(REAL_RESOLVE)

    const char *nopy = getenv("INTACT_PRELOAD_NO_PY");
    if (!(nopy && *nopy && *nopy != '0')) {
        PYSYM(IsInitialized, "Py_IsInitialized");
        PYSYM(IsFinalizing, "Py_IsFinalizing");
        if (!py.IsFinalizing)
            PYSYM(IsFinalizing, "_Py_IsFinalizing");
        PYSYM(GILEnsure, "PyGILState_Ensure");
        PYSYM(GILRelease, "PyGILState_Release");
        PYSYM(GILThisThreadState, "PyGILState_GetThisThreadState");
        PYSYM(GILCheck, "PyGILState_Check");
        PYSYM(GCDisable, "PyGC_Disable");
        PYSYM(GCEnable, "PyGC_Enable");
        PYSYM(GetFrame, "PyEval_GetFrame");
        PYSYM(FrameGetBack, "PyFrame_GetBack");
        PYSYM(FrameGetCode, "PyFrame_GetCode");
        PYSYM(FrameGetLineNumber, "PyFrame_GetLineNumber");
        PYSYM(GetAttrString, "PyObject_GetAttrString");
        PYSYM(AsUTF8, "PyUnicode_AsUTF8");
        PYSYM(DecRef, "Py_DecRef");
        PYSYM(ErrFetch, "PyErr_Fetch");
        PYSYM(ErrRestore, "PyErr_Restore");
        PYSYM(ErrClear, "PyErr_Clear");
        if (!py.GCDisable || !py.GCEnable)
            py.GCDisable = NULL, py.GCEnable = NULL;
        g_py_on = py.IsInitialized && py.IsFinalizing && py.GILEnsure && py.GILRelease &&
                  py.GILThisThreadState && py.GetFrame && py.FrameGetBack &&
                  py.FrameGetCode && py.FrameGetLineNumber && py.GetAttrString &&
                  py.AsUTF8 && py.DecRef && py.ErrFetch && py.ErrRestore && py.ErrClear;
    }
    if (g_py_on && pthread_key_create(&g_pykey, py_tls_free) == 0)
        g_pykey_ok = 1;
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    __atomic_store_n(&g_inited, 1, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void shim_ctor(void)
{
    SHIM((void)0); /* runs shim_init once */
}

__attribute__((destructor)) static void shim_dtor(void)
{
    SHIM(mw_diff_all());
}

void exit(int status)
{
    __typeof__(exit) *fn = REAL(exit);
    SHIM(mw_diff_all());
    if (fn)
        fn(status);
    for (;;)
        syscall(SYS_exit_group, status);
}

/* ------------------------------------------------------------------------ */
/* Wrappers: PY marker then the real call                                    */
/* ------------------------------------------------------------------------ */

#ifdef __O_TMPFILE
#define NEEDS_MODE(f) (((f) & O_CREAT) || (((f) & __O_TMPFILE) == __O_TMPFILE))
#else
#define NEEDS_MODE(f) ((f) & O_CREAT)
#endif

/* open/openat and their 64 variants: `flags` is the last named parameter, and the mode
 * argument exists only when the flags need one. */
#define OPEN_LIKE_WRAPPER(name, params, args)                                  \
    int name params                                                            \
    {                                                                          \
        int mode = 0;                                                          \
        if (NEEDS_MODE(flags)) {                                               \
            va_list ap;                                                        \
            va_start(ap, flags);                                               \
            mode = va_arg(ap, int);                                            \
            va_end(ap);                                                        \
        }                                                                      \
        __typeof__(name) *fn = REAL(name);                                     \
        SHIM(NOTE_STACKS());                                                       \
        if (!fn)                                                               \
            ENOSYS_RET(-1);                                                    \
        return fn args;                                                        \
    }
OPEN_LIKE_WRAPPER(open, (const char *path, int flags, ...), (path, flags, mode))
OPEN_LIKE_WRAPPER(open64, (const char *path, int flags, ...), (path, flags, mode))
OPEN_LIKE_WRAPPER(openat, (int dirfd, const char *path, int flags, ...), (dirfd, path, flags, mode))
OPEN_LIKE_WRAPPER(openat64, (int dirfd, const char *path, int flags, ...), (dirfd, path, flags, mode))

/* Generic "PY marker, then real call" wrapper. */
#define PY_WRAPPER(ret, name, params, args, errv)                              \
    ret name params                                                            \
    {                                                                          \
        __typeof__(name) *fn = REAL(name);                                     \
        SHIM(NOTE_STACKS());                                                       \
        if (!fn)                                                               \
            ENOSYS_RET(errv);                                                  \
        return fn args;                                                        \
    }

PY_WRAPPER(int, creat, (const char *p, mode_t m), (p, m), -1)
PY_WRAPPER(int, creat64, (const char *p, mode_t m), (p, m), -1)
PY_WRAPPER(int, __open_2, (const char *p, int f), (p, f), -1)
PY_WRAPPER(int, __open64_2, (const char *p, int f), (p, f), -1)
PY_WRAPPER(int, __openat_2, (int d, const char *p, int f), (d, p, f), -1)
PY_WRAPPER(int, __openat64_2, (int d, const char *p, int f), (d, p, f), -1)

PY_WRAPPER(ssize_t, write, (int fd, const void *b, size_t n), (fd, b, n), -1)
PY_WRAPPER(ssize_t, pwrite, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o), -1)
PY_WRAPPER(ssize_t, pwrite64, (int fd, const void *b, size_t n, off64_t o), (fd, b, n, o), -1)
PY_WRAPPER(ssize_t, writev, (int fd, const struct iovec *v, int c), (fd, v, c), -1)
PY_WRAPPER(ssize_t, pwritev, (int fd, const struct iovec *v, int c, off_t o), (fd, v, c, o), -1)
PY_WRAPPER(ssize_t, pwritev64, (int fd, const struct iovec *v, int c, off64_t o), (fd, v, c, o), -1)
PY_WRAPPER(ssize_t, pwritev2, (int fd, const struct iovec *v, int c, off_t o, int f), (fd, v, c, o, f), -1)
PY_WRAPPER(ssize_t, pwritev64v2, (int fd, const struct iovec *v, int c, off64_t o, int f), (fd, v, c, o, f), -1)

PY_WRAPPER(int, truncate, (const char *p, off_t l), (p, l), -1)
PY_WRAPPER(int, truncate64, (const char *p, off64_t l), (p, l), -1)
PY_WRAPPER(int, ftruncate, (int fd, off_t l), (fd, l), -1)
PY_WRAPPER(int, ftruncate64, (int fd, off64_t l), (fd, l), -1)
PY_WRAPPER(int, fallocate, (int fd, int m, off_t o, off_t l), (fd, m, o, l), -1)
PY_WRAPPER(int, fallocate64, (int fd, int m, off64_t o, off64_t l), (fd, m, o, l), -1)
PY_WRAPPER(int, posix_fallocate, (int fd, off_t o, off_t l), (fd, o, l), ENOSYS)
PY_WRAPPER(int, posix_fallocate64, (int fd, off64_t o, off64_t l), (fd, o, l), ENOSYS)

PY_WRAPPER(int, rename, (const char *a, const char *b), (a, b), -1)
PY_WRAPPER(int, renameat, (int da, const char *a, int db, const char *b), (da, a, db, b), -1)
PY_WRAPPER(int, renameat2, (int da, const char *a, int db, const char *b, unsigned int f),
           (da, a, db, b, f), -1)
PY_WRAPPER(int, link, (const char *a, const char *b), (a, b), -1)
PY_WRAPPER(int, linkat, (int da, const char *a, int db, const char *b, int f), (da, a, db, b, f), -1)
PY_WRAPPER(int, unlink, (const char *p), (p), -1)
PY_WRAPPER(int, unlinkat, (int d, const char *p, int f), (d, p, f), -1)
/* remove(3): the JDK's File.delete (libjava's UnixFileSystem delete0) calls it, and glibc's
 * remove reaches unlink/rmdir internally, past the wrappers above. */
PY_WRAPPER(int, remove, (const char *p), (p), -1)
PY_WRAPPER(int, mkdir, (const char *p, mode_t m), (p, m), -1)
PY_WRAPPER(int, mkdirat, (int d, const char *p, mode_t m), (d, p, m), -1)
PY_WRAPPER(int, rmdir, (const char *p), (p), -1)
PY_WRAPPER(int, symlink, (const char *a, const char *b), (a, b), -1)
PY_WRAPPER(int, symlinkat, (const char *a, int d, const char *b), (a, d, b), -1)

PY_WRAPPER(int, close, (int fd), (fd), -1)
PY_WRAPPER(off_t, lseek, (int fd, off_t o, int w), (fd, o, w), -1)
PY_WRAPPER(off64_t, lseek64, (int fd, off64_t o, int w), (fd, o, w), -1)

/* ---- durability points: PY marker, MW diffs, then the real call ---- */

int fsync(int fd)
{
    __typeof__(fsync) *fn = REAL(fsync);
    SHIM(NOTE_STACKS(); mw_sync_fd(fd, 0));
    if (!fn)
        ENOSYS_RET(-1);
    return fn(fd);
}

int fdatasync(int fd)
{
    __typeof__(fdatasync) *fn = REAL(fdatasync);
    SHIM(NOTE_STACKS(); mw_sync_fd(fd, 0));
    if (!fn)
        ENOSYS_RET(-1);
    return fn(fd);
}

int sync_file_range(int fd, off64_t off, off64_t n, unsigned int flags)
{
    __typeof__(sync_file_range) *fn = REAL(sync_file_range);
    SHIM(NOTE_STACKS(); mw_sync_fd(fd, 0));
    if (!fn)
        ENOSYS_RET(-1);
    return fn(fd, off, n, flags);
}

int syncfs(int fd)
{
    __typeof__(syncfs) *fn = REAL(syncfs);
    SHIM(NOTE_STACKS(); mw_sync_fd(fd, 1));
    if (!fn)
        ENOSYS_RET(-1);
    return fn(fd);
}

void sync(void)
{
    __typeof__(sync) *fn = REAL(sync);
    SHIM(NOTE_STACKS(); mw_diff_all());
    if (fn)
        fn();
}

int msync(void *addr, size_t len, int flags)
{
    __typeof__(msync) *fn = REAL(msync);
    SHIM({
        uintptr_t a, e;
        NOTE_STACKS();
        if (mt_nonempty() && page_range(addr, len, &a, &e)) {
            mt_lock();
            mt_diff_range(a, e);
            mt_unlock();
        }
    });
    if (!fn)
        ENOSYS_RET(-1);
    return fn(addr, len, flags);
}

int munmap(void *addr, size_t len)
{
    __typeof__(munmap) *fn = REAL(munmap);
    uintptr_t a, e;
    if (mt_nonempty() && ((uintptr_t)addr & (g_pagesz - 1)) == 0 && page_range(addr, len, &a, &e)) {
        SHIM({
            mt_lock();
            int ov = mt_overlaps(a, e, NULL);
            mt_unlock();
            if (ov) {
                NOTE_STACKS();
                mt_lock();
                mt_cut(a, e, 1);
                mt_unlock();
            }
        });
    }
    if (!fn)
        ENOSYS_RET(-1);
    return fn(addr, len);
}

/* ---- mapping bookkeeping ---- */

/* mmap and mmap64 differ only in the offset's type. */
#define MMAP_WRAPPER(name, off_type)                                           \
    void *name(void *addr, size_t len, int prot, int flags, int fd, off_type off) \
    {                                                                          \
        __typeof__(name) *fn = REAL(name);                                     \
        if (!fn)                                                               \
            ENOSYS_RET(MAP_FAILED);                                            \
        if (!mmap_interesting(flags))                                          \
            return fn(addr, len, prot, flags, fd, off);                        \
        mmap_before(addr, len, flags);                                         \
        void *ret = fn(addr, len, prot, flags, fd, off);                       \
        if (ret != MAP_FAILED)                                                 \
            mmap_after(ret, len, prot, flags, fd);                             \
        return ret;                                                            \
    }
MMAP_WRAPPER(mmap, off_t)
MMAP_WRAPPER(mmap64, off64_t)

void *mremap(void *old, size_t old_size, size_t new_size, int flags, ...)
{
    void *new_addr = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        new_addr = va_arg(ap, void *);
        va_end(ap);
    }
    __typeof__(mremap) *fn = REAL(mremap);
    if (!fn)
        ENOSYS_RET(MAP_FAILED);
    if (!mt_nonempty())
        return fn(old, old_size, new_size, flags, new_addr);

    struct mrec proto = {0, 0, 0, 0, NULL, 0};
    int have = 0;
    uintptr_t oa = (uintptr_t)old, oe = 0, na, ne;
    if (!page_range(old, old_size ? old_size : 1, &oa, &oe))
        return fn(old, old_size, new_size, flags, new_addr);
    SHIM({
        mt_lock();
        have = mt_overlaps(oa, oe, &proto);
        mt_unlock();
        if (have)
            NOTE_STACKS();
        mt_lock();
        if (have && old_size)
            mt_diff_range(oa, oe);
        if ((flags & MREMAP_FIXED) && page_range(new_addr, new_size, &na, &ne))
            mt_cut(na, ne, 1);
        mt_unlock();
    });
    void *ret = fn(old, old_size, new_size, flags, new_addr);
    if (ret != MAP_FAILED && page_range(ret, new_size, &na, &ne)) {
        SHIM({
            mt_lock();
            if (have && old_size && !(flags & MREMAP_DONTUNMAP))
                mt_cut(oa, oe, 0);
            mt_cut(na, ne, 0);
            if (have) {
                struct mrec r = {na, ne - na, proto.dev, proto.ino, NULL, 0};
                if (proto.shadow)
                    mt_capture(&r);
                mt_push(&r);
            }
            mt_unlock();
        });
    }
    return ret;
}

int mprotect(void *addr, size_t len, int prot)
{
    __typeof__(mprotect) *fn = REAL(mprotect);
    if (!fn)
        ENOSYS_RET(-1);
    int rc = fn(addr, len, prot);
    uintptr_t a, e;
    if (rc == 0 && (prot & PROT_WRITE) && mt_nonempty() && page_range(addr, len, &a, &e)) {
        SHIM({
            mt_lock();
            for (size_t i = 0; i < g_mt_n; i++) {
                uintptr_t rs = g_mt[i].addr, re = rs + g_mt[i].len;
                if (re > a && rs < e && !g_mt[i].shadow)
                    mt_capture(&g_mt[i]);
            }
            mt_unlock();
        });
    }
    return rc;
}

/* ---- intactfs streams ---- */

/* SETSTREAM is _IOW(0xCC, 1, struct intact_stream { u64 id; u32 flags; u32 reserved; }).
 * strace cannot read the argument of an ioctl it does not know, so the shim tells the
 * tracer which stream the program asks for: "ST <id hex> <flags hex>". */
static void st_note(const void *arg)
{
    unsigned long long id;
    unsigned int flags;
    char buf[64];
    size_t n;
    memcpy(&id, arg, sizeof id);
    memcpy(&flags, (const char *)arg + 8, sizeof flags);
    memcpy(buf, MARKER_MAGIC "ST ", 11);
    n = 11;
    n += fmt_hex(buf + n, id);
    buf[n++] = ' ';
    n += fmt_hex(buf + n, flags);
    buf[n++] = '\n';
    marker_write(buf, n);
}

int ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    void *arg;
    __typeof__(ioctl) *fn = REAL(ioctl);
    va_start(ap, request);
    arg = va_arg(ap, void *);
    va_end(ap);
    if (((request >> 8) & 0xff) == 0xCC && (request & 0xff) == 1 && ((request >> 16) & 0x3fff) == 16 && arg)
        SHIM(st_note(arg));
    if (!fn)
        ENOSYS_RET(-1);
    return fn(fd, request, arg);
}

/* ---- copies ---- */

ssize_t copy_file_range(int in_fd, off64_t *in_off, int out_fd, off64_t *out_off, size_t len,
                        unsigned int flags)
{
    __typeof__(copy_file_range) *fn = REAL(copy_file_range);
    SHIM(NOTE_STACKS(); cp_note(in_fd, in_off, out_fd, len));
    if (!fn)
        ENOSYS_RET(-1);
    return fn(in_fd, in_off, out_fd, out_off, len, flags);
}

/* sendfile and sendfile64 differ only in the offset's type. */
#define SENDFILE_WRAPPER(name, off_type)                                       \
    ssize_t name(int out_fd, int in_fd, off_type *offset, size_t count)        \
    {                                                                          \
        __typeof__(name) *fn = REAL(name);                                     \
        SHIM(NOTE_STACKS(); cp_note(in_fd, offset, out_fd, count));                \
        if (!fn)                                                               \
            ENOSYS_RET(-1);                                                    \
        return fn(out_fd, in_fd, offset, count);                               \
    }
SENDFILE_WRAPPER(sendfile, off_t)
SENDFILE_WRAPPER(sendfile64, off64_t)
