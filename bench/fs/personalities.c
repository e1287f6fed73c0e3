// Filebench-style personalities for bench/fs/mount.sh: createfiles, varmail, fileserver,
// webserver, seqwrite, randwrite. Filebench is not packaged for Debian 12, so its flowop
// loops (filebench 1.4/1.5 workloads/*.f) are written out here, thread for thread.
//
//   gcc -O2 -pthread -o personalities bench/fs/personalities.c
//   personalities WORKLOAD DIR [--threads N] [--files N] [--dirwidth N] [--filesize B]
//       [--iosize B] [--appendsize B] [--prealloc PCT] [--duration S] [--ops N]
//       [--fsync-every N] [--log-cap B] [--seed N] [--sync none|syncfs:PATH|streamsync:PATH]
//       [--label L] [--blockdev loopN]
//
// Prints one JSON line. Every flowop counts as one op, as filebench counts them:
//   createfiles  per file: createfile, writewholefile, closefile (until --files exist)
//   varmail      deletefile; createfile, appendfilerand, fsync, closefile; openfile,
//                readwholefile, appendfilerand, fsync, closefile; openfile, readwholefile,
//                closefile (13 per loop, one directory, --prealloc of the files exist)
//   fileserver   createfile, writewholefile, closefile; openfile, appendfilerand,
//                closefile; openfile, readwholefile, closefile; deletefile; statfile (11)
//   webserver    10 x (openfile, readwholefile, closefile) of read-only files, then
//                appendfilerand to one shared log file (31 per loop); the log is
//                truncated to 0 when it passes --log-cap (default 512m; filebench's grows
//                without bound)
//   seqwrite     one thread writes --filesize bytes to a new file in --iosize writes
//                (an op = one write)
//   randwrite    one thread: --ops writes of --iosize at random --iosize-aligned offsets
//                of a --filesize file written and synced beforehand; fsync every
//                --fsync-every writes (an op = one write)
// appendfilerand appends a uniformly random 1..--appendsize bytes (filebench's
// meanappendsize is that bound). Files are DIR/dNNNN/fNNNNNNN, --dirwidth files per
// directory (filebench builds a tree of that mean width; one level here). Directories and
// preallocated files are made before the clock starts and made durable with --sync.
// --sync makes everything durable after the timed loop (timed separately): syncfs(2) on
// PATH, or the intactfs STREAMSYNC ioctl on PATH (syncfs does not reach a FUSE daemon).
// Time-based workloads stop at --duration seconds. --blockdev: disk_bytes and disk_flushes
// are the device's /sys/block/NAME/stat deltas over the timed loop and the final sync.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "../bench_common.h"

static const char *workload, *dir, *label = "", *sync_spec = "none", *blockdev = NULL;
static int nthreads = 1, dirwidth = 100, prealloc = 0, fsync_every = 0;
static long nfiles = 1000, ops_limit = 0;
static long long filesize = 16384, iosize = 1 << 20, appendsize = 16384;
static double duration = 10;
static unsigned long long seed = 1;



// xorshift64*: one state per thread.
static uint64_t rnd(uint64_t *s) {
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1DULL;
}

// ---- the fileset: entries that exist or not, each used by one thread at a time ----
enum { ABSENT = 0, EXISTS = 1 };
static unsigned char *state, *busy;
static pthread_mutex_t fs_lock = PTHREAD_MUTEX_INITIALIZER;

static void path_of(long i, char *buf, size_t n) { snprintf(buf, n, "%s/d%04ld/f%07ld", dir, i / dirwidth, i); }

// Picks an entry in state `want` that no thread is using and marks it busy; -1 if none.
static long pick(uint64_t *r, int want) {
  pthread_mutex_lock(&fs_lock);
  long start = rnd(r) % nfiles, found = -1;
  for (long k = 0; k < nfiles; k++) {
    long i = (start + k) % nfiles;
    if (state[i] == want && !busy[i]) {
      found = i;
      busy[i] = 1;
      break;
    }
  }
  pthread_mutex_unlock(&fs_lock);
  return found;
}

static void put(long i, int st) {
  pthread_mutex_lock(&fs_lock);
  state[i] = st;
  busy[i] = 0;
  pthread_mutex_unlock(&fs_lock);
}

// ---- per-thread counters ----
typedef struct {
  int id;
  uint64_t rng;
  long ops, fsyncs;
  long long wbytes, rbytes;
  double fsync_secs;
  char *buf;
} worker;

static void write_all(int fd, const char *buf, long long n, worker *w, const char *what) {
  while (n > 0) {
    ssize_t k = write(fd, buf, n > iosize ? iosize : n);
    if (k < 0) {
      if (errno == EINTR) continue;
      die("%s: write", what);
    }
    n -= k;
    w->wbytes += k;
  }
}

