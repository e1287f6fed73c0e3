/* bench_common.h plus the SQLite helpers of bench/optfs/sqlite_insert.c and bench/cfs/two_db.c
 * (apart, since bench/fs/personalities.c and the others do not link SQLite): one connection,
 * db; a failed statement ends the program through die(). */
#ifndef BENCH_SQLITE_H
#define BENCH_SQLITE_H
#include "bench_common.h"
#include <sqlite3.h>

static sqlite3 *db;

static inline void exec_sql(const char *sql) {
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        errno = 0;
        die("%s: %s", sql, err ? err : sqlite3_errmsg(db));
    }
}

static inline long long query_int(const char *sql) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
        errno = 0;
        die("%s: %s", sql, sqlite3_errmsg(db));
    }
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

#endif
