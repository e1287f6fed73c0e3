/* Replace f through a temporary file renamed over it, no fsync, then promise "done". */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
    int fd = open("f.tmp", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(fd, "new\n", 4);
    close(fd);
    rename("f.tmp", "f");
    write(1, "done\n", 5);
    return 0;
}
