/*
 * sqlite-batch: a small driver for SQLite's batch-atomic-write path.
 *
 * Built twice by build.sh against the same amalgamation:
 *   sqlite-batch        -DSQLITE_ENABLE_BATCH_ATOMIC_WRITE
 *   sqlite-batch-plain  without it
 *
 * Usage:
 *   sqlite-batch DB insert N [ROWBYTES]   N one-row transactions, prints tps
 *   sqlite-batch DB loop [COUNT]          crash-test writer: rewrites all 50
 *                                         rows per transaction, prints
 *                                         "committed g" after each commit
 *                                         (forever unless COUNT is given)
 *   sqlite-batch DB check                 integrity_check + generation check
 *   sqlite-batch DB features              "batch_atomic yes|no"
 *
 * Environment: SQLITE_BATCH_JOURNAL, the journal mode insert and loop set (delete, the
 * default; wal; memory: the intactfs embedded VFS, libintact/sqlite/intact_vfs.c, whose
 * AD-transactions make the commit atomic); synchronous is FULL in every mode.
 * Built with -DDRIVER_SETUP=FUNCTION, main calls int FUNCTION(void) first (nonzero: exit
 * 1), e.g. intact_sqlite_setup_from_env to open DB inside an embedded pmem image.
 *
 * Exit codes: 0 ok, 1 SQLite error or inconsistent database, 2 bad usage.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sqlite3.h"

#define LOOP_ROWS 50       /* rows in the crash-test table */
#define LOOP_BLOB 1024     /* bytes of blob per row: ~3 rows per 4 KiB page */

static const char *prog = "sqlite-batch";

static void usage(void) {
    fprintf(stderr,
            "usage: %s DB insert N [ROWBYTES]   N transactions of one INSERT each "
            "(ROWBYTES default 100)\n"
            "       %s DB loop [COUNT]          crash-test writer, prints "
            "'committed g' per transaction (forever unless COUNT)\n"
            "       %s DB check                 integrity_check and same "
            "generation in all rows\n"
            "       %s DB features              prints 'batch_atomic yes|no'\n",
            prog, prog, prog, prog);
    exit(2);
}

/* Report a failed SQL statement and exit 1. */
static void die_sql(sqlite3 *db, const char *sql) {
    fprintf(stderr, "%s: SQL failed: %s\n  error: %s (code %d)\n", prog, sql,
            db ? sqlite3_errmsg(db) : "out of memory",
            db ? sqlite3_extended_errcode(db) : SQLITE_NOMEM);
    exit(1);
}

static void exec(sqlite3 *db, const char *sql) {
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "%s: SQL failed: %s\n  error: %s (code %d)\n", prog,
                sql, err ? err : sqlite3_errmsg(db),
                sqlite3_extended_errcode(db));
        sqlite3_free(err);
        exit(1);
    }
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) die_sql(db, sql);
    return st;
}

/* Run a statement that must not return rows. */
static void step_done(sqlite3 *db, sqlite3_stmt *st) {
    if (sqlite3_step(st) != SQLITE_DONE) die_sql(db, sqlite3_sql(st));
    sqlite3_reset(st);
}

static sqlite3 *open_db(const char *path, int flags) {
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, flags, NULL);
    if (rc != SQLITE_OK) {
        fprintf(stderr, "%s: cannot open %s: %s\n", prog, path,
                db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        exit(1);
    }
    sqlite3_extended_result_codes(db, 1);
    sqlite3_busy_timeout(db, 5000);
    return db;
}

static void close_db(sqlite3 *db) {
    if (sqlite3_close(db) != SQLITE_OK) {
        fprintf(stderr, "%s: close failed: %s\n", prog, sqlite3_errmsg(db));
        exit(1);
    }
}

/* The journal mode of SQLITE_BATCH_JOURNAL (rollback journal, DELETE, by default: the
 * configuration that can use batch atomic writes, which WAL, journal_mode=OFF and
 * synchronous=OFF never do) + full sync. */
static void set_pragmas(sqlite3 *db) {
    const char *want = getenv("SQLITE_BATCH_JOURNAL");
    if (!want || !*want) want = "delete";
    if (strcmp(want, "delete") && strcmp(want, "wal") && strcmp(want, "memory")) {
        fprintf(stderr, "%s: SQLITE_BATCH_JOURNAL=%s: expected delete, wal or memory\n", prog, want);
        exit(2);
    }
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA journal_mode=%s", want);
    sqlite3_stmt *st = prepare(db, sql);
    if (sqlite3_step(st) != SQLITE_ROW) die_sql(db, sql);
    const char *mode = (const char *)sqlite3_column_text(st, 0);
    if (!mode || strcmp(mode, want) != 0) {
        fprintf(stderr, "%s: %s returned '%s', expected '%s'\n", prog, sql,
                mode ? mode : "(null)", want);
        exit(1);
    }
    sqlite3_finalize(st);
    exec(db, "PRAGMA synchronous=FULL");
}

/* Strict decimal parsing for command-line numbers. */
static int parse_u64(const char *s, uint64_t max, uint64_t *out) {
    char *end;
    if (!s || !*s || *s == '-' || *s == '+') return 0;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max) return 0;
    *out = v;
    return 1;
}

