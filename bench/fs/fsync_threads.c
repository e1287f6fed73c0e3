/* Concurrent fsyncing threads (bench/fs/fsync_threads.sh): THREADS pthreads, each with its own
 * file DIR/tN (O_CREAT|O_WRONLY|O_TRUNC), each appending SIZE bytes with pwrite and then
 * fsyncing, over and over for SECONDS; prints one JSON line.
 *
 *   fsync_threads DIR THREADS SECONDS [--size 4096] [--blockdev loopN] [--procs] [--streams]
 *
 * --procs: the workers are processes (fork) instead of threads; --streams (implies --procs,
 * intactfs only): worker N joins its own stream "fsync-tN" first (libintact's
 * intact_setstream_path), so that its fsyncs commit its file only: the case where
 * concurrent commits of different streams share flushes (group commit).
 *
 * Every thread opens its file first; the clock starts when all have (a barrier), and each
 * thread stops after the operation that ends past SECONDS (so the run lasts SECONDS plus at
 * most one operation). An operation is one pwrite at the file's end plus one fsync; its fsync
 * is timed on its own. Output: threads, size, duration (SECONDS as asked), seconds (measured:
 * from the start to the last thread's end), ops, ops_per_s (ops / seconds), the fsync latency (mean, p50, p99,
 * max, in µs), the pwrite latency (mean), the fewest and most operations of one thread, and
 * with --blockdev the loop device's flushes and bytes written over the same span
 * (/sys/block/DEV/stat fields 16 and 7: disk_flushes, disk_bytes).
 *
 *   gcc -O2 -pthread -Ilibintact/include -o fsync_threads bench/fs/fsync_threads.c libintact/src/intact.c
 */
#include "../bench_common.h"
#include "intact.h"
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <pthread.h>

struct worker {
    pthread_t tid;
    int idx, fd;
    long ops, cap;
    double *lat;       /* each fsync's seconds */
    double write_secs; /* all pwrites' seconds */
    double end;        /* when its last operation returned */
};

static long size = 4096;
static double seconds, t_start;
/* In shared memory: workers may be processes. */
static struct shared {
    pthread_barrier_t barrier;
    double t_stop;
} *sh;
static const char *stream_dir; /* --streams: join "fsync-tN" on this mount first */

/* Zeroed memory shared with forked workers (pages are committed when touched). */
static void *shared_alloc(size_t n) {
    void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) die("mmap %zu bytes", n);
    return p;
}

static void *work(void *arg) {
    struct worker *w = arg;
    unsigned char *buf = malloc(size);
    if (!buf) die("malloc");
    uint64_t x = 0x9E3779B97F4A7C15ULL ^ (uint64_t)(w->idx + 1);
    random_bytes(&x, buf, size);
    int failed = 0;
    if (stream_dir) {
        char name[64];
        snprintf(name, sizeof name, "fsync-t%d", w->idx);
        if (intact_setstream_path(stream_dir, name, 0) != 0) {
            /* Not die(): the others and the main process wait at the barrier for this worker. */
            fprintf(stderr, "%s: joining stream %s on %s (--streams needs an intactfs mount): %s\n", bench_name, name,
                    stream_dir, strerror(errno));
            failed = 1;
        }
    }
    pthread_barrier_wait(&sh->barrier); /* everyone's file is open */
    pthread_barrier_wait(&sh->barrier); /* the main thread has read the clock and the counters */
    double t = now();
    while (!failed && t < sh->t_stop && w->ops < w->cap) {
        buf[0] = (unsigned char)w->ops; /* every block a little different */
        ssize_t n = pwrite(w->fd, buf, size, (off_t)w->ops * size);
        if (n != size) {
            if (n >= 0) errno = EIO;
            die("pwrite t%d at %lld", w->idx, (long long)w->ops * size);
        }
        double t1 = now();
        if (fsync(w->fd) != 0) die("fsync t%d", w->idx);
        double t2 = now();
        w->write_secs += t1 - t;
        w->lat[w->ops++] = t2 - t1;
        t = t2;
    }
    w->end = t;
    free(buf);
    return failed ? w : NULL;
}

static void usage(void) {
    fprintf(stderr, "usage: fsync_threads DIR THREADS SECONDS [--size 4096] [--blockdev loopN] [--procs] [--streams]\n");
    exit(2);
}

