/* libintact: the intactfs stream and atomic-region control API over its ioctls (see
 * include/intact.h). */
#define _GNU_SOURCE
#include "intact.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int intact_setstream(int fd, uint64_t id, uint32_t flags) {
    struct intact_stream s;
    memset(&s, 0, sizeof s);
    s.id = id;
    s.flags = flags;
    return ioctl(fd, INTACT_IOC_SETSTREAM, &s) < 0 ? -1 : 0;
}

int intact_getstream(int fd, uint64_t *id, uint32_t *flags) {
    struct intact_stream s;
    memset(&s, 0, sizeof s);
    if (ioctl(fd, INTACT_IOC_GETSTREAM, &s) < 0)
        return -1;
    if (id)
        *id = s.id;
    if (flags)
        *flags = s.flags;
    return 0;
}

int intact_streamsync(int fd) {
    return ioctl(fd, INTACT_IOC_STREAMSYNC, 0) < 0 ? -1 : 0;
}

int intact_osync_ticket(int fd, uint64_t *ticket) {
    uint64_t t = 0;
    if (ioctl(fd, INTACT_IOC_OSYNC, &t) < 0)
        return -1;
    if (ticket)
        *ticket = t;
    return 0;
}

int intact_osync(int fd) {
    return intact_osync_ticket(fd, NULL);
}

int intact_dsync(int fd) {
    return ioctl(fd, INTACT_IOC_DSYNC, 0) < 0 ? -1 : 0;
}

int intact_durable(int fd, uint64_t ticket, int wait) {
    struct intact_durable d;
    memset(&d, 0, sizeof d);
    d.ticket = ticket;
    d.flags = wait ? INTACT_DURABLE_WAIT : 0;
    if (ioctl(fd, INTACT_IOC_DURABLE, &d) < 0)
        return -1;
    return d.ticket >= ticket ? 1 : 0;
}

int intact_begin(int fd) {
    return ioctl(fd, INTACT_IOC_BEGIN, 0) < 0 ? -1 : 0;
}

int intact_commit(int fd) {
    return ioctl(fd, INTACT_IOC_COMMIT, 0) < 0 ? -1 : 0;
}

int intact_abort(int fd) {
    return ioctl(fd, INTACT_IOC_ABORT, 0) < 0 ? -1 : 0;
}

int intact_add(int fd) {
    return ioctl(fd, INTACT_IOC_ADD, 0) < 0 ? -1 : 0;
}

#define MSG_NOTTY "not on an intactfs mount"
#define MSG_NESTED "an atomic region is already open (regions do not nest)"
#define MSG_NO_REGION "no atomic region is open"
#define MSG_OTHER_MOUNT "no atomic region of this process on that file's mount"
#define MSG_OTHER_REGION "the file belongs to another atomic region"

/* EALREADY and EXDEV come only from BEGIN and ADD among intactfs's ioctls; EINVAL and
 * EBUSY mean other things for the stream calls (see intact_region_strerror). */
const char *intact_strerror(int errnum) {
    switch (errnum) {
    case ENOTTY:
        return MSG_NOTTY;
    case EALREADY:
        return MSG_NESTED;
    case EXDEV:
        return MSG_OTHER_MOUNT;
    default:
        return strerror(errnum);
    }
}

const char *intact_region_strerror(int errnum) {
    switch (errnum) {
    case EINVAL:
        return MSG_NO_REGION;
    case EBUSY:
        return MSG_OTHER_REGION;
    case EBADF:
        return "not a descriptor open for writing (ADD needs one)";
    case EPERM:
        return "the atomic region belongs to another process";
    default:
        return intact_strerror(errnum);
    }
}

int64_t intact_tx_begin(const int *fds, int n) {
    if (fds == NULL || n < 1) {
        errno = EINVAL;
        return -1;
    }
    uint64_t id = 0;
    if (ioctl(fds[0], INTACT_IOC_TX_BEGIN, &id) < 0)
        return -1;
    for (int i = 1; i < n; i++) {
        if (intact_tx_add((int64_t)id, fds[i]) < 0) {
            int saved = errno;
            intact_tx_abort((int64_t)id, fds[0]);
            errno = saved;
            return -1;
        }
    }
    return (int64_t)id;
}

int intact_tx_add(int64_t tx, int fd) {
    uint64_t id = (uint64_t)tx;
    return ioctl(fd, INTACT_IOC_TX_ADD, &id) < 0 ? -1 : 0;
}

int intact_tx_commit(int64_t tx, int fd) {
    uint64_t id = (uint64_t)tx;
    return ioctl(fd, INTACT_IOC_TX_COMMIT, &id) < 0 ? -1 : 0;
}

int intact_tx_abort(int64_t tx, int fd) {
    uint64_t id = (uint64_t)tx;
    return ioctl(fd, INTACT_IOC_TX_ABORT, &id) < 0 ? -1 : 0;
}

const char *intact_tx_strerror(int errnum) {
    switch (errnum) {
    case EINVAL:
        return "unknown, committed or aborted transaction";
    case EXDEV:
        return "the transaction belongs to another mount";
    case EBUSY:
        return "the file belongs to another open transaction";
    case EBADF:
        return "not a descriptor open for writing (TX_BEGIN and TX_ADD need one)";
    case EACCES:
        return "no permission to write the directory";
    case EPERM:
        return "the transaction belongs to another process (only it and its children may add to, commit or abort it)";
    case ENOSPC:
        return "the transaction does not fit in the log or the free space (see the daemon's log)";
    case EOPNOTSUPP:
        return "not a persistent-memory mount (transactions need an image made with --device pmem)";
    case ENOTTY:
        return MSG_NOTTY;
    default:
        return strerror(errnum);
    }
}

uint64_t intact_stream_id(const char *name) {
    if (name == NULL || name[0] == '\0' || strcmp(name, "init") == 0)
        return INTACT_INIT_STREAM;
    uint64_t h = INTACT_FNV_OFFSET;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h ^= *p;
        h *= INTACT_FNV_PRIME;
    }
    return h == 0 ? 1 : h;
}

/* Opens any file or directory for an ioctl: read-only (directories allow nothing else),
 * write-only if reading is not permitted; never blocks (FIFOs) nor takes a terminal. */
static int open_for_ioctl(const char *path) {
    if (path == NULL) {
        errno = EFAULT;
        return -1;
    }
    const int common = O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
    int fd = open(path, O_RDONLY | common);
    if (fd < 0 && errno == EACCES) {
        fd = open(path, O_WRONLY | common);
        if (fd < 0)
            errno = EACCES;
    }
    return fd;
}

/* Closes `fd` keeping the errno of the call before it. */
static int finish(int fd, int r) {
    int saved = errno;
    close(fd);
    errno = saved;
    return r;
}

int intact_setstream_path_id(const char *path, uint64_t id, uint32_t flags) {
    int fd = open_for_ioctl(path);
    if (fd < 0)
        return -1;
    return finish(fd, intact_setstream(fd, id, flags));
}

int intact_setstream_path(const char *path, const char *name, uint32_t flags) {
    return intact_setstream_path_id(path, intact_stream_id(name), flags);
}

int intact_getstream_path(const char *path, uint64_t *id, uint32_t *flags) {
    int fd = open_for_ioctl(path);
    if (fd < 0)
        return -1;
    return finish(fd, intact_getstream(fd, id, flags));
}

int intact_streamsync_path(const char *path) {
    int fd = open_for_ioctl(path);
    if (fd < 0)
        return -1;
    return finish(fd, intact_streamsync(fd));
}
