#!/usr/bin/env bash
# Quick start: install what intact needs, build it, record the bundled key-value store
# example (examples/kvstore), print its update protocol, then explore its crash states
# under ALICE's default APM and ext4 and print the vulnerabilities found.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for t in strace:strace gcc:gcc python3:python3; do command -v "${t%%:*}" >/dev/null || need+=("${t##*:}"); done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq "${need[@]}" >/dev/null; fi
fi
cargo build --release -q -p intact-cli
intact=$PWD/target/release/intact
# Shell completions for the user's shells (bash always, fish when present).
comp=${XDG_DATA_HOME:-$HOME/.local/share}/bash-completion/completions
mkdir -p "$comp" && "$intact" completions bash >"$comp/intact"
if command -v fish >/dev/null; then
  mkdir -p "$HOME/.config/fish/completions" && "$intact" completions fish >"$HOME/.config/fish/completions/intact.fish"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -g -O0 -o "$work/kv" examples/kvstore/kv.c
mkdir "$work/db"
(cd "$work/db" && "$intact" record --out "$work/kv.bundle" -- "$work/kv" x foo1 y foo2)
echo "== the update protocol"
"$intact" ops "$work/kv.bundle"
echo "== crash vulnerabilities (checker: examples/kvstore/check.py)"
status=0
KV_EXPECT="x=foo1 y=foo2" "$intact" check "$work/kv.bundle" --apm default,ext4-o \
  --checker "python3 $PWD/examples/kvstore/check.py" || status=$?
# 1 = vulnerabilities found: the expected answer for this example.
[ "$status" -le 1 ] || exit "$status"
