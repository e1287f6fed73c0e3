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
#include "../bench_sqlite.h"

int main(int argc, char **argv) {
    bench_name = "sqlite_insert";
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: sqlite_insert DIR [--n 200] [--row-bytes 100] [--sync none|syncfs:PATH|streamsync:PATH] [--blockdev loopN] [--label L]\n");
        return 2;
    }
    const char *dir = argv[1], *sync_spec = "none", *blockdev = NULL, *label = "";
    long n = 200, row_bytes = 100;
    for (int i = 2; i < argc; i += 2) {
        const char *a = argv[i], *v = opt_value(argc, argv, i);
        if (!strcmp(a, "--n")) n = atol(v);
        else if (!strcmp(a, "--row-bytes")) row_bytes = atol(v);
        else if (!common_option(a, v, &sync_spec, &blockdev, &label)) bad_option(a);
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

    /* ---- the measured loop, after --sync ---- */
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    struct timed tm;
    timed_start(&tm, blockdev, sync_spec);
    for (long k = 1; k <= n; k++) {
        random_bytes(&x, row, row_bytes);
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
    timed_end(&tm, blockdev, sync_spec);

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

    printf("{\"bench\": \"sqlite_insert\", \"label\": \"%s\", \"n\": %ld, \"row_bytes\": %ld, ", label, n, row_bytes);
    print_ops(n, lat, &tm);
    print_disk(&tm);
    printf(", \"sqlite_version\": \"%s\"}\n", sqlite3_libversion());
    return 0;
}
