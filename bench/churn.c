/* Benchmark workload: N rounds of a write-temporary/fsync/rename update plus log
 * appends, reads and seeks: many calls of every kind the converter handles. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    char buf[64], rd[16];
    int log = open("log", O_CREAT | O_WRONLY | O_APPEND, 0644);
    for (int i = 0; i < n; i++) {
        int len = snprintf(buf, sizeof buf, "record %d\n", i);
        write(log, buf, len);
        int fd = open("data.tmp", O_CREAT | O_RDWR | O_TRUNC, 0644);
        write(fd, buf, len);
        pwrite(fd, "X", 1, 0);
        lseek(fd, 0, SEEK_SET);
        read(fd, rd, sizeof rd);
        fsync(fd);
        close(fd);
        rename("data.tmp", "data");
    }
    fsync(log);
    close(log);
    printf("done %d\n", n);
    return 0;
}
