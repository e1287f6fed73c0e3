/* SQLite study checker: check [--durability=documented|lay] <crash_dir> <stdout_file>
 * (ALICE contract). Opens the crashed database as any application's first connection
 * would (a hot journal is rolled back, a WAL replayed), then runs every rule, in two layers
 * (issue 32); each failing rule prints `rule: LAYER: NAME: CLASS: detail`, and the one
 * `consequence: CLASS: detail` line (thesis Table 4.3) comes from the first failing
 * documented rule, else the first failing lay rule (`layer: ...` says which). Exit 1 if
 * any rule fails.
 * documented (sqlite.org/transactional.html: transactions are atomic, consistent, isolated
 * and durable across program crashes, OS crashes and power failures):
 *   - opens: it opens and PRAGMA integrity_check says ok (atomiccommit.html, "Hot Rollback
 *     Journals"; wal.html);
 *   - atomic: the rows are exactly 1..k, each with its full value;
 * durable (its layer is the study configuration's, --durability): table t exists if
 *   "created" was printed, every "committed N" row exists. Documented with synchronous=FULL
 *   in WAL mode and EXTRA in rollback mode; stricter than the documentation with FULL in
 *   rollback mode (pragma.html#pragma_synchronous: EXTRA adds durability after a power loss)
 *   and NORMAL in WAL mode ("might roll back following a power loss");
 * lay: writable: a new row can be written after recovery.
 * (C rather than Python: it runs on every crash state, and startup time dominates.) */
#include <sqlite3.h>
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { MAX_ROWS = 64, MAX_FAILURES = 8 };

struct failure {
    const char *layer, *name, *cls;
    char detail[512];
};
static struct failure failures[MAX_FAILURES];
static int nfailures;

static void failed(const char *layer, const char *name, const char *cls, const char *fmt, ...) {
    assert(nfailures < MAX_FAILURES);
    struct failure *f = &failures[nfailures++];
    f->layer = layer, f->name = name, f->cls = cls;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->detail, sizeof f->detail, fmt, ap);
    va_end(ap);
}

/* Prints every failure, then the consequence of the first documented one (else the first). */
static int report(void) {
    if (nfailures == 0) return 0;
    const struct failure *first = &failures[0];
    for (int i = 0; i < nfailures; i++) {
        const struct failure *f = &failures[i];
        fprintf(stderr, "rule: %s: %s: %s: %s\n", f->layer, f->name, f->cls, f->detail);
        if (strcmp(f->layer, "documented") == 0 && strcmp(first->layer, "documented") != 0) first = f;
    }
    fprintf(stderr, "layer: %s\nconsequence: %s: %s\n", first->layer, first->cls, first->detail);
    return 1;
}

/* What the workload printed: whether the table's creation, and which commits. */
struct printed {
    int created, committed[MAX_ROWS], ncommitted;
};

static struct printed read_printed(const char *path) {
    struct printed p = {0};
    FILE *out = fopen(path, "r");
    char line[256];
    while (out && fgets(line, sizeof line, out)) {
        int n;
        if (strcmp(line, "created\n") == 0) p.created = 1;
        if (sscanf(line, "committed %d", &n) == 1 && p.ncommitted < MAX_ROWS) p.committed[p.ncommitted++] = n;
    }
    if (out) fclose(out);
    return p;
}

/* Rule `opens`: 1 if the database opened and its integrity check passed enough to read on. */
static int rule_opens(sqlite3 *db, int open_rc) {
    if (open_rc != SQLITE_OK) {
        failed("documented", "opens", "cannot-open", "opening test.db: %s", sqlite3_errmsg(db));
        return 0;
    }
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &q, NULL) != SQLITE_OK || sqlite3_step(q) != SQLITE_ROW) {
        failed("documented", "opens", "cannot-open", "integrity_check: %s", sqlite3_errmsg(db));
        return 0;
    }
    if (strcmp((const char *)sqlite3_column_text(q, 0), "ok") != 0)
        failed("documented", "opens", "silent-error", "integrity_check: %s", sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    return 1;
}

