// HDFS study: the NameNode configuration the workload, the checker and the format step
// share (study/hdfs/README.md). `java Conf DIR` formats DIR's name directories (study_init,
// untraced: `hdfs namenode -format` is a one-time administrative step, not the protocol
// under study).
//
// Thesis 004 §4.2: HDFS "configured with replicated metadata and restore enabled": two name
// directories (dfs.namenode.name.dir; the edit log goes to both, dfs.namenode.edits.dir
// defaults to it) and dfs.namenode.name.dir.restore. Everything else binds to 127.0.0.1 on
// an ephemeral port, and nothing is written outside DIR.
import java.io.File;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.server.namenode.NameNode;

public class Conf {
    static Configuration make(String dir) {
        Configuration c = new HdfsConfiguration();
        String n1 = new File(dir, "name1").toURI().toString();
        String n2 = new File(dir, "name2").toURI().toString();
        c.set("dfs.namenode.name.dir", n1 + "," + n2);
        c.setBoolean("dfs.namenode.name.dir.restore", true);
        c.set("hadoop.tmp.dir", new File(dir, "tmp").getAbsolutePath());
        c.set("fs.defaultFS", "hdfs://127.0.0.1:0");
        c.set("dfs.namenode.rpc-address", "127.0.0.1:0");
        c.set("dfs.namenode.http-address", "127.0.0.1:0");
        c.set("dfs.namenode.https-address", "127.0.0.1:0");
        c.set("dfs.namenode.servicerpc-address", "");
        c.setInt("dfs.replication", 1);
        // No DataNode: an empty namespace has no block, so leave safe mode at once.
        c.setInt("dfs.namenode.safemode.extension", 0);
        c.setInt("dfs.namenode.safemode.min.datanodes", 0);
        c.setBoolean("dfs.permissions.enabled", false);
        // No periodic checkpoints or trash: the workload saves the namespace itself.
        c.setLong("dfs.namenode.checkpoint.period", 1L << 30);
        c.setLong("dfs.namenode.checkpoint.txns", 1L << 30);
        return c;
    }

    public static void main(String[] args) throws Exception {
        NameNode.format(make(args[0]));
    }
}
