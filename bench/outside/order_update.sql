-- A repricing job updates a range of 300 orders per statement: many rows per commit.
\set k random(1, 149000)
UPDATE orders SET o_totalprice = o_totalprice * 1.0001 WHERE o_orderkey BETWEEN :k AND :k + 300;
