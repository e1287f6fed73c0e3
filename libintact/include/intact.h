/*
 * intact.h: the intactfs stream control API (libintact).
 *
 * A process on an intactfs FUSE mount (`intact fs mount IMAGE MNT`) is in one *stream*
 * (ccfs, §3.2: setstream(s, flags), getstream(), streamsync()). Updates are ordered
 * within a stream and independent between streams; fsync commits the caller's stream.
 * Streams are controlled with three ioctls that any process may issue on any file or
 * directory of the mount. This header holds the ABI (the same numbers as
 * crates/intactfs-fuse/src/control.rs) and the declarations of libintact, a small
 * library over it. Reference and examples: docs/fs-api.md.
 *
 * Every function that can fail returns 0 on success and -1 with errno set on failure,
 * as POSIX calls do. ENOTTY: the file is not on an intactfs mount.
 */
#ifndef INTACT_H
#define INTACT_H

#include <stdint.h>
#include <sys/ioctl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The ABI ------------------------------------------------------------------- */

/* The ioctl "type" byte of every intactfs ioctl. */
#define INTACT_IOC_MAGIC 0xCC

/* The argument of SETSTREAM and GETSTREAM (native byte order, 16 bytes). */
struct intact_stream {
    uint64_t id;       /* the stream; 0 is the init stream */
    uint32_t flags;    /* INTACT_IGNORE_FSYNC or 0 */
    uint32_t reserved; /* 0 */
};

/* Put the calling process (and the children that inherit from it) in stream `id`, and
 * set the stream's flags. */
#define INTACT_IOC_SETSTREAM _IOW(INTACT_IOC_MAGIC, 1, struct intact_stream)
/* The calling process's stream and that stream's flags. */
#define INTACT_IOC_GETSTREAM _IOR(INTACT_IOC_MAGIC, 2, struct intact_stream)
/* Commit the calling process's stream durably (regardless of INTACT_IGNORE_FSYNC). */
#define INTACT_IOC_STREAMSYNC _IO(INTACT_IOC_MAGIC, 3)

/* OptFS osync (Chidambaram et al., SOSP 2013, §4.4): commit the calling process's stream
 * (and the file's pending changes) in order, without waiting for the device. Out: a
 * durability ticket. After it returns, no later update of the stream survives a crash
 * without every update before it; they become durable within the mount's durability
 * timeout, or at the next dsync, streamsync, fsync or sync. */
#define INTACT_IOC_OSYNC _IOR(INTACT_IOC_MAGIC, 4, uint64_t)
/* OptFS dsync: like fsync whatever the stream's flags: everything before it in the stream
 * (and every earlier osync) is on the media when it returns. */
#define INTACT_IOC_DSYNC _IO(INTACT_IOC_MAGIC, 5)

/* The argument of DURABLE (native byte order, 16 bytes). */
struct intact_durable {
    uint64_t ticket;   /* in: a ticket from OSYNC; out: the newest durable ticket */
    uint32_t flags;    /* in: INTACT_DURABLE_WAIT or 0 */
    uint32_t reserved; /* 0 */
};
/* The durability notification: whether an osync'd point is durable yet; with
 * INTACT_DURABLE_WAIT, returns once it is. */
#define INTACT_IOC_DURABLE _IOWR(INTACT_IOC_MAGIC, 6, struct intact_durable)
#define INTACT_DURABLE_WAIT 1u

/* The numbers the daemon compares against (Linux's generic _IOC encoding, as on x86 and
 * arm). Platforms with another encoding fail the static assertions below. */
#define INTACT_IOC_SETSTREAM_NR 0x4010CC01u
#define INTACT_IOC_GETSTREAM_NR 0x8010CC02u
#define INTACT_IOC_STREAMSYNC_NR 0x0000CC03u
#define INTACT_IOC_OSYNC_NR 0x8008CC04u
#define INTACT_IOC_DSYNC_NR 0x0000CC05u
#define INTACT_IOC_DURABLE_NR 0xC010CC06u

/* Flag: fsync and fdatasync in the stream return at once without committing; only
 * streamsync (and sync) make its updates durable. */
#define INTACT_IGNORE_FSYNC 1u
/* Flag: fsync and fdatasync in the stream are osync (ordered now, durable later), the
 * way to run an unmodified program with OptFS semantics. Not together with
 * INTACT_IGNORE_FSYNC. */
#define INTACT_FSYNC_AS_OSYNC 2u
/* Every flag the daemon accepts; others are refused with EINVAL. */
#define INTACT_FLAGS_ALL (INTACT_IGNORE_FSYNC | INTACT_FSYNC_AS_OSYNC)

/* The init stream: every process that neither set a stream nor inherited one. */
#define INTACT_INIT_STREAM UINT64_C(0)

