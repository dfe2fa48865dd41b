package main

// Arrays through pgx: an int4[] / text[] / int8[] table, Go slices as
// parameters (`= ANY($1)`, whole-array inserts), scans into []int32 and
// []string, NULL elements through pgtype.Array, in the binary (cached
// statements) and text (simple protocol) forms.

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

const arrayTable = "drv_go_arrays"

func arrays(ctx context.Context, conn *pgx.Conn, form string) error {
	if form == "binary" {
		if _, err := conn.Exec(ctx, "CREATE TABLE "+arrayTable+" (id int PRIMARY KEY, ids int4[], names text[], bigs int8[])"); err != nil {
			return err
		}
		for _, row := range []struct {
			id    int32
			ids   []int32
			names []string
			bigs  []int64
		}{{1, []int32{1, 2, 3}, []string{"a", "b c", "", "NULL", `q"\`}, []int64{1 << 40}}, {2, []int32{}, []string{}, nil}, {3, []int32{7}, []string{"z"}, []int64{-1}}} {
			if _, err := conn.Exec(ctx, "INSERT INTO "+arrayTable+" VALUES ($1, $2, $3, $4)", row.id, row.ids, row.names, row.bigs); err != nil {
				return err
			}
		}
		out("arrays %s: inserted", form)
	}
	rows, err := conn.Query(ctx, "SELECT id, ids, names FROM "+arrayTable+" ORDER BY id")
	if err != nil {
		return err
	}
	for rows.Next() {
		var id int32
		var ids []int32
		var names []string
		if err := rows.Scan(&id, &ids, &names); err != nil {
			rows.Close()
			return err
		}
		quoted := make([]string, len(names))
		for i, n := range names {
			quoted[i] = quote(n)
		}
		out("arrays %s: row %d ids=%v names=[%s]", form, id, ids, strings.Join(quoted, ","))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, probe := range []struct {
		sql string
		arg any
	}{
		{"SELECT id FROM " + arrayTable + " WHERE id = ANY($1) ORDER BY id", []int32{3, 1, 99}},
		{"SELECT id FROM " + arrayTable + " WHERE id = ANY($1) ORDER BY id", []int32{}},
		{"SELECT id FROM " + arrayTable + " WHERE $1 = ANY(names) ORDER BY id", "b c"},
		{"SELECT id FROM " + arrayTable + " WHERE bigs[1] = ANY($1) ORDER BY id", []int64{-1, 1 << 40}},
		{"SELECT id FROM " + arrayTable + " WHERE names && $1 ORDER BY id", []string{"z", "a"}},
	} {
		found, err := conn.Query(ctx, probe.sql, probe.arg)
		if err != nil {
			return err
		}
		var got []string
		for found.Next() {
			var id int32
			if err := found.Scan(&id); err != nil {
				found.Close()
				return err
			}
			got = append(got, fmt.Sprint(id))
		}
		found.Close()
		if err := found.Err(); err != nil {
			return err
		}
		out("arrays %s: %v -> [%s]", form, probe.arg, strings.Join(got, ","))
	}
	var withNulls pgtype.Array[pgtype.Int4]
	if err := conn.QueryRow(ctx, "SELECT ARRAY[1, NULL, 3]").Scan(&withNulls); err != nil {
		return err
	}
	parts := make([]string, len(withNulls.Elements))
	for i, e := range withNulls.Elements {
		if e.Valid {
			parts[i] = fmt.Sprint(e.Int32)
		} else {
			parts[i] = "NULL"
		}
	}
	out("arrays %s: with NULLs [%s] dims=%v", form, strings.Join(parts, ","), withNulls.Dims)
	agg, err := conn.Query(ctx, "SELECT array_agg(id ORDER BY id DESC), cardinality(array_agg(id)) FROM "+arrayTable)
	if err != nil {
		return err
	}
	if err := printRows("arrays "+form+" agg", agg, true); err != nil {
		return err
	}
	if form == "text" {
		_, err := conn.Exec(ctx, "DROP TABLE "+arrayTable)
		return err
	}
	return nil
}
