/*
 * intact_vfs.c: a SQLite VFS over an embedded intactfs pmem image (intact_embed.h), where
 * each SQLite write transaction is one AD-transaction and no journal is written.
 *
 * Why journal_mode=MEMORY (and not OFF): SQLite keeps its rollback journal in memory, so
 * ROLLBACK, a failed statement and a full disk still restore the pages SQLite changed
 * (with OFF their results are undefined); what the journal file would add, undoing a
 * commit torn by a crash, the AD-transaction gives: every write to the database file from
 * the first one after a commit point to the next commit point is one transaction, so a
 * crash leaves the file as the last commit left it, and a commit is durable when SQLite's
 * COMMIT returns. Commit points: xSync of the database file (SQLite's commit with
 * synchronous >= NORMAL) and the release of the write lock (xUnlock to SHARED or NONE:
 * synchronous=OFF, and the end of a ROLLBACK, whose restoring writes then commit the old
 * content again). A write or commit that fails aborts the transaction, which puts the
 * file back to the last commit at once; SQLite's own rollback then rewrites the same
 * content. The VFS refuses to create a rollback journal, super-journal or WAL file in the
 * image (SQLITE_CANTOPEN with a log message), so a connection left in another journal
 * mode fails loudly instead of journaling; temporary files (statement journals, temp
 * tables) go to SQLite's default VFS, which holds nothing that must survive a crash.
 *
 * Locks are between the connections of this process (the image has no other user: the
 * embedded owner holds its flock), kept per file as the unix VFS keeps them per inode:
 * shared readers, one RESERVED/PENDING/EXCLUSIVE writer.
 */
#define _GNU_SOURCE
#include "intact_embed.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One file's lock state, shared by its connections. */
struct lock_state {
    uint64_t ino;
    int refs;     /* open files of this inode */
    int readers;  /* files holding SHARED or more */
    void *writer; /* the file holding RESERVED or more, or NULL */
    int writer_level;
    struct lock_state *next;
};

struct ifile {
    sqlite3_file base;
    intact_embed *e;
    int fd;
    int64_t tx; /* the open AD-transaction of this file, 0: none */
    int level;  /* SQLITE_LOCK_* held */
    struct lock_state *lock;
    char *path;
};

struct ivfs {
    sqlite3_vfs base;
    sqlite3_vfs *parent; /* the default VFS: temporary files, time, randomness */
    intact_embed *e;
};

static pthread_mutex_t locks_mu = PTHREAD_MUTEX_INITIALIZER;
static struct lock_state *locks;

static struct ivfs *vfs_of(sqlite3_vfs *v) { return (struct ivfs *)v; }

/* Logs an embedded call's failure with its message and returns `code`. */
static int failed(int code, const char *what, const char *path) {
    sqlite3_log(code, "intact VFS: %s %s: %s", what, path ? path : "", intact_embed_errmsg());
    return code;
}

/* ---- locks --------------------------------------------------------------------------- */

static struct lock_state *lock_ref(uint64_t ino) {
    pthread_mutex_lock(&locks_mu);
    struct lock_state *l = locks;
    while (l && l->ino != ino) l = l->next;
    if (!l && (l = calloc(1, sizeof *l))) {
        l->ino = ino;
        l->next = locks;
        locks = l;
    }
    if (l) l->refs++;
    pthread_mutex_unlock(&locks_mu);
    return l;
}

static void lock_unref(struct lock_state *l) {
    pthread_mutex_lock(&locks_mu);
    if (--l->refs == 0) {
        struct lock_state **p = &locks;
        while (*p != l) p = &(*p)->next;
        *p = l->next;
        free(l);
    }
    pthread_mutex_unlock(&locks_mu);
}

