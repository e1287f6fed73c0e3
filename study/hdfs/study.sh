# HDFS study (thesis 004 §4.2, Figure 4.6; sourced by study/run.sh, see study/README.md).
CONFIGS=(default)
QUICK_CONFIGS=()
# A NameNode per crash state (warm: one checker JVM per worker starts and stops a NameNode
# on each state, about a second each on a shared 2-core machine), over states in the
# thousands: every APM splits the edit log's 1 MiB preallocation into 4 KiB states. The
# alice run did not finish in the time a study run allows an application (README,
# "Results"); run.sh runs it with --slow or --apps hdfs.
SLOW=1
APP_TITLE="HDFS 3.5.0 NameNode (Maven Central, in-process on the local file system): two name directories with restore, mkdir + empty file, mkdir + rename, stop"

HADOOP_VERSION=3.5.0
# The JVM of the workload and the checker: a small heap (the NameNode sizes its block and
# inode maps at a percentage of it), the C1 compiler only and the serial collector. The
# NameNode's Jetty unpacks into java.io.tmpdir and a killed or halted JVM leaves that
# behind: it goes to the build directory, not /tmp.
JAVA_OPTS=(-Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto "-Djava.io.tmpdir=$BUILD/tmp")
HDFS_CP="$BUILD/classes:$BUILD/lib/*"

# Hadoop and its dependencies come from Maven Central (a tiny pom naming hadoop-hdfs,
# hadoop-hdfs-client and hadoop-common, and `mvn dependency:copy-dependencies`). The
# released jars are compiled with line tables already (javap -l shows LineNumberTable), so
# no class is rebuilt: every Hadoop frame names its .java line as released, and the
# sources jars of hadoop-hdfs and hadoop-common, unpacked into $BUILD/src, are what the
# verdicts cite. The jar has no webapps/ (the NameNode's HTTP server wants webapps/hdfs on
# the class path): empty ones are made beside the classes.
study_build() {
  command -v javac >/dev/null && command -v mvn >/dev/null && command -v jar >/dev/null \
    || { apt-get update -qq && apt-get install -y -qq openjdk-17-jdk-headless maven >/dev/null; }
  if ! [ -f "$BUILD/lib/hadoop-hdfs-$HADOOP_VERSION.jar" ] || ! [ -d "$BUILD/src/org/apache/hadoop/hdfs" ]; then
    mkdir -p "$BUILD/pom" "$BUILD/maven" "$BUILD/src"
    local deps="" a
    for a in hadoop-hdfs hadoop-hdfs-client hadoop-common; do
      deps+="<dependency><groupId>org.apache.hadoop</groupId><artifactId>$a</artifactId><version>$HADOOP_VERSION</version></dependency>"
    done
    printf '%s\n' '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>' \
      '<groupId>intact.study</groupId><artifactId>hdfs-deps</artifactId><version>1</version>' \
      "<dependencies>$deps</dependencies></project>" >"$BUILD/pom/pom.xml"
    (cd "$BUILD/pom" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$BUILD/lib") \
      >"$BUILD/maven.log" 2>&1 || { echo "hdfs: mvn copy-dependencies failed:" >&2; tail -5 "$BUILD/maven.log" >&2; return 1; }
    for a in hadoop-hdfs hadoop-common; do
      mvn -q -B dependency:copy -Dartifact="org.apache.hadoop:$a:$HADOOP_VERSION:jar:sources" -DoutputDirectory="$BUILD/maven" \
        >>"$BUILD/maven.log" 2>&1 || { echo "hdfs: mvn dependency:copy $a sources failed" >&2; return 1; }
      (cd "$BUILD/src" && jar xf "$BUILD/maven/$a-$HADOOP_VERSION-sources.jar")
    done
  fi
  mkdir -p "$BUILD/classes/webapps/hdfs" "$BUILD/classes/webapps/static" "$BUILD/tmp"
  # Hadoop logs through log4j 1 (reload4j): errors only, on stderr (the checker's stdout
  # belongs to the warm protocol).
  printf '%s\n' 'log4j.rootLogger=ERROR, stderr' 'log4j.appender.stderr=org.apache.log4j.ConsoleAppender' \
    'log4j.appender.stderr.Target=System.err' 'log4j.appender.stderr.layout=org.apache.log4j.PatternLayout' \
    'log4j.appender.stderr.layout.ConversionPattern=%c{1}: %m%n' >"$BUILD/classes/log4j.properties"
  local f
  for f in Conf Workload Check; do
    if [ "$APP_DIR/$f.java" -nt "$BUILD/classes/$f.class" ]; then
      javac -g -nowarn -d "$BUILD/classes" -cp "$HDFS_CP" "$APP_DIR"/Conf.java "$APP_DIR"/Workload.java "$APP_DIR"/Check.java
      break
    fi
  done
}
study_version() { echo "$HADOOP_VERSION (Maven Central), $(java -version 2>&1 | head -1)"; }
# Formatting (`hdfs namenode -format`) is a one-time administrative step before any
# namespace exists, not the update protocol under study: it runs untraced, so every crash
# state starts from a formatted pair of name directories.
study_init() { (cd "$1" && java "${JAVA_OPTS[@]}" -cp "$HDFS_CP" Conf "$1" 2>"$BUILD/format.err"); }
WORKLOAD=(java "${JAVA_OPTS[@]}" -cp "$HDFS_CP" Workload)
# name*/in_use.lock is the storage lock: Storage.StorageDirectory.tryLock writes the JVM's
# name into it under a FileLock and only reads it back for the error message when another
# process holds the lock (org/apache/hadoop/hdfs/server/common/Storage.java:932-972); it is
# deleted on exit. No recovery step reads it.
RECORD_OPTS=(--ignore 'in_use.lock')
CHECKER="java ${JAVA_OPTS[*]} -cp $HDFS_CP Check"
CHECKER_PROTOCOL=server
# Hadoop's byte helpers serve every caller: DataOutputBuffer.writeTo (the edit log's
# buffer flush), IOUtils, NativeIO.renameTo, AtomicFileOutputStream (write to .tmp, fsync,
# rename) and PersistentLongFile (seen_txid). Skipping them names the code that asked: the
# edit log (EditLogFileOutputStream), the segment finalization (FileJournalManager), the
# image save (FSImage, FSImageFormatProtobuf, MD5FileUtils), NNStorage.
# --max-states bounds alice's reordering states per APM (prefix and atomicity states are
# all explored): unbounded, the default APM alone builds ~65,000 states (study/hdfs/README.md).
CHECK_OPTS=(--frame-skip '^java\|org\.apache\.hadoop\.(?:io\.(?:DataOutputBuffer|IOUtils|nativeio\.NativeIO)|hdfs\.util\.(?:AtomicFileOutputStream|PersistentLongFile))[.$|]'
  --max-states 20 --timeout 120)
