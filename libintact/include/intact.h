/*
 * intact.h: the intactfs stream and atomic-region control API (libintact).
 *
 * A process on an intactfs FUSE mount (`intact fs mount IMAGE MNT`) is in one *stream*
 * (ccfs, §3.2: setstream(s, flags), getstream(), streamsync()). Updates are ordered
 * within a stream and independent between streams; fsync commits the caller's stream.
 * Streams are controlled with three ioctls that any process may issue on any file or
 * directory of the mount; atomic regions (CFS) and OptFS's osync/dsync with others.
 * This header holds the ABI (the same numbers as crates/intactfs-fuse/src/control.rs)
 * and the declarations of libintact, a small library over it. Reference and examples:
 * docs/fs-api.md.
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

/* ---- Atomic regions (CFS, the seeds' paper `003` §4) ------------------------------- */

/* Everything the calling process (and the children that inherit from it, as with
 * streams) changes on the mount between BEGIN and COMMIT reaches storage all or nothing.
 * Regions do not nest and give no isolation: other processes see the changes at once,
 * and a process that writes a file the region wrote becomes part of the region. Inside a
 * region fsync, fdatasync, OSYNC, DSYNC and STREAMSYNC return at once and commit nothing;
 * a process that exits inside a region has it aborted by the daemon. Reference:
 * docs/fs-api.md, "Atomic regions". */

/* The calling process enters a new region (any file or directory of the mount).
 * EALREADY: it is already in one (regions do not nest). */
#define INTACT_IOC_BEGIN _IO(INTACT_IOC_MAGIC, 7)
/* Who may call what (docs/fs-api.md, "Who may call what"): a region belongs to the process
 * that began it and to its descendants; COMMIT and ABORT act on the caller's own region
 * only (there is no way to name another's), and the daemon checks the caller is the
 * owner or a descendant (EPERM). ADD needs a descriptor open for writing (EBADF), since
 * the region's abort undoes every process's writes to the file. Root is no exception:
 * ownership is by process, not by user. */

/* Commit the caller's region durably (one flush); returns once it is durable. EINVAL: the
 * caller is in no region. */
#define INTACT_IOC_COMMIT _IO(INTACT_IOC_MAGIC, 8)
/* Abort the caller's region: none of its changes stays (created files vanish, writes
 * revert, renames are undone). EINVAL: the caller is in no region. */
#define INTACT_IOC_ABORT _IO(INTACT_IOC_MAGIC, 9)
/* CFS cfs_add, on a regular file: every write to it, by any process (also mmap
 * write-back), belongs to the caller's region. EXDEV: the caller has no region on this
 * file's mount; EINVAL: not a regular file; EBADF: the descriptor is not open for
 * writing; EBUSY: the file is in another region. */
#define INTACT_IOC_ADD _IO(INTACT_IOC_MAGIC, 10)

/* ---- AD-transactions on persistent memory (FCFS, the seeds' paper `002` §III-B) ------- */

/* On a mount of a pmem image (`intact fs mkfs IMG --device pmem`), a transaction groups
 * the changes of several files: tx_begin(TxInfo{num, fdSet}), tx_add, tx_commit, tx_abort.
 * Atomicity and durability, no isolation (002 §III-A): other processes see the changes at
 * once. Every change to a file in the transaction (named at BEGIN or ADD, or changed by
 * it), by any process, belongs to the transaction until it commits or aborts; a change to
 * a file another open transaction owns fails with EBUSY. Every other call is its own
 * transaction, durable when it returns (fsync has nothing left to do). A transaction
 * belongs to the process that began it: the daemon aborts it if that process exits (or is
 * killed) with it open. A daemon crash aborts every open transaction; a committed one
 * survives whole. Reference: docs/fs-api.md, "AD-transactions on persistent memory".
 *
 * Who may call what (docs/fs-api.md, "Who may call what"): only the process that began a
 * transaction, and its descendants, may add to, commit or abort it (EPERM for any other,
 * root too, whatever id it passes); ids are random (48 bits under a mount tag), but the
 * owner check, not the id, keeps others out. TX_BEGIN and TX_ADD need a descriptor open
 * for writing (EBADF), or, on a directory, permission to write it (EACCES): the
 * transaction's abort undoes every process's changes to what it holds. */

