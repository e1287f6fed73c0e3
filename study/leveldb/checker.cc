// Checker for the LevelDB workload (thesis 004, section 3.6; workload.cc).
//   checker <crash_dir> <stdout_file>
// Opens <crash_dir>/db as an application would after a crash, with paranoid_checks; on an
// error reported by LevelDB (open or read) runs RepairDB and tries once more.  Exit 0 if the
// state is consistent, 1 if not, 2 on bad usage.
//
// Two layers (issue 32).  Every rule runs; each failing rule prints
// `rule: LAYER: NAME: CLASS: detail` on stderr, and the one `consequence: CLASS: detail` line
// (thesis Table 4.3 class) comes from the first failing documented rule, else from the first
// failing lay rule (`layer: ...` says which).
// documented (LevelDB 1.23, doc/index.md and include/leveldb/db.h):
//   - atomic: a key is absent or holds exactly its value, and no key nobody wrote
//     ("Atomic Updates": a Put is a one-entry WriteBatch, applied atomically; "Checksums":
//     with paranoid_checks corruption is an error, never a silently wrong value);
//   - synced: once "synced 10" was printed (the 10th Put had sync=true), all 10 Puts are
//     present, unless RepairDB was needed ("Synchronous Writes": a sync write is on
//     persistent storage when it returns, and a bulk load may restart "just after the last
//     synchronous write", so earlier Puts are covered too; db.h RepairDB: "Some data may be
//     lost").
// lay (expected, not stated in so many words):
//   - opens: the crashed database opens, possibly after RepairDB;
//   - prefix: the present Puts are the first n (no later Put without an earlier one): the
//     log is replayed as a prefix, which the thesis relies on; "Synchronous Writes" says
//     only that a crash "may cause the last few updates to be lost" (google/leveldb#894
//     asks upstream to state it);
//   - synced after repair: as `synced`, after a RepairDB.
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
#include <vector>

#include "common.h"

// One failing rule: its layer ("documented" or "lay"), name, thesis Table 4.3 consequence
// class (study/README.md) and what was seen.
struct Failure {
  std::string layer, name, cls, detail;
};

// Prints every failure, then the consequence of the first documented one (else the first).
static int Report(const std::vector<Failure>& failed) {
  if (failed.empty()) return 0;
  const Failure* first = &failed[0];
  for (const Failure& f : failed) {
    fprintf(stderr, "rule: %s: %s: %s: %s\n", f.layer.c_str(), f.name.c_str(), f.cls.c_str(), f.detail.c_str());
    if (f.layer == "documented" && first->layer != "documented") first = &f;
  }
  fprintf(stderr, "layer: %s\nconsequence: %s: %s\n", first->layer.c_str(), first->cls.c_str(), first->detail.c_str());
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

// What reading the crashed database gave: the keys present, whether RepairDB ran, and the
// failures of the `opens` and `atomic` rules.
struct Outcome {
  bool present[kNumPuts] = {};
  bool repaired = false;
  bool readable = true;  // false: nothing could be read, the other rules cannot run
};

static Outcome OpenRepairRead(const std::string& path, std::vector<Failure>* failed) {
  Outcome o;
  if (!HasDbFiles(path)) return o;  // crash before LevelDB created anything = empty database
  std::string bad;
  bool opened = false;
  leveldb::Options opt;
  opt.paranoid_checks = true;  // report corruption instead of skipping it
  leveldb::Status s = OpenAndRead(path, opt, o.present, &bad, &opened);
  if (!s.ok()) {
    fprintf(stderr, "checker: note: %s; trying RepairDB\n", s.ToString().c_str());
    o.repaired = true;
    leveldb::Status r = leveldb::RepairDB(path, opt);
    if (!r.ok()) {
      failed->push_back({"lay", "opens", "cannot-open", "RepairDB failed: " + r.ToString() + " (after: " + s.ToString() + ")"});
      o.readable = false;
      return o;
    }
    bad.clear();
    for (bool& p : o.present) p = false;
    leveldb::Status s2 = OpenAndRead(path, opt, o.present, &bad, &opened);
    if (!s2.ok()) {
      failed->push_back({"lay", "opens", opened ? "failed-reads-writes" : "cannot-open",
                         "still failing after RepairDB: " + s2.ToString() + " (before: " + s.ToString() + ")"});
      o.readable = false;
      return o;
    }
    fprintf(stderr, "checker: note: repaired\n");
  }
  if (!bad.empty()) failed->push_back({"documented", "atomic", "silent-error", bad});
  return o;
}

int main(int argc, char** argv) {
  if (argc != 3) { fprintf(stderr, "usage: checker <crash_dir> <stdout_file>\n"); return 2; }
  alarm(60);  // never hang: SIGALRM kills us (a failure) if LevelDB gets stuck
  const std::string path = std::string(argv[1]) + "/db";
  std::ifstream out(argv[2]);
  std::stringstream ss;
  ss << out.rdbuf();
  const bool synced = ss.str().find("synced 10") != std::string::npos;

  std::vector<Failure> failed;
  const Outcome o = OpenRepairRead(path, &failed);
  if (!o.readable) return Report(failed);
  int n = 0;  // the present keys should be exactly the first n Puts
  while (n < kNumPuts && o.present[n]) n++;
  int present = 0;
  for (bool p : o.present) present += p;
  if (synced && present != kNumPuts)
    failed.push_back({o.repaired ? "lay" : "documented", o.repaired ? "synced after repair" : "synced", "data-loss",
                      "only " + std::to_string(present) + " of 10 Puts present after \"synced 10\" (durability)"});
  for (int i = n; i < kNumPuts; i++) {
    if (!o.present[i]) continue;
    failed.push_back({"lay", "prefix", "silent-error", "Put " + std::to_string(i) + " present but Put " + std::to_string(n) + " missing (ordering)"});
    break;
  }
  return Report(failed);
}
