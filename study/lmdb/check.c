/* LMDB study checker (two layers, study/README.md): check CRASH_DIR STDOUT_FILE.
 *
 * Documented (lmdb.h of LMDB 0.9.24, the library's own reference): LMDB is "fully
 * transactional with full ACID semantics" and its copy-on-write pages "eliminate the
 * need of any special recovery procedures after a system crash"; only the flags
 * MDB_NOSYNC, MDB_NOMETASYNC and MDB_MAPASYNC give up durability or integrity, and the
 * workload uses none of them. So:
 *   open      the environment opens read-only, with no recovery.
 *   values    every record is one the workload committed, with its value (atomicity).
 *   prefix    the records are those of a prefix of the commits (consistency: each
 *             transaction saw the ones before it).
 *   durable   "committed K" printed => records 0..K are there (durability).
 * They are lay expectations only before the first commit returned (a crash while LMDB
 * creates the environment: no committed state exists, and LMDB documents nothing about it).
 * Output on failure: "rule: LAYER: NAME: CLASS: detail" per failing rule, then "layer:" and
 * "consequence:" of the first. Exit 0 consistent, 1 inconsistent, 2 usage. */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define VALUE_BYTES 100
#define MAX_RECORDS 1000

static int failed;
/* Before the first commit returned there is no committed state: LMDB documents nothing
 * about a crash while it creates the environment, so the rules are lay ones then. */
static const char *layer = "documented";

static void fail(const char *name, const char *cls, const char *detail)
{
    fprintf(stderr, "rule: %s: %s: %s: %s\n", layer, name, cls, detail);
    if (!failed)
        fprintf(stderr, "layer: %s\nconsequence: %s: %s\n", layer, cls, detail);
    failed = 1;
}

static void record(int i, char *key, size_t key_len, char *value)
{
    snprintf(key, key_len, "key%03d", i);
    memset(value, 'a' + i % 26, VALUE_BYTES);
    snprintf(value, VALUE_BYTES, "value of record %03d ", i);
    value[strlen(value)] = '.';
}

static int last_committed(const char *path)
{
    int last = -1, k;
    char line[64];
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "committed %d", &k) == 1 && k > last)
            last = k;
    if (f)
        fclose(f);
    return last;
}

/* Reads every record into present[]; 0 when the environment could not be read. */
static int read_records(const char *db, int *present, int *count)
{
    char msg[256];
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_cursor *cur;
    MDB_val k, v;
    int rc = mdb_env_create(&env);
    if (rc == 0)
        rc = mdb_env_open(env, db, MDB_RDONLY | MDB_NOLOCK, 0644);
    if (rc == 0)
        rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn);
    if (rc == 0)
        rc = mdb_dbi_open(txn, NULL, 0, &dbi);
    if (rc == 0)
        rc = mdb_cursor_open(txn, dbi, &cur);
    if (rc != 0) {
        snprintf(msg, sizeof msg, "opening the environment: %s", mdb_strerror(rc));
        fail("open", "cannot-open", msg);
        mdb_env_close(env);
        return 0;
    }
    while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
        int i = -1;
        char key[16], got[16] = "", want[VALUE_BYTES];
        /* Keys live in the read-only map, not NUL-terminated: copy before parsing. */
        if (k.mv_size < sizeof got)
            memcpy(got, k.mv_data, k.mv_size), got[k.mv_size] = 0;
        if (got[0] && sscanf(got, "key%3d", &i) == 1 && i >= 0 && i < MAX_RECORDS) {
            record(i, key, sizeof key, want);
            if (v.mv_size != VALUE_BYTES || memcmp(v.mv_data, want, VALUE_BYTES) != 0) {
                snprintf(msg, sizeof msg, "key%03d holds %zu bytes that are not its value", i, v.mv_size);
                fail("values", "silent-error", msg);
            } else if (!present[i]) {
                present[i] = 1, (*count)++;
            }
        } else {
            fail("values", "silent-error", "a key the workload never stored");
        }
    }
    if (rc != MDB_NOTFOUND) {
        snprintf(msg, sizeof msg, "reading the records: %s", mdb_strerror(rc));
        fail("values", "failed-reads-writes", msg);
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: check CRASH_DIR STDOUT_FILE\n");
        return 2;
    }
    char db[4096], msg[256];
    struct stat st;
    snprintf(db, sizeof db, "%s/db", argv[1]);
    int last = last_committed(argv[2]), count = 0, m = 0;
    if (last < 0)
        layer = "lay";
    static int present[MAX_RECORDS];
    snprintf(db + strlen(db), sizeof db - strlen(db), "/data.mdb");
    int exists = stat(db, &st) == 0;
    db[strlen(db) - strlen("/data.mdb")] = 0;
    int opened = exists && read_records(db, present, &count);
    while (m < MAX_RECORDS && present[m])
        m++;
    if (opened && count != m) {
        snprintf(msg, sizeof msg, "record %03d is missing while %d later ones are there", m, count - m);
        fail("prefix", "data-loss", msg);
    }
    if (last >= 0 && m <= last) {
        snprintf(msg, sizeof msg, "record %03d is missing although \"committed %d\" was printed%s", m, last,
                 exists ? "" : " (no data.mdb)");
        fail("durable", "data-loss", msg);
    }
    return failed;
}
