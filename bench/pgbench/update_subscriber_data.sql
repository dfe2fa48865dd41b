-- TATP UPDATE_SUBSCRIBER_DATA (2 %): two updates in one transaction.
\set s_id (random(0, :A) | random(:MIN, :MAX)) % (:MAX - :MIN + 1) + :MIN
\set bit random(0, 1)
\set data_a random(0, 255)
\set sf_type random(1, 4)
BEGIN;
UPDATE subscriber SET bit_1 = :bit WHERE s_id = :s_id;
UPDATE special_facility SET data_a = :data_a WHERE s_id = :s_id AND sf_type = :sf_type;
COMMIT;
