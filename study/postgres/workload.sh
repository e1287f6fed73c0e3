#!/usr/bin/env bash
# The traced PostgreSQL workload (study/postgres/README.md). Run as root with the workload
# directory (holding pgdata/, made by study_init) as working directory:
#   start the server; CREATE TABLE; 3 INSERTs, each its own transaction; CHECKPOINT;
#   3 more INSERTs; fast shutdown.
# After every statement returns, one line goes to stdout (created, committed N, checkpoint,
# stopped): the checker's durability expectations. Everything else goes to stderr.
set -euo pipefail
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}   # study.sh sets the -g build
PORT=${PG_STUDY_PORT:-54329}
data=$PWD/pgdata

# The postgres user, plus CAP_DAC_READ_SEARCH so that it reaches pgdata whatever the
# permissions of the directories above it (postgres refuses to run as root).
as_pg=(setpriv --reuid=postgres --regid=postgres --init-groups
       --inh-caps=+dac_read_search --ambient-caps=+dac_read_search)

sock=$(mktemp -d /tmp/intact-pg-sock.XXXXXX)   # outside the recorded directory
chown postgres:postgres "$sock"
pm=
cleanup() {
  if [ -n "$pm" ] && kill -0 "$pm" 2>/dev/null; then
    kill -QUIT "$pm" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pm" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pm" 2>/dev/null || true
    wait "$pm" 2>/dev/null || true
  fi
  rm -rf "$sock"
}
trap cleanup EXIT

# The server's log (stderr) and anything it might print go to our stderr, not stdout.
# A simple command, not a function: $! is the postmaster itself (setpriv execs it).
"${as_pg[@]}" "$PG_BIN/postgres" -D "$data" -k "$sock" -p "$PORT" </dev/null >&2 &
pm=$!
for i in $(seq 300); do
  "$PG_BIN/pg_isready" -q -h "$sock" -p "$PORT" -U postgres -d postgres && break
  kill -0 "$pm" 2>/dev/null || { echo "workload: the server exited during startup" >&2; exit 1; }
  [ "$i" -lt 300 ] || { echo "workload: the server did not start within 30 s" >&2; exit 1; }
  sleep 0.1
done

sql() {
  "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$PORT" -U postgres -d postgres -c "$1" >&2
}

sql "CREATE TABLE t (id integer NOT NULL, v integer NOT NULL)"
echo "created"
for i in 1 2 3; do
  sql "INSERT INTO t VALUES ($i, $((i * 10)))"
  echo "committed $i"
done
sql "CHECKPOINT"
echo "checkpoint"
for i in 4 5 6; do
  sql "INSERT INTO t VALUES ($i, $((i * 10)))"
  echo "committed $i"
done

kill -INT "$pm"        # fast shutdown: roll back sessions, shutdown checkpoint, exit
wait "$pm" || { rc=$?; echo "workload: the server exited with status $rc" >&2; exit 1; }
pm=
echo "stopped"
