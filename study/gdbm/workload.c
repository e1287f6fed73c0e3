/* GDBM study workload (study/gdbm/README.md; thesis 004 §4.3, Figure 4.3(A)): creates a
 * database with small (512-byte) buckets and stores N records of 100 bytes one by one, so
 * that buckets split and the directory grows; prints "stored K" after each store returns,
 * then closes the database and prints "closed".
 *   workload sync|default [N]     (sync: opened with GDBM_SYNC) */
#include <gdbm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VALUE_BYTES 100

/* The record the workload stores as number `i` (the checker rebuilds the same). */
static void record(int i, char *key, size_t key_len, char *value)
{
    snprintf(key, key_len, "key%03d", i);
    memset(value, 'a' + i % 26, VALUE_BYTES);
    snprintf(value, VALUE_BYTES, "value of record %03d ", i);
    value[strlen(value)] = '.';
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "sync") && strcmp(argv[1], "default"))) {
        fprintf(stderr, "usage: workload sync|default [N]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 24;
    int flags = GDBM_NEWDB | GDBM_NOLOCK | (strcmp(argv[1], "sync") == 0 ? GDBM_SYNC : 0);
    GDBM_FILE db = gdbm_open("test.db", 512, flags, 0644, NULL);
    if (!db) {
        fprintf(stderr, "gdbm_open: %s\n", gdbm_strerror(gdbm_errno));
        return 1;
    }
    for (int i = 0; i < n; i++) {
        char k[16], v[VALUE_BYTES];
        record(i, k, sizeof k, v);
        datum key = {k, (int)strlen(k)}, value = {v, VALUE_BYTES};
        if (gdbm_store(db, key, value, GDBM_REPLACE) != 0) {
            fprintf(stderr, "gdbm_store %s: %s\n", k, gdbm_strerror(gdbm_errno));
            return 1;
        }
        printf("stored %d\n", i);
        fflush(stdout);
    }
    if (gdbm_close(db) != 0) {
        fprintf(stderr, "gdbm_close: %s\n", gdbm_strerror(gdbm_errno));
        return 1;
    }
    printf("closed\n");
    return 0;
}
