/* A tiny key-value store in the style of thesis 004 Listing 3.1: every put appends a
 * record to a log; `sync` rewrites the table file with the write-to-temporary-then-rename
 * protocol and truncates the log. The rename is not preceded by an fsync of the
 * temporary file: a classic crash vulnerability (safe-rename assumption).
 *
 *   kv put KEY VALUE...   then   kv sync
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void put(int log, const char *k, const char *v) {
    char rec[256];
    int n = snprintf(rec, sizeof rec, "%s=%s\n", k, v);
    write(log, rec, n);                       /* append the record */
}

static void checkpoint(void) {
    char buf[4096];
    int log = open("kv.log", O_RDONLY);
    ssize_t n = read(log, buf, sizeof buf);
    close(log);
    int tmp = open("table.tmp", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(tmp, buf, n > 0 ? n : 0);           /* new table contents */
    close(tmp);                               /* BUG: no fsync(tmp) before the rename */
    rename("table.tmp", "table");             /* replace the table atomically (or not) */
    int dir = open(".", O_RDONLY);
    fsync(dir);                               /* persist the rename */
    close(dir);
    truncate("kv.log", 0);                    /* the log is now in the table */
}

int main(int argc, char **argv) {
    int log = open("kv.log", O_CREAT | O_WRONLY | O_APPEND, 0644);
    for (int i = 1; i + 1 < argc; i += 2) put(log, argv[i], argv[i + 1]);
    fsync(log);                               /* durable once "Done" is printed */
    close(log);
    checkpoint();
    printf("Done\n");
    return 0;
}
