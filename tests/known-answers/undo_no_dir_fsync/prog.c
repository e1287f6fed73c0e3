/* Undo logging without the fsync of the directory after creating the journal: the
 * journal's contents are durable, its name may not be, when db is overwritten. */
#include <fcntl.h>
#include <unistd.h>

int main(void) {
    int dir = open(".", O_RDONLY | O_DIRECTORY);
    int j = open("journal", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(j, "JAAAA\nAAAA\n", 11);
    fsync(j);
    int db = open("db", O_WRONLY);
    pwrite(db, "BBBB\n", 5, 0);
    pwrite(db, "BBBB\n", 5, 5);
    fsync(db);
    unlink("journal");
    fsync(dir);
    write(1, "done\n", 5);
    return 0;
}
