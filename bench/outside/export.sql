-- An export of order lines: tens of thousands of rows sent to the client per statement.
\set k random(1, 100000)
SELECT * FROM lineitem WHERE l_orderkey BETWEEN :k AND :k + 20000;
