#!/usr/bin/env python3
"""regress_diff.py: run PostgreSQL regression inputs on PostgreSQL and on pgtier, statement by statement.

Each given `.sql` file (e.g. PostgreSQL 15's src/test/regress/sql/int4.sql) is split into statements
(psql meta-commands, lines starting with a backslash, are skipped) and each statement runs, in order,
on a fresh PostgreSQL database and on a fresh pgtier server (a new data directory per file), each over
one autocommit connection with the simple query protocol. Outcomes are compared as text, exactly as a
client receives them, and classified:

  same      both answer alike (same rows in the same order, or both succeed without rows, same tag)
  gap       pgtier errors where PostgreSQL answers (allowed: pgtier refuses what it cannot do)
  both-err  both error (`state-diff` counts those of them whose SQLSTATEs differ)
  ACCEPTS   pgtier answers where PostgreSQL errors: it ACCEPTS INVALID input
  WRONG     both answer, differently (rows, values, tag or column names)
  order     same rows in another order (a statement without a deciding ORDER BY; checked by eye)
  plan      EXPLAIN answered by both (plans differ by design; not compared)

A WRONG can follow from an earlier gap (a refused CREATE TEMP TABLE leaves the setup's table of that
name in place; a refused statement aborts pgtier's transaction block), so --details is read, not counted.

Output: one table row per file (area), and with --details FILE every statement that is not `same`,
with both outcomes; a WRONG's rows also as multisets, the rows only one side answered (`only pg`,
`only pgtier`), which shows a cascade (the rows a refused INSERT would have added) at a glance. The rule this measures (issue 18): where pgtier cannot answer exactly as
PostgreSQL does it must fail with a SQLSTATE, never answer differently, so ACCEPTS and WRONG must be 0.

Usage:
  python scripts/regress_diff.py --pgtier target/debug/pgtier --pg-url postgresql://... FILE.sql ...
  python scripts/regress_diff.py --pgtier target/debug/pgtier --pg-dir /tmp/pgdir FILE.sql ...
      [--setup REGRESS/sql/test_setup.sql --data-dir REGRESS/data] [--details FILE]

PostgreSQL 15's files expect the tables of test_setup.sql (int4_tbl, onek, tenk1, ...): --setup runs it
in each fresh database on both sides first (its `COPY t FROM :'filename'` sent as COPY FROM STDIN with
the data file), uncounted; --setup-sub rewrites its statements alike on both sides.

--pg-dir starts (if needed) the private PostgreSQL with `pgtier backend start --dir DIR` and uses the
URL it prints. Needs psycopg 3 (scripts/ensure-clients.sh installs it into .pgtier/clients/python).
"""

import argparse
import collections
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

import psycopg
from psycopg import pq

STATEMENT_TIMEOUT_S = 20


