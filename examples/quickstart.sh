#!/usr/bin/env bash
# Quick start: install what intact needs, build it, record the bundled key-value store
# example and print its update protocol (the logical operations, with source lines).
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for t in strace gcc; do command -v "$t" >/dev/null || need+=("$t"); done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi
cargo build --release -q -p intact-cli
intact=$PWD/target/release/intact
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -g -O0 -o "$work/kv" examples/kvstore/kv.c
mkdir "$work/db"
(cd "$work/db" && "$intact" record --out "$work/kv.bundle" -- "$work/kv" x foo1 y foo2)
"$intact" ops "$work/kv.bundle"
