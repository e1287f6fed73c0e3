/* t_intact: libintact's test program, driven by test.sh against a real mount.
 *
 *   t_intact abi                      print the ABI numbers (compared with control.rs)
 *   t_intact id NAME                  print intact_stream_id(NAME) in hex
 *   t_intact get PATH                 print "ID FLAGS" (hex, decimal) of this process
 *   t_intact basic MNT                getstream/setstream round trips, flags, EINVAL
 *   t_intact fork MNT NAME            children and grandchildren inherit the stream
 *   t_intact notty DIR                the calls fail with -1/ENOTTY off the mount
 *   t_intact pattern BYTES [XOR]      write the test pattern (each byte XOR XOR) to stdout
 *   t_intact write FILE NAME BYTES none|fsync|streamsync|osync|dsync [ignore]
 *                                     in stream NAME (IGNORE_FSYNC with "ignore"), create
 *                                     FILE with BYTES of the pattern, then sync as asked
 *   t_intact osync FILE NAME          osync tickets, DURABLE polling and waiting, dsync
 *   t_intact regions-errors MNT OTHER DIR
 *                                     atomic regions: the errors and their messages (OTHER
 *                                     is a second intactfs mount, DIR a directory off
 *                                     intactfs)
 *   t_intact regions-abort MNT        abort: writes, a created file, a rename (fresh opens)
 *   t_intact regions-cache MNT        abort seen through a descriptor opened before
 *   t_intact regions-fork MNT         a forked child is in the region
 *   t_intact regions-exit MNT         a process that exits inside a region
 *   t_intact regions-dependents MNT   dependents join a region; EBUSY between regions
 *   t_intact regions-f2fs MNT         F2FS atomic writes
 *   t_intact region A B commit|hold [READY]
 *                                     A and B get REGION_OLD bytes of the pattern (fsynced),
 *                                     then, in a region, REGION_NEW bytes of the pattern XOR
 *                                     REGION_XOR; commit: commit the region; hold: fsync,
 *                                     fdatasync, dsync, osync and streamsync (which commit
 *                                     nothing inside a region), write "ready" to READY and
 *                                     wait to be killed
 *
 * Each check prints "ok: ..." or "FAIL: ..."; the exit status is 1 if any failed.
 */
#define _GNU_SOURCE
#include <intact.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (cond) {                                                                        \
            printf("ok: ");                                                                \
        } else {                                                                           \
            printf("FAIL: ");                                                              \
            failures++;                                                                    \
        }                                                                                  \
        printf(__VA_ARGS__);                                                               \
        printf("\n");                                                                      \
        fflush(stdout);                                                                    \
    } while (0)

static int die(const char *what) {
    printf("FAIL: %s: %s\n", what, strerror(errno));
    return 1;
}

/* The test pattern: byte i is the low byte of ((i + 1) * 2654435761) >> 11 (never all
 * zeros, so a hole or a lost block does not pass for data). */
static unsigned char pattern_byte(uint64_t i) {
    return (unsigned char)(((i + 1) * 2654435761u) >> 11);
}

/* The sizes of the crash sections' files: old contents, then the region's. */
#define REGION_OLD 4096u
#define REGION_NEW 65536u
#define REGION_XOR 0x5au

static int cmd_abi(void) {
    printf("SETSTREAM 0x%08x\n", (unsigned)INTACT_IOC_SETSTREAM);
    printf("GETSTREAM 0x%08x\n", (unsigned)INTACT_IOC_GETSTREAM);
    printf("STREAMSYNC 0x%08x\n", (unsigned)INTACT_IOC_STREAMSYNC);
    printf("OSYNC 0x%08x\n", (unsigned)INTACT_IOC_OSYNC);
    printf("DSYNC 0x%08x\n", (unsigned)INTACT_IOC_DSYNC);
    printf("DURABLE 0x%08x\n", (unsigned)INTACT_IOC_DURABLE);
    printf("BEGIN 0x%08x\n", (unsigned)INTACT_IOC_BEGIN);
    printf("COMMIT 0x%08x\n", (unsigned)INTACT_IOC_COMMIT);
    printf("ABORT 0x%08x\n", (unsigned)INTACT_IOC_ABORT);
    printf("ADD 0x%08x\n", (unsigned)INTACT_IOC_ADD);
    printf("F2FS_IOC_START_ATOMIC_WRITE 0x%08x\n", (unsigned)INTACT_F2FS_IOC_START_ATOMIC_WRITE);
    printf("F2FS_IOC_COMMIT_ATOMIC_WRITE 0x%08x\n", (unsigned)INTACT_F2FS_IOC_COMMIT_ATOMIC_WRITE);
    printf("F2FS_IOC_ABORT_VOLATILE_WRITE 0x%08x\n", (unsigned)INTACT_F2FS_IOC_ABORT_VOLATILE_WRITE);
    printf("F2FS_IOC_GET_FEATURES 0x%08x\n", (unsigned)INTACT_F2FS_IOC_GET_FEATURES);
    printf("F2FS_FEATURE_ATOMIC_WRITE 0x%08x\n", (unsigned)INTACT_F2FS_FEATURE_ATOMIC_WRITE);
    printf("IGNORE_FSYNC %u\n", (unsigned)INTACT_IGNORE_FSYNC);
    printf("FSYNC_AS_OSYNC %u\n", (unsigned)INTACT_FSYNC_AS_OSYNC);
    printf("SIZE %zu\n", sizeof(struct intact_stream));
    printf("DURABLE_SIZE %zu\n", sizeof(struct intact_durable));
    return 0;
}

static int cmd_get(const char *path) {
    uint64_t id;
    uint32_t flags;
    if (intact_getstream_path(path, &id, &flags) < 0)
        return die("intact_getstream_path");
    printf("0x%016" PRIx64 " %" PRIu32 "\n", id, flags);
    return 0;
}

