/* The atomic update of two SQLite databases, timed: CFS (the seeds' paper `003`), §1
 * Figure 1 (cfs_begin; write db1; write db2; cfs_commit) against Figure 2 (SQLite's
 * multi-database commit: a rollback journal per database plus a super-journal, also called
 * the master journal, and a long chain of fsyncs), the microbenchmark of §7.2 / Figure 4.
 * For bench/cfs/bench.sh.
 *
 *   gcc -O2 -I target/sqlite-batch -o two_db bench/cfs/two_db.c target/sqlite-batch/sqlite3-plain.o -lm
 *   two_db DIR --mode master|region|verify [--n 200] [--rows 100] [--row-bytes 100]
 *              [--sync none|syncfs:PATH|streamsync:PATH] [--blockdev loopN] [--label L]
 *
 * Set-up (not timed): DIR/db1.db and DIR/db2.db, each table t(id INTEGER PRIMARY KEY,
 * n INTEGER, v BLOB) with --rows rows (n = 0), created with journal_mode=DELETE and
 * synchronous=FULL; db2.db is ATTACHed to db1.db's connection as `db2`. Then, per mode:
 *   master  both databases stay journal_mode=DELETE, synchronous=FULL: a transaction that
 *           changes both commits through a super-journal (Figure 2);
 *   region  both databases journal_mode=OFF, synchronous=OFF (the CFS port of SQLite, §6:
 *           the file system gives atomicity), and every transaction is wrapped in
 *           ioctl(DIR, BEGIN) ... ioctl(DIR, COMMIT) (intactfs's CFS regions; fails on any
 *           other file system: BEGIN is ENOTTY there).
 * then --sync. Then N transactions, each timed from BEGIN to the return of COMMIT:
 *   [ioctl BEGIN] BEGIN; UPDATE main.t SET n = n + 1, v = ?blob WHERE id = ?k;
 *                        UPDATE db2.t  SET n = n + 1, v = ?blob WHERE id = ?k; COMMIT [ioctl COMMIT]
 * with k = the transaction number modulo --rows + 1 and the same random --row-bytes blob for
 * both (a 100-byte entry by default, one page of each database changes). After the loop,
 * --sync (timed separately), and the check of `verify` below runs in the same connection.
 *
 *   verify  (no set-up, nothing written) opens DIR/db1.db and DIR/db2.db afresh (a hot
 *           journal would be rolled back), and checks: PRAGMA integrity_check is ok for both;
 *           every row has the same n and v in both; both hold the same number of updates
 *           (sum of n), and with --n that number is N. Prints one JSON line.
 *
 * Prints one JSON line: ops (transactions), secs, ops_per_s, lat_median_us, lat_p99_us,
 * lat_mean_us, sync_secs, updates_db1, updates_db2, and with --blockdev disk_flushes,
 * disk_bytes (during the loop) and sync_disk_flushes (the final sync). Exit 1 on any failure
 * (a region still open is aborted first). */
#include "../bench_sqlite.h"

/* intactfs's CFS ioctls: _IO(0xCC, 7..9), as INTACT_IOC_BEGIN/COMMIT/ABORT in
 * libintact/include/intact.h (and crates/intactfs-fuse/src/control.rs). Defined here so
 * the benchmark does not depend on libintact. */
#define CFS_IOC_BEGIN 0xCC07
#define CFS_IOC_COMMIT 0xCC08
#define CFS_IOC_ABORT 0xCC09

static int mountfd = -1, in_region = 0;

/* die() aborts a region still open (bench_at_die). */
static void abort_region(void) {
    if (in_region && mountfd >= 0) ioctl(mountfd, CFS_IOC_ABORT, 0);
    in_region = 0;
}

static void query_text(const char *sql, const char *want) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
        errno = 0;
        die("%s: %s", sql, sqlite3_errmsg(db));
    }
    const char *got = (const char *)sqlite3_column_text(st, 0);
    if (!got || strcmp(got, want) != 0) {
        errno = 0;
        die("%s returned '%s', expected '%s'", sql, got ? got : "(null)", want);
    }
    sqlite3_finalize(st);
}

static sqlite3_stmt *prepare(const char *sql) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        errno = 0;
        die("prepare %s: %s", sql, sqlite3_errmsg(db));
    }
    return st;
}

static void step_done(sqlite3_stmt *st, long k) {
    if (sqlite3_step(st) != SQLITE_DONE) {
        errno = 0;
        die("transaction %ld: %s: %s", k, sqlite3_sql(st), sqlite3_errmsg(db));
    }
    sqlite3_reset(st);
}

