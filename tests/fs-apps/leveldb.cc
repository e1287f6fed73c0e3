// LevelDB workload for the fs-apps tests (adapted from study/leveldb/workload.cc).
//   leveldb_app write DIR   create DIR/db; 20,000 deterministic Puts in batches (some
//                           synchronous), overwrites, deletes, CompactRange, reopen, more
//                           writes, reopen; prints a summary
//   leveldb_app dump DIR    open DIR/db with paranoid_checks, iterate: one line per key with
//                           the value's length and FNV-1a hash, then a total digest
// Build: g++ -O2 -o leveldb_app leveldb.cc -lleveldb
#include <leveldb/db.h>
#include <leveldb/env.h>
#include <leveldb/write_batch.h>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

static void Check(const leveldb::Status& s, const char* what) {
  if (!s.ok()) {
    fprintf(stderr, "leveldb_app: %s: %s\n", what, s.ToString().c_str());
    exit(1);
  }
}

static uint64_t Mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static std::string Key(int i) {
  char b[32];
  // Scattered key order (so flushes overlap and compactions merge), fixed width.
  snprintf(b, sizeof b, "k%016llx-%06d", (unsigned long long)Mix(i), i);
  return b;
}

// Value of generation g of key i: 10 bytes to ~1.5 KB, partly compressible.
static std::string Value(int i, int g) {
  uint64_t s = Mix(i * 7 + g);
  size_t n = 10 + s % 1500;
  std::string v(n, ' ');
  for (size_t k = 0; k < n; k++) {
    if (k % 64 < 32) {
      s = Mix(s);
      v[k] = 'a' + s % 26;
    } else {
      v[k] = '0' + g;
    }
  }
  v[0] = '0' + g;  // the generation, for the dump's check
  return v;
}

static uint64_t Fnv(const leveldb::Slice& s) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < s.size(); i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
  return h;
}

// Wait until LevelDB's background thread is idle (see study/leveldb/workload.cc): the
// default Env runs scheduled work on one thread in FIFO order.
struct Marker { std::mutex m; std::condition_variable cv; bool ran = false; };
static void RunMarker(void* arg) {
  Marker* mk = static_cast<Marker*>(arg);
  std::lock_guard<std::mutex> l(mk->m);
  mk->ran = true;
  mk->cv.notify_one();
}
static void WaitIdle(leveldb::DB* db) {
  std::string before, after;
  do {
    db->GetProperty("leveldb.sstables", &before);
    Marker mk;
    leveldb::Env::Default()->Schedule(RunMarker, &mk);
    std::unique_lock<std::mutex> l(mk.m);
    mk.cv.wait(l, [&] { return mk.ran; });
    db->GetProperty("leveldb.sstables", &after);
  } while (before != after);
}

static const int kKeys = 20000;

static leveldb::DB* Open(const std::string& path, bool create) {
  leveldb::Options opt;
  opt.create_if_missing = create;
  opt.error_if_exists = create;
  opt.paranoid_checks = true;
  opt.write_buffer_size = 256 * 1024;  // many memtable flushes and level-0 tables
  opt.max_file_size = 1 << 20;
  leveldb::DB* db;
  Check(leveldb::DB::Open(opt, path, &db), "open");
  return db;
}

static int Write(const std::string& dir) {
  std::string path = dir + "/db";
  leveldb::DB* db = Open(path, true);
  // 20,000 Puts in batches of 100; every 10th batch synchronous.
  for (int b = 0; b < kKeys / 100; b++) {
    leveldb::WriteBatch batch;
    for (int i = b * 100; i < b * 100 + 100; i++) batch.Put(Key(i), Value(i, 0));
    leveldb::WriteOptions w;
    w.sync = (b % 10 == 9);
    Check(db->Write(w, &batch), "write");
  }
  // Single Puts that overwrite, single Deletes (every 7th key), a synchronous one.
  for (int i = 0; i < kKeys; i += 3) Check(db->Put(leveldb::WriteOptions(), Key(i), Value(i, 1)), "overwrite");
  for (int i = 0; i < kKeys; i += 7) Check(db->Delete(leveldb::WriteOptions(), Key(i)), "delete");
  {
    leveldb::WriteOptions w;
    w.sync = true;
    Check(db->Put(w, "sync-marker", "1"), "sync put");
  }
  WaitIdle(db);
  db->CompactRange(nullptr, nullptr);
  WaitIdle(db);
  delete db;

  // Reopen (replays the log), more changes, a snapshot read, close; reopen once more.
  db = Open(path, false);
  const leveldb::Snapshot* snap = db->GetSnapshot();
  for (int i = 1; i < kKeys; i += 11) Check(db->Put(leveldb::WriteOptions(), Key(i), Value(i, 2)), "put 2");
  for (int i = 5; i < kKeys; i += 17) Check(db->Delete(leveldb::WriteOptions(), Key(i)), "delete 2");
  {
    leveldb::ReadOptions r;
    r.snapshot = snap;
    std::string v;
    Check(db->Get(r, Key(1), &v), "snapshot get");
    printf("snapshot sees generation: %c\n", v[0]);
  }
  db->ReleaseSnapshot(snap);
  WaitIdle(db);
  delete db;
  db = Open(path, false);
  leveldb::Slice a("k4"), z("k8");
  db->CompactRange(&a, &z);
  WaitIdle(db);
  delete db;
  printf("write done\n");
  return 0;
}

static int Dump(const std::string& dir) {
  leveldb::DB* db = Open(dir + "/db", false);
  leveldb::ReadOptions r;
  r.verify_checksums = true;
  r.fill_cache = false;
  leveldb::Iterator* it = db->NewIterator(r);
  uint64_t total = 1469598103934665603ULL;
  int n = 0, bad = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    uint64_t h = Fnv(it->value());
    printf("%s %zu %016llx\n", it->key().ToString().c_str(), it->value().size(), (unsigned long long)h);
    total = (total ^ h) * 1099511628211ULL;
    n++;
    // Check the value against the generator.
    std::string k = it->key().ToString();
    if (k.size() > 18 && k[0] == 'k') {
      int i = atoi(k.c_str() + 18);
      char g = it->value()[0];
      if (it->value().ToString() != Value(i, g - '0')) bad++;
    }
  }
  Check(it->status(), "iterate");
  delete it;
  // Expected contents, computed independently of the database.
  int expected = 1;  // sync-marker
  for (int i = 0; i < kKeys; i++) {
    bool deleted = (i % 7 == 0 && !(i % 11 == 1)) || (i % 17 == 5);
    if (!deleted) expected++;
  }
  printf("keys: %d (expected %d), values not matching the generator: %d, digest %016llx\n", n, expected, bad,
         (unsigned long long)total);
  delete db;
  return n == expected && bad == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "write") == 0) return Write(argv[2]);
  if (argc == 3 && strcmp(argv[1], "dump") == 0) return Dump(argv[2]);
  fprintf(stderr, "usage: leveldb_app write|dump DIR\n");
  return 2;
}