static int cmd_basic(const char *mnt) {
    uint64_t id = 99;
    uint32_t flags = 99;
    int r = intact_getstream_path(mnt, &id, &flags);
    CHECK(r == 0 && id == 0 && flags == 0, "a fresh process is in the init stream (r=%d id=0x%" PRIx64 " flags=%" PRIu32 ")", r, id, flags);

    uint64_t s1 = intact_stream_id("libintact-basic-1");
    r = intact_setstream_path(mnt, "libintact-basic-1", INTACT_IGNORE_FSYNC);
    CHECK(r == 0, "setstream_path(MNT, \"libintact-basic-1\", IGNORE_FSYNC) = %d", r);
    r = intact_getstream_path(mnt, &id, &flags);
    CHECK(r == 0 && id == s1 && flags == INTACT_IGNORE_FSYNC, "getstream = (0x%" PRIx64 ", %" PRIu32 "), want (0x%" PRIx64 ", 1)", id, flags, s1);

    /* Through a regular file of the mount and the fd-based calls. */
    char file[4096];
    snprintf(file, sizeof file, "%s/libintact-basic-file", mnt);
    int fd = open(file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return die(file);
    r = intact_getstream(fd, &id, NULL);
    CHECK(r == 0 && id == s1, "getstream on a regular file of the mount sees the same stream");
    r = intact_setstream(fd, 0x1234, 0);
    CHECK(r == 0, "setstream(fd, 0x1234, 0) = %d", r);
    r = intact_getstream(fd, &id, &flags);
    CHECK(r == 0 && id == 0x1234 && flags == 0, "getstream = (0x%" PRIx64 ", %" PRIu32 "), want (0x1234, 0)", id, flags);
    r = intact_streamsync(fd);
    CHECK(r == 0, "streamsync(fd) = %d", r);
    errno = 0;
    r = intact_setstream(fd, 0x5678, 4);
    int e = errno;
    CHECK(r == -1 && e == EINVAL, "an unknown flag is refused: r=%d errno=%s", r, strerror(e));
    r = intact_getstream(fd, &id, NULL);
    CHECK(r == 0 && id == 0x1234, "a refused setstream changes nothing (id 0x%" PRIx64 ")", id);
    close(fd);
    if (unlink(file) < 0)
        return die("unlink");

    /* Flags belong to the stream: setting the same stream again without the flag clears it. */
    r = intact_setstream_path(mnt, "libintact-basic-1", 0);
    r |= intact_getstream_path(mnt, &id, &flags);
    CHECK(r == 0 && id == s1 && flags == 0, "setstream without the flag clears it (flags %" PRIu32 ")", flags);

    r = intact_setstream_path(mnt, "init", 0);
    r |= intact_getstream_path(mnt, &id, &flags);
    CHECK(r == 0 && id == 0 && flags == 0, "setstream(\"init\") returns to the init stream");
    r = intact_streamsync_path(mnt);
    CHECK(r == 0, "streamsync_path in the init stream = %d", r);

    errno = 0;
    r = intact_getstream_path("/nonexistent/intact", &id, &flags);
    e = errno;
    CHECK(r == -1 && e == ENOENT, "a missing path: r=%d errno=%s", r, strerror(e));
    return failures ? 1 : 0;
}

/* In a child: 0 if the process is in stream `want`, else 1 (with a message). */
static int child_expect(const char *mnt, uint64_t want, const char *who) {
    uint64_t id = 0;
    if (intact_getstream_path(mnt, &id, NULL) < 0) {
        printf("FAIL: %s: getstream: %s\n", who, strerror(errno));
        return 1;
    }
    if (id != want) {
        printf("FAIL: %s is in 0x%016" PRIx64 ", want 0x%016" PRIx64 "\n", who, id, want);
        return 1;
    }
    return 0;
}

static int wait_ok(pid_t pid) {
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return 0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int cmd_fork(const char *mnt, const char *name) {
    uint64_t want = intact_stream_id(name);
    if (intact_setstream_path(mnt, name, 0) < 0)
        return die("intact_setstream_path");
    fflush(stdout);

    /* A child and a grandchild adopt the stream. */
    pid_t c = fork();
    if (c < 0)
        return die("fork");
    if (c == 0) {
        int bad = child_expect(mnt, want, "the child");
        fflush(stdout);
        pid_t g = fork();
        if (g == 0)
            _exit(child_expect(mnt, want, "the grandchild"));
        _exit(bad || g < 0 || !wait_ok(g));
    }
    CHECK(wait_ok(c), "a child and a grandchild inherit stream %s (0x%016" PRIx64 ")", name, want);

    /* A child that sets its own stream does not move the parent. */
    uint64_t other = intact_stream_id("libintact-fork-other");
    c = fork();
    if (c < 0)
        return die("fork");
    if (c == 0) {
        if (intact_setstream_path(mnt, "libintact-fork-other", 0) < 0)
            _exit(1);
        _exit(child_expect(mnt, other, "the child after its own setstream"));
    }
    CHECK(wait_ok(c), "a child can set its own stream");
    uint64_t id = 0;
    int r = intact_getstream_path(mnt, &id, NULL);
    CHECK(r == 0 && id == want, "the parent keeps its stream after the child's setstream (0x%016" PRIx64 ")", id);

    /* An exec'd program inherits too (the stream is the process's, exec keeps it). */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n < 0)
        return die("readlink /proc/self/exe");
    self[n] = '\0';
    c = fork();
    if (c < 0)
        return die("fork");
    if (c == 0) {
        char want_s[32];
        snprintf(want_s, sizeof want_s, "0x%016" PRIx64, want);
        execl("/bin/sh", "sh", "-c", "test \"$(\"$0\" get \"$1\" | cut -d' ' -f1)\" = \"$2\"", self, mnt, want_s, (char *)NULL);
        _exit(127);
    }
    CHECK(wait_ok(c), "a program run through sh inherits the stream");
    return failures ? 1 : 0;
}

static int cmd_notty(const char *dir) {
    uint64_t id = 7;
    uint32_t flags = 7;
    errno = 0;
    int r = intact_getstream_path(dir, &id, &flags);
    int e = errno;
    CHECK(r == -1 && e == ENOTTY, "getstream_path(%s): r=%d errno=%s (want -1, ENOTTY)", dir, r, strerror(e));
    CHECK(id == 7 && flags == 7, "a failed getstream leaves the outputs alone");
    errno = 0;
    r = intact_setstream_path(dir, "x", 0);
    e = errno;
    CHECK(r == -1 && e == ENOTTY, "setstream_path(%s): r=%d errno=%s (want -1, ENOTTY)", dir, r, strerror(e));
    errno = 0;
    r = intact_streamsync_path(dir);
    e = errno;
    CHECK(r == -1 && e == ENOTTY, "streamsync_path(%s): r=%d errno=%s (want -1, ENOTTY)", dir, r, strerror(e));
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return die(dir);
    errno = 0;
    r = intact_getstream(fd, &id, &flags);
    e = errno;
    CHECK(r == -1 && e == ENOTTY, "getstream(fd of %s): r=%d errno=%s (want -1, ENOTTY)", dir, r, strerror(e));
    close(fd);
    fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return die(dir);
    uint64_t t = 7;
    errno = 0;
    r = intact_osync_ticket(fd, &t);
    e = errno;
    CHECK(r == -1 && e == ENOTTY && t == 7, "osync(fd of %s): r=%d errno=%s (want -1, ENOTTY; ticket untouched)", dir, r, strerror(e));
    errno = 0;
    r = intact_dsync(fd);
    e = errno;
    CHECK(r == -1 && e == ENOTTY, "dsync(fd of %s): r=%d errno=%s (want -1, ENOTTY)", dir, r, strerror(e));
    errno = 0;
    r = intact_durable(fd, 1, 1);
    e = errno;
    CHECK(r == -1 && e == ENOTTY, "durable(fd of %s): r=%d errno=%s (want -1, ENOTTY)", dir, r, strerror(e));
    CHECK(strcmp(intact_strerror(ENOTTY), "not on an intactfs mount") == 0, "intact_strerror(ENOTTY) = \"%s\"", intact_strerror(ENOTTY));
    close(fd);
    errno = 0;
    r = intact_streamsync(-1);
    e = errno;
    CHECK(r == -1 && e == EBADF, "streamsync(-1): r=%d errno=%s (want -1, EBADF)", r, strerror(e));
    return failures ? 1 : 0;
}

static int cmd_pattern(uint64_t n, unsigned char x) {
    unsigned char buf[65536];
    for (uint64_t off = 0; off < n;) {
        size_t k = n - off < sizeof buf ? (size_t)(n - off) : sizeof buf;
        for (size_t i = 0; i < k; i++)
            buf[i] = pattern_byte(off + i) ^ x;
        if (fwrite(buf, 1, k, stdout) != k)
            return die("fwrite");
        off += k;
    }
    return fflush(stdout) == 0 ? 0 : die("fflush");
}

/* osync returns increasing tickets; DURABLE answers at once without WAIT, and with WAIT
 * once the ticket is durable; dsync makes every earlier ticket durable; a ticket never
 * issued is EINVAL. */
static int cmd_osync(const char *file, const char *name) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir)
        return die("osync needs FILE in a directory of the mount");
    *slash = '\0';
    if (intact_setstream_path(dir, name, 0) < 0)
        return die("intact_setstream_path");
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return die(file);
    uint64_t t1 = 0, t2 = 0, t3 = 0;
    if (write(fd, "one", 3) != 3 || intact_osync_ticket(fd, &t1) < 0)
        return die("write + osync");
    CHECK(t1 > 0, "osync returns a ticket (%" PRIu64 ")", t1);
    int d = intact_durable(fd, t1, 0);
    CHECK(d == 0 || d == 1, "DURABLE without WAIT answers at once (%d)", d);
    printf("after osync, durable without waiting: %d\n", d);
    if (write(fd, "two", 3) != 3 || intact_osync_ticket(fd, &t2) < 0)
        return die("write + osync");
    CHECK(t2 > t1, "a later osync's ticket is larger (%" PRIu64 " > %" PRIu64 ")", t2, t1);
    CHECK(intact_dsync(fd) == 0, "dsync");
    CHECK(intact_durable(fd, t2, 0) == 1 && intact_durable(fd, t1, 0) == 1, "after dsync both tickets are durable");
    if (write(fd, "three", 5) != 5 || intact_osync_ticket(fd, &t3) < 0)
        return die("write + osync");
    CHECK(intact_durable(fd, t3, 1) == 1, "DURABLE with WAIT returns once the ticket is durable (the durability timeout)");
    errno = 0;
    int r = intact_durable(fd, t3 + 1000000, 0);
    int e = errno;
    CHECK(r == -1 && e == EINVAL, "a ticket never issued: r=%d errno=%s (want -1, EINVAL)", r, strerror(e));
    uint32_t flags = 9;
    CHECK(intact_setstream(fd, intact_stream_id(name), INTACT_FSYNC_AS_OSYNC) == 0 && intact_getstream(fd, NULL, &flags) == 0 && flags == INTACT_FSYNC_AS_OSYNC, "FSYNC_AS_OSYNC is a stream flag (%u)", flags);
    errno = 0;
    r = intact_setstream(fd, intact_stream_id(name), INTACT_FSYNC_AS_OSYNC | INTACT_IGNORE_FSYNC);
    e = errno;
    CHECK(r == -1 && e == EINVAL, "FSYNC_AS_OSYNC with IGNORE_FSYNC: r=%d errno=%s (want -1, EINVAL)", r, strerror(e));
    close(fd);
    return failures ? 1 : 0;
}

