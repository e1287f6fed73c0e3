// HDFS study workload (study/hdfs/README.md; thesis 004 §4.2): the NameNode's metadata path,
// in-process on the local file system (the thesis ran HDFS in local mode). study_init has
// formatted the name directories name1/ and name2/ (replicated metadata, restore enabled:
// Conf.java); this program starts a NameNode on them, RPC and HTTP on 127.0.0.1 with
// ephemeral ports, and through a DistributedFileSystem client creates a new directory
// hierarchy with an empty file (no DataNode is needed: an empty file has no block), renames
// the file into a second directory, and stops the NameNode (no saveNamespace: each edit log
// segment starts with a 1 MiB preallocation split into 4 KiB states, and a second segment per
// directory took the run past its time; README). It prints a line after each acknowledged
// operation (the RPC returned):
//   "started"        the NameNode is up (it opened a new edit log segment)
//   "mkdir P"        mkdirs(P) returned
//   "file P"         create(P) + close() of an empty file returned
//   "renamed P Q"    rename(P, Q) returned
//   "stopped"        the NameNode stopped (its edit log segment finalized)
// Check.java reads these lines back.
import java.net.InetSocketAddress;
import java.net.URI;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.server.namenode.NameNode;

public class Workload {
    static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        Configuration conf = Conf.make(System.getProperty("user.dir"));
        NameNode nn = NameNode.createNameNode(new String[0], conf);
        say("started");
        InetSocketAddress a = nn.getNameNodeAddress();
        URI uri = URI.create("hdfs://127.0.0.1:" + a.getPort());
        try (DistributedFileSystem fs = (DistributedFileSystem) FileSystem.newInstance(uri, conf)) {
            fs.mkdirs(new Path("/a"));
            say("mkdir /a");
            fs.create(new Path("/a/f1")).close();
            say("file /a/f1");
            fs.mkdirs(new Path("/b"));
            say("mkdir /b");
            fs.rename(new Path("/a/f1"), new Path("/b/f1"));
            say("renamed /a/f1 /b/f1");
        }
        nn.stop();
        nn.join();
        say("stopped");
    }
}
