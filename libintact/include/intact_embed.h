/*
 * intact_embed.h: embedded mode, a persistent-memory intactfs image opened in-process
 * (libintact_embed, built from crates/intactfs-embed: `make -C libintact embed`).
 *
 * A program that opens an image with intact_embed_open owns it: it holds the image's
 * exclusive lock (the one `intact fs mount`, fsck and dump take) until intact_embed_close
 * or its exit, and a mount or another program that tries meanwhile is refused (EBUSY,
 * with a message naming the image), as is a second open in the same program. The calls
 * are those of a program on a pmem mount without the FUSE round trip: files by path from
 * the image's root, descriptors, and FCFS AD-transactions (tx_begin over descriptors,
 * tx_add, tx_commit, tx_abort) with the mount's semantics (docs/fs-api.md, "Embedded
 * mode"):
 *   - every call outside a transaction is its own transaction, durable when it returns;
 *     a transaction is durable, all or nothing, when intact_embed_tx_commit returns;
 *   - a change to a file an open transaction owns (named at begin or add, or changed in
 *     it) belongs to that transaction; a change to a file another open transaction owns
 *     fails with EBUSY; no isolation (002 §III-A);
 *   - a crash of the program (SIGKILL included) leaves the image with every committed
 *     transaction and none of the open ones: the next open recovers.
 *
 * Every call that can fail returns -1 (NULL for intact_embed_open) with errno set, and
 * leaves a message with context for intact_embed_errmsg(). The handle is thread-safe (one
 * lock around the engine). Symbolic links are not followed.
 */
#ifndef INTACT_EMBED_H
#define INTACT_EMBED_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct intact_embed intact_embed;

/* intact_embed_open flag: fences do not msync the image's pages, so committed data
 * survives a crash of the program but not of the machine (the mount's `-o pmem_nosync`).
 * Without it every fence msyncs, as a mount does by default. */
#define INTACT_EMBED_NO_SYNC 1u
/* intact_embed_open flag: commits checkpoint inline (the mount's `-o pmem_ckpt=inline`).
 * Without it a background thread of this process checkpoints between calls (FCFS's
 * concurrently selective checkpointing); a commit that finds the log or the free blocks
 * exhausted checkpoints inline either way. */
#define INTACT_EMBED_INLINE_CHECKPOINTS 2u

struct intact_embed_stat {
    uint64_t ino;
    uint64_t size;
    uint32_t mode;  /* permission bits */
    uint32_t nlink;
    uint32_t kind;  /* INTACT_EMBED_FILE, _DIR, _SYMLINK or _OTHER */
    uint32_t reserved;
};
#define INTACT_EMBED_FILE 1u
#define INTACT_EMBED_DIR 2u
#define INTACT_EMBED_SYMLINK 3u
#define INTACT_EMBED_OTHER 4u

/* The emulated persistent memory's work since the image was opened. */
struct intact_embed_counters {
    uint64_t stores;        /* store calls */
    uint64_t bytes_stored;
    uint64_t lines_flushed; /* cachelines written back (clwb) */
    uint64_t fences;
};

/* Makes a fresh pmem image of size_bytes at `image` (created or truncated), as `intact fs
 * mkfs --device pmem`; log_bytes sizes its log (0: the default for the size). */
int intact_embed_mkfs(const char *image, uint64_t size_bytes, uint64_t log_bytes);

/* Locks, maps and recovers the image. EBUSY: a mount or another program holds it. flags:
 * 0, or INTACT_EMBED_NO_SYNC and/or INTACT_EMBED_INLINE_CHECKPOINTS. */
intact_embed *intact_embed_open(const char *image, uint32_t flags);

/* Closes cleanly (open transactions aborted, everything checkpointed and written back)
 * and releases the lock. The handle is freed even if this fails. */
int intact_embed_close(intact_embed *e);

/* open(2) on a path in the image: flags O_RDONLY, O_WRONLY or O_RDWR, with O_CREAT,
 * O_EXCL, O_TRUNC (O_CLOEXEC and O_NOFOLLOW accepted, meaning nothing here; others are
 * EINVAL); `mode` for a new file. A directory opens read-only (for tx_begin and tx_add).
 * Returns a descriptor of this image (>= 0; not a kernel descriptor). */
