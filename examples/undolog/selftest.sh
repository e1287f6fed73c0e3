#!/usr/bin/env bash
# Self-test of the undo-logging example: builds undolog, runs the workload for every
# measure set, and runs the checker (check.sh) on the final and initial states and on
# hand-made crash states whose verdict is known. Exits non-zero on any unexpected result.
set -u
here=$(cd "$(dirname "$0")" && pwd)
U=$here/undolog
CHECK=$here/check.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

gcc -g -O0 -Wall -Wextra -Werror -o "$U" "$here/undolog.c" || { echo "build failed"; exit 1; }

CHECKER=("$CHECK")
. "$here/../selftest-lib.sh"

# fresh NAME: a directory with a freshly initialised dbfile.
fresh() { mkdir "$work/$1" && (cd "$work/$1" && "$U" init) || { echo "init failed"; exit 1; }; }
# patch FILE OFFSET: overwrite FILE at OFFSET with stdin, keeping its size.
patch() { dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }
zeros() { head -c "$1" /dev/zero; }
# junk N SEED: N pseudo-random bytes (a slice, chosen by SEED, of one fixed random pool).
python3 -c 'import random, sys; r = random.Random(42); sys.stdout.buffer.write(bytes(r.randrange(256) for _ in range(65536)))' > "$work/pool"
junk()  { tail -c +$(( ($2 * 4099) % 40000 + 1 )) "$work/pool" | head -c "$1"; }

