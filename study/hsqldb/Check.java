// HSQLDB study checker (two layers, study/README.md): Check CRASH_DIR STDOUT_FILE.
// Reopens the crash state's database db/test with HSQLDB 2.7.4 itself (which replays the
// .log, or restores the .data from the .backup, as its own recovery does after a crash)
// and checks it against what the workload (Workload.java) printed before the crash.
//
// Documented (HyperSQL User Guide 2.7, chapter "System Management", sections "Persistence"
// / "Crash Recovery" and "SET FILES WRITE DELAY"; chapter "Sessions and Transactions"):
// a database that was not shut down is recovered from its files on the next connection;
// transactions are atomic; with WRITE DELAY FALSE (the workload's setting) the log is
// synced at every commit, so a commit that returned is durable. After "setup" (the first
// commit returned) the rules below are documented ones; before it no committed state exists
// and HSQLDB documents nothing about a crash while it creates a database, so they are lay.
//   opens      the database opens (ifexists=true: HSQLDB does not silently create a new
//              one) when its .properties or .script exists (cannot-open).
//   schema     after "setup": both tables exist and hold the K accounts (data-loss).
//   balances   the balances are those left by history rows 1..m (each transfer all or
//              nothing: atomicity), their sum is K * INITIAL (silent-error).
//   prefix     the history rows are 1..m for some m, each with its transfer's values
//              (silent-error: a later transaction without an earlier one).
//   durable    "committed I" printed => m >= I (data-loss).
//   write      (lay) a new transaction commits and SHUTDOWN works (failed-reads-writes).
// Output on failure: "rule: LAYER: NAME: CLASS: detail" per failing rule, then "layer:" and
// "consequence:" of the first. Exit 0 consistent, 1 inconsistent, 2 usage.
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;

public class Check {
    static final int ACCOUNTS = 8, TRANSFERS = 6, INITIAL = 1000, PAD = 300;   // Workload.java
    static boolean failed;
    static String layer = "lay";

    static void fail(String name, String cls, String detail) {
        System.err.println("rule: " + layer + ": " + name + ": " + cls + ": " + detail);
        if (!failed)
            System.err.println("layer: " + layer + "\nconsequence: " + cls + ": " + detail);
        failed = true;
    }

