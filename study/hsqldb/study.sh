# HSQLDB study (thesis 004 §4.2, Figure 4.4; sourced by study/run.sh, see study/README.md).
CONFIGS=(default)
QUICK_CONFIGS=()
# One JVM per crash state (about 0.5 CPU-second to start, then HSQLDB's recovery): 2174
# distinct states took 1532 s with 2 jobs on a shared 2-core machine, over the ~20 min a
# full study run allows each application. run.sh runs it with --slow or --apps hsqldb.
SLOW=1
APP_TITLE="HSQLDB 2.7.4 (Maven Central, rebuilt from its sources jar with javac -g): CACHED tables, SET FILES WRITE DELAY FALSE, setup + 6 transfer transactions, CHECKPOINT after the third, SHUTDOWN"

HSQLDB_VERSION=2.7.4
HSQLDB_JAR=$BUILD/hsqldb-$HSQLDB_VERSION-g.jar
# The checker's JVM: the C1 compiler only and the serial collector start fastest (one JVM
# per crash state).
JAVA_FAST=(-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto)

# HSQLDB and its sources come from Maven Central (org.hsqldb:hsqldb and its sources
# classifier). The released jar has no line tables ("Unknown Source" in stack traces), so
# the classes of the jar are recompiled from the sources jar with -g (Java 11 target, as
# the release) and put over the jar's own: every HSQLDB frame then names its .java line,
# and the sources in $BUILD/src are what the verdicts cite.
study_build() {
  command -v javac >/dev/null && command -v mvn >/dev/null && command -v jar >/dev/null \
    || { apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless maven >/dev/null; }
  local a=org.hsqldb:hsqldb:$HSQLDB_VERSION
  if ! [ -f "$HSQLDB_JAR" ]; then
    mkdir -p "$BUILD/maven"
    for art in "$a" "$a:jar:sources"; do
      mvn -q -B dependency:copy -Dartifact="$art" -DoutputDirectory="$BUILD/maven" >"$BUILD/maven.log" 2>&1 \
        || { echo "hsqldb: mvn dependency:copy $art failed:" >&2; tail -5 "$BUILD/maven.log" >&2; return 1; }
    done
    rm -rf "$BUILD/src" "$BUILD/classes-g" && mkdir -p "$BUILD/src" "$BUILD/classes-g"
    (cd "$BUILD/src" && jar xf "$BUILD/maven/hsqldb-$HSQLDB_VERSION-sources.jar")
    # The sources of the classes the released jar holds (the sources jar has more: SqlTool).
    jar tf "$BUILD/maven/hsqldb-$HSQLDB_VERSION.jar" | sed -n 's|^\(org/[^$]*\)\.class$|src/\1.java|p' | sort -u |
      while read -r f; do [ -f "$BUILD/$f" ] && echo "$f"; done >"$BUILD/sources.txt"
    (cd "$BUILD" && javac -g -nowarn --release 11 -encoding UTF-8 -sourcepath src -d classes-g @sources.txt) \
      >"$BUILD/javac.log" 2>&1 || { tail -5 "$BUILD/javac.log" >&2; return 1; }
    cp "$BUILD/maven/hsqldb-$HSQLDB_VERSION.jar" "$HSQLDB_JAR.tmp"
    (cd "$BUILD/classes-g" && jar uf "$HSQLDB_JAR.tmp" .)
    mv "$HSQLDB_JAR.tmp" "$HSQLDB_JAR"
  fi
  if [ "$APP_DIR/Workload.java" -nt "$BUILD/classes/Workload.class" ] || [ "$APP_DIR/Check.java" -nt "$BUILD/classes/Check.class" ] \
     || [ "$HSQLDB_JAR" -nt "$BUILD/classes/Check.class" ]; then
    mkdir -p "$BUILD/classes"
    javac -g -d "$BUILD/classes" -cp "$HSQLDB_JAR" "$APP_DIR/Workload.java" "$APP_DIR/Check.java"
  fi
}
study_version() { echo "$HSQLDB_VERSION (Maven Central), $(java -version 2>&1 | head -1)"; }
study_init() { :; }
WORKLOAD=(java -cp "$BUILD/classes:$HSQLDB_JAR" Workload)
# db/test.lck is HSQLDB's lock file: a heartbeat a timer thread rewrites every 10 s while the
# database is open, removed at SHUTDOWN, and never read by recovery (org/hsqldb/persist/
# LockFile.java). A crash state carrying it would only measure how old the heartbeat looks.
RECORD_OPTS=(--ignore 'db/test.lck')
CHECKER="java ${JAVA_FAST[*]} -cp $BUILD/classes:$HSQLDB_JAR Check"
# HSQLDB's file helpers serve every caller: FileUtil (delete, renameWithOverwrite, FileSync),
# the RAFile* random-access wrappers of .data and .backup, Log.deleteFile/renameNewFile and
# ScriptWriterBase's flush-and-sync. Skipping them names the code that asked: the commit
# (ScriptWriterText.writeCommitStatement), the checkpoint steps in Log, the .properties save,
# the .data cache (DataFileCache).
CHECK_OPTS=(--frame-skip '^java\|org\.hsqldb\.(?:lib\.FileUtil|persist\.RAFile\w*|persist\.Log\.(?:deleteFile|renameNewFile)|scriptio\.ScriptWriterBase\.(?:forceSync|sync))[.$|]')
