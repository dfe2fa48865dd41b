-- psql error cases; run with psql -X -q -v ON_ERROR_STOP=0 -f errors.sql (every
-- error is expected). Prints each error's message and SQLSTATE.
\set VERBOSITY terse
DROP TABLE IF EXISTS drv_psql_err;
CREATE TABLE drv_psql_err (id integer PRIMARY KEY, c_int2 smallint, c_required text NOT NULL);
INSERT INTO drv_psql_err VALUES (1, 5, 'x');

INSERT INTO drv_psql_err VALUES (1, 6, 'y');
\echo 'unique violation:' :SQLSTATE
SELECT * FROM drv_psql_err_no_such_table;
\echo 'undefined table:' :SQLSTATE
SELECT c_int2 / 0 FROM drv_psql_err WHERE id = 1;
\echo 'division by zero:' :SQLSTATE
INSERT INTO drv_psql_err (id, c_required) VALUES (2, NULL);
\echo 'not null:' :SQLSTATE
\set VERBOSITY sqlstate
SELEC 1;
\echo 'syntax error:' :SQLSTATE
\set VERBOSITY terse

BEGIN;
INSERT INTO drv_psql_err VALUES (3, 3, 'three');
SELECT 1 / (id - 1) FROM drv_psql_err WHERE id = 1;
\echo 'in block:' :SQLSTATE
SELECT 1;
\echo 'aborted block:' :SQLSTATE
ROLLBACK;
SELECT id FROM drv_psql_err ORDER BY id;
DROP TABLE drv_psql_err;
\echo 'done'
