#!/bin/sh
# intact checker for the undo-logging example:  check.sh CRASH_DIR STDOUT_FILE
# Runs the DBMS's startup recovery on CRASH_DIR, then checks atomicity and durability
# (see README.md). Exit 0 = consistent, 1 = inconsistent (one-line reason on stderr),
# 2 = usage or build error. Builds ./undolog next to this script if it is missing or older
# than undolog.c (into a per-user temporary directory if this directory is read-only).
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd) || exit 2
bin=$here/undolog
if [ ! -x "$bin" ] || [ "$here/undolog.c" -nt "$bin" ]; then
  if [ ! -w "$here" ]; then
    cache=${TMPDIR:-/tmp}/intact-undolog-$(id -u)
    mkdir -p "$cache" || exit 2
    bin=$cache/undolog
  fi
  if [ ! -x "$bin" ] || [ "$here/undolog.c" -nt "$bin" ]; then
    # Build under a private name, then rename: checkers may run in parallel.
    ${CC:-gcc} -g -O0 -Wall -o "$bin.tmp.$$" "$here/undolog.c" >&2 \
      && mv -f "$bin.tmp.$$" "$bin" \
      || { rm -f "$bin.tmp.$$"; echo "check.sh: cannot build $bin" >&2; exit 2; }
  fi
fi
exec "$bin" check "$@"
