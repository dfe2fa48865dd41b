// pgx v5 against a PostgreSQL-compatible server: the extended protocol with
// cached prepared statements and binary results (pgx's default), and the simple
// protocol with text results (QueryExecModeSimpleProtocol).
//
// Connection parameters come from PGHOST, PGPORT, PGUSER, PGPASSWORD,
// PGDATABASE. Prints one normalized line per result or error; the transcript
// from PostgreSQL and from pgtier must be equal (crates/server/tests/drivers.rs).
package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

const table = "drv_go"

const columns = "id, c_int2, c_int8, c_numeric, c_real, c_double, c_text, c_varchar, c_char, c_bool, c_date, c_ts, c_bytea"

func out(format string, args ...any) {
	fmt.Printf(format+"\n", args...)
}

func mustEnv(name string) string {
	value, ok := os.LookupEnv(name)
	if !ok {
		fmt.Fprintf(os.Stderr, "%s is not set\n", name)
		os.Exit(2)
	}
	return value
}

func connect(ctx context.Context, password string, mode pgx.QueryExecMode) (*pgx.Conn, error) {
	config, err := pgx.ParseConfig("connect_timeout=10")
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(mustEnv("PGPORT"), 10, 16)
	if err != nil {
		return nil, err
	}
	config.Host = mustEnv("PGHOST")
	config.Port = uint16(port)
	config.User = mustEnv("PGUSER")
	config.Password = password
	config.Database = mustEnv("PGDATABASE")
	config.DefaultQueryExecMode = mode
	return pgx.ConnectConfig(ctx, config)
}

func quote(s string) string {
	return strconv.QuoteToASCII(s)
}

func render(value any) string {
	switch v := value.(type) {
	case nil:
		return "NULL"
	case string:
		return quote(v)
	case []byte:
		return fmt.Sprintf("bytes:\\x%x", v)
	case float32:
		return "float32:" + strconv.FormatFloat(float64(v), 'g', -1, 32)
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return fmt.Sprintf("float64:%v", v)
		}
		return "float64:" + strconv.FormatFloat(v, 'g', -1, 64)
	case time.Time:
		return fmt.Sprintf("time:%s(%s)", v.Format("2006-01-02T15:04:05.999999"), v.Location())
	case pgtype.Numeric:
		text, err := v.Value()
		if err != nil {
			return "numeric:ERROR " + err.Error()
		}
		return fmt.Sprintf("numeric:%v", text)
	default:
		return fmt.Sprintf("%T:%v", v, v)
	}
}

func describe(fields []pgconn.FieldDescription) string {
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		parts = append(parts, fmt.Sprintf("%s:%d/size=%d/mod=%d/fmt=%d", f.Name, f.DataTypeOID, f.DataTypeSize, f.TypeModifier, f.Format))
	}
	return strings.Join(parts, ",")
}

func printRows(label string, rows pgx.Rows, withColumns bool) error {
	defer rows.Close()
	if withColumns {
		out("%s columns: %s", label, describe(rows.FieldDescriptions()))
	}
	for rows.Next() {
		values, err := rows.Values()
		if err != nil {
			return err
		}
		parts := make([]string, len(values))
		for i, v := range values {
			parts[i] = render(v)
		}
		out("%s row: %s", label, strings.Join(parts, "|"))
	}
	return rows.Err()
}

func reportError(label string, err error, showMessage bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		out("%s: non-server error %v", label, err)
		return
	}
	if !showMessage {
		out("%s: error %s", label, pgErr.Code)
		return
	}
	out("%s: error %s %s", label, pgErr.Code, pgErr.Message)
	if pgErr.Detail != "" {
		out("%s: detail %s", label, pgErr.Detail)
	}
}

// expectError runs a statement that must fail and prints its SQLSTATE.
func expectError(ctx context.Context, conn *pgx.Conn, label string, showMessage bool, sql string, args ...any) {
	rows, err := conn.Query(ctx, sql, args...)
	if err == nil {
		for rows.Next() {
		}
		rows.Close()
		err = rows.Err()
	}
	if err == nil {
		out("%s: NO ERROR", label)
		return
	}
	reportError(label, err, showMessage)
}

// step runs a part that should succeed; a failure is printed and the program goes on.
func step(label string, run func() error) {
	if err := run(); err != nil {
		reportError(label+" FAILED", err, true)
	}
}

