#!/usr/bin/env bash
# Builds the LevelDB workload and checker (thesis 004, section 3.6; sources in study/leveldb).
#   bash bench/leveldb/build.sh [OUTDIR]      (default: bench/leveldb/build)
# LevelDB itself is built from Debian's source of the installed libleveldb-dev (same
# version, Debian's patches; study/debian-source.sh) with -g, and linked statically: every
# frame, LevelDB's internal functions included, then has a source line. Keep -g on the
# workload too: intact maps each system call to a source line through DWARF.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../study/leveldb" && pwd)
out=${1:-$here/build}
if ! dpkg -s libleveldb-dev >/dev/null 2>&1 || ! command -v cmake >/dev/null; then
  echo "installing libleveldb-dev, cmake" >&2
  apt-get update -qq && apt-get install -y -qq libleveldb-dev cmake g++ >/dev/null
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
lib=$out/leveldb/libleveldb.a
version=$(dpkg-query -W -f '${Version}' libleveldb-dev)
if ! [ -f "$lib" ] || [ "$(cat "$out/leveldb/version" 2>/dev/null)" != "$version" ]; then
  tree=$(bash "$here/../../study/debian-source.sh" libleveldb-dev "$out/leveldb-src")
  cmake -S "$tree" -B "$out/leveldb" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_SHARED_LIBS=OFF \
    -DLEVELDB_BUILD_TESTS=OFF -DLEVELDB_BUILD_BENCHMARKS=OFF -DLEVELDB_INSTALL=OFF >"$out/leveldb.log" 2>&1
  make -C "$out/leveldb" -j"$(nproc)" leveldb >>"$out/leveldb.log" 2>&1 ||
    { tail -5 "$out/leveldb.log" >&2; exit 1; }
  echo "$version" >"$out/leveldb/version"
fi
for p in workload checker; do
  if [ "$src/$p.cc" -nt "$out/$p" ] || [ "$src/common.h" -nt "$out/$p" ] || [ "$lib" -nt "$out/$p" ]; then
    g++ -O1 -g -std=c++17 -Wall -I"$src" -o "$out/$p" "$src/$p.cc" "$lib" -lpthread
  fi
  echo "$out/$p"
done