static void open_both(void) {
    if (sqlite3_open("db1.db", &db) != SQLITE_OK) {
        errno = 0;
        die("db1.db: open: %s", sqlite3_errmsg(db));
    }
    exec_sql("ATTACH DATABASE 'db2.db' AS db2");
}

/* Both databases: consistent, the same rows, the same number of updates. */
static void check(long expect, long long *u1, long long *u2) {
    query_text("PRAGMA main.integrity_check", "ok");
    query_text("PRAGMA db2.integrity_check", "ok");
    long long r1 = query_int("SELECT count(*) FROM main.t"), r2 = query_int("SELECT count(*) FROM db2.t");
    if (r1 != r2) {
        errno = 0;
        die("db1 has %lld rows, db2 %lld", r1, r2);
    }
    long long differ = query_int("SELECT count(*) FROM main.t a JOIN db2.t b USING(id) WHERE a.n IS NOT b.n OR a.v IS NOT b.v");
    *u1 = query_int("SELECT coalesce(sum(n), 0) FROM main.t");
    *u2 = query_int("SELECT coalesce(sum(n), 0) FROM db2.t");
    if (differ) {
        errno = 0;
        die("%lld rows differ between db1 and db2 (updates: db1 %lld, db2 %lld)", differ, *u1, *u2);
    }
    if (*u1 != *u2) {
        errno = 0;
        die("db1 holds %lld updates, db2 %lld", *u1, *u2);
    }
    if (expect >= 0 && *u1 != expect) {
        errno = 0;
        die("both databases hold %lld updates, expected %ld", *u1, expect);
    }
}

static void usage(void) {
    fprintf(stderr, "usage: two_db DIR --mode master|region|verify [--n 200] [--rows 100] [--row-bytes 100] "
                    "[--sync none|syncfs:PATH|streamsync:PATH] [--blockdev loopN] [--label L]\n");
    exit(2);
}

