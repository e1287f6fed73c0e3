# Sourced by bench/check.sh and bench/record.sh from the repository root: builds intact
# (release), sets $intact and a temporary directory $tmp removed on exit, defines median.
cargo build --release -q -p intact-cli
intact=${CARGO_TARGET_DIR:-$PWD/target}/release/intact
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
