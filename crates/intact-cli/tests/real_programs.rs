//! Real programs under the recorder: the sqlite3 CLI (rollback journal and WAL) and git.
//! The replay oracle must hold, and the recorded protocol must show the steps each
//! program is known to take.

mod common;
use common::*;

fn ops_of(r: &Recorded) -> Vec<serde_json::Value> {
    assert_eq!(
        r.output.status.code(),
        Some(0),
        "intact record failed:\n{}",
        r.stderr()
    );
    r.verify();
    r.ops_json()
}

fn position(sigs: &[String], pred: impl Fn(&str) -> bool) -> usize {
    sigs.iter()
        .position(|s| pred(s))
        .unwrap_or_else(|| panic!("no matching operation in:\n{}", sigs.join("\n")))
}

#[test]
fn sqlite_rollback_journal() {
    let sql = "PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL; CREATE TABLE t(a,b); \
               BEGIN; INSERT INTO t VALUES(1,'x'); INSERT INTO t VALUES(2,'y'); COMMIT; \
               UPDATE t SET b='z' WHERE a=1;";
    let r = record_in(&["sqlite3", "test.db", sql], |_| {}, &[]);
    let ops = ops_of(&r);
    let sigs: Vec<String> = ops.iter().map(signature).collect();
    // The last transaction (the UPDATE): journal created, written, synced, then the
    // database page overwritten and synced, then the journal deleted.
    let last_create = sigs
        .iter()
        .rposition(|s| s == "create test.db-journal")
        .expect("journal created");
    let tail = &sigs[last_create..];
    let j_sync = position(tail, |s| {
        s.starts_with("fdatasync test.db-journal") || s.starts_with("fsync test.db-journal")
    });
    let db_write = position(tail, |s| s.starts_with("overwrite test.db @"));
    let db_sync = position(tail, |s| {
        s.starts_with("fdatasync test.db") && !s.contains("journal")
            || s.starts_with("fsync test.db") && !s.contains("journal")
    });
    let j_unlink = position(tail, |s| s.starts_with("unlink test.db-journal"));
    assert!(
        j_sync < db_write && db_write < db_sync && db_sync < j_unlink,
        "{}",
        tail.join("\n")
    );
    // The final database contains the update (checked by the oracle against the real file)
    let out = std::process::Command::new("sqlite3")
        .arg(r.work.join("test.db"))
        .arg("SELECT b FROM t ORDER BY a")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "z\ny\n");
}

#[test]
fn sqlite_wal() {
    let sql = "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE t(a,b); \
               BEGIN; INSERT INTO t VALUES(1,'x'); INSERT INTO t VALUES(2,'y'); COMMIT; \
               INSERT INTO t VALUES(3,'w');";
    let r = record_in(&["sqlite3", "test.db", sql], |_| {}, &[]);
    let ops = ops_of(&r);
    let sigs: Vec<String> = ops.iter().map(signature).collect();
    // Commits append frames to the WAL and sync it; at close the WAL is checkpointed into
    // the database and removed.
    let wal_append = position(&sigs, |s| {
        s.starts_with("append test.db-wal") || s.starts_with("overwrite test.db-wal")
    });
    let wal_sync = position(&sigs, |s| {
        s.starts_with("fsync test.db-wal") || s.starts_with("fdatasync test.db-wal")
    });
    assert!(wal_append < wal_sync);
    assert!(
        sigs.iter().any(|s| s.starts_with("create test.db-shm")),
        "{}",
        sigs.join("\n")
    );
    let checkpoint = position(&sigs, |s| {
        s.starts_with("overwrite test.db @") || s.starts_with("append test.db 0->")
    });
    assert!(
        wal_sync < checkpoint
            || sigs
                .iter()
                .filter(|s| s.starts_with("append test.db "))
                .count()
                > 0
    );
    assert!(
        sigs.iter().any(|s| s == "unlink test.db-wal n=0"),
        "{}",
        sigs.join("\n")
    );
}

#[test]
fn git_init_add_commit() {
    let script = "set -e; git init -q .; git add a.txt b.txt; \
                  git -c user.name=t -c user.email=t@example.com commit -q -m first; echo committed";
    let r = record_in(
        &["sh", "-c", script],
        |w| {
            std::fs::write(w.join("a.txt"), "hello\n").unwrap();
            std::fs::write(w.join("b.txt"), "world\n").unwrap();
        },
        &[],
    );
    let ops = ops_of(&r);
    let sigs: Vec<String> = ops.iter().map(signature).collect();
    // Objects are written to temporary files and renamed (or linked) into place; the
    // branch ref is updated by renaming master.lock over master; "committed" is printed last.
    assert!(sigs.iter().any(|s| s.starts_with("mkdir .git/objects")));
    assert!(
        sigs.iter()
            .any(|s| s == "rename .git/index.lock=>.git/index"),
        "{}",
        sigs.join("\n")
    );
    let head = position(&sigs, |s| {
        s == "rename .git/refs/heads/master.lock=>.git/refs/heads/master"
    });
    let out = position(&sigs, |s| s == "output \"committed\\n\"");
    assert!(head < out);
    // Several processes took part (sh, git add, git commit, ...).
    let pids: std::collections::BTreeSet<u64> =
        ops.iter().map(|o| o["pid"].as_u64().unwrap()).collect();
    assert!(pids.len() >= 3, "{pids:?}");
}