func scalar(ctx context.Context, conn *pgx.Conn, sql string) string {
	var value any
	if err := conn.QueryRow(ctx, sql).Scan(&value); err != nil {
		return "ERROR " + err.Error()
	}
	return render(value)
}

var rows = [][]any{
	{1, int16(32767), int64(9223372036854775807), "123456789.125", float32(0.1), 1.0000000000000002,
		"h\u00e9llo \u2603 \"q\" \\ end", "varchar", "ab", true,
		time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), time.Date(2024, 2, 29, 13, 45, 56, 123456000, time.UTC),
		[]byte{0, 0xff, 0x10, '\''}},
	{2, int16(-32768), int64(-9223372036854775808), "-0.001", float32(-3.5e-8), -1e300,
		"", "", "", false,
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC), []byte{}},
	{3, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil},
}

func setup(ctx context.Context, conn *pgx.Conn) error {
	for _, sql := range []string{
		"DROP TABLE IF EXISTS " + table,
		"CREATE TABLE " + table + " (id integer PRIMARY KEY, c_int2 smallint, c_int8 bigint, " +
			"c_numeric numeric(15,3), c_real real, c_double double precision, c_text text, " +
			"c_varchar varchar(20), c_char char(8), c_bool boolean, c_date date, c_ts timestamp, " +
			"c_bytea bytea, c_required text NOT NULL DEFAULT 'required')",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return err
		}
	}
	out("create table: ok")
	insert := "INSERT INTO " + table + " (" + columns + ") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13)"
	// Named prepared statement, used in the transactions below.
	if _, err := conn.Prepare(ctx, "ins", insert); err != nil {
		return err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	for _, row := range rows {
		tag, err := tx.Exec(ctx, "ins", row...)
		if err != nil {
			return err
		}
		out("insert id=%v: %s", row[0], tag)
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	out("commit: ok")

	tx, err = conn.Begin(ctx)
	if err != nil {
		return err
	}
	gone := append([]any{10}, rows[0][1:]...)
	if _, err := tx.Exec(ctx, "ins", gone...); err != nil {
		return err
	}
	out("inside rollback: count=%s", scalar(ctx, conn, "SELECT count(*) FROM "+table))
	if err := tx.Rollback(ctx); err != nil {
		return err
	}
	out("after rollback: count=%s", scalar(ctx, conn, "SELECT count(*) FROM "+table))

	tx, err = conn.Begin(ctx)
	if err != nil {
		return err
	}
	update := "UPDATE " + table + " SET c_text = $1, c_real = c_real * 2, c_int8 = c_int8 - $2 WHERE id = $3"
	tag, err := tx.Exec(ctx, update, "updated", 7, 1)
	if err != nil {
		return err
	}
	out("update id=1: %s", tag)
	tag, err = tx.Exec(ctx, update, "nobody", 0, 999)
	if err != nil {
		return err
	}
	out("update none: %s", tag)
	four := append([]any{4}, rows[1][1:]...)
	if _, err := tx.Exec(ctx, "ins", four...); err != nil {
		return err
	}
	tag, err = tx.Exec(ctx, "DELETE FROM "+table+" WHERE id = $1", 4)
	if err != nil {
		return err
	}
	out("delete id=4: %s", tag)
	returning, err := tx.Query(ctx, "INSERT INTO "+table+" (id, c_text) VALUES ($1, $2) RETURNING id, c_required, c_text", 5, "returned")
	if err != nil {
		return err
	}
	if err := printRows("insert returning", returning, false); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	out("commit: ok")
	return nil
}

func reads(ctx context.Context, conn *pgx.Conn, form string) error {
	all, err := conn.Query(ctx, "SELECT "+columns+", c_required FROM "+table+" ORDER BY id")
	if err != nil {
		return err
	}
	if err := printRows(form, all, true); err != nil {
		return err
	}
	filtered, err := conn.Query(ctx, "SELECT id, c_numeric, c_ts, c_bytea FROM "+table+
		" WHERE c_int8 > $1 AND c_date >= $2 AND c_bytea <> $3 ORDER BY id",
		int64(math.MinInt64), time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), []byte("n"))
	if err != nil {
		return err
	}
	if err := printRows(form+" filtered", filtered, false); err != nil {
		return err
	}
	params, err := conn.Query(ctx, "SELECT $1::numeric(10,2) AS n, $2::text AS t, $3::bytea AS b, "+
		"$4::timestamp AS ts, $5::boolean AS flag, $6::real AS r, $7::double precision AS d, $8::smallint AS s",
		"12.345", "x\ty", []byte{1, 2}, time.Date(2001, 2, 3, 4, 5, 6, 7000, time.UTC), false, float32(1.5), -0.25, int16(12))
	if err != nil {
		return err
	}
	if err := printRows(form+" params", params, true); err != nil {
		return err
	}
	aggregates, err := conn.Query(ctx, "SELECT count(*), min(c_date), max(c_ts), sum(c_int2) FROM "+table)
	if err != nil {
		return err
	}
	return printRows(form+" aggregates", aggregates, true)
}