int main(int argc, char **argv) {
    bench_name = "fsync_threads";
    if (argc < 4) usage();
    const char *dir = argv[1], *blockdev = NULL;
    int threads = atoi(argv[2]);
    seconds = atof(argv[3]);
    int procs = 0, streams = 0;
    for (int i = 4; i < argc; i += 2) {
        if (!strcmp(argv[i], "--procs") || !strcmp(argv[i], "--streams")) {
            procs = 1;
            streams |= !strcmp(argv[i], "--streams");
            i--;
            continue;
        }
        const char *v = opt_value(argc, argv, i);
        if (!strcmp(argv[i], "--size")) size = arg_size(v);
        else if (!strcmp(argv[i], "--blockdev")) blockdev = v;
        else bad_option(argv[i]);
    }
    if (threads < 1 || threads > 1024 || !(seconds > 0) || size < 1) usage();

    if (streams) stream_dir = dir;
    sh = shared_alloc(sizeof *sh);
    struct worker *ws = shared_alloc(threads * sizeof *ws);
    /* Room for 100,000 fsyncs a second per worker: far above what any system here does. */
    long cap = (long)(seconds * 100000) + 4096;
    for (int i = 0; i < threads; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/t%d", dir, i);
        ws[i].idx = i;
        ws[i].cap = cap;
        ws[i].lat = shared_alloc(cap * sizeof *ws[i].lat);
        ws[i].fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
        if (ws[i].fd < 0) die("open %s", p);
    }
    pthread_barrierattr_t ba;
    if (pthread_barrierattr_init(&ba) || pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED)) die("pthread_barrierattr");
    if (pthread_barrier_init(&sh->barrier, &ba, threads + 1)) die("pthread_barrier_init");
    pid_t *pids = calloc(threads, sizeof *pids), parent = getpid();
    if (!pids) die("calloc");
    for (int i = 0; i < threads; i++) {
        if (procs) {
            pids[i] = fork();
            if (pids[i] < 0) die("fork");
            if (pids[i] == 0) {
                /* Should the main process die (a timeout's TERM), no worker waits at a barrier for ever. */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
                _exit(work(&ws[i]) ? 1 : 0);
            }
        } else {
            errno = pthread_create(&ws[i].tid, NULL, work, &ws[i]);
            if (errno) die("pthread_create");
        }
    }
    pthread_barrier_wait(&sh->barrier);
    long long b0, f0, b1, f1;
    disk(blockdev, &b0, &f0);
    t_start = now();
    sh->t_stop = t_start + seconds;
    pthread_barrier_wait(&sh->barrier);
    double t_end = t_start;
    for (int i = 0; i < threads; i++) {
        if (procs) {
            int st;
            if (waitpid(pids[i], &st, 0) < 0) die("waitpid");
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                errno = EIO;
                die("worker %d failed (status %d)", i, st);
            }
        } else {
            errno = pthread_join(ws[i].tid, NULL);
            if (errno) die("pthread_join");
        }
        if (ws[i].end > t_end) t_end = ws[i].end;
    }
    free(pids);
    disk(blockdev, &b1, &f1);
    double secs = t_end - t_start;

    long ops = 0, min_ops = -1, max_ops = 0;
    double write_secs = 0;
    for (int i = 0; i < threads; i++) {
        ops += ws[i].ops;
        write_secs += ws[i].write_secs;
        if (min_ops < 0 || ws[i].ops < min_ops) min_ops = ws[i].ops;
        if (ws[i].ops > max_ops) max_ops = ws[i].ops;
    }
    double *lat = malloc((ops ? ops : 1) * sizeof *lat);
    if (!lat) die("malloc");
    long k = 0;
    for (int i = 0; i < threads; i++) {
        memcpy(lat + k, ws[i].lat, ws[i].ops * sizeof *lat);
        k += ws[i].ops;
        if (close(ws[i].fd) != 0) die("close t%d", i);
    }
    double mean = sort_mean(lat, ops);
    printf("{\"workers\": \"%s\", \"threads\": %d, \"size\": %ld, \"duration\": %g, \"seconds\": %.6f, \"ops\": %ld, \"ops_per_s\": %.3f, "
           "\"fsync_mean_us\": %.1f, \"fsync_p50_us\": %.1f, \"fsync_p99_us\": %.1f, \"fsync_max_us\": %.1f, "
           "\"write_mean_us\": %.1f, \"thread_ops_min\": %ld, \"thread_ops_max\": %ld",
           streams ? "processes, one stream each" : procs ? "processes" : "threads", threads, size, seconds, secs, ops, secs > 0 ? ops / secs : 0, mean * 1e6, median(lat, ops) * 1e6,
           percentile(lat, ops, 99) * 1e6, ops ? lat[ops - 1] * 1e6 : 0, ops ? write_secs / ops * 1e6 : 0, min_ops,
           max_ops);
    if (blockdev) printf(", \"blockdev\": \"%s\", \"disk_flushes\": %lld, \"disk_bytes\": %lld", blockdev, f1 - f0, b1 - b0);
    printf("}\n");
    free(lat);
    return 0;
}
