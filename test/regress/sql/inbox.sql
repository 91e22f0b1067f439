--
-- The message inbox.  Concurrency is in test/isolation/specs/inbox_race.spec.
--
SET search_path = public;

-- first delivery true, redeliveries false; per consumer
SELECT idempotency.inbox_receive('billing', 'msg-1') AS first,
	   idempotency.inbox_receive('billing', 'msg-1') AS redelivery,
	   idempotency.inbox_receive('shipping', 'msg-1') AS other_consumer;
-- transactional: a rolled back transaction leaves the id unseen
BEGIN;
SELECT idempotency.inbox_receive('billing', 'msg-2');
ROLLBACK;
SELECT idempotency.inbox_receive('billing', 'msg-2') AS after_rollback;
-- an expired entry counts as unseen
UPDATE idempotency.inbox SET expires_at = now() - interval '1 second' WHERE message_id = 'msg-1' AND consumer = 'billing';
SELECT idempotency.inbox_receive('billing', 'msg-1') AS after_expiry,
	   idempotency.inbox_receive('billing', 'msg-1') AS then_seen;
SELECT expires_at > now() + interval '6 days' AS ttl_7_days FROM idempotency.inbox WHERE message_id = 'msg-2';

-- batches: the new ids, in input order, duplicates inside the batch once
SELECT * FROM idempotency.inbox_receive_batch('billing', ARRAY['m3', 'msg-1', 'm4', 'm3', 'm5', 'msg-2', 'm4']);
SELECT * FROM idempotency.inbox_receive_batch('billing', ARRAY['m3', 'm6']);
SELECT count(*) FROM idempotency.inbox_receive_batch('billing', '{}');
UPDATE idempotency.inbox SET expires_at = now() - interval '1 second' WHERE message_id = 'm5';
SELECT * FROM idempotency.inbox_receive_batch('billing', ARRAY['m5', 'm6', 'm7'], ttl => '1 hour');
SELECT count(*) AS thousand FROM idempotency.inbox_receive_batch('bulk', ARRAY(SELECT 'b-' || g FROM generate_series(1, 1000) g));
SELECT count(*) AS none_new FROM idempotency.inbox_receive_batch('bulk', ARRAY(SELECT 'b-' || g FROM generate_series(1, 1000) g));
-- a batch is tried as one plain INSERT in a subtransaction (its rows carry
-- the subtransaction's XID); repeats inside the batch do not spoil it, ids
-- seen before roll it back and the batch goes in with ON CONFLICT instead
BEGIN;
SELECT * FROM idempotency.inbox_receive_batch('sub', ARRAY['s2', 's1', 's2']);
SELECT * FROM idempotency.inbox_receive_batch('sub', ARRAY['s3', 's1', 's3']);
SELECT message_id, xmin OPERATOR(pg_catalog.<>) pg_current_xact_id()::xid AS by_subtransaction
  FROM idempotency.inbox WHERE consumer = 'sub' ORDER BY message_id;
-- a transaction never gets more than 32 such XIDs from us (a backend keeps
-- 64 before every snapshot in the cluster slows down), however many batches
SELECT sum((SELECT count(*) FROM idempotency.inbox_receive_batch('sub', ARRAY['loop-' || g || '-b', 'loop-' || g || '-a']))) AS new_ids
  FROM generate_series(1, 40) AS g;
SELECT count(DISTINCT xmin::text) FILTER (WHERE xmin OPERATOR(pg_catalog.<>) pg_current_xact_id()::xid) AS subtransactions,
	   count(*) FILTER (WHERE xmin OPERATOR(pg_catalog.=) pg_current_xact_id()::xid) AS rows_by_top
  FROM idempotency.inbox WHERE consumer = 'sub';
COMMIT;
SELECT count(*) AS all_recorded FROM idempotency.inbox WHERE consumer = 'sub';

-- bad input
SELECT idempotency.inbox_receive(NULL, 'x');
SELECT idempotency.inbox_receive('c', NULL);
SELECT idempotency.inbox_receive('', 'x');
SELECT idempotency.inbox_receive('c', '');
SELECT idempotency.inbox_receive('c', repeat('x', 256));
SELECT idempotency.inbox_receive('c', 'x', ttl => '-1 day');
SELECT idempotency.inbox_receive('c', 'x', ttl => NULL);
SELECT * FROM idempotency.inbox_receive_batch('c', NULL);
SELECT * FROM idempotency.inbox_receive_batch('c', ARRAY['a', NULL]);
SELECT * FROM idempotency.inbox_receive_batch('c', ARRAY['a', '']);
SELECT * FROM idempotency.inbox_receive_batch('c', ARRAY[['a'], ['b']]);
SELECT * FROM idempotency.inbox_receive_batch('c', ARRAY(SELECT 'x' || g FROM generate_series(1, 10001) g));
SELECT count(*) AS nothing_written FROM idempotency.inbox WHERE consumer = 'c';

-- one role never sees another role's inbox
CREATE ROLE regress_consumer_a;
CREATE ROLE regress_consumer_b;
SELECT idempotency.grant_usage('regress_consumer_a');
SELECT idempotency.grant_usage('regress_consumer_b');
SET ROLE regress_consumer_a;
SELECT idempotency.inbox_receive('billing', 'shared-id') AS a_first;
SELECT * FROM idempotency.inbox;
RESET ROLE;
SET ROLE regress_consumer_b;
SELECT idempotency.inbox_receive('billing', 'shared-id') AS b_first_too;
RESET ROLE;
SELECT owner, consumer, message_id FROM idempotency.inbox WHERE message_id = 'shared-id' ORDER BY owner;

-- expired entries go with the cleanup
UPDATE idempotency.inbox SET expires_at = now() - interval '1 second' WHERE consumer = 'bulk';
SELECT idempotency.cleanup(600), idempotency.cleanup(600), idempotency.cleanup(600);
SELECT count(*) AS bulk_left FROM idempotency.inbox WHERE consumer = 'bulk';

TRUNCATE idempotency.inbox;
DROP OWNED BY regress_consumer_a, regress_consumer_b;
DROP ROLE regress_consumer_a, regress_consumer_b;
RESET search_path;
