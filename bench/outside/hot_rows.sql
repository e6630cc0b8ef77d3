-- Workers claim one of a handful of queue rows, hold it 20 ms, release it: waits on row locks.
\set slot random_zipfian(1, 8, 1.5)
BEGIN;
SELECT pending FROM ot_queue WHERE slot = :slot FOR UPDATE;
\sleep 20 ms
UPDATE ot_queue SET pending = pending + 1 WHERE slot = :slot;
END;
