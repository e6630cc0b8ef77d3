-- A checksum of order lines by key range: CPU work per row, read through the primary key.
\set k random(1, 120000)
SELECT sum(length(md5(l_comment || l_extendedprice::text))) FROM lineitem WHERE l_orderkey BETWEEN :k AND :k + 4000;
