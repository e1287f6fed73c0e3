// Generated file-system workload for the explorer benchmark (bench/check.sh,
// docs/performance.md "Exploring crash states").  Deterministic: the same seed and step count
// always issue the same calls.  Run in an empty directory.
//   gen_workload [SEED [STEPS]]        (defaults: 1 and 90; ~400 micro-ops under --apm default)
// A mix of creates, appends of 100 B - 10 KiB, overwrites, renames, a few unlinks, mkdir,
// fsync/fdatasync, and unbuffered outputs (write(1, ...)).
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILES 16

static uint64_t rng_state;
static uint64_t next_rand(void) {  // xorshift64*
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1DULL;
}
static unsigned rnd(unsigned n) { return (unsigned)(next_rand() % n); }

static void die(const char* what, const char* path) {
  fprintf(stderr, "gen_workload: %s %s: %s\n", what, path, strerror(errno));
  exit(1);
}

static char names[MAX_FILES][64];
static int nfiles;
static int serial;
static unsigned char buf[10240];

static void fill(size_t n) {
  for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)('a' + rnd(26));
}
static int open_or_die(const char* p, int flags) {
  int fd = open(p, flags, 0644);
  if (fd < 0) die("open", p);
  return fd;
}
static void write_all(int fd, const void* b, size_t n, const char* p) {
  if (write(fd, b, n) != (ssize_t)n) die("write", p);
}
static void say(const char* fmt, int a) {
  char line[96];
  int n = snprintf(line, sizeof line, fmt, a);
  write_all(1, line, (size_t)n, "stdout");
}
static const char* dir_of(void) { return rnd(3) == 0 ? "d0/" : rnd(2) ? "d1/" : ""; }

static void create_file(void) {
  if (nfiles == MAX_FILES) return;
  snprintf(names[nfiles], sizeof names[0], "%sf%d", dir_of(), serial++);
  int fd = open_or_die(names[nfiles], O_WRONLY | O_CREAT | O_TRUNC);
  size_t n = 100 + rnd(2000);
  fill(n);
  write_all(fd, buf, n, names[nfiles]);
  close(fd);
  nfiles++;
}
static void append_file(void) {
  if (!nfiles) return;
  const char* p = names[rnd(nfiles)];
  int fd = open_or_die(p, O_WRONLY | O_APPEND);
  size_t n = 100 + rnd(10240 - 100 + 1);
  fill(n);
  write_all(fd, buf, n, p);
  if (rnd(3) == 0 && fsync(fd) != 0) die("fsync", p);
  close(fd);
}
static void overwrite_file(void) {
  if (!nfiles) return;
  const char* p = names[rnd(nfiles)];
  int fd = open_or_die(p, O_WRONLY);
  off_t size = lseek(fd, 0, SEEK_END);
  size_t n = 100 + rnd(900);
  if ((off_t)n > size) n = (size_t)size;
  off_t at = size > (off_t)n ? (off_t)rnd((unsigned)(size - (off_t)n)) : 0;
  fill(n);
  if (pwrite(fd, buf, n, at) != (ssize_t)n) die("pwrite", p);
  if (rnd(2) == 0 && fdatasync(fd) != 0) die("fdatasync", p);
  close(fd);
}
static void rename_file(void) {  // the usual update: write a temporary, sync, rename over
  if (!nfiles) return;
  int i = rnd(nfiles);
  char tmp[80];
  snprintf(tmp, sizeof tmp, "%s.tmp", names[i]);
  int fd = open_or_die(tmp, O_WRONLY | O_CREAT | O_TRUNC);
  size_t n = 100 + rnd(3000);
  fill(n);
  write_all(fd, buf, n, tmp);
  if (rnd(4) != 0 && fsync(fd) != 0) die("fsync", tmp);
  close(fd);
  if (rename(tmp, names[i]) != 0) die("rename", tmp);
}
static void move_file(void) {  // rename to a new name, possibly another directory
  if (!nfiles) return;
  int i = rnd(nfiles);
  char to[64];
  snprintf(to, sizeof to, "%sf%d", dir_of(), serial++);
  if (rename(names[i], to) != 0) die("rename", names[i]);
  strcpy(names[i], to);
}
static void unlink_file(void) {
  if (nfiles < 4) return;
  int i = rnd(nfiles);
  if (unlink(names[i]) != 0) die("unlink", names[i]);
  strcpy(names[i], names[--nfiles]);
}
static void sync_dir(void) {
  const char* d = rnd(2) ? "." : "d0";
  int fd = open(d, O_RDONLY | O_DIRECTORY);
  if (fd < 0) die("open", d);
  if (fsync(fd) != 0) die("fsync", d);
  close(fd);
}

int main(int argc, char** argv) {
  rng_state = 0x9E3779B97F4A7C15ULL ^ (uint64_t)strtoull(argc > 1 ? argv[1] : "1", 0, 10);
  int steps = argc > 2 ? atoi(argv[2]) : 90;
  if (mkdir("d0", 0755) != 0) die("mkdir", "d0");
  if (mkdir("d1", 0755) != 0) die("mkdir", "d1");
  for (int i = 0; i < 4; i++) create_file();
  for (int s = 0; s < steps; s++) {
    unsigned r = rnd(100);
    if (r < 15) create_file();
    else if (r < 45) append_file();
    else if (r < 60) overwrite_file();
    else if (r < 72) rename_file();
    else if (r < 80) move_file();
    else if (r < 85) unlink_file();
    else if (r < 93) sync_dir();
    else say("step %d\n", s);
  }
  say("done\n", 0);
  return 0;
}
