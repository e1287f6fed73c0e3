#!/usr/bin/env bash
# SQLite workload (sqlite3 CLI), deterministic:
#   sqlite.sh run MODE DIR      MODE = delete (rollback journal) or wal; DIR is created
#   sqlite.sh verify MODE DIR   integrity_check, counts, checksums and the full .dump
# stdout is the normalized result; the same on every file system.
set -euo pipefail
cmd=$1 mode=$2 dir=$3
db=$dir/test.db

sql() { sqlite3 -bail -batch "$db" "$@"; }

# The verification: prints only what must be equal everywhere. In WAL mode the connection
# does not checkpoint on close (so the WAL written by the workload stays, and a later verify,
# e.g. after a remount, reads it again from the file system).
verify() {
  local pre=()
  if [ "$mode" = wal ]; then pre=(-cmd ".dbconfig no_ckpt_on_close on"); fi
  sqlite3 -bail -batch "${pre[@]}" "$db" <<'EOF'
.headers off
PRAGMA integrity_check;
PRAGMA foreign_key_check;
PRAGMA journal_mode;
SELECT 'rows', count(*), sum(id), sum(length(body)), sum(n) FROM item;
SELECT 'tags', count(*), group_concat(name || '=' || cnt, ',') FROM (SELECT name, count(*) AS cnt FROM tag GROUP BY name ORDER BY name);
SELECT 'checksum', sum(unicode(substr(body, 1 + (id % 50), 1)) * id) FROM item;
SELECT 'big', count(*), sum(length(blob)) FROM big;
.dump
EOF
}

case $cmd in
run)
  mkdir -p "$dir"
  # Schema; journal mode first (it is persistent for WAL).
  sql "PRAGMA journal_mode=$mode;" >/dev/null
  sql <<'EOF'
PRAGMA foreign_keys=ON;
CREATE TABLE item (id INTEGER PRIMARY KEY, n INTEGER NOT NULL, body TEXT NOT NULL);
CREATE TABLE tag (item INTEGER NOT NULL REFERENCES item(id) ON DELETE CASCADE, name TEXT NOT NULL);
CREATE TABLE big (id INTEGER PRIMARY KEY, blob BLOB NOT NULL);
CREATE INDEX item_n ON item(n);
CREATE INDEX tag_name ON tag(name, item);
EOF
  # 4,000 inserts in 40 transactions (each its own sqlite3 process: a journal or WAL
  # commit with fsyncs per transaction), tags for every third row.
  for t in $(seq 0 39); do
    {
      echo "PRAGMA foreign_keys=ON; BEGIN;"
      for i in $(seq $((t * 100 + 1)) $((t * 100 + 100))); do
        echo "INSERT INTO item VALUES ($i, $(( (i * 7919) % 10007 )), printf('row %d %s', $i, substr(replace(hex(zeroblob($(( i % 200 + 20 )))), '00', 'ab$t'), 1, $(( i % 300 + 10 )))));"
        if [ $((i % 3)) -eq 0 ]; then echo "INSERT INTO tag VALUES ($i, 'tag$((i % 11))');"; fi
      done
      echo "COMMIT;"
    } | sql
  done
  # 60 single-statement (autocommit) transactions.
  for i in $(seq 4001 4060); do
    sql "INSERT INTO item VALUES ($i, $i, 'autocommit $i');"
  done
  # Large values (overflow pages), updates, deletes (with cascades), a rolled-back
  # transaction, a savepoint, an index rebuild, and a VACUUM (rewrites the whole file).
  sql <<'EOF'
PRAGMA foreign_keys=ON;
BEGIN;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 30)
  INSERT INTO big SELECT x, zeroblob(x * 3000) FROM c;
UPDATE big SET blob = CAST(printf('%.*c', length(blob), char(65 + id % 26)) AS BLOB) WHERE id % 2 = 0;
COMMIT;
BEGIN; UPDATE item SET n = n + 1, body = body || ' updated' WHERE id % 7 = 0; COMMIT;
BEGIN; DELETE FROM item WHERE id % 13 = 0; COMMIT;
BEGIN; DELETE FROM item WHERE id BETWEEN 1500 AND 1700; COMMIT;
BEGIN; UPDATE item SET body = 'never' WHERE id < 100; ROLLBACK;
BEGIN;
SAVEPOINT s1; DELETE FROM item WHERE id < 50; ROLLBACK TO s1; RELEASE s1;
UPDATE tag SET name = upper(name) WHERE item % 9 = 0;
COMMIT;
REINDEX;
DELETE FROM big WHERE id > 20;
VACUUM;
INSERT INTO item VALUES (99999, 1, 'after vacuum');
EOF
  if [ "$mode" = wal ]; then
    # Leave committed transactions in the WAL (no checkpoint at close) so that the
    # verification reads them from the WAL.
    sqlite3 -bail -batch -cmd ".dbconfig no_ckpt_on_close on" "$db" \
      "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA wal_autocheckpoint=0; INSERT INTO item VALUES (100000, 2, 'in the wal'); UPDATE item SET n = -n WHERE id % 101 = 0;" >/dev/null
    [ -s "$db-wal" ] && echo "wal file left with committed frames: yes" || echo "wal file left with committed frames: no"
  else
    # Rollback mode: the file is the same byte for byte on every file system.
    echo "db file sha256: $(sha256sum <"$db" | cut -c1-64)"
    [ -e "$db-journal" ] && echo "journal left: yes" || echo "journal left: no"
  fi
  verify
  ;;
verify)
  verify
  ;;
*)
  echo "usage: sqlite.sh run|verify delete|wal DIR" >&2
  exit 2
  ;;
esac
