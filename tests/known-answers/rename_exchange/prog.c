/* Replace f by exchanging it with a new temporary (renameat2 RENAME_EXCHANGE), no fsync,
 * then "done" is promised. The old contents stay reachable as f.tmp. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
    int fd = open("f.tmp", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(fd, "new\n", 4);
    close(fd);
    renameat2(AT_FDCWD, "f.tmp", AT_FDCWD, "f", RENAME_EXCHANGE);
    write(1, "done\n", 5);
    return 0;
}
