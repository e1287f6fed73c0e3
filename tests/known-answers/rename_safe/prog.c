/* The careful replace: write the temporary, fsync it, rename it over f, fsync the
 * directory, then promise "done". */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
    int fd = open("f.tmp", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(fd, "new\n", 4);
    fsync(fd);
    close(fd);
    rename("f.tmp", "f");
    int dir = open(".", O_RDONLY | O_DIRECTORY);
    fsync(dir);
    write(1, "done\n", 5);
    return 0;
}
