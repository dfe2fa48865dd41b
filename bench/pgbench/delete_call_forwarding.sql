-- TATP DELETE_CALL_FORWARDING (2 %): s_id looked up by sub_nbr.
\set s_id (random(0, :A) | random(:MIN, :MAX)) % (:MAX - :MIN + 1) + :MIN
\set sf_type random(1, 4)
\set start_time random(0, 2) * 8
BEGIN;
SELECT s_id FROM subscriber WHERE sub_nbr = lpad(:s_id::text, 15, '0') \gset found_
DELETE FROM call_forwarding WHERE s_id = :found_s_id AND sf_type = :sf_type AND start_time = :start_time;
COMMIT;
