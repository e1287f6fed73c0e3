/* GDBM study checker (two layers, study/README.md): check [--sync] CRASH_DIR STDOUT_FILE.
 *
 * Documented (GDBM manual 1.23, doc/gdbm.texi of Debian's source):
 *   durable-close  "closed" printed => every record is there: gdbm_close "automatically
 *                  calls the equivalent of gdbm_sync" (node Sync), which makes "the disk
 *                  version of the database ... completely updated".
 *   durable-store  (--sync only) "stored K" printed => records 0..K are there: opening with
 *                  GDBM_SYNC "ensures that gdbm_sync function will be called after each
 *                  change, thereby flushing the changes to disk immediately" (node Sync).
 * Lay (the manual promises no consistency after a crash without its crash-tolerance mode:
 * GDBM_SYNC "does not necessarily ensure that the resulting database state is consistent",
 * node Open; "only a moderate guarantee" of structural consistency, node Sync):
 *   open       a database file that exists opens (read-only).
 *   structure  its free-space lists verify and every key can be read back.
 *   values     every record is one the workload stored, with its value.
 *   prefix     the records are those of a prefix of the stores (0..m-1).
 * Output on failure: one "rule: LAYER: NAME: CLASS: detail" line per failing rule, then
 * "layer:" and "consequence:" of the first failing documented rule, else the first lay one.
 * Exit 0 consistent, 1 inconsistent, 2 usage. */
#include <errno.h>
#include <gdbm.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define VALUE_BYTES 100
#define MAX_RECORDS 1000

struct failure {
    const char *layer, *name, *cls;
    char detail[256];
};
static struct failure failures[8];
static int n_failures;

static void fail(const char *layer, const char *name, const char *cls, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(const char *layer, const char *name, const char *cls, const char *fmt, ...)
{
    if (n_failures == (int)(sizeof failures / sizeof failures[0]))
        return;
    struct failure *f = &failures[n_failures++];
    f->layer = layer, f->name = name, f->cls = cls;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->detail, sizeof f->detail, fmt, ap);
    va_end(ap);
}

/* As the workload builds record i. */
static void record(int i, char *key, size_t key_len, char *value)
{
    snprintf(key, key_len, "key%03d", i);
    memset(value, 'a' + i % 26, VALUE_BYTES);
    snprintf(value, VALUE_BYTES, "value of record %03d ", i);
    value[strlen(value)] = '.';
}

/* What the workload printed: the last record acknowledged (-1: none), and "closed". */
static void printed(const char *path, int *last_stored, int *closed)
{
    *last_stored = -1, *closed = 0;
    FILE *f = fopen(path, "r");
    char line[64];
    while (f && fgets(line, sizeof line, f)) {
        int k;
        if (sscanf(line, "stored %d", &k) == 1 && k > *last_stored)
            *last_stored = k;
        if (strcmp(line, "closed\n") == 0)
            *closed = 1;
    }
    if (f)
        fclose(f);
}

/* Which records 0..MAX_RECORDS-1 the database holds (present[i]), via the lay rules. */
static GDBM_FILE open_and_read(const char *db_path, int *present, int *count)
{
    struct stat st;
    *count = 0;
    if (stat(db_path, &st) != 0)
        return NULL; /* never created: nothing to open */
    GDBM_FILE db = gdbm_open(db_path, 0, GDBM_READER | GDBM_NOLOCK, 0, NULL);
    if (!db) {
        fail("lay", "open", "cannot-open", "gdbm_open: %s (file of %lld bytes)",
             gdbm_strerror(gdbm_errno), (long long)st.st_size);
        return NULL;
    }
    if (gdbm_avail_verify(db) != 0)
        fail("lay", "structure", "failed-reads-writes", "gdbm_avail_verify: %s",
             gdbm_strerror(gdbm_errno));
    datum key = gdbm_firstkey(db);
    while (key.dptr) {
        char k[16], want[VALUE_BYTES];
        int i = -1;
        if (key.dsize < (int)sizeof k && sscanf(key.dptr, "key%3d", &i) == 1 && i >= 0 &&
            i < MAX_RECORDS) {
            record(i, k, sizeof k, want);
            datum v = gdbm_fetch(db, key);
            if (!v.dptr)
                fail("lay", "structure", "failed-reads-writes", "key%03d listed but cannot be fetched: %s",
                     i, gdbm_strerror(gdbm_errno));
            else if (v.dsize != VALUE_BYTES || memcmp(v.dptr, want, VALUE_BYTES) != 0)
                fail("lay", "values", "silent-error", "key%03d holds %d bytes that are not its value", i, v.dsize);
            else if (!present[i])
                present[i] = 1, (*count)++;
            free(v.dptr);
        } else {
            fail("lay", "values", "silent-error", "a key the workload never stored (%d bytes)", key.dsize);
        }
        datum next = gdbm_nextkey(db, key);
        free(key.dptr);
        key = next;
    }
    if (gdbm_errno != GDBM_NO_ERROR && gdbm_errno != GDBM_ITEM_NOT_FOUND)
        fail("lay", "structure", "failed-reads-writes", "iterating the keys: %s", gdbm_strerror(gdbm_errno));
    return db;
}

int main(int argc, char **argv)
{
    int sync = argc == 4 && strcmp(argv[1], "--sync") == 0;
    if (argc != 3 + sync) {
        fprintf(stderr, "usage: check [--sync] CRASH_DIR STDOUT_FILE\n");
        return 2;
    }
    const char *dir = argv[1 + sync], *out = argv[2 + sync];
    char db_path[4096];
    snprintf(db_path, sizeof db_path, "%s/test.db", dir);
    int last_stored, closed, count;
    static int present[MAX_RECORDS];
    printed(out, &last_stored, &closed);
    GDBM_FILE db = open_and_read(db_path, present, &count);
    int opened = db != NULL;
    if (db)
        gdbm_close(db);
    int m = 0; /* the longest prefix 0..m-1 present */
    while (m < MAX_RECORDS && present[m])
        m++;
    if (opened && count != m)
        fail("lay", "prefix", "data-loss", "record %03d is missing while %d later ones are there", m, count - m);
    int need = closed ? last_stored : (sync ? last_stored : -1);
    if (need >= 0 && m <= need) {
        const char *why = closed ? "\"closed\" was printed (gdbm_close syncs)"
                                 : "its store returned under GDBM_SYNC";
        fail("documented", closed ? "durable-close" : "durable-store", "data-loss",
             "record %03d is missing although %s%s", m, why, opened ? "" : " (the database did not open)");
    }
    if (n_failures == 0)
        return 0;
    const struct failure *first = &failures[0];
    for (int i = 0; i < n_failures; i++) {
        fprintf(stderr, "rule: %s: %s: %s: %s\n", failures[i].layer, failures[i].name, failures[i].cls,
                failures[i].detail);
        if (strcmp(first->layer, "documented") != 0 && strcmp(failures[i].layer, "documented") == 0)
            first = &failures[i];
    }
    fprintf(stderr, "layer: %s\nconsequence: %s: %s\n", first->layer, first->cls, first->detail);
    return 1;
}