static void do_fsync(int fd, worker *w, const char *what) {
  double t = now();
  if (fsync(fd) != 0) die("%s: fsync", what);
  w->fsync_secs += now() - t;
  w->fsyncs++;
  w->ops++;
}

static void read_whole(int fd, worker *w, const char *what) {
  for (;;) {
    ssize_t k = read(fd, w->buf, iosize);
    if (k < 0) {
      if (errno == EINTR) continue;
      die("%s: read", what);
    }
    if (k == 0) break;
    w->rbytes += k;
  }
  w->ops++;
}

static void append_rand(int fd, worker *w, const char *what) {
  long long n = 1 + rnd(&w->rng) % appendsize;
  if (lseek(fd, 0, SEEK_END) < 0) die("%s: lseek", what);
  write_all(fd, w->buf, n, w, what);
  w->ops++;
}

static int open_file(const char *p, int flags, worker *w) {
  int fd = open(p, flags, 0644);
  if (fd < 0) die("%s: open", p);
  w->ops++;
  return fd;
}

static void close_file(int fd, worker *w, const char *p) {
  if (close(fd) != 0) die("%s: close", p);
  w->ops++;
}

static void create_whole(long i, worker *w) {
  char p[4096];
  path_of(i, p, sizeof p);
  int fd = open_file(p, O_CREAT | O_EXCL | O_WRONLY, w);
  write_all(fd, w->buf, filesize, w, p);
  w->ops++;
  close_file(fd, w, p);
}

// openfile, readwholefile, closefile.
static void read_file(long i, worker *w) {
  char p[4096];
  path_of(i, p, sizeof p);
  int fd = open_file(p, O_RDONLY, w);
  read_whole(fd, w, p);
  close_file(fd, w, p);
}

static void delete_file(long i, worker *w) {
  char p[4096];
  path_of(i, p, sizeof p);
  if (unlink(p) != 0) die("%s: unlink", p);
  w->ops++;
}

static volatile int stop_flag;
static long next_file;  // createfiles: next entry to create
static double t_end;

static int done(worker *w) {
  (void)w;
  if (stop_flag) return 1;
  if (now() >= t_end) {
    stop_flag = 1;
    return 1;
  }
  return 0;
}

static void *run_createfiles(void *arg) {
  worker *w = arg;
  for (;;) {
    long i = __sync_fetch_and_add(&next_file, 1);
    if (i >= nfiles) break;
    create_whole(i, w);
  }
  return NULL;
}

static void *run_varmail(void *arg) {
  worker *w = arg;
  char p[4096];
  while (!done(w)) {
    long i = pick(&w->rng, EXISTS);
    if (i >= 0) {
      delete_file(i, w);
      put(i, ABSENT);
    }
    i = pick(&w->rng, ABSENT);
    if (i >= 0) {
      path_of(i, p, sizeof p);
      int fd = open_file(p, O_CREAT | O_EXCL | O_WRONLY, w);
      append_rand(fd, w, p);
      do_fsync(fd, w, p);
      close_file(fd, w, p);
      put(i, EXISTS);
    }
    i = pick(&w->rng, EXISTS);
    if (i >= 0) {
      path_of(i, p, sizeof p);
      int fd = open_file(p, O_RDWR, w);
      read_whole(fd, w, p);
      append_rand(fd, w, p);
      do_fsync(fd, w, p);
      close_file(fd, w, p);
      put(i, EXISTS);
    }
    i = pick(&w->rng, EXISTS);
    if (i >= 0) {
      read_file(i, w);
      put(i, EXISTS);
    }
  }
  return NULL;
}

static void *run_fileserver(void *arg) {
  worker *w = arg;
  char p[4096];
  struct stat st;
  while (!done(w)) {
    long i = pick(&w->rng, ABSENT);
    if (i >= 0) {
      create_whole(i, w);
      put(i, EXISTS);
    }
    i = pick(&w->rng, EXISTS);
    if (i >= 0) {
      path_of(i, p, sizeof p);
      int fd = open_file(p, O_WRONLY, w);
      append_rand(fd, w, p);
      close_file(fd, w, p);
      put(i, EXISTS);
    }
    i = pick(&w->rng, EXISTS);
    if (i >= 0) {
      read_file(i, w);
      put(i, EXISTS);
    }
    i = pick(&w->rng, EXISTS);
    if (i >= 0) {
      delete_file(i, w);
      put(i, ABSENT);
    }
    i = pick(&w->rng, EXISTS);
    if (i >= 0) {
      path_of(i, p, sizeof p);
      if (stat(p, &st) != 0) die("%s: stat", p);
      w->ops++;
      put(i, EXISTS);
    }
  }
  return NULL;
}