int intact_embed_open_file(intact_embed *e, const char *path, int flags, uint32_t mode);
int intact_embed_close_file(intact_embed *e, int fd);

/* pread(2) and pwrite(2): the bytes read (fewer at the end of the file) or written. A
 * write is whole or fails; EBADF through a descriptor not open for writing. */
int64_t intact_embed_pread(intact_embed *e, int fd, void *buf, uint64_t len, uint64_t off);
int64_t intact_embed_pwrite(intact_embed *e, int fd, const void *buf, uint64_t len, uint64_t off);
int intact_embed_ftruncate(intact_embed *e, int fd, uint64_t size);
/* Every call is durable when it returns: fsync only checks the descriptor. */
int intact_embed_fsync(intact_embed *e, int fd);
int intact_embed_fstat(intact_embed *e, int fd, struct intact_embed_stat *st);
int intact_embed_stat(intact_embed *e, const char *path, struct intact_embed_stat *st);
int intact_embed_unlink(intact_embed *e, const char *path);
int intact_embed_mkdir(intact_embed *e, const char *path, uint32_t mode);
int intact_embed_rmdir(intact_embed *e, const char *path);
/* rename(2): replaces what `to` names. */
int intact_embed_rename(intact_embed *e, const char *from, const char *to);
/* Calls cb(arg, name, ino, kind) for each entry of the directory at `path` (without "."
 * and ".."), in the directory's slot order, until cb returns nonzero. The listing is taken
 * first, so cb may call into the image. */
int intact_embed_readdir(intact_embed *e, const char *path,
                         int (*cb)(void *arg, const char *name, uint64_t ino, uint32_t kind), void *arg);

/* AD-transactions, as intact_tx_begin etc. on a mount (intact.h): begin over fds[0] and
 * add fds[1..n-1]; returns the id (> 0). If an add fails the transaction is aborted and
 * that errno returned. EBADF: a file's descriptor not open for writing; EBUSY: the file
 * belongs to another open transaction; EINVAL: fds NULL or n < 1, or (add, commit,
 * abort) an unknown, committed or aborted id; ENOSPC: the transaction does not fit in
 * the log or the free space (it stays open: commit or abort it). Commit returns once the
 * transaction is durable. */
int64_t intact_embed_tx_begin(intact_embed *e, const int *fds, int n);
int intact_embed_tx_add(intact_embed *e, int64_t tx, int fd);
int intact_embed_tx_commit(intact_embed *e, int64_t tx);
int intact_embed_tx_abort(intact_embed *e, int64_t tx);

int intact_embed_counters(intact_embed *e, struct intact_embed_counters *out);

/* The calling thread's last failure, with context ("" before any); valid until that
 * thread's next failing call. */
const char *intact_embed_errmsg(void);

/* ---- SQLite (libintact/sqlite/intact_vfs.c, compiled into the program with SQLite) ---- */

/* Registers a SQLite VFS named `name` over the open image `e` (make_default != 0: the
 * default VFS); `e` must stay open while SQLite uses the VFS. Database paths are paths in
 * the image. Each SQLite write transaction is one AD-transaction (begun at its first
 * write to the database file, committed at its xSync, or when the write lock is released)
 * and no journal reaches the image: use PRAGMA journal_mode=MEMORY (the VFS refuses to
 * create a rollback journal or WAL file in the image: SQLITE_CANTOPEN). Temporary files
 * go to SQLite's default VFS. Returns a SQLite result code. Reference: docs/fs-api.md,
 * "SQLite on an embedded image". */
int intact_sqlite_vfs_register(intact_embed *e, const char *name, int make_default);

/* For programs that cannot call the above (tools/sqlite-batch/driver.c built with
 * -DDRIVER_SETUP=intact_sqlite_setup_from_env): opens the image named by the environment
 * variable INTACT_EMBED_IMAGE (INTACT_EMBED_NO_SYNC=1: the flag of that name), registers
 * the VFS "intact" as the default, and closes the image at exit; with
 * INTACT_EMBED_COUNTERS=1 it prints the device counters to stderr at exit. 0 on
 * success; otherwise a message on stderr and 1. */
int intact_sqlite_setup_from_env(void);

#ifdef __cplusplus
}
#endif

#endif /* INTACT_EMBED_H */
