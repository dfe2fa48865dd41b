-- psql against a PostgreSQL-compatible server; run by crates/server/tests/drivers.rs as
--   psql -X -q -v ON_ERROR_STOP=1 -f main.sql    (every statement here must succeed)
-- with PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE set. Its output (stdout and
-- stderr) from PostgreSQL and from pgtier must be equal.
\pset null NULL
DROP TABLE IF EXISTS drv_psql;
CREATE TABLE drv_psql (
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
);
-- Prepared DML inside a committed transaction.
BEGIN;
PREPARE drv_ins (integer, smallint, bigint, numeric, real, double precision, text, varchar, char(8),
                 boolean, date, timestamp, bytea) AS
    INSERT INTO drv_psql (id, c_int2, c_int8, c_numeric, c_real, c_double, c_text, c_varchar, c_char,
                          c_bool, c_date, c_ts, c_bytea)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13);
EXECUTE drv_ins(1, 32767, 9223372036854775807, 123456789.125, 0.1, 1.0000000000000002,
                E'h\u00e9llo \u2603 "q" \\ end', 'varchar', 'ab', true, '2024-02-29',
                '2024-02-29 13:45:56.123456', '\x00ff1027');
EXECUTE drv_ins(2, -32768, -9223372036854775808, -0.001, -3.5e-8, -1e300, '', '', '', false,
                '1970-01-01', '1999-12-31 23:59:59', '\x');
EXECUTE drv_ins(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
COMMIT;
\echo 'commit: ok'

-- A rolled-back transaction leaves nothing behind.
BEGIN;
EXECUTE drv_ins(10, 1, 1, 1, 1, 1, 'gone', 'gone', 'gone', true, '2000-01-01', '2000-01-01', '\x00');
SELECT count(*) AS inside_rollback FROM drv_psql;
ROLLBACK;
SELECT count(*) AS after_rollback FROM drv_psql;

-- Prepared UPDATE and DELETE, RETURNING.
BEGIN;
PREPARE drv_upd (text, bigint, integer) AS
    UPDATE drv_psql SET c_text = $1, c_real = c_real * 2, c_int8 = c_int8 - $2 WHERE id = $3;
\set QUIET off
EXECUTE drv_upd('updated', 7, 1);
EXECUTE drv_upd('nobody', 0, 999);
EXECUTE drv_ins(4, 4, 4, 4, 4, 4, 'four', 'four', 'four', false, '2004-04-04', '2004-04-04 04:04:04', '\x04');
DELETE FROM drv_psql WHERE id = 4;
INSERT INTO drv_psql (id, c_text) VALUES (5, 'returned') RETURNING id, c_required, c_text;
\set QUIET on
COMMIT;
DEALLOCATE drv_ins;
DEALLOCATE drv_upd;

SELECT id, c_int2, c_int8, c_numeric, c_real, c_double, c_text, c_varchar, c_char, c_bool, c_date, c_ts,
       c_bytea, c_required
  FROM drv_psql ORDER BY id;
\x on
SELECT * FROM drv_psql WHERE id = 1;
\x off
-- \gset and variables in later statements.
SELECT c_int8 AS big, c_date AS day FROM drv_psql WHERE id = 1 \gset
\echo 'gset:' :big :day
SELECT id FROM drv_psql WHERE c_int8 = :big AND c_date = :'day';
SELECT count(*), min(c_date), max(c_ts), sum(c_int2), length(c_text) AS len
  FROM drv_psql GROUP BY length(c_text) ORDER BY len NULLS FIRST;
SELECT 12.345::numeric(10,2) AS n, E'x\ty'::text AS t, '\x0102'::bytea AS b,
       '2001-02-03 04:05:06.000007'::timestamp AS ts, false AS flag, 1.5::real AS r, -0.25::float8 AS d;
DROP TABLE drv_psql;
-- The input word 'now' is the transaction's start: each run of the same
-- text reads its own (the server caches plans by text, not these).
CREATE TABLE drv_now (k int, t timestamptz);
INSERT INTO drv_now VALUES (1, 'now');
SELECT count(*) FROM generate_series(1, 20000);
INSERT INTO drv_now VALUES (1, 'now');
SELECT count(*), count(DISTINCT t), bool_and(t < now()) FROM drv_now;
SELECT 'now'::timestamptz = now() AS same, 'today'::date = current_date AS today;
BEGIN;
COPY drv_now FROM STDIN;
3	now
3	today
\.
SELECT count(*) FILTER (WHERE t = now()) AS now, count(*) FILTER (WHERE t = date_trunc('day', now())) AS today FROM drv_now WHERE k = 3;
COMMIT;
DROP TABLE drv_now;
-- The same text after an ALTER changed its result: planned afresh, as
-- PostgreSQL parses every Query message again.
CREATE TABLE drv_shape (id int PRIMARY KEY, a int);
INSERT INTO drv_shape VALUES (1, 10);
SELECT * FROM drv_shape;
ALTER TABLE drv_shape ADD COLUMN b text DEFAULT 'x';
SELECT * FROM drv_shape;
DROP TABLE drv_shape;
-- The same text under another search_path names another table.
CREATE SCHEMA drv_s;
CREATE TABLE drv_sp (a int);
CREATE TABLE drv_s.drv_sp (a int, b text);
INSERT INTO drv_sp VALUES (1);
INSERT INTO drv_s.drv_sp VALUES (2, 'in drv_s');
SELECT * FROM drv_sp;
SET search_path = drv_s, public;
SELECT * FROM drv_sp;
RESET search_path;
SELECT * FROM drv_sp;
DROP SCHEMA drv_s CASCADE;
DROP TABLE drv_sp;
-- A temporary table shadows a permanent one of its name: the same texts
-- read and drop whichever the name means at the time.
CREATE TABLE drv_tt (col int);
INSERT INTO drv_tt VALUES (1);
SELECT * FROM drv_tt;
CREATE TEMP TABLE drv_tt (tcol numeric);
INSERT INTO drv_tt VALUES (2.5);
SELECT * FROM drv_tt;
DROP TABLE drv_tt;
SELECT * FROM drv_tt;
DROP TABLE drv_tt;
\echo 'done'
