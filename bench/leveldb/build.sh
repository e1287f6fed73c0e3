#!/usr/bin/env bash
# Builds the LevelDB workload and checker (thesis 004, section 3.6).
#   bash bench/leveldb/build.sh [OUTDIR]      (default: bench/leveldb/build)
# Keep -g: intact maps each system call to a source line through DWARF.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/build}
if ! dpkg -s libleveldb-dev >/dev/null 2>&1; then
  echo "installing libleveldb-dev" >&2
  apt-get update -qq && apt-get install -y -qq libleveldb-dev >/dev/null
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
for p in workload checker; do
  g++ -O1 -g -std=c++17 -Wall -o "$out/$p" "$here/$p.cc" -lleveldb -lpthread
  echo "$out/$p"
done
