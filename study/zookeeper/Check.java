// ZooKeeper study checker (two layers, study/README.md): Check CRASH_DIR STDOUT_FILE, or
// Check --server (intact's --checker-server protocol, docs/checkers.md: one JSON request
// per line on stdin, one JSON reply per line on stdout; the rule lines of a failing state
// are the reply's message; Check --server CRASH_DIR STDOUT_FILE judges one state). Reopens the crash state's data/ the way a restarted standalone
// server does (ZooKeeperServer.startdata: FileTxnSnapLog + ZKDatabase.loadDataBase, which
// reads the newest valid snapshot and replays the transaction logs after it, then the
// startup snapshot) and checks the tree against what Workload.java printed.
//
// Documented (ZooKeeper 3.9 Programmer's Guide, "ZooKeeper Guarantees": sequential
// consistency, atomicity, reliability "once an update has been applied, it will persist";
// Administrator's Guide, "Advanced Configuration", forceSync: the transaction log is synced
// before an update is processed, default yes, the workload's setting). After "done 1" (an
// update acknowledged) these rules are documented ones; before it nothing was acknowledged
// but the session, so they are lay.
//   opens      the restarted server loads the database and takes its startup snapshot
//              (cannot-open).
//   durable    "done I" printed => operation I's effect is in the tree (data-loss).
//   prefix     the operations whose effect is in the tree are 1..m for some m (the quota's
//              three creates may be cut short only as the last) (silent-error).
//   values     every znode under /app, and /app/b's ACL, holds a value the workload gave
//              it; no other znode (silent-error).
//   quota      (lay) /app's quota limits say count=10 and its stats count the znodes under
//              /app (silent-error).
//   write      (lay) a new transaction appended and committed after the restart is read
//              back, with the tree, by a second restart (failed-reads-writes).
// Output on failure: "rule: LAYER: NAME: CLASS: detail" per failing rule, then "layer:" and
// "consequence:" of the first. Exit 0 consistent, 1 inconsistent, 2 usage.
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.zookeeper.StatsTrack;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.Stat;
import org.apache.zookeeper.server.DataNode;
import org.apache.zookeeper.server.DataTree;
import org.apache.zookeeper.server.Request;
import org.apache.zookeeper.server.ZKDatabase;
import org.apache.zookeeper.server.ZooKeeperServer;
import org.apache.zookeeper.server.persistence.FileTxnSnapLog;
import org.apache.zookeeper.txn.CreateTxn;
import org.apache.zookeeper.txn.TxnHeader;
import org.apache.zookeeper.util.ServiceUtils;

public class Check {
    static final String[][] OPS = Workload.OPS;
    static final List<ACL> RESTRICTED = Workload.RESTRICTED;
    static final String LIMITS = "/zookeeper/quota/app/zookeeper_limits";
    static final String STATS = "/zookeeper/quota/app/zookeeper_stats";

    // One state's verdict: the rule lines, in order.
    static final class Verdict {
        final List<String> lines = new ArrayList<>();
        String layer = "lay";
        boolean failed;

        void fail(String name, String cls, String detail) {
            lines.add("rule: " + layer + ": " + name + ": " + cls + ": " + detail);
            if (!failed) {
                lines.add("layer: " + layer);
                lines.add("consequence: " + cls + ": " + detail);
            }
            failed = true;
        }
    }

    static class ExitRequested extends RuntimeException {
        ExitRequested(int code) {
            super("ZooKeeper requested System.exit(" + code + ")");
        }
    }

