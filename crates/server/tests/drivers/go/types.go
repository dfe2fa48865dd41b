package main

// pgx's pgtype paths (issue 17 item 6): time.Time and pgtype.Date,
// Timestamp, Timestamptz, Numeric, UUID and Interval as parameters and
// results, with the extended protocol (binary) and the simple protocol
// (text), in a session whose TimeZone is not UTC (Asia/Kolkata, +05:30).

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

func numeric(text string) pgtype.Numeric {
	var n pgtype.Numeric
	if err := n.Scan(text); err != nil {
		panic(err)
	}
	return n
}

func typePaths(ctx context.Context, conn *pgx.Conn, form string) error {
	t := "drv_go_types_" + form
	for _, sql := range []string{
		"SET TIME ZONE 'Asia/Kolkata'",
		"DROP TABLE IF EXISTS " + t,
		"CREATE TABLE " + t + " (id int PRIMARY KEY, d date, ts timestamp, tstz timestamptz, n numeric(20,6), u uuid, iv interval)",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return err
		}
	}
	out("%s types: session zone %s", form, conn.PgConn().ParameterStatus("TimeZone"))
	plus0530 := time.FixedZone("+0530", 19800)
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		return err
	}
	insert := "INSERT INTO " + t + " VALUES ($1, $2, $3, $4, $5, $6, $7)"
	rows := [][]any{
		{1, time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), time.Date(2024, 3, 31, 2, 30, 15, 123456000, time.UTC),
			time.Date(2024, 10, 27, 1, 30, 0, 500000000, plus0530), numeric("12345.678901"),
			pgtype.UUID{Bytes: [16]byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}, Valid: true},
			pgtype.Interval{Months: 2, Days: 1, Microseconds: 7200000005, Valid: true}},
		{2, pgtype.Date{Time: time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), Valid: true},
			pgtype.Timestamp{Time: time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC), Valid: true},
			pgtype.Timestamptz{Time: time.Date(2024, 11, 3, 1, 30, 0, 0, newYork), Valid: true}, numeric("-0.000001"),
			pgtype.UUID{Valid: true}, pgtype.Interval{Days: -3, Microseconds: 3600000000, Valid: true}},
		{3, time.Date(2024, 7, 4, 0, 0, 0, 0, time.UTC), time.Date(2024, 7, 4, 0, 0, 0, 0, time.UTC),
			time.Date(2024, 3, 10, 2, 30, 0, 0, time.UTC), numeric("99999999999999.999999"),
			"ffffffff-ffff-ffff-ffff-ffffffffffff", "1 year 2 mons 3 days 04:05:06.789"},
		{4, nil, nil, nil, nil, nil, nil},
	}
	for _, row := range rows {
		if _, err := conn.Exec(ctx, insert, row...); err != nil {
			return fmt.Errorf("insert %v: %w", row[0], err)
		}
	}
	batch := &pgx.Batch{}
	for _, row := range rows[:2] {
		values := append([]any{10 + row[0].(int)}, row[1:]...)
		batch.Queue(insert, values...)
	}
	if err := conn.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("batch: %w", err)
	}

	select_ := "SELECT id, d, ts, tstz, n, u, iv FROM " + t + " ORDER BY id"
	r, err := conn.Query(ctx, select_)
	if err != nil {
		return err
	}
	if err := printRows(form+" types values", r, false); err != nil {
		return err
	}
	r, err = conn.Query(ctx, select_)
	if err != nil {
		return err
	}
	for r.Next() {
		var id int32
		var d pgtype.Date
		var ts pgtype.Timestamp
		var tstz pgtype.Timestamptz
		var n pgtype.Numeric
		var u pgtype.UUID
		var iv pgtype.Interval
		if err := r.Scan(&id, &d, &ts, &tstz, &n, &u, &iv); err != nil {
			r.Close()
			return err
		}
		nv, _ := n.Value()
		uv, _ := u.Value()
		out("%s types pgtype: %d|%v %s|%v %s|%v %s|%v|%v|%+v", form, id,
			d.Valid, d.Time.Format("2006-01-02"), ts.Valid, ts.Time.Format("2006-01-02T15:04:05.999999"),
			tstz.Valid, tstz.Time.UTC().Format(time.RFC3339Nano), nv, uv, iv)
	}
	r.Close()
	if err := r.Err(); err != nil {
		return err
	}

	// Parameters in WHERE and in date/time arithmetic across DST.
	checks := []struct {
		column string
		value  any
	}{
		{"d", rows[0][1]}, {"ts", rows[0][2]}, {"tstz", rows[0][3]}, {"n", rows[0][4]}, {"u", rows[0][5]}, {"iv", rows[0][6]},
		{"tstz", time.Date(2024, 10, 26, 20, 0, 0, 500000000, time.UTC)},
	}
	for _, c := range checks {
		var got string
		err := conn.QueryRow(ctx, "SELECT coalesce(array_agg(id ORDER BY id)::text, 'none') FROM "+t+" WHERE "+c.column+" = $1", c.value).Scan(&got)
		if err != nil {
			return fmt.Errorf("where %s: %w", c.column, err)
		}
		out("%s types where %s: %s", form, c.column, got)
	}
	var a, b string
	var day pgtype.Date
	err = conn.QueryRow(ctx, "SELECT ($1::timestamptz + interval '1 day')::text, ($1::timestamptz AT TIME ZONE 'Europe/Berlin')::text, $2::timestamptz::date",
		time.Date(2024, 3, 30, 12, 0, 0, 0, time.UTC), time.Date(2024, 12, 31, 20, 0, 0, 0, time.UTC)).Scan(&a, &b, &day)
	if err != nil {
		return err
	}
	out("%s types arithmetic: %s|%s|%s", form, a, b, day.Time.Format("2006-01-02"))
	var texts []string
	r, err = conn.Query(ctx, "SELECT tstz::text FROM "+t+" WHERE tstz IS NOT NULL ORDER BY id")
	if err != nil {
		return err
	}
	for r.Next() {
		var s string
		if err := r.Scan(&s); err != nil {
			r.Close()
			return err
		}
		texts = append(texts, s)
	}
	r.Close()
	out("%s types as text: %s", form, strings.Join(texts, "|"))
	for _, sql := range []string{"DROP TABLE " + t, "SET TIME ZONE 'UTC'"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return err
		}
	}
	return nil
}
