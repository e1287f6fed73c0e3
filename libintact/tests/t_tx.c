/* t_tx: libintact's AD-transaction calls against a real pmem mount; driven by
 * libintact/test_pmem.sh.
 *
 *   t_tx abi                         print the TX ioctl numbers (compared with control.rs)
 *   t_tx pattern BYTES [XOR]         write the test pattern to stdout
 *   t_tx legacy FILE BYTES [XOR]     create FILE with BYTES of the pattern, no transaction
 *   t_tx run A B commit|abort|exit|hold [READY]
 *                                    in one transaction over A and B (existing files),
 *                                    replace both with TX_NEW bytes of the pattern XOR
 *                                    TX_XOR; then commit, abort, exit without ending it, or
 *                                    write "ready" to READY and wait to be killed
 *   t_tx errors MNT OTHER BLOCK DIR  the errors and their messages: EINVAL (commit/abort of
 *                                    an unknown, committed or aborted id), EXDEV (a file of
 *                                    OTHER, a second pmem mount, and of BLOCK, a block
 *                                    intactfs mount), EOPNOTSUPP (BEGIN on BLOCK), ENOTTY
 *                                    (DIR, off intactfs), EBUSY (another transaction's file)
 *   t_tx nospace FILE BYTES          a transaction writing BYTES to FILE outgrows the log:
 *                                    ENOSPC; it stays abortable and FILE is unchanged
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TX_NEW 65536
#define TX_XOR 0x5a

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

static unsigned char pat(uint64_t i, unsigned char x) {
    return (unsigned char)((i * 7 + i / 251) ^ x);
}

static int fill(int fd, uint64_t n, unsigned char x) {
    unsigned char buf[8192];
    uint64_t done = 0;
    while (done < n) {
        size_t k = n - done < sizeof buf ? (size_t)(n - done) : sizeof buf;
        for (size_t i = 0; i < k; i++)
            buf[i] = pat(done + i, x);
        ssize_t w = pwrite(fd, buf, k, (off_t)done);
        if (w <= 0)
            return -1;
        done += (uint64_t)w;
    }
    return 0;
}

static int cmd_abi(void) {
    printf("TX_BEGIN 0x%08x\n", (unsigned)INTACT_IOC_TX_BEGIN);
    printf("TX_ADD 0x%08x\n", (unsigned)INTACT_IOC_TX_ADD);
    printf("TX_COMMIT 0x%08x\n", (unsigned)INTACT_IOC_TX_COMMIT);
    printf("TX_ABORT 0x%08x\n", (unsigned)INTACT_IOC_TX_ABORT);
    return 0;
}

static int cmd_pattern(uint64_t n, unsigned char x) {
    for (uint64_t i = 0; i < n; i++)
        putchar(pat(i, x));
    return 0;
}

static int cmd_legacy(const char *file, uint64_t n, unsigned char x) {
    int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || fill(fd, n, x) < 0) {
        perror(file);
        return 1;
    }
    /* A no-op on pmem (every call is durable), but must succeed. */
    CHECK(fsync(fd) == 0, "legacy: %s written (%" PRIu64 " bytes), fsync returns 0", file, n);
    close(fd);
    return failures ? 1 : 0;
}

static int cmd_run(const char *a, const char *b, const char *mode, const char *ready) {
    int fds[2] = {open(a, O_RDWR), open(b, O_RDWR)};
    if (fds[0] < 0 || fds[1] < 0) {
        perror("open");
        return 1;
    }
    int64_t tx = intact_tx_begin(fds, 2);
    CHECK(tx > 0, "intact_tx_begin({%s, %s}, 2) = %" PRId64 " (%s)", a, b, tx, tx < 0 ? intact_tx_strerror(errno) : "ok");
    if (tx <= 0)
        return 1;
    for (int i = 0; i < 2; i++) {
        CHECK(ftruncate(fds[i], 0) == 0 && fill(fds[i], TX_NEW, TX_XOR) == 0, "in the transaction: %s truncated and rewritten (%d bytes)", i ? b : a, TX_NEW);
        /* fsync is a no-op: it must not commit anything of the transaction. */
        CHECK(fsync(fds[i]) == 0, "fsync inside the transaction returns 0");
    }
    if (strcmp(mode, "commit") == 0) {
        CHECK(intact_tx_commit(tx, fds[0]) == 0, "intact_tx_commit (%s)", strerror(errno));
    } else if (strcmp(mode, "abort") == 0) {
        CHECK(intact_tx_abort(tx, fds[1]) == 0, "intact_tx_abort (%s)", strerror(errno));
        struct stat st;
        CHECK(stat(a, &st) == 0 && st.st_size != TX_NEW, "right after the abort %s is no longer %d bytes (%lld)", a, TX_NEW, (long long)st.st_size);
    } else if (strcmp(mode, "exit") == 0) {
        printf("exiting with transaction %" PRId64 " open\n", tx);
        fflush(stdout);
        _exit(failures ? 1 : 0);
    } else if (strcmp(mode, "hold") == 0) {
        FILE *r = fopen(ready, "w");
        if (r) {
            fputs("ready", r);
            fclose(r);
        }
        for (;;)
            pause();
    }
    close(fds[0]);
    close(fds[1]);
    return failures ? 1 : 0;
}

