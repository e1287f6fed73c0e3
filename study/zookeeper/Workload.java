// ZooKeeper study workload (study/zookeeper/README.md; thesis 004 §4.2): a standalone
// ZooKeeperServer, started in this JVM on the working directory's data/ (snapshots and
// transaction logs both in data/version-2), served on a free localhost port, and a real
// ZooKeeper client that creates a small hierarchy of znodes, sets data, sets a quota and an
// ACL. It prints one line after each step that returned:
//   "started"   the server is up (its startup snapshot taken) and the client's session open
//   "done I"    operation I (1..OPS.length) was acknowledged to the client
//   "closed"    the session was closed (its closeSession transaction acknowledged)
//   "shutdown"  the server shut down
// Operation I is OPS[I-1]; Check.java repeats the table. The quota (operation 6) is what
// the CLI's setquota does (SetQuotaCommand.createQuota): three creates under
// /zookeeper/quota, acknowledged one by one; "done 6" is printed after the last.
//
// One snapshot midway: SyncRequestProcessor rolls the log and snapshots once the log holds
// more than snapCount / 2 + r transactions, r drawn at random in [0, snapCount / 2) when
// its thread starts and after each snapshot. The server starts with snapCount 2 (r is then
// 0); once its SyncThread waits for requests (r drawn), snapCount becomes 2 * SNAP_AT, so
// the roll and the snapshot come after the log's SNAP_AT + 1-th transaction, every run.
import java.io.File;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.cli.SetQuotaCommand;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.Id;
import org.apache.zookeeper.StatsTrack;
import org.apache.zookeeper.server.ServerCnxnFactory;
import org.apache.zookeeper.server.SyncRequestProcessor;
import org.apache.zookeeper.server.ZooKeeperServer;

public class Workload {
    // {kind, path, data}: create, set (setData), quota (count limit in data), acl (READ|CREATE
    // for world:anyone instead of OPEN_ACL_UNSAFE).
    static final String[][] OPS = {
        {"create", "/app", "app-0"},
        {"create", "/app/a", "a-0"},
        {"create", "/app/a/x", "x-0"},
        {"create", "/app/b", "b-0"},
        {"set", "/app/a/x", "x-1"},
        {"quota", "/app", "10"},
        {"create", "/app/b/y", "y-0"},
        {"acl", "/app/b", ""},
        {"create", "/app/c", "c-0"},
        {"set", "/app", "app-1"},
    };
    static final int SNAP_AT = 8;
    static final List<ACL> RESTRICTED = java.util.Arrays.asList(
        new ACL(ZooDefs.Perms.READ | ZooDefs.Perms.CREATE, ZooDefs.Ids.ANYONE_ID_UNSAFE));

    static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) {
        // ZooKeeperServer installs a default uncaught-exception handler that logs through
        // slf4j (no provider here: nothing): a failure must say so and end the JVM itself.
        try {
            run();
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    static void run() throws Exception {
        System.setProperty("zookeeper.snapCount", "2");
        File data = new File("data");
        ZooKeeperServer zks = new ZooKeeperServer(data, data, 2000);
        ServerCnxnFactory factory = ServerCnxnFactory.createFactory(new InetSocketAddress("127.0.0.1", 0), 10);
        factory.startup(zks);
        waitSyncThreadIdle();
        SyncRequestProcessor.setSnapCount(2 * SNAP_AT);
        CountDownLatch connected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper("127.0.0.1:" + factory.getLocalPort(), 30000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected)
                connected.countDown();
        });
        if (!connected.await(30, TimeUnit.SECONDS))
            throw new IllegalStateException("the client did not connect");
        say("started");
        for (int i = 0; i < OPS.length; i++) {
            String kind = OPS[i][0], path = OPS[i][1];
            byte[] bytes = OPS[i][2].getBytes(StandardCharsets.UTF_8);
            switch (kind) {
                case "create":
                    zk.create(path, bytes, ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
                    break;
                case "set":
                    zk.setData(path, bytes, -1);
                    break;
                case "quota": {
                    StatsTrack quota = new StatsTrack();
                    quota.setCount(Integer.parseInt(OPS[i][2]));
                    SetQuotaCommand.createQuota(zk, path, quota);
                    break;
                }
                case "acl":
                    zk.setACL(path, RESTRICTED, -1);
                    break;
                default:
                    throw new IllegalStateException(kind);
            }
            say("done " + (i + 1));
        }
        zk.close();
        say("closed");
        factory.shutdown();
        zks.shutdown();
        say("shutdown");
    }

    // The server's SyncThread has started its loop (and drawn r) once it waits for a request.
    static void waitSyncThreadIdle() throws InterruptedException {
        for (int tries = 0; tries < 1000; tries++) {
            for (Thread t : Thread.getAllStackTraces().keySet())
                if (t.getName().startsWith("SyncThread")
                    && (t.getState() == Thread.State.WAITING || t.getState() == Thread.State.TIMED_WAITING))
                    return;
            Thread.sleep(10);
        }
        throw new IllegalStateException("no waiting SyncThread");
    }
}
