/* Two output promises: counter f is set to 1, fsynced and "1" printed; then set to 2 and
 * "2" printed without an fsync. */
#include <fcntl.h>
#include <unistd.h>

int main(void) {
    int fd = open("f", O_WRONLY);
    pwrite(fd, "1\n", 2, 0);
    fsync(fd);
    write(1, "1\n", 2);
    pwrite(fd, "2\n", 2, 0);
    write(1, "2\n", 2);
    return 0;
}