/* Expects `r` to be -1 with errno `want`. */
static void expect(int r, int want, const char *what) {
    int e = errno;
    CHECK(r == -1 && e == want, "%s: -1/%s (%s), got %d/%s", what, strerrorname_np(want), intact_tx_strerror(want), r, r == -1 ? strerrorname_np(e) : "-");
}

static int open_in(const char *dir, const char *name, char *path, size_t len) {
    snprintf(path, len, "%s/%s", dir, name);
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0)
        perror(path);
    return fd;
}

static int cmd_errors(const char *mnt, const char *other, const char *block, const char *off) {
    char p[4096];
    int fa = open_in(mnt, "te-a", p, sizeof p), fb = open_in(mnt, "te-b", p, sizeof p);
    int fo = open_in(other, "te-o", p, sizeof p), fk = open_in(block, "te-k", p, sizeof p);
    int fx = open_in(off, "te-x", p, sizeof p);
    if (fa < 0 || fb < 0 || fo < 0 || fk < 0 || fx < 0)
        return 1;

    int64_t tx = intact_tx_begin(&fa, 1);
    CHECK(tx > 0, "begin on te-a: id %" PRId64, tx);
    CHECK(intact_tx_commit(tx, fa) == 0, "commit of an empty transaction");
    expect(intact_tx_commit(tx, fa), EINVAL, "commit of a committed transaction");
    expect(intact_tx_abort(tx, fa), EINVAL, "abort of a committed transaction");
    tx = intact_tx_begin(&fa, 1);
    CHECK(intact_tx_abort(tx, fb) == 0, "abort (issued on another file of the mount)");
    expect(intact_tx_commit(tx, fa), EINVAL, "commit of an aborted transaction");
    expect(intact_tx_abort(tx, fa), EINVAL, "abort of an aborted transaction");
    expect(intact_tx_commit(tx + 1000, fa), EINVAL, "commit of an id never issued");
    expect(intact_tx_commit(12345, fa), EINVAL, "commit of an id of no mount");
    expect(intact_tx_add(tx, fb), EINVAL, "add to an aborted transaction");

    tx = intact_tx_begin(&fa, 1);
    expect(intact_tx_add(tx, fo), EXDEV, "add of a file on another pmem mount");
    expect(intact_tx_add(tx, fk), EXDEV, "add of a file on a block intactfs mount");
    expect(intact_tx_add(tx, fx), ENOTTY, "add of a file off intactfs");
    expect(intact_tx_commit(tx, fo), EINVAL, "commit issued on another mount (the id is not its)");
    /* BUSY: te-a is in tx; a second transaction cannot take it. */
    int64_t t2 = intact_tx_begin(&fa, 1);
    expect((int)t2, EBUSY, "begin on a file another transaction owns");
    t2 = intact_tx_begin(&fb, 1);
    CHECK(t2 > 0, "a second transaction on te-b");
    expect(intact_tx_add(t2, fa), EBUSY, "add of a file another transaction owns");
    CHECK(intact_tx_commit(t2, fb) == 0 && intact_tx_commit(tx, fa) == 0, "both commit");

    /* Who may call what: BEGIN and ADD need a descriptor open for writing. */
    snprintf(p, sizeof p, "%s/te-a", mnt);
    int fr = open(p, O_RDONLY | O_CLOEXEC);
    CHECK(fr >= 0, "open te-a read-only");
    expect((int)intact_tx_begin(&fr, 1), EBADF, "begin through a read-only descriptor");
    tx = intact_tx_begin(&fb, 1);
    expect(intact_tx_add(tx, fr), EBADF, "add through a read-only descriptor");
    CHECK(intact_tx_abort(tx, fb) == 0, "abort");
    close(fr);
    /* A transaction belongs to its process and the process's children. */
    tx = intact_tx_begin(&fb, 1);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0)
        _exit(intact_tx_commit(tx, fb) == 0 ? 0 : 1);
    int st = -1;
    CHECK(child > 0 && waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "a child commits its parent's transaction (exit status %d)", st);
    expect(intact_tx_commit(tx, fb), EINVAL, "the parent's commit after the child's");

    int pair[2] = {fa, fo};
    int64_t t3 = intact_tx_begin(pair, 2);
    expect((int)t3, EXDEV, "intact_tx_begin over files of two mounts");
    t3 = intact_tx_begin(&fa, 1);
    CHECK(t3 > 0, "te-a is free again: the failed begin aborted its transaction");
    CHECK(intact_tx_abort(t3, fa) == 0, "abort");
    expect((int)intact_tx_begin(&fk, 1), EOPNOTSUPP, "begin on a block intactfs mount");
    expect((int)intact_tx_begin(&fx, 1), ENOTTY, "begin off intactfs");
    expect((int)intact_tx_begin(NULL, 0), EINVAL, "begin of no file");
    CHECK(strcmp(intact_tx_strerror(EXDEV), "the transaction belongs to another mount") == 0 && strcmp(intact_tx_strerror(ENOTTY), "not on an intactfs mount") == 0,
          "intact_tx_strerror: EXDEV \"%s\", ENOTTY \"%s\"", intact_tx_strerror(EXDEV), intact_tx_strerror(ENOTTY));
    close(fa);
    close(fb);
    close(fo);
    close(fk);
    close(fx);
    return failures ? 1 : 0;
}

