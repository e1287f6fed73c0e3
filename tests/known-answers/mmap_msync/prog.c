/* An update through a shared mapping: f's first record is changed in memory, msync'd
 * (MS_SYNC), then "done" is promised. */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(void) {
    int fd = open("f", O_RDWR);
    char *m = mmap(NULL, 10, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    memcpy(m, "BBBB\n", 5);
    msync(m, 10, MS_SYNC);
    write(1, "done\n", 5);
    return 0;
}
