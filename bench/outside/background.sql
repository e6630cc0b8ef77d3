-- The healthy background of every case: an account look-up, now and then a small durable transfer.
\set aid random(1, 1000000)
\set bid random(1, 10)
\set tid random(1, 100)
\set delta random(-5000, 5000)
\set write random(1, 10)
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
\if :write = 1
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
\endif
