# LevelDB study (thesis 004 §3.6 workload; sourced by study/run.sh, see study/README.md).
CONFIGS=(default)
QUICK_CONFIGS=()
APP_TITLE="LevelDB (Debian source of libleveldb-dev, built with -g, linked statically): 10 Puts of 50 KB, 64 KB write buffer, last Put sync, reopen + CompactRange; paranoid_checks"
study_build() { bash "$APP_DIR/../../bench/leveldb/build.sh" "$BUILD" >/dev/null; }
study_version() { dpkg-query -W -f '${Version}' libleveldb-dev; }
study_init() { :; }
WORKLOAD=("$BUILD/workload")
# db/LOG* is LevelDB's human-readable info log: never read back by LevelDB.
RECORD_OPTS=(--ignore 'db/LOG*')
CHECKER="$BUILD/checker"
# LevelDB's POSIX Env (util/env_posix.cc: PosixWritableFile, PosixEnv) does the system
# calls for every caller; skipping it names the log writer, table builder, version set...
# that asked for them.
CHECK_OPTS=(--frame-skip '\|[^|]*/util/env_posix\.cc$')
