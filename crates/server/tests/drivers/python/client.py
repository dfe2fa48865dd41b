"""psycopg 3 (pure Python, system libpq) against a PostgreSQL-compatible server.

Connection parameters come from PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE.
Prints one normalized line per result or error to stdout; the same program run
against PostgreSQL and against pgtier must print the same transcript
(crates/server/tests/drivers.rs compares them).
"""

import datetime
import os
import sys
from decimal import Decimal

import psycopg
from psycopg import sql

import driver_types

TABLE = "drv_python"

COLUMNS = (
    "id", "c_int2", "c_int8", "c_numeric", "c_real", "c_double", "c_text",
    "c_varchar", "c_char", "c_bool", "c_date", "c_ts", "c_bytea",
)

ROWS = [
    (1, 32767, 9223372036854775807, Decimal("123456789.125"), 0.1, 1.0000000000000002,
     'h\u00e9llo \u2603 "q" \\ end', "varchar", "ab", True,
     datetime.date(2024, 2, 29), datetime.datetime(2024, 2, 29, 13, 45, 56, 123456),
     b"\x00\xff\x10'"),
    (2, -32768, -9223372036854775808, Decimal("-0.001"), -3.5e-8, -1e300,
     "", "", "", False,
     datetime.date(1970, 1, 1), datetime.datetime(1999, 12, 31, 23, 59, 59), b""),
    (3, None, None, None, None, None, None, None, None, None, None, None, None),
]


def out(line):
    print(line, flush=True)


