/* SQLite with a rollback journal (the seeds' OptFS paper, `001` §7.2): transactions that
 * each insert several rows, journal_mode=DELETE, synchronous=FULL (the study's
 * sqlite-rollback-full configuration, study/sqlite). One binary is the workload and a
 * consistency-only checker (ALICE contract: exit 0 = consistent).
 *
 *   sqlite_txn run       in an empty directory: creates test.db, table t, then TXNS
 *                        transactions of ROWS rows (1,500 bytes each), printing
 *                        "committed N" after each COMMIT returns
 *   sqlite_txn check CRASH_DIR STDOUT_FILE
 *       the database opens (a hot journal is rolled back), PRAGMA integrity_check says
 *       ok, and t holds exactly the rows of transactions 1..k for some k, each row whole:
 *       every transaction all or nothing, in order. No durability demand: what was
 *       printed is not read (a missing test.db or table t is consistent).
 *
 * Linked with the system's libsqlite3 (-lsqlite3). */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TXNS 4
#define ROWS 3
#define VLEN 1500

static sqlite3 *db;

static void exec(const char *sql) {
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "sqlite_txn: %s: %s\n", sql, err ? err : "?");
        exit(2);
    }
}

static int run(void) {
    if (sqlite3_open("test.db", &db) != SQLITE_OK) {
        fprintf(stderr, "sqlite_txn: open: %s\n", sqlite3_errmsg(db));
        return 2;
    }
    exec("PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL;");
    exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL);");
    printf("created\n");
    fflush(stdout);
    for (int tx = 1; tx <= TXNS; tx++) {
        exec("BEGIN;");
        for (int r = 0; r < ROWS; r++) {
            int id = (tx - 1) * ROWS + r + 1;
            char sql[200];
            snprintf(sql, sizeof sql, "INSERT INTO t VALUES(%d, printf('%%.%dc', char(%d)));", id, VLEN, 64 + id);
            exec(sql);
        }
        exec("COMMIT;");
        printf("committed %d\n", tx);
        fflush(stdout);
    }
    sqlite3_close(db);
    return 0;
}

static int bad(const char *msg, const char *detail) {
    fprintf(stderr, "%s%s\n", msg, detail ? detail : "");
    return 1;
}

static int check(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/test.db", dir);
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) return bad("cannot open test.db: ", sqlite3_errmsg(db));
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL) != SQLITE_OK || sqlite3_step(q) != SQLITE_ROW)
        return bad("integrity_check does not run: ", sqlite3_errmsg(db));
    if (strcmp((const char *)sqlite3_column_text(q, 0), "ok") != 0) return bad("integrity_check: ", (const char *)sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE name='t'", -1, &q, NULL) != SQLITE_OK || sqlite3_step(q) != SQLITE_ROW)
        return bad("reading the schema: ", sqlite3_errmsg(db));
    int has_t = sqlite3_column_int(q, 0) == 1;
    sqlite3_finalize(q);
    if (!has_t) return 0;
    if (sqlite3_prepare_v2(db, "SELECT id, v FROM t ORDER BY id", -1, &q, NULL) != SQLITE_OK) return bad("SELECT: ", sqlite3_errmsg(db));
    int k = 0, rc;
    char want[VLEN + 1], d[80];
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        int id = sqlite3_column_int(q, 0);
        const char *v = (const char *)sqlite3_column_text(q, 1);
        if (id != k + 1) {
            snprintf(d, sizeof d, "row %d after %d rows", id, k);
            return bad("rows are not a prefix: ", d);
        }
        memset(want, 64 + id, VLEN);
        want[VLEN] = 0;
        if (!v || strcmp(v, want) != 0) {
            snprintf(d, sizeof d, "row %d", id);
            return bad("a row is torn: ", d);
        }
        k++;
    }
    if (rc != SQLITE_DONE) return bad("SELECT: ", sqlite3_errmsg(db));
    sqlite3_finalize(q);
    if (k % ROWS != 0) {
        snprintf(d, sizeof d, "%d rows, transactions have %d", k, ROWS);
        return bad("a transaction is partly there: ", d);
    }
    sqlite3_close(db);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "run") == 0) return run();
    if (argc == 4 && strcmp(argv[1], "check") == 0) return check(argv[2]);
    fprintf(stderr, "usage: sqlite_txn run | check CRASH_DIR STDOUT_FILE\n");
    return 2;
}