static int lock_up(struct ifile *f, int level) {
    struct lock_state *l = f->lock;
    if (level == SQLITE_LOCK_SHARED) {
        if (l->writer && l->writer_level >= SQLITE_LOCK_PENDING) return SQLITE_BUSY;
        l->readers++;
        f->level = level;
        return SQLITE_OK;
    }
    if (l->writer && l->writer != f) return SQLITE_BUSY;
    l->writer = f;
    if (level == SQLITE_LOCK_EXCLUSIVE && l->readers > 1) {
        l->writer_level = f->level = SQLITE_LOCK_PENDING; /* new readers wait */
        return SQLITE_BUSY;
    }
    l->writer_level = f->level = level;
    return SQLITE_OK;
}

static int x_lock(sqlite3_file *pf, int level) {
    struct ifile *f = (struct ifile *)pf;
    if (f->level >= level) return SQLITE_OK;
    pthread_mutex_lock(&locks_mu);
    int rc = lock_up(f, level);
    pthread_mutex_unlock(&locks_mu);
    return rc;
}

/* Commits the file's open transaction (a commit point); aborts it if the commit fails. */
static int commit_point(struct ifile *f, int errcode) {
    if (f->tx == 0) return SQLITE_OK;
    int64_t tx = f->tx;
    f->tx = 0;
    if (intact_embed_tx_commit(f->e, tx) == 0) return SQLITE_OK;
    int rc = failed(errno == ENOSPC ? SQLITE_FULL : errcode, "committing the transaction of", f->path);
    intact_embed_tx_abort(f->e, tx);
    return rc;
}

static int x_unlock(sqlite3_file *pf, int level) {
    struct ifile *f = (struct ifile *)pf;
    int rc = SQLITE_OK;
    if (level <= SQLITE_LOCK_SHARED) rc = commit_point(f, SQLITE_IOERR_UNLOCK);
    if (f->level <= level) return rc;
    pthread_mutex_lock(&locks_mu);
    struct lock_state *l = f->lock;
    if (f->level > SQLITE_LOCK_SHARED && level <= SQLITE_LOCK_SHARED && l->writer == f) {
        l->writer = NULL;
        l->writer_level = 0;
    }
    if (level == SQLITE_LOCK_NONE && f->level >= SQLITE_LOCK_SHARED) l->readers--;
    if (l->readers < 0) abort(); /* a lock released twice: a bug here */
    f->level = level;
    pthread_mutex_unlock(&locks_mu);
    return rc;
}

static int x_check_reserved(sqlite3_file *pf, int *out) {
    struct ifile *f = (struct ifile *)pf;
    pthread_mutex_lock(&locks_mu);
    *out = f->lock->writer != NULL;
    pthread_mutex_unlock(&locks_mu);
    return SQLITE_OK;
}

/* ---- I/O ----------------------------------------------------------------------------- */

/* Begins the file's transaction at the first change after a commit point. */
static int ensure_tx(struct ifile *f, int errcode) {
    if (f->tx != 0) return SQLITE_OK;
    int64_t tx = intact_embed_tx_begin(f->e, &f->fd, 1);
    if (tx < 0) return failed(errcode, "beginning a transaction on", f->path);
    f->tx = tx;
    return SQLITE_OK;
}

/* A change failed: abort the transaction (the file is back at the last commit). */
static int change_failed(struct ifile *f, int errcode, const char *what) {
    int rc = failed(errno == ENOSPC ? SQLITE_FULL : errcode, what, f->path);
    if (f->tx != 0 && intact_embed_tx_abort(f->e, f->tx) != 0)
        failed(errcode, "aborting the transaction of", f->path);
    f->tx = 0;
    return rc;
}

static int x_read(sqlite3_file *pf, void *buf, int amt, sqlite3_int64 off) {
    struct ifile *f = (struct ifile *)pf;
    int64_t n = intact_embed_pread(f->e, f->fd, buf, (uint64_t)amt, (uint64_t)off);
    if (n < 0) return failed(SQLITE_IOERR_READ, "reading", f->path);
    if (n < amt) {
        memset((char *)buf + n, 0, (size_t)(amt - n));
        return SQLITE_IOERR_SHORT_READ;
    }
    return SQLITE_OK;
}

