-- A ledger transfer (debit, credit, posting) in one durably committed transaction.
\set source random(1, 25000)
\set target random(25001, 50000)
BEGIN;
UPDATE lg_account SET balance = balance - 1 WHERE id = :source;
UPDATE lg_account SET balance = balance + 1 WHERE id = :target;
INSERT INTO lg_posting (source, target, amount) VALUES (:source, :target, 1);
END;
