package pgtier.drivers;

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.UUID;

/**
 * pgJDBC's type paths (issue 17 item 6): setDate / setTimestamp / setTime /
 * setObject with java.time types, java.sql.Date / Timestamp / Time, UUID and
 * BigDecimal, one by one and in batches with and without
 * reWriteBatchedInserts=true, read back with getObject(column, Class) and the
 * java.sql getters. The JVM's zone (user.timezone) is the session's TimeZone:
 * pgJDBC sends it at startup and formats java.sql values in it.
 */
final class TypePaths {
    private TypePaths() {}

    static final LocalDate DATE = LocalDate.of(2024, 2, 29);
    static final LocalDateTime LOCAL = LocalDateTime.of(2024, 3, 31, 2, 30, 15, 123456000);
    static final OffsetDateTime AWARE = OffsetDateTime.of(2024, 10, 27, 1, 30, 0, 500000000, ZoneOffset.ofHoursMinutes(5, 30));
    static final LocalTime TIME = LocalTime.of(13, 45, 56, 123456000);
    static final BigDecimal DECIMAL = new BigDecimal("12345.678901");
    static final UUID ID = UUID.fromString("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");

    static Connection connect(boolean binary, boolean rewrite) throws SQLException {
        String url = "jdbc:postgresql://" + Client.env("PGHOST") + ":" + Client.env("PGPORT") + "/" + Client.env("PGDATABASE");
        Properties props = new Properties();
        props.setProperty("user", Client.env("PGUSER"));
        props.setProperty("password", Client.env("PGPASSWORD"));
        props.setProperty("connectTimeout", "10");
        props.setProperty("binaryTransfer", binary ? "true" : "false");
        props.setProperty("prepareThreshold", binary ? "-1" : "1");
        props.setProperty("reWriteBatchedInserts", rewrite ? "true" : "false");
        return DriverManager.getConnection(url, props);
    }

    static String table(String form) {
        return "drv_java_types_" + form;
    }

    /** Every parameter path into one table, then every read path out of it. */
    static void run(String form, boolean binary) throws SQLException {
        try (Connection conn = connect(binary, false); Connection rewrite = connect(binary, true)) {
            String t = table(form);
            try (Statement st = conn.createStatement()) {
                st.execute("DROP TABLE IF EXISTS " + t);
                st.execute("CREATE TABLE " + t + " (id integer PRIMARY KEY, d date, ts timestamp, tstz timestamptz,"
                    + " t time, n numeric(20,6), u uuid)");
                try (ResultSet rs = st.executeQuery("SHOW TimeZone")) {
                    rs.next();
                    Client.out(form + " types: session zone " + rs.getString(1));
                }
            }
            String insert = "INSERT INTO " + t + " VALUES (?, ?, ?, ?, ?, ?, ?)";
            try (PreparedStatement ps = conn.prepareStatement(insert)) {
                setObjects(ps, 1);
                ps.executeUpdate();
                setJdbc(ps, 2);
                ps.executeUpdate();
                setStrings(ps, 3);
                ps.executeUpdate();
            }
            for (Connection c : List.of(conn, rewrite)) {
                int base = c == conn ? 10 : 20;
                try (PreparedStatement ps = c.prepareStatement(insert)) {
                    for (int k = 0; k < 3; k++) {
                        if (k == 0) {
                            setObjects(ps, base + k);
                        } else if (k == 1) {
                            setJdbc(ps, base + k);
                        } else {
                            setNulls(ps, base + k);
                        }
                        ps.addBatch();
                    }
                    int[] counts = ps.executeBatch();
                    int total = 0;
                    for (int n : counts) {
                        total += n == Statement.SUCCESS_NO_INFO ? 1 : n;
                    }
                    Client.out(form + " types batch" + (c == conn ? "" : " rewritten") + ": " + total + " rows");
                }
            }
            reads(conn, form, t);
            wheres(conn, form, t);
            try (Statement st = conn.createStatement()) {
                st.execute("DROP TABLE " + t);
            }
        }
    }

    static void setObjects(PreparedStatement ps, int id) throws SQLException {
        ps.setInt(1, id);
        ps.setObject(2, DATE);
        ps.setObject(3, LOCAL);
        ps.setObject(4, AWARE);
        ps.setObject(5, TIME);
        ps.setObject(6, DECIMAL);
        ps.setObject(7, ID);
    }

