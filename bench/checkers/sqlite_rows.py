"""Workload of the warm-checker benchmark (bench/checkers/bench.sh, issue 33): 20 rows
inserted into SQLite, one transaction each, then "done" printed."""
import sqlite3

db = sqlite3.connect("app.db")
db.execute("create table t (k integer primary key, v text)")
db.commit()
for i in range(20):
    db.execute("insert into t values (?, ?)", (i, "value %d" % i))
    db.commit()
print("done", flush=True)