static int cmd_write(const char *file, const char *name, uint64_t n, const char *sync, int ignore) {
    /* The stream is set through the file's directory. */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (intact_setstream_path(dir, name, ignore ? INTACT_IGNORE_FSYNC : 0) < 0)
        return die("intact_setstream_path");
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return die(file);
    unsigned char buf[65536];
    for (uint64_t off = 0; off < n;) {
        size_t k = n - off < sizeof buf ? (size_t)(n - off) : sizeof buf;
        for (size_t i = 0; i < k; i++)
            buf[i] = pattern_byte(off + i);
        ssize_t w = write(fd, buf, k);
        if (w <= 0)
            return die("write");
        off += (uint64_t)w;
    }
    if (strcmp(sync, "fsync") == 0) {
        if (fsync(fd) < 0)
            return die("fsync");
    } else if (strcmp(sync, "streamsync") == 0) {
        if (intact_streamsync(fd) < 0)
            return die("intact_streamsync");
    } else if (strcmp(sync, "osync") == 0) {
        if (intact_osync(fd) < 0)
            return die("intact_osync");
    } else if (strcmp(sync, "dsync") == 0) {
        if (intact_dsync(fd) < 0)
            return die("intact_dsync");
    } else if (strcmp(sync, "none") != 0) {
        fprintf(stderr, "t_intact: sync must be none, fsync, streamsync, osync or dsync\n");
        return 2;
    }
    if (close(fd) < 0)
        return die("close");
    return 0;
}

