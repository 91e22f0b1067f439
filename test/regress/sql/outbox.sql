--
-- The transactional outbox: outbox_send, outbox_fetch, outbox_ack.
-- Concurrency is in test/isolation/specs/outbox_*.spec, relays that die and a consumer
-- in another database in test/tap/024_outbox_relay.pl.  Every error in every
-- transaction context is also in test/regress/sql/error_contexts.sql.
--
SET search_path = public;
-- attempts are drawn from a sequence: start it where this file expects
SELECT setval('idempotency.outbox_attempt_seq', 1, false);

-- a message exists if and only if the sending transaction commits
BEGIN;
SELECT idempotency.outbox_send('orders', '{"order": 1}', 'customer-1', message_id => 'm1');
SELECT idempotency.outbox_send('orders', '{"order": 2}', 'customer-1', message_id => 'm2');
COMMIT;
BEGIN;
SELECT idempotency.outbox_send('orders', '{"order": 3}', 'customer-1', message_id => 'rolled-back');
ROLLBACK;
BEGIN;
SAVEPOINT s;
SELECT idempotency.outbox_send('orders', '{"order": 4}', 'customer-2', message_id => 'under-savepoint');
ROLLBACK TO SAVEPOINT s;
SELECT idempotency.outbox_send('orders', '{"order": 5}', 'customer-2', '{"trace": "t5"}', 'm5');
COMMIT;
DO $$
BEGIN
	PERFORM idempotency.outbox_send('orders', '{"order": 6}', 'customer-2', message_id => 'in-failed-block');
	RAISE division_by_zero;
EXCEPTION WHEN division_by_zero THEN
	RAISE NOTICE 'block rolled back';
END $$;
SELECT message_id, topic, ordering_key, seq, payload, headers, attempt, deliveries, state
  FROM idempotency.my_outbox ORDER BY ordering_key, seq;

-- a generated id is a version 7 UUID, and a message without an ordering key
-- is ordered on its own: its id stands in as its key
SELECT idempotency.outbox_send('audit', '"login"') AS generated \gset
SELECT :'generated' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$' AS uuid_v7,
	   (SELECT ordering_key = message_id FROM idempotency.my_outbox WHERE message_id = :'generated') AS own_key;
SELECT count(DISTINCT idempotency.outbox_send('audit', to_jsonb(g))) AS distinct_ids FROM generate_series(1, 100) AS g;
-- two in one row: each call returns the id it stored
CREATE TEMP TABLE two AS SELECT idempotency.outbox_send('audit', '1') AS i1, idempotency.outbox_send('audit', '2') AS i2;
SELECT i1 <> i2 AS differ, (SELECT count(*) FROM idempotency.outbox WHERE message_id IN (i1, i2)) AS both_stored
  FROM two;
DROP TABLE two;
DELETE FROM idempotency.outbox WHERE topic = 'audit';
-- an id that happens to name a key with undelivered messages joins its order
SELECT idempotency.outbox_send('audit', '1', 'stream-x', message_id => 'x-1');
SELECT idempotency.outbox_send('audit', '2', message_id => 'stream-x');
SELECT message_id, ordering_key, seq FROM idempotency.my_outbox WHERE topic = 'audit' ORDER BY seq;
DELETE FROM idempotency.outbox WHERE topic = 'audit';

-- an id is refused while the message is kept (pending, or delivered until
-- its expiry), under the same ordering key
SELECT idempotency.outbox_send('orders', '{}', 'customer-1', message_id => 'm1');
SELECT idempotency.outbox_send('orders', '{}', 'customer-9', message_id => 'm1') AS other_key;
DELETE FROM idempotency.outbox WHERE ordering_key = 'customer-9';

-- fetch: the oldest undelivered message of each key, under one attempt
SELECT message_id, topic, ordering_key, payload, headers, deliveries,
	   lease_until > now() + interval '59 seconds' AS leased_a_minute
  FROM idempotency.outbox_fetch() ORDER BY ordering_key;
SELECT count(DISTINCT attempt) AS one_attempt, min(attempt) AS attempt FROM idempotency.outbox WHERE deliveries = 1 \gset
SELECT :one_attempt AS one_attempt_for_the_batch;
-- nothing else is ready: m2 waits for m1, m1 and m5 are leased
SELECT count(*) AS nothing_ready FROM idempotency.outbox_fetch();
SELECT message_id, state FROM idempotency.my_outbox ORDER BY ordering_key, seq;