static int x_write(sqlite3_file *pf, const void *buf, int amt, sqlite3_int64 off) {
    struct ifile *f = (struct ifile *)pf;
    int rc = ensure_tx(f, SQLITE_IOERR_WRITE);
    if (rc != SQLITE_OK) return rc;
    if (intact_embed_pwrite(f->e, f->fd, buf, (uint64_t)amt, (uint64_t)off) != amt)
        return change_failed(f, SQLITE_IOERR_WRITE, "writing");
    return SQLITE_OK;
}

static int x_truncate(sqlite3_file *pf, sqlite3_int64 size) {
    struct ifile *f = (struct ifile *)pf;
    int rc = ensure_tx(f, SQLITE_IOERR_TRUNCATE);
    if (rc != SQLITE_OK) return rc;
    if (intact_embed_ftruncate(f->e, f->fd, (uint64_t)size) != 0)
        return change_failed(f, SQLITE_IOERR_TRUNCATE, "truncating");
    return SQLITE_OK;
}

static int x_sync(sqlite3_file *pf, int flags) {
    (void)flags;
    return commit_point((struct ifile *)pf, SQLITE_IOERR_FSYNC);
}

static int x_file_size(sqlite3_file *pf, sqlite3_int64 *size) {
    struct ifile *f = (struct ifile *)pf;
    struct intact_embed_stat st;
    if (intact_embed_fstat(f->e, f->fd, &st) != 0) return failed(SQLITE_IOERR_FSTAT, "fstat of", f->path);
    *size = (sqlite3_int64)st.size;
    return SQLITE_OK;
}

static int x_close(sqlite3_file *pf) {
    struct ifile *f = (struct ifile *)pf;
    /* SQLite closes after releasing its locks, so no transaction is open; if one is (an
     * error path), what SQLite wrote is what it believes is there: commit it. */
    int rc = commit_point(f, SQLITE_IOERR_CLOSE);
    if (f->level > SQLITE_LOCK_NONE) x_unlock(pf, SQLITE_LOCK_NONE);
    if (intact_embed_close_file(f->e, f->fd) != 0 && rc == SQLITE_OK)
        rc = failed(SQLITE_IOERR_CLOSE, "closing", f->path);
    lock_unref(f->lock);
    sqlite3_free(f->path);
    return rc;
}

static int x_file_control(sqlite3_file *pf, int op, void *arg) {
    (void)pf, (void)op, (void)arg;
    return SQLITE_NOTFOUND;
}

static int x_sector_size(sqlite3_file *pf) {
    (void)pf;
    return 4096;
}

/* A write of any size either reaches the image in its transaction or not at all, and
 * never disturbs bytes around it. */
static int x_device_characteristics(sqlite3_file *pf) {
    (void)pf;
    return SQLITE_IOCAP_POWERSAFE_OVERWRITE | SQLITE_IOCAP_SAFE_APPEND | SQLITE_IOCAP_SEQUENTIAL;
}

static const sqlite3_io_methods io_methods = {
    .iVersion = 1,
    .xClose = x_close,
    .xRead = x_read,
    .xWrite = x_write,
    .xTruncate = x_truncate,
    .xSync = x_sync,
    .xFileSize = x_file_size,
    .xLock = x_lock,
    .xUnlock = x_unlock,
    .xCheckReservedLock = x_check_reserved,
    .xFileControl = x_file_control,
    .xSectorSize = x_sector_size,
    .xDeviceCharacteristics = x_device_characteristics,
};

/* ---- the VFS ------------------------------------------------------------------------- */

