-- A nightly batch's step: total a slice of the accounts by branch and keep the totals (ordinary reporting work).
\set first random(1, 495000)
INSERT INTO nightly_totals (bid, total, accounts, at)
  SELECT bid, sum(abalance), count(*), now() FROM pgbench_accounts WHERE aid BETWEEN :first AND :first + 5000 GROUP BY bid;