-- ack: the next message of the key becomes ready
SELECT idempotency.outbox_ack(:attempt, ARRAY['m1']) AS acked;
SELECT message_id, state, expires_at > now() + interval '6 days' AS kept_7_days
  FROM idempotency.my_outbox ORDER BY ordering_key, seq;
SELECT message_id, attempt > :attempt AS new_attempt FROM idempotency.outbox_fetch();
-- acknowledging again what the same attempt acknowledged is accepted
SELECT idempotency.outbox_ack(:attempt, ARRAY['m1', 'm1', 'm5']) AS acked_now;
SELECT idempotency.outbox_ack(:attempt, ARRAY['m1', 'm5']) AS acked_again;
SELECT idempotency.outbox_ack(:attempt, '{}') AS empty;

-- a lease that ran out: the next fetch hands the message out again, under
-- a new attempt; the old attempt can no longer acknowledge it, and an
-- acknowledgement that names it acknowledges nothing
SELECT idempotency.outbox_send('orders', '{"order": 7}', 'customer-3', message_id => 'm7');
SELECT attempt AS attempt2 FROM idempotency.my_outbox WHERE message_id = 'm2' \gset
SELECT message_id FROM idempotency.outbox_fetch();
SELECT attempt AS attempt3 FROM idempotency.my_outbox WHERE message_id = 'm7' \gset
UPDATE idempotency.outbox SET lease_until = now() - interval '1 second' WHERE message_id = 'm2';
SELECT message_id, deliveries, attempt > :attempt3 AS newer FROM idempotency.outbox_fetch();
SELECT idempotency.outbox_ack(:attempt2, ARRAY['m2']);
BEGIN;
SELECT idempotency.outbox_ack(:attempt3, ARRAY['m7', 'm2']);
ROLLBACK;
SELECT message_id, state FROM idempotency.my_outbox ORDER BY ordering_key, seq;
-- the lease ran out but nobody took the message: its attempt still holds it
UPDATE idempotency.outbox SET lease_until = now() - interval '1 second' WHERE message_id = 'm7';
SELECT idempotency.outbox_ack(:attempt3, ARRAY['m7']) AS late_but_held;
SELECT message_id, state FROM idempotency.my_outbox ORDER BY ordering_key, seq;

-- order within a key follows the sends, one at a time; keys are visited in
-- turn: a fetch starts after the last key this session handed out
SELECT count(idempotency.outbox_send('turns', to_jsonb(g), k, message_id => k || '-' || g))
  FROM generate_series(1, 2) AS g, unnest(ARRAY['t-a', 't-b', 't-c']) AS k;
CREATE FUNCTION relay_one() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	m record;
BEGIN
	SELECT * INTO m FROM idempotency.outbox_fetch(1);
	IF NOT FOUND THEN
		RETURN NULL;
	END IF;
	PERFORM idempotency.outbox_ack(m.attempt, ARRAY[m.message_id]);
	RETURN m.message_id;
END $$;
SELECT g, relay_one() FROM generate_series(1, 7) AS g;
SELECT message_id FROM idempotency.my_outbox WHERE state <> 'delivered';

