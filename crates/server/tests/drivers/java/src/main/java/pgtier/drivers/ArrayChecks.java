package pgtier.drivers;

import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;

/**
 * Arrays through pgJDBC: createArrayOf / setArray parameters (int4[], text[],
 * int8[]), {@code = ANY(?)}, getArray back as Java arrays, NULL elements and
 * quoting, in text and binary transfer.
 */
final class ArrayChecks {
    private ArrayChecks() {}

    static String render(Object[] values) {
        List<String> parts = new ArrayList<>();
        for (Object v : values) {
            parts.add(v == null ? "NULL" : v.getClass().getSimpleName() + ":" + v);
        }
        return "[" + String.join(",", parts) + "]";
    }

    static void run(Connection text, Connection binary) throws SQLException {
        try (Statement st = text.createStatement()) {
            st.execute("DROP TABLE IF EXISTS drv_java_arrays");
            st.execute("CREATE TABLE drv_java_arrays (id int PRIMARY KEY, ids int4[], names text[], bigs int8[])");
        }
        try (PreparedStatement ps = text.prepareStatement("INSERT INTO drv_java_arrays VALUES (?, ?, ?, ?)")) {
            Object[][] rows = {
                {1, new Integer[] {1, 2, null}, new String[] {"a", "b c", "", "NULL", null, "q\"\\"}, new Long[] {1L << 40}},
                {2, new Integer[] {}, new String[] {}, new Long[] {}},
                {3, new Integer[] {7}, new String[] {"z"}, null},
            };
            for (Object[] row : rows) {
                ps.setInt(1, (Integer) row[0]);
                ps.setArray(2, text.createArrayOf("int4", (Object[]) row[1]));
                ps.setArray(3, text.createArrayOf("text", (Object[]) row[2]));
                if (row[3] == null) {
                    ps.setNull(4, java.sql.Types.ARRAY);
                } else {
                    ps.setArray(4, text.createArrayOf("int8", (Object[]) row[3]));
                }
                ps.executeUpdate();
            }
        }
        for (Connection conn : new Connection[] {text, binary}) {
            String form = conn == text ? "text" : "binary";
            try (PreparedStatement ps = conn.prepareStatement("SELECT id, ids, names, bigs FROM drv_java_arrays ORDER BY id");
                 ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    StringBuilder line = new StringBuilder("arrays " + form + ": " + rs.getInt(1));
                    for (int c = 2; c <= 4; c++) {
                        Array a = rs.getArray(c);
                        line.append(" | ").append(a == null ? "NULL" : a.getBaseTypeName() + render((Object[]) a.getArray()));
                    }
                    line.append(" | ").append(rs.getString(3));
                    Client.out(line.toString());
                }
            }
            try (PreparedStatement ps = conn.prepareStatement("SELECT id FROM drv_java_arrays WHERE id = ANY(?) ORDER BY id")) {
                for (Integer[] ids : new Integer[][] {{3, 1, 99}, {}, {2}}) {
                    ps.setArray(1, conn.createArrayOf("int4", ids));
                    List<String> found = new ArrayList<>();
                    try (ResultSet rs = ps.executeQuery()) {
                        while (rs.next()) {
                            found.add(Integer.toString(rs.getInt(1)));
                        }
                    }
                    Client.out("arrays " + form + ": any " + render(ids) + " -> " + found);
                }
            }
            try (PreparedStatement ps = conn.prepareStatement("SELECT id FROM drv_java_arrays WHERE names && ? ORDER BY id")) {
                ps.setArray(1, conn.createArrayOf("text", new String[] {"z", "b c"}));
                List<String> found = new ArrayList<>();
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        found.add(Integer.toString(rs.getInt(1)));
                    }
                }
                Client.out("arrays " + form + ": overlap -> " + found);
            }
        }
        try (Statement st = text.createStatement()) {
            st.execute("DROP TABLE drv_java_arrays");
        }
    }
}
