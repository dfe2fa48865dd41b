package main

// The TATP-like table with uuid, jsonb and interval columns through pgx:
// loaded by raw COPY in text (tatp_ext.tsv) and in binary (the server's own
// binary COPY of that table), and by pgx's CopyFrom (binary, pgtype values);
// read back with pgx's types in the extended protocol and as text.

import (
	"bytes"
	"context"
	"crypto/md5"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
)

const tatpColumns = "s_id integer PRIMARY KEY, sub_uuid uuid NOT NULL UNIQUE, profile jsonb, " +
	"call_window interval, last_seen timestamptz, balance numeric(12,2), vlr_location bigint"

func tatpTypes(ctx context.Context, conn *pgx.Conn, form string) error {
	text := "tatp_ext_go_" + form
	binary := text + "_b"
	typed := text + "_t"
	data, err := os.ReadFile("../tatp_ext.tsv")
	if err != nil {
		return err
	}
	for _, table := range []string{text, binary, typed} {
		if _, err := conn.Exec(ctx, "CREATE TABLE "+table+" ("+tatpColumns+")"); err != nil {
			return err
		}
	}
	tag, err := conn.PgConn().CopyFrom(ctx, bytes.NewReader(data), "COPY "+text+" FROM STDIN")
	if err != nil {
		return err
	}
	out("tatp %s copy text: %s", form, tag)
	var dump bytes.Buffer
	if _, err := conn.PgConn().CopyTo(ctx, &dump, "COPY (SELECT * FROM "+text+" ORDER BY s_id) TO STDOUT (FORMAT binary)"); err != nil {
		return err
	}
	out("tatp %s binary copy out: %d bytes md5 %x", form, dump.Len(), md5.Sum(dump.Bytes()))
	if tag, err = conn.PgConn().CopyFrom(ctx, bytes.NewReader(dump.Bytes()), "COPY "+binary+" FROM STDIN (FORMAT binary)"); err != nil {
		return err
	}
	out("tatp %s copy binary: %s", form, tag)
	rows, err := conn.Query(ctx, "SELECT * FROM "+text+" ORDER BY s_id")
	if err != nil {
		return err
	}
	values, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]any, error) { return r.Values() })
	if err != nil {
		return err
	}
	n, err := conn.CopyFrom(ctx, pgx.Identifier{typed}, []string{"s_id", "sub_uuid", "profile", "call_window", "last_seen", "balance", "vlr_location"}, pgx.CopyFromRows(values))
	if err != nil {
		return err
	}
	out("tatp %s copyfrom typed: %d", form, n)
	for _, table := range []string{text, binary, typed} {
		rows, err := conn.Query(ctx, "SELECT * FROM "+table+" ORDER BY s_id")
		if err != nil {
			return err
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				return err
			}
			parts := make([]string, len(vals))
			for i, v := range vals {
				parts[i] = fmt.Sprintf("%T=%v", v, v)
			}
			out("tatp %s %s: %s", form, table, strings.Join(parts, "|"))
		}
		if err := rows.Err(); err != nil {
			return err
		}
	}
	var ids []int32
	rows, err = conn.Query(ctx, "SELECT s_id FROM "+text+" WHERE profile->>'name' = $1 OR call_window > $2::interval ORDER BY s_id", "sub 3", "3000 hours")
	if err != nil {
		return err
	}
	if ids, err = pgx.CollectRows(rows, pgx.RowTo[int32]); err != nil {
		return err
	}
	out("tatp %s filtered: %v", form, ids)
	_, err = conn.Exec(ctx, "DROP TABLE "+text+", "+binary+", "+typed)
	return err
}
