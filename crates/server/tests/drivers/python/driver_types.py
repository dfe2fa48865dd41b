"""psycopg 3 type paths (issue 17 item 6): date, naive and aware datetime,
Decimal, UUID and timedelta (interval) as parameters in text and binary
form, read back in both forms, in a session whose TimeZone is not UTC
(psycopg converts aware results to the zone the server reports).

client.py calls run(); every line goes through its out()/render_row().
"""

import datetime
import uuid
from decimal import Decimal
from zoneinfo import ZoneInfo

TABLE = "drv_python_types"

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
PLUS_0530 = datetime.timezone(datetime.timedelta(hours=5, minutes=30))

ROWS = [
    (1, datetime.date(2024, 2, 29), datetime.datetime(2024, 2, 29, 13, 45, 56, 123456),
     datetime.datetime(2024, 2, 29, 13, 45, 56, 123456, tzinfo=PLUS_0530), Decimal("12345.678901"),
     uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), datetime.timedelta(days=1, hours=2, microseconds=5)),
    (2, datetime.date(1970, 1, 1), datetime.datetime(1999, 12, 31, 23, 59, 59),
     datetime.datetime(2024, 3, 31, 3, 30, tzinfo=BERLIN), Decimal("-0.000001"),
     uuid.UUID(int=0), datetime.timedelta(days=-3, seconds=3600)),
    (3, datetime.date(2024, 7, 4), datetime.datetime(2024, 7, 4, 0, 0),
     datetime.datetime(2024, 11, 3, 1, 30, tzinfo=NEW_YORK, fold=1), Decimal("99999999999999.999999"),
     uuid.UUID("ffffffff-ffff-ffff-ffff-ffffffffffff"), datetime.timedelta(seconds=59, microseconds=999999)),
    (4, datetime.date(1, 1, 1), datetime.datetime(2000, 1, 1, 0, 0, 0, 1),
     datetime.datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=datetime.timezone.utc), Decimal("0"),
     uuid.UUID("12345678-1234-5678-1234-567812345678"), datetime.timedelta(0)),
    (5, None, None, None, None, None, None),
]


def run(conn, out, render_row):
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    conn.execute(f"CREATE TABLE {TABLE} (id int PRIMARY KEY, d date, ts timestamp, tstz timestamptz,"
                 " n numeric(20,6), u uuid, iv interval)")
    conn.execute("SET TIME ZONE 'Europe/Berlin'")
    out(f"types: session zone {conn.info.timezone}")
    insert = f"INSERT INTO {TABLE} VALUES (%s, %s, %s, %s, %s, %s, %s)"
    insert_binary = f"INSERT INTO {TABLE} VALUES (%b, %b, %b, %b, %b, %b, %b)"
    with conn.transaction():
        for row in ROWS[:2]:
            conn.execute(insert, row)
        for row in ROWS[2:4]:
            conn.execute(insert_binary, row)
        with conn.cursor() as cur:
            cur.executemany(insert_binary, [(10 + row[0],) + row[1:] for row in ROWS[:4]])
        conn.execute(insert, ROWS[4], prepare=True)

    select = f"SELECT id, d, ts, tstz, n, u, iv FROM {TABLE} ORDER BY id"
    for binary in (False, True):
        with conn.cursor(binary=binary) as cur:
            cur.execute(select)
            for row in cur.fetchall():
                out(f"types {'binary' if binary else 'text'}: {render_row(row)}")
    rows = conn.execute(f"SELECT tstz::text, ts::text, iv::text FROM {TABLE} WHERE id < 10 ORDER BY id").fetchall()
    for row in rows:
        out(f"types as text: {render_row(row)}")

    # Parameters in WHERE, each type against its column.
    for column, index in (("d", 1), ("ts", 2), ("tstz", 3), ("n", 4), ("u", 5), ("iv", 6)):
        for binary in (False, True):
            placeholder = "%b" if binary else "%s"
            cur = conn.execute(f"SELECT array_agg(id ORDER BY id)::text FROM {TABLE} WHERE {column} = {placeholder}",
                               (ROWS[0][index],))
            out(f"types where {column} {'binary' if binary else 'text'}: {render_row(cur.fetchone())}")

    # A naive datetime into timestamptz is read in the session's zone; an
    # aware one keeps its instant; date/time arithmetic across Berlin's DST.
    conn.execute(f"INSERT INTO {TABLE} (id, tstz) VALUES (%s, %s)", (20, datetime.datetime(2024, 3, 31, 2, 30)))
    conn.execute(f"INSERT INTO {TABLE} (id, tstz) VALUES (%s, %s::timestamp)", (21, datetime.datetime(2024, 10, 27, 2, 30)))
    out(f"types naive: {render_row(conn.execute(f'SELECT tstz, tstz::text FROM {TABLE} WHERE id IN (20, 21) ORDER BY id').fetchall()[0])}")
    out(f"types naive fold: {render_row(conn.execute(f'SELECT tstz, tstz::text FROM {TABLE} WHERE id = 21').fetchone())}")
    cur = conn.execute("SELECT %s::timestamptz + interval '1 day', %s::timestamptz + interval '24 hours',"
                       " %s::timestamptz AT TIME ZONE 'UTC', (%s::timestamptz)::date",
                       (datetime.datetime(2024, 3, 30, 12, tzinfo=BERLIN),) * 2
                       + (datetime.datetime(2024, 7, 1, 12, tzinfo=BERLIN),)
                       + (datetime.datetime(2024, 7, 1, 23, 30, tzinfo=datetime.timezone.utc),))
    out(f"types arithmetic: {render_row(cur.fetchone())}")
    cur = conn.execute("SELECT %s::date - %s::date, %s::numeric * 2, %s::uuid::text",
                       (datetime.date(2024, 3, 1), datetime.date(2024, 2, 1), Decimal("1.50"), str(ROWS[0][5])))
    out(f"types misc: {render_row(cur.fetchone())}")

    conn.execute("SET TIME ZONE 'America/New_York'")
    out(f"types: session zone {conn.info.timezone}")
    for binary in (False, True):
        with conn.cursor(binary=binary) as cur:
            cur.execute(f"SELECT id, tstz, tstz::date, extract(hour FROM tstz) FROM {TABLE} WHERE tstz IS NOT NULL ORDER BY id")
            for row in cur.fetchall():
                out(f"types new york {'binary' if binary else 'text'}: {render_row(row)}")
    conn.execute("SET TIME ZONE 'UTC'")
    conn.execute(f"DROP TABLE {TABLE}")
    out("types: done")
