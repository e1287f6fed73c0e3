// LevelDB fillrandom / fillsync for bench/fs/mount.sh (db_bench is not packaged in Debian 12;
// this follows db_bench's definitions in leveldb 1.23 benchmarks/db_bench.cc).
//
//   g++ -O2 -o leveldb_fill bench/fs/leveldb_fill.cc -lleveldb
//   leveldb_fill DIR [--num N] [--value-size B] [--sync] [--stream NAME] [--ignore-fsync]
//                [--streamsync-each] [--final-sync syncfs:PATH|streamsync:PATH]
//
// A fresh database in DIR/db with db_bench's options (create_if_missing, the library's
// defaults otherwise: 4 MiB write buffer, Snappy compression, 4 KiB blocks). N puts of a
// 16-byte key "%016d" of a uniformly random integer in [0, N) (seed 301, db_bench's) and a
// value of B bytes that compresses to half (db_bench's --compression_ratio 0.5), one put
// per write batch. --sync: WriteOptions::sync (db_bench's fillsync). --stream joins an
// intactfs stream (SETSTREAM ioctl on DIR; --ignore-fsync sets IGNORE_FSYNC);
// --streamsync-each issues STREAMSYNC after every put (durability at the point a synced put
// returns, without LevelDB's fsyncs). The put loop is timed ("secs", as db_bench reports);
// closing the database (it waits for background compaction) and the final sync are timed
// separately. Prints one JSON line.
#include <leveldb/db.h>
#include <leveldb/options.h>
#include <leveldb/write_batch.h>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static uint64_t fnv(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h ? h : 1;
}

static void fail(const std::string &what) {
  fprintf(stderr, "leveldb_fill: %s: %s\n", what.c_str(), strerror(errno));
  exit(1);
}

static void ioctl_on(const std::string &path, unsigned long cmd, void *arg) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) fail(path);
  if (ioctl(fd, cmd, arg) != 0) fail("ioctl on " + path);
  close(fd);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: leveldb_fill DIR [options] (see the header of bench/fs/leveldb_fill.cc)\n");
    return 2;
  }
  std::string dir = argv[1], stream, final_sync = "none";
  long num = 100000;
  int value_size = 100;
  bool sync = false, ignore_fsync = false, streamsync_each = false;
  for (int i = 2; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        fprintf(stderr, "leveldb_fill: %s needs a value\n", a.c_str());
        exit(2);
      }
      return argv[++i];
    };
    if (a == "--num") num = atol(val().c_str());
    else if (a == "--value-size") value_size = atoi(val().c_str());
    else if (a == "--sync") sync = true;
    else if (a == "--stream") stream = val();
    else if (a == "--ignore-fsync") ignore_fsync = true;
    else if (a == "--streamsync-each") streamsync_each = true;
    else if (a == "--final-sync") final_sync = val();
    else {
      fprintf(stderr, "leveldb_fill: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const unsigned long SETSTREAM = 0x4010CC01, STREAMSYNC = 0xCC03;
  if (!stream.empty()) {
    struct {
      uint64_t id;
      uint32_t flags, reserved;
    } arg = {fnv(stream), ignore_fsync ? 1u : 0u, 0};
    ioctl_on(dir, SETSTREAM, &arg);
  }
  int dfd = open(dir.c_str(), O_RDONLY);
  if (dfd < 0) fail(dir);

  // Values: 50 random bytes twice (compression ratio 0.5), from a 1 MiB pool as db_bench.
  std::mt19937_64 gen(301);
  std::string pool;
  while (pool.size() < (1 << 20)) {
    std::string piece;
    for (int k = 0; k < value_size / 2 + 1; k++) piece.push_back(' ' + gen() % 95);
    std::string v = piece;
    while ((int)v.size() < value_size) v += piece;
    pool += v.substr(0, value_size);
  }
  std::mt19937 keys(301);
  std::uniform_int_distribution<long> pick(0, num - 1);

  leveldb::Options options;
  options.create_if_missing = true;
  options.error_if_exists = true;
  leveldb::DB *db;
  leveldb::Status s = leveldb::DB::Open(options, dir + "/db", &db);
  if (!s.ok()) {
    fprintf(stderr, "leveldb_fill: open: %s\n", s.ToString().c_str());
    return 1;
  }
  leveldb::WriteOptions wo;
  wo.sync = sync;
  size_t pos = 0;
  char key[32];
  double t0 = now();
  for (long i = 0; i < num; i++) {
    snprintf(key, sizeof key, "%016ld", pick(keys));
    if (pos + value_size > pool.size()) pos = 0;
    leveldb::WriteBatch batch;
    batch.Put(leveldb::Slice(key, 16), leveldb::Slice(pool.data() + pos, value_size));
    pos += value_size;
    s = db->Write(wo, &batch);
    if (!s.ok()) {
      fprintf(stderr, "leveldb_fill: put %ld: %s\n", i, s.ToString().c_str());
      return 1;
    }
    if (streamsync_each && ioctl(dfd, STREAMSYNC, 0) != 0) fail("STREAMSYNC");
  }
  double secs = now() - t0;
  t0 = now();
  delete db;
  double close_secs = now() - t0;
  double sync_secs = 0;
  if (final_sync != "none") {
    size_t c = final_sync.find(':');
    std::string kind = final_sync.substr(0, c), path = final_sync.substr(c + 1);
    int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) fail(path);
    t0 = now();
    int r = kind == "syncfs" ? syncfs(fd) : ioctl(fd, STREAMSYNC, 0);
    if (r != 0) fail("final sync " + final_sync);
    sync_secs = now() - t0;
    close(fd);
  }
  // Read back: the database opens and holds the keys written last.
  s = leveldb::DB::Open(leveldb::Options(), dir + "/db", &db);
  if (!s.ok()) {
    fprintf(stderr, "leveldb_fill: reopen: %s\n", s.ToString().c_str());
    return 1;
  }
  std::string v;
  s = db->Get(leveldb::ReadOptions(), leveldb::Slice(key, 16), &v);
  if (!s.ok() || (int)v.size() != value_size) {
    fprintf(stderr, "leveldb_fill: the last key is missing after reopening: %s\n", s.ToString().c_str());
    return 1;
  }
  delete db;
  close(dfd);
  printf(
      "{\"bench\": \"leveldb\", \"num\": %ld, \"value_size\": %d, \"sync\": %s, \"streamsync_each\": %s, "
      "\"ignore_fsync\": %s, \"secs\": %.6f, \"ops_per_s\": %.1f, \"micros_per_op\": %.3f, \"close_secs\": %.6f, "
      "\"sync_secs\": %.6f, \"ops_per_s_synced\": %.1f}\n",
      num, value_size, sync ? "true" : "false", streamsync_each ? "true" : "false", ignore_fsync ? "true" : "false", secs,
      num / secs, secs * 1e6 / num, close_secs, sync_secs, num / (secs + close_secs + sync_secs));
  return 0;
}
