/* A file written unnamed (O_TMPFILE) and given its name with linkat once complete, no
 * fsync, then "done" is promised. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
    int fd = open(".", O_TMPFILE | O_WRONLY, 0644);
    write(fd, "new\n", 4);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    linkat(AT_FDCWD, path, AT_FDCWD, "g", AT_SYMLINK_FOLLOW);
    write(1, "done\n", 5);
    return 0;
}
