#!/usr/bin/env bash
# Self-test of the LevelDB workload and checker: builds both, runs the workload, shows that
# compactions happened, and runs the checker on the real end state and on damaged copies.
#   bash bench/leveldb/selftest.sh        exit 0 iff every result is the expected one
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bash "$here/build.sh" "$tmp/bin" >/dev/null
wl=$tmp/bin/workload ck=$tmp/bin/checker
unexpected=0

# The workload, to the end (final) and killed just before its first close, after "synced 10"
# (mid: a process crash; the newest log holds Puts 8-9, four tables hold Puts 0-7).
mkdir "$tmp/final" "$tmp/mid"
(cd "$tmp/final" && "$wl" >"$tmp/final.out")
(cd "$tmp/mid" && "$wl" --crash-after-sync >"$tmp/mid.out")
printf 'workload stdout: %s\n' "$(tr '\n' ' ' <"$tmp/final.out")"
for s in mid final; do
  echo "--- ls $s/db ($(ls "$tmp/$s/db" | grep -c '\.ldb$') .ldb files)"
  ls -l "$tmp/$s/db" | tail -n +2
done
echo "--- compactions (final/db/LOG.old: first open + Puts, LOG: reopen + CompactRange)"
cat "$tmp/final/db/LOG.old" "$tmp/final/db/LOG" | cut -d' ' -f3- |
  grep -E 'Level-0 table #[0-9]+: [0-9]+ bytes|Compacting|Generated table|compacted to|Recovering' || true
: >"$tmp/empty.out"

# check NAME EXPECT STATE_DIR STDOUT_FILE [DAMAGE]: copy the state, apply the shell snippet
# DAMAGE inside the copy's db/, run the checker.  EXPECT: pass, fail, or any (report only;
# the checker must still exit 0 or 1, i.e. not crash or hang).
check() {
  local name=$1 expect=$2 src=$3 out=$4 damage=${5:-} c=$tmp/case rc=0 got
  rm -rf "$c" && cp -a "$src" "$c"
  if [ -n "$damage" ]; then (cd "$c/db" && eval "$damage"); fi
  "$ck" "$c" "$out" 2>"$tmp/err" || rc=$?
  case $rc in 0) got=pass ;; 1) got=fail ;; *) got="error(rc=$rc)" ;; esac
  local mark=ok
  if [ "$expect" = any ]; then [ $rc -le 1 ] || mark=UNEXPECTED
  elif [ "$got" != "$expect" ]; then mark=UNEXPECTED; fi
  [ $mark = ok ] || unexpected=$((unexpected + 1))
  printf '%-10s %-62s expect %-4s got %-4s %s\n' "$mark" "$name" "$expect" "$got" \
    "$(tr '\n' ' ' <"$tmp/err" | sed 's/checker: //g')"
}
newest() { ls "$1" | grep -E "\\.$2\$" | sort | tail -1; }   # highest-numbered *.log / *.ldb

echo "--- checker"
check "final state, real stdout" pass "$tmp/final" "$tmp/final.out"
check "final state, empty stdout" pass "$tmp/final" "$tmp/empty.out"
check "mid state (process crash after sync), real stdout" pass "$tmp/mid" "$tmp/mid.out"
check "mid state, empty stdout" pass "$tmp/mid" "$tmp/empty.out"
mkdir "$tmp/none"
check "no db directory (crash before creation), empty stdout" pass "$tmp/none" "$tmp/empty.out"
check "no db directory, stdout 'synced 10'" fail "$tmp/none" "$tmp/mid.out"
# (a) durability: the newest log of the mid state holds Puts 8-9 (synced, not yet in a table).
check "(a) mid, newest .log deleted ($(newest "$tmp/mid/db" log)), 'synced 10'" fail "$tmp/mid" "$tmp/mid.out" \
  'rm "$(newest . log)"'
check "(a) mid, newest .log deleted, empty stdout (a prefix is fine)" pass "$tmp/mid" "$tmp/empty.out" \
  'rm "$(newest . log)"'
check "(a) final, newest .log deleted (it is empty), 'synced 10'" any "$tmp/final" "$tmp/final.out" \
  'rm "$(newest . log)"'
# (b) a table file truncated to half its size.
check "(b) final, .ldb truncated in half, 'synced 10'" any "$tmp/final" "$tmp/final.out" \
  'f=$(newest . ldb); truncate -s $(( $(stat -c %s "$f") / 2 )) "$f"'
check "(b) mid, oldest .ldb truncated in half, 'synced 10'" fail "$tmp/mid" "$tmp/mid.out" \
  'f=$(ls | grep "\.ldb$" | sort | head -1); truncate -s $(( $(stat -c %s "$f") / 2 )) "$f"'
# (c) garbage in the middle of CURRENT / of the MANIFEST.
check "(c) final, garbage in the middle of CURRENT, 'synced 10'" any "$tmp/final" "$tmp/final.out" \
  'printf "XXXX" | dd of=CURRENT bs=1 seek=6 conv=notrunc status=none'
check "(c) final, garbage in the middle of the MANIFEST, 'synced 10'" any "$tmp/final" "$tmp/final.out" \
  'm=$(ls | grep MANIFEST-); head -c 64 /dev/urandom | dd of=$m bs=1 seek=$(( $(stat -c %s $m) / 2 - 32 )) conv=notrunc status=none'
check "(c) mid, garbage in the middle of the MANIFEST, 'synced 10'" any "$tmp/mid" "$tmp/mid.out" \
  'm=$(ls | grep MANIFEST-); head -c 64 /dev/urandom | dd of=$m bs=1 seek=$(( $(stat -c %s $m) / 2 - 32 )) conv=notrunc status=none'
# Extra: a torn append of the newest log (what a crash mid-write leaves), and garbage after it.
check "(f) mid, newest .log cut mid-record, empty stdout" pass "$tmp/mid" "$tmp/empty.out" \
  'f=$(newest . log); truncate -s 70000 "$f"'
check "(f) mid, 4 KB of garbage appended to the newest .log, empty stdout" any "$tmp/mid" "$tmp/empty.out" \
  'head -c 4096 /dev/urandom >>"$(newest . log)"'
# Extra: silent data damage inside a table and a hole in the middle of the Puts.
check "(d) final, 100 bytes of garbage inside the .ldb, 'synced 10'" any "$tmp/final" "$tmp/final.out" \
  'f=$(newest . ldb); head -c 100 /dev/urandom | dd of=$f bs=1 seek=200000 conv=notrunc status=none'
check "(e) mid, oldest .ldb deleted (Puts 0-1 lost), empty stdout" fail "$tmp/mid" "$tmp/empty.out" \
  'rm "$(ls | grep "\.ldb$" | sort | head -1)"'
check "(e) mid, 2nd .ldb deleted (Puts 2-3 lost), empty stdout (ordering)" fail "$tmp/mid" "$tmp/empty.out" \
  'rm "$(ls | grep "\.ldb$" | sort | sed -n 2p)"'

echo "--- $unexpected unexpected result(s)"
[ "$unexpected" -eq 0 ]
