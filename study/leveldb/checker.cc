// Checker for the LevelDB workload (thesis 004, section 3.6; workload.cc).
//   checker <crash_dir> <stdout_file>
// Opens <crash_dir>/db as an application would after a crash, with paranoid_checks; on an
// error reported by LevelDB (open or read) runs RepairDB and tries once more.  Exit 0 if the
// state is consistent, 1 if not (reason on stderr), 2 on bad usage.
//
// Guarantees checked.  Documented by LevelDB (doc/index.md, "Synchronous Writes", "Atomic
// Updates"; include/leveldb/options.h WriteOptions::sync):
//   - each Put is atomic: a key is absent or has exactly its value (also catches silent
//     corruption, which paranoid_checks / checksums should have turned into an error);
//   - after a Put with sync=true returns, it and every earlier Put survive a system crash
//     (durability; here: once "synced 10" was printed, all 10 keys must be present).
// Expected but not stated in so many words by the documentation:
//   - Puts survive in order (no later Put without the earlier ones): the log is a single
//     append-only sequence replayed as a prefix, which the thesis relies on as a guarantee;
//   - a crashed database can be opened again, possibly after RepairDB, and holds no keys
//     other than the workload's.
#include <leveldb/db.h>
#include <leveldb/options.h>
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "common.h"

// `cls` is the thesis Table 4.3 consequence class (study/README.md).
static int Fail(const char* cls, const std::string& why) {
  fprintf(stderr, "consequence: %s: %s\n", cls, why.c_str());
  return 1;
}

// True if `dir` holds any LevelDB file (CURRENT, MANIFEST-*, *.log, *.ldb, *.sst).
static bool HasDbFiles(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return false;
  bool found = false;
  while (struct dirent* e = readdir(d)) {
    std::string n = e->d_name;
    auto ends = [&](const char* s) { size_t l = strlen(s); return n.size() > l && n.compare(n.size() - l, l, s) == 0; };
    if (n == "CURRENT" || n.rfind("MANIFEST-", 0) == 0 || ends(".log") || ends(".ldb") || ends(".sst")) found = true;
  }
  closedir(d);
  return found;
}

// Reads the database: present[i] / how many keys present; a LevelDB error -> status not OK;
// a wrong value or unknown key -> *bad set (silent corruption: never repaired away).
static leveldb::Status ReadAll(leveldb::DB* db, bool present[], std::string* bad) {
  leveldb::ReadOptions ro;
  ro.verify_checksums = true;
  for (int i = 0; i < kNumPuts; i++) {
    std::string v;
    leveldb::Status s = db->Get(ro, Key(i), &v);
    present[i] = s.ok();
    if (s.IsNotFound()) continue;
    if (!s.ok()) return s;
    if (v != Value(i)) { *bad = "key " + Key(i) + " has a wrong value (" + std::to_string(v.size()) + " bytes)"; return s; }
  }
  std::unique_ptr<leveldb::Iterator> it(db->NewIterator(ro));  // any key we never wrote?
  int n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    n++;
    bool known = false;
    for (int i = 0; i < kNumPuts; i++) known |= it->key() == Key(i);
    if (!known) { *bad = "unexpected key '" + it->key().ToString() + "'"; return it->status(); }
  }
  if (!it->status().ok()) return it->status();
  int expect = 0;
  for (int i = 0; i < kNumPuts; i++) expect += present[i];
  if (n != expect) *bad = "iterator sees " + std::to_string(n) + " keys, Get sees " + std::to_string(expect);
  return leveldb::Status::OK();
}

// Opens and reads; returns the LevelDB error, if any.  Always closes the DB (releases LOCK).
// *opened tells an open failure (cannot open) from a read failure (failed reads).
static leveldb::Status OpenAndRead(const std::string& path, const leveldb::Options& opt, bool present[], std::string* bad,
                                   bool* opened) {
  leveldb::DB* db = nullptr;
  leveldb::Status s = leveldb::DB::Open(opt, path, &db);
  *opened = s.ok();
  if (!s.ok()) return s;
  s = ReadAll(db, present, bad);
  delete db;
  return s;
}

int main(int argc, char** argv) {
  if (argc != 3) { fprintf(stderr, "usage: checker <crash_dir> <stdout_file>\n"); return 2; }
  alarm(60);  // never hang: SIGALRM kills us (a failure) if LevelDB gets stuck
  const std::string path = std::string(argv[1]) + "/db";
  std::ifstream out(argv[2]);
  std::stringstream ss;
  ss << out.rdbuf();
  const bool synced = ss.str().find("synced 10") != std::string::npos;

  bool present[kNumPuts] = {};
  std::string bad;
  bool opened = false;
  if (HasDbFiles(path)) {  // else: crash before LevelDB created anything = empty database
    leveldb::Options opt;
    opt.paranoid_checks = true;  // report corruption instead of skipping it
    leveldb::Status s = OpenAndRead(path, opt, present, &bad, &opened);
    if (!s.ok()) {
      fprintf(stderr, "checker: note: %s; trying RepairDB\n", s.ToString().c_str());
      leveldb::Status r = leveldb::RepairDB(path, opt);
      if (!r.ok()) return Fail("cannot-open", "RepairDB failed: " + r.ToString() + " (after: " + s.ToString() + ")");
      bad.clear();
      for (bool& p : present) p = false;
      leveldb::Status s2 = OpenAndRead(path, opt, present, &bad, &opened);
      if (!s2.ok()) return Fail(opened ? "failed-reads-writes" : "cannot-open", "still failing after RepairDB: " + s2.ToString() + " (before: " + s.ToString() + ")");
      fprintf(stderr, "checker: note: repaired\n");
    }
  }
  if (!bad.empty()) return Fail("silent-error", bad);  // atomicity / corruption, not reported by LevelDB

  int n = 0;  // ordering: the present keys are exactly the first n Puts
  while (n < kNumPuts && present[n]) n++;
  for (int i = n; i < kNumPuts; i++)
    if (present[i]) return Fail("silent-error", "Put " + std::to_string(i) + " present but Put " + std::to_string(n) + " missing (ordering)");
  if (synced && n != kNumPuts)
    return Fail("data-loss", "only " + std::to_string(n) + " of 10 Puts present after \"synced 10\" (durability)");
  return 0;
}
