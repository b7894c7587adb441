import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;

/**
 * Drives flightd through the Arrow Flight SQL JDBC driver as DBeaver or a
 * BI tool would: catalog calls through DatabaseMetaData, then the queries
 * given on the command line. Prints one line per fact ("key<TAB>value") for
 * python_tests/test_flightsql_jdbc.py to check.
 *
 * Usage: java -cp ... JdbcCheck JDBC_URL SCHEMA TABLE SQL...
 */
public final class JdbcCheck {
  public static void main(String[] args) throws Exception {
    String url = args[0], schema = args[1], table = args[2];
    try (Connection c = DriverManager.getConnection(url)) {
      DatabaseMetaData md = c.getMetaData();
      out("product", md.getDatabaseProductName());
      out("quote", md.getIdentifierQuoteString());
      try (ResultSet rs = md.getCatalogs()) {
        out("catalogs", column(rs, "TABLE_CAT"));
      }
      try (ResultSet rs = md.getSchemas()) {
        out("schemas", column(rs, "TABLE_SCHEM"));
      }
      try (ResultSet rs = md.getTableTypes()) {
        out("table_types", column(rs, "TABLE_TYPE"));
      }
      try (ResultSet rs = md.getTables(null, schema, "%", null)) {
        List<String> names = new ArrayList<>();
        List<String> types = new ArrayList<>();
        while (rs.next()) {
          names.add(rs.getString("TABLE_NAME"));
          types.add(rs.getString("TABLE_TYPE"));
        }
        out("tables", String.join(",", names));
        out("table_type_list", String.join(",", types));
      }
      try (ResultSet rs = md.getColumns(null, schema, table, "%")) {
        List<String> cols = new ArrayList<>();
        while (rs.next()) {
          cols.add(rs.getString("COLUMN_NAME") + ":" + rs.getString("TYPE_NAME"));
        }
        out("columns", String.join(",", cols));
      }
      try (ResultSet rs = md.getPrimaryKeys(null, schema, table)) {
        out("primary_keys", column(rs, "COLUMN_NAME"));
      }
      try (ResultSet rs = md.getTypeInfo()) {
        out("type_info", column(rs, "TYPE_NAME"));
      }
      for (int i = 3; i < args.length; i++) {
        String sql = args[i];
        if (sql.startsWith("UPDATE:")) {
          // UPDATE:<sql>, run with executeUpdate (an INSERT): "updated N"
          try (Statement st = c.createStatement()) {
            out("query" + (i - 3), "updated " + st.executeUpdate(sql.substring(7)));
          } catch (SQLException e) {
            out("query" + (i - 3), "ERROR " + e.getMessage().replace('\n', ' '));
          }
          continue;
        }
        if (sql.startsWith("PREPARED_UPDATE:")) {
          // PREPARED_UPDATE:<sql>|<int parameter>|<int parameter>...: one
          // batch row per parameter, as a tool's batch insert sends them
          String[] parts = sql.substring(16).split("\\|");
          try (PreparedStatement ps = c.prepareStatement(parts[0])) {
            int n = 0;
            for (int p = 1; p < parts.length; p++) {
              ps.setInt(1, Integer.parseInt(parts[p]));
              n += ps.executeUpdate();
            }
            out("query" + (i - 3), "updated " + n);
          } catch (SQLException e) {
            out("query" + (i - 3), "ERROR " + e.getMessage().replace('\n', ' '));
          }
          continue;
        }
        if (sql.startsWith("PREPARED:")) {
          // PREPARED:<sql>|<int parameter>
          String[] parts = sql.substring(9).split("\\|");
          try (PreparedStatement ps = c.prepareStatement(parts[0])) {
            ps.setInt(1, Integer.parseInt(parts[1]));
            try (ResultSet rs = ps.executeQuery()) {
              out("query" + (i - 3), rows(rs));
            }
          } catch (SQLException e) {
            out("query" + (i - 3), "ERROR " + e.getMessage().replace('\n', ' '));
          }
          continue;
        }
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
          out("query" + (i - 3), rows(rs));
        } catch (SQLException e) {
          out("query" + (i - 3), "ERROR " + e.getMessage().replace('\n', ' '));
        }
      }
    }
  }

  private static String column(ResultSet rs, String name) throws SQLException {
    List<String> out = new ArrayList<>();
    while (rs.next()) {
      out.add(rs.getString(name));
    }
    return String.join(",", out);
  }

  /** Rows as "a|b;c|d", values by getString (null as NULL). */
  private static String rows(ResultSet rs) throws SQLException {
    ResultSetMetaData m = rs.getMetaData();
    List<String> rows = new ArrayList<>();
    while (rs.next()) {
      List<String> cells = new ArrayList<>();
      for (int i = 1; i <= m.getColumnCount(); i++) {
        String v = rs.getString(i);
        cells.add(v == null ? "NULL" : v);
      }
      rows.add(String.join("|", cells));
    }
    return String.join(";", rows);
  }

  private static void out(String key, String value) {
    System.out.println(key + "\t" + value);
  }
}
