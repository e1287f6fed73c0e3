/* Redo logging without the fsync of db before the log is emptied: the truncation may
 * persist before the new contents of db. */
#include <fcntl.h>
#include <unistd.h>

int main(void) {
    int log = open("log", O_WRONLY | O_APPEND);
    write(log, "BBBB\nBBBB\nC", 11);
    fsync(log);
    write(1, "committed\n", 10);
    int db = open("db", O_WRONLY);
    pwrite(db, "BBBB\n", 5, 0);
    pwrite(db, "BBBB\n", 5, 5);
    ftruncate(log, 0);
    fsync(log);
    return 0;
}