    public static void main(String[] args) throws IOException {
        // ZooKeeper calls ServiceUtils.requestSystemExit on errors it cannot recover from (a
        // failed snapshot): a restarted server would exit; here it is a failure of the state.
        ServiceUtils.setSystemExitProcedure(code -> {
            throw new ExitRequested(code);
        });
        if (args.length == 1 && args[0].equals("--server")) {
            serve();
            return;
        }
        // The reproduce line of a saved example (failing/v<N>/README) appends CRASH_DIR and
        // STDOUT_FILE to the server command: judge that one state.
        if (args.length == 3 && args[0].equals("--server"))
            args = new String[] {args[1], args[2]};
        if (args.length != 2) {
            System.err.println("usage: Check CRASH_DIR STDOUT_FILE | Check --server");
            System.exit(2);
        }
        Verdict v = check(new File(args[0]), Path.of(args[1]));
        for (String l : v.lines)
            System.err.println(l);
        System.exit(v.failed ? 1 : 0);
    }

    // --checker-server: protocol 1 (docs/checkers.md). Every state gets a new ZooKeeperServer,
    // FileTxnSnapLog and ZKDatabase on its own fresh crash directory, closed after the check;
    // nothing of one state is reachable from the next.
    static void serve() throws IOException {
        PrintStream out = System.out;
        System.setOut(System.err);   // the protocol owns stdout
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank())
                continue;
            String reply;
            String protocol = field(line, "protocol"), crash = field(line, "crash_dir"), stdout = field(line, "stdout_file");
            if (!"1".equals(protocol) || crash == null || stdout == null) {
                reply = "{\"verdict\":\"fail\",\"message\":" + quote("unknown request: " + line) + "}";
            } else {
                Verdict v;
                try {
                    v = check(new File(crash), Path.of(stdout));
                } catch (Throwable t) {
                    v = new Verdict();
                    v.fail("check", "other", "the checker failed: " + t);
                }
                reply = v.failed ? "{\"verdict\":\"fail\",\"message\":" + quote(String.join("\n", v.lines)) + "}"
                                 : "{\"verdict\":\"pass\"}";
            }
            out.println(reply);
            out.flush();
        }
    }

    // A JSON field's value (a string or a number) from intact's one-line request.
    static String field(String json, String name) {
        Matcher m = Pattern.compile("\"" + name + "\"\\s*:\\s*(?:\"((?:[^\"\\\\]|\\\\.)*)\"|(-?\\d+))").matcher(json);
        if (!m.find())
            return null;
        if (m.group(2) != null)
            return m.group(2);
        String s = m.group(1);
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c != '\\') {
                b.append(c);
                continue;
            }
            char e = s.charAt(++i);
            switch (e) {
                case 'n': b.append('\n'); break;
                case 't': b.append('\t'); break;
                case 'r': b.append('\r'); break;
                case 'b': b.append('\b'); break;
                case 'f': b.append('\f'); break;
                case 'u': b.append((char) Integer.parseInt(s.substring(i + 1, i + 5), 16)); i += 4; break;
                default: b.append(e);
            }
        }
        return b.toString();
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\')
                b.append('\\').append(c);
            else if (c == '\n')
                b.append("\\n");
            else if (c < 0x20)
                b.append(String.format("\\u%04x", (int) c));
            else
                b.append(c);
        }
        return b.append('"').toString();
    }

    static String oneLine(Throwable e) {
        String m = e.toString();
        for (Throwable t = e.getCause(); t != null; t = t.getCause())
            if (t.getMessage() != null && !m.contains(t.getMessage()))
                m += " (" + t + ")";
        return m.replace('\n', ' ');
    }

    static Verdict check(File crash, Path stdoutFile) throws IOException {
        Verdict v = new Verdict();
        int printed = 0;
        for (String l : Files.readAllLines(stdoutFile))
            if (l.startsWith("done "))
                printed = Math.max(printed, Integer.parseInt(l.substring(5).trim()));
        if (printed >= 1)
            v.layer = "documented";
        File data = new File(crash, "data");
        ZooKeeperServer zks = null;
        DataTree tree;
        long zxid;
        try {
            zks = new ZooKeeperServer(data, data, 2000);
            zks.startdata();
            tree = zks.getZKDatabase().getDataTree();
            zxid = zks.getZKDatabase().getDataTreeLastProcessedZxid();
        } catch (Throwable e) {
            // Paths inside the crash directory read relative to it (data/version-2/log.1), so a
            // message does not change with the checker's scratch directory.
            v.fail("opens", "cannot-open", "the restarted server cannot load data/: "
                   + oneLine(e).replace(crash.getPath() + File.separator, ""));
            close(zks);
            return v;
        }
        try {
            checkTree(v, tree, printed);
            String saved = v.layer;
            v.layer = "lay";
            checkQuota(v, tree);
            checkWrite(v, zks, data, zxid, tree);
            v.layer = saved;
        } finally {
            close(zks);
        }
        return v;
    }

    static void close(ZooKeeperServer zks) {
        if (zks == null)
            return;
        try {
            zks.getZKDatabase().close();
        } catch (Throwable e) {
            // the state is judged already
        }
        try {
            zks.getTxnLogFactory().close();
        } catch (Throwable e) {
            // idem
        }
    }

    static String data(DataTree t, String path) {
        DataNode n = t.getNode(path);
        if (n == null)
            return null;
        byte[] d = n.getData();
        return d == null ? "" : new String(d, StandardCharsets.UTF_8);
    }

    static List<ACL> acl(DataTree t, String path) {
        try {
            return t.getACL(path, new Stat());
        } catch (Exception e) {
            return null;
        }
    }

    // 1: operation I's effect is in the tree; 0: it is not; -1: part of it (the quota's creates).
    static int applied(DataTree t, int i) {
        String kind = OPS[i][0], path = OPS[i][1], want = OPS[i][2];
        switch (kind) {
            case "create":
                return t.getNode(path) != null ? 1 : 0;
            case "set":
                return want.equals(data(t, path)) ? 1 : 0;
            case "acl": {
                List<ACL> a = acl(t, path);
                return a != null && a.equals(RESTRICTED) ? 1 : 0;
            }
            case "quota": {
                int n = (t.getNode("/zookeeper/quota/app") != null ? 1 : 0) + (t.getNode(LIMITS) != null ? 1 : 0)
                        + (t.getNode(STATS) != null ? 1 : 0);
                return n == 3 ? 1 : n == 0 ? 0 : -1;
            }
            default:
                throw new IllegalStateException(kind);
        }
    }

    static void checkTree(Verdict v, DataTree t, int printed) {
        int[] eff = new int[OPS.length];
        for (int i = 0; i < OPS.length; i++)
            eff[i] = applied(t, i);
        // durable: every acknowledged operation's effect.
        for (int i = 0; i < printed && i < OPS.length; i++)
            if (eff[i] != 1) {
                v.fail("durable", "data-loss", "\"done " + (i + 1) + "\" was printed but " + describe(i)
                       + (eff[i] == 0 ? " is not in the tree" : " is only partly in the tree"));
                break;
            }
        // prefix: the effects present are those of operations 1..m.
        int m = 0;
        while (m < OPS.length && eff[m] == 1)
            m++;
        int partial = m < OPS.length && eff[m] == -1 ? m : -1;
        for (int j = m + (partial >= 0 ? 1 : 0); j < OPS.length; j++)
            if (eff[j] != 0) {
                v.fail("prefix", "silent-error", describe(j) + " is in the tree without " + describe(m)
                       + " (operation " + (m + 1) + ")");
                break;
            }
        // values: the znodes under /app and their data, /app/b's ACL.
        Map<String, List<String>> allowed = new TreeMap<>();
        for (String[] op : OPS)
            if (op[0].equals("create") || op[0].equals("set"))
                allowed.computeIfAbsent(op[1], k -> new ArrayList<>()).add(op[2]);
        List<String> found = new ArrayList<>();
        walk(t, "/app", found);
        for (String p : found) {
            List<String> ok = allowed.get(p);
            String d = data(t, p);
            if (ok == null)
                v.fail("values", "silent-error", "unexpected znode " + p);
            else if (!ok.contains(d))
                v.fail("values", "silent-error", p + " holds \"" + d + "\", none of " + ok);
        }
        List<ACL> a = acl(t, "/app/b");
        if (a != null && !a.equals(RESTRICTED) && !a.equals(ZooDefs.Ids.OPEN_ACL_UNSAFE))
            v.fail("values", "silent-error", "/app/b has the ACL " + a);
    }

    static void walk(DataTree t, String path, List<String> out) {
        DataNode n = t.getNode(path);
        if (n == null)
            return;
        out.add(path);
        String[] kids;
        synchronized (n) {
            kids = n.getChildren().toArray(new String[0]);
        }
        Arrays.sort(kids);
        for (String k : kids)
            walk(t, path + "/" + k, out);
    }

    static String describe(int i) {
        String[] op = OPS[i];
        switch (op[0]) {
            case "create": return "the create of " + op[1];
            case "set": return op[1] + " = \"" + op[2] + "\"";
            case "acl": return "the ACL of " + op[1];
            default: return "the quota of " + op[1];
        }
    }

    // quota (lay): the limits the workload set, and stats that count /app's subtree (the
    // server recomputes them at load, DataTree.setupQuota).
    static void checkQuota(Verdict v, DataTree t) {
        String lim = data(t, LIMITS), st = data(t, STATS);
        if (lim == null)
            return;
        try {
            if (new StatsTrack(lim).getCount() != 10)
                v.fail("quota", "silent-error", "the quota limits of /app are \"" + lim + "\"");
        } catch (RuntimeException e) {
            v.fail("quota", "silent-error", "the quota limits of /app are \"" + lim + "\": " + e);
        }
        if (st == null)
            return;
        List<String> found = new ArrayList<>();
        walk(t, "/app", found);
        try {
            long count = new StatsTrack(st).getCount();
            if (count != found.size())
                v.fail("quota", "silent-error", "the quota stats of /app count " + count + " znodes, /app has " + found.size());
        } catch (RuntimeException e) {
            v.fail("quota", "silent-error", "the quota stats of /app are \"" + st + "\": " + e);
        }
    }

    // write (lay): the restarted server appends a transaction (a new log file, as after any
    // restart), commits it; a second restart reads the tree and the new znode back.
    static void checkWrite(Verdict v, ZooKeeperServer zks, File data, long zxid, DataTree before) {
        List<String> was = new ArrayList<>();
        walk(before, "/app", was);
        try {
            TxnHeader hdr = new TxnHeader(1, 1, zxid + 1, System.currentTimeMillis(), ZooDefs.OpCode.create);
            CreateTxn txn = new CreateTxn("/probe", new byte[] {1}, ZooDefs.Ids.OPEN_ACL_UNSAFE, false, -1);
            zks.getZKDatabase().append(new Request(1, 1, ZooDefs.OpCode.create, hdr, txn, zxid + 1));
            zks.getZKDatabase().commit();
            zks.getZKDatabase().close();
        } catch (Throwable e) {
            v.fail("write", "failed-reads-writes", "a new transaction cannot be logged: " + oneLine(e));
            return;
        }
        ZKDatabase db = null;
        try {
            db = new ZKDatabase(new FileTxnSnapLog(data, data));
            db.loadDataBase();
            DataTree t = db.getDataTree();
            List<String> now = new ArrayList<>();
            walk(t, "/app", now);
            if (t.getNode("/probe") == null)
                v.fail("write", "failed-reads-writes", "the transaction logged after the restart is lost at the next restart");
            else if (!now.equals(was))
                v.fail("write", "failed-reads-writes", "the next restart reads /app as " + now + ", not " + was);
        } catch (Throwable e) {
            v.fail("write", "failed-reads-writes", "the second restart fails: " + oneLine(e));
        } finally {
            if (db != null)
                try {
                    db.close();
                } catch (Throwable e) {
                    // judged
                }
        }
    }
}