int main(int argc, char **argv) {
    bench_name = "two_db";
    bench_at_die = abort_region;
    if (argc < 2 || argv[1][0] == '-') usage();
    const char *dir = argv[1], *mode = NULL, *sync_spec = "none", *blockdev = NULL, *label = "";
    long n = -1, rows = 100, row_bytes = 100;
    for (int i = 2; i < argc; i += 2) {
        const char *a = argv[i], *v = opt_value(argc, argv, i);
        if (!strcmp(a, "--mode")) mode = v;
        else if (!strcmp(a, "--n")) n = atol(v);
        else if (!strcmp(a, "--rows")) rows = atol(v);
        else if (!strcmp(a, "--row-bytes")) row_bytes = atol(v);
        else if (!common_option(a, v, &sync_spec, &blockdev, &label)) bad_option(a);
    }
    if (!mode) usage();
    int region = !strcmp(mode, "region");
    if (!region && strcmp(mode, "master") && strcmp(mode, "verify")) usage();
    if (rows < 1 || row_bytes < 1 || (strcmp(mode, "verify") && n < 1)) {
        fprintf(stderr, "two_db: --n (except for verify), --rows and --row-bytes must be positive\n");
        return 2;
    }
    if (chdir(dir) != 0) die("%s: chdir", dir);

    if (!strcmp(mode, "verify")) {
        if (access("db1.db", F_OK) != 0 || access("db2.db", F_OK) != 0) die("%s: db1.db or db2.db", dir);
        open_both();
        long long u1, u2;
        check(n, &u1, &u2);
        printf("{\"bench\": \"two_db\", \"mode\": \"verify\", \"label\": \"%s\", \"rows\": %lld, \"updates_db1\": %lld, "
               "\"updates_db2\": %lld, \"consistent\": true}\n",
               label, query_int("SELECT count(*) FROM main.t"), u1, u2);
        sqlite3_close(db);
        return 0;
    }

    double *lat = calloc(n, sizeof *lat);
    unsigned char *blob = malloc(row_bytes);
    if (!lat || !blob) die("malloc");

    /* ---- set-up ---- */
    if (region) {
        mountfd = open(".", O_RDONLY | O_DIRECTORY);
        if (mountfd < 0) die("%s: open", dir);
        /* Probe: a region that changes nothing, before anything else (clear message). */
        if (ioctl(mountfd, CFS_IOC_BEGIN, 0) != 0) {
            int e = errno;
            errno = 0;
            die("%s: the CFS BEGIN ioctl (0xCC07) failed: %s%s", dir, strerror(e),
                e == ENOTTY ? " (not an intactfs mount: --mode region needs intactfs)" : "");
        }
        if (ioctl(mountfd, CFS_IOC_ABORT, 0) != 0) die("%s: the CFS ABORT ioctl (0xCC09)", dir);
    }
    if (access("db1.db", F_OK) == 0 || access("db2.db", F_OK) == 0) {
        errno = 0;
        die("%s: db1.db or db2.db exists already (give an empty directory)", dir);
    }
    open_both();
    exec_sql("PRAGMA main.journal_mode=DELETE");
    exec_sql("PRAGMA db2.journal_mode=DELETE");
    exec_sql("PRAGMA main.synchronous=FULL");
    exec_sql("PRAGMA db2.synchronous=FULL");
    exec_sql("CREATE TABLE main.t(id INTEGER PRIMARY KEY, n INTEGER NOT NULL, v BLOB)");
    exec_sql("CREATE TABLE db2.t(id INTEGER PRIMARY KEY, n INTEGER NOT NULL, v BLOB)");
    {
        char sql[256];
        snprintf(sql, sizeof sql,
                 "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < %ld) "
                 "INSERT INTO main.t SELECT i, 0, zeroblob(%ld) FROM c",
                 rows, row_bytes);
        exec_sql(sql);
        exec_sql("INSERT INTO db2.t SELECT * FROM main.t");
    }
    if (region) {
        query_text("PRAGMA main.journal_mode=OFF", "off");
        query_text("PRAGMA db2.journal_mode=OFF", "off");
        exec_sql("PRAGMA main.synchronous=OFF");
        exec_sql("PRAGMA db2.synchronous=OFF");
        if (query_int("PRAGMA main.synchronous") != 0 || query_int("PRAGMA db2.synchronous") != 0) {
            errno = 0;
            die("PRAGMA synchronous is not OFF");
        }
    } else {
        query_text("PRAGMA main.journal_mode", "delete");
        query_text("PRAGMA db2.journal_mode", "delete");
        if (query_int("PRAGMA main.synchronous") != 2 || query_int("PRAGMA db2.synchronous") != 2) {
            errno = 0;
            die("PRAGMA synchronous is not FULL");
        }
    }
    sqlite3_stmt *begin = prepare("BEGIN"), *commit = prepare("COMMIT");
    sqlite3_stmt *up1 = prepare("UPDATE main.t SET n = n + 1, v = ?1 WHERE id = ?2");
    sqlite3_stmt *up2 = prepare("UPDATE db2.t SET n = n + 1, v = ?1 WHERE id = ?2");

    /* ---- the measured loop, after --sync ---- */
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    struct timed tm;
    timed_start(&tm, blockdev, sync_spec);
    for (long k = 1; k <= n; k++) {
        random_bytes(&x, blob, row_bytes);
        long id = (k - 1) % rows + 1;
        double a = now();
        if (region) {
            if (ioctl(mountfd, CFS_IOC_BEGIN, 0) != 0) die("transaction %ld: ioctl BEGIN", k);
            in_region = 1;
        }
        step_done(begin, k);
        sqlite3_bind_blob(up1, 1, blob, (int)row_bytes, SQLITE_STATIC);
        sqlite3_bind_int64(up1, 2, id);
        step_done(up1, k);
        sqlite3_bind_blob(up2, 1, blob, (int)row_bytes, SQLITE_STATIC);
        sqlite3_bind_int64(up2, 2, id);
        step_done(up2, k);
        step_done(commit, k);
        if (region) {
            if (ioctl(mountfd, CFS_IOC_COMMIT, 0) != 0) die("transaction %ld: ioctl COMMIT", k);
            in_region = 0;
        }
        lat[k - 1] = now() - a;
    }
    timed_end(&tm, blockdev, sync_spec);

    /* ---- both databases hold every update ---- */
    sqlite3_finalize(begin);
    sqlite3_finalize(commit);
    sqlite3_finalize(up1);
    sqlite3_finalize(up2);
    long long u1, u2;
    check(n, &u1, &u2);
    sqlite3_close(db);
    if (mountfd >= 0) close(mountfd);

    printf("{\"bench\": \"two_db\", \"mode\": \"%s\", \"label\": \"%s\", \"n\": %ld, \"rows\": %ld, \"row_bytes\": %ld, ",
           mode, label, n, rows, row_bytes);
    print_ops(n, lat, &tm);
    print_disk(&tm);
    printf(", \"updates_db1\": %lld, \"updates_db2\": %lld, \"sqlite_version\": \"%s\"}\n", u1, u2, sqlite3_libversion());
    return 0;
}
