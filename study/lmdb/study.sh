# LMDB study (thesis 004 §4.3, Figure 4.3(B); sourced by study/run.sh, see study/README.md).
CONFIGS=(default)
QUICK_CONFIGS=()
APP_TITLE="LMDB (Debian source of liblmdb-dev, built with -g, linked statically): 8 write transactions of one 100-byte put each, default (synced) commits"

# LMDB itself is built from Debian's source of the installed liblmdb-dev (study/
# debian-source.sh) with -g and linked statically, so every frame has an LMDB source line.
study_build() {
  dpkg -s liblmdb-dev >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq liblmdb-dev lmdb-utils gcc make >/dev/null; }
  command -v mdb_dump >/dev/null || { apt-get update -qq && apt-get install -y -qq lmdb-utils >/dev/null; }
  local version; version=$(dpkg-query -W -f '${Version}' liblmdb-dev)
  if ! [ -f "$BUILD/lib/liblmdb.a" ] || [ "$(cat "$BUILD/lmdb.version" 2>/dev/null)" != "$version" ]; then
    local tree; tree=$(bash "$APP_DIR/../debian-source.sh" liblmdb-dev "$BUILD/src")
    rm -rf "$BUILD/lib" && mkdir -p "$BUILD/lib"
    (cd "$tree/libraries/liblmdb" && gcc -g -O1 -pthread -c mdb.c -o "$BUILD/lib/mdb.o" &&
       gcc -g -O1 -pthread -c midl.c -o "$BUILD/lib/midl.o") >"$BUILD/build.log" 2>&1 \
      || { tail -5 "$BUILD/build.log" >&2; return 1; }
    ar rcs "$BUILD/lib/liblmdb.a" "$BUILD/lib/mdb.o" "$BUILD/lib/midl.o"
    cp "$tree/libraries/liblmdb/lmdb.h" "$BUILD/lib/"
    echo "$version" >"$BUILD/lmdb.version"
  fi
  for p in workload check; do
    if [ "$APP_DIR/$p.c" -nt "$BUILD/$p" ] || [ "$BUILD/lib/liblmdb.a" -nt "$BUILD/$p" ]; then
      gcc -g -O1 -Wall -I"$BUILD/lib" -o "$BUILD/$p" "$APP_DIR/$p.c" "$BUILD/lib/liblmdb.a" -pthread
    fi
  done
}
study_version() { dpkg-query -W -f '${Version}' liblmdb-dev; }
# The environment directory exists before the workload (an application creates it once).
study_init() { mkdir "$1/db"; }
WORKLOAD=("$BUILD/workload")
# db/lock.mdb is LMDB's reader table and writer mutex, shared through a memory mapping and
# rebuilt when no process has the environment open: not part of the database.
RECORD_OPTS=(--ignore 'db/lock.mdb')
CHECKER="$BUILD/check"
CHECK_OPTS=()
