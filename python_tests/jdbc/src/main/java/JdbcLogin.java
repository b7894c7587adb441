import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.Properties;

/**
 * Logs in through the Arrow Flight SQL JDBC driver as a user of DBeaver or
 * a BI tool types it (user name and password), once per "user:password"
 * argument, and runs one query each. Prints "user<TAB>ok ROWS" or
 * "user<TAB>ERROR message" per login for python_tests/test_access.py.
 *
 * Usage: java -cp ... JdbcLogin JDBC_URL SQL USER:PASSWORD...
 */
public final class JdbcLogin {
  public static void main(String[] args) throws Exception {
    String url = args[0], sql = args[1];
    for (int i = 2; i < args.length; i++) {
      int colon = args[i].indexOf(':');
      String user = args[i].substring(0, colon), password = args[i].substring(colon + 1);
      Properties p = new Properties();
      p.setProperty("user", user);
      p.setProperty("password", password);
      try (Connection c = DriverManager.getConnection(url, p);
          Statement s = c.createStatement();
          ResultSet rs = s.executeQuery(sql)) {
        int rows = 0;
        while (rs.next()) {
          rows++;
        }
        System.out.println(user + "\tok " + rows);
      } catch (Exception e) {
        String m = String.valueOf(e.getMessage()).replace('\n', ' ');
        System.out.println(user + "\tERROR " + m);
      }
    }
  }
}
