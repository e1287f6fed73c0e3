/* A directory created and not synced: d/f is written and fsynced, "done" is promised, but
 * neither d nor the directory holding d is fsynced. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void) {
    mkdir("d", 0755);
    int fd = open("d/f", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    write(fd, "x\n", 2);
    fsync(fd);
    write(1, "done\n", 5);
    return 0;
}
