package pgtier.drivers;

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Properties;

import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

/**
 * pgJDBC against a PostgreSQL-compatible server, in text mode (binaryTransfer=false)
 * and binary mode (binaryTransfer=true, prepareThreshold=-1: binary from the first
 * execution). Connection parameters come from PGHOST, PGPORT, PGUSER, PGPASSWORD,
 * PGDATABASE. Prints one normalized line per result or error; the transcript from
 * PostgreSQL and from pgtier must be equal (crates/server/tests/drivers.rs).
 */
public final class Client {
    private static final String TABLE = "drv_java";
    private static final String COLUMNS =
        "id, c_int2, c_int8, c_numeric, c_real, c_double, c_text, c_varchar, c_char, c_bool, c_date, c_ts, c_bytea";

    private Client() {}

    static void out(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static String env(String name) {
        String value = System.getenv(name);
        if (value == null) {
            throw new IllegalStateException(name + " is not set");
        }
        return value;
    }

    static Connection connect(String password, boolean binary) throws SQLException {
        String url = "jdbc:postgresql://" + env("PGHOST") + ":" + env("PGPORT") + "/" + env("PGDATABASE");
        Properties props = new Properties();
        props.setProperty("user", env("PGUSER"));
        props.setProperty("password", password);
        props.setProperty("connectTimeout", "10");
        props.setProperty("ApplicationName", "pgtier-driver-pgjdbc");
        if (binary) {
            props.setProperty("binaryTransfer", "true");
            props.setProperty("prepareThreshold", "-1");
        } else {
            props.setProperty("binaryTransfer", "false");
            // Named server-side statements from the first execution, results in text.
            props.setProperty("prepareThreshold", "1");
        }
        return DriverManager.getConnection(url, props);
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7e) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    /** getObject with the java.time class for dates and timestamps (no JVM time zone involved). */
    static String renderObject(ResultSet rs, int column) throws SQLException {
        int type = rs.getMetaData().getColumnType(column);
        Object value;
        if (type == Types.DATE) {
            value = rs.getObject(column, LocalDate.class);
        } else if (type == Types.TIMESTAMP) {
            value = rs.getObject(column, LocalDateTime.class);
        } else {
            value = rs.getObject(column);
        }
        if (value == null) {
            return "NULL";
        }
        String kind = value.getClass().getSimpleName();
        if (value instanceof BigDecimal decimal) {
            return kind + ":" + decimal.toPlainString();
        }
        if (value instanceof byte[] bytes) {
            return "bytes:\\x" + HexFormat.of().formatHex(bytes);
        }
        if (value instanceof String s) {
            return quote(s);
        }
        return kind + ":" + value;
    }

    static String renderRow(ResultSet rs) throws SQLException {
        int n = rs.getMetaData().getColumnCount();
        List<String> parts = new ArrayList<>();
        for (int i = 1; i <= n; i++) {
            parts.add(renderObject(rs, i));
        }
        return String.join("|", parts);
    }

    /** getString: the driver's own text rendering, whatever the wire format was. */
    static String renderStrings(ResultSet rs) throws SQLException {
        int n = rs.getMetaData().getColumnCount();
        List<String> parts = new ArrayList<>();
        for (int i = 1; i <= n; i++) {
            if (rs.getMetaData().getColumnType(i) == Types.BINARY) {
                // pgJDBC 42.7 returns byte[].toString() (an identity hash) for binary bytea.
                parts.add("-");
                continue;
            }
            String s = rs.getString(i);
            parts.add(s == null ? "NULL" : quote(s));
        }
        return String.join("|", parts);
    }

    static String describe(ResultSetMetaData md) throws SQLException {
        List<String> parts = new ArrayList<>();
        for (int i = 1; i <= md.getColumnCount(); i++) {
            parts.add(md.getColumnName(i) + ":" + md.getColumnTypeName(i) + "/jdbc=" + md.getColumnType(i)
                + "/prec=" + md.getPrecision(i) + "/scale=" + md.getScale(i)
                + "/disp=" + md.getColumnDisplaySize(i) + "/class=" + md.getColumnClassName(i));
        }
        return String.join(",", parts);
    }

    static void error(String label, SQLException e, boolean showMessage) {
        StringBuilder line = new StringBuilder(label + ": error " + e.getSQLState());
        ServerErrorMessage server = e instanceof PSQLException p ? p.getServerErrorMessage() : null;
        if (showMessage) {
            line.append(' ').append(server != null ? server.getMessage() : e.getMessage());
        }
        out(line.toString());
        if (showMessage && server != null && server.getDetail() != null) {
            out(label + ": detail " + server.getDetail());
        }
    }

    interface Step {
        void run() throws SQLException;
    }

    /** A step that must fail; prints the SQLSTATE (and message). */
    static void expectError(String label, boolean showMessage, Step step) {
        try {
            step.run();
            out(label + ": NO ERROR");
        } catch (SQLException e) {
            error(label, e, showMessage);
        }
    }

    /** A step that should succeed; a failure is printed and the program goes on. */
    static void step(String label, Step step) {
        try {
            step.run();
        } catch (SQLException e) {
            error(label + " FAILED", e, true);
        }
    }

    static void bindRow(PreparedStatement ps, Object[] row) throws SQLException {
        for (int i = 0; i < row.length; i++) {
            ps.setObject(i + 1, row[i]);
        }
    }

    static final Object[][] ROWS = {
        {1, (short) 32767, 9223372036854775807L, new BigDecimal("123456789.125"), 0.1f, 1.0000000000000002,
            "h\u00e9llo \u2603 \"q\" \\ end", "varchar", "ab", true,
            LocalDate.of(2024, 2, 29), LocalDateTime.of(2024, 2, 29, 13, 45, 56, 123456000),
            new byte[] {0, (byte) 0xff, 0x10, '\''}},
        {2, (short) -32768, -9223372036854775808L, new BigDecimal("-0.001"), -3.5e-8f, -1e300,
            "", "", "", false, LocalDate.of(1970, 1, 1), LocalDateTime.of(1999, 12, 31, 23, 59, 59), new byte[0]},
    };

    static void setup(Connection conn) throws SQLException {
        try (Statement st = conn.createStatement()) {
            st.execute("DROP TABLE IF EXISTS " + TABLE);
            st.execute("CREATE TABLE " + TABLE + " ("
                + "id integer PRIMARY KEY, c_int2 smallint, c_int8 bigint, c_numeric numeric(15,3), "
                + "c_real real, c_double double precision, c_text text, c_varchar varchar(20), "
                + "c_char char(8), c_bool boolean, c_date date, c_ts timestamp, c_bytea bytea, "
                + "c_required text NOT NULL DEFAULT 'required')");
        }
        out("create table: ok");
        String insert = "INSERT INTO " + TABLE + " (" + COLUMNS + ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)";
        conn.setAutoCommit(false);
        try (PreparedStatement ps = conn.prepareStatement(insert)) {
            for (Object[] row : ROWS) {
                bindRow(ps, row);
                out("insert id=" + row[0] + ": count=" + ps.executeUpdate());
            }
            ps.setInt(1, 3);
            for (int i = 2; i <= 13; i++) {
                ps.setNull(i, Types.NULL);
            }
            out("insert id=3: count=" + ps.executeUpdate());
        }
        conn.commit();
        out("commit: ok");

        try (PreparedStatement ps = conn.prepareStatement(insert)) {
            bindRow(ps, ROWS[0]);
            ps.setInt(1, 10);
            out("insert id=10: count=" + ps.executeUpdate());
        }
        out("inside rollback: count=" + count(conn));
        conn.rollback();
        out("after rollback: count=" + count(conn));

        try (PreparedStatement up = conn.prepareStatement(
                "UPDATE " + TABLE + " SET c_text = ?, c_real = c_real * 2, c_int8 = c_int8 - ? WHERE id = ?");
             PreparedStatement del = conn.prepareStatement("DELETE FROM " + TABLE + " WHERE id = ?");
             PreparedStatement ins = conn.prepareStatement(insert)) {
            up.setString(1, "updated");
            up.setLong(2, 7);
            up.setInt(3, 1);
            out("update id=1: count=" + up.executeUpdate());
            up.setString(1, "nobody");
            up.setLong(2, 0);
            up.setInt(3, 999);
            out("update none: count=" + up.executeUpdate());
            bindRow(ins, ROWS[1]);
            ins.setInt(1, 4);
            ins.executeUpdate();
            del.setInt(1, 4);
            out("delete id=4: count=" + del.executeUpdate());
        }
        try (PreparedStatement ps = conn.prepareStatement(
                "INSERT INTO " + TABLE + " (id, c_text) VALUES (?, ?) RETURNING id, c_required, c_text")) {
            ps.setInt(1, 5);
            ps.setString(2, "returned");
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    out("insert returning: " + renderRow(rs));
                }
            }
        }
        conn.commit();
        conn.setAutoCommit(true);
        out("commit: ok");
    }

    static long count(Connection conn) throws SQLException {
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELECT count(*) FROM " + TABLE)) {
            rs.next();
            return rs.getLong(1);
        }
    }

    static void reads(Connection conn, String form) throws SQLException {
        String selectAll = "SELECT " + COLUMNS + ", c_required FROM " + TABLE + " ORDER BY id";
        // Twice: pgJDBC switches to a named statement (and, in binary mode, binary
        // results) only once the statement has been described.
        for (int round = 1; round <= 2; round++) {
            try (PreparedStatement ps = conn.prepareStatement(selectAll); ResultSet rs = ps.executeQuery()) {
                if (round == 1) {
                    out(form + " columns: " + describe(rs.getMetaData()));
                }
                while (rs.next()) {
                    out(form + " row " + round + ": " + renderRow(rs));
                    out(form + " strings " + round + ": " + renderStrings(rs));
                }
            }
        }
        // timestamptz: an instant in, the same instant out (shown in UTC, the session's zone).
        try (PreparedStatement ps = conn.prepareStatement("SELECT ?::timestamptz, '2024-03-01 01:30:00+02'::timestamptz, ?::timestamptz")) {
            ps.setObject(1, OffsetDateTime.of(2024, 2, 29, 13, 45, 56, 123456000, ZoneOffset.ofHours(5)));
            ps.setString(2, "1999-12-31 23:59:59-05:30");
            for (int round = 1; round <= 2; round++) {
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    out(form + " timestamptz " + round + ": " + rs.getObject(1, OffsetDateTime.class) + " " + rs.getObject(2, OffsetDateTime.class)
                        + " " + rs.getString(3) + " " + rs.getTimestamp(1).toInstant());
                }
            }
        }
        try (PreparedStatement ps = conn.prepareStatement("SELECT id, c_numeric, c_ts, c_bytea FROM " + TABLE
                + " WHERE c_int8 > ? AND c_date >= ? AND c_bytea <> ? ORDER BY id")) {
            ps.setLong(1, Long.MIN_VALUE);
            ps.setObject(2, LocalDate.of(1970, 1, 1));
            ps.setBytes(3, new byte[] {'n'});
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    out(form + " filtered: " + renderRow(rs));
                }
            }
        }
        try (PreparedStatement ps = conn.prepareStatement(
                "SELECT ?::numeric(10,2) AS n, ?::text AS t, ?::bytea AS b, ?::timestamp AS ts, ?::boolean AS flag, "
                + "?::real AS r, ?::double precision AS d, ?::smallint AS s")) {
            ps.setBigDecimal(1, new BigDecimal("12.345"));
            ps.setString(2, "x\ty");
            ps.setBytes(3, new byte[] {1, 2});
            ps.setObject(4, LocalDateTime.of(2001, 2, 3, 4, 5, 6, 7000));
            ps.setBoolean(5, false);
            ps.setFloat(6, 1.5f);
            ps.setDouble(7, -0.25);
            ps.setShort(8, (short) 12);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                out(form + " params: " + renderRow(rs));
            }
        }
        try (Statement st = conn.createStatement();
             ResultSet rs = st.executeQuery("SELECT count(*), min(c_date), max(c_ts), sum(c_int2) FROM " + TABLE)) {
            rs.next();
            out(form + " aggregates: " + renderRow(rs));
        }
    }

    static void errors(Connection conn, String form) throws SQLException {
        expectError(form + " unique violation", true, () -> {
            try (PreparedStatement ps = conn.prepareStatement("INSERT INTO " + TABLE + " (id) VALUES (?)")) {
                ps.setInt(1, 1);
                ps.executeUpdate();
            }
        });
        expectError(form + " undefined table", true, () -> {
            try (Statement st = conn.createStatement()) {
                st.executeQuery("SELECT * FROM drv_java_no_such_table");
            }
        });
        expectError(form + " division by zero", true, () -> {
            try (PreparedStatement ps = conn.prepareStatement("SELECT c_int2 / ? FROM " + TABLE + " WHERE id = 1")) {
                ps.setInt(1, 0);
                ps.executeQuery();
            }
        });
        expectError(form + " not null", true, () -> {
            try (PreparedStatement ps = conn.prepareStatement(
                    "INSERT INTO " + TABLE + " (id, c_required) VALUES (?, ?)")) {
                ps.setInt(1, 6);
                ps.setNull(2, Types.VARCHAR);
                ps.executeUpdate();
            }
        });
        expectError(form + " syntax error", false, () -> {
            try (Statement st = conn.createStatement()) {
                st.execute("SELEC 1");
            }
        });
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELECT 1")) {
            rs.next();
            out(form + " after errors: " + rs.getInt(1));
        }

        conn.setAutoCommit(false);
        try (Statement st = conn.createStatement()) {
            st.executeUpdate("INSERT INTO " + TABLE + " (id) VALUES (7)");
        }
        expectError(form + " in block", true, () -> {
            try (Statement st = conn.createStatement()) {
                st.executeQuery("SELECT 1 / (id - 1) FROM " + TABLE + " WHERE id = 1");
            }
        });
        expectError(form + " aborted block", true, () -> {
            try (PreparedStatement ps = conn.prepareStatement("SELECT * FROM " + TABLE + " WHERE id = ?")) {
                ps.setInt(1, 1);
                ps.executeQuery();
            }
        });
        conn.rollback();
        conn.setAutoCommit(true);
        List<Integer> ids = new ArrayList<>();
        try (Statement st = conn.createStatement();
             ResultSet rs = st.executeQuery("SELECT id FROM " + TABLE + " ORDER BY id")) {
            while (rs.next()) {
                ids.add(rs.getInt(1));
            }
        }
        out(form + " after aborted block: ids=" + ids);
    }

    /** serial and identity columns, read back as JDBC generated keys (pgJDBC appends RETURNING *). */
    static void generatedKeys(Connection conn) throws SQLException {
        try (Statement st = conn.createStatement()) {
            st.execute("DROP TABLE IF EXISTS drv_java_keys");
            st.execute("CREATE TABLE drv_java_keys (id serial PRIMARY KEY, g bigint GENERATED ALWAYS AS IDENTITY, v text)");
            st.execute("CREATE UNIQUE INDEX drv_java_keys_v_g ON drv_java_keys (v, g)");
        }
        conn.setAutoCommit(false);
        try (PreparedStatement ps = conn.prepareStatement("INSERT INTO drv_java_keys (v) VALUES (?)", Statement.RETURN_GENERATED_KEYS)) {
            for (String v : new String[] {"a", "b"}) {
                ps.setString(1, v);
                ps.executeUpdate();
                try (ResultSet keys = ps.getGeneratedKeys()) {
                    while (keys.next()) {
                        out("generated keys: id=" + keys.getInt("id") + " g=" + keys.getLong("g") + " v=" + keys.getString("v"));
                    }
                }
            }
        }
        conn.commit();
        conn.setAutoCommit(true);
        expectError("identity always", true, () -> {
            try (Statement st = conn.createStatement()) {
                st.execute("INSERT INTO drv_java_keys (g, v) VALUES (5, 'c')");
            }
        });
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery("SELECT currval('drv_java_keys_id_seq'), pg_get_serial_sequence('drv_java_keys', 'g')")) {
            rs.next();
            out("currval: " + rs.getLong(1) + " identity sequence: " + rs.getString(2));
        }
        // DatabaseMetaData.getColumns, as ORMs and tools call it (row_number() OVER in its query).
        try (ResultSet rs = conn.getMetaData().getColumns(null, "public", "drv_java_keys", "%")) {
            while (rs.next()) {
                out("getColumns: " + rs.getInt("ORDINAL_POSITION") + " " + rs.getString("COLUMN_NAME") + " " + rs.getString("TYPE_NAME")
                    + " type=" + rs.getInt("DATA_TYPE") + " size=" + rs.getInt("COLUMN_SIZE") + " nullable=" + rs.getInt("NULLABLE")
                    + " default=" + rs.getString("COLUMN_DEF") + " autoincrement=" + rs.getString("IS_AUTOINCREMENT")
                    + " generated=" + rs.getString("IS_GENERATEDCOLUMN"));
            }
        }
        // getPrimaryKeys, getIndexInfo and getBestRowIdentifier: what ORMs
        // and schema tools call (information_schema._pg_expandarray over
        // pg_index.indkey, pg_get_indexdef per column).
        try (ResultSet rs = conn.getMetaData().getPrimaryKeys(null, "public", "drv_java_keys")) {
            while (rs.next()) {
                out("getPrimaryKeys: " + rs.getString("TABLE_NAME") + " " + rs.getString("COLUMN_NAME") + " seq=" + rs.getInt("KEY_SEQ")
                    + " name=" + rs.getString("PK_NAME"));
            }
        }
        try (ResultSet rs = conn.getMetaData().getIndexInfo(null, "public", "drv_java_keys", false, false)) {
            while (rs.next()) {
                out("getIndexInfo: " + rs.getString("INDEX_NAME") + " unique=" + !rs.getBoolean("NON_UNIQUE") + " pos=" + rs.getInt("ORDINAL_POSITION")
                    + " column=" + rs.getString("COLUMN_NAME") + " type=" + rs.getInt("TYPE") + " asc=" + rs.getString("ASC_OR_DESC"));
            }
        }
        try (ResultSet rs = conn.getMetaData().getBestRowIdentifier(null, "public", "drv_java_keys", DatabaseMetaData.bestRowSession, false)) {
            while (rs.next()) {
                out("getBestRowIdentifier: " + rs.getString("COLUMN_NAME") + " " + rs.getString("TYPE_NAME") + " type=" + rs.getInt("DATA_TYPE"));
            }
        }
        try (Statement st = conn.createStatement()) {
            st.execute("DROP TABLE drv_java_keys");
        }
    }

    public static void main(String[] args) throws Exception {
        out("driver pgJDBC " + org.postgresql.util.DriverInfo.DRIVER_VERSION);
        if (args.length > 0 && args[0].equals("types")) {
            // The type paths alone, run again in a JVM whose zone is not UTC.
            step("text types", () -> TypePaths.run("text", false));
            step("binary types", () -> TypePaths.run("binary", true));
            out("done");
            return;
        }
        try (Connection bad = connect(env("PGPASSWORD") + "-wrong", false)) {
            out("wrong password: CONNECTED");
        } catch (SQLException e) {
            out("wrong password: error " + e.getSQLState());
        }
        try (Connection text = connect(env("PGPASSWORD"), false)) {
            step("setup", () -> setup(text));
            step("text reads", () -> reads(text, "text"));
            step("text errors", () -> errors(text, "text"));
            try (Connection binary = connect(env("PGPASSWORD"), true)) {
                step("binary reads", () -> reads(binary, "binary"));
                step("binary errors", () -> errors(binary, "binary"));
                step("arrays", () -> ArrayChecks.run(text, binary));
            }
            step("generated keys", () -> generatedKeys(text));
            step("text types", () -> TypePaths.run("text", false));
            step("binary types", () -> TypePaths.run("binary", true));
            TatpTypes.runReporting(text, "text");
            try (Connection binary = connect(env("PGPASSWORD"), true)) {
                TatpTypes.runReporting(binary, "binary");
            }
            step("drop", () -> {
                try (Statement st = text.createStatement()) {
                    st.execute("DROP TABLE " + TABLE);
                }
                out("drop table: ok");
            });
        }
        out("done");
    }
}
