--
-- Which statement idempotent_begin runs first is learnt per backend
-- (src/registry_api.c, begin_found): it claims first (INSERT ... ON
-- CONFLICT) until most recent begins found a record of their key, then
-- reads first, and back.  The answers are the same either way; DEBUG2 says
-- when the order changes.  (Concurrency in read-first order: the isolation
-- spec begin_read_first.)
--
SET search_path = public;
CREATE TABLE begin_order_log (i int, outcome text);

-- ten keys completed
SELECT count(*) FROM generate_series(1, 10) AS i,
	LATERAL idempotency.idempotent_begin('order-' || i) AS b,
	LATERAL idempotency.idempotent_finish('order-' || i, jsonb_build_object('n', i)) AS f;

SET client_min_messages = debug2;
-- retries of them: after a few the backend reads first (one DEBUG2 line)
INSERT INTO begin_order_log
SELECT i, b.outcome || ' ' || b.response::text
  FROM generate_series(1, 10) AS i,
	   LATERAL idempotency.idempotent_begin('order-' || i) AS b;
-- in read-first order: a new key still executes, a retry still replays, a
-- different request still fails
SELECT outcome, status FROM idempotency.idempotent_begin('order-new', request => '{"a": 1}', external => true);
SELECT idempotency.idempotent_finish('order-new', '{"done": true}', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'order-new' AND r.scope = ''));
SELECT outcome, response FROM idempotency.idempotent_begin('order-new', request => '{"a": 1}', external => true);
SELECT outcome FROM idempotency.idempotent_begin('order-new', request => '{"a": 2}', external => true);  -- IK001
-- an expired record is claimed afresh, an abandoned one too
UPDATE idempotency.registry SET expires_at = now() - interval '1 second', attempt = attempt - 60
 WHERE key OPERATOR(pg_catalog.=) 'order-1';
SELECT outcome, status FROM idempotency.idempotent_begin('order-1', external => true);
SELECT idempotency.idempotent_abandon('order-1', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'order-1' AND r.scope = ''));
SELECT outcome, status FROM idempotency.idempotent_begin('order-1', external => true);
SELECT idempotency.idempotent_finish('order-1', '{"again": true}', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'order-1' AND r.scope = ''));
-- new keys: after a few the backend claims first again (one DEBUG2 line)
INSERT INTO begin_order_log
SELECT 100 + i, b.outcome
  FROM generate_series(1, 10) AS i,
	   LATERAL idempotency.idempotent_begin('order-fresh-' || i, external => true) AS b;
RESET client_min_messages;
SELECT outcome, count(*) FROM begin_order_log GROUP BY 1 ORDER BY 1;

DROP TABLE begin_order_log;
DELETE FROM idempotency.registry WHERE key::text LIKE 'order-%';