def split_statements(text):
    """Statements of a psql script, by psql's own lexing rules for what ends one (`;` outside quotes,
    comments and dollar quotes). A psql meta-command (a line starting with a backslash) comes back
    as its own item, starting with the backslash."""
    out, cur, i, n = [], [], 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and not "".join(cur).strip() and c == "\\":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(text[i:j].strip())
            cur, i = [], j
            continue
        at_line_start = c == "\n"
        if c == "-" and text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c == "/" and text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            cur.append(text[i:j])
            i = j
            continue
        if c == "'":
            escaped = i > 0 and text[i - 1] in "eE" and (i < 2 or not (text[i - 2].isalnum() or text[i - 2] == "_"))
            j = i + 1
            while j < n:
                if escaped and text[j] == "\\":
                    j += 2
                    continue
                if text[j] == "'":
                    if j + 1 < n and text[j + 1] == "'":
                        j += 2
                        continue
                    break
                j += 1
            cur.append(text[i:j + 1])
            i = j + 1
            continue
        if c == '"':
            j = text.find('"', i + 1)
            j = n - 1 if j < 0 else j
            cur.append(text[i:j + 1])
            i = j + 1
            continue
        if c == "$":
            m = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$", text[i:])
            if m and not (i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")):
                tag = m.group(0)
                j = text.find(tag, i + len(tag))
                j = n if j < 0 else j + len(tag)
                cur.append(text[i:j])
                i = j
                continue
        if c == ";":
            s = "".join(cur).strip()
            if s:
                out.append(s)
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    s = "".join(cur).strip()
    if s:
        out.append(s)
    return out


class Outcome:
    def __init__(self, ok, sqlstate=None, message=None, tag=None, names=None, rows=None):
        self.ok, self.sqlstate, self.message = ok, sqlstate, message
        self.tag, self.names, self.rows = tag, names, rows

    def brief(self, limit=12):
        if not self.ok:
            return f"ERROR {self.sqlstate}: {self.message}"
        if self.rows is None:
            return f"OK {self.tag}"
        rows = [" | ".join("NULL" if v is None else v for v in r) for r in self.rows[:limit]]
        more = f" (+{len(self.rows) - limit} rows)" if len(self.rows) > limit else ""
        return f"{self.tag} [{', '.join(self.names)}]\n      " + "\n      ".join(rows) + more


def row_difference(pg, tier, limit=12):
    """A WRONG's rows as multisets: those only one side answered (order ignored), to tell a
    cascade (rows an earlier refused statement would have added) from a wrong value."""
    if pg.rows is None or tier.rows is None:
        return ""
    only_pg, only_tier = collections.Counter(pg.rows), collections.Counter(tier.rows)
    only_pg, only_tier = only_pg - only_tier, only_tier - only_pg
    out = ""
    for label, rows in (("only pg:    ", only_pg), ("only pgtier:", only_tier)):
        rows = list(rows.elements())
        shown = [" | ".join("NULL" if v is None else v for v in r) for r in rows[:limit]]
        more = f" (+{len(rows) - limit} rows)" if len(rows) > limit else ""
        out += f"  {label} {len(rows)}\n" + "".join(f"      {r}\n" for r in shown) + (f"      {more}\n" if more else "")
    return out


def run(conn, sql):
    """One statement through libpq's PQexec, as text; cancelled past STATEMENT_TIMEOUT_S."""
    timer = threading.Timer(STATEMENT_TIMEOUT_S, lambda: conn.cancel())
    timer.start()
    try:
        res = conn.pgconn.exec_(sql.encode())
    except psycopg.OperationalError as e:
        return Outcome(False, "CONN", str(e).strip())
    finally:
        timer.cancel()
    st = res.status
    if st in (pq.ExecStatus.FATAL_ERROR, pq.ExecStatus.BAD_RESPONSE, pq.ExecStatus.NONFATAL_ERROR):
        code = res.error_field(pq.DiagnosticField.SQLSTATE)
        msg = res.error_field(pq.DiagnosticField.MESSAGE_PRIMARY)
        return Outcome(False, code.decode() if code else "?????", msg.decode(errors="replace") if msg else "")
    tag = (res.command_status or b"").decode()
    if st == pq.ExecStatus.TUPLES_OK:
        names = [res.fname(k).decode(errors="replace") for k in range(res.nfields)]
        rows = []
        for r in range(res.ntuples):
            row = []
            for k in range(res.nfields):
                v = res.get_value(r, k)
                row.append(None if v is None else v.decode(errors="replace"))
            rows.append(tuple(row))
        return Outcome(True, tag=tag, names=names, rows=rows)
    if st in (pq.ExecStatus.COPY_IN, pq.ExecStatus.COPY_OUT):
        return Outcome(False, "COPY", "COPY is not driven by this script")
    return Outcome(True, tag=tag)


def classify(pg, tier, sql):
    if pg.ok and not tier.ok:
        return "gap"
    if not pg.ok and not tier.ok:
        return "both-err"
    if not pg.ok and tier.ok:
        return "ACCEPTS"
    if re.match(r"(?is)explain\b", sql):
        # Plans are each system's own; only whether EXPLAIN is accepted is compared.
        return "plan"
    if pg.rows is None and tier.rows is None:
        return "same" if pg.tag == tier.tag else "WRONG"
    if pg.rows is None or tier.rows is None or pg.names != tier.names or pg.tag != tier.tag:
        return "WRONG"
    if pg.rows == tier.rows:
        return "same"
    key = lambda r: tuple("\x00" if v is None else v for v in r)
    if sorted(pg.rows, key=key) == sorted(tier.rows, key=key):
        return "order"
    return "WRONG"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Tier:
    """A pgtier server on a fresh data directory, trust auth on loopback."""

    def __init__(self, binary):
        self.dir = tempfile.mkdtemp(prefix="regress_diff_")
        self.port = free_port()
        cfg = os.path.join(self.dir, "pgtier.toml")
        with open(cfg, "w") as f:
            f.write(f'listen = "127.0.0.1:{self.port}"\ndata_dir = "data"\ncommit_mode = "async"\n'
                    '[auth]\nmethod = "trust"\n')
        self.log = open(os.path.join(self.dir, "server.log"), "w")
        self.proc = subprocess.Popen([binary, "serve", "--config", cfg], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"pgtier serve did not start; see {self.log.name}")
                time.sleep(0.1)

    def url(self):
        return f"postgresql://regress@127.0.0.1:{self.port}/regress"

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def pg_url_from_dir(binary, d):
    out = subprocess.run([binary, "backend", "start", "--dir", d], check=True, capture_output=True, text=True).stdout
    urls = [w for w in out.split() if w.startswith("postgres")]
    if not urls:
        sys.exit(f"`pgtier backend start --dir {d}` printed no URL:\n{out}")
    return urls[-1]


def with_db(url, db):
    m = re.match(r"^(postgres(?:ql)?://[^/?]*)(/[^?]*)?(\?.*)?$", url)
    if not m:
        sys.exit(f"cannot read URL {url}")
    return f"{m.group(1)}/{db}{m.group(3) or ''}"


CLASSES = ["same", "gap", "both-err", "ACCEPTS", "WRONG", "order", "plan"]
# What PostgreSQL answers (it errs on the rest): the base of the identical share.
ANSWERED = ["same", "gap", "WRONG", "order", "plan"]

# The 33 areas issues 18 and 37 measure (`--areas REGRESS_SQL_DIR`): integers,
# numeric, floats, strings, arrays, dates and times, joins, subqueries,
# aggregates, windows, WITH, INSERT/UPDATE/DELETE, json. Their goal: at least
# 80% of what PostgreSQL answers answered identically, no WRONG that is not a
# cascade of a refusal, no ACCEPTS.
AREAS = [
    "int2", "int4", "int8", "numeric", "float4", "float8", "boolean",
    "text", "varchar", "char", "strings", "arrays",
    "date", "time", "timetz", "timestamp", "timestamptz", "interval",
    "select", "select_distinct", "case", "join", "subselect", "union", "limit",
    "aggregates", "window", "with", "insert", "update", "delete", "json", "jsonb",
]


def copy_in(conn, sql, data_path):
    """`COPY t FROM :'filename'` of the regression setup, sent as COPY FROM STDIN with the file's bytes."""
    stmt = re.sub(r"FROM\s+:'filename'", "FROM STDIN", sql, flags=re.I)
    try:
        with open(data_path, "rb") as f, conn.cursor() as cur:
            with cur.copy(stmt) as cp:
                cp.write(f.read())
        return None
    except psycopg.Error as e:
        return str(e).strip().splitlines()[0]


def setup(args, *conns):
    """The regression suite's test_setup.sql (its tables and their data files) on every connection;
    failures are listed on stderr, not counted: they show as gaps in the files that use the table."""
    with open(args.setup, encoding="utf-8") as f:
        stmts = split_statements(f.read())
    data_file = None
    for sql in stmts:
        m = re.match(r"\\set\s+filename\s+:abs_srcdir\s+'/data/([^']+)'", sql)
        if m:
            data_file = os.path.join(args.data_dir, m.group(1))
            continue
        if sql.startswith("\\"):
            continue
        for pat, repl in args.setup_sub:
            sql = re.sub(pat, repl, sql)
        for n, conn in enumerate(conns):
            if ":'filename'" in sql and data_file:
                err = copy_in(conn, sql, data_file)
            else:
                o = run(conn, sql)
                err = None if o.ok else f"{o.sqlstate} {o.message}"
            if err and args.verbose:
                print(f"    setup on {'pgtier' if n else 'PostgreSQL'}: {sql.splitlines()[0][:60]}: {err}", file=sys.stderr)


def run_file(path, args, pg_admin_url, details):
    area = os.path.splitext(os.path.basename(path))[0]
    with open(path, encoding="utf-8", errors="replace") as f:
        stmts = split_statements(f.read())
    db = f"regress_diff_{re.sub(r'[^a-z0-9_]', '_', area.lower())}"
    with psycopg.connect(pg_admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{db}" TEMPLATE template0')
    counts = dict.fromkeys(CLASSES + ["state-diff", "run"], 0)
    tier = Tier(args.pgtier)
    try:
        pg = psycopg.connect(with_db(pg_admin_url, db), autocommit=True)
        tc = psycopg.connect(tier.url(), autocommit=True)
        if args.setup:
            setup(args, pg, tc)
        i = 0
        for sql in stmts:
            if sql.startswith("\\"):
                continue
            i += 1
            a = run(pg, sql)
            b = run(tc, sql)
            if b.sqlstate == "CONN" or not tier.alive():
                b = Outcome(False, "CRASH", f"pgtier died or dropped the connection: {b.message}")
                tier.stop()
                tier = Tier(args.pgtier)
                tc = psycopg.connect(tier.url(), autocommit=True)
            c = classify(a, b, sql)
            counts["run"] += 1
            counts[c] += 1
            if c == "both-err" and a.sqlstate != b.sqlstate:
                counts["state-diff"] += 1
            if details is not None and (c != "same" or args.all):
                if c == "both-err" and a.sqlstate == b.sqlstate and not args.all:
                    continue
                details.write(f"=== {area} #{i} {c}\n{sql}\n  pg:     {a.brief()}\n  pgtier: {b.brief()}\n")
                if c == "WRONG":
                    details.write(row_difference(a, b))
        pg.close()
        tc.close()
    finally:
        tier.stop()
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    return area, counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="regression input files (.sql)")
    ap.add_argument("--areas", metavar="REGRESS_SQL_DIR",
                    help=f"also run the {len(AREAS)} areas of issues 18/37 from this src/test/regress/sql directory")
    ap.add_argument("--pgtier", required=True, help="the pgtier binary (runs `serve`; `backend start` for --pg-dir)")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--pg-url", help="a PostgreSQL URL whose user may create databases")
    g.add_argument("--pg-dir", help="directory of the private PostgreSQL (`pgtier backend start --dir`)")
    ap.add_argument("--details", help="write each statement that is not `same` (and state-differing errors) here")
    ap.add_argument("--all", action="store_true", help="with --details: every statement")
    ap.add_argument("--setup", help="run this script first in each database (PostgreSQL 15's test_setup.sql)")
    ap.add_argument("--setup-sub", action="append", default=[], type=lambda v: tuple(v.split("//", 1)),
                    metavar="REGEX//REPLACEMENT",
                    help="rewrite --setup's statements on both sides, e.g. '\\sname(\\s*[,)])// text\\1' to give "
                         "onek/tenk1 text columns where pgtier lacks the name type (repeatable)")
    ap.add_argument("--data-dir", default=".", help="where --setup's COPY data files are (src/test/regress/data)")
    ap.add_argument("--verbose", action="store_true", help="list setup statements that fail")
    ap.add_argument("--json", help="write the per-area counts here as JSON")
    args = ap.parse_args()
    if args.areas:
        args.files += [os.path.join(args.areas, f"{area}.sql") for area in AREAS]
    if not args.files:
        ap.error("no files: give .sql files or --areas")
    pg_url = args.pg_url or pg_url_from_dir(args.pgtier, args.pg_dir)
    details = open(args.details, "w") if args.details else None
    results = []
    for p in args.files:
        area, counts = run_file(p, args, pg_url, details)
        results.append((area, counts))
        print(f"  {area}: " + ", ".join(f"{k} {counts[k]}" for k in ["run"] + CLASSES + ["state-diff"]), file=sys.stderr, flush=True)
    if details:
        details.close()
    cols = ["run"] + CLASSES + ["state-diff"]
    print("| area | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    total = dict.fromkeys(cols, 0)
    for area, c in results:
        print(f"| {area} | " + " | ".join(str(c[k]) for k in cols) + " |")
        for k in cols:
            total[k] += c[k]
    print("| **total** | " + " | ".join(str(total[k]) for k in cols) + " |")
    answered = sum(total[k] for k in ANSWERED)
    if answered:
        print(f"\nPostgreSQL answers {answered}; pgtier answers {total['same']} of them identically "
              f"({100 * total['same'] / answered:.1f}%), WRONG {total['WRONG']}, ACCEPTS {total['ACCEPTS']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({a: c for a, c in results}, f, indent=1)


if __name__ == "__main__":
    main()
