#!/usr/bin/env bash
# Fetches and unpacks Debian's source of the INSTALLED version of a package (Debian's
# patches applied), so the study can build the very code the package ships with -g: line
# tables that Debian's binaries lack (their debug archive is not reachable here).
#   bash study/debian-source.sh BINARY-PACKAGE DIR    -> DIR/tree, prints its path
# apt runs with a private state directory under DIR: the system's apt configuration is
# not touched. Needs dpkg-dev (dpkg-source); installs it when missing.
set -euo pipefail
pkg=$1 dir=$2
command -v dpkg-source >/dev/null || { apt-get update -qq && apt-get install -y -qq dpkg-dev >/dev/null; }
version=$(dpkg-query -W -f '${Version}' "$pkg")
if [ -d "$dir/tree" ] && [ "$(cat "$dir/version" 2>/dev/null)" = "$version" ]; then
  echo "$dir/tree"; exit 0
fi
rm -rf "$dir" && mkdir -p "$dir/sources" "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/src"
dir=$(cd "$dir" && pwd)   # apt reads relative paths from /etc/apt
: >"$dir/sources.list"
suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
key=/usr/share/keyrings/debian-archive-keyring.gpg
printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s %s-updates\nComponents: main\nSigned-By: %s\n\nTypes: deb-src\nURIs: http://deb.debian.org/debian-security\nSuites: %s-security\nComponents: main\nSigned-By: %s\n' \
  "$suite" "$suite" "$key" "$suite" "$key" >"$dir/sources/src.sources"
o=(-o "Dir::Etc::SourceList=$dir/sources.list" -o "Dir::Etc::SourceParts=$dir/sources"
   -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache")
apt-get "${o[@]}" update -qq >/dev/null
(cd "$dir/src" && apt-get "${o[@]}" source -qq --download-only "$pkg=$version" 2>/dev/null &&
  dpkg-source -x --no-check ./*.dsc "$dir/tree" >/dev/null)
echo "$version" >"$dir/version"
echo "$dir/tree"
