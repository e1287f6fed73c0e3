/* Publish a new file g through a temporary renamed to a name that did not exist yet, no
 * fsync, then promise "done". */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
    int fd = open("g.tmp", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(fd, "new\n", 4);
    close(fd);
    rename("g.tmp", "g");
    write(1, "done\n", 5);
    return 0;
}
