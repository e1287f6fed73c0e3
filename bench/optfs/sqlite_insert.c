/* SQLite inserts, each its own transaction, timed (OptFS, the seeds' paper `001`, §7: SQLite
 * with a rollback journal, its fsyncs turned into osyncs). For bench/optfs/bench.sh; the
 * crash-consistency side is bench/optfs/sqlite_txn.c and sqlite_states.sh.
 *
 *   gcc -O2 -o sqlite_insert bench/optfs/sqlite_insert.c -lsqlite3
 *   sqlite_insert DIR [--n 200] [--row-bytes 100] [--sync none|syncfs:PATH|streamsync:PATH]
 *                     [--blockdev loopN] [--label L]
 *
 * Set-up (not timed): DIR/bench.db with PRAGMA journal_mode=DELETE (the rollback journal,
 * SQLite's default) and synchronous=FULL, table t(id INTEGER PRIMARY KEY, v BLOB), then
 * --sync. Then N single-row INSERTs in autocommit mode (each its own transaction: journal
 * created, written and fsynced, database written and fsynced, journal deleted), each timed
 * from the step to its return. After the loop, --sync (timed separately), then the table
 * must hold N rows and PRAGMA integrity_check say ok.
 *
 * Prints one JSON line: ops (transactions), secs, ops_per_s, lat_median_us, lat_p99_us,
 * lat_mean_us, sync_secs, and with --blockdev disk_flushes, disk_bytes (the loop) and
 * sync_disk_flushes (the final sync). */
#include "../bench_common.h"
#include <sqlite3.h>
#include <stdint.h>

static sqlite3 *db;

static void exec_sql(const char *sql) {
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        errno = 0;
        die("%s: %s", sql, err ? err : sqlite3_errmsg(db));
    }
}

static long long query_int(const char *sql) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
        errno = 0;
        die("%s: %s", sql, sqlite3_errmsg(db));
    }
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

int main(int argc, char **argv) {
    bench_name = "sqlite_insert";
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: sqlite_insert DIR [--n 200] [--row-bytes 100] [--sync none|syncfs:PATH|streamsync:PATH] [--blockdev loopN] [--label L]\n");
        return 2;
    }
    const char *dir = argv[1], *sync_spec = "none", *blockdev = NULL, *label = "";
    long n = 200, row_bytes = 100;
    for (int i = 2; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "sqlite_insert: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--n")) n = atol(v);
        else if (!strcmp(a, "--row-bytes")) row_bytes = atol(v);
        else if (!strcmp(a, "--sync")) sync_spec = v;
        else if (!strcmp(a, "--blockdev")) blockdev = v;
        else if (!strcmp(a, "--label")) label = v;
        else {
            fprintf(stderr, "sqlite_insert: unknown option %s\n", a);
            return 2;
        }
    }
    if (n < 1 || row_bytes < 1) {
        fprintf(stderr, "sqlite_insert: --n and --row-bytes must be positive\n");
        return 2;
    }
    if (chdir(dir) != 0) die("%s: chdir", dir);
    double *lat = calloc(n, sizeof *lat);
    unsigned char *row = malloc(row_bytes);
    if (!lat || !row) die("malloc");

    /* ---- set-up ---- */
    if (sqlite3_open("bench.db", &db) != SQLITE_OK) {
        errno = 0;
        die("bench.db: open: %s", sqlite3_errmsg(db));
    }
    exec_sql("PRAGMA journal_mode=DELETE");
    exec_sql("PRAGMA synchronous=FULL");
    exec_sql("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)");
    if (query_int("PRAGMA synchronous") != 2) {
        errno = 0;
        die("PRAGMA synchronous is not FULL");
    }
    sqlite3_stmt *ins;
    if (sqlite3_prepare_v2(db, "INSERT INTO t(id, v) VALUES(?, ?)", -1, &ins, NULL) != SQLITE_OK) {
        errno = 0;
        die("prepare: %s", sqlite3_errmsg(db));
    }
    do_sync(sync_spec);

    /* ---- the measured loop ---- */
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    long long b0, f0, b1, f1, b2, f2;
    disk(blockdev, &b0, &f0);
    double t0 = now();
    for (long k = 1; k <= n; k++) {
        for (long i = 0; i < row_bytes; i++) {
            x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
            row[i] = (unsigned char)((x * 0x2545F4914F6CDD1DULL) >> 56);
        }
        double a = now();
        sqlite3_bind_int64(ins, 1, k);
        sqlite3_bind_blob(ins, 2, row, (int)row_bytes, SQLITE_STATIC);
        if (sqlite3_step(ins) != SQLITE_DONE) {
            errno = 0;
            die("insert %ld: %s", k, sqlite3_errmsg(db));
        }
        sqlite3_reset(ins);
        lat[k - 1] = now() - a;
    }
    double secs = now() - t0;
    disk(blockdev, &b1, &f1);
    double sync_secs = do_sync(sync_spec);
    disk(blockdev, &b2, &f2);

    /* ---- all rows there, database sound ---- */
    sqlite3_finalize(ins);
    long long rows = query_int("SELECT count(*) FROM t");
    if (rows != n) {
        errno = 0;
        die("%lld rows after %ld inserts", rows, n);
    }
    sqlite3_stmt *ic;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &ic, NULL) != SQLITE_OK || sqlite3_step(ic) != SQLITE_ROW ||
        strcmp((const char *)sqlite3_column_text(ic, 0), "ok") != 0) {
        errno = 0;
        die("integrity_check failed");
    }
    sqlite3_finalize(ic);
    sqlite3_close(db);

    double sum = 0;
    for (long i = 0; i < n; i++) sum += lat[i];
    qsort(lat, n, sizeof *lat, cmp_double);
    printf("{\"bench\": \"sqlite_insert\", \"label\": \"%s\", \"n\": %ld, \"row_bytes\": %ld, \"ops\": %ld, "
           "\"secs\": %.6f, \"ops_per_s\": %.3f, \"lat_median_us\": %.1f, \"lat_p99_us\": %.1f, "
           "\"lat_mean_us\": %.1f, \"sync_secs\": %.6f, \"disk_flushes\": %lld, \"disk_bytes\": %lld, "
           "\"sync_disk_flushes\": %lld, \"sqlite_version\": \"%s\"}\n",
           label, n, row_bytes, n, secs, n / secs, median(lat, n) * 1e6, percentile(lat, n, 99) * 1e6,
           sum / n * 1e6, sync_secs, f1 - f0, b1 - b0, f2 - f1, sqlite3_libversion());
    return 0;
}
