-- One single-row insert per transaction, committed durably (the server runs synchronous_commit = on).
INSERT INTO inj_sync DEFAULT VALUES;
