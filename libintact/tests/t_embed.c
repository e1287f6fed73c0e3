/* t_embed: embedded mode through the C ABI (intact_embed.h), driven by test_embed.sh.
 *
 *   t_embed IMG mkfs MIB     a fresh pmem image of MIB MiB
 *   t_embed IMG basic        files, errors and AD-transactions on a fresh image; exit 0 = ok
 *   t_embed IMG busy         the open must fail with EBUSY and a message (a mount or
 *                            another program holds IMG)
 *   t_embed IMG hold READY   open, write the old contents of h-a and h-b, begin a
 *                            transaction over both with new contents, create READY, sleep
 *                            (the test kills it with SIGKILL or mounts meanwhile)
 *   t_embed IMG after-hold   after the kill: h-a and h-b hold their old contents
 */
#define _GNU_SOURCE
#include "intact_embed.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fails;

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fails++;                                                        \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                     \
            printf(__VA_ARGS__);                                            \
            printf(" (errno %d: %s)\n", errno, intact_embed_errmsg());      \
        }                                                                   \
    } while (0)

static intact_embed *open_image(const char *img) {
    intact_embed *e = intact_embed_open(img, 0);
    if (!e) {
        printf("FAIL: opening %s: %s\n", img, intact_embed_errmsg());
        exit(1);
    }
    return e;
}

/* Writes `len` bytes of `c` to `path` (created or truncated), outside any transaction. */
static void put(intact_embed *e, const char *path, char c, size_t len) {
    char buf[8192];
    memset(buf, c, sizeof buf);
    int fd = intact_embed_open_file(e, path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0, "open %s", path);
    CHECK(intact_embed_pwrite(e, fd, buf, len, 0) == (int64_t)len, "write %s", path);
    CHECK(intact_embed_close_file(e, fd) == 0, "close %s", path);
}

/* The byte every one of `path`'s bytes is, '?' if they differ, '-' if absent or empty. */
static char get(intact_embed *e, const char *path) {
    char buf[8192];
    int fd = intact_embed_open_file(e, path, O_RDONLY, 0);
    if (fd < 0) return '-';
    int64_t n = intact_embed_pread(e, fd, buf, sizeof buf, 0);
    intact_embed_close_file(e, fd);
    if (n <= 0) return '-';
    for (int64_t i = 1; i < n; i++)
        if (buf[i] != buf[0]) return '?';
    return buf[0];
}

static int count_entry(void *arg, const char *name, uint64_t ino, uint32_t kind) {
    (void)ino;
    if (strcmp(name, "a2") == 0 && kind == INTACT_EMBED_FILE) ++*(int *)arg;
    return 0;
}

static void files(intact_embed *e) {
    put(e, "a", 'a', 5000);
    CHECK(get(e, "a") == 'a', "read back a");
    struct intact_embed_stat st;
    CHECK(intact_embed_stat(e, "/a", &st) == 0 && st.size == 5000 && st.kind == INTACT_EMBED_FILE, "stat a");
    CHECK(intact_embed_mkdir(e, "d", 0755) == 0, "mkdir d");
    CHECK(intact_embed_rename(e, "a", "d/a2") == 0, "rename a d/a2");
    CHECK(get(e, "d/a2") == 'a' && get(e, "a") == '-', "renamed");
    int n = 0;
    CHECK(intact_embed_readdir(e, "d", count_entry, &n) == 0 && n == 1, "readdir d: %d entries", n);
    CHECK(intact_embed_unlink(e, "d/a2") == 0 && intact_embed_rmdir(e, "d") == 0, "unlink, rmdir");
    errno = 0;
    CHECK(intact_embed_open_file(e, "none", O_RDONLY, 0) < 0 && errno == ENOENT, "ENOENT");
    CHECK(strstr(intact_embed_errmsg(), "none") != NULL, "the message names the path: %s", intact_embed_errmsg());
    put(e, "x", 'x', 10);
    CHECK(intact_embed_open_file(e, "x", O_RDWR | O_CREAT | O_EXCL, 0644) < 0 && errno == EEXIST, "EEXIST");
    CHECK(intact_embed_open_file(e, "x", O_RDWR | O_APPEND, 0) < 0 && errno == EINVAL, "O_APPEND refused");
    int ro = intact_embed_open_file(e, "x", O_RDONLY, 0);
    CHECK(intact_embed_pwrite(e, ro, "y", 1, 0) < 0 && errno == EBADF, "EBADF: write through a read-only descriptor");
    CHECK(intact_embed_tx_begin(e, &ro, 1) < 0 && errno == EBADF, "EBADF: tx_begin through a read-only descriptor");
    CHECK(intact_embed_close_file(e, ro) == 0 && intact_embed_close_file(e, ro) < 0 && errno == EBADF, "EBADF: closed twice");
}

