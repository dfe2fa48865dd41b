-- TATP UPDATE_LOCATION (14 %): by the secondary key sub_nbr (s_id as 15 zero-padded digits).
\set s_id (random(0, :A) | random(:MIN, :MAX)) % (:MAX - :MIN + 1) + :MIN
\set vlr_location random(1, 4294967295)
UPDATE subscriber SET vlr_location = :vlr_location WHERE sub_nbr = lpad(:s_id::text, 15, '0');