echo "== workload: every measure set runs to completion and its final state is consistent"
names="checksum fsync-log fsync-dir-log fsync-db fsync-dir-unlink"
sets="all none"
for m in $names; do sets="$sets $m all-but=$m"; done
for m in $sets; do
  d=final.${m//[=,]/_}
  fresh "$d"
  out=$(cd "$work/$d" && "$U" update --measures "$m") || { bad "update --measures $m failed"; continue; }
  [ "$out" = committed ] && [ ! -e "$work/$d/log" ] || bad "update --measures $m: output '$out' or log left behind"
  expect "final state, --measures $m" consistent "$work/$d" "$out"
done

if command -v strace >/dev/null; then
  echo "== workload: one write() to the log, one pwrite() to dbfile, the expected fsyncs"
  for spec in all:4 none:0 checksum:0 fsync-log:1 fsync-dir-log:1 fsync-db:1 fsync-dir-unlink:1 all-but=fsync-db:3; do
    m=${spec%:*} nf=${spec##*:}
    fresh "strace.${m//[=,]/_}"
    (cd "$work/strace.${m//[=,]/_}" && strace -o ../trace.txt -e trace=write,pwrite64,fsync "$U" update --measures "$m" >/dev/null)
    w=$(grep -c '^write([^1],' "$work/trace.txt"); p=$(grep -c '^pwrite64(' "$work/trace.txt")
    f=$(grep -c '^fsync(' "$work/trace.txt")
    if [ "$w" = 1 ] && [ "$p" = 1 ] && [ "$f" = "$nf" ]; then ok "syscalls, --measures $m: 1 write, 1 pwrite, $f fsync"
    else bad "syscalls, --measures $m: $w writes, $p pwrites, $f fsyncs (expected 1, 1, $nf)"; fi
  done
else
  if [ "${INTACT_REQUIRE_ALL:-}" = 1 ]; then
    echo "strace is not installed: cannot run the system-call count checks (INTACT_REQUIRE_ALL=1; apt-get install -y strace)" >&2; exit 1
  fi
  echo "(strace not installed: skipping the system-call count checks)"
fi

echo "== checker on hand-made crash states"
fresh init; fresh final; (cd "$work/final" && "$U" update >/dev/null)
expect "initial state, nothing printed" consistent "$work/init" ""
expect "final state, 'committed' printed" consistent "$work/final" "committed"$'\n'
expect "final state, nothing printed yet" consistent "$work/final" ""
expect "'committed' printed but dbfile old, no log" inconsistent "$work/init" "committed"$'\n'

cp -a "$work/init" "$work/half"
head -c 4096 "$work/final/dbfile" | tail -c +1001 | patch "$work/half/dbfile" 1000
expect "dbfile half-updated (first block new), no log" inconsistent "$work/half" ""

# Real logs, left by a process that stops right after writing the log.
for m in all none; do
  fresh "log.$m"; (cd "$work/log.$m" && "$U" update --measures "$m" --die-after log)
done
expect "valid log (checksum), dbfile untouched" consistent "$work/log.all" ""
expect "valid log (no checksum), dbfile untouched" consistent "$work/log.none" ""

cp -a "$work/log.all" "$work/torn"; truncate -s 5000 "$work/torn/log"
expect "log truncated (torn append), dbfile untouched" consistent "$work/torn" ""
c="$work/torn.check"; cp -a "$work/torn" "$c"; "$CHECK" "$c" /dev/null 2>/dev/null
if [ -e "$c/log" ]; then bad "recovery did not delete a torn log"; else ok "recovery deletes a torn log"; fi
cp -a "$work/torn" "$work/torn.half"; cp "$work/half/dbfile" "$work/torn.half/dbfile"
expect "log truncated and dbfile half-updated (log not synced first)" inconsistent "$work/torn.half" ""

cp -a "$work/log.all" "$work/rollback"; cp "$work/half/dbfile" "$work/rollback/dbfile"
expect "valid log, dbfile half-updated: recovery rolls back" consistent "$work/rollback" ""
mkdir "$work/died.db"; cp "$work/init/dbfile" "$work/died.db/"
(cd "$work/died.db" && "$U" update --die-after db)
expect "valid log, dbfile fully updated, nothing printed: rolled back" consistent "$work/died.db" ""
expect "valid log, dbfile updated, 'committed' printed (unlink lost)" inconsistent "$work/died.db" "committed"$'\n'
cp -a "$work/final" "$work/nolog"
expect "dbfile updated, log gone, nothing printed yet" consistent "$work/nolog" ""

# Garbage in the appended part of the log (ext2, ext3/4 data=writeback): the first block,
# with the header, made it to disk; the rest of the record is zeros or random bytes.
for g in zeros junk; do
  for m in none all; do
    d="garbage.$g.$m"; cp -a "$work/log.$m" "$work/$d"
    len=$(stat -c %s "$work/$d/log")
    if [ $g = zeros ]; then zeros $((len - 4096)); else junk $((len - 4096)) 7; fi | patch "$work/$d/log" 4096
    if [ $m = none ]; then
      expect "log with $g after its first block, no checksum: recovery restores garbage" inconsistent "$work/$d" ""
    else
      expect "log with $g after its first block, checksum: garbage detected, log ignored" consistent "$work/$d" ""
    fi
  done
done
for m in none all; do
  d="allzero.$m"; cp -a "$work/log.$m" "$work/$d"
  zeros "$(stat -c %s "$work/$d/log")" | patch "$work/$d/log" 0
  expect "log entirely zeros (--measures $m): ignored" consistent "$work/$d" ""
done

cp -a "$work/init" "$work/huge"; printf 'UNDOLOG1 N 0000001000 9999999999\nxyz' > "$work/huge/log"
expect "log with a huge size field: ignored" consistent "$work/huge" ""
cp -a "$work/init" "$work/beyond"
{ printf 'UNDOLOG1 N 4000000000 0000000010\n'; zeros 10; } > "$work/beyond/log"
expect "log record beyond the end of dbfile: ignored" consistent "$work/beyond" ""
cp -a "$work/init" "$work/gone"; rm "$work/gone/dbfile"
expect "dbfile missing" inconsistent "$work/gone" ""
cp -a "$work/init" "$work/short"; truncate -s 4096 "$work/short/dbfile"
expect "dbfile shorter than 12288 bytes" inconsistent "$work/short" ""
cp -a "$work/final" "$work/outside"; printf 'Z' | patch "$work/outside/dbfile" 10000
expect "dbfile changed outside the updated region" inconsistent "$work/outside" ""
cp -a "$work/init" "$work/logdir"; mkdir "$work/logdir/log"
expect "'log' is a directory: recovery fails" inconsistent "$work/logdir" ""

echo "== recovery never crashes or hangs on garbage logs"
crashes=0
for i in $(seq 1 200); do
  d="$work/fuzz"; rm -rf "$d"; cp -a "$work/init" "$d"
  n=$(( (i * 7919) % 9000 ))
  case $((i % 4)) in
    0) junk "$n" "$i" > "$d/log" ;;
    1) { printf 'UNDOLOG1 %s %010d %010d\n' "$( [ $((i % 3)) = 0 ] && echo C || echo N)" $((i * 37 % 13000)) "$n"; junk "$n" "$i"; } > "$d/log" ;;
    2) { printf 'UNDOLOG1 C %010d %010d\n' $((i * 53 % 12288)) $((n - 15 > 0 ? n - 15 : 0)); junk "$n" "$i"; } > "$d/log" ;;
    3) { printf 'UNDOLOG1 N 00000%05d 99999%05d\n' "$i" "$n"; junk $((i % 50)) "$i"; } > "$d/log" ;;
  esac
  timeout 10 "$U" recover "$d" 2>/dev/null; rc=$?
  if [ $rc -gt 1 ]; then crashes=$((crashes + 1)); echo "  recover exited $rc on fuzz case $i"; fi
done
if [ $crashes = 0 ]; then ok "recover on 200 garbage logs: no crash, no hang"; else bad "recover crashed or hung $crashes times"; fi

summary
