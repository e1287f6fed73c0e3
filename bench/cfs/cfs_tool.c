/* Small helpers of bench/cfs/bench.sh.
 *
 *   gcc -O2 -o cfs_tool bench/cfs/cfs_tool.c
 *   cfs_tool streamsync DIR            intactfs STREAMSYNC (_IO(0xCC, 3)) on the directory DIR:
 *                                      the caller's stream (the init stream) durable (no Python)
 *   cfs_tool probe PATH                exit 0 if PATH is on a file system that takes the CFS
 *                                      region ioctls (an empty BEGIN, then ABORT), else 1
 *   cfs_tool flushcost FILE N [DEV]    what one device flush costs here: N times pwrite 4 KiB
 *                                      at offset 0 of FILE (preallocated, so no metadata
 *                                      changes) and fdatasync; prints one JSON line: median
 *                                      and mean µs of write + fdatasync, and with DEV (loopN)
 *                                      the device's flushes per operation
 *   cfs_tool rtt DIR N                 what one FUSE round trip costs: N times the intactfs
 *                                      GETSTREAM ioctl (_IOR(0xCC, 2, 16 bytes): the kernel
 *                                      always forwards it, the daemon answers from memory) on
 *                                      the directory DIR; one JSON line: median and mean µs
 */
#include "../bench_common.h"

/* As INTACT_IOC_BEGIN / INTACT_IOC_ABORT in libintact/include/intact.h. */
#define CFS_IOC_BEGIN 0xCC07
#define CFS_IOC_ABORT 0xCC09
/* As INTACT_IOC_GETSTREAM: _IOR(0xCC, 2, struct intact_stream) (16 bytes). */
#define CFS_IOC_GETSTREAM 0x8010CC02

static int usage(void) {
    fprintf(stderr, "usage: cfs_tool streamsync DIR | probe PATH | flushcost FILE N [loopN] | rtt DIR N\n");
    return 2;
}

int main(int argc, char **argv) {
    bench_name = "cfs_tool";
    if (argc < 3) return usage();
    const char *cmd = argv[1], *path = argv[2];
    if (!strcmp(cmd, "streamsync")) {
        char spec[4096];
        snprintf(spec, sizeof spec, "streamsync:%s", path);
        do_sync(spec);
        return 0;
    }
    if (!strcmp(cmd, "probe")) {
        int fd = open(path, O_RDONLY);
        if (fd < 0) die("%s: open", path);
        if (ioctl(fd, CFS_IOC_BEGIN, 0) != 0) {
            fprintf(stderr, "cfs_tool: %s: BEGIN (0xCC07): %s\n", path, strerror(errno));
            return 1;
        }
        if (ioctl(fd, CFS_IOC_ABORT, 0) != 0) die("%s: ABORT (0xCC09)", path);
        return 0;
    }
    if (!strcmp(cmd, "rtt") && argc >= 4) {
        long n = atol(argv[3]);
        if (n < 1) return usage();
        int fd = open(path, O_RDONLY | O_DIRECTORY);
        if (fd < 0) die("%s: open", path);
        double *lat = calloc(n, sizeof *lat);
        if (!lat) die("calloc");
        unsigned char arg[16];
        for (long i = 0; i < n; i++) {
            double a = now();
            if (ioctl(fd, CFS_IOC_GETSTREAM, arg) != 0) die("%s: GETSTREAM", path);
            lat[i] = now() - a;
        }
        close(fd);
        double mean = sort_mean(lat, n);
        printf("{\"bench\": \"rtt\", \"ops\": %ld, \"median_us\": %.1f, \"mean_us\": %.1f, \"p90_us\": %.1f}\n", n,
               median(lat, n) * 1e6, mean * 1e6, percentile(lat, n, 90) * 1e6);
        return 0;
    }
    if (strcmp(cmd, "flushcost") || argc < 4) return usage();
    long n = atol(argv[3]);
    const char *dev = argc > 4 ? argv[4] : NULL;
    if (n < 1) return usage();
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die("%s: open", path);
    static char buf[4096];
    memset(buf, 'x', sizeof buf);
    if (pwrite(fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf || fsync(fd) != 0) die("%s: set-up", path);
    double *lat = calloc(n, sizeof *lat);
    if (!lat) die("calloc");
    long long b0, f0, b1, f1;
    disk(dev, &b0, &f0);
    for (long i = 0; i < n; i++) {
        buf[0] = (char)i;
        double a = now();
        if (pwrite(fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf) die("%s: pwrite", path);
        if (fdatasync(fd) != 0) die("%s: fdatasync", path);
        lat[i] = now() - a;
    }
    disk(dev, &b1, &f1);
    close(fd);
    unlink(path);
    double mean = sort_mean(lat, n);
    printf("{\"bench\": \"flushcost\", \"ops\": %ld, \"median_us\": %.1f, \"mean_us\": %.1f, \"p90_us\": %.1f, "
           "\"flushes_per_op\": %.3f}\n",
           n, median(lat, n) * 1e6, mean * 1e6, percentile(lat, n, 90) * 1e6, (double)(f1 - f0) / n);
    return 0;
}