/* Rule `atomic`: rows 1..k with full values. Fills present[], returns k, or -1 if t cannot
 * be read (*has_t tells whether the table exists). */
static int rule_atomic(sqlite3 *db, int present[], int *has_t) {
    sqlite3_stmt *q;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE name='t'", -1, &q, NULL) != SQLITE_OK ||
        sqlite3_step(q) != SQLITE_ROW) {
        failed("documented", "atomic", "failed-reads-writes", "reading the schema: %s", sqlite3_errmsg(db));
        return -1;
    }
    *has_t = sqlite3_column_int(q, 0) == 1;
    sqlite3_finalize(q);
    int k = 0, rc, wrong = 0;
    if (!*has_t) return 0;
    if (sqlite3_prepare_v2(db, "SELECT id, v FROM t ORDER BY id", -1, &q, NULL) != SQLITE_OK) {
        failed("documented", "atomic", "failed-reads-writes", "SELECT from t: %s", sqlite3_errmsg(db));
        return -1;
    }
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        int id = sqlite3_column_int(q, 0);
        const char *v = (const char *)sqlite3_column_text(q, 1);
        char expect[1501];
        memset(expect, 64 + id, 1500);
        expect[1500] = 0;
        if (!wrong && id != k + 1)
            wrong = 1, failed("documented", "atomic", "silent-error", "rows are not a prefix of the committed ones: row %d after %d rows", id, k);
        else if (!wrong && (!v || strcmp(v, expect) != 0))
            wrong = 1, failed("documented", "atomic", "silent-error", "row %d has a wrong value (%d bytes)", id, v ? (int)strlen(v) : -1);
        if (id > 0 && id < MAX_ROWS) present[id] = 1;
        k++;
    }
    if (rc != SQLITE_DONE) failed("documented", "atomic", "failed-reads-writes", "SELECT from t: %s", sqlite3_errmsg(db));
    sqlite3_finalize(q);
    return k;
}

/* Rule `durable`: what was reported created or committed is there. */
static void rule_durable(const char *layer, const struct printed *p, int has_t, const int present[], int k) {
    if (!has_t && p->created) {
        failed(layer, "durable", "data-loss", "table t is missing although its creation was reported");
        return;
    }
    for (int i = 0; i < p->ncommitted; i++) {
        int n = p->committed[i];
        if (n > 0 && n < MAX_ROWS && !present[n]) {
            failed(layer, "durable", "data-loss", "committed row %d is missing (%d rows present)", n, k);
            return;
        }
    }
}

static void rule_writable(sqlite3 *db, int has_t) {
    const char *w = has_t ? "INSERT INTO t VALUES(1000, 'x')"
                          : "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL); INSERT INTO t VALUES(1000, 'x')";
    char *err = NULL;
    if (sqlite3_exec(db, w, NULL, NULL, &err) != SQLITE_OK)
        failed("lay", "writable", "failed-reads-writes", "writing after recovery: %s", err ? err : "?");
    sqlite3_free(err);
}

int main(int argc, char **argv) {
    const char *durability = "documented";
    if (argc == 4 && strncmp(argv[1], "--durability=", 13) == 0) durability = argv[1] + 13, argv++, argc--;
    if (argc != 3 || (strcmp(durability, "documented") != 0 && strcmp(durability, "lay") != 0)) {
        fprintf(stderr, "usage: check [--durability=documented|lay] <crash_dir> <stdout_file>\n");
        return 2;
    }
    struct printed p = read_printed(argv[2]);
    char path[4096];
    snprintf(path, sizeof path, "%s/test.db", argv[1]);
    struct stat st;
    if (stat(path, &st) != 0) {  /* crash before the database file existed */
        if (p.created) failed(durability, "durable", "data-loss", "test.db is missing although the table's creation was reported");
        return report();
    }
    sqlite3 *db = NULL;
    int open_rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
    int present[MAX_ROWS] = {0}, has_t = 0;
    if (rule_opens(db, open_rc)) {
        int k = rule_atomic(db, present, &has_t);
        if (k >= 0) {
            rule_durable(durability, &p, has_t, present, k);
            rule_writable(db, has_t);
        }
    }
    sqlite3_close(db);
    return report();
}
