/*
 * actor: issues intactfs control calls through libintact, one step per argument, and
 * prints one line per step: the step and "ok" (with a value) or the errno's name. The
 * test control_perms.rs runs it as root and as `nobody` against the same mount and
 * checks the answers; it never judges them itself.
 *
 * Steps (the "current descriptor" is the last one opened, or the one `use:N` picks):
 *   open-ro:PATH open-rw:PATH use:N         open a file or directory; select descriptor N
 *   create:PATH                             create a 0644 file (O_EXCL), open for writing
 *   mkdir:PATH rename:FROM|TO               mkdir (0755); rename(2)
 *   write:TEXT                              pwrite TEXT at offset 0 (no fsync)
 *   begin add commit abort                  CFS atomic regions
 *   f2fs-start f2fs-commit f2fs-abort       F2FS atomic-write ioctls
 *   fsync                                   fsync the current descriptor
 *   tx-begin tx-add:ID tx-commit:ID tx-abort:ID   pmem AD-transactions: ID is decimal,
 *                                           $N for the id the Nth tx-begin returned,
 *                                           or "last" for the latest one
 *   wait                                    read a line from stdin (the test's go-ahead;
 *                                           no answer line)
 * The exit status is 0 unless an argument cannot be parsed (2).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "intact.h"

static const char *err_name(int e) {
    switch (e) {
    case EBADF: return "EBADF";
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case EINVAL: return "EINVAL";
    case EXDEV: return "EXDEV";
    case EBUSY: return "EBUSY";
    case EALREADY: return "EALREADY";
    case ENOTTY: return "ENOTTY";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case ESRCH: return "ESRCH";
    case EIO: return "EIO";
    default: return "E?";
    }
}

static void report(const char *step, int r) {
    if (r < 0)
        printf("%s %s\n", step, err_name(errno));
    else
        printf("%s ok\n", step);
    fflush(stdout);
}

static int fds[16];
static int nfds, cur = -1;

static int open_step(const char *path, int flags) {
    int fd = open(path, flags | O_CLOEXEC, 0644);
    if (fd >= 0 && nfds < 16) {
        fds[nfds] = fd;
        cur = nfds++;
    }
    return fd < 0 ? -1 : 0;
}

static int write_step(const char *text) {
    size_t n = strlen(text);
    return pwrite(fds[cur], text, n, 0) == (ssize_t)n ? 0 : -1;
}

static int64_t begun[16];
static int nbegun;
static int64_t last_begun;

static int ioctl_step(unsigned long cmd) {
    return ioctl(fds[cur], cmd, 0) < 0 ? -1 : 0;
}

static int tx_step(const char *what, const char *arg) {
    int64_t id = (int64_t)strtoull(arg, NULL, 10);
    if (!strcmp(arg, "last"))
        id = last_begun;
    if (arg[0] == '$') {
        int n = atoi(arg + 1);
        id = n >= 1 && n <= nbegun ? begun[n - 1] : 0;
    }
    if (!strcmp(what, "tx-add"))
        return intact_tx_add(id, fds[cur]);
    if (!strcmp(what, "tx-commit"))
        return intact_tx_commit(id, fds[cur]);
    return intact_tx_abort(id, fds[cur]);
}

/* One step; -2 if it is not understood. */
static int step(const char *s) {
    const char *colon = strchr(s, ':');
    const char *arg = colon ? colon + 1 : "";
    size_t len = colon ? (size_t)(colon - s) : strlen(s);
    char what[32];
    if (len >= sizeof what)
        return -2;
    memcpy(what, s, len);
    what[len] = 0;
    if (!strcmp(what, "open-ro")) return open_step(arg, O_RDONLY);
    if (!strcmp(what, "open-rw")) return open_step(arg, O_RDWR);
    if (!strcmp(what, "create")) return open_step(arg, O_RDWR | O_CREAT | O_EXCL);
    if (!strcmp(what, "mkdir")) return mkdir(arg, 0755);
    if (!strcmp(what, "rename")) {
        char from[4096];
        const char *bar = strchr(arg, '|');
        if (!bar || (size_t)(bar - arg) >= sizeof from) return -2;
        memcpy(from, arg, (size_t)(bar - arg));
        from[bar - arg] = 0;
        return rename(from, bar + 1);
    }
    if (!strcmp(what, "use")) { cur = atoi(arg); return cur < nfds ? 0 : -2; }
    if (cur < 0 && strcmp(what, "wait")) { errno = EBADF; return -1; }
    if (!strcmp(what, "write")) return write_step(arg);
    if (!strcmp(what, "fsync")) return fsync(fds[cur]);
    if (!strcmp(what, "begin")) return intact_begin(fds[cur]);
    if (!strcmp(what, "add")) return intact_add(fds[cur]);
    if (!strcmp(what, "commit")) return intact_commit(fds[cur]);
    if (!strcmp(what, "abort")) return intact_abort(fds[cur]);
    if (!strcmp(what, "f2fs-start")) return ioctl_step(INTACT_F2FS_IOC_START_ATOMIC_WRITE);
    if (!strcmp(what, "f2fs-commit")) return ioctl_step(INTACT_F2FS_IOC_COMMIT_ATOMIC_WRITE);
    if (!strcmp(what, "f2fs-abort")) return ioctl_step(INTACT_F2FS_IOC_ABORT_VOLATILE_WRITE);
    if (!strcmp(what, "tx-begin")) {
        int64_t id = intact_tx_begin(&fds[cur], 1);
        if (id < 0) return -1;
        if (nbegun < 16) begun[nbegun++] = id;
        last_begun = id;
        printf("%s ok %" PRId64 "\n", s, id);
        fflush(stdout);
        return 1; /* reported */
    }
    if (!strcmp(what, "tx-add") || !strcmp(what, "tx-commit") || !strcmp(what, "tx-abort"))
        return tx_step(what, arg);
    if (!strcmp(what, "wait")) {
        char line[64];
        (void)!fgets(line, sizeof line, stdin); /* EOF: the test gave up; go on */
        return 1;                               /* silent: the test knows it waited */
    }
    return -2;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        errno = 0;
        int r = step(argv[i]);
        if (r == -2) {
            fprintf(stderr, "actor: cannot parse step %s\n", argv[i]);
            return 2;
        }
        if (r != 1)
            report(argv[i], r);
    }
    return 0;
}
