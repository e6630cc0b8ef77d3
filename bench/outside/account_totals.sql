-- Totals over every account: a table larger than shared_buffers read again and again, from a slow disk
-- (the case's SlowDisk: its reads throttled, the table kept out of the page cache).
SET max_parallel_workers_per_gather = 0;
SELECT bid, sum(abalance), count(*) FROM pgbench_accounts GROUP BY bid;
