#!/usr/bin/env bash
# Rebuilds vendor/fuser from the pristine fuser 0.18.0 crate and patches/*.patch, in order,
# and checks that the result is exactly this directory (PATCHES.md says why each patch).
#
#   bash vendor/fuser/check-patches.sh            check (run by scripts/test.sh)
#   bash vendor/fuser/check-patches.sh --tree DIR  also leave the tree in DIR (DIR must
#                                                  not exist), as far as the patches
#                                                  applied: the start of an update
#
# The pristine crate comes from $FUSER_CRATE, else cargo's registry cache, else crates.io
# (curl), and must have the checksum below (the one crates.io publishes). If it cannot be
# had, the check says so and exits 0; under INTACT_REQUIRE_ALL=1 (CI) that is a failure.
# Exit codes: 0 same (or skipped), 1 differs or cannot run under INTACT_REQUIRE_ALL=1.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=0.18.0
sha256=b82b6597d216503555ead6b358f341ef748869bf5c6fbae6a0cb9dd231baecfd
url=https://static.crates.io/crates/fuser/fuser-$version.crate
# Files of the published crate that are not vendored: its own Docker and test scripts,
# lock file and agent notes (PATCHES.md); ours that are not in the crate.
not_vendored=(AGENTS.md CLAUDE.md Cargo.lock Cargo.toml.orig mount_tests_libfuse2.Dockerfile
  mount_tests_libfuse3.Dockerfile pjdfs.Dockerfile pjdfs.sh xfstests.Dockerfile xfstests.sh)
ours=(PATCHES.md patches check-patches.sh)

keep=
if [ "${1:-}" = --tree ]; then
  keep=${2:?--tree needs a directory}
  [ ! -e "$keep" ] || { echo "check-patches: $keep exists" >&2; exit 1; }
fi

cannot_run() {
  if [ "${INTACT_REQUIRE_ALL:-}" = 1 ]; then
    echo "check-patches: cannot run: $1 (INTACT_REQUIRE_ALL=1: every check must run)" >&2
    exit 1
  fi
  echo "check-patches: SKIPPED: $1 (set INTACT_REQUIRE_ALL=1 to make this a failure)" >&2
  exit 0
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fuser-patches.XXXXXX")
tree=$tmp/fuser-$version
finish() {
  if [ -n "$keep" ] && [ -d "$tree" ]; then cp -a "$tree" "$keep"; fi
  rm -rf "$tmp"
}
trap finish EXIT

# The pristine crate: given, cached by cargo, or downloaded.
crate=${FUSER_CRATE:-}
if [ -z "$crate" ]; then
  for c in "${CARGO_HOME:-$HOME/.cargo}"/registry/cache/*/fuser-$version.crate; do
    [ -f "$c" ] && crate=$c && break
  done
fi
if [ -z "$crate" ]; then
  command -v curl >/dev/null || cannot_run "fuser-$version.crate is not in cargo's cache and curl is missing"
  crate=$tmp/fuser-$version.crate
  curl -sSfL --retry 2 -o "$crate" "$url" 2>"$tmp/curl.err" \
    || cannot_run "downloading $url: $(cat "$tmp/curl.err")"
fi
got=$(sha256sum "$crate" | cut -d' ' -f1)
if [ "$got" != "$sha256" ]; then
  echo "check-patches: $crate has sha256 $got, expected $sha256 (not fuser $version as published)" >&2
  exit 1
fi

tar -xzf "$crate" -C "$tmp"
for f in "${not_vendored[@]}"; do rm -f "$tree/$f"; done
n=0
for p in "$here"/patches/*.patch; do
  # git apply outside any repository: paths are relative to the tree, as in the patches.
  if ! (cd "$tree" && GIT_CEILING_DIRECTORIES="$tmp" git apply -p1 --whitespace=nowarn "$p"); then
    echo "check-patches: $(basename "$p") does not apply to fuser $version (after $n patches)" >&2
    exit 1
  fi
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "check-patches: no patches in $here/patches" >&2; exit 1; }

excludes=()
for f in "${ours[@]}"; do excludes+=(-x "$f"); done
if ! diff -r "${excludes[@]}" "$tree" "$here" >"$tmp/diff"; then
  echo "check-patches: vendor/fuser differs from fuser $version + ${n} patches (edit a patch, not the tree):" >&2
  head -100 "$tmp/diff" >&2
  exit 1
fi
echo "check-patches: vendor/fuser = fuser $version + $n patches"