static int open_in_image(struct ivfs *v, const char *name, struct ifile *f, int flags) {
    int oflags = (flags & SQLITE_OPEN_READWRITE) ? O_RDWR : O_RDONLY;
    if (flags & SQLITE_OPEN_CREATE) oflags |= O_CREAT;
    if (flags & SQLITE_OPEN_EXCLUSIVE) oflags |= O_EXCL;
    int fd = intact_embed_open_file(v->e, name, oflags, 0644);
    if (fd < 0) return failed(SQLITE_CANTOPEN, "opening", name);
    struct intact_embed_stat st;
    if (intact_embed_fstat(v->e, fd, &st) != 0 || !(f->lock = lock_ref(st.ino)) ||
        !(f->path = sqlite3_mprintf("%s", name))) {
        intact_embed_close_file(v->e, fd);
        if (f->lock) lock_unref(f->lock);
        return SQLITE_CANTOPEN;
    }
    f->e = v->e;
    f->fd = fd;
    f->tx = 0;
    f->level = SQLITE_LOCK_NONE;
    f->base.pMethods = &io_methods;
    return SQLITE_OK;
}

static int x_open(sqlite3_vfs *pv, const char *name, sqlite3_file *pf, int flags, int *out) {
    struct ivfs *v = vfs_of(pv);
    pf->pMethods = NULL;
    if (!name || (flags & (SQLITE_OPEN_TEMP_DB | SQLITE_OPEN_TEMP_JOURNAL | SQLITE_OPEN_SUBJOURNAL |
                           SQLITE_OPEN_TRANSIENT_DB))) {
        /* Nothing here must survive a crash: SQLite's default VFS, in this same memory
         * (szOsFile covers both). */
        return v->parent->xOpen(v->parent, name, pf, flags, out);
    }
    if (flags & (SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_SUPER_JOURNAL | SQLITE_OPEN_WAL)) {
        sqlite3_log(SQLITE_CANTOPEN,
                    "intact VFS: %s: no journal or WAL file in the image; each commit is an "
                    "AD-transaction: set PRAGMA journal_mode=MEMORY",
                    name);
        return SQLITE_CANTOPEN;
    }
    int rc = open_in_image(v, name, (struct ifile *)pf, flags);
    if (rc == SQLITE_OK && out) *out = flags;
    return rc;
}

static int x_delete(sqlite3_vfs *pv, const char *name, int sync_dir) {
    (void)sync_dir;
    if (intact_embed_unlink(vfs_of(pv)->e, name) == 0) return SQLITE_OK;
    if (errno == ENOENT) return SQLITE_IOERR_DELETE_NOENT;
    return failed(SQLITE_IOERR_DELETE, "deleting", name);
}

static int x_access(sqlite3_vfs *pv, const char *name, int what, int *out) {
    (void)what; /* the owner may read and write everything in its image */
    struct intact_embed_stat st;
    *out = intact_embed_stat(vfs_of(pv)->e, name, &st) == 0;
    if (!*out && errno != ENOENT && errno != ENOTDIR)
        return failed(SQLITE_IOERR_ACCESS, "stat of", name);
    return SQLITE_OK;
}

/* Paths are in the image, from its root. */
static int x_full_pathname(sqlite3_vfs *pv, const char *name, int n, char *out) {
    (void)pv;
    int len = snprintf(out, (size_t)n, "%s%s", name[0] == '/' ? "" : "/", name);
    return len < 0 || len >= n ? SQLITE_CANTOPEN : SQLITE_OK;
}

static void *x_dl_open(sqlite3_vfs *pv, const char *p) {
    return vfs_of(pv)->parent->xDlOpen(vfs_of(pv)->parent, p);
}
static void x_dl_error(sqlite3_vfs *pv, int n, char *msg) {
    vfs_of(pv)->parent->xDlError(vfs_of(pv)->parent, n, msg);
}
static void (*x_dl_sym(sqlite3_vfs *pv, void *h, const char *s))(void) {
    return vfs_of(pv)->parent->xDlSym(vfs_of(pv)->parent, h, s);
}
static void x_dl_close(sqlite3_vfs *pv, void *h) {
    vfs_of(pv)->parent->xDlClose(vfs_of(pv)->parent, h);
}
static int x_randomness(sqlite3_vfs *pv, int n, char *out) {
    return vfs_of(pv)->parent->xRandomness(vfs_of(pv)->parent, n, out);
}
static int x_sleep(sqlite3_vfs *pv, int us) {
    return vfs_of(pv)->parent->xSleep(vfs_of(pv)->parent, us);
}
static int x_current_time(sqlite3_vfs *pv, double *t) {
    return vfs_of(pv)->parent->xCurrentTime(vfs_of(pv)->parent, t);
}
static int x_last_error(sqlite3_vfs *pv, int n, char *msg) {
    (void)pv;
    if (n > 0) snprintf(msg, (size_t)n, "%s", intact_embed_errmsg());
    return 0;
}

