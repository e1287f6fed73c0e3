/* t_intact: libintact's test program, driven by test.sh against a real mount.
 *
 *   t_intact abi                      print the ABI numbers (compared with control.rs)
 *   t_intact id NAME                  print intact_stream_id(NAME) in hex
 *   t_intact get PATH                 print "ID FLAGS" (hex, decimal) of this process
 *   t_intact basic MNT                getstream/setstream round trips, flags, EINVAL
 *   t_intact fork MNT NAME            children and grandchildren inherit the stream
 *   t_intact notty DIR                the calls fail with -1/ENOTTY off the mount
 *   t_intact pattern BYTES            write the test pattern to stdout
 *   t_intact write FILE NAME BYTES none|fsync|streamsync|osync|dsync [ignore]
 *                                     in stream NAME (IGNORE_FSYNC with "ignore"), create
 *                                     FILE with BYTES of the pattern, then sync as asked
 *   t_intact osync FILE NAME          osync tickets, DURABLE polling and waiting, dsync
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

static int cmd_abi(void) {
    printf("SETSTREAM 0x%08x\n", (unsigned)INTACT_IOC_SETSTREAM);
    printf("GETSTREAM 0x%08x\n", (unsigned)INTACT_IOC_GETSTREAM);
    printf("STREAMSYNC 0x%08x\n", (unsigned)INTACT_IOC_STREAMSYNC);
    printf("OSYNC 0x%08x\n", (unsigned)INTACT_IOC_OSYNC);
    printf("DSYNC 0x%08x\n", (unsigned)INTACT_IOC_DSYNC);
    printf("DURABLE 0x%08x\n", (unsigned)INTACT_IOC_DURABLE);
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

static int cmd_pattern(uint64_t n) {
    unsigned char buf[65536];
    for (uint64_t off = 0; off < n;) {
        size_t k = n - off < sizeof buf ? (size_t)(n - off) : sizeof buf;
        for (size_t i = 0; i < k; i++)
            buf[i] = pattern_byte(off + i);
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
    if (argc == 3 && strcmp(argv[1], "pattern") == 0)
        return cmd_pattern(strtoull(argv[2], NULL, 10));
    if (argc == 4 && strcmp(argv[1], "osync") == 0)
        return cmd_osync(argv[2], argv[3]);
    if ((argc == 6 || (argc == 7 && strcmp(argv[6], "ignore") == 0)) && strcmp(argv[1], "write") == 0)
        return cmd_write(argv[2], argv[3], strtoull(argv[4], NULL, 10), argv[5], argc == 7);
    fprintf(stderr, "usage: see the comment at the top of tests/t_intact.c\n");
    return 2;
}
