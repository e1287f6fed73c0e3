#!/usr/bin/env bash
# tar workload:
#   tar.sh run ARCHIVE DIR      extract ARCHIVE (made by run.sh from tree.py's tree: hard
#                               links, symlinks, sparse files, a fifo, modes, owners) into
#                               DIR/x, archive it again from there (DIR/again.tar: same
#                               entries, same bytes?), a gzip round trip into DIR/y, then
#                               the verification
#   tar.sh verify ARCHIVE DIR   tar --compare of DIR/x against ARCHIVE, the listing
# stdout is the normalized result.
set -euo pipefail
cmd=$1 archive=$2 dir=$3
here=$(cd "$(dirname "$0")" && pwd)
opts=(--sparse --format=gnu --sort=name --numeric-owner)

verify() {
  local out
  if out=$(tar --compare --numeric-owner -f "$archive" -C "$dir/x" 2>&1); then
    echo "tar --compare: no differences"
  else
    echo "tar --compare: differences:"; sed 's/^/  /' <<<"$out"
  fi
  echo "sparse.img: $(python3 "$here/tree.py" sparse "$dir/x/sparse.img")"
  echo "listing:"
  python3 "$here/tree.py" list "$dir/x" | sed 's/^/  /'
}

case $cmd in
run)
  mkdir -p "$dir/x"
  tar -x --sparse --same-permissions --same-owner --numeric-owner -f "$archive" -C "$dir/x"
  # Archive the extracted tree again, reading it from this file system (sparse files are
  # found by SEEK_DATA/SEEK_HOLE or by their block counts).
  tar -c "${opts[@]}" -f "$dir/again.tar" -C "$dir/x" .
  same_list=no
  if cmp -s <(tar -tv --numeric-owner -f "$archive") <(tar -tv --numeric-owner -f "$dir/again.tar"); then same_list=yes; fi
  echo "archive made from this tree lists the same entries as the source archive: $same_list"
  # GNU tar finds holes with SEEK_DATA/SEEK_HOLE (data regions in file system blocks), or,
  # if that finds none, by reading (512-byte zero runs): the bytes show which way it went.
  echo "archive made from this tree has the same bytes as the source archive: $(cmp -s "$archive" "$dir/again.tar" && echo yes || echo no)"
  # And a compressed round trip through a pipe.
  mkdir "$dir/y"
  tar -c "${opts[@]}" -C "$dir/x" . | gzip -1 >"$dir/again.tar.gz"
  tar -x -z --sparse --same-permissions --same-owner --numeric-owner -f "$dir/again.tar.gz" -C "$dir/y"
  if out=$(diff -r --no-dereference --exclude='*.fifo' "$dir/x" "$dir/y" 2>&1); then
    echo "gzip round trip: diff -r clean"
  else
    echo "gzip round trip: diff -r differs:"; sed 's/^/  /' <<<"$out"
  fi
  verify
  ;;
verify)
  verify
  ;;
*)
  echo "usage: tar.sh run|verify ARCHIVE DIR" >&2
  exit 2
  ;;
esac