/* splitmix64: deterministic filler, so check can recompute row contents. */
static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void fill(unsigned char *buf, size_t n, uint64_t seed) {
    uint64_t s = seed;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t r = splitmix64(&s);
        size_t k = n - i < 8 ? n - i : 8;
        memcpy(buf + i, &r, k);
    }
}

/* Blob content of row `id` at generation `g`. */
static void loop_blob(unsigned char *buf, int64_t g, int64_t id) {
    fill(buf, LOOP_BLOB, ((uint64_t)g << 20) ^ (uint64_t)id ^ 0x5151ba7c4ULL);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---------------------------------------------------------------- insert */

static int cmd_insert(const char *path, uint64_t n, uint64_t rowbytes) {
    sqlite3 *db = open_db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    set_pragmas(db);
    exec(db, "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB)");

    unsigned char *buf = malloc(rowbytes ? rowbytes : 1);
    if (!buf) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    sqlite3_stmt *begin = prepare(db, "BEGIN");
    sqlite3_stmt *ins = prepare(db, "INSERT INTO t(v) VALUES(?1)");
    sqlite3_stmt *commit = prepare(db, "COMMIT");

    double t0 = now();
    for (uint64_t i = 0; i < n; i++) {
        fill(buf, rowbytes, splitmix64(&seed));
        step_done(db, begin);
        if (sqlite3_bind_blob(ins, 1, buf, (int)rowbytes, SQLITE_STATIC) != SQLITE_OK)
            die_sql(db, sqlite3_sql(ins));
        step_done(db, ins);
        step_done(db, commit);
    }
    double secs = now() - t0;

    sqlite3_finalize(begin);
    sqlite3_finalize(ins);
    sqlite3_finalize(commit);
    free(buf);
    close_db(db);
    printf("transactions %" PRIu64 " seconds %.3f tps %.1f\n", n, secs,
           secs > 0 ? (double)n / secs : 0.0);
    return 0;
}

/* ------------------------------------------------------------------ loop */

/* Reads count/min/max generation of the crash-test table. */
static void loop_state(sqlite3 *db, int64_t *count, int64_t *gmin, int64_t *gmax) {
    const char *sql = "SELECT count(*), min(n), max(n) FROM t";
    sqlite3_stmt *st = prepare(db, sql);
    if (sqlite3_step(st) != SQLITE_ROW) die_sql(db, sql);
    *count = sqlite3_column_int64(st, 0);
    *gmin = sqlite3_column_int64(st, 1);
    *gmax = sqlite3_column_int64(st, 2);
    sqlite3_finalize(st);
}

static int cmd_loop(const char *path, int bounded, uint64_t limit) {
    sqlite3 *db = open_db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    set_pragmas(db);
    unsigned char blob[LOOP_BLOB];

    /* Setup (or resume after a crash): one transaction. */
    exec(db, "BEGIN IMMEDIATE");
    exec(db, "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, n INTEGER, v BLOB)");
    int64_t count, gmin, gmax;
    loop_state(db, &count, &gmin, &gmax);
    if (count == 0) {
        sqlite3_stmt *ins = prepare(db, "INSERT INTO t(id, n, v) VALUES(?1, 0, ?2)");
        for (int64_t id = 1; id <= LOOP_ROWS; id++) {
            loop_blob(blob, 0, id);
            sqlite3_bind_int64(ins, 1, id);
            sqlite3_bind_blob(ins, 2, blob, LOOP_BLOB, SQLITE_STATIC);
            step_done(db, ins);
        }
        sqlite3_finalize(ins);
        gmin = gmax = 0;
    } else if (count != LOOP_ROWS || gmin != gmax) {
        fprintf(stderr,
                "%s: table t has %" PRId64 " rows, generations %" PRId64
                "..%" PRId64 "; expected %d rows of one generation "
                "(run 'check', or use a fresh DB)\n",
                prog, count, gmin, gmax, LOOP_ROWS);
        return 1;
    }
    exec(db, "COMMIT");
    int64_t g = gmax;
    printf("committed %" PRId64 "\n", g);
    fflush(stdout);

    /* Each transaction rewrites every row: ~50 KiB of row data, i.e. page 1
     * (change counter) plus the 17 leaf pages of the table (3 rows each). */
    sqlite3_stmt *begin = prepare(db, "BEGIN");
    sqlite3_stmt *upd = prepare(db, "UPDATE t SET n=?1, v=?2 WHERE id=?3");
    sqlite3_stmt *commit = prepare(db, "COMMIT");
    for (uint64_t done = 0; !bounded || done < limit; done++) {
        g++;
        step_done(db, begin);
        for (int64_t id = 1; id <= LOOP_ROWS; id++) {
            loop_blob(blob, g, id);
            sqlite3_bind_int64(upd, 1, g);
            sqlite3_bind_blob(upd, 2, blob, LOOP_BLOB, SQLITE_STATIC);
            sqlite3_bind_int64(upd, 3, id);
            step_done(db, upd);
            if (sqlite3_changes(db) != 1) {
                fprintf(stderr, "%s: row %" PRId64 " missing\n", prog, id);
                return 1;
            }
        }
        step_done(db, commit);
        printf("committed %" PRId64 "\n", g);
        fflush(stdout);
    }
    sqlite3_finalize(begin);
    sqlite3_finalize(upd);
    sqlite3_finalize(commit);
    close_db(db);
    return 0;
}

/* ----------------------------------------------------------------- check */

static int cmd_check(const char *path) {
    /* Read-write (not create): opening may need to roll back a hot journal. */
    sqlite3 *db = open_db(path, SQLITE_OPEN_READWRITE);
    int bad = 0;

    const char *sql = "PRAGMA integrity_check";
    sqlite3_stmt *st = prepare(db, sql);
    int rc, rows = 0, ok = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *msg = (const char *)sqlite3_column_text(st, 0);
        rows++;
        if (msg && strcmp(msg, "ok") == 0) ok = 1;
        else printf("integrity_check: %s\n", msg ? msg : "(null)");
    }
    if (rc != SQLITE_DONE) die_sql(db, sql);
    sqlite3_finalize(st);
    if (!(ok && rows == 1)) bad = 1;

    sql = "SELECT id, n, v FROM t ORDER BY id";
    st = prepare(db, sql);
    int64_t nrows = 0, g = 0, gmin = INT64_MAX, gmax = INT64_MIN;
    unsigned char want[LOOP_BLOB];
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        int64_t n = sqlite3_column_int64(st, 1);
        const void *v = sqlite3_column_blob(st, 2);
        int vlen = sqlite3_column_bytes(st, 2);
        nrows++;
        if (n < gmin) gmin = n;
        if (n > gmax) gmax = n;
        if (nrows == 1) g = n;
        if (id != nrows) {
            printf("row ids not 1..%d: found id %" PRId64 " at position %" PRId64 "\n",
                   LOOP_ROWS, id, nrows);
            bad = 1;
        }
        loop_blob(want, n, id);
        if (vlen != LOOP_BLOB || memcmp(v, want, LOOP_BLOB) != 0) {
            printf("row %" PRId64 " (generation %" PRId64
                   "): blob does not match its generation (%d bytes)\n",
                   id, n, vlen);
            bad = 1;
        }
    }
    if (rc != SQLITE_DONE) die_sql(db, sql);
    sqlite3_finalize(st);
    if (nrows != LOOP_ROWS) {
        printf("table t has %" PRId64 " rows, expected %d\n", nrows, LOOP_ROWS);
        bad = 1;
    }
    if (nrows > 0 && gmin != gmax) {
        printf("torn transaction: rows carry generations %" PRId64 "..%" PRId64 "\n",
               gmin, gmax);
        bad = 1;
    }
    close_db(db);
    if (bad) {
        printf("inconsistent\n");
        return 1;
    }
    printf("consistent generation %" PRId64 "\n", g);
    return 0;
}

