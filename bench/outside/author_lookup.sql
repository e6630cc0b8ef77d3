-- Replies by one author: the column has no index (a sequential scan of the replies per call).
\set a random(1, 100000)
SELECT id, thread_id, at FROM fm_reply WHERE author = :a;
