/* SQLite study checker: check <crash_dir> <stdout_file> (ALICE contract).
 * Opens the crashed database as any application's first connection would (a hot journal
 * is rolled back, a WAL replayed), then checks, in order:
 *   - it opens and PRAGMA integrity_check says ok;
 *   - atomicity and ordering: the rows are exactly 1..k, each with its full value;
 *   - durability: table t exists if "created" was printed, every "committed N" row exists;
 *   - a new row can be written.
 * On failure prints `consequence: CLASS: detail` (thesis Table 4.3) and exits 1.
 * (C rather than Python: it runs on every crash state, and startup time dominates.) */
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int fail(const char *cls, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "consequence: %s: ", cls);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: check <crash_dir> <stdout_file>\n");
        return 2;
    }
    int created = 0, committed[64] = {0}, ncommitted = 0;
    FILE *out = fopen(argv[2], "r");
    char line[256];
    while (out && fgets(line, sizeof line, out)) {
        int n;
        if (strcmp(line, "created\n") == 0) created = 1;
        if (sscanf(line, "committed %d", &n) == 1 && ncommitted < 64) committed[ncommitted++] = n;
    }
    if (out) fclose(out);

    char path[4096];
    snprintf(path, sizeof path, "%s/test.db", argv[1]);
    struct stat st;
    if (stat(path, &st) != 0) {
        if (created) fail("data-loss", "test.db is missing although the table's creation was reported");
        return 0;
    }
    sqlite3 *db;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
        fail("cannot-open", "opening test.db: %s", sqlite3_errmsg(db));
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL) != SQLITE_OK)
        fail("cannot-open", "opening test.db: %s", sqlite3_errmsg(db));
    int rc = sqlite3_step(q);
    if (rc != SQLITE_ROW) fail("cannot-open", "integrity_check: %s", sqlite3_errmsg(db));
    if (strcmp((const char *)sqlite3_column_text(q, 0), "ok") != 0)
        fail("silent-error", "integrity_check: %s", sqlite3_column_text(q, 0));
    sqlite3_finalize(q);

    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE name='t'", -1, &q, NULL) != SQLITE_OK ||
        sqlite3_step(q) != SQLITE_ROW)
        fail("failed-reads-writes", "reading the schema: %s", sqlite3_errmsg(db));
    int has_t = sqlite3_column_int(q, 0) == 1;
    sqlite3_finalize(q);
    if (!has_t && created) fail("data-loss", "table t is missing although its creation was reported");

    int present[64] = {0}, k = 0;
    if (has_t) {
        if (sqlite3_prepare_v2(db, "SELECT id, v FROM t ORDER BY id", -1, &q, NULL) != SQLITE_OK)
            fail("failed-reads-writes", "SELECT from t: %s", sqlite3_errmsg(db));
        while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
            int id = sqlite3_column_int(q, 0);
            const char *v = (const char *)sqlite3_column_text(q, 1);
            if (id != k + 1) fail("silent-error", "rows are not a prefix of the committed ones: row %d after %d rows", id, k);
            char expect[1501];
            memset(expect, 64 + id, 1500);
            expect[1500] = 0;
            if (!v || strcmp(v, expect) != 0)
                fail("silent-error", "row %d has a wrong value (%d bytes)", id, v ? (int)strlen(v) : -1);
            present[id] = 1;
            k++;
        }
        if (rc != SQLITE_DONE) fail("failed-reads-writes", "SELECT from t: %s", sqlite3_errmsg(db));
        sqlite3_finalize(q);
    }
    for (int i = 0; i < ncommitted; i++)
        if (committed[i] > 0 && committed[i] < 64 && !present[committed[i]])
            fail("data-loss", "committed row %d is missing (%d rows present)", committed[i], k);
    const char *w = has_t ? "INSERT INTO t VALUES(1000, 'x')"
                          : "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL); INSERT INTO t VALUES(1000, 'x')";
    char *err = NULL;
    if (sqlite3_exec(db, w, NULL, NULL, &err) != SQLITE_OK) fail("failed-reads-writes", "writing after recovery: %s", err);
    sqlite3_close(db);
    return 0;
}
