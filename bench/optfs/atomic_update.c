/* A gedit-style atomic update, timed (OptFS, the seeds' paper `001`, §7: gedit saves a
 * document by writing the new version to a temporary file, fsyncing it and renaming it over
 * the old one). For bench/optfs/bench.sh; the crash-consistency side is bench/optfs/
 * gedit_update.c.
 *
 *   gcc -O2 -o atomic_update bench/optfs/atomic_update.c
 *   atomic_update DIR [--n 200] [--size 12k] [--sync none|syncfs:PATH|streamsync:PATH]
 *                     [--blockdev loopN] [--label L]
 *
 * Set-up (not timed): DIR/doc, version 0, written and fsynced, then --sync. Then N times:
 *   open("doc.tmp", O_CREAT|O_TRUNC|O_WRONLY); write --size bytes (version k, every 64-byte
 *   line stamped with k); fsync; close; rename("doc.tmp", "doc")
 * and each of these operations is timed from the open to the rename's return. After the
 * loop, --sync makes everything durable (timed separately: what osync defers), and doc must
 * hold version N. The program calls plain fsync: run it under `intact fs exec --fsync-as
 * osync` (or on a `-o fsync=osync` mount) to make that an OptFS osync without changing it.
 *
 * Prints one JSON line: ops, secs (the loop), ops_per_s, lat_median_us, lat_p99_us,
 * lat_mean_us, fsync_median_us, sync_secs (the final --sync), and with --blockdev the
 * device's flushes and bytes written during the loop (disk_flushes, disk_bytes) and during
 * the final sync (sync_disk_flushes). */
#include "../bench_common.h"
#include <sys/stat.h>

static void write_all(int fd, const char *buf, size_t n) {
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, buf + done, n - done);
        if (w < 0) {
            if (errno == EINTR) continue;
            die("doc.tmp: write");
        }
        done += (size_t)w;
    }
}

/* Version k of the document: 64-byte lines "version K line L ...\n". */
static void version(char *buf, size_t n, long k) {
    for (size_t off = 0; off < n; off += 64) {
        char line[64];
        memset(line, '.', sizeof line);
        int len = snprintf(line, sizeof line, "version %010ld line %06zu", k, off / 64);
        if (len > 0 && len < 63) line[len] = ' ';
        line[63] = '\n';
        size_t m = n - off < 64 ? n - off : 64;
        memcpy(buf + off, line, m);
    }
}

int main(int argc, char **argv) {
    bench_name = "atomic_update";
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: atomic_update DIR [--n 200] [--size 12k] [--sync none|syncfs:PATH|streamsync:PATH] [--blockdev loopN] [--label L]\n");
        return 2;
    }
    const char *dir = argv[1], *sync_spec = "none", *blockdev = NULL, *label = "";
    long n = 200;
    long long size = 12 << 10;
    for (int i = 2; i < argc; i += 2) {
        const char *a = argv[i], *v = opt_value(argc, argv, i);
        if (!strcmp(a, "--n")) n = atol(v);
        else if (!strcmp(a, "--size")) size = arg_size(v);
        else if (!common_option(a, v, &sync_spec, &blockdev, &label)) bad_option(a);
    }
    if (n < 1 || size < 1) {
        fprintf(stderr, "atomic_update: --n and --size must be positive\n");
        return 2;
    }
    if (chdir(dir) != 0) die("%s: chdir", dir);
    char *buf = malloc(size), *check = malloc(size);
    double *lat = calloc(n, sizeof *lat), *fs = calloc(n, sizeof *fs);
    if (!buf || !check || !lat || !fs) die("malloc");

    /* ---- set-up: version 0 ---- */
    version(buf, size, 0);
    int fd = open("doc", O_CREAT | O_TRUNC | O_WRONLY, 0644);
    if (fd < 0) die("doc: open");
    write_all(fd, buf, size);
    if (fsync(fd) != 0) die("doc: fsync");
    if (close(fd) != 0) die("doc: close");

    /* ---- the measured loop, after --sync ---- */
    struct timed tm;
    timed_start(&tm, blockdev, sync_spec);
    for (long k = 1; k <= n; k++) {
        version(buf, size, k);
        double a = now();
        fd = open("doc.tmp", O_CREAT | O_TRUNC | O_WRONLY, 0644);
        if (fd < 0) die("doc.tmp: open");
        write_all(fd, buf, size);
        double s = now();
        if (fsync(fd) != 0) die("doc.tmp: fsync");
        fs[k - 1] = now() - s;
        if (close(fd) != 0) die("doc.tmp: close");
        if (rename("doc.tmp", "doc") != 0) die("rename doc.tmp doc");
        lat[k - 1] = now() - a;
    }
    timed_end(&tm, blockdev, sync_spec);

    /* ---- doc is version n, whole ---- */
    version(buf, size, n);
    fd = open("doc", O_RDONLY);
    if (fd < 0) die("doc: open");
    ssize_t got = 0;
    for (ssize_t r; got < size && (r = read(fd, check + got, size - got)) > 0;) got += r;
    struct stat st;
    if (fstat(fd, &st) != 0) die("doc: fstat");
    close(fd);
    if (got != size || st.st_size != size || memcmp(buf, check, size) != 0) {
        errno = 0;
        die("doc is not version %ld after the loop (%zd bytes read)", n, got);
    }

    qsort(fs, n, sizeof *fs, cmp_double);
    printf("{\"bench\": \"atomic_update\", \"label\": \"%s\", \"n\": %ld, \"size\": %lld, ", label, n, size);
    print_ops(n, lat, &tm);
    printf("\"fsync_median_us\": %.1f, ", median(fs, n) * 1e6);
    print_disk(&tm);
    printf("}\n");
    return 0;
}
