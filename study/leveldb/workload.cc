// LevelDB workload of thesis 004, section 3.6, on today's LevelDB (Debian 12: 1.23).
// Run in an empty directory: creates ./db, does 10 Puts of 50 KB (only the last with
// sync=true), prints "synced 10", closes, reopens (recovery path), compacts the table files,
// reads, closes, prints "done".
//   workload                      the workload
//   workload --crash-after-sync   _exit just before the first close (a process crash; selftest)
#include <leveldb/db.h>
#include <leveldb/env.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "common.h"

static void Check(const leveldb::Status& s, const char* what) {
  if (!s.ok()) { fprintf(stderr, "workload: %s: %s\n", what, s.ToString().c_str()); exit(1); }
}

// Unbuffered, so the "output" operation sits exactly between the file-system calls.
static void Say(const char* msg) {
  if (write(1, msg, strlen(msg)) != (ssize_t)strlen(msg)) exit(1);
}

// Wait until LevelDB's background thread (memtable flushes, compactions) is idle, so every
// run issues the same file-system calls: otherwise closing the DB races with a running flush
// or compaction, which LevelDB then abandons ("Deleting DB during compaction").  The default
// (POSIX) Env runs Schedule()d work on one thread in FIFO order, so our marker runs after the
// queued LevelDB work; repeat while that work changed the set of table files, since it may
// have queued a follow-up compaction behind our marker.
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

int main(int argc, char** argv) {
  bool crash_after_sync = argc > 1 && strcmp(argv[1], "--crash-after-sync") == 0;
  leveldb::Options opt;
  opt.create_if_missing = true;
  opt.error_if_exists = true;          // always start from an empty directory
  opt.write_buffer_size = 64 * 1024;   // memtable -> level-0 table after ~64 KB (thesis: 64 KB;
                                       // also 1.23's minimum), i.e. after every second Put
  // (max_file_size would not help: 1.23 clips it to >= 1 MB.)
  leveldb::DB* db;
  Check(leveldb::DB::Open(opt, "db", &db), "open");

  // 10 Puts of 50 KB.  Every second Put fills the memtable: LevelDB switches to a new log and
  // flushes the old memtable into a table file in the background (4 flushes here; Puts 8-9
  // stay in the log).  Only the last Put is synchronous: it makes all 10 durable.
  for (int i = 0; i < kNumPuts; i++) {
    leveldb::WriteOptions w;
    w.sync = (i == kNumPuts - 1);
    Check(db->Put(w, Key(i), Value(i)), "put");
  }
  Say("synced 10\n");  // the checker demands all 10 keys in crash states after this output
  WaitIdle(db);  // let the last flush finish (else close abandons it, varying the run)
  if (crash_after_sync) _exit(0);
  delete db;     // close

  // Reopen: recovery replays the log (Puts 8-9) into a new level-0 table, writes a new
  // MANIFEST and CURRENT, and deletes the old log.
  opt.create_if_missing = false;
  opt.error_if_exists = false;
  Check(leveldb::DB::Open(opt, "db", &db), "reopen");
  // Table -> table compactions.  The thesis (LevelDB 1.15) got one from the Puts alone; 1.23
  // cannot: the first flush goes to level 2, the second to level 1, so the 5 flushes leave only
  // 3 of the 4 level-0 files that trigger a compaction, and no option lowers that.  CompactRange
  // runs them synchronously: levels 0+1 -> a new level-1 table, then levels 1+2 -> level 2.
  db->CompactRange(nullptr, nullptr);
  std::string v;
  Check(db->Get(leveldb::ReadOptions(), Key(kNumPuts - 1), &v), "get");
  if (v != Value(kNumPuts - 1)) { fprintf(stderr, "workload: wrong value read back\n"); return 1; }
  delete db;
  Say("done\n");
  return 0;
}
