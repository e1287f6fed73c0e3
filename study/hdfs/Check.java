// HDFS study checker (two layers, study/README.md): Check CRASH_DIR STDOUT_FILE.
// Starts a NameNode (Hadoop's own NameNode.createNameNode, the configuration of Conf.java)
// on the crash state's name directories name1/ and name2/, which is HDFS's recovery: it
// loads the newest fsimage, replays the edit log segments after it, finalizes the segment
// that was in progress and opens a new one. Then it lists the namespace through a
// DistributedFileSystem client and compares it with what the workload printed
// (Workload.java).
//
// Documented (Apache Hadoop 3.5 "HDFS Architecture": "The Persistence of File System
// Metadata" and "Robustness > Metadata Disk Failure"; the FileSystem specification,
// filesystem.md, "rename" and "Atomicity"): every change to the namespace is recorded in the
// EditLog, which with the FsImage is read and applied when the NameNode starts; with
// several name directories every copy is updated synchronously; a rename is atomic. The
// name directories were formatted before the workload (study_init), so a namespace always
// exists and every rule but the last two is documented from the first state on.
//   starts     the NameNode starts on the crash state (cannot-open).
//   prefix     the namespace is the one after the first m operations of the workload, for
//              some m (silent-error: an operation without an earlier one, a half rename).
//   durable    m is at least the number of operations printed (data-loss).
//   replicas   (lay) both name directories are in service after the start (other: the
//              NameNode dropped a replica of its metadata).
//   write      (lay) a new directory can be made and the NameNode stops cleanly
//              (failed-reads-writes).
// Output on failure: "rule: LAYER: NAME: CLASS: detail" per failing rule, then "layer:" and
// "consequence:" of the first documented one, else of the first lay one. Exit 0
// consistent, 1 inconsistent, 2 usage.
import java.io.File;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.server.namenode.NameNode;

public class Check {
    // The workload's operations in order (Workload.java), and the line each prints.
    static final String[] OPS = {"mkdir /a", "file /a/f1", "mkdir /b", "renamed /a/f1 /b/f1"};
    final List<String> rules = new ArrayList<>();
    String first = null, firstLay = null;

    void fail(boolean documented, String name, String cls, String detail) {
        String layer = documented ? "documented" : "lay";
        rules.add("rule: " + layer + ": " + name + ": " + cls + ": " + detail);
        String c = "layer: " + layer + "\nconsequence: " + cls + ": " + detail;
        if (documented && first == null)
            first = c;
        if (!documented && firstLay == null)
            firstLay = c;
    }

    // The lines a failing state prints (stderr, or the server's message); empty: consistent.
    String message() {
        if (rules.isEmpty())
            return "";
        return String.join("\n", rules) + "\n" + (first != null ? first : firstLay);
    }

    // The namespace after the first m operations: "d /x" for a directory, "f /x" for a file.
    static TreeSet<String> after(int m) {
        TreeSet<String> ns = new TreeSet<>();
        for (int i = 0; i < m; i++) {
            String[] w = OPS[i].split(" ");
            if (w[0].equals("mkdir"))
                ns.add("d " + w[1]);
            else if (w[0].equals("file"))
                ns.add("f " + w[1]);
            else {
                TreeSet<String> moved = new TreeSet<>();
                for (String e : ns) {
                    String p = e.substring(2);
                    if (p.equals(w[1]) || p.startsWith(w[1] + "/"))
                        moved.add(e.substring(0, 2) + w[2] + p.substring(w[1].length()));
                    else
                        moved.add(e);
                }
                ns = moved;
            }
        }
        return ns;
    }

    static void list(FileSystem fs, org.apache.hadoop.fs.Path dir, TreeSet<String> out) throws Exception {
        for (FileStatus s : fs.listStatus(dir)) {
            String p = s.getPath().toUri().getPath();
            out.add((s.isDirectory() ? "d " : "f ") + p);
            if (s.isDirectory())
                list(fs, s.getPath(), out);
        }
    }

    static String oneLine(Throwable e) {
        String m = e.toString();
        for (Throwable t = e.getCause(); t != null && t != e; t = t.getCause())
            if (t.getMessage() != null && !m.contains(t.getMessage()))
                m += " (" + t + ")";
        m = m.replace('\n', ' ');
        return m.length() > 400 ? m.substring(0, 400) + "..." : m;
    }

