#!/usr/bin/env bash
# Self-test of the key-value store example: builds kv, runs it (with and without --safe),
# and runs the checker (check.py) on the final and initial states and on hand-made crash
# states whose verdict is known. Exits non-zero on any unexpected result.
set -u
here=$(cd "$(dirname "$0")" && pwd)
CHECK=$here/check.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
KV=$work/kv
gcc -g -O0 -Wall -Wextra -o "$KV" "$here/kv.c" || { echo "build failed"; exit 1; }
unset KV_EXPECT

CHECKER=(python3 "$CHECK")
. "$here/../selftest-lib.sh"
# state NAME [FILE CONTENT]...: a directory holding exactly those files (printf %b content).
state() {
  local d="$work/$1"; shift; mkdir "$d"
  while [ $# -ge 2 ]; do printf '%b' "$2" > "$d/$1"; shift 2; done
}

echo "== workload"
for mode in plain safe; do
  mkdir "$work/final.$mode"
  args=(x foo1 y foo2); [ $mode = safe ] && args=(--safe "${args[@]}")
  out=$(cd "$work/final.$mode" && "$KV" "${args[@]}")
  files=$(cd "$work/final.$mode" && echo *)
  if [ "$out" = Done ] && [ "$(cat "$work/final.$mode/table")" = $'x=foo1\ny=foo2' ] \
     && [ ! -s "$work/final.$mode/kv.log" ] && [ "$files" = "kv.log table" ]; then
    ok "kv ${args[*]}: prints Done, table holds both records, kv.log empty"
  else bad "kv ${args[*]}: output '$out', files '$files'"; fi
  expect "final state of kv ${args[*]}, 'Done' printed" consistent "$work/final.$mode" $'Done\n'
done
if command -v strace >/dev/null; then
  for mode in plain safe; do
    mkdir "$work/trace.$mode"; args=(x foo1 y foo2); [ $mode = safe ] && args=(--safe "${args[@]}")
    (cd "$work/trace.$mode" && strace -o ../trace.txt -e trace=fsync,rename,write "$KV" "${args[@]}" >/dev/null)
    seq=$(grep -oE '^(fsync|rename|write\(1)' "$work/trace.txt" | tr '\n' ' ')
    want="fsync rename fsync write(1 "; [ $mode = safe ] && want="fsync fsync rename fsync write(1 "
    if [ "$seq" = "$want" ]; then ok "system calls of kv ${args[*]}: $seq"
    else bad "system calls of kv ${args[*]}: '$seq', expected '$want'"; fi
  done
else
  if [ "${INTACT_REQUIRE_ALL:-}" = 1 ]; then
    echo "strace is not installed: cannot run the system-call order checks (INTACT_REQUIRE_ALL=1; apt-get install -y strace)" >&2; exit 1
  fi
  echo "(strace not installed: skipping the system-call order checks)"
fi
mkdir "$work/twice"; (cd "$work/twice" && "$KV" a 1 >/dev/null && "$KV" b 2 >/dev/null)
if [ "$(cat "$work/twice/table")" = $'a=1\nb=2' ]; then ok "a second run keeps the first run's records"
else bad "a second run lost records: $(cat "$work/twice/table")"; fi

echo "== checker on hand-made crash states (KV_EXPECT unset: x=foo1 y=foo2)"
state empty
expect "initial state (empty directory), nothing printed" consistent "$work/empty" ""
expect "empty directory but 'Done' printed" inconsistent "$work/empty" $'Done\n'
state log0 kv.log ''
expect "kv.log created, nothing appended" consistent "$work/log0" ""
state log1 kv.log 'x=foo1\n'
expect "kv.log holds x only, nothing printed" consistent "$work/log1" ""
state log2 kv.log 'x=foo1\ny=foo2\n'
expect "kv.log holds x and y, no table yet" consistent "$work/log2" ""
state torn kv.log 'x=foo1\ny=fo'
expect "kv.log's last record cut short by the crash (ignored)" consistent "$work/torn" ""
state tmp kv.log 'x=foo1\ny=foo2\n' table.tmp ''
expect "table.tmp created, still empty (not part of the store)" consistent "$work/tmp" ""
state renamed table '' kv.log ''
expect "table renamed from an empty table.tmp, kv.log truncated, nothing printed" inconsistent "$work/renamed" ""
expect "table renamed from an empty table.tmp, kv.log truncated, 'Done' printed" inconsistent "$work/renamed" $'Done\n'
state renamed.log table '' kv.log 'x=foo1\ny=foo2\n'
expect "empty table but kv.log not yet truncated" consistent "$work/renamed.log" ""
state zeros table '\0\0\0\0\0\0\0\0\0\0\0\0\0\0' kv.log ''
expect "table holds zeros" inconsistent "$work/zeros" $'Done\n'
state junk table 'x=foo1\n\x8f\x03=\xe2\x10q\n' kv.log ''
expect "table holds garbage bytes" inconsistent "$work/junk" ""
state half table 'x=foo1\ny=fo' kv.log ''
expect "table holds a torn record (part of table.tmp's data)" inconsistent "$work/half" ""
state logzero kv.log 'x=foo1\n\0\0\0\0\0\0\0'
expect "kv.log with zeros where y's record should be" inconsistent "$work/logzero" ""
state nosep kv.log 'x=foo1\nyfoo2\n'
expect "kv.log line without '='" inconsistent "$work/nosep" ""
state done1 kv.log 'x=foo1\n'
expect "'Done' printed but key y missing" inconsistent "$work/done1" $'Done\n'
state order kv.log 'y=foo2\n'
expect "y present without the earlier x (ordering)" inconsistent "$work/order" ""
state wrong kv.log 'x=foo9\n'
expect "x holds a value never put (atomicity)" inconsistent "$work/wrong" ""
state stranger kv.log 'x=foo1\nz=foo3\n'
expect "a key never put" inconsistent "$work/stranger" ""
state split table 'x=foo1\n' kv.log 'y=foo2\n'
expect "x in table, y in kv.log, 'Done' printed" consistent "$work/split" $'Done\n'

echo "== KV_EXPECT"
mkdir "$work/abc"; (cd "$work/abc" && "$KV" a 1 b 2 c 3 >/dev/null)
expect "kv a 1 b 2 c 3 without KV_EXPECT (expects x, y)" inconsistent "$work/abc" $'Done\n'
export KV_EXPECT="a=1 b=2 c=3"
expect "kv a 1 b 2 c 3 with KV_EXPECT='$KV_EXPECT'" consistent "$work/abc" $'Done\n'
state ac kv.log 'a=1\nc=3\n'
expect "a and c without b, KV_EXPECT='$KV_EXPECT'" inconsistent "$work/ac" ""
export KV_EXPECT="k=1 k=2"
state k1 kv.log 'k=1\n'
expect "key put twice, first value present, nothing printed" consistent "$work/k1" ""
expect "key put twice, first value present, 'Done' printed" inconsistent "$work/k1" $'Done\n'
export KV_EXPECT=""
expect "KV_EXPECT='' (no puts), empty directory, 'Done' printed" consistent "$work/empty" $'Done\n'
export KV_EXPECT="bad"
expect_usage() {
  python3 "$CHECK" "$work/empty" /dev/null 2>/dev/null; rc=$?
  if [ $rc = 2 ]; then ok "malformed KV_EXPECT is a usage error (exit 2)"; else bad "malformed KV_EXPECT: exit $rc"; fi
}
expect_usage
unset KV_EXPECT

summary
