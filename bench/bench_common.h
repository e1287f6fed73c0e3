/* Shared by bench/fs/personalities.c, bench/optfs/{atomic_update,sqlite_insert}.c and
 * bench/cfs/{two_db,cfs_tool}.c: the clock, per-operation latency percentiles, the final sync
 * (--sync) and the block device's counters (--blockdev); for the timed programs of optfs and
 * cfs also their common options, the timed part's measures and their JSON fields.
 * (bench/bench_sqlite.h adds the SQLite helpers.) */
#ifndef OPTFS_BENCH_COMMON_H
#define OPTFS_BENCH_COMMON_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

/* intactfs STREAMSYNC: _IO(0xCC, 3), docs/fs-api.md. */
#define BENCH_STREAMSYNC 0xCC03

static const char *bench_name = "bench";
/* Called by die() first (errno is kept for the message): e.g. to abort an open CFS region. */
static void (*bench_at_die)(void);

static void die(const char *fmt, ...) {
    int e = errno;
    if (bench_at_die) bench_at_die();
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

/* Sorts the n values (for median and percentile) and returns their mean. */
static inline double sort_mean(double *v, long n) {
    double sum = 0;
    for (long i = 0; i < n; i++) sum += v[i];
    qsort(v, n, sizeof *v, cmp_double);
    return n > 0 ? sum / n : 0;
}

/* xorshift64*: n pseudo-random bytes from the state *x (not 0). */
static inline void random_bytes(uint64_t *x, unsigned char *buf, long n) {
    for (long i = 0; i < n; i++) {
        *x ^= *x >> 12, *x ^= *x << 25, *x ^= *x >> 27;
        buf[i] = (unsigned char)((*x * 0x2545F4914F6CDD1DULL) >> 56);
    }
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

/* ---- the timed programs: PROG DIR [--OPTION VALUE]... ---- */

/* The value of the option argv[i]; exit 2 if it has none. */
static inline const char *opt_value(int argc, char **argv, int i) {
    if (i + 1 >= argc) {
        fprintf(stderr, "%s: %s needs a value\n", bench_name, argv[i]);
        exit(2);
    }
    return argv[i + 1];
}

static inline void bad_option(const char *a) {
    fprintf(stderr, "%s: unknown option %s\n", bench_name, a);
    exit(2);
}

/* --sync SPEC, --blockdev DEV and --label L, which every timed program takes: 1 if a is one
 * of them (its value stored), else 0. */
static inline int common_option(const char *a, const char *v, const char **sync_spec, const char **blockdev,
                                const char **label) {
    if (!strcmp(a, "--sync")) *sync_spec = v;
    else if (!strcmp(a, "--blockdev")) *blockdev = v;
    else if (!strcmp(a, "--label")) *label = v;
    else return 0;
    return 1;
}

/* The timed loop: its seconds, the device's bytes and flushes before it (b0, f0), after it
 * (b1, f1) and after the final sync (b2, f2), and the final sync's seconds. */
struct timed {
    double t0, secs, sync_secs;
    long long b0, f0, b1, f1, b2, f2;
};

/* The set-up made durable (--sync, not timed), then the loop's start. */
static inline void timed_start(struct timed *t, const char *blockdev, const char *sync_spec) {
    do_sync(sync_spec);
    disk(blockdev, &t->b0, &t->f0);
    t->t0 = now();
}

static inline void timed_end(struct timed *t, const char *blockdev, const char *sync_spec) {
    t->secs = now() - t->t0;
    disk(blockdev, &t->b1, &t->f1);
    t->sync_secs = do_sync(sync_spec);
    disk(blockdev, &t->b2, &t->f2);
}

/* The JSON fields "ops" … "lat_mean_us" of n operations (lat: their seconds; sorted here),
 * each followed by ", ". */
static inline void print_ops(long n, double *lat, const struct timed *t) {
    double mean = sort_mean(lat, n);
    printf("\"ops\": %ld, \"secs\": %.6f, \"ops_per_s\": %.3f, \"lat_median_us\": %.1f, \"lat_p99_us\": %.1f, "
           "\"lat_mean_us\": %.1f, ",
           n, t->secs, n / t->secs, median(lat, n) * 1e6, percentile(lat, n, 99) * 1e6, mean * 1e6);
}

/* The JSON fields "sync_secs" … "sync_disk_flushes" (no separator after). */
static inline void print_disk(const struct timed *t) {
    printf("\"sync_secs\": %.6f, \"disk_flushes\": %lld, \"disk_bytes\": %lld, \"sync_disk_flushes\": %lld",
           t->sync_secs, t->f1 - t->f0, t->b1 - t->b0, t->f2 - t->f1);
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
