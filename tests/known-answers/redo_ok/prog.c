/* Redo logging, every measure taken: the new contents of db (two records) and a commit mark are appended
 * to the log and fsynced, "committed" is promised; db's two records are overwritten and fsynced; the log
 * is emptied and fsynced. */
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
    fsync(db);
    ftruncate(log, 0);
    fsync(log);
    return 0;
}