/* ---- atomic regions ------------------------------------------------------------------ */

/* `dir`/`name` into `buf` (4096 bytes). */
static const char *at(char *buf, const char *dir, const char *name) {
    snprintf(buf, 4096, "%s/%s", dir, name);
    return buf;
}

/* Replaces `path`'s contents with the string `text`, fsynced if `sync`: 0, or -1 with
 * errno. */
static int put(const char *path, const char *text, int sync) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    size_t len = strlen(text);
    ssize_t w = write(fd, text, len);
    int r = w == (ssize_t)len && (!sync || fsync(fd) == 0) ? 0 : -1;
    int e = w >= 0 && w != (ssize_t)len ? EIO : errno;
    if (close(fd) < 0 && r == 0)
        return -1;
    errno = e;
    return r;
}

/* The contents of the text file `path` (at most 255 bytes) in `buf` (256 bytes), through
 * a fresh open; "<absent>" if it does not exist, "<error ...>" if it cannot be read. */
static const char *contents(const char *path, char *buf) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(buf, 256, errno == ENOENT ? "<absent>" : "<error %s>", strerror(errno));
        return buf;
    }
    ssize_t n = read(fd, buf, 255);
    if (n < 0)
        snprintf(buf, 256, "<error %s>", strerror(errno));
    else
        buf[n] = '\0';
    close(fd);
    return buf;
}

static int is(const char *path, const char *want) {
    char buf[256];
    return strcmp(contents(path, buf), want) == 0;
}

/* What descriptor `fd` reads from offset 0 (at most 255 bytes) in `buf` (256 bytes). */
static const char *pread_text(int fd, char *buf) {
    ssize_t n = pread(fd, buf, 255, 0);
    if (n < 0)
        snprintf(buf, 256, "<error %s>", strerror(errno));
    else
        buf[n] = '\0';
    return buf;
}

/* A call that must fail: -1 with errno `want`; shows `msg`'s text for the errno
 * (intact_region_strerror for the region calls, intact_strerror for the others). */
static void expect_fail(int r, int e, int want, const char *want_name, const char *what, const char *(*msg)(int)) {
    CHECK(r == -1 && e == want, "%s: r=%d errno=%s (want -1, %s): \"%s\"", what, r, strerror(e), want_name, msg(e));
}

/* Runs CALL with errno cleared and checks that it failed with errno WANT; MSG names the
 * errno in the failure message. */
