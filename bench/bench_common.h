/* Shared by bench/fs/personalities.c and bench/optfs/{atomic_update,sqlite_insert}.c:
 * the clock, per-operation latency percentiles, the final sync (--sync) and the block device's
 * counters (--blockdev). */
#ifndef OPTFS_BENCH_COMMON_H
#define OPTFS_BENCH_COMMON_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

/* intactfs STREAMSYNC: _IO(0xCC, 3), docs/fs-api.md. */
#define BENCH_STREAMSYNC 0xCC03

static const char *bench_name = "bench";

static void die(const char *fmt, ...) {
    int e = errno;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", bench_name);
    vfprintf(stderr, fmt, ap);
    if (e) fprintf(stderr, ": %s", strerror(e));
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The p-th percentile (0..100) of n sorted values, nearest rank. */
static inline double percentile(const double *sorted, long n, double p) {
    if (n <= 0) return 0;
    long k = (long)((p / 100.0) * n + 0.999999999);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return sorted[k - 1];
}

static inline double median(const double *sorted, long n) {
    if (n <= 0) return 0;
    return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

/* --sync none|syncfs:PATH|streamsync:PATH: make everything durable; returns seconds taken.
 * syncfs(2) does not reach a FUSE daemon: on intactfs use streamsync (commits the caller's
 * stream durably, also in an osync stream). */
static double do_sync(const char *spec) {
    if (strcmp(spec, "none") == 0) return 0;
    const char *colon = strchr(spec, ':');
    if (!colon) {
        errno = EINVAL;
        die("--sync %s", spec);
    }
    int fd = open(colon + 1, O_RDONLY | O_DIRECTORY);
    if (fd < 0) die("--sync %s: open", spec);
    double t = now();
    int r;
    if (strncmp(spec, "syncfs:", 7) == 0)
        r = syncfs(fd);
    else if (strncmp(spec, "streamsync:", 11) == 0)
        r = ioctl(fd, BENCH_STREAMSYNC, 0);
    else {
        errno = EINVAL;
        r = -1;
    }
    if (r != 0) die("--sync %s", spec);
    t = now() - t;
    close(fd);
    return t;
}

/* Sectors written (as bytes) and flushes so far on /sys/block/DEV/stat (fields 7 and 16). */
static void disk(const char *dev, long long *bytes, long long *flushes) {
    *bytes = *flushes = 0;
    if (!dev || !*dev) return;
    char p[256];
    snprintf(p, sizeof p, "/sys/block/%s/stat", dev);
    FILE *f = fopen(p, "r");
    if (!f) die("%s", p);
    long long v[17] = {0};
    for (int i = 0; i < 17 && fscanf(f, "%lld", &v[i]) == 1; i++) {
    }
    fclose(f);
    *bytes = v[6] * 512;
    *flushes = v[15];
}

static inline long long arg_size(const char *s) {
    char *end;
    long long v = strtoll(s, &end, 10);
    switch (*end) {
        case 'k': case 'K': v <<= 10; break;
        case 'm': case 'M': v <<= 20; break;
        case 'g': case 'G': v <<= 30; break;
    }
    return v;
}

#endif
