-- Audit rows into a table carrying twelve indexes, autocommit.
\set u random(1, 100000)
INSERT INTO ot_audit (user_id, action, a, b, c, d, e, note) VALUES (:u, 'view', :u % 7, :u % 11, :u % 13, :u % 17, :u % 19, md5(:u::text));
