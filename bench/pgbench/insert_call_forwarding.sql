-- TATP INSERT_CALL_FORWARDING (2 %). pgbench aborts a client on any SQL
-- error, so the spec's acceptable errors are avoided instead of raised: the
-- insert is skipped when the facility does not exist (would be 23503) or the
-- row exists (ON CONFLICT DO NOTHING, would be 23505). See README.md.
\set s_id (random(0, :A) | random(:MIN, :MAX)) % (:MAX - :MIN + 1) + :MIN
\set sf_type random(1, 4)
\set start_time random(0, 2) * 8
\set end_time random(1, 24)
\set numberx random(0, 999999999999999)
BEGIN;
SELECT s_id FROM subscriber WHERE sub_nbr = lpad(:s_id::text, 15, '0') \gset found_
SELECT sf_type FROM special_facility WHERE s_id = :found_s_id;
INSERT INTO call_forwarding
SELECT :found_s_id::integer, :sf_type::smallint, :start_time::smallint, :end_time::smallint,
       lpad(:numberx::text, 15, '0')
 WHERE EXISTS (SELECT 1 FROM special_facility WHERE s_id = :found_s_id::integer AND sf_type = :sf_type::smallint)
ON CONFLICT DO NOTHING;
COMMIT;