    /** The java.sql types: their text carries the JVM zone's offset. */
    static void setJdbc(PreparedStatement ps, int id) throws SQLException {
        ps.setInt(1, id);
        ps.setDate(2, java.sql.Date.valueOf(DATE));
        ps.setTimestamp(3, Timestamp.valueOf(LOCAL));
        ps.setTimestamp(4, Timestamp.from(Instant.parse("2024-07-01T12:00:00.25Z")));
        ps.setTime(5, java.sql.Time.valueOf(TIME));
        ps.setBigDecimal(6, new BigDecimal("-0.000001"));
        ps.setObject(7, new UUID(0, 0));
    }

    /** setString into typed columns: the server's input functions read them. */
    static void setStrings(PreparedStatement ps, int id) throws SQLException {
        ps.setInt(1, id);
        ps.setObject(2, "2024-02-29", java.sql.Types.DATE);
        ps.setObject(3, "2024-03-31 02:30:15.123456", java.sql.Types.TIMESTAMP);
        ps.setObject(4, "2024-03-31 02:30:00 Europe/Berlin", java.sql.Types.OTHER);
        ps.setObject(5, "23:59:59.999999", java.sql.Types.TIME);
        ps.setObject(6, "99999999999999.999999", java.sql.Types.NUMERIC);
        ps.setObject(7, UUID.fromString("ffffffff-ffff-ffff-ffff-ffffffffffff"));
    }

    static void setNulls(PreparedStatement ps, int id) throws SQLException {
        ps.setInt(1, id);
        ps.setNull(2, java.sql.Types.DATE);
        ps.setNull(3, java.sql.Types.TIMESTAMP);
        ps.setNull(4, java.sql.Types.TIMESTAMP_WITH_TIMEZONE);
        ps.setNull(5, java.sql.Types.TIME);
        ps.setNull(6, java.sql.Types.NUMERIC);
        ps.setNull(7, java.sql.Types.OTHER);
    }

    static String show(Object v) {
        return v == null ? "NULL" : v.getClass().getSimpleName() + ":" + v;
    }

    static void reads(Connection conn, String form, String t) throws SQLException {
        try (Statement st = conn.createStatement();
             ResultSet rs = st.executeQuery("SELECT id, d, ts, tstz, t, n, u FROM " + t + " ORDER BY id")) {
            while (rs.next()) {
                List<String> parts = new ArrayList<>();
                parts.add(String.valueOf(rs.getInt(1)));
                parts.add(show(rs.getObject(2, LocalDate.class)));
                parts.add(show(rs.getObject(3, LocalDateTime.class)));
                parts.add(show(rs.getObject(4, OffsetDateTime.class)));
                parts.add(show(rs.getObject(5, LocalTime.class)));
                parts.add(show(rs.getObject(6, BigDecimal.class)));
                parts.add(show(rs.getObject(7, UUID.class)));
                Client.out(form + " types getObject: " + String.join("|", parts));
                parts.clear();
                parts.add(show(rs.getDate(2)));
                parts.add(show(rs.getTimestamp(3)));
                parts.add(show(rs.getTimestamp(4)));
                parts.add(show(rs.getTime(5)));
                parts.add(show(rs.getString(4)));
                parts.add(show(rs.getObject(4)));
                Client.out(form + " types java.sql: " + String.join("|", parts));
            }
        }
    }

    static void wheres(Connection conn, String form, String t) throws SQLException {
        String[] columns = {"d", "ts", "tstz", "t", "n", "u"};
        Object[] values = {DATE, LOCAL, AWARE, TIME, DECIMAL, ID};
        for (int i = 0; i < columns.length; i++) {
            try (PreparedStatement ps = conn.prepareStatement(
                "SELECT count(*), min(id) FROM " + t + " WHERE " + columns[i] + " = ?")) {
                ps.setObject(1, values[i]);
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    Client.out(form + " types where " + columns[i] + ": " + rs.getLong(1) + " from " + rs.getInt(2));
                }
            }
        }
        try (PreparedStatement ps = conn.prepareStatement(
            "SELECT ?::timestamptz + interval '1 day', date_trunc('day', ?::timestamptz), CAST(? AS date)")) {
            ps.setObject(1, OffsetDateTime.of(2024, 3, 30, 12, 0, 0, 0, ZoneOffset.UTC));
            ps.setTimestamp(2, Timestamp.from(Instant.parse("2024-10-27T00:30:00Z")));
            ps.setDate(3, java.sql.Date.valueOf(LocalDate.of(2024, 12, 31)));
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                Client.out(form + " types arithmetic: " + rs.getString(1) + "|" + rs.getString(2) + "|"
                    + show(rs.getObject(3, LocalDate.class)));
            }
        }
    }
}