/* Begin a transaction over the file or directory the descriptor is open on. Out: the
 * transaction id (positive; it names the mount too). EOPNOTSUPP: a block (not pmem)
 * intactfs mount; EBUSY: the file belongs to another open transaction; EBADF: a file's
 * descriptor not open for writing; EACCES: a directory the caller may not write. */
#define INTACT_IOC_TX_BEGIN _IOR(INTACT_IOC_MAGIC, 16, uint64_t)
/* In: a transaction id; the descriptor's file joins it. EXDEV: the id is of another mount
 * (a transaction never spans mounts); EINVAL: unknown, committed or aborted id; EPERM:
 * the caller is not the transaction's process or its descendant; EBADF/EACCES as for
 * BEGIN; EBUSY: the file belongs to another open transaction. */
#define INTACT_IOC_TX_ADD _IOW(INTACT_IOC_MAGIC, 17, uint64_t)
/* In: a transaction id; commit it: durable and all or nothing when it returns. EINVAL:
 * unknown, committed or aborted id; EPERM: not the transaction's process or its
 * descendant. On any file or directory of the mount. */
#define INTACT_IOC_TX_COMMIT _IOW(INTACT_IOC_MAGIC, 18, uint64_t)
/* In: a transaction id; abort it: none of its changes stays. EINVAL and EPERM as for
 * COMMIT. */
#define INTACT_IOC_TX_ABORT _IOW(INTACT_IOC_MAGIC, 19, uint64_t)

/* F2FS's atomic-write ioctls (magic 0xf5, Linux include/uapi/linux/f2fs.h), which intactfs
 * answers on a regular file's descriptor, so that programs that test for them (SQLite
 * built with SQLITE_ENABLE_BATCH_ATOMIC_WRITE) use them: one region per file. These are
 * F2FS's numbers, not intactfs's own; libintact has no calls for them. START: the file's
 * later writes are one region (EBUSY inside a BEGIN region); COMMIT: durable, all or
 * nothing; ABORT_VOLATILE: they are undone; closing the descriptor that started it
 * without COMMIT aborts. On a directory: EINVAL. START, COMMIT and ABORT_VOLATILE need a
 * descriptor open for writing (EBADF); an atomic write belongs to the open file (the
 * descriptor that started it, its dups and the children that inherit it): COMMIT and
 * ABORT_VOLATILE through another open of the file are EINVAL, START EBUSY. */
#define INTACT_F2FS_IOC_MAGIC 0xf5
#define INTACT_F2FS_IOC_START_ATOMIC_WRITE _IO(INTACT_F2FS_IOC_MAGIC, 1)
#define INTACT_F2FS_IOC_COMMIT_ATOMIC_WRITE _IO(INTACT_F2FS_IOC_MAGIC, 2)
#define INTACT_F2FS_IOC_ABORT_VOLATILE_WRITE _IO(INTACT_F2FS_IOC_MAGIC, 5)
/* Out: a uint32_t of feature bits; intactfs reports INTACT_F2FS_FEATURE_ATOMIC_WRITE. */
#define INTACT_F2FS_IOC_GET_FEATURES _IOR(INTACT_F2FS_IOC_MAGIC, 12, uint32_t)
#define INTACT_F2FS_FEATURE_ATOMIC_WRITE 0x4u

/* The numbers the daemon compares against (Linux's generic _IOC encoding, as on x86 and
 * arm). Platforms with another encoding fail the static assertions below. */