int intact_sqlite_vfs_register(intact_embed *e, const char *name, int make_default) {
    sqlite3_vfs *parent = sqlite3_vfs_find(NULL);
    if (!e || !name || !parent) return SQLITE_MISUSE;
    struct ivfs *v = calloc(1, sizeof *v);
    if (!v) return SQLITE_NOMEM;
    int sz = parent->szOsFile > (int)sizeof(struct ifile) ? parent->szOsFile : (int)sizeof(struct ifile);
    v->parent = parent;
    v->e = e;
    v->base = (sqlite3_vfs){
        .iVersion = 1,
        .szOsFile = sz,
        .mxPathname = parent->mxPathname,
        .zName = name,
        .xOpen = x_open,
        .xDelete = x_delete,
        .xAccess = x_access,
        .xFullPathname = x_full_pathname,
        .xDlOpen = x_dl_open,
        .xDlError = x_dl_error,
        .xDlSym = x_dl_sym,
        .xDlClose = x_dl_close,
        .xRandomness = x_randomness,
        .xSleep = x_sleep,
        .xCurrentTime = x_current_time,
        .xGetLastError = x_last_error,
    };
    int rc = sqlite3_vfs_register(&v->base, make_default);
    if (rc != SQLITE_OK) free(v);
    return rc;
}

/* ---- setup from the environment (see intact_embed.h) ---------------------------------- */

static intact_embed *env_image;
static int env_counters;

static void close_env_image(void) {
    if (!env_image) return;
    struct intact_embed_counters c;
    if (env_counters && intact_embed_counters(env_image, &c) == 0)
        fprintf(stderr, "intact_embed counters: stores %llu bytes_stored %llu lines_flushed %llu fences %llu\n",
                (unsigned long long)c.stores, (unsigned long long)c.bytes_stored,
                (unsigned long long)c.lines_flushed, (unsigned long long)c.fences);
    if (intact_embed_close(env_image) != 0)
        fprintf(stderr, "intact_embed: closing the image: %s\n", intact_embed_errmsg());
    env_image = NULL;
}

int intact_sqlite_setup_from_env(void) {
    const char *img = getenv("INTACT_EMBED_IMAGE");
    if (!img || !*img) {
        fprintf(stderr, "intact_embed: INTACT_EMBED_IMAGE names no image (set it to a pmem image made "
                        "with `intact fs mkfs IMG --device pmem`)\n");
        return 1;
    }
    const char *ns = getenv("INTACT_EMBED_NO_SYNC");
    const char *cn = getenv("INTACT_EMBED_COUNTERS");
    env_counters = cn && strcmp(cn, "1") == 0;
    env_image = intact_embed_open(img, ns && strcmp(ns, "1") == 0 ? INTACT_EMBED_NO_SYNC : 0);
    if (!env_image) {
        fprintf(stderr, "intact_embed: %s\n", intact_embed_errmsg());
        return 1;
    }
    int rc = intact_sqlite_vfs_register(env_image, "intact", 1);
    if (rc != SQLITE_OK) {
        fprintf(stderr, "intact_embed: registering the SQLite VFS: %s\n", sqlite3_errstr(rc));
        return 1;
    }
    atexit(close_env_image);
    return 0;
}
