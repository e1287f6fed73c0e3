#!/usr/bin/env bash
# LevelDB workload (leveldb.cc, compiled by run.sh):
#   leveldb.sh run BIN DIR      write (20,000 keys, overwrites, deletes, compactions,
#                               reopens) into DIR/db, then dump
#   leveldb.sh verify BIN DIR   dump (paranoid checks, every value checked against the
#                               generator; exits 1 on a missing, extra or wrong key)
# stdout is the normalized result.
set -euo pipefail
cmd=$1 bin=$2 dir=$3
case $cmd in
run)
  mkdir -p "$dir"
  "$bin" write "$dir"
  "$bin" dump "$dir"
  ;;
verify)
  "$bin" dump "$dir"
  ;;
*)
  echo "usage: leveldb.sh run|verify BIN DIR" >&2
  exit 2
  ;;
esac
