/* LMDB study workload (study/lmdb/README.md; thesis 004 §4.3, Figure 4.3(B)): in a new
 * environment in the (empty, existing) directory db/, commits N write transactions that each put one record of 100 bytes,
 * printing "committed K" after each mdb_txn_commit returns, then closes the environment.
 *   workload [N]     (default flags: each commit is synced) */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALUE_BYTES 100

static void record(int i, char *key, size_t key_len, char *value)
{
    snprintf(key, key_len, "key%03d", i);
    memset(value, 'a' + i % 26, VALUE_BYTES);
    snprintf(value, VALUE_BYTES, "value of record %03d ", i);
    value[strlen(value)] = '.';
}

static int check(int rc, const char *what)
{
    if (rc != MDB_SUCCESS)
        fprintf(stderr, "%s: %s\n", what, mdb_strerror(rc));
    return rc != MDB_SUCCESS;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 8;
    MDB_env *env;
    MDB_dbi dbi;
    if (check(mdb_env_create(&env), "mdb_env_create") ||
        check(mdb_env_set_mapsize(env, 1 << 20), "mdb_env_set_mapsize") ||
        check(mdb_env_open(env, "db", 0, 0644), "mdb_env_open"))
        return 1;
    for (int i = 0; i < n; i++) {
        MDB_txn *txn;
        char k[16], v[VALUE_BYTES];
        record(i, k, sizeof k, v);
        MDB_val key = {strlen(k), k}, value = {VALUE_BYTES, v};
        if (check(mdb_txn_begin(env, NULL, 0, &txn), "mdb_txn_begin") ||
            check(mdb_dbi_open(txn, NULL, 0, &dbi), "mdb_dbi_open") ||
            check(mdb_put(txn, dbi, &key, &value, 0), "mdb_put") ||
            check(mdb_txn_commit(txn), "mdb_txn_commit"))
            return 1;
        printf("committed %d\n", i);
        fflush(stdout);
    }
    mdb_env_close(env);
    printf("closed\n");
    return 0;
}