/* -------------------------------------------------------------- features */

static int cmd_features(const char *path) {
    sqlite3 *db = open_db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    sqlite3_file *f = NULL;
    int rc = sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &f);
    if (rc != SQLITE_OK || !f || !f->pMethods) {
        fprintf(stderr, "%s: SQLITE_FCNTL_FILE_POINTER failed (rc %d)\n", prog, rc);
        return 1;
    }
    /* The unix VFS issues F2FS_IOC_GET_FEATURES the first time the device
     * characteristics (or sector size) of the file are needed; the pager
     * does that when it opens the database. */
    int dc = f->pMethods->xDeviceCharacteristics
                 ? f->pMethods->xDeviceCharacteristics(f)
                 : 0;
    printf("batch_atomic %s\n", (dc & SQLITE_IOCAP_BATCH_ATOMIC) ? "yes" : "no");
    close_db(db);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 0 && argv[0]) {
        const char *slash = strrchr(argv[0], '/');
        prog = slash ? slash + 1 : argv[0];
    }
    if (argc < 3) usage();
#ifdef DRIVER_SETUP
    {
        int DRIVER_SETUP(void);
        if (DRIVER_SETUP() != 0) return 1;
    }
#endif
    const char *db = argv[1], *cmd = argv[2];
    if (!*db) usage();

    if (strcmp(cmd, "insert") == 0) {
        uint64_t n, rowbytes = 100;
        if (argc < 4 || argc > 5) usage();
        if (!parse_u64(argv[3], UINT64_MAX / 2, &n) || n == 0) usage();
        if (argc == 5 && !parse_u64(argv[4], 100000000, &rowbytes)) usage();
        return cmd_insert(db, n, rowbytes);
    }
    if (strcmp(cmd, "loop") == 0) {
        uint64_t limit = 0;
        if (argc > 4) usage();
        if (argc == 4 && !parse_u64(argv[3], UINT64_MAX / 2, &limit)) usage();
        return cmd_loop(db, argc == 4, limit);
    }
    if (strcmp(cmd, "check") == 0) {
        if (argc != 3) usage();
        return cmd_check(db);
    }
    if (strcmp(cmd, "features") == 0) {
        if (argc != 3) usage();
        return cmd_features(db);
    }
    usage();
    return 2;
}
