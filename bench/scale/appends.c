/* Workload of the explorer-scale benchmark (bench/scale/bench.sh, issue 29): appends N
 * blocks of 4 KiB to one file, fsyncing every K appends, then prints "done".
 *   appends N K */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: appends N K\n");
        return 2;
    }
    long n = atol(argv[1]), k = atol(argv[2]);
    if (n < 1 || k < 1) {
        fprintf(stderr, "appends: N and K must be positive\n");
        return 2;
    }
    int fd = open("log", O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) {
        perror("log");
        return 1;
    }
    char block[4096];
    for (long i = 0; i < n; i++) {
        memset(block, 'a' + (int)(i % 26), sizeof block);
        snprintf(block, 32, "block %ld\n", i);
        if (write(fd, block, sizeof block) != (ssize_t)sizeof block) {
            perror("write");
            return 1;
        }
        if ((i + 1) % k == 0 && fsync(fd) != 0) {
            perror("fsync");
            return 1;
        }
    }
    close(fd);
    printf("done\n");
    return 0;
}
