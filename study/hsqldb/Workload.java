// HSQLDB study workload (study/hsqldb/README.md; thesis 004 §4.2 and Figure 4.4): in the
// working directory, creates the file database db/test with CACHED tables, every commit
// synced (SET FILES WRITE DELAY FALSE), and runs transfer transactions between accounts,
// a CHECKPOINT half-way, then SHUTDOWN. It prints one line after each step that returned:
//   "setup"          the tables and the K accounts (one transaction) are committed
//   "committed I"    transfer I (1..T) is committed
//   "checkpoint"     CHECKPOINT returned
//   "shutdown"       SHUTDOWN returned
// Transfer I moves I units from account (I % K) to account ((3 I + 1) % K) and inserts
// history row I, in one transaction. The constants are repeated in Check.java.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;

public class Workload {
    static final int ACCOUNTS = 8;         // K
    static final int TRANSFERS = 6;        // T
    static final int INITIAL = 1000;       // every account's balance after setup
    static final int PAD = 300;            // bytes of padding per row: several .data blocks

    static String pad(char c) {
        return String.valueOf(c).repeat(PAD);
    }

    static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws SQLException {
        try (Connection c = DriverManager.getConnection("jdbc:hsqldb:file:db/test", "SA", "")) {
            try (Statement s = c.createStatement()) {
                // The HSQLDB Guide ("System Management", SET FILES WRITE DELAY): FALSE
                // syncs the .log at every commit, so a commit that returned is durable.
                s.execute("SET FILES WRITE DELAY FALSE");
                s.execute("CREATE CACHED TABLE accounts (id INT PRIMARY KEY, balance INT NOT NULL, pad VARCHAR(400))");
                s.execute("CREATE CACHED TABLE history (tx INT PRIMARY KEY, src INT NOT NULL, dst INT NOT NULL, amount INT NOT NULL, pad VARCHAR(400))");
            }
            c.setAutoCommit(false);
            try (PreparedStatement p = c.prepareStatement("INSERT INTO accounts VALUES (?, ?, ?)")) {
                for (int k = 0; k < ACCOUNTS; k++) {
                    p.setInt(1, k);
                    p.setInt(2, INITIAL);
                    p.setString(3, pad((char) ('a' + k)));
                    p.executeUpdate();
                }
            }
            c.commit();
            say("setup");
            for (int i = 1; i <= TRANSFERS; i++) {
                int src = i % ACCOUNTS, dst = (3 * i + 1) % ACCOUNTS;
                try (PreparedStatement out = c.prepareStatement("UPDATE accounts SET balance = balance - ? WHERE id = ?");
                     PreparedStatement in = c.prepareStatement("UPDATE accounts SET balance = balance + ? WHERE id = ?");
                     PreparedStatement h = c.prepareStatement("INSERT INTO history VALUES (?, ?, ?, ?, ?)")) {
                    out.setInt(1, i);
                    out.setInt(2, src);
                    out.executeUpdate();
                    in.setInt(1, i);
                    in.setInt(2, dst);
                    in.executeUpdate();
                    h.setInt(1, i);
                    h.setInt(2, src);
                    h.setInt(3, dst);
                    h.setInt(4, i);
                    h.setString(5, pad((char) ('A' + i)));
                    h.executeUpdate();
                }
                c.commit();
                say("committed " + i);
                if (i == TRANSFERS / 2) {
                    try (Statement s = c.createStatement()) {
                        s.execute("CHECKPOINT");
                    }
                    say("checkpoint");
                }
            }
            try (Statement s = c.createStatement()) {
                s.execute("SHUTDOWN");
            }
            say("shutdown");
        }
    }
}