#define EXPECT_FAIL(call, want, what, msg)                  \
    do {                                                     \
        errno = 0;                                           \
        int r_ = (call);                                     \
        int e_ = errno;                                      \
        expect_fail(r_, e_, want, #want, what, msg);         \
    } while (0)

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* After a check of what fresh opens see right after a call failed: whether, and when,
 * they see `want` ({path, contents, ..., NULL}) within 3 s, to tell caches dropped late
 * from a wrong result. "" if `ok`. */
static const char *late(int ok, const char *const *want) {
    static char msg[200];
    char buf[256];
    if (ok)
        return "";
    long t0 = now_ms();
    do {
        int all = 1;
        for (const char *const *w = want; *w; w += 2)
            all = all && strcmp(contents(w[0], buf), w[1]) == 0;
        if (all) {
            snprintf(msg, sizeof msg, " (seen %ld ms later: the kernel's cached pages and entries were dropped only after the call returned)", now_ms() - t0);
            return msg;
        }
        sleep_ms(1);
    } while (now_ms() - t0 < 3000);
    return " (not even 3 s later)";
}

/* The errors of the region calls and their messages, without and in a region; `other` is
 * another intactfs mount, `off` a directory off intactfs. */
static int regions_errors(const char *mnt, const char *other, const char *off) {
    char pa[4096], po[4096];
    int dfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return die(mnt);
    at(pa, mnt, "ra-a");
    if (put(pa, "old-a", 1) < 0)
        return die(pa);
    int fa = open(pa, O_RDONLY | O_CLOEXEC);
    if (fa < 0)
        return die(pa);

    /* Without a region. */
    EXPECT_FAIL(intact_commit(dfd), EINVAL, "commit without a region", intact_region_strerror);
    CHECK(strcmp(intact_region_strerror(EINVAL), "no atomic region is open") == 0, "intact_region_strerror(EINVAL) = \"%s\"", intact_region_strerror(EINVAL));
    EXPECT_FAIL(intact_abort(dfd), EINVAL, "abort without a region", intact_region_strerror);
    EXPECT_FAIL(intact_add(fa), EXDEV, "add without a region", intact_region_strerror);

    /* In a region: nesting, setstream, add on a directory, on another mount's file, F2FS. */
    CHECK(intact_begin(dfd) == 0, "begin on the mount's root");
    EXPECT_FAIL(intact_begin(fa), EALREADY, "a nested begin", intact_region_strerror);
    const char *nested = "an atomic region is already open (regions do not nest)";
    CHECK(strcmp(intact_region_strerror(EALREADY), nested) == 0 && strcmp(intact_strerror(EALREADY), nested) == 0,
          "intact_region_strerror(EALREADY) = intact_strerror(EALREADY) = \"%s\"", intact_strerror(EALREADY));
    EXPECT_FAIL(intact_setstream(dfd, 0x1234, 0), EBUSY, "setstream inside a region", intact_strerror);
    EXPECT_FAIL(intact_add(dfd), EINVAL, "add on a directory", intact_strerror);
    at(po, other, "ra-other");
    if (put(po, "other", 0) < 0)
        return die(po);
    int fo = open(po, O_RDONLY | O_CLOEXEC);
    if (fo < 0)
        return die(po);
    EXPECT_FAIL(intact_add(fo), EXDEV, "add on a file of another intactfs mount", intact_region_strerror);
    const char *xdev = "no atomic region of this process on that file's mount";
    CHECK(strcmp(intact_region_strerror(EXDEV), xdev) == 0 && strcmp(intact_strerror(EXDEV), xdev) == 0,
          "intact_region_strerror(EXDEV) = intact_strerror(EXDEV) = \"%s\"", intact_strerror(EXDEV));
    close(fo);
    EXPECT_FAIL(intact_add(fa), EBADF, "add through a read-only descriptor", intact_region_strerror);
    int fw = open(pa, O_RDWR | O_CLOEXEC);
    if (fw < 0)
        return die(pa);
    CHECK(intact_add(fw) == 0, "add on a regular file of the mount (open for writing)");
    EXPECT_FAIL(ioctl(fw, INTACT_F2FS_IOC_START_ATOMIC_WRITE, 0) < 0 ? -1 : 0, EBUSY, "F2FS START_ATOMIC_WRITE inside a BEGIN region", intact_strerror);
    close(fw);
    CHECK(intact_abort(dfd) == 0, "abort");
    EXPECT_FAIL(intact_abort(dfd), EINVAL, "a second abort (the region ended)", intact_region_strerror);
    close(fa);

    /* Off intactfs: ENOTTY. */
    char pn[4096];
    at(pn, off, "ra-off");
    if (put(pn, "off", 0) < 0)
        return die(pn);
    int fn = open(pn, O_RDONLY | O_CLOEXEC);
    if (fn < 0)
        return die(pn);
    EXPECT_FAIL(intact_begin(fn), ENOTTY, "begin on a file off intactfs", intact_region_strerror);
    EXPECT_FAIL(intact_add(fn), ENOTTY, "add on a file off intactfs", intact_region_strerror);
    CHECK(strcmp(intact_region_strerror(ENOTTY), "not on an intactfs mount") == 0 && strcmp(intact_strerror(ENOTTY), "not on an intactfs mount") == 0,
          "intact_region_strerror(ENOTTY) = \"%s\"", intact_region_strerror(ENOTTY));
    CHECK(strcmp(intact_region_strerror(EBUSY), "the file belongs to another atomic region") == 0, "intact_region_strerror(EBUSY) = \"%s\"", intact_region_strerror(EBUSY));
    CHECK(strcmp(intact_region_strerror(EIO), strerror(EIO)) == 0 && strcmp(intact_strerror(EINVAL), strerror(EINVAL)) == 0,
          "other values get strerror's text; intact_strerror(EINVAL) = \"%s\"", intact_strerror(EINVAL));
    close(fn);
    unlink(pn);
    close(dfd);
    return failures ? 1 : 0;
}

/* Abort: writes revert, a created file vanishes, a rename is undone; fresh opens see it at
 * once. */
static int regions_abort(const char *mnt) {
    char pa[4096], pb[4096], pc[4096], pd[4096], pd2[4096];
    int dfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return die(mnt);
    at(pa, mnt, "ra-a");
    at(pb, mnt, "ra-b");
    at(pc, mnt, "ra-c");
    at(pd, mnt, "ra-d");
    at(pd2, mnt, "ra-d2");
    if (put(pa, "old-a", 1) < 0 || put(pb, "old-b", 1) < 0 || put(pd, "old-d", 1) < 0)
        return die("writing ra-a, ra-b, ra-d");
    unlink(pc);
    unlink(pd2);
    CHECK(intact_begin(dfd) == 0, "begin");
    int r = put(pa, "new-a, longer", 0);
    r |= put(pb, "new-b", 0);
    r |= put(pc, "created", 0);
    r |= rename(pd, pd2);
    CHECK(r == 0, "in the region: write a and b, create c, rename d to d2 (%s)", r == 0 ? "done" : strerror(errno));
    CHECK(is(pa, "new-a, longer") && is(pc, "created") && is(pd2, "old-d") && is(pd, "<absent>"), "no isolation: the region's changes are visible at once");
    CHECK(intact_abort(dfd) == 0, "abort");
    /* What fresh opens see right after ABORT returned, then compared. */
    char sa[256], sb[256], sc[256], sd[256], sd2[256];
    contents(pa, sa);
    contents(pb, sb);
    contents(pc, sc);
    contents(pd, sd);
    contents(pd2, sd2);
    const char *want[] = {pa, "old-a", pb, "old-b", pc, "<absent>", pd, "old-d", pd2, "<absent>", NULL};
    int ok = strcmp(sa, "old-a") == 0 && strcmp(sb, "old-b") == 0;
    CHECK(ok, "right after abort, fresh opens read the old a and b (\"%s\", \"%s\")%s", sa, sb, late(ok, want));
    ok = strcmp(sc, "<absent>") == 0;
    CHECK(ok, "the created c is gone (%s)%s", sc, late(ok, want));
    ok = strcmp(sd, "old-d") == 0 && strcmp(sd2, "<absent>") == 0;
    CHECK(ok, "the rename is undone: d is \"%s\", d2 is %s%s", sd, sd2, late(ok, want));
    close(dfd);
    return failures ? 1 : 0;
}

/* Abort seen through a descriptor opened before the region (whose pages the kernel
 * cached, in the region too). */
static int regions_cache(const char *mnt) {
    char pa[4096], buf[256], buf2[256];
    int dfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return die(mnt);
    at(pa, mnt, "rc-a");
    if (put(pa, "old-a", 1) < 0)
        return die(pa);
    int pre = open(pa, O_RDONLY | O_CLOEXEC);
    if (pre < 0)
        return die(pa);
    CHECK(strcmp(pread_text(pre, buf), "old-a") == 0, "a descriptor opened before the region reads \"%s\"", buf);
    CHECK(intact_begin(dfd) == 0, "begin");
    CHECK(put(pa, "new-a, longer", 0) == 0, "in the region: write a");
    CHECK(strcmp(pread_text(pre, buf), "new-a, longer") == 0, "no isolation: the old descriptor reads the region's \"%s\"", buf);
    CHECK(intact_abort(dfd) == 0, "abort");
    pread_text(pre, buf);
    int stale = strcmp(buf, "old-a") != 0;
    char late[160] = "";
    if (stale) {
        long t0 = now_ms(), t = -1;
        while (now_ms() - t0 < 3000) {
            if (strcmp(pread_text(pre, buf2), "old-a") == 0) {
                t = now_ms() - t0;
                break;
            }
            sleep_ms(1);
        }
        snprintf(late, sizeof late, " (it reads \"old-a\" %ld ms later: ABORT returned before the kernel's cached pages were dropped)", t);
    }
    CHECK(!stale, "right after abort, the descriptor opened before the region reads \"%s\" (want \"old-a\")%s", buf, late);
    close(pre);
    close(dfd);
    return failures ? 1 : 0;
}

/* A forked child is in the parent's region; the parent's abort undoes its changes. */
static int regions_fork(const char *mnt) {
    char buf[256], buf2[256];
    int dfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return die(mnt);
    char pe[4096], pf[4096];
    at(pe, mnt, "ri-e");
    at(pf, mnt, "ri-f");
    if (put(pe, "old-e", 1) < 0)
        return die(pe);
    CHECK(intact_begin(dfd) == 0, "begin");
    fflush(stdout);
    pid_t c = fork();
    if (c < 0)
        return die("fork");
    if (c == 0) {
        int cd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        errno = 0;
        int nest = cd >= 0 && intact_begin(cd) == -1 && errno == EALREADY;
        _exit(nest && put(pe, "child-e", 0) == 0 && put(pf, "child-f", 0) == 0 ? 0 : 1);
    }
    CHECK(wait_ok(c), "a forked child is in the parent's region (its begin fails with EALREADY), writes e and creates f");
    CHECK(is(pe, "child-e") && is(pf, "child-f"), "the child's changes are visible");
    CHECK(intact_abort(dfd) == 0, "the parent aborts");
    contents(pe, buf);
    contents(pf, buf2);
    const char *want[] = {pe, "old-e", pf, "<absent>", NULL};
    int ok = strcmp(buf, "old-e") == 0 && strcmp(buf2, "<absent>") == 0;
    CHECK(ok, "right after it, the parent's abort undid the child's changes: e \"%s\", f %s%s", buf, buf2, late(ok, want));
    close(dfd);
    return failures ? 1 : 0;
}

/* A process that exits inside its region: the daemon aborts it. */
static int regions_exit(const char *mnt) {
    char buf[256], buf2[256];
    char pg[4096], ph[4096];
    at(pg, mnt, "rx-g");
    at(ph, mnt, "rx-h");
    if (put(pg, "old-g", 1) < 0)
        return die(pg);
    fflush(stdout);
    pid_t c = fork();
    if (c < 0)
        return die("fork");
    if (c == 0) {
        int cd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int ok = cd >= 0 && intact_begin(cd) == 0 && put(pg, "exit-g", 0) == 0 && put(ph, "exit-h", 0) == 0 && is(pg, "exit-g") && is(ph, "exit-h");
        _exit(ok ? 0 : 1); /* no commit */
    }
    CHECK(wait_ok(c), "a child begins a region, writes g, creates h and exits without commit");
    long t0 = now_ms(), waited = -1;
    while (now_ms() - t0 < 3000) {
        if (is(pg, "old-g") && is(ph, "<absent>")) {
            waited = now_ms() - t0;
            break;
        }
        sleep_ms(20);
    }
    CHECK(waited >= 0, "the daemon aborted the exited process's region within 3 s (%ld ms): g \"%s\", h %s", waited, contents(pg, buf), contents(ph, buf2));
    return failures ? 1 : 0;
}

/* Dependents join a region; two regions on one file: EBUSY. */
static int regions_dependents(const char *mnt) {
    char buf[256], buf2[256];
    int r;
    int dfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return die(mnt);
    char pj[4096], pk[4096];
    at(pj, mnt, "rd-j");
    at(pk, mnt, "rd-k");
    if (put(pj, "old-j", 1) < 0 || put(pk, "old-k", 1) < 0)
        return die("writing rd-j, rd-k");
    int up[2], down[2];
    if (pipe(up) < 0 || pipe(down) < 0)
        return die("pipe");
    fflush(stdout);
    pid_t c = fork();
    if (c < 0)
        return die("fork");
    if (c == 0) {
        int cd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int ck = open(pk, O_RDWR | O_CLOEXEC);
        int ok = cd >= 0 && ck >= 0 && intact_begin(cd) == 0 && intact_add(ck) == 0 && put(pj, "region-j", 0) == 0;
        char x = ok ? 'y' : 'n';
        if (write(up[1], &x, 1) != 1 || read(down[0], &x, 1) != 1)
            _exit(1);
        _exit(intact_abort(cd) == 0 ? 0 : 1);
    }
    char x = 0;
    CHECK(read(up[0], &x, 1) == 1 && x == 'y', "another process begins a region, adds k and writes j");
    int fj = open(pj, O_WRONLY | O_APPEND | O_CLOEXEC);
    r = fj >= 0 && write(fj, "+dep", 4) == 4 ? 0 : -1;
    if (fj >= 0 && close(fj) < 0)
        r = -1;
    CHECK(r == 0 && is(pj, "region-j+dep"), "this process (in no region) appends to j, which the region wrote: \"%s\"", contents(pj, buf));
    CHECK(intact_begin(dfd) == 0, "begin a region of this process");
    int fk = open(pk, O_RDWR | O_CLOEXEC);
    EXPECT_FAIL(fk >= 0 ? intact_add(fk) : -1, EBUSY, "add of a file in another region", intact_region_strerror);
    if (fk >= 0)
        close(fk);
    CHECK(intact_abort(dfd) == 0, "abort this process's region");
    x = 'g';
    if (write(down[1], &x, 1) != 1)
        return die("write to the child");
    CHECK(wait_ok(c), "the other process aborts its region");
    CHECK(is(pj, "old-j") && is(pk, "old-k"), "the dependent append went with the region it joined: j \"%s\", k \"%s\"", contents(pj, buf), contents(pk, buf2));
    close(up[0]);
    close(up[1]);
    close(down[0]);
    close(down[1]);
    close(dfd);
    return failures ? 1 : 0;
}

/* F2FS atomic writes. */
static int regions_f2fs(const char *mnt) {
    char buf[256];
    int r, e;
    int dfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return die(mnt);
    char pq[4096];
    at(pq, mnt, "rf-q");
    if (put(pq, "old-q", 1) < 0)
        return die(pq);
    int fq = open(pq, O_RDWR | O_CLOEXEC);
    if (fq < 0)
        return die(pq);
    uint32_t feat = 0;
    r = ioctl(fq, INTACT_F2FS_IOC_GET_FEATURES, &feat);
    CHECK(r == 0 && (feat & INTACT_F2FS_FEATURE_ATOMIC_WRITE), "F2FS GET_FEATURES: r=%d features=0x%x (want bit 0x4)", r, feat);
    r = ioctl(fq, INTACT_F2FS_IOC_START_ATOMIC_WRITE, 0);
    r |= pwrite(fq, "NEW", 3, 0) == 3 ? 0 : -1;
    r |= ioctl(fq, INTACT_F2FS_IOC_ABORT_VOLATILE_WRITE, 0);
    const char *want_old[] = {pq, "old-q", NULL};
    int ok = strcmp(contents(pq, buf), "old-q") == 0;
    CHECK(r == 0 && ok, "F2FS START, write, ABORT_VOLATILE: reverted (\"%s\")%s", buf, late(ok, want_old));
    r = ioctl(fq, INTACT_F2FS_IOC_START_ATOMIC_WRITE, 0);
    r |= pwrite(fq, "F2F", 3, 0) == 3 ? 0 : -1;
    r |= ioctl(fq, INTACT_F2FS_IOC_COMMIT_ATOMIC_WRITE, 0);
    CHECK(r == 0 && is(pq, "F2F-q"), "F2FS START, write, COMMIT: kept (\"%s\")", contents(pq, buf));
    r = ioctl(fq, INTACT_F2FS_IOC_START_ATOMIC_WRITE, 0);
    r |= pwrite(fq, "ZZZ", 3, 0) == 3 ? 0 : -1;
    r |= close(fq);
    const char *want_kept[] = {pq, "F2F-q", NULL};
    ok = strcmp(contents(pq, buf), "F2F-q") == 0;
    CHECK(r == 0 && ok, "F2FS START, write, close without COMMIT: reverted (\"%s\")%s", buf, late(ok, want_kept));
    errno = 0;
    r = ioctl(dfd, INTACT_F2FS_IOC_START_ATOMIC_WRITE, 0) < 0 ? -1 : 0;
    e = errno;
    CHECK(r == -1 && e == EINVAL, "F2FS START on a directory: r=%d errno=%s (want -1, EINVAL)", r, strerror(e));
    /* A read-only descriptor cannot start one: its close sends no FUSE_FLUSH to abort at. */
    int fr = open(pq, O_RDONLY | O_CLOEXEC);
    errno = 0;
    r = fr >= 0 && ioctl(fr, INTACT_F2FS_IOC_START_ATOMIC_WRITE, 0) < 0 ? -1 : 0;
    e = errno;
    CHECK(r == -1 && e == EBADF, "F2FS START through a read-only descriptor: r=%d errno=%s (want -1, EBADF)", r, strerror(e));
    if (fr >= 0)
        close(fr);
    close(dfd);
    return failures ? 1 : 0;
}

/* Writes `n` bytes of the pattern XOR `x` to `fd` from offset 0 (after truncating). */
static int write_pattern(int fd, uint64_t n, unsigned char x) {
    unsigned char buf[65536];
    if (ftruncate(fd, 0) < 0)
        return -1;
    for (uint64_t off = 0; off < n;) {
        size_t k = n - off < sizeof buf ? (size_t)(n - off) : sizeof buf;
        for (size_t i = 0; i < k; i++)
            buf[i] = pattern_byte(off + i) ^ x;
        ssize_t w = pwrite(fd, buf, k, (off_t)off);
        if (w <= 0)
            return -1;
        off += (uint64_t)w;
    }
    return 0;
}

/* Whether `path` holds exactly `n` bytes of the pattern XOR `x`. */
static int holds_pattern(const char *path, uint64_t n, unsigned char x) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    unsigned char buf[65536];
    uint64_t off = 0;
    int ok = 1;
    for (;;) {
        ssize_t k = read(fd, buf, sizeof buf);
        if (k < 0)
            ok = 0;
        if (k <= 0)
            break;
        for (ssize_t i = 0; i < k && ok; i++)
            ok = off + (uint64_t)i < n && buf[i] == (pattern_byte(off + (uint64_t)i) ^ x);
        off += (uint64_t)k;
    }
    close(fd);
    return ok && off == n;
}

