#!/usr/bin/env bash
# Build SQLite with SQLITE_ENABLE_BATCH_ATOMIC_WRITE plus the sqlite-batch driver.
#
#   tools/sqlite-batch/build.sh [OUTDIR]
#
# OUTDIR defaults to <repo root>/target/sqlite-batch. Produces:
#   OUTDIR/sqlite3.c, OUTDIR/sqlite3.h     amalgamation (from the libsqlite3-sys crate)
#   OUTDIR/sqlite3-batch.o                 sqlite3.c with -DSQLITE_ENABLE_BATCH_ATOMIC_WRITE
#   OUTDIR/sqlite3-plain.o                 sqlite3.c without it
#   OUTDIR/sqlite-batch                    driver.c + sqlite3-batch.o
#   OUTDIR/sqlite-batch-plain              driver.c + sqlite3-plain.o
#
# The amalgamation comes from the crates.io package libsqlite3-sys, pinned by
# version and sha256 below. Re-running is cheap: the download is skipped while
# OUTDIR/sqlite3.c and sqlite3.h match their pinned hashes, and each object or
# binary is rebuilt only when it is missing, older than its inputs, or was
# built with other flags (recorded in OUTDIR/*.flags).
# Needs curl, gcc (+ libc headers), sha256sum, tar; installs missing ones with
# apt-get when run as root. Temporary files live in OUTDIR only.
set -euo pipefail

# --- pins -------------------------------------------------------------------
CRATE_VERSION=0.40.0            # libsqlite3-sys 0.40.0 bundles SQLite 3.54.1
CRATE_SHA256=b06e69070b7e12262b0cd90832f0a7396f142a2b330181255562decf9f0c6215
SQLITE3_C_SHA256=0c657666d819f261cc4007526ad57e1669de9949df7a8ea847aa284a2bf0ee52
SQLITE3_H_SHA256=d6c84557261893439b341d2e6c35187ae3ea24fbfd843ad94616f72d89242b8c
CRATE_URL="https://static.crates.io/crates/libsqlite3-sys/libsqlite3-sys-${CRATE_VERSION}.crate"

CC=${CC:-gcc}
COMMON_CFLAGS=(-O2 -DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION)
BATCH_CFLAGS=("${COMMON_CFLAGS[@]}" -DSQLITE_ENABLE_BATCH_ATOMIC_WRITE)
PLAIN_CFLAGS=("${COMMON_CFLAGS[@]}")
DRIVER_CFLAGS=(-O2 -Wall -Wextra -std=c11)
LDLIBS=(-lm)

die() { echo "build.sh: error: $*" >&2; exit 1; }
log() { echo "build.sh: $*" >&2; }

case "${1:-}" in
  -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