/* FNV-1a 64 parameters of intact_stream_id. */
#define INTACT_FNV_OFFSET UINT64_C(0xcbf29ce484222325)
#define INTACT_FNV_PRIME UINT64_C(0x100000001b3)

#if defined(__cplusplus) && __cplusplus >= 201103L
#define INTACT_STATIC_ASSERT(c, m) static_assert(c, m)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define INTACT_STATIC_ASSERT(c, m) _Static_assert(c, m)
#else
#define INTACT_STATIC_ASSERT_2(c, l) typedef char intact_static_assert_##l[(c) ? 1 : -1]
#define INTACT_STATIC_ASSERT_1(c, l) INTACT_STATIC_ASSERT_2(c, l)
#define INTACT_STATIC_ASSERT(c, m) INTACT_STATIC_ASSERT_1(c, __LINE__)
#endif

INTACT_STATIC_ASSERT(sizeof(struct intact_stream) == 16, "struct intact_stream is 16 bytes");
INTACT_STATIC_ASSERT(sizeof(uint64_t) == 8 && sizeof(uint32_t) == 4, "fixed-width types");
INTACT_STATIC_ASSERT(INTACT_IOC_SETSTREAM == INTACT_IOC_SETSTREAM_NR, "SETSTREAM is 0x4010CC01 (_IOW(0xCC, 1, 16 bytes))");
INTACT_STATIC_ASSERT(INTACT_IOC_GETSTREAM == INTACT_IOC_GETSTREAM_NR, "GETSTREAM is 0x8010CC02 (_IOR(0xCC, 2, 16 bytes))");
INTACT_STATIC_ASSERT(INTACT_IOC_STREAMSYNC == INTACT_IOC_STREAMSYNC_NR, "STREAMSYNC is 0xCC03 (_IO(0xCC, 3))");
INTACT_STATIC_ASSERT(sizeof(struct intact_durable) == 16, "struct intact_durable is 16 bytes");
INTACT_STATIC_ASSERT(INTACT_IOC_OSYNC == INTACT_IOC_OSYNC_NR, "OSYNC is 0x8008CC04 (_IOR(0xCC, 4, 8 bytes))");
INTACT_STATIC_ASSERT(INTACT_IOC_DSYNC == INTACT_IOC_DSYNC_NR, "DSYNC is 0xCC05 (_IO(0xCC, 5))");
INTACT_STATIC_ASSERT(INTACT_IOC_DURABLE == INTACT_IOC_DURABLE_NR, "DURABLE is 0xC010CC06 (_IOWR(0xCC, 6, 16 bytes))");

/* ---- libintact ---------------------------------------------------------------- */

/* SETSTREAM on `fd` (any file or directory of the mount): the calling process is in
 * stream `id` from now on, and the stream's flags become `flags`. Flags belong to the
 * stream, not to the process: every process in the stream sees the last value set. */
int intact_setstream(int fd, uint64_t id, uint32_t flags);

/* GETSTREAM on `fd`: the calling process's stream and its flags. Either pointer may be
 * NULL. */
int intact_getstream(int fd, uint64_t *id, uint32_t *flags);

/* STREAMSYNC on `fd`: commits the calling process's stream durably. */
int intact_streamsync(int fd);

/* OSYNC on `fd`: ordered now, durable later. `ticket` (may be NULL) receives the
 * durability ticket for intact_durable. */
int intact_osync(int fd);
int intact_osync_ticket(int fd, uint64_t *ticket);

/* DSYNC on `fd`: durable now. */
int intact_dsync(int fd);

/* DURABLE on `fd`: 1 if `ticket` is durable, 0 if not yet (only without `wait`), -1 with
 * errno on failure (EINVAL: a ticket never issued). With `wait` != 0 it returns 1 once the
 * ticket is durable, at the latest after the mount's durability timeout. */
int intact_durable(int fd, uint64_t ticket, int wait);

/* A message for an errno of these calls: ENOTTY is "not on an intactfs mount"; other
 * values get strerror's text. */
const char *intact_strerror(int errnum);

/* The stream id of a name: FNV-1a 64 of its bytes (without the NUL). "init", "" and
 * NULL are the init stream 0; a name that hashes to 0 gets 1. Two programs that use the
 * same name share a stream (docs/fs-api.md, "Stream ids"). Cannot fail. */
uint64_t intact_stream_id(const char *name);

/* Path-based conveniences: open `path` (any file or directory of the mount), issue the
 * ioctl, close. The stream state belongs to the process, so it outlives the descriptor. */
int intact_setstream_path(const char *path, const char *name, uint32_t flags);
int intact_setstream_path_id(const char *path, uint64_t id, uint32_t flags);
int intact_getstream_path(const char *path, uint64_t *id, uint32_t *flags);
int intact_streamsync_path(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* INTACT_H */