def render(value):
    """Canonical text of one value, whatever format it travelled in."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(value).hex()
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Decimal):
        return "D" + str(value)
    if isinstance(value, str):
        return '"' + value.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    return f"{type(value).__name__}:{value}"


def render_row(row):
    return "|".join(render(value) for value in row)


def describe(cursor):
    parts = []
    for column in cursor.description:
        parts.append(
            f"{column.name}:{column.type_code}"
            f"/size={column.internal_size}/prec={column.precision}/scale={column.scale}"
            f"/disp={column.display_size}"
        )
    return ",".join(parts)


def expect_error(label, conn, statement, params=None, binary=False, show_message=True):
    try:
        with conn.cursor(binary=binary) as cur:
            cur.execute(statement, params)
            if cur.description is not None:
                cur.fetchall()
        out(f"{label}: NO ERROR")
    except psycopg.Error as error:
        diag = error.diag
        message = f" {diag.message_primary}" if show_message else ""
        out(f"{label}: error {error.sqlstate}{message}")
        if diag.message_detail and show_message:
            out(f"{label}: detail {diag.message_detail}")


def connect(**overrides):
    params = dict(
        host=os.environ["PGHOST"],
        port=os.environ["PGPORT"],
        user=os.environ["PGUSER"],
        password=os.environ["PGPASSWORD"],
        dbname=os.environ["PGDATABASE"],
        connect_timeout=10,
        autocommit=True,
    )
    params.update(overrides)
    return psycopg.connect(**params)


def main():
    out(f"driver psycopg {psycopg.__version__} impl={psycopg.pq.__impl__}")
    try:
        connect(password=os.environ["PGPASSWORD"] + "-wrong").close()
        out("wrong password: CONNECTED")
    except psycopg.OperationalError as error:
        expected = f'password authentication failed for user "{os.environ["PGUSER"]}"'
        out(f"wrong password: rejected, says '{expected}': {expected in str(error)}")

    conn = connect()
    for name in ("client_encoding", "DateStyle", "integer_datetimes", "standard_conforming_strings"):
        out(f"parameter {name}={conn.info.parameter_status(name)}")
    print(f"server TimeZone={conn.info.parameter_status('TimeZone')}", file=sys.stderr)

    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    conn.execute(
        f"""CREATE TABLE {TABLE} (
            id integer PRIMARY KEY,
            c_int2 smallint,
            c_int8 bigint,
            c_numeric numeric(15,3),
            c_real real,
            c_double double precision,
            c_text text,
            c_varchar varchar(20),
            c_char char(8),
            c_bool boolean,
            c_date date,
            c_ts timestamp,
            c_bytea bytea,
            c_required text NOT NULL DEFAULT 'required'
        )"""
    )
    out("create table: ok")

    insert = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        sql.Identifier(TABLE),
        sql.SQL(", ").join(sql.Identifier(c) for c in COLUMNS),
        sql.SQL(", ").join(sql.Placeholder() for _ in COLUMNS),
    )
    # Committed transaction: prepared (named server-side statement) INSERTs.
    with conn.transaction():
        with conn.cursor() as cur:
            for row in ROWS:
                cur.execute(insert, row, prepare=True)
                out(f"insert id={row[0]}: rowcount={cur.rowcount}")
    out("commit: ok")

    # Rolled-back transaction: the row must not survive.
    with conn.transaction(force_rollback=True):
        conn.execute(insert, (10, 1, 1, Decimal("1"), 1.0, 1.0, "gone", "gone", "gone", True,
                              datetime.date(2000, 1, 1), datetime.datetime(2000, 1, 1), b"x"),
                     prepare=True)
        out(f"inside rollback: count={conn.execute(f'SELECT count(*) FROM {TABLE}').fetchone()[0]}")
    out(f"after rollback: count={conn.execute(f'SELECT count(*) FROM {TABLE}').fetchone()[0]}")

    # Prepared UPDATE and DELETE inside one transaction.
    with conn.transaction():
        cur = conn.execute(
            f"UPDATE {TABLE} SET c_text = %s, c_real = c_real * 2, c_int8 = c_int8 - %s WHERE id = %s",
            ("updated", 7, 1), prepare=True)
        out(f"update id=1: rowcount={cur.rowcount}")
        cur = conn.execute(f"UPDATE {TABLE} SET c_bool = NOT c_bool WHERE id > %s", (100,), prepare=True)
        out(f"update none: rowcount={cur.rowcount}")
        conn.execute(insert, (4,) + ROWS[0][1:], prepare=True)
        cur = conn.execute(f"DELETE FROM {TABLE} WHERE id = %s", (4,), prepare=True)
        out(f"delete id=4: rowcount={cur.rowcount}")
        cur = conn.execute(f"INSERT INTO {TABLE} (id, c_text) VALUES (%s, %s) RETURNING id, c_required, c_text",
                           (5, "returned"), prepare=True)
        out(f"insert returning: {render_row(cur.fetchone())}")
    out("commit: ok")

    select_all = f"SELECT {', '.join(COLUMNS)}, c_required FROM {TABLE} ORDER BY id"
    for binary in (False, True):
        form = "binary" if binary else "text"
        with conn.cursor(binary=binary) as cur:
            cur.execute(select_all)
            out(f"{form} columns: {describe(cur)}")
            for row in cur.fetchall():
                out(f"{form} row: {render_row(row)}")
            # Parameters sent in the same format as the results (%b / %t).
            marker = "%b" if binary else "%t"
            cur.execute(
                f"SELECT id, c_numeric, c_ts, c_bytea FROM {TABLE} "
                f"WHERE c_int8 > {marker} AND c_date >= {marker} AND c_bytea <> {marker} ORDER BY id",
                (-9223372036854775808, datetime.date(1970, 1, 1), b"nothing"), prepare=True)
            for row in cur.fetchall():
                out(f"{form} filtered: {render_row(row)}")
            cur.execute(
                f"SELECT {marker}::numeric(10,2) AS n, {marker}::text AS t, {marker}::bytea AS b, "
                f"{marker}::timestamp AS ts, {marker}::boolean AS flag",
                (Decimal("12.345"), "x\ty", b"\x01\x02", datetime.datetime(2001, 2, 3, 4, 5, 6, 7), False))
            out(f"{form} params: {render_row(cur.fetchone())}")
            cur.execute(f"SELECT count(*), min(c_date), max(c_ts), sum(c_int2) FROM {TABLE}")
            out(f"{form} aggregates: {render_row(cur.fetchone())}")

    # Errors the driver raises as typed exceptions with a SQLSTATE.
    expect_error("unique violation", conn, f"INSERT INTO {TABLE} (id) VALUES (1)")
    expect_error("undefined table", conn, "SELECT * FROM drv_python_no_such_table")
    expect_error("division by zero", conn, f"SELECT c_int2 / %s FROM {TABLE} WHERE id = 1", (0,))
    expect_error("not null", conn, f"INSERT INTO {TABLE} (id, c_required) VALUES (%s, %s)", (6, None))
    expect_error("syntax error", conn, "SELEC 1", show_message=False)
    out(f"after errors: {conn.execute('SELECT 1').fetchone()[0]}")

    # An error inside a transaction block aborts it until ROLLBACK.
    conn.execute("BEGIN")
    conn.execute(f"INSERT INTO {TABLE} (id) VALUES (7)")
    expect_error("in block", conn, f"SELECT 1 / (id - 1) FROM {TABLE} WHERE id = 1")
    expect_error("aborted block", conn, "SELECT 1")
    expect_error("aborted block binary", conn, f"SELECT * FROM {TABLE} WHERE id = %s", (1,), binary=True)
    conn.execute("ROLLBACK")
    out(f"after aborted block: ids={[r[0] for r in conn.execute(f'SELECT id FROM {TABLE} ORDER BY id')]}")
    out(f"transaction status: {conn.info.transaction_status.name}")

    # Nested transactions: psycopg's conn.transaction() inside another is a
    # SAVEPOINT; a failing inner block is rolled back to it alone.
    with conn.transaction():
        conn.execute(f"UPDATE {TABLE} SET c_text = %s WHERE id = %s", ("outer", 1), prepare=True)
        try:
            with conn.transaction():
                conn.execute(f"UPDATE {TABLE} SET c_text = %s WHERE id = %s", ("inner", 1), prepare=True)
                conn.execute(f"INSERT INTO {TABLE} (id) VALUES (%s)", (8,))
                with conn.transaction():
                    conn.execute(f"INSERT INTO {TABLE} (id) VALUES (%s)", (9,))
                conn.execute(f"INSERT INTO {TABLE} (id) VALUES (%s)", (1,))
        except psycopg.Error as error:
            out(f"inner transaction: error {error.sqlstate}, status {conn.info.transaction_status.name}")
        with conn.transaction():
            conn.execute(f"INSERT INTO {TABLE} (id) VALUES (%s)", (8,))
        conn.execute("SAVEPOINT manual")
        conn.execute(f"DELETE FROM {TABLE} WHERE id = %s", (8,))
        expect_error("after savepoint", conn, f"INSERT INTO {TABLE} (id) VALUES (%s)", (2,))
        out(f"failed inner: status {conn.info.transaction_status.name}")
        conn.execute("ROLLBACK TO SAVEPOINT manual")
        out(f"after rollback to: status {conn.info.transaction_status.name}")
    out(f"after nested: {render_row(conn.execute(f'SELECT c_text FROM {TABLE} WHERE id = 1').fetchone())} "
        f"ids={[r[0] for r in conn.execute(f'SELECT id FROM {TABLE} ORDER BY id')]}")
    conn.execute(f"DELETE FROM {TABLE} WHERE id = 8")

    # timestamptz: an instant in, the same instant out (shown in UTC, the session's zone).
    instant = datetime.datetime(2024, 2, 29, 13, 45, 56, 123456, tzinfo=datetime.timezone(datetime.timedelta(hours=5)))
    for binary in (False, True):
        with conn.cursor(binary=binary) as cur:
            cur.execute("SELECT %s::timestamptz, '2024-03-01 01:30:00+02'::timestamptz, %s::timestamptz",
                        (instant, "1999-12-31 23:59:59-05:30"))
            out(f"timestamptz {'binary' if binary else 'text'}: {render_row(cur.fetchone())}")

    # Surrogate keys: serial and identity columns, read back through RETURNING.
    conn.execute("DROP TABLE IF EXISTS drv_python_keys")
    conn.execute("CREATE TABLE drv_python_keys (id serial PRIMARY KEY, g bigint GENERATED ALWAYS AS IDENTITY, v text)")
    with conn.transaction():
        for v in ("a", "b"):
            cur = conn.execute("INSERT INTO drv_python_keys (v) VALUES (%s) RETURNING id, g, v", (v,), prepare=True)
            out(f"generated keys: {render_row(cur.fetchone())}")
    expect_error("identity always", conn, "INSERT INTO drv_python_keys (g, v) VALUES (%s, %s)", (5, "c"))
    cur = conn.execute("SELECT currval('drv_python_keys_id_seq'), pg_get_serial_sequence('drv_python_keys', 'g')")
    out(f"currval: {render_row(cur.fetchone())}")
    conn.execute("DROP TABLE drv_python_keys")

    # A CHECK constraint's violation, with PostgreSQL's message, detail and constraint name.
    conn.execute("DROP TABLE IF EXISTS drv_python_check")
    conn.execute("CREATE TABLE drv_python_check (id int PRIMARY KEY, qty int CHECK (qty > 0), price numeric(6,2))")
    expect_error("check violation", conn, "INSERT INTO drv_python_check VALUES (%s, %s, %s)", (1, 0, Decimal("9.5")))
    try:
        conn.execute("UPDATE drv_python_check SET qty = -1")
        conn.execute("INSERT INTO drv_python_check VALUES (2, -2, NULL)")
    except psycopg.Error as error:
        out(f"check constraint name: {error.diag.constraint_name}")
    conn.execute("DROP TABLE drv_python_check")

    # The input word 'now' through the extended protocol: each autocommitted
    # run of the same text reads its own transaction's start, while a
    # statement prepared on the server keeps the instant of its Parse.
    conn.execute("CREATE TABLE drv_python_now (k int, t timestamptz)")
    for _ in range(2):
        conn.execute("INSERT INTO drv_python_now VALUES (%s, 'now')", (1,))
        conn.execute("INSERT INTO drv_python_now VALUES (%s, 'now')", (2,), prepare=True)
        conn.execute("SELECT count(*) FROM generate_series(1, 20000)")
    cur = conn.execute("SELECT k, count(*), count(DISTINCT t), bool_and(t < now()) FROM drv_python_now GROUP BY k ORDER BY k")
    out(f"'now' per run / prepared: {[render_row(r) for r in cur]}")
    with conn.transaction():
        cur = conn.execute("SELECT %s::timestamptz = now(), 'now'::timestamptz = now(), 'today'::date = current_date", ("now",))
        out(f"'now' in a block: {render_row(cur.fetchone())}")
    conn.execute("DROP TABLE drv_python_now")

    # Statements prepared before an ALTER changed their result: psycopg
    # deallocates its own after DDL and prepares them again (the new shape);
    # an SQL PREPARE it does not know of is what PostgreSQL says it is then.
    conn.execute("CREATE TABLE drv_python_shape (id int PRIMARY KEY, a int)")
    conn.execute("INSERT INTO drv_python_shape VALUES (1, 10)")
    conn.execute("PREPARE drv_shape_q AS SELECT * FROM drv_python_shape WHERE id = $1")
    for _ in range(2):
        conn.execute("SELECT * FROM drv_python_shape WHERE id = %s", (1,), prepare=True)
    conn.execute("ALTER TABLE drv_python_shape ADD COLUMN b text DEFAULT 'x'")
    cur = conn.execute("SELECT * FROM drv_python_shape WHERE id = %s", (1,), prepare=True)
    out(f"prepared after alter: {[d.name for d in cur.description]} {render_row(cur.fetchone())}")
    expect_error("sql prepare after alter", conn, "EXECUTE drv_shape_q(1)")
    conn.execute("DROP TABLE drv_python_shape")

    __import__("arrays").run(conn, out, render)
    driver_types.run(conn, out, render_row)
    __import__("tatp_types").run(conn, out)

    conn.execute(f"DROP TABLE {TABLE}")
    out("drop table: ok")
    conn.close()
    out("done")


if __name__ == "__main__":
    main()