/* The crash sections' region: see the comment at the top. */
static int cmd_region(const char *a, const char *b, const char *mode, const char *ready) {
    int hold = strcmp(mode, "hold") == 0;
    if ((!hold && strcmp(mode, "commit") != 0) || (hold && ready == NULL)) {
        fprintf(stderr, "t_intact: region A B commit|hold READY\n");
        return 2;
    }
    int fa = open(a, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int fb = open(b, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fa < 0 || fb < 0)
        return die("open");
    if (write_pattern(fa, REGION_OLD, 0) < 0 || write_pattern(fb, REGION_OLD, 0) < 0 || fsync(fa) < 0 || fsync(fb) < 0)
        return die("writing the old contents");
    CHECK(intact_begin(fa) == 0, "begin");
    int r = write_pattern(fa, REGION_NEW, REGION_XOR) | write_pattern(fb, REGION_NEW, REGION_XOR);
    CHECK(r == 0, "in the region: new contents of %s and %s", a, b);
    if (hold) {
        long t0 = now_ms();
        r = fsync(fa) | fdatasync(fb) | intact_dsync(fa) | intact_osync(fb) | intact_streamsync(fa);
        CHECK(r == 0, "fsync, fdatasync, dsync, osync and streamsync inside the region return 0 (in %ld ms)", now_ms() - t0);
    }
    CHECK(holds_pattern(a, REGION_NEW, REGION_XOR) && holds_pattern(b, REGION_NEW, REGION_XOR), "both files show their new contents");
    if (!hold) {
        CHECK(intact_commit(fa) == 0, "commit");
        CHECK(holds_pattern(a, REGION_NEW, REGION_XOR) && holds_pattern(b, REGION_NEW, REGION_XOR), "after commit both files show their new contents");
        EXPECT_FAIL(intact_commit(fa), EINVAL, "a second commit", intact_region_strerror);
        close(fa);
        close(fb);
        return failures ? 1 : 0;
    }
    /* Nothing of this process stays open on the mount: the crash removes it. */
    close(fa);
    close(fb);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", ready);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return die(tmp);
    fprintf(f, "%s\n", failures ? "failed" : "ready");
    if (fclose(f) != 0 || rename(tmp, ready) < 0)
        return die(ready);
    fflush(stdout);
    for (int i = 0; i < 600; i++) /* the test kills it; a minute at most */
        sleep_ms(100);
    return 1;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "abi") == 0)
        return cmd_abi();
    if (argc == 3 && strcmp(argv[1], "id") == 0) {
        printf("0x%016" PRIx64 "\n", intact_stream_id(argv[2]));
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "get") == 0)
        return cmd_get(argv[2]);
    if (argc == 3 && strcmp(argv[1], "basic") == 0)
        return cmd_basic(argv[2]);
    if (argc == 4 && strcmp(argv[1], "fork") == 0)
        return cmd_fork(argv[2], argv[3]);
    if (argc == 3 && strcmp(argv[1], "notty") == 0)
        return cmd_notty(argv[2]);
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "pattern") == 0)
        return cmd_pattern(strtoull(argv[2], NULL, 10), argc == 4 ? (unsigned char)strtoul(argv[3], NULL, 0) : 0);
    if (argc == 5 && strcmp(argv[1], "regions-errors") == 0)
        return regions_errors(argv[2], argv[3], argv[4]);
    if (argc == 3 && strncmp(argv[1], "regions-", 8) == 0) {
        static const struct {
            const char *name;
            int (*run)(const char *mnt);
        } parts[] = {{"abort", regions_abort}, {"cache", regions_cache}, {"fork", regions_fork}, {"exit", regions_exit}, {"dependents", regions_dependents}, {"f2fs", regions_f2fs}};
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
            if (strcmp(argv[1] + 8, parts[i].name) == 0)
                return parts[i].run(argv[2]);
    }
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "region") == 0)
        return cmd_region(argv[2], argv[3], argv[4], argc == 6 ? argv[5] : NULL);
    if (argc == 4 && strcmp(argv[1], "osync") == 0)
        return cmd_osync(argv[2], argv[3]);
    if ((argc == 6 || (argc == 7 && strcmp(argv[6], "ignore") == 0)) && strcmp(argv[1], "write") == 0)
        return cmd_write(argv[2], argv[3], strtoull(argv[4], NULL, 10), argv[5], argc == 7);
    fprintf(stderr, "usage: see the comment at the top of tests/t_intact.c\n");
    return 2;
}
