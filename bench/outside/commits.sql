-- Small durable transactions on rows of the client's own (no two clients meet): the commit's WAL flush is the cost.
\set aid :client_id * 1000 + random(1, 1000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
UPDATE pgbench_accounts SET abalance = abalance - 1 WHERE aid = :aid + 1;
END;
