-- psql's describe commands, which run psql's own pg_catalog queries; run with
--   psql -X -q -v ON_ERROR_STOP=1 -f describe.sql
\pset null NULL
DROP TABLE IF EXISTS drv_psql_desc;
CREATE TABLE drv_psql_desc (
    id integer PRIMARY KEY,
    c_int2 smallint,
    c_int8 bigint NOT NULL,
    c_numeric numeric(15,3) DEFAULT 0,
    c_real real,
    c_double double precision,
    c_text text,
    c_varchar varchar(20) UNIQUE,
    c_char char(8),
    c_bool boolean DEFAULT true,
    c_date date,
    c_ts timestamp,
    c_bytea bytea,
    c_required text NOT NULL DEFAULT 'required'
);
CREATE INDEX drv_psql_desc_date ON drv_psql_desc (c_date, c_int2);
\d drv_psql_desc
\dt drv_psql_desc
DROP TABLE drv_psql_desc;
\echo 'done'
