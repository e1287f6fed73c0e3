/* A tiny key-value store in the style of thesis 004 Listing 3.1: every put appends a
 * record "key=value\n" to kv.log, which is fsynced; then a checkpoint rewrites the table
 * file with the write-to-temporary-then-rename protocol and truncates the log. The store's
 * contents are the records of table, then those of kv.log (a later record wins).
 *
 * By default the rename is not preceded by an fsync of the temporary file: a classic
 * crash vulnerability (the safe-rename assumption). --safe adds that fsync (the fix).
 *
 *   kv [--safe] KEY VALUE [KEY VALUE]...    prints "Done" once the pairs are durable
 *
 * Keys and values are non-empty printable ASCII; keys contain no '='.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int safe;  /* --safe: fsync table.tmp before renaming it over table */

static void put(int log, const char *k, const char *v) {
    size_t n = strlen(k) + strlen(v) + 2;
    char *rec = malloc(n + 1);
    snprintf(rec, n + 1, "%s=%s\n", k, v);
    write(log, rec, n);                       /* append the record */
    free(rec);
}

/* Appends the contents of PATH (if it exists) to *buf. */
static void slurp(const char *path, char **buf, size_t *len) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    char chunk[4096];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0) {
        *buf = realloc(*buf, *len + n);
        memcpy(*buf + *len, chunk, n);
        *len += n;
    }
    close(fd);
}

static void checkpoint(void) {
    char *buf = NULL;
    size_t n = 0;
    slurp("table", &buf, &n);                 /* the old table, then the log */
    slurp("kv.log", &buf, &n);
    int tmp = open("table.tmp", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(tmp, buf, n);                       /* new table contents */
    if (safe) fsync(tmp);                     /* the fix; without --safe: BUG, no fsync before the rename */
    close(tmp);
    rename("table.tmp", "table");             /* replace the table atomically (or not) */
    int dir = open(".", O_RDONLY);
    fsync(dir);                               /* persist the rename */
    close(dir);
    truncate("kv.log", 0);                    /* the log is now in the table */
    free(buf);
}

static int valid(const char *s, int key) {
    if (!*s) return 0;
    for (; *s; s++)
        if (*s < 0x20 || *s > 0x7e || (key && *s == '=')) return 0;
    return 1;
}

int main(int argc, char **argv) {
    int first = 1;
    if (argc > 1 && strcmp(argv[1], "--safe") == 0) safe = 1, first = 2;
    if ((argc - first) % 2 != 0) {
        fprintf(stderr, "usage: kv [--safe] KEY VALUE [KEY VALUE]...\n");
        return 2;
    }
    for (int i = first; i < argc; i += 2)
        if (!valid(argv[i], 1) || !valid(argv[i + 1], 0)) {
            fprintf(stderr, "kv: keys and values must be non-empty printable ASCII, keys without '='\n");
            return 2;
        }
    int log = open("kv.log", O_CREAT | O_WRONLY | O_APPEND, 0644);
    for (int i = first; i + 1 < argc; i += 2) put(log, argv[i], argv[i + 1]);
    fsync(log);                               /* durable once "Done" is printed */
    close(log);
    checkpoint();
    write(1, "Done\n", 5);                    /* unbuffered: one output at this point */
    return 0;
}
