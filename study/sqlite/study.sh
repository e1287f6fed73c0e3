# SQLite study (sourced by study/run.sh; contract in study/README.md).
CONFIGS=(rollback-full rollback-extra wal-full wal-normal)
QUICK_CONFIGS=(rollback-full)
case "$STUDY_CONFIG" in
  rollback-full)  mode=delete sync=full durability=lay ;;
  rollback-extra) mode=delete sync=extra durability=documented ;;
  wal-full)       mode=wal    sync=full durability=documented ;;
  wal-normal)     mode=wal    sync=normal durability=lay ;;
  *) echo "sqlite: unknown configuration $STUDY_CONFIG" >&2; return 1 ;;
esac
APP_TITLE="SQLite (Debian source of libsqlite3-dev, built with -g), journal_mode=$mode, synchronous=$sync"

# SQLite itself is built from Debian's source of the installed libsqlite3-dev
# (study/debian-source.sh: same version, Debian's patches), with the -DSQLITE_* options of
# Debian's debian/rules and -g, and linked statically into the workload and the checker:
# every frame then has a SQLite source line (Debian's library has no line tables).
study_build() {
  if ! dpkg -s libsqlite3-dev >/dev/null 2>&1 || ! command -v tclsh >/dev/null; then
    apt-get update -qq && apt-get install -y -qq libsqlite3-dev tcl gcc make >/dev/null
  fi
  local version; version=$(dpkg-query -W -f '${Version}' libsqlite3-dev)
  if ! [ -f "$BUILD/sqlite3.o" ] || [ "$(cat "$BUILD/sqlite3.version" 2>/dev/null)" != "$version" ]; then
    local tree; tree=$(bash "$APP_DIR/../debian-source.sh" libsqlite3-dev "$BUILD/src")
    mkdir -p "$BUILD/amalgamation"
    (cd "$BUILD/amalgamation" && "$tree/configure" --disable-tcl >"$BUILD/build.log" 2>&1 &&
      make sqlite3.c >>"$BUILD/build.log" 2>&1) || { tail -5 "$BUILD/build.log" >&2; return 1; }
    local debian_opts; debian_opts=$(grep -o -- '-DSQLITE_[A-Za-z0-9_]*\(=[0-9]*\)\?' "$tree/debian/rules" | sort -u)
    # shellcheck disable=SC2086
    gcc -g -O1 -c -o "$BUILD/sqlite3.o" $debian_opts "$BUILD/amalgamation/sqlite3.c"
    echo "$version" >"$BUILD/sqlite3.version"
  fi
  for p in workload check; do
    if [ "$APP_DIR/$p.c" -nt "$BUILD/$p" ] || [ "$BUILD/sqlite3.o" -nt "$BUILD/$p" ]; then
      gcc -g -O1 -Wall -I"$BUILD/amalgamation" -o "$BUILD/$p" "$APP_DIR/$p.c" "$BUILD/sqlite3.o" -lm -lpthread -ldl
    fi
  done
}
study_version() { dpkg-query -W -f '${Version}' libsqlite3-dev; }
study_init() { :; }
WORKLOAD=("$BUILD/workload" "$mode" "$sync")
# The -shm file is SQLite's shared-memory WAL index: rebuilt from the WAL by the first
# connection, never needed for recovery (sqlite.org/walformat.html), and written
# through a shared mapping. Leaving it out keeps the trace to what recovery reads.
RECORD_OPTS=(--ignore 'test.db-shm')
# The durability rule is documented for EXTRA (rollback) and FULL (WAL), a lay expectation
# for FULL (rollback) and NORMAL (WAL): sqlite.org/pragma.html#pragma_synchronous (check.c).
CHECKER="$BUILD/check --durability=$durability"
# SQLite's VFS layer (os_unix.c and the sqlite3Os* wrappers) does the system calls for
# every caller; skipping it makes the pager / WAL function that asked for the I/O the
# representative frame.
CHECK_OPTS=(--frame-skip '^[^|]*\|(?:unix[A-Z]\w*|seekAndWrite\w*|full_fsync|robust_\w+|osPwrite|osWrite|osOpen|osClose|osUnlink|osFtruncate|osFallocate|posixOpen|fcntlSizeHint|closeUnixFile|openDirectory|sqlite3Os\w+)\|')