/* Rewrites p and q with `c` inside one transaction, then commits or aborts it. */
static void tx_pair(intact_embed *e, const char *p, const char *q, char c, int commit) {
    int fds[2] = {intact_embed_open_file(e, p, O_RDWR, 0), intact_embed_open_file(e, q, O_RDWR, 0)};
    int64_t tx = intact_embed_tx_begin(e, fds, 2);
    CHECK(tx > 0, "tx_begin %s %s", p, q);
    char buf[6000];
    memset(buf, c, sizeof buf);
    for (int i = 0; i < 2; i++)
        CHECK(intact_embed_pwrite(e, fds[i], buf, sizeof buf, 0) == (int64_t)sizeof buf, "write in tx");
    CHECK(get(e, p) == c, "no isolation: the change shows before the commit");
    int other = intact_embed_open_file(e, "x", O_RDWR, 0);
    int both[2] = {other, fds[0]};
    CHECK(intact_embed_tx_begin(e, both, 2) < 0 && errno == EBUSY, "EBUSY: a file of another open transaction");
    CHECK(get(e, "x") == 'x', "the failed begin was aborted, x untouched");
    intact_embed_close_file(e, other);
    int r = commit ? intact_embed_tx_commit(e, tx) : intact_embed_tx_abort(e, tx);
    CHECK(r == 0, "%s", commit ? "commit" : "abort");
    CHECK(intact_embed_tx_commit(e, tx) < 0 && errno == EINVAL, "EINVAL: a finished transaction");
    for (int i = 0; i < 2; i++) intact_embed_close_file(e, fds[i]);
}

static int basic(const char *img) {
    intact_embed *e = open_image(img);
    CHECK(intact_embed_open(img, 0) == NULL && errno == EBUSY, "a second open in the same process: EBUSY");
    files(e);
    put(e, "p", 'o', 6000);
    put(e, "q", 'o', 6000);
    tx_pair(e, "p", "q", 'n', 1);
    CHECK(get(e, "p") == 'n' && get(e, "q") == 'n', "committed: both new");
    tx_pair(e, "p", "q", 'z', 0);
    CHECK(get(e, "p") == 'n' && get(e, "q") == 'n', "aborted: both as before");
    struct intact_embed_counters c;
    CHECK(intact_embed_counters(e, &c) == 0 && c.fences > 0 && c.bytes_stored > 0, "device counters");
    CHECK(intact_embed_close(e) == 0, "close");
    e = open_image(img);
    CHECK(get(e, "p") == 'n' && get(e, "q") == 'n' && get(e, "x") == 'x', "reopened: the commits are there");
    CHECK(intact_embed_close(e) == 0, "close again");
    printf("%s\n", fails ? "basic: FAILED" : "basic: ok");
    return fails != 0;
}

static int busy(const char *img) {
    errno = 0;
    intact_embed *e = intact_embed_open(img, 0);
    if (e || errno != EBUSY || !strstr(intact_embed_errmsg(), "in use")) {
        printf("FAIL: expected EBUSY and 'in use', got %s (errno %d: %s)\n", e ? "an open image" : "a failure",
               errno, intact_embed_errmsg());
        return 1;
    }
    printf("busy: %s\n", intact_embed_errmsg());
    return 0;
}

static int hold(const char *img, const char *ready) {
    intact_embed *e = open_image(img);
    put(e, "h-a", 'o', 6000);
    put(e, "h-b", 'o', 6000);
    int fds[2] = {intact_embed_open_file(e, "h-a", O_RDWR, 0), intact_embed_open_file(e, "h-b", O_RDWR, 0)};
    int64_t tx = intact_embed_tx_begin(e, fds, 2);
    char buf[6000];
    memset(buf, 'n', sizeof buf);
    CHECK(tx > 0, "tx_begin");
    for (int i = 0; i < 2; i++) CHECK(intact_embed_pwrite(e, fds[i], buf, sizeof buf, 0) == 6000, "write");
    FILE *f = fopen(ready, "w");
    if (!f || fails) return 1;
    fclose(f);
    for (;;) pause();
}

static int after_hold(const char *img) {
    intact_embed *e = open_image(img);
    char a = get(e, "h-a"), b = get(e, "h-b");
    intact_embed_close(e);
    if (a != 'o' || b != 'o') {
        printf("FAIL: the transaction open at the kill left h-a '%c', h-b '%c' (want o o)\n", a, b);
        return 1;
    }
    printf("after-hold: both files old\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: t_embed IMG mkfs MIB|basic|busy|hold READY|after-hold\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(argv[2], "mkfs") && argc == 4) {
        if (intact_embed_mkfs(argv[1], strtoull(argv[3], NULL, 10) << 20, 0) == 0) return 0;
        printf("FAIL: mkfs %s: %s\n", argv[1], intact_embed_errmsg());
        return 1;
    }
    if (!strcmp(argv[2], "basic")) return basic(argv[1]);
    if (!strcmp(argv[2], "busy")) return busy(argv[1]);
    if (!strcmp(argv[2], "hold") && argc == 4) return hold(argv[1], argv[3]);
    if (!strcmp(argv[2], "after-hold")) return after_hold(argv[1]);
    fprintf(stderr, "t_embed: unknown command %s\n", argv[2]);
    return 2;
}
