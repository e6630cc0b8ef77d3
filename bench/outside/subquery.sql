-- Spend per customer of one nation through a scalar subquery over an unindexed column, once per customer.
\set n random(0, 24)
SELECT c.c_custkey, (SELECT sum(o.o_totalprice) FROM orders o WHERE o.o_custkey = c.c_custkey) FROM customer c WHERE c.c_nationkey = :n AND c.c_acctbal > 8000;