static char logpath[4096];
static long long log_cap = 512LL << 20;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void *run_webserver(void *arg) {
  worker *w = arg;
  int logfd = open(logpath, O_WRONLY | O_APPEND);
  if (logfd < 0) die("%s: open", logpath);
  while (!done(w)) {
    for (int k = 0; k < 10; k++) {
      // The fileset is read-only: threads may read the same file at once.
      read_file(rnd(&w->rng) % nfiles, w);
    }
    long long n = 1 + rnd(&w->rng) % appendsize;
    write_all(logfd, w->buf, n, w, logpath);
    w->ops++;
    // Filebench lets the log grow without bound; here it starts over past --log-cap.
    if (w->ops % 1024 < 31) {
      struct stat st;
      pthread_mutex_lock(&log_lock);
      if (fstat(logfd, &st) == 0 && st.st_size > log_cap && ftruncate(logfd, 0) != 0) die("%s: ftruncate", logpath);
      pthread_mutex_unlock(&log_lock);
    }
  }
  close(logfd);
  return NULL;
}

static void *run_seqwrite(void *arg) {
  worker *w = arg;
  char p[4096];
  snprintf(p, sizeof p, "%s/seqfile", dir);
  int fd = open(p, O_CREAT | O_EXCL | O_WRONLY, 0644);
  if (fd < 0) die("%s: open", p);
  for (long long left = filesize; left > 0;) {
    long long n = left > iosize ? iosize : left;
    write_all(fd, w->buf, n, w, p);
    w->ops++;
    left -= n;
  }
  if (close(fd) != 0) die("%s: close", p);
  return NULL;
}

static int randfd;

static void *run_randwrite(void *arg) {
  worker *w = arg;
  long long blocks = filesize / iosize;
  for (long k = 0; k < ops_limit; k++) {
    off_t off = (off_t)(rnd(&w->rng) % blocks) * iosize;
    // Different bytes each time, so nothing can be skipped as unchanged.
    memcpy(w->buf, &k, sizeof k);
    for (ssize_t done = 0; done < iosize;) {
      ssize_t n = pwrite(randfd, w->buf + done, iosize - done, off + done);
      if (n < 0) {
        if (errno == EINTR) continue;
        die("randfile: pwrite");
      }
      done += n;
    }
    w->wbytes += iosize;
    w->ops++;
    if (fsync_every > 0 && (k + 1) % fsync_every == 0) {
      double t = now();
      if (fsync(randfd) != 0) die("randfile: fsync");
      w->fsync_secs += now() - t;
      w->fsyncs++;
    }
  }
  return NULL;
}


// Bytes written and flushes so far on block device `blockdev` (/sys/block/DEV/stat 7, 16).

static void mkdirs(void) {
  char p[4096];
  long ndirs = (nfiles + dirwidth - 1) / dirwidth;
  for (long d = 0; d < ndirs; d++) {
    snprintf(p, sizeof p, "%s/d%04ld", dir, d);
    if (mkdir(p, 0755) != 0 && errno != EEXIST) die("%s: mkdir", p);
  }
}


