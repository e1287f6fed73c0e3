/* SQLite study workload (thesis 004, section 4.2): create a database, commit
 * transactions one at a time (printing after each commit returns), enough data
 * to make the WAL checkpoint, close, reopen, commit once more.
 *   workload MODE SYNC      MODE = delete|wal, SYNC = full|extra|normal
 * Linked statically with Debian's libsqlite3.a so that SQLite's own functions
 * (pager, WAL, VFS) appear in the stacks by name. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sqlite3 *db;

static void exec(const char *sql) {
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "workload: %s: %s\n", sql, err ? err : "?");
        exit(1);
    }
}

static void open_db(const char *mode, const char *sync) {
    char sql[200];
    if (sqlite3_open("test.db", &db) != SQLITE_OK) {
        fprintf(stderr, "workload: open: %s\n", sqlite3_errmsg(db));
        exit(1);
    }
    snprintf(sql, sizeof sql, "PRAGMA journal_mode=%s; PRAGMA synchronous=%s;", mode, sync);
    exec(sql);
    /* A small auto-checkpoint threshold so the WAL is copied back into the
     * database during the workload (ignored in rollback mode). */
    exec("PRAGMA wal_autocheckpoint=8;");
}

/* Row i holds 1,500 bytes derived from i, so the checker can tell a torn row. */
static void insert(int i) {
    char sql[2000];
    snprintf(sql, sizeof sql,
             "BEGIN; INSERT INTO t VALUES(%d, printf('%%.1500c', char(%d))); COMMIT;", i, 64 + i);
    exec(sql);
    printf("committed %d\n", i);
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: workload delete|wal full|extra|normal\n");
        return 2;
    }
    open_db(argv[1], argv[2]);
    exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT NOT NULL);");
    printf("created\n");
    fflush(stdout);
    for (int i = 1; i <= 4; i++)
        insert(i);
    sqlite3_close(db);
    printf("closed\n");
    fflush(stdout);
    open_db(argv[1], argv[2]);
    insert(5);
    sqlite3_close(db);
    return 0;
}