[ $# -le 1 ] || die "usage: $0 [OUTDIR]"

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DRIVER_C="$SCRIPT_DIR/driver.c"
[ -f "$DRIVER_C" ] || die "missing $DRIVER_C"

if [ $# -eq 1 ]; then
  [ -n "$1" ] || die "OUTDIR must not be empty"
  OUTDIR=$1
else
  ROOT=$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel 2>/dev/null) \
    || ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
  OUTDIR="$ROOT/target/sqlite-batch"
fi
mkdir -p "$OUTDIR" || die "cannot create $OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)

# Temporary files: OUTDIR/.tmp.* only, removed on any exit.
TMP_PREFIX="$OUTDIR/.tmp.$$"
cleanup() { rm -rf "$TMP_PREFIX".*; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- tools ------------------------------------------------------------------
APT_UPDATED=0
apt_install() {  # apt_install PACKAGE...
  command -v apt-get >/dev/null 2>&1 || die "missing $*; no apt-get: install it by hand"
  [ "$(id -u)" -eq 0 ] || die "missing $*; run as root or install it by hand"
  log "installing $* with apt-get"
  if [ $APT_UPDATED -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || die "apt-get update failed"
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 \
    || die "apt-get install $* failed"
}
need() {  # need COMMAND DEBIAN_PACKAGE
  command -v "$1" >/dev/null 2>&1 && return 0
  apt_install "$2"
  command -v "$1" >/dev/null 2>&1 || die "$1 still missing after installing $2"
}
need_cc() {
  [ -n "${CC_OK:-}" ] && return 0
  if [ "$CC" = gcc ]; then need gcc gcc; fi
  command -v "$CC" >/dev/null 2>&1 || die "C compiler '$CC' not found"
  if ! printf '#include <stdio.h>\n#include <math.h>\nint main(void){return 0;}\n' \
      | "$CC" -x c -o "$TMP_PREFIX.cc-test" - -lm >/dev/null 2>&1; then
    apt_install libc6-dev
    printf '#include <stdio.h>\nint main(void){return 0;}\n' \
      | "$CC" -x c -o "$TMP_PREFIX.cc-test" - >/dev/null 2>&1 \
      || die "'$CC' cannot build a trivial C program"
  fi
  CC_OK=1
}
need sha256sum coreutils

sha_ok() {  # sha_ok FILE SHA256
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

# --- sources ----------------------------------------------------------------
if sha_ok "$OUTDIR/sqlite3.c" "$SQLITE3_C_SHA256" && sha_ok "$OUTDIR/sqlite3.h" "$SQLITE3_H_SHA256"; then
  log "sqlite3.c/sqlite3.h up to date (libsqlite3-sys $CRATE_VERSION)"
else
  need curl curl
  need tar tar
  need gzip gzip
  CRATE="$TMP_PREFIX.crate"
  log "downloading $CRATE_URL"
  curl -fsSL --retry 3 --connect-timeout 30 -o "$CRATE" "$CRATE_URL" \
    || die "download failed: $CRATE_URL"
  got=$(sha256sum "$CRATE" | cut -d' ' -f1)
  [ "$got" = "$CRATE_SHA256" ] \
    || die "sha256 mismatch for libsqlite3-sys-$CRATE_VERSION.crate: got $got, want $CRATE_SHA256"
  EXTRACT="$TMP_PREFIX.extract"
  mkdir -p "$EXTRACT"
  src="libsqlite3-sys-$CRATE_VERSION/sqlite3"
  tar -xzmf "$CRATE" -C "$EXTRACT" "$src/sqlite3.c" "$src/sqlite3.h" \
    || die "crate does not contain $src/sqlite3.c and sqlite3.h"
  sha_ok "$EXTRACT/$src/sqlite3.c" "$SQLITE3_C_SHA256" || die "sha256 mismatch for extracted sqlite3.c"
  sha_ok "$EXTRACT/$src/sqlite3.h" "$SQLITE3_H_SHA256" || die "sha256 mismatch for extracted sqlite3.h"
  mv -f "$EXTRACT/$src/sqlite3.h" "$OUTDIR/sqlite3.h"
  mv -f "$EXTRACT/$src/sqlite3.c" "$OUTDIR/sqlite3.c"
  rm -rf "$CRATE" "$EXTRACT"
  log "extracted sqlite3.c/sqlite3.h (libsqlite3-sys $CRATE_VERSION) into $OUTDIR"
fi

# --- compile ----------------------------------------------------------------
# fresh TARGET FLAGS DEP...: true if TARGET exists, is newer than every DEP and
# TARGET.flags records the same command-line flags.
fresh() {
  local target=$1 flags=$2; shift 2
  [ -f "$target" ] && [ -f "$target.flags" ] || return 1
  [ "$(cat "$target.flags")" = "$flags" ] || return 1
  local dep
  for dep in "$@"; do [ "$target" -nt "$dep" ] || return 1; done
}
# build TARGET FLAGS CMD...: run CMD with output to a temp file, then move it in.
build() {
  local target=$1 flags=$2; shift 2
  local tmp="$TMP_PREFIX.$(basename "$target")"
  need_cc
  log "building $(basename "$target")"
  "$@" -o "$tmp" || die "compiling $(basename "$target") failed"
  mv -f "$tmp" "$target"
  printf '%s\n' "$flags" > "$target.flags"
}

for variant in batch plain; do
  if [ $variant = batch ]; then cflags=("${BATCH_CFLAGS[@]}"); bin=sqlite-batch
  else cflags=("${PLAIN_CFLAGS[@]}"); bin=sqlite-batch-plain; fi
  obj="$OUTDIR/sqlite3-$variant.o"
  oflags="$CC ${cflags[*]}"
  if fresh "$obj" "$oflags" "$OUTDIR/sqlite3.c" "$OUTDIR/sqlite3.h"; then
    log "$(basename "$obj") up to date"
  else
    build "$obj" "$oflags" "$CC" "${cflags[@]}" -c "$OUTDIR/sqlite3.c"
  fi
  exe="$OUTDIR/$bin"
  bflags="$CC ${DRIVER_CFLAGS[*]} ${LDLIBS[*]}"
  if fresh "$exe" "$bflags" "$DRIVER_C" "$obj" "$OUTDIR/sqlite3.h"; then
    log "$bin up to date"
  else
    build "$exe" "$bflags" "$CC" "${DRIVER_CFLAGS[@]}" -I"$OUTDIR" "$DRIVER_C" "$obj" "${LDLIBS[@]}"
  fi
done

echo "$OUTDIR/sqlite-batch"
echo "$OUTDIR/sqlite-batch-plain"
