package pgtier.drivers;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.HexFormat;
import org.postgresql.PGConnection;
import org.postgresql.copy.CopyManager;

/**
 * The TATP-like table with uuid, jsonb and interval columns through pgJDBC:
 * loaded with CopyManager in text (tatp_ext.tsv) and in binary (the server's
 * own binary COPY of that table), read back with getString and getObject.
 */
final class TatpTypes {
    private static final String COLUMNS = "s_id integer PRIMARY KEY, sub_uuid uuid NOT NULL UNIQUE, profile jsonb, "
        + "call_window interval, last_seen timestamptz, balance numeric(12,2), vlr_location bigint";

    private TatpTypes() {}

    static void run(Connection conn, String form) throws Exception {
        String text = "tatp_ext_java_" + form;
        String binary = text + "_b";
        byte[] data = Files.readAllBytes(Paths.get("..", "tatp_ext.tsv"));
        CopyManager copy = conn.unwrap(PGConnection.class).getCopyAPI();
        try (Statement st = conn.createStatement()) {
            st.execute("CREATE TABLE " + text + " (" + COLUMNS + ")");
            st.execute("CREATE TABLE " + binary + " (" + COLUMNS + ")");
        }
        Client.out("tatp " + form + " copy text: " + copy.copyIn("COPY " + text + " FROM STDIN", new ByteArrayInputStream(data)));
        ByteArrayOutputStream dump = new ByteArrayOutputStream();
        long out = copy.copyOut("COPY (SELECT * FROM " + text + " ORDER BY s_id) TO STDOUT (FORMAT binary)", dump);
        byte[] bytes = dump.toByteArray();
        String md5 = HexFormat.of().formatHex(MessageDigest.getInstance("MD5").digest(bytes));
        Client.out("tatp " + form + " binary copy out: " + out + " rows " + bytes.length + " bytes md5 " + md5);
        Client.out("tatp " + form + " copy binary: " + copy.copyIn("COPY " + binary + " FROM STDIN (FORMAT binary)", new ByteArrayInputStream(bytes)));
        for (String table : new String[] {text, binary}) {
            try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELECT * FROM " + table + " ORDER BY s_id")) {
                ResultSetMetaData md = rs.getMetaData();
                while (rs.next()) {
                    StringBuilder line = new StringBuilder("tatp " + form + " " + table + ":");
                    for (int c = 1; c <= md.getColumnCount(); c++) {
                        Object o = rs.getObject(c);
                        line.append(c == 1 ? " " : "|").append(md.getColumnTypeName(c)).append('=').append(rs.getString(c));
                        line.append(o == null ? "" : " (" + o.getClass().getSimpleName() + ")");
                    }
                    Client.out(line.toString());
                }
            }
        }
        try (var ps = conn.prepareStatement("SELECT s_id FROM " + text + " WHERE sub_uuid = ? OR profile @> ?::jsonb ORDER BY s_id")) {
            ps.setObject(1, java.util.UUID.fromString("9e3779b1-0001-4007-800d-0000000f4243"));
            ps.setString(2, "{\"tier\": 2, \"active\": false}");
            StringBuilder ids = new StringBuilder();
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    ids.append(ids.length() == 0 ? "" : ",").append(rs.getInt(1));
                }
            }
            Client.out("tatp " + form + " filtered: " + ids);
        }
        try (Statement st = conn.createStatement()) {
            st.execute("DROP TABLE " + text + ", " + binary);
        }
    }

    static void runReporting(Connection conn, String form) {
        try {
            run(conn, form);
        } catch (Exception e) {
            String state = e instanceof SQLException s ? s.getSQLState() : e.getClass().getSimpleName();
            Client.out("tatp " + form + " error: " + state + " " + e.getMessage());
        }
    }
}
