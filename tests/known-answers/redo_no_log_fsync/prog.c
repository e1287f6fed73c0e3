/* Redo logging without the fsync of the log before "committed" is promised. */
#include <fcntl.h>
#include <unistd.h>

int main(void) {
    int log = open("log", O_WRONLY | O_APPEND);
    write(log, "BBBB\nBBBB\nC", 11);
    write(1, "committed\n", 10);
    int db = open("db", O_WRONLY);
    pwrite(db, "BBBB\n", 5, 0);
    pwrite(db, "BBBB\n", 5, 5);
    fsync(db);
    ftruncate(log, 0);
    fsync(log);
    return 0;
}
