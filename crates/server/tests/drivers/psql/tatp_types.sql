-- The TATP-like table with uuid, jsonb and interval columns through psql:
-- loaded by \copy in text (tatp_ext.tsv) and binary (the server's own binary
-- COPY of that table), read back in psql's aligned output.
CREATE TABLE tatp_ext_psql (s_id integer PRIMARY KEY, sub_uuid uuid NOT NULL UNIQUE, profile jsonb,
    call_window interval, last_seen timestamptz, balance numeric(12,2), vlr_location bigint);
CREATE TABLE tatp_ext_psql_b (LIKE tatp_ext_psql);
\copy tatp_ext_psql from '../tatp_ext.tsv'
\copy (SELECT * FROM tatp_ext_psql ORDER BY s_id) to 'tatp_ext_psql.bin' with (format binary)
\copy tatp_ext_psql_b from 'tatp_ext_psql.bin' with (format binary)
\! rm -f tatp_ext_psql.bin
SELECT * FROM tatp_ext_psql ORDER BY s_id;
SELECT * FROM tatp_ext_psql_b EXCEPT SELECT * FROM tatp_ext_psql;
SELECT count(*) AS same FROM tatp_ext_psql a JOIN tatp_ext_psql_b b USING (s_id)
    WHERE a.profile = b.profile AND a.call_window = b.call_window AND a.sub_uuid = b.sub_uuid;
SELECT s_id, profile -> 'tags' AS tags, profile ->> 'score' AS score, call_window * 2 AS doubled
    FROM tatp_ext_psql WHERE profile ? 'nested' AND s_id % 7 = 0 ORDER BY s_id;
DROP TABLE tatp_ext_psql, tatp_ext_psql_b;
