# PostgreSQL 15 (Debian package postgresql-15): sourced by study/run.sh, see study/README.md
# and study/postgres/README.md.

# The traced server, initdb and the checker's server are PostgreSQL built with -g from
# Debian's source of the installed postgresql-15 (study/debian-source.sh: same version,
# Debian's patches), installed under $BUILD/pg: each vulnerability is then named by a
# PostgreSQL source line (Debian's binary is stripped to its exported symbols). The
# optional libraries the study does not use (readline, ICU, zstd, lz4) are left out.
export PG_BIN=$BUILD/pg/bin

CONFIGS=(default)
QUICK_CONFIGS=()
APP_TITLE="PostgreSQL 15 (Debian source of postgresql-15, built with -g), default durability settings (fsync, synchronous_commit, full_page_writes on)"

study_build() {
  if ! dpkg -s postgresql-15 >/dev/null 2>&1 || ! dpkg -s zlib1g-dev >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 zlib1g-dev gcc make >/dev/null
  fi
  command -v setpriv >/dev/null && command -v python3 >/dev/null
  local version; version=$(study_version)
  if [ -x "$PG_BIN/postgres" ] && [ "$(cat "$BUILD/pg.version" 2>/dev/null)" = "$version" ]; then
    return
  fi
  local tree; tree=$(bash "$APP_DIR/../debian-source.sh" postgresql-15 "$BUILD/src")
  rm -rf "$BUILD/bld" "$BUILD/pg" && mkdir -p "$BUILD/bld"
  (cd "$BUILD/bld" && "$tree/configure" --prefix="$BUILD/pg" --without-readline --without-icu \
      --without-zstd --without-lz4 CFLAGS="-g -O2" && make -j"$(nproc)" && make install) \
    >"$BUILD/build.log" 2>&1 || { tail -5 "$BUILD/build.log" >&2; return 1; }
  echo "$version" >"$BUILD/pg.version"
}

study_version() { dpkg-query -W -f '${Version}' postgresql-15; }

# study_init DIR: an initialised, never started cluster in DIR/pgdata (not traced).
study_init() {
  local dir
  dir=$(cd "$1" && pwd)
  mkdir -p "$dir/pgdata"
  chown postgres:postgres "$dir/pgdata"
  chmod 700 "$dir/pgdata"
  # initdb refuses to run as root: run it as postgres (README: why setpriv, not runuser).
  # Not traced; --no-sync is safe (the snapshot is read from the page cache).
  (cd / && setpriv --reuid=postgres --regid=postgres --init-groups \
     --inh-caps=+dac_read_search --ambient-caps=+dac_read_search \
     "$PG_BIN/initdb" -D "$dir/pgdata" -U postgres --auth=trust --encoding=UTF8 --locale=C \
     --no-sync --no-instructions) >/dev/null
  cat >> "$dir/pgdata/postgresql.conf" <<'CONF'

# --- intact study (study/postgres/README.md says why) ---
listen_addresses = ''            # unix socket only (the socket directory is given per run)
autovacuum = off                 # no background vacuum/analyze writes at random times
shared_buffers = 16MB
max_connections = 20
logging_collector = off          # server log on stderr only, no log files in pgdata
log_destination = 'stderr'
# the durability settings, stated explicitly (they are the defaults)
fsync = on
synchronous_commit = on
full_page_writes = on
CONF
}

WORKLOAD=(bash "$APP_DIR/workload.sh")
# Files that carry no data a crash could damage (README.md, "What is left out"):
RECORD_OPTS=(
  --ignore 'pgdata/postmaster.pid'            # lock file; a crash leaves it stale, the checker removes it
  --ignore 'pgdata/postmaster.opts'           # command line of the last start (pg_ctl restart only)
  --ignore 'pgdata/global/pg_internal.init*'  # relation-cache init files: removed at every startup
  --ignore 'pgdata/base/*/pg_internal.init*'
  --ignore 'pgdata/pg_stat/*'                 # cumulative statistics: discarded by crash recovery
)
CHECKER="python3 $APP_DIR/check.py"
# A warm checker: the interpreter starts once per worker, each state runs main() in a
# forked child (check.py, study/README.md).
CHECKER_PROTOCOL=server
# Representative frames: skip PostgreSQL's file-access layer (storage/file/fd.c: every
# open, write, fsync and durable_rename goes through it, and src/port's pwrite wrappers) so
# that the caller that decided the I/O is named (mdcreate, mdextend, XLogWrite, ...).
CHECK_OPTS=(--frame-skip '\|[^|]*/src/(?:backend/storage/file/fd\.c|port/pg_?pwrite\w*\.c)$')