    static String pad(char c) {
        return String.valueOf(c).repeat(PAD);
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 2) {
            System.err.println("usage: Check CRASH_DIR STDOUT_FILE");
            System.exit(2);
        }
        File db = new File(args[0], "db");
        List<String> out = Files.readAllLines(Path.of(args[1]));
        boolean setup = out.contains("setup");
        int printed = 0;
        for (String l : out)
            if (l.startsWith("committed "))
                printed = Math.max(printed, Integer.parseInt(l.substring(10).trim()));
        if (setup)
            layer = "documented";
        boolean exists = new File(db, "test.properties").exists() || new File(db, "test.script").exists();
        if (!exists) {
            if (setup)
                fail("opens", "data-loss", "no test.properties or test.script after \"setup\"");
            System.exit(failed ? 1 : 0);
        }
        String url = "jdbc:hsqldb:file:" + new File(db, "test").getAbsolutePath() + ";ifexists=true";
        Connection c;
        try {
            c = DriverManager.getConnection(url, "SA", "");
        } catch (SQLException e) {
            fail("opens", "cannot-open", "connect: " + oneLine(e));
            System.exit(1);
            return;
        }
        try {
            check(c, setup, printed);
        } catch (SQLException e) {
            fail("read", "failed-reads-writes", oneLine(e));
        }
        // write (lay): a new transaction and a clean shutdown.
        String saved = layer;
        layer = "lay";
        try (Statement s = c.createStatement()) {
            s.execute("CREATE CACHED TABLE IF NOT EXISTS probe (id INT PRIMARY KEY)");
            s.execute("INSERT INTO probe VALUES (1)");
            c.commit();
            s.execute("SHUTDOWN");
        } catch (SQLException e) {
            fail("write", "failed-reads-writes", oneLine(e));
        }
        layer = saved;
        try {
            c.close();
        } catch (SQLException e) {
            // already shut down
        }
        System.exit(failed ? 1 : 0);
    }

    static String oneLine(SQLException e) {
        String m = e.getMessage() == null ? e.toString() : e.getMessage();
        Throwable t = e.getCause();
        if (t != null && t.getMessage() != null && !m.contains(t.getMessage()))
            m += " (" + t.getMessage() + ")";
        return m.replace('\n', ' ');
    }

    static boolean tableExists(Statement s, String name) throws SQLException {
        try (ResultSet r = s.executeQuery("SELECT COUNT(*) FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'PUBLIC' AND TABLE_NAME = '" + name + "'")) {
            r.next();
            return r.getInt(1) == 1;
        }
    }

    static void check(Connection c, boolean setup, int printed) throws SQLException {
        try (Statement s = c.createStatement()) {
            boolean acc = tableExists(s, "ACCOUNTS"), his = tableExists(s, "HISTORY");
            if (!acc || !his) {
                if (setup)
                    fail("schema", "data-loss", "table " + (acc ? "HISTORY" : "ACCOUNTS") + " is missing after \"setup\"");
                else if (his && !acc)
                    fail("schema", "silent-error", "HISTORY exists without ACCOUNTS (created before it)");
                return;
            }
            int[] bal = new int[ACCOUNTS];
            int rows = 0;
            try (ResultSet r = s.executeQuery("SELECT id, balance, pad FROM accounts ORDER BY id")) {
                while (r.next()) {
                    int id = r.getInt(1);
                    rows++;
                    if (id < 0 || id >= ACCOUNTS) {
                        fail("balances", "silent-error", "unexpected account " + id);
                        return;
                    }
                    bal[id] = r.getInt(2);
                    if (!pad((char) ('a' + id)).equals(r.getString(3)))
                        fail("balances", "silent-error", "account " + id + " has a wrong pad");
                }
            }
            List<int[]> hist = new ArrayList<>();
            try (ResultSet r = s.executeQuery("SELECT tx, src, dst, amount, pad FROM history ORDER BY tx")) {
                while (r.next()) {
                    int tx = r.getInt(1);
                    hist.add(new int[] {tx, r.getInt(2), r.getInt(3), r.getInt(4)});
                    if (!pad((char) ('A' + tx)).equals(r.getString(5)))
                        fail("prefix", "silent-error", "history row " + tx + " has a wrong pad");
                }
            }
            if (rows == 0) {
                if (setup)
                    fail("schema", "data-loss", "no accounts after \"setup\"");
                if (!hist.isEmpty())
                    fail("prefix", "silent-error", "history rows without accounts");
                return;
            }
            if (rows != ACCOUNTS) {
                fail("balances", "silent-error", rows + " of " + ACCOUNTS + " accounts (setup was one transaction)");
                return;
            }
            // prefix: history rows are 1..m with their transfer's values.
            int m = 0;
            for (int[] h : hist) {
                int tx = h[0];
                if (tx != m + 1) {
                    fail("prefix", "silent-error", "history row " + tx + " without row " + (m + 1));
                    break;
                }
                if (h[1] != tx % ACCOUNTS || h[2] != (3 * tx + 1) % ACCOUNTS || h[3] != tx)
                    fail("prefix", "silent-error", "history row " + tx + " has wrong values");
                m = tx;
            }
            // balances: those left by transfers 1..(all history rows).
            int[] want = new int[ACCOUNTS];
            java.util.Arrays.fill(want, INITIAL);
            for (int[] h : hist) {
                int tx = h[0];
                want[tx % ACCOUNTS] -= tx;
                want[(3 * tx + 1) % ACCOUNTS] += tx;
            }
            int sum = 0;
            for (int b : bal)
                sum += b;
            if (sum != ACCOUNTS * INITIAL)
                fail("balances", "silent-error", "the balances sum to " + sum + ", not " + ACCOUNTS * INITIAL);
            else if (!java.util.Arrays.equals(bal, want))
                fail("balances", "silent-error", "balances " + java.util.Arrays.toString(bal) + " are not those of history rows 1.." + hist.size() + " " + java.util.Arrays.toString(want));
            if (m < printed)
                fail("durable", "data-loss", "\"committed " + printed + "\" was printed but the last transfer present is " + m);
        }
    }
}
