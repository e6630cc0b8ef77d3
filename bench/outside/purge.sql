-- A purge of old readings, 1,000 rows per statement, a short pause between (the archive lasts the window).
DELETE FROM ot_archive WHERE id IN (SELECT id FROM ot_archive ORDER BY id LIMIT 1000);
\sleep 10 ms
