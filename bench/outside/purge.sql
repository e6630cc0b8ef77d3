-- A purge of old readings, 3,000 rows per statement.
DELETE FROM ot_archive WHERE id IN (SELECT id FROM ot_archive ORDER BY id LIMIT 3000);
