#!/usr/bin/env bash
# PostgreSQL workload. Run as root; the server runs as user postgres.
#   postgres.sh run DIR PORT SOCKDIR LOG     initdb DIR/pgdata (with data checksums), start,
#       create tables, 1,000 rows in 10 multi-row transactions + 100 single-row ones,
#       updates, deletes, TOASTed values, CHECKPOINT, more rows, an immediate stop (no
#       shutdown checkpoint: the restart replays the WAL from the file system), start,
#       verify, fast stop, pg_checksums --check
#   postgres.sh verify DIR PORT SOCKDIR LOG  start, verify (queries + amcheck), fast stop,
#       pg_checksums --check
# DIR must not exist (run) / hold pgdata (verify). The server's log goes to LOG, its socket
# to SOCKDIR (both made writable for postgres here). stdout is the normalized result: query
# results only (initdb's files differ between runs: system identifier, timestamps).
set -euo pipefail
cmd=$1 dir=$2 port=$3 sock=$4 log=$5
PG_BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)}
data=$dir/pgdata
as_pg() { (cd / && runuser -u postgres -- "$@"); }

started=
stop_on_exit() {
  if [ -n "$started" ]; then as_pg "$PG_BIN/pg_ctl" -D "$data" stop -m immediate -w -t 60 >>"$log" 2>&1 || true; fi
}
trap stop_on_exit EXIT

start() {
  as_pg "$PG_BIN/pg_ctl" -D "$data" -l "$log" -w -t 120 start \
    -o "-p $port -k $sock -c listen_addresses='' -c autovacuum=off -c fsync=on -c synchronous_commit=on -c full_page_writes=on -c wal_sync_method=fdatasync" >/dev/null
  started=1
}
stop() {  # $1: fast or immediate
  as_pg "$PG_BIN/pg_ctl" -D "$data" -w -t 120 stop -m "$1" >/dev/null
  started=
}
psql_() { as_pg "$PG_BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$sock" -p "$port" -U postgres -d postgres "$@"; }

verify() {
  psql_ <<'EOF'
SELECT 't', count(*), sum(amount), sum(grp), md5(string_agg(id || ':' || grp || ':' || payload || ':' || amount, ',' ORDER BY id)) FROM t;
SELECT 'docs', count(*), sum(length(body)), md5(string_agg(md5(body), ',' ORDER BY id)) FROM docs;
SELECT 'groups', string_agg(grp || '=' || c, ',' ORDER BY grp) FROM (SELECT grp, count(*) AS c FROM t GROUP BY grp) s;
SELECT 'by index', count(*) FROM (SELECT id FROM t WHERE grp = 3 ORDER BY grp, id) s;
SELECT 'amcheck btree', bt_index_check('t_pkey', true), bt_index_parent_check('t_grp', true);
SELECT 'amcheck heap t', count(*) FROM verify_heapam('t');
SELECT 'amcheck heap docs', count(*) FROM verify_heapam('docs');
EOF
}

checksums() {
  local out
  if out=$(as_pg "$PG_BIN/pg_checksums" --check -D "$data" 2>&1); then
    echo "pg_checksums: $(grep -i 'bad checksums' <<<"$out")"
  else
    echo "pg_checksums FAILED: $out"
  fi
}

mkdir -p "$sock"
chown postgres:postgres "$sock"
touch "$log"
chown postgres:postgres "$log"

case $cmd in
run)
  mkdir "$dir"
  chown postgres:postgres "$dir"
  t0=$(date +%s%N)
  as_pg "$PG_BIN/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C --data-checksums --no-instructions >>"$log" 2>&1
  echo "initdb: ok"
  echo "initdb took $(( ($(date +%s%N) - t0) / 1000000 )) ms" >&2
  start
  psql_ <<'EOF'
CREATE EXTENSION amcheck;
CREATE TABLE t (id integer PRIMARY KEY, grp integer NOT NULL, payload text NOT NULL, amount numeric NOT NULL);
CREATE INDEX t_grp ON t (grp, id);
CREATE TABLE docs (id integer PRIMARY KEY, body text NOT NULL);
EOF
  # 1,000 rows in 10 transactions of 100.
  for b in $(seq 0 9); do
    psql_ -c "BEGIN; INSERT INTO t SELECT g, g % 17, repeat(md5(g::text), 1 + g % 5), g * 1.5 FROM generate_series($((b * 100 + 1)), $((b * 100 + 100))) g; COMMIT;"
  done
  # 100 single-row transactions (autocommit: a WAL flush each).
  for i in $(seq 1001 1100); do echo "INSERT INTO t VALUES ($i, $((i % 17)), 'single $i', $i);"; done | psql_
  psql_ <<'EOF'
BEGIN;
UPDATE t SET amount = amount + 1, payload = payload || '+' WHERE id % 10 = 0;
DELETE FROM t WHERE id % 33 = 0;
COMMIT;
BEGIN; DELETE FROM t; ROLLBACK;
-- TOASTed values (compressed and out of line), some replaced.
INSERT INTO docs SELECT d, string_agg(md5((d * 1000 + k)::text), '' ORDER BY k) FROM generate_series(1, 20) d, generate_series(1, 3000) k GROUP BY d;
UPDATE docs SET body = reverse(body) WHERE id % 4 = 0;
CHECKPOINT;
INSERT INTO t SELECT g, g % 17, 'after checkpoint ' || g, g FROM generate_series(2001, 2100) g;
DELETE FROM docs WHERE id = 7;
EOF
  echo "before immediate stop:"; verify | sed 's/^/  /'
  stop immediate
  start
  echo "after restart (WAL replay):"; verify | sed 's/^/  /'
  psql_ -c "VACUUM t" -c "CHECKPOINT"
  stop fast
  checksums
  ;;
verify)
  start
  verify
  stop fast
  checksums
  ;;
*)
  echo "usage: postgres.sh run|verify DIR PORT SOCKDIR LOG" >&2
  exit 2
  ;;
esac