static int cmd_nospace(const char *file, uint64_t n) {
    int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(file);
        return 1;
    }
    int64_t tx = intact_tx_begin(&fd, 1);
    CHECK(tx > 0, "begin on %s", file);
    static unsigned char buf[128 << 10];
    memset(buf, 0x33, sizeof buf);
    uint64_t done = 0;
    int err = 0;
    while (done < n) {
        ssize_t w = pwrite(fd, buf, sizeof buf, (off_t)done);
        if (w < 0) {
            err = errno;
            break;
        }
        done += (uint64_t)w;
    }
    CHECK(err == ENOSPC, "a transaction writing %" PRIu64 " bytes fails with ENOSPC after %" PRIu64 " bytes (%s: %s)", n, done, err ? strerrorname_np(err) : "no error",
          intact_tx_strerror(err));
    CHECK(intact_tx_abort(tx, fd) == 0, "the transaction stays abortable (%s)", strerror(errno));
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_size == 0, "%s is empty again after the abort (%lld bytes)", file, (long long)st.st_size);
    /* The log is free again: a legacy write works. */
    CHECK(pwrite(fd, buf, 4096, 0) == 4096, "a legacy write after the abort works");
    close(fd);
    return failures ? 1 : 0;
}

int main(int argc, char **argv) {
    const char *cmd = argc > 1 ? argv[1] : "";
    if (strcmp(cmd, "abi") == 0)
        return cmd_abi();
    if (strcmp(cmd, "pattern") == 0 && argc >= 3)
        return cmd_pattern(strtoull(argv[2], NULL, 0), argc > 3 ? (unsigned char)strtoul(argv[3], NULL, 0) : 0);
    if (strcmp(cmd, "legacy") == 0 && argc >= 4)
        return cmd_legacy(argv[2], strtoull(argv[3], NULL, 0), argc > 4 ? (unsigned char)strtoul(argv[4], NULL, 0) : 0);
    if (strcmp(cmd, "run") == 0 && argc >= 5)
        return cmd_run(argv[2], argv[3], argv[4], argc > 5 ? argv[5] : "/dev/null");
    if (strcmp(cmd, "errors") == 0 && argc == 6)
        return cmd_errors(argv[2], argv[3], argv[4], argv[5]);
    if (strcmp(cmd, "nospace") == 0 && argc == 4)
        return cmd_nospace(argv[2], strtoull(argv[3], NULL, 0));
    fprintf(stderr, "usage: see the comment at the top of libintact/tests/t_tx.c\n");
    return 2;
}
