/* A log followed by a checkpoint (examples/kvstore in small): the record is appended to
 * the log and fsynced, "logged" is promised; then the table is rewritten through a
 * temporary renamed over it, without an fsync, and the log is emptied. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
    int log = open("log", O_WRONLY | O_APPEND);
    write(log, "x=1\n", 4);
    fsync(log);
    write(1, "logged\n", 7);
    int t = open("table.tmp", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(t, "x=1\n", 4);
    close(t);
    rename("table.tmp", "table");
    ftruncate(log, 0);
    return 0;
}