int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: personalities WORKLOAD DIR [options] (see the header of bench/fs/personalities.c)\n");
    return 2;
  }
  workload = argv[1];
  static char name[128];
  snprintf(name, sizeof name, "personalities %s", workload);
  bench_name = name;
  dir = argv[2];
  for (int i = 3; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      fprintf(stderr, "personalities: %s needs a value\n", a);
      return 2;
    }
    i++;
    if (!strcmp(a, "--threads")) nthreads = atoi(v);
    else if (!strcmp(a, "--files")) nfiles = atol(v);
    else if (!strcmp(a, "--dirwidth")) dirwidth = atoi(v);
    else if (!strcmp(a, "--filesize")) filesize = arg_size(v);
    else if (!strcmp(a, "--iosize")) iosize = arg_size(v);
    else if (!strcmp(a, "--appendsize")) appendsize = arg_size(v);
    else if (!strcmp(a, "--prealloc")) prealloc = atoi(v);
    else if (!strcmp(a, "--duration")) duration = atof(v);
    else if (!strcmp(a, "--ops")) ops_limit = atol(v);
    else if (!strcmp(a, "--fsync-every")) fsync_every = atoi(v);
    else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--sync")) sync_spec = v;
    else if (!strcmp(a, "--label")) label = v;
    else if (!strcmp(a, "--log-cap")) log_cap = arg_size(v);
    else if (!strcmp(a, "--blockdev")) blockdev = v;
    else {
      fprintf(stderr, "personalities: unknown option %s\n", a);
      return 2;
    }
  }
  void *(*fn)(void *);
  int timed = 0;
  if (!strcmp(workload, "createfiles")) fn = run_createfiles;
  else if (!strcmp(workload, "varmail")) fn = run_varmail, timed = 1;
  else if (!strcmp(workload, "fileserver")) fn = run_fileserver, timed = 1;
  else if (!strcmp(workload, "webserver")) fn = run_webserver, timed = 1;
  else if (!strcmp(workload, "seqwrite")) fn = run_seqwrite, nthreads = 1;
  else if (!strcmp(workload, "randwrite")) fn = run_randwrite, nthreads = 1;
  else {
    fprintf(stderr, "personalities: unknown workload %s\n", workload);
    return 2;
  }
  long long bufsize = iosize > appendsize ? iosize : appendsize;
  if (bufsize < filesize && strcmp(workload, "seqwrite") && strcmp(workload, "randwrite")) bufsize = filesize;

  // ---- set-up (not timed) ----
  double t_setup = now();
  worker setup = {.rng = seed};
  setup.buf = malloc(bufsize);
  memset(setup.buf, 'x', bufsize);
  if (!strcmp(workload, "seqwrite")) {
    // nothing: the file is new
  } else if (!strcmp(workload, "randwrite")) {
    char p[4096];
    snprintf(p, sizeof p, "%s/randfile", dir);
    randfd = open(p, O_CREAT | O_RDWR, 0644);
    if (randfd < 0) die("%s: open", p);
    write_all(randfd, setup.buf, filesize, &setup, p);
    if (fsync(randfd) != 0) die("%s: fsync", p);
  } else {
    state = calloc(nfiles, 1);
    busy = calloc(nfiles, 1);
    mkdirs();
    long n = !strcmp(workload, "createfiles") ? 0 : nfiles * prealloc / 100;
    for (long i = 0; i < n; i++) {
      create_whole(i, &setup);
      state[i] = EXISTS;
    }
    if (!strcmp(workload, "webserver")) {
      snprintf(logpath, sizeof logpath, "%s/logfile", dir);
      int fd = open(logpath, O_CREAT | O_WRONLY, 0644);
      if (fd < 0) die("%s: open", logpath);
      write_all(fd, setup.buf, filesize, &setup, logpath);
      close(fd);
    }
  }
  do_sync(sync_spec);
  t_setup = now() - t_setup;

  // ---- the measured part ----
  worker *ws = calloc(nthreads, sizeof *ws);
  pthread_t *tids = calloc(nthreads, sizeof *tids);
  for (int t = 0; t < nthreads; t++) {
    ws[t].id = t;
    ws[t].rng = seed * 0x9E3779B97F4A7C15ULL + t + 1;
    ws[t].buf = malloc(bufsize);
    memset(ws[t].buf, 'a' + t % 26, bufsize);
  }
  long long b0, f0, b1, f1;
  disk(blockdev, &b0, &f0);
  double t0 = now();
  t_end = timed ? t0 + duration : 1e300;
  for (int t = 0; t < nthreads; t++)
    if (pthread_create(&tids[t], NULL, fn, &ws[t]) != 0) die("pthread_create");
  for (int t = 0; t < nthreads; t++) pthread_join(tids[t], NULL);
  double secs = now() - t0;
  if (!strcmp(workload, "randwrite")) close(randfd);
  double sync_secs = do_sync(sync_spec);
  disk(blockdev, &b1, &f1);

  long ops = 0, fsyncs = 0;
  long long wb = 0, rb = 0;
  double fsync_secs = 0;
  for (int t = 0; t < nthreads; t++) {
    ops += ws[t].ops;
    fsyncs += ws[t].fsyncs;
    wb += ws[t].wbytes;
    rb += ws[t].rbytes;
    fsync_secs += ws[t].fsync_secs;
  }
  printf("{\"workload\": \"%s\", \"label\": \"%s\", \"threads\": %d, \"files\": %ld, \"filesize\": %lld, "
         "\"ops\": %ld, \"secs\": %.6f, \"sync_secs\": %.6f, \"setup_secs\": %.3f, "
         "\"ops_per_s\": %.3f, \"ops_per_s_synced\": %.3f, \"mb_written\": %.3f, \"mb_read\": %.3f, "
         "\"mb_per_s_synced\": %.3f, \"fsyncs\": %ld, \"fsync_mean_us\": %.1f, \"disk_bytes\": %lld, \"disk_flushes\": %lld}\n",
         workload, label, nthreads, nfiles, filesize, ops, secs, sync_secs, t_setup, ops / secs, ops / (secs + sync_secs),
         wb / 1048576.0, rb / 1048576.0, (wb + rb) / 1048576.0 / (secs + sync_secs), fsyncs,
         fsyncs ? fsync_secs / fsyncs * 1e6 : 0.0, b1 - b0, f1 - f0);
  return 0;
}
