-- A report whose session forbids hash and merge joins: a nested loop over an unindexed join key.
SET enable_hashjoin = off;
SET enable_mergejoin = off;
\set n random(0, 24)
SELECT c.c_custkey, count(o.o_orderkey) FROM customer c JOIN orders o ON o.o_custkey = c.c_custkey WHERE c.c_nationkey = :n GROUP BY c.c_custkey;
