"""Arrays through psycopg 3: Python lists as parameters (text and binary
dumps, `= ANY(%s)`, lists with None), lists back as results in the text
and binary forms, array columns of several types. Called from client.py's
main with its connection and its out/render helpers."""

import datetime
from decimal import Decimal


def run(conn, out, render):
    conn.execute("DROP TABLE IF EXISTS drv_python_arrays")
    conn.execute(
        "CREATE TABLE drv_python_arrays (id int PRIMARY KEY, ids int4[], names text[], amounts numeric(8,2)[], "
        "days date[], flags bool[])"
    )
    rows = [
        (1, [1, 2, None], ["a", "b c", "", "NULL", None, 'q"\\'], [Decimal("1.50"), None], [datetime.date(2024, 2, 29)], [True, False]),
        (2, [], [], [], [], []),
        (3, None, ["z"], None, None, None),
    ]
    for binary in (False, True):
        conn.execute("DELETE FROM drv_python_arrays")
        with conn.cursor(binary=binary) as cur:
            for row in rows:
                cur.execute("INSERT INTO drv_python_arrays VALUES (%s, %s, %s, %s, %s, %s)", row, prepare=True)
            cur.execute("SELECT * FROM drv_python_arrays ORDER BY id")
            for row in cur.fetchall():
                out(f"arrays binary={binary}: " + "|".join(
                    "[" + ",".join(render(v) for v in value) + "]" if isinstance(value, list) else render(value) for value in row))
            for ids in ([3, 1, 99], [], [2]):
                cur.execute("SELECT id FROM drv_python_arrays WHERE id = ANY(%s) ORDER BY id", (ids,))
                out(f"arrays binary={binary}: any {ids} -> {[r[0] for r in cur.fetchall()]}")
            cur.execute("SELECT id FROM drv_python_arrays WHERE names @> %s ORDER BY id", (["b c"],))
            out(f"arrays binary={binary}: contains -> {[r[0] for r in cur.fetchall()]}")
            cur.execute("SELECT array_agg(id ORDER BY id), ARRAY['x', NULL], cardinality(%s::int[]) FROM drv_python_arrays", ([5, 6],))
            out(f"arrays binary={binary}: {cur.fetchone()}")
    conn.execute("DROP TABLE drv_python_arrays")