    public static void main(String[] args) throws Exception {
        // FSEditLog and JournalSet call ExitUtil.terminate when too few journals survive;
        // disabled, it throws ExitException, which the rules report, instead of exiting.
        org.apache.hadoop.util.ExitUtil.disableSystemExit();
        if ("1".equals(System.getenv("INTACT_CHECKER_SERVER"))) {
            serve();
            return;
        }
        if (args.length != 2) {
            System.err.println("usage: Check CRASH_DIR STDOUT_FILE");
            System.exit(2);
        }
        String m = new Check().judge(args[0], args[1]);
        if (!m.isEmpty())
            System.err.println(m);
        System.err.flush();
        Runtime.getRuntime().halt(m.isEmpty() ? 0 : 1);
    }

    // The warm protocol (docs/checkers.md, --checker-server): one JSON request a line on
    // stdin, one JSON reply a line on stdout. Each state gets a NameNode of its own, started
    // on that state's fresh directory and stopped before the reply, as Hadoop's own
    // MiniDFSCluster restarts NameNodes in one JVM (metrics in mini-cluster mode, so a
    // second NameNode may register the same metrics sources); a per-process run gives the
    // same verdicts (study/hdfs/README.md).
    static void serve() throws Exception {
        org.apache.hadoop.metrics2.lib.DefaultMetricsSystem.setMiniClusterMode(true);
        java.io.PrintStream proto = new java.io.PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err);
        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in, "UTF-8"));
        for (String line; (line = in.readLine()) != null;) {
            if (line.isBlank())
                continue;
            if (!line.contains("\"protocol\":1")) {
                proto.println("{\"verdict\":\"fail\",\"message\":\"unknown protocol\"}");
                continue;
            }
            String m = new Check().judge(field(line, "crash_dir"), field(line, "stdout_file"));
            proto.println(m.isEmpty() ? "{\"verdict\":\"pass\"}" : "{\"verdict\":\"fail\",\"message\":\"" + json(m) + "\"}");
        }
    }

    static String field(String json, String name) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("\"" + name + "\":\"((?:[^\"\\\\]|\\\\.)*)\"").matcher(json);
        if (!m.find())
            throw new IllegalArgumentException("no " + name + " in " + json);
        return m.group(1).replace("\\\"", "\"").replace("\\\\", "\\");
    }

    static String json(String s) {
        StringBuilder b = new StringBuilder();
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
        return b.toString();
    }

    String judge(String crashDir, String stdoutFile) throws Exception {
        String dir = new File(crashDir).getAbsolutePath();
        List<String> out = Files.readAllLines(Path.of(stdoutFile));
        int printed = 0;
        for (int i = 0; i < OPS.length; i++)
            if (out.contains(OPS[i]))
                printed = i + 1;
        Configuration conf = Conf.make(dir);
        NameNode nn;
        try {
            nn = NameNode.createNameNode(new String[0], conf);
        } catch (Throwable e) {
            fail(true, "starts", "cannot-open", "the NameNode does not start: " + oneLine(e));
            return message();
        }
        URI uri = URI.create("hdfs://127.0.0.1:" + nn.getNameNodeAddress().getPort());
        try (DistributedFileSystem fs = (DistributedFileSystem) FileSystem.newInstance(uri, conf)) {
            TreeSet<String> ns = new TreeSet<>();
            try {
                list(fs, new org.apache.hadoop.fs.Path("/"), ns);
                int m = -1;
                for (int k = OPS.length; k >= 0 && m < 0; k--)
                    if (after(k).equals(ns))
                        m = k;
                if (m < 0)
                    fail(true, "prefix", "silent-error", "the namespace " + ns + " is not the one after any prefix of the workload's operations");
                else if (m < printed)
                    fail(true, "durable", "data-loss", "\"" + OPS[printed - 1] + "\" was acknowledged but the namespace is the one after \""
                            + (m == 0 ? "started" : OPS[m - 1]) + "\": " + ns);
            } catch (Throwable e) {
                fail(true, "prefix", "failed-reads-writes", "listing the namespace: " + oneLine(e));
            }
            int dirs = nn.getFSImage().getStorage().getNumStorageDirs();
            if (dirs != 2)
                fail(false, "replicas", "other", dirs + " of the 2 name directories in service: " + nn.getNamesystem().getNameDirStatuses());
            try {
                fs.mkdirs(new org.apache.hadoop.fs.Path("/probe"));
                if (!fs.exists(new org.apache.hadoop.fs.Path("/probe")))
                    fail(false, "write", "failed-reads-writes", "mkdirs /probe returned but /probe does not exist");
            } catch (Throwable e) {
                fail(false, "write", "failed-reads-writes", "mkdirs /probe: " + oneLine(e));
            }
        }
        try {
            nn.stop();
            nn.join();
        } catch (Throwable e) {
            fail(false, "write", "failed-reads-writes", "stopping the NameNode: " + oneLine(e));
        }
        return message();
    }
}
