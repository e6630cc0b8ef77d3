-- A nightly load: order lines copied into a staging table by INSERT ... SELECT.
INSERT INTO ot_staging SELECT l_orderkey, l_linenumber, l_partkey, l_quantity, l_extendedprice, l_comment FROM lineitem WHERE l_orderkey <= 40000;
