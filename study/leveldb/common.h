// Shared by workload.cc and checker.cc: the keys and values of the LevelDB workload
// (thesis 004, section 3.6), so that the checker can recompute every expected value.
#pragma once
#include <cstdint>
#include <string>

static const int kNumPuts = 10;
static const size_t kValueSize = 50 * 1024;  // 50 KB per Put, as in the thesis

// Key of the i-th Put (i = 0..9, the order of the Puts).  Even Puts get an "a/" prefix and
// odd ones a "z/" prefix, so every memtable flush (two consecutive Puts) spans the whole key
// range and overlaps the earlier table files: flushes land on levels 2, 1, 0, 0, 0 and the
// compactions merge several table files.  (With plain "key0".."key9" the flushes never overlap,
// LevelDB pushes each straight to level 2, and compactions only copy single files.)
inline std::string Key(int i) { return std::string(i % 2 ? "z/" : "a/") + "key" + std::to_string(i); }

// Value of the i-th Put: 50 KB of pseudo-random lowercase letters and digits from a
// splitmix64 stream seeded with i (deterministic, practically incompressible by Snappy).
inline std::string Value(int i) {
  static const char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  uint64_t s = 0x1d8e4e27c47d124fULL ^ (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ULL;
  std::string v(kValueSize, ' ');
  for (size_t k = 0; k < kValueSize; k++) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    v[k] = kAlphabet[(z ^ (z >> 31)) % 36];
  }
  return v;
}
