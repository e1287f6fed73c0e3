# Shared by the examples' self-tests (source it): counters, and `expect`, which runs the
# example's checker (the array CHECKER, set by the caller) on a copy of a hand-made crash
# state and compares its verdict with the known one. Needs $work (a scratch directory).

passed=0 failed=0
ok()  { passed=$((passed + 1)); printf 'ok    %s\n' "$*"; }
bad() { failed=$((failed + 1)); printf 'FAIL  %s\n' "$*"; }

# expect NAME consistent|inconsistent DIR STDOUT_TEXT: run the checker on a copy of DIR.
expect() {
  local name=$1 want=$2 dir=$3 out=$4 c="$work/crash.$RANDOM$RANDOM"
  cp -a "$dir" "$c"
  printf '%s' "$out" > "$c.stdout"
  local err rc
  err=$(timeout 10 "${CHECKER[@]}" "$c" "$c.stdout" 2>&1 >/dev/null); rc=$?
  rm -rf "$c" "$c.stdout"
  local got=consistent
  [ $rc -eq 0 ] || got=inconsistent
  if [ $rc -gt 1 ]; then bad "$name: checker error (exit $rc): $err"; return; fi
  if [ "$got" = "$want" ]; then ok "$name: $got${err:+ — $err}"
  else bad "$name: expected $want, got $got${err:+ — $err}"; fi
}

# summary: the closing line and the exit status.
summary() {
  echo
  echo "$passed passed, $failed failed"
  [ "$failed" = 0 ]
}
