/* Undo logging, every measure taken: the old contents of db (two records) go to a new journal, which is
 * fsynced with its directory; db's two records are overwritten in place and fsynced; the journal is
 * deleted and the directory fsynced; "done" is promised. */
#include <fcntl.h>
#include <unistd.h>

int main(void) {
    int dir = open(".", O_RDONLY | O_DIRECTORY);
    int j = open("journal", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(j, "JAAAA\nAAAA\n", 11);
    fsync(j);
    fsync(dir);
    int db = open("db", O_WRONLY);
    pwrite(db, "BBBB\n", 5, 0);
    pwrite(db, "BBBB\n", 5, 5);
    fsync(db);
    unlink("journal");
    fsync(dir);
    write(1, "done\n", 5);
    return 0;
}
