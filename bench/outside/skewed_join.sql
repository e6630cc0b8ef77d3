-- Votes per busy thread, the session forbidding hash and merge joins: a nested loop re-reading the votes per reply.
SET enable_hashjoin = off;
SET enable_mergejoin = off;
\set t random(200, 400)
SELECT r.thread_id, sum(v.value) FROM fm_reply r JOIN fm_vote v ON v.reply_id = r.id + 0 WHERE r.thread_id = :t GROUP BY r.thread_id;
