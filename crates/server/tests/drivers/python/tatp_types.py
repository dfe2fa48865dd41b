"""The TATP-like table with uuid, jsonb and interval columns through psycopg 3:
loaded by COPY in text (tatp_ext.tsv) and in binary (the server's own binary
COPY of that table), read back with text and binary results. Called by
client.py; prints one line per result for the transcript."""

import hashlib
import json
import os

COLUMNS = ("s_id integer PRIMARY KEY, sub_uuid uuid NOT NULL UNIQUE, profile jsonb, "
           "call_window interval, last_seen timestamptz, balance numeric(12,2), vlr_location bigint")
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tatp_ext.tsv")


def render(value):
    if isinstance(value, (dict, list)):
        # Keys in the order the server sent them: jsonb's canonical order.
        return "json:" + json.dumps(value)
    return f"{type(value).__name__}:{value}"


def run(conn, out):
    with open(DATA, "rb") as f:
        data = f.read()
    text, binary = "tatp_ext_py", "tatp_ext_py_b"
    with conn.cursor() as cur:
        for table in (text, binary):
            cur.execute(f"CREATE TABLE {table} ({COLUMNS})")
        with cur.copy(f"COPY {text} FROM STDIN") as copy:
            copy.write(data)
        out(f"tatp copy text: {cur.rowcount}")
        dump = bytearray()
        with cur.copy(f"COPY (SELECT * FROM {text} ORDER BY s_id) TO STDOUT (FORMAT binary)") as copy:
            for chunk in copy:
                dump += chunk
        out(f"tatp binary copy out: {len(dump)} bytes md5 {hashlib.md5(dump).hexdigest()}")
        with cur.copy(f"COPY {binary} FROM STDIN (FORMAT binary)") as copy:
            copy.write(bytes(dump))
        out(f"tatp copy binary: {cur.rowcount}")
    conn.commit()
    for table in (text, binary):
        for mode in (False, True):
            with conn.cursor(binary=mode) as cur:
                cur.execute(f"SELECT * FROM {table} ORDER BY s_id")
                for row in cur:
                    out(f"tatp {table} {'binary' if mode else 'text'}: " + "|".join("NULL" if v is None else render(v) for v in row))
    with conn.cursor() as cur:
        cur.execute(f"SELECT s_id FROM {text} WHERE profile @> %s AND call_window < %s ORDER BY s_id",
                    ('{"tier": 1}', "10 days"))
        out("tatp filtered: " + ",".join(str(r[0]) for r in cur))
        cur.execute(f"DROP TABLE {text}, {binary}")
    conn.commit()
