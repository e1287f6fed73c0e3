# SQLite study (sourced by study/run.sh; contract in study/README.md).
CONFIGS=(rollback-full rollback-extra wal-full wal-normal)
QUICK_CONFIGS=(rollback-full)
case "$STUDY_CONFIG" in
  rollback-full)  mode=delete sync=full ;;
  rollback-extra) mode=delete sync=extra ;;
  wal-full)       mode=wal    sync=full ;;
  wal-normal)     mode=wal    sync=normal ;;
  *) echo "sqlite: unknown configuration $STUDY_CONFIG" >&2; return 1 ;;
esac
APP_TITLE="SQLite (Debian libsqlite3 static library), journal_mode=$mode, synchronous=$sync"

study_build() {
  if ! [ -f /usr/lib/x86_64-linux-gnu/libsqlite3.a ]; then
    apt-get update -qq && apt-get install -y -qq libsqlite3-dev >/dev/null
  fi
  for p in workload check; do
    if [ "$APP_DIR/$p.c" -nt "$BUILD/$p" ] || ! [ -x "$BUILD/$p" ]; then
      gcc -g -O1 -Wall -o "$BUILD/$p" "$APP_DIR/$p.c" \
        /usr/lib/x86_64-linux-gnu/libsqlite3.a -lm -lpthread -ldl
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
CHECKER="$BUILD/check"
# SQLite's VFS layer (os_unix.c and the sqlite3Os* wrappers) does the system calls for
# every caller; skipping it makes the pager / WAL function that asked for the I/O the
# representative frame.
CHECK_OPTS=(--frame-skip '^[^|]*\|(?:unix[A-Z]\w*|seekAndWrite\w*|full_fsync|robust_\w+|osPwrite|osWrite|osOpen|osClose|osUnlink|osFtruncate|osFallocate|fcntlSizeHint|closeUnixFile|openDirectory|sqlite3Os\w+)\|')