-- bad input
SELECT idempotency.outbox_send(NULL, '{}');
SELECT idempotency.outbox_send('', '{}');
SELECT idempotency.outbox_send(repeat('t', 256), '{}');
SELECT idempotency.outbox_send('t', NULL);
SELECT idempotency.outbox_send('t', '{}', '');
SELECT idempotency.outbox_send('t', '{}', repeat('k', 256));
SELECT idempotency.outbox_send('t', '{}', headers => '[1]');
SELECT idempotency.outbox_send('t', '{}', message_id => '');
SELECT idempotency.outbox_send('t', '{}', message_id => repeat('m', 256));
SELECT * FROM idempotency.outbox_fetch(0);
SELECT * FROM idempotency.outbox_fetch(10001);
SELECT * FROM idempotency.outbox_fetch(NULL);
SELECT * FROM idempotency.outbox_fetch(lease => '0');
SELECT * FROM idempotency.outbox_fetch(lease => NULL);
SELECT idempotency.outbox_ack(NULL, ARRAY['m1']);
SELECT idempotency.outbox_ack(1, NULL);
SELECT idempotency.outbox_ack(1, ARRAY['m1', NULL]);
SELECT idempotency.outbox_ack(1, ARRAY[['m1'], ['m2']]);
SELECT idempotency.outbox_ack(1, array_fill('m'::text, ARRAY[10001]));
SELECT idempotency.outbox_ack(1, ARRAY['m1'], ttl => '-1 day');
SELECT idempotency.outbox_ack(1, ARRAY['m1'], ttl => NULL);
-- logical decoding needs wal_level = logical (test/tap/025_outbox_logical.pl)
SET idempotency.outbox_delivery = logical;
SELECT idempotency.outbox_send('t', '{}');
RESET idempotency.outbox_delivery;
SET idempotency.outbox_delivery = cdc;
SELECT count(*) AS nothing_written FROM idempotency.outbox WHERE topic = 't';

-- messages belong to the sending role: another role neither sees, fetches
-- nor acknowledges them, and sends under its own name
CREATE ROLE regress_producer_a;
CREATE ROLE regress_producer_b;
CREATE ROLE regress_outsider;
SELECT idempotency.grant_usage('regress_producer_a');
SELECT idempotency.grant_usage('regress_producer_b');
SET ROLE regress_producer_a;
SELECT idempotency.outbox_send('orders', '{"by": "a"}', 'shared-key', message_id => 'shared-id');
SELECT * FROM idempotency.outbox;
SELECT message_id, payload FROM idempotency.outbox_fetch();
SELECT attempt AS a_attempt FROM idempotency.my_outbox \gset
RESET ROLE;
UPDATE idempotency.outbox SET lease_until = NULL WHERE message_id = 'shared-id';   -- ready again
SET ROLE regress_producer_b;
SELECT count(*) AS b_sees FROM idempotency.my_outbox;
SELECT count(*) AS b_fetches FROM idempotency.outbox_fetch();
SELECT idempotency.outbox_ack(:a_attempt, ARRAY['shared-id']);
SELECT idempotency.outbox_send('orders', '{"by": "b"}', 'shared-key', message_id => 'shared-id') AS b_too;
RESET ROLE;
SET ROLE regress_producer_a;
SELECT message_id, payload, state FROM idempotency.my_outbox;
RESET ROLE;
SET ROLE regress_outsider;
SELECT idempotency.outbox_send('orders', '{}');
SELECT * FROM idempotency.outbox_fetch();
SELECT idempotency.outbox_ack(1, ARRAY['x']);
SELECT * FROM idempotency.my_outbox;
RESET ROLE;
SELECT owner, ordering_key, message_id, payload FROM idempotency.outbox WHERE message_id = 'shared-id' ORDER BY owner;
-- the role tools move and forget messages too
SELECT idempotency.rename_owner('regress_producer_b', 'regress_producer_a');
SELECT idempotency.forget_role('regress_producer_b');
SELECT owner, count(*) FROM idempotency.outbox WHERE message_id = 'shared-id' GROUP BY owner ORDER BY owner;

-- delivered messages go with the cleanup once expired; undelivered ones
-- never expire
UPDATE idempotency.outbox SET expires_at = now() - interval '1 second' WHERE delivered_at IS NOT NULL;
SELECT count(*) AS expired, (SELECT count(*) FROM idempotency.outbox WHERE delivered_at IS NULL) AS pending
  FROM idempotency.outbox WHERE delivered_at IS NOT NULL;
SELECT idempotency.cleanup(1000);
SELECT count(*) FILTER (WHERE delivered_at IS NOT NULL) AS delivered_left,
	   count(*) FILTER (WHERE delivered_at IS NULL) AS pending_left
  FROM idempotency.outbox;
-- an expired message's id may be sent again
SELECT idempotency.outbox_send('orders', '{"again": true}', 'customer-1', message_id => 'm1');

DROP FUNCTION relay_one();
TRUNCATE idempotency.outbox;
DROP OWNED BY regress_producer_a, regress_producer_b, regress_outsider;
DROP ROLE regress_producer_a, regress_producer_b, regress_outsider;
RESET search_path;
