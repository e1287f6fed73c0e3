#!/usr/bin/env bash
# Builds the LevelDB workload and checker (thesis 004, section 3.6; sources in study/leveldb).
#   bash bench/leveldb/build.sh [OUTDIR]      (default: bench/leveldb/build)
# Linked with Debian's static libleveldb.a (same package and version as the shared library)
# so that LevelDB's own functions, including internal ones, are named in the stacks; keep
# -g: intact maps each system call to a source line of the workload through DWARF.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../study/leveldb" && pwd)
out=${1:-$here/build}
if ! dpkg -s libleveldb-dev >/dev/null 2>&1; then
  echo "installing libleveldb-dev" >&2
  apt-get update -qq && apt-get install -y -qq libleveldb-dev >/dev/null
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
for p in workload checker; do
  if [ "$src/$p.cc" -nt "$out/$p" ] || [ "$src/common.h" -nt "$out/$p" ]; then
    g++ -O1 -g -std=c++17 -Wall -I"$src" -o "$out/$p" "$src/$p.cc" \
      /usr/lib/x86_64-linux-gnu/libleveldb.a /usr/lib/x86_64-linux-gnu/libsnappy.so.1 -lpthread
  fi
  echo "$out/$p"
done