#define INTACT_IOC_SETSTREAM_NR 0x4010CC01u
#define INTACT_IOC_GETSTREAM_NR 0x8010CC02u
#define INTACT_IOC_STREAMSYNC_NR 0x0000CC03u
#define INTACT_IOC_OSYNC_NR 0x8008CC04u
#define INTACT_IOC_DSYNC_NR 0x0000CC05u
#define INTACT_IOC_DURABLE_NR 0xC010CC06u
#define INTACT_IOC_BEGIN_NR 0x0000CC07u
#define INTACT_IOC_COMMIT_NR 0x0000CC08u
#define INTACT_IOC_ABORT_NR 0x0000CC09u
#define INTACT_IOC_ADD_NR 0x0000CC0Au
#define INTACT_IOC_TX_BEGIN_NR 0x8008CC10u
#define INTACT_IOC_TX_ADD_NR 0x4008CC11u
#define INTACT_IOC_TX_COMMIT_NR 0x4008CC12u
#define INTACT_IOC_TX_ABORT_NR 0x4008CC13u
#define INTACT_F2FS_IOC_START_ATOMIC_WRITE_NR 0x0000F501u
#define INTACT_F2FS_IOC_COMMIT_ATOMIC_WRITE_NR 0x0000F502u
#define INTACT_F2FS_IOC_ABORT_VOLATILE_WRITE_NR 0x0000F505u
#define INTACT_F2FS_IOC_GET_FEATURES_NR 0x8004F50Cu

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
INTACT_STATIC_ASSERT(INTACT_IOC_BEGIN == INTACT_IOC_BEGIN_NR, "BEGIN is 0xCC07 (_IO(0xCC, 7))");
INTACT_STATIC_ASSERT(INTACT_IOC_COMMIT == INTACT_IOC_COMMIT_NR, "COMMIT is 0xCC08 (_IO(0xCC, 8))");
INTACT_STATIC_ASSERT(INTACT_IOC_ABORT == INTACT_IOC_ABORT_NR, "ABORT is 0xCC09 (_IO(0xCC, 9))");
INTACT_STATIC_ASSERT(INTACT_IOC_ADD == INTACT_IOC_ADD_NR, "ADD is 0xCC0A (_IO(0xCC, 10))");
INTACT_STATIC_ASSERT(INTACT_IOC_TX_BEGIN == INTACT_IOC_TX_BEGIN_NR, "TX_BEGIN is 0x8008CC10 (_IOR(0xCC, 16, 8 bytes))");
INTACT_STATIC_ASSERT(INTACT_IOC_TX_ADD == INTACT_IOC_TX_ADD_NR, "TX_ADD is 0x4008CC11 (_IOW(0xCC, 17, 8 bytes))");
INTACT_STATIC_ASSERT(INTACT_IOC_TX_COMMIT == INTACT_IOC_TX_COMMIT_NR, "TX_COMMIT is 0x4008CC12 (_IOW(0xCC, 18, 8 bytes))");
INTACT_STATIC_ASSERT(INTACT_IOC_TX_ABORT == INTACT_IOC_TX_ABORT_NR, "TX_ABORT is 0x4008CC13 (_IOW(0xCC, 19, 8 bytes))");
INTACT_STATIC_ASSERT(INTACT_F2FS_IOC_START_ATOMIC_WRITE == INTACT_F2FS_IOC_START_ATOMIC_WRITE_NR, "F2FS START_ATOMIC_WRITE is 0xf501 (_IO(0xf5, 1))");
INTACT_STATIC_ASSERT(INTACT_F2FS_IOC_COMMIT_ATOMIC_WRITE == INTACT_F2FS_IOC_COMMIT_ATOMIC_WRITE_NR, "F2FS COMMIT_ATOMIC_WRITE is 0xf502 (_IO(0xf5, 2))");
INTACT_STATIC_ASSERT(INTACT_F2FS_IOC_ABORT_VOLATILE_WRITE == INTACT_F2FS_IOC_ABORT_VOLATILE_WRITE_NR, "F2FS ABORT_VOLATILE_WRITE is 0xf505 (_IO(0xf5, 5))");
INTACT_STATIC_ASSERT(INTACT_F2FS_IOC_GET_FEATURES == INTACT_F2FS_IOC_GET_FEATURES_NR, "F2FS GET_FEATURES is 0x8004f50c (_IOR(0xf5, 12, 4 bytes))");

