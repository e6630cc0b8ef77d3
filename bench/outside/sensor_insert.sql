-- Devices report one reading each, autocommit: many small concurrent inserts.
\set dev random_zipfian(1, 5000, 1.2)
INSERT INTO ot_reading (device, value, taken) VALUES (:dev, random() * 100, now());