func errorCases(ctx context.Context, conn *pgx.Conn, form string) error {
	expectError(ctx, conn, form+" unique violation", true, "INSERT INTO "+table+" (id) VALUES ($1)", 1)
	expectError(ctx, conn, form+" undefined table", true, "SELECT * FROM drv_go_no_such_table")
	expectError(ctx, conn, form+" division by zero", true, "SELECT c_int2 / $1 FROM "+table+" WHERE id = 1", 0)
	expectError(ctx, conn, form+" not null", true, "INSERT INTO "+table+" (id, c_required) VALUES ($1, $2)", 6, nil)
	expectError(ctx, conn, form+" syntax error", false, "SELEC 1")
	out("%s after errors: %s", form, scalar(ctx, conn, "SELECT 1"))

	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+table+" (id) VALUES (7)"); err != nil {
		return err
	}
	expectError(ctx, conn, form+" in block", true, "SELECT 1 / (id - 1) FROM "+table+" WHERE id = 1")
	expectError(ctx, conn, form+" aborted block", true, "SELECT * FROM "+table+" WHERE id = $1", 1)
	if err := tx.Rollback(ctx); err != nil {
		return err
	}
	ids, err := conn.Query(ctx, "SELECT id FROM "+table+" ORDER BY id")
	if err != nil {
		return err
	}
	return printRows(form+" after aborted block", ids, false)
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out("driver pgx v5")
	if bad, err := connect(ctx, mustEnv("PGPASSWORD")+"-wrong", pgx.QueryExecModeCacheStatement); err == nil {
		bad.Close(ctx)
		out("wrong password: CONNECTED")
	} else {
		reportError("wrong password", err, false)
	}

	binary, err := connect(ctx, mustEnv("PGPASSWORD"), pgx.QueryExecModeCacheStatement)
	if err != nil {
		fmt.Fprintf(os.Stderr, "connect: %v\n", err)
		os.Exit(1)
	}
	defer binary.Close(ctx)
	for _, name := range []string{"client_encoding", "DateStyle", "integer_datetimes", "standard_conforming_strings"} {
		out("parameter %s=%s", name, binary.PgConn().ParameterStatus(name))
	}
	step("setup", func() error { return setup(ctx, binary) })
	step("binary reads", func() error { return reads(ctx, binary, "binary") })
	step("binary errors", func() error { return errorCases(ctx, binary, "binary") })
	step("binary types", func() error { return typePaths(ctx, binary, "binary") })

	text, err := connect(ctx, mustEnv("PGPASSWORD"), pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		fmt.Fprintf(os.Stderr, "connect (simple protocol): %v\n", err)
		os.Exit(1)
	}
	defer text.Close(ctx)
	step("text reads", func() error { return reads(ctx, text, "text") })
	step("text errors", func() error { return errorCases(ctx, text, "text") })
	step("arrays", func() error { return errors.Join(arrays(ctx, binary, "binary"), arrays(ctx, text, "text")) })
	step("text types", func() error { return typePaths(ctx, text, "text") })
	step("binary tatp types", func() error { return tatpTypes(ctx, binary, "binary") })
	step("text tatp types", func() error { return tatpTypes(ctx, text, "text") })

	// LoadTypes: pgx's one query (WITH RECURSIVE over pg_type, pg_class,
	// pg_attribute, pg_range) that registers derived types such as arrays.
	step("load types", func() error {
		types, err := binary.LoadTypes(ctx, []string{"_int4", "_text", "_numeric", "pg_catalog._bool"})
		if err != nil {
			return err
		}
		for _, t := range types {
			out("load types: %s oid=%d", t.Name, t.OID)
		}
		binary.TypeMap().RegisterTypes(types)
		return nil
	})

	step("drop", func() error {
		_, err := binary.Exec(ctx, "DROP TABLE "+table)
		if err == nil {
			out("drop table: ok")
		}
		return err
	})
	out("done")
}