/* ---- libintact ---------------------------------------------------------------- */

/* SETSTREAM on `fd` (any file or directory of the mount): the calling process is in
 * stream `id` from now on, and the stream's flags become `flags`. Flags belong to the
 * stream, not to the process: every process in the stream sees the last value set.
 * EBUSY inside an atomic region (a region ends only with its commit or abort). */
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

/* Atomic regions (see INTACT_IOC_BEGIN above). `fd` is any file or directory of the
 * mount for begin, commit and abort, and a regular file for add. The region belongs to
 * the process, so it outlives the descriptor. Errors: see intact_region_strerror. */
int intact_begin(int fd);
int intact_commit(int fd);
int intact_abort(int fd);
int intact_add(int fd);

/* A message for an errno of these calls: ENOTTY is "not on an intactfs mount", EALREADY
 * (only BEGIN returns it) "an atomic region is already open (regions do not nest)",
 * EXDEV (only ADD) "no atomic region of this process on that file's mount"; other values
 * get strerror's text. */
const char *intact_strerror(int errnum);

/* A message for an errno of intact_begin, intact_commit, intact_abort and intact_add,
 * where EINVAL and EBUSY have meanings of their own: EALREADY "an atomic region is already
 * open (regions do not nest)", EINVAL "no atomic region is open", EXDEV "no atomic region
 * of this process on that file's mount", EBUSY "the file belongs to another atomic
 * region", EBADF "not a descriptor open for writing (ADD needs one)", EPERM "the atomic
 * region belongs to another process", ENOTTY "not on an intactfs mount"; other values get
 * strerror's text. Only
 * for intact_add does EINVAL mean something else, that the file is not a regular file
 * (without a region, ADD fails with EXDEV), which this message cannot tell. */
const char *intact_region_strerror(int errnum);

/* AD-transactions on a pmem mount (see INTACT_IOC_TX_BEGIN above), after 002's
 * tx_begin(TxInfo{num, fdSet}) / tx_add / tx_commit / tx_abort.
 *
 * intact_tx_begin begins a transaction on fds[0] and adds fds[1..n-1] (n >= 1; every
 * descriptor on the same mount, files or directories). Returns the transaction id (> 0),
 * or -1 with errno set: EINVAL for fds == NULL or n < 1; if adding a later descriptor
 * fails, the transaction is aborted and the add's errno returned (EXDEV: that file is on
 * another mount; EBUSY: it belongs to another transaction).
 * intact_tx_add adds the file of `fd` to transaction `tx`.
 * intact_tx_commit and intact_tx_abort end `tx`; `fd` is any file or directory of its
 * mount (e.g. fds[0]). Commit returns once the transaction is durable.
 * All but begin return 0 or -1 with errno. Errors: see intact_tx_strerror. A transaction
 * larger than the log (or the free space) fails the call that overflows it with ENOSPC;
 * the transaction stays open and can still be committed or aborted (the daemon's log has
 * the engine's message with the numbers). */
int64_t intact_tx_begin(const int *fds, int n);
int intact_tx_add(int64_t tx, int fd);
int intact_tx_commit(int64_t tx, int fd);
int intact_tx_abort(int64_t tx, int fd);

/* A message for an errno of the intact_tx_* calls: EINVAL "unknown, committed or aborted
 * transaction", EXDEV "the transaction belongs to another mount", EBUSY "the file
 * belongs to another open transaction", EBADF "not a descriptor open for writing
 * (TX_BEGIN and TX_ADD need one)", EACCES "no permission to write the directory", EPERM
 * "the transaction belongs to another process (only it and its children may add to,
 * commit or abort it)", ENOSPC "the transaction does not fit in the log or the free space
 * (see the daemon's log)", EOPNOTSUPP "not a persistent-memory mount
 * (transactions need an image made with --device pmem)", ENOTTY "not on an intactfs
 * mount"; other values get strerror's text. */
const char *intact_tx_strerror(int errnum);

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
