#!/usr/bin/env bash
# rsync workload (local copies; rsync still runs its sender/receiver/generator processes):
#   rsync.sh run SRC SRC2 DIR   1. rsync -aHS SRC/ DIR/dst/ (whole files, sparse)
#                               2. rsync -aH --delete --no-whole-file SRC2/ DIR/dst/: the
#                                  delta path (reads the basis file from this file system,
#                                  writes a temporary file, renames it over)
#                               3. rsync -aH --delete --no-whole-file --inplace SRC/ DIR/dst/:
#                                  back to SRC, rewriting files in place
#                               after each: listing of DIR/dst, and a --checksum dry run
#                               that must find nothing to do
#   rsync.sh verify SRC DIR     the listing and the checksum dry run against SRC
# stdout is the normalized result.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# What must be equal: the tree, and that a full-checksum comparison finds no difference.
state() {  # SRC DST
  local out
  out=$(rsync -aH --delete --checksum --numeric-ids --dry-run --itemize-changes "$1/" "$2/")
  echo "checksum dry run: [${out}]"
  python3 "$here/tree.py" list "$2" | sed 's/^/  /'
}
# rsync --stats, keeping the deterministic lines.
stats() {
  grep -E '^(Number of (regular )?files transferred|Number of deleted files|Literal data|Matched data|Total transferred file size):' | sed 's/^/  /'
}

case $1 in
run)
  src=$2 src2=$3 dir=$4
  mkdir -p "$dir/dst"
  echo "round 1 (whole files, -S):"
  rsync -aHS --numeric-ids --stats "$src/" "$dir/dst/" | stats
  state "$src" "$dir/dst"
  echo "round 2 (delta, temporary files):"
  rsync -aH --delete --no-whole-file --numeric-ids --stats "$src2/" "$dir/dst/" | stats
  state "$src2" "$dir/dst"
  echo "round 3 (delta, in place):"
  rsync -aH --delete --no-whole-file --inplace --numeric-ids --stats "$src/" "$dir/dst/" | stats
  state "$src" "$dir/dst"
  ;;
verify)
  state "$2" "$3/dst"
  ;;
*)
  echo "usage: rsync.sh run SRC SRC2 DIR | verify SRC DIR" >&2
  exit 2
  ;;
esac
