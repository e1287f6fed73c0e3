# ZooKeeper study (thesis 004 §4.2; sourced by study/run.sh, see study/README.md).
CONFIGS=(default)
QUICK_CONFIGS=()
APP_TITLE="ZooKeeper 3.9.5 (Maven Central; its jar has line tables): standalone server, forceSync=yes (default), 10 client operations (creates, setData, a quota, an ACL), one log roll and snapshot midway"

ZK_VERSION=3.9.5
ZK_JAR=$BUILD/lib/zookeeper-$ZK_VERSION.jar

# ZooKeeper and its runtime dependencies come from Maven Central through a tiny pom
# (mvn dependency:copy-dependencies, runtime scope: zookeeper-jute, netty, slf4j-api, ...),
# with metrics-core, snappy-java and commons-cli, which ZooKeeper's pom marks provided but
# the server (ServerMetrics' summaries, SnapStream) and the CLI's quota code load; the
# binary release ships them in lib/. Unlike HSQLDB's, the released jar is compiled with
# line and local-variable tables (javap -l), so it is used as it is: every frame already
# names a line of the 3.9.5 sources, which study_build unpacks into $BUILD/src for the
# verdicts to cite (org/apache/zookeeper/...).
study_build() {
  command -v javac >/dev/null && command -v mvn >/dev/null && command -v jar >/dev/null \
    || { apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless maven >/dev/null; }
  if ! [ -f "$ZK_JAR" ] || ! [ -d "$BUILD/src/org" ]; then
    rm -rf "$BUILD/lib" "$BUILD/src" && mkdir -p "$BUILD/lib" "$BUILD/src"
    local dep deps=""
    for dep in org.apache.zookeeper:zookeeper:$ZK_VERSION io.dropwizard.metrics:metrics-core:4.1.12.1 \
               org.xerial.snappy:snappy-java:1.1.10.5 commons-cli:commons-cli:1.5.0; do
      IFS=: read -r g a v <<<"$dep"
      deps+="<dependency><groupId>$g</groupId><artifactId>$a</artifactId><version>$v</version></dependency>"
    done
    cat >"$BUILD/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>intact.study</groupId><artifactId>zookeeper-deps</artifactId><version>1</version><packaging>pom</packaging>
<dependencies>$deps</dependencies>
</project>
POM
    (cd "$BUILD" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=lib \
       && mvn -q -B dependency:copy -Dartifact=org.apache.zookeeper:zookeeper:$ZK_VERSION:jar:sources -DoutputDirectory=.) \
      >"$BUILD/maven.log" 2>&1 || { echo "zookeeper: mvn failed:" >&2; tail -5 "$BUILD/maven.log" >&2; return 1; }
    (cd "$BUILD/src" && jar xf "$BUILD/zookeeper-$ZK_VERSION-sources.jar")
  fi
  if [ "$APP_DIR/Workload.java" -nt "$BUILD/classes/Workload.class" ] || [ "$APP_DIR/Check.java" -nt "$BUILD/classes/Check.class" ] \
     || [ "$ZK_JAR" -nt "$BUILD/classes/Check.class" ]; then
    mkdir -p "$BUILD/classes"
    javac -g -d "$BUILD/classes" -cp "$BUILD/lib/*" "$APP_DIR/Workload.java" "$APP_DIR/Check.java"
  fi
}
study_version() { echo "$ZK_VERSION (Maven Central), $(java -version 2>&1 | head -1)"; }
study_init() { :; }
# slf4j-api finds no logging provider and logs nothing; its own notice is silenced.
# zookeeper.preAllocSize (Administrator's Guide, "Advanced Configuration"): the log file is
# padded by 64 KB at a time instead of 64 MB, the same protocol on a small file.
JAVA_OPTS=(-Dslf4j.internal.verbosity=ERROR -Dzookeeper.preAllocSize=64 -Dzookeeper.admin.enableServer=false -XX:-UsePerfData)
WORKLOAD=(java "${JAVA_OPTS[@]}" -cp "$BUILD/classes:$BUILD/lib/*" Workload)
RECORD_OPTS=()
# One warm JVM per worker (docs/checkers.md): each state gets its own ZooKeeperServer,
# FileTxnSnapLog and ZKDatabase on its fresh crash directory (Check.java, serve()).
CHECKER_PROTOCOL=server
CHECKER="java ${JAVA_OPTS[*]} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -cp $BUILD/classes:$BUILD/lib/* Check --server"
# ZooKeeper's generic output helpers serve every caller: AtomicFileOutputStream (a synced
# snapshot, the epoch files), SnapStream (a snapshot's checked stream and its seal),
# FilePadding (the log's preallocation), jute's archives. Skipping them names the code that
# asked: FileTxnLog (append, commit, roll), FileSnap.serialize, FileTxnSnapLog.
CHECK_OPTS=(--frame-skip '^java\|(?:org\.apache\.zookeeper\.(?:common\.AtomicFileOutputStream|server\.persistence\.(?:SnapStream|FilePadding))|org\.apache\.jute\.\w+)[.$|]')
