--
-- forget_key: an administrator's reset of one key, audited in the stats;
-- and the metrics a monitoring role reads.
--
SET search_path = public;
TRUNCATE idempotency.registry, idempotency.inbox, idempotency.outbox;

CREATE ROLE regress_fk_app;
CREATE ROLE regress_fk_admin;
CREATE ROLE regress_fk_nosy;
CREATE ROLE regress_fk_monitor IN ROLE pg_monitor;
SELECT idempotency.grant_usage('regress_fk_app');
GRANT EXECUTE ON FUNCTION idempotency.forget_key(text, text, text, bool) TO regress_fk_admin;
SELECT idempotency.stats_reset();

-- a finished key, one in another scope, a claim in progress, and an expired claim
SET ROLE regress_fk_app;
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('k1', request => '{"n": 1}');
SELECT idempotency.idempotent_finish('k1', '{"charged": 1}');
SELECT outcome FROM idempotency.idempotent_begin('k1', scope => 'other');
SELECT idempotency.idempotent_finish('k1', '{"other": true}', scope => 'other');
COMMIT;
SELECT outcome FROM idempotency.idempotent_begin('busy', external => true, lease => '1 hour');
SELECT outcome FROM idempotency.idempotent_begin('stale', external => true, ttl => '1 hour');
SELECT outcome FROM idempotency.idempotent_begin('stalled', external => true, lease => '1 hour');
SELECT idempotency.inbox_receive('consumer', 'm1');
SELECT idempotency.outbox_send('orders', '{"id": 1}', ordering_key => 'o1') IS NOT NULL AS sent;
SELECT idempotency.outbox_send('orders', '{"id": 2}', ordering_key => 'o1') IS NOT NULL AS sent;
SELECT count(*) AS fetched FROM idempotency.outbox_fetch(1);
RESET ROLE;
UPDATE idempotency.registry SET expires_at = now() - interval '1 second' WHERE key = 'stale';
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'stalled';
UPDATE idempotency.outbox SET sent_at = sent_at - interval '1 minute';

-- what a monitoring role sees: counts and ages, no key
SET ROLE regress_fk_monitor;
SELECT records, claims_processing, stalled_claims, expired_records, expired_lag_seconds > 0 AS lagging,
	   claims_in_memory, claims_waiting, inbox_entries, outbox_pending, outbox_in_flight,
	   outbox_pending_age_seconds >= 60 AS outbox_aging
  FROM idempotency.metrics;
RESET ROLE;
-- a claim held in memory by an open transaction is a lock, not a row
BEGIN;
SET ROLE regress_fk_app;
SELECT outcome FROM idempotency.idempotent_begin('held');
RESET ROLE;
SET ROLE regress_fk_monitor;
SELECT records, claims_in_memory, claims_waiting FROM idempotency.metrics;
RESET ROLE;
ROLLBACK;
SET ROLE regress_fk_nosy;
SELECT * FROM idempotency.metrics;
SELECT * FROM idempotency.metrics();
RESET ROLE;

-- the reset: the next request executes, with another request too
SET ROLE regress_fk_admin;
SELECT idempotency.forget_key('regress_fk_app', 'k1') AS forgotten;
SELECT idempotency.forget_key('regress_fk_app', 'k1') AS again;
SELECT idempotency.forget_key('regress_fk_app', 'never') AS never_claimed;
SELECT idempotency.forget_key('regress_fk_other', 'k1', 'other') AS other_role;
RESET ROLE;
SET ROLE regress_fk_app;
SELECT found FROM idempotency.lookup('k1');
SELECT found, response FROM idempotency.lookup('k1', scope => 'other');
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('k1', request => '{"n": 2}');
SELECT idempotency.idempotent_finish('k1', '{"charged": 2}');
COMMIT;
RESET ROLE;

-- a claim still processing is refused, and nothing is deleted; an expired
-- one is not; force deletes, and the holder's finish then finds no claim
SET ROLE regress_fk_admin;
SELECT idempotency.forget_key('regress_fk_app', 'busy');
SELECT idempotency.forget_key('regress_fk_app', 'stale') AS expired_claim;
RESET ROLE;
SELECT key, status FROM idempotency.registry WHERE key IN ('busy', 'stale') ORDER BY key;
SET ROLE regress_fk_admin;
SELECT idempotency.forget_key('regress_fk_app', 'busy', force => true) AS forced;
RESET ROLE;
SET ROLE regress_fk_app;
SELECT idempotency.idempotent_finish('busy', '{}', attempt => 1);
RESET ROLE;

-- in every transaction context: rolled back, under a savepoint, and a
-- refusal caught by a PL/pgSQL EXCEPTION block
SET ROLE regress_fk_admin;
BEGIN;
SELECT idempotency.forget_key('regress_fk_app', 'k1') AS in_transaction;
ROLLBACK;
BEGIN;
SAVEPOINT s;
SELECT idempotency.forget_key('regress_fk_app', 'k1') AS in_savepoint;
ROLLBACK TO SAVEPOINT s;
COMMIT;
RESET ROLE;
SET ROLE regress_fk_app;
SELECT found, response FROM idempotency.lookup('k1');
SELECT outcome FROM idempotency.idempotent_begin('busy2', external => true);
RESET ROLE;
SET ROLE regress_fk_admin;
DO $$
BEGIN
	BEGIN
		PERFORM idempotency.forget_key('regress_fk_app', 'busy2');
	EXCEPTION WHEN object_in_use THEN
		RAISE NOTICE 'refused: %', SQLERRM;
	END;
	PERFORM idempotency.forget_key('regress_fk_app', 'k1', 'other');
END
$$;
RESET ROLE;
SELECT key, scope, status FROM idempotency.registry WHERE owner = 'regress_fk_app' ORDER BY key, scope;

-- bad arguments, and a role without the grant
SET ROLE regress_fk_admin;
SELECT idempotency.forget_key(NULL, 'k1');
SELECT idempotency.forget_key('regress_fk_app', NULL);
SELECT idempotency.forget_key('regress_fk_app', 'k1', NULL);
SELECT idempotency.forget_key('regress_fk_app', 'k1', force => NULL);
SELECT idempotency.forget_key('', 'k1');
SELECT idempotency.forget_key('regress_fk_app', ' k1');
SELECT idempotency.forget_key(repeat('r', 64), 'k1');
RESET ROLE;
SET ROLE regress_fk_nosy;
SELECT idempotency.forget_key('regress_fk_app', 'k1');
RESET ROLE;
SET ROLE regress_fk_app;
SELECT idempotency.forget_key('regress_fk_app', 'k1');
RESET ROLE;

-- audited: k1, the expired claim, the forced one and k1 in scope other
-- (the stats count calls, and a call that rolled back was made: the two in
-- the transaction and the savepoint rolled back count too)
SELECT keys_forgotten, begins_waited FROM idempotency.stats;

SELECT idempotency.forget_role('regress_fk_app');
DROP OWNED BY regress_fk_app, regress_fk_admin;
DROP ROLE regress_fk_app, regress_fk_admin, regress_fk_nosy, regress_fk_monitor;
SELECT idempotency.stats_reset();
TRUNCATE idempotency.registry, idempotency.inbox, idempotency.outbox;
RESET search_path;
