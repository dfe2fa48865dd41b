-- TATP GET_NEW_DESTINATION (10 %): sf_type U[1,4], start_time in {0,8,16}, end_time U[1,24].
\set s_id (random(0, :A) | random(:MIN, :MAX)) % (:MAX - :MIN + 1) + :MIN
\set sf_type random(1, 4)
\set start_time random(0, 2) * 8
\set end_time random(1, 24)
SELECT cf.numberx
  FROM special_facility AS sf, call_forwarding AS cf
 WHERE (sf.s_id = :s_id AND sf.sf_type = :sf_type AND sf.is_active = 1)
   AND (cf.s_id = sf.s_id AND cf.sf_type = sf.sf_type)
   AND (cf.start_time <= :start_time AND :end_time < cf.end_time);
