/* Undo logging without the fsync of the journal's contents: the directory is fsynced (so
 * the journal's name is durable) but its data may not be when db is overwritten. */
#include <fcntl.h>
#include <unistd.h>

int main(void) {
    int dir = open(".", O_RDONLY | O_DIRECTORY);
    int j = open("journal", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(j, "JAAAA\nAAAA\n", 11);
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
