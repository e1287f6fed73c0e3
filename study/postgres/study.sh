# PostgreSQL 15 (Debian package postgresql-15): sourced by study/run.sh, see study/README.md
# and study/postgres/README.md.

PG_BIN=/usr/lib/postgresql/15/bin

CONFIGS=(default)
QUICK_CONFIGS=()
APP_TITLE="PostgreSQL 15 (Debian 12 package postgresql-15), default durability settings (fsync, synchronous_commit, full_page_writes on)"

study_build() {
  if [ ! -x "$PG_BIN/postgres" ] || [ ! -x "$PG_BIN/psql" ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >/dev/null
  fi
  command -v setpriv >/dev/null && command -v python3 >/dev/null
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
# Representative frames: skip PostgreSQL's file-access layer (fd.c: every open, write,
# fsync and durable_rename goes through it) so that the caller that decided the I/O is
# named (mdcreate, mdextend, mdwrite, CheckPointReplicationOrigin, ...). The last three
# names are not frames at all: Debian's binary is stripped to its exported symbols, and
# the static XLogWrite, issue_xlog_fsync and SlruPhysicalWritePage show up as the nearest
# exported symbol before them (GetRedoRecPtr, do_pg_abort_backup,
# pg_get_wal_resource_managers); skipping those names makes XLogFlush and
# SimpleLruWriteAll, their real callers, the representative frames.
CHECK_OPTS=(--frame-skip '^[^|]*/postgres\|(?:BasicOpenFile\w*|PathNameOpenFile\w*|OpenTransientFile\w*|AllocateFile|File(?:Write|Read|Sync|Writeback|Truncate|Zero|Fallocate)|pg_fsync\w*|pg_fdatasync|pg_flush_data|fsync_fname\w*|durable_rename|durable_unlink|pg_pwrite\w*|do_pg_abort_backup|GetRedoRecPtr|pg_get_wal_resource_managers)\|')
