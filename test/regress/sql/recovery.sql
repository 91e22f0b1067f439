--
-- Recovery points, lease renewal and the completer's batch: what each
-- records, what a take-over and a new claim do with it, and every error
-- path, in autocommit, in a transaction, under a savepoint and in a
-- PL/pgSQL EXCEPTION block.
--
SET search_path = public;
\set VERBOSITY default

-- errors shown with the attempt numbers (read from the clock) masked
CREATE FUNCTION rp_error(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	msg text;
	det text;
BEGIN
	EXECUTE sql;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
	RETURN regexp_replace(SQLSTATE || ': ' || msg || ' / ' || coalesce(det, ''), '[0-9]{6,}', 'N', 'g');
END $$;
CREATE FUNCTION attempt_of(k text, s text DEFAULT '') RETURNS int LANGUAGE sql AS $$
	SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = k AND r.scope = s
$$;

-- A claim records its steps in its own transaction: the attempt is implied
BEGIN;
SELECT outcome, recovery_point, recovery_state FROM idempotency.idempotent_begin('rp-1', request => '{"amount": 10}', external => true);
SELECT idempotency.idempotent_checkpoint('rp-1', 'customer_created', '{"customer": "c_1"}');
SELECT recovery_point, recovery_state FROM idempotency.my_records WHERE key = 'rp-1';
COMMIT;
-- lookup and my_records show the step
SELECT found, status, recovery_point, recovery_state FROM idempotency.lookup('rp-1');
-- in a later transaction the attempt must be named
SELECT idempotency.idempotent_checkpoint('rp-1', 'charged');
SELECT idempotency.idempotent_checkpoint('rp-1', 'charged', '{"customer": "c_1", "charge": "ch_1"}',
										 attempt => attempt_of('rp-1'));
-- a step's own writes and its recovery point commit or roll back together
CREATE TABLE rp_steps (k text, step text);
BEGIN;
INSERT INTO rp_steps VALUES ('rp-1', 'receipt_sent');
SELECT idempotency.idempotent_checkpoint('rp-1', 'receipt_sent', attempt => attempt_of('rp-1'));
ROLLBACK;
SELECT count(*) AS steps FROM rp_steps;
SELECT recovery_point, recovery_state FROM idempotency.my_records WHERE key = 'rp-1';
-- a recovery point is a HOT update: only unindexed columns change
BEGIN;
CREATE TEMP TABLE hot_before AS
	SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relid = 'idempotency.registry'::regclass;
SELECT idempotency.idempotent_checkpoint('rp-1', 'charged', '{"customer": "c_1", "charge": "ch_1"}',
										 attempt => attempt_of('rp-1'));
SELECT a.n_tup_upd - b.n_tup_upd AS updates, a.n_tup_hot_upd - b.n_tup_hot_upd AS hot_updates
  FROM pg_stat_xact_user_tables a, hot_before b WHERE a.relid = 'idempotency.registry'::regclass;
COMMIT;
DROP TABLE hot_before;

-- The worker dies; its lease runs out; the retry takes over and resumes
-- from the last recovery point
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'rp-1';
CREATE TEMP TABLE old_attempt AS SELECT attempt_of('rp-1') AS a;
SELECT outcome, previous_end, recovery_point, recovery_state
  FROM idempotency.idempotent_begin('rp-1', request => '{"amount": 10}', external => true);
-- the stale worker's recovery point is refused, as its finish would be
SELECT rp_error(format($$SELECT idempotency.idempotent_checkpoint('rp-1', 'receipt_sent', attempt => %s)$$, (SELECT a FROM old_attempt)));
SELECT rp_error(format($$SELECT idempotency.idempotent_renew('rp-1', '1 minute', attempt => %s)$$, (SELECT a FROM old_attempt)));
-- a take-over keeps the recovery point; the new attempt records the next step
SELECT idempotency.idempotent_checkpoint('rp-1', 'receipt_sent', attempt => attempt_of('rp-1'));
SELECT idempotency.idempotent_finish('rp-1', '{"ok": true}', attempt => attempt_of('rp-1'));
-- a finished record keeps its last step; a replay shows it
SELECT outcome, status, recovery_point FROM idempotency.idempotent_begin('rp-1', request => '{"amount": 10}', external => true);
-- a new claim of the record, once it expired, starts with none
UPDATE idempotency.registry SET expires_at = now() - interval '1 second' WHERE key = 'rp-1';
SELECT outcome, previous_end, recovery_point, recovery_state FROM idempotency.idempotent_begin('rp-1', external => true);
-- and after an abandon
SELECT idempotency.idempotent_checkpoint('rp-1', 'one', attempt => attempt_of('rp-1'));
SELECT idempotency.idempotent_abandon('rp-1', attempt => attempt_of('rp-1'));
SELECT outcome, previous_end, recovery_point, recovery_state FROM idempotency.idempotent_begin('rp-1', external => true);
SELECT recovery_point, recovery_state FROM idempotency.my_records WHERE key = 'rp-1';

-- Lease renewal: returns the new lease, no later than the record's expiry
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('rn-1', ttl => '1 hour', lease => '10 seconds', external => true);
SELECT idempotency.idempotent_renew('rn-1', '5 minutes') AS renewed_to \gset
SELECT lease_until = :'renewed_to' AS renewed, lease_until > now() + interval '4 minutes' AS longer
  FROM idempotency.my_records WHERE key = 'rn-1';
COMMIT;
SELECT idempotency.idempotent_renew('rn-1', '2 hours', attempt => attempt_of('rn-1')) = expires_at AS clamped
  FROM idempotency.my_records WHERE key = 'rn-1';
-- a renewed lease is not taken over
SELECT outcome FROM idempotency.idempotent_begin('rn-1', wait => false, external => true);
-- a lease that ran out but was not taken over may still be renewed
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'rn-1';
SELECT idempotency.idempotent_renew('rn-1', '1 minute', attempt => attempt_of('rn-1')) > now() AS renewed;
SELECT outcome FROM idempotency.idempotent_begin('rn-1', wait => false, external => true);

-- The completer's batch: stalled claims, each taken over once
SELECT b.outcome FROM generate_series(1, 3) AS i, LATERAL idempotency.idempotent_begin('st-' || i, 'completer', external => true) AS b;
SELECT idempotency.idempotent_checkpoint('st-2', 'half', '{"n": 1}', 'completer', attempt_of('st-2', 'completer'));
SELECT key, recovery_point FROM idempotency.my_stalled_claims WHERE scope = 'completer' ORDER BY key;
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE scope = 'completer' AND key <> 'st-3';
SELECT key, recovery_point FROM idempotency.my_stalled_claims WHERE scope = 'completer' ORDER BY key;
CREATE TEMP TABLE takeovers_before AS SELECT takeovers FROM idempotency.stats;
BEGIN;
CREATE TEMP TABLE batch AS SELECT * FROM idempotency.claim_stalled('completer', 1);
SELECT count(*) AS taken FROM batch;
CREATE TEMP TABLE batch2 AS SELECT * FROM idempotency.claim_stalled('completer', 10);
SELECT count(*) AS taken FROM batch2;
SELECT b.key, b.attempt > b.previous_attempt AS new_attempt, b.lease_until > now() AS leased,
	   b.recovery_point, b.recovery_state
  FROM (TABLE batch UNION ALL TABLE batch2) AS b ORDER BY b.key;
-- the claims are this transaction's: finished without naming the attempt
SELECT idempotency.idempotent_finish(b.key, '{"completed": true}', 'completer')
  FROM (TABLE batch UNION ALL TABLE batch2) AS b ORDER BY b.key;
COMMIT;
-- each counts as a take-over
SELECT s.takeovers - b.takeovers AS takeovers FROM idempotency.stats AS s, takeovers_before AS b;
SELECT count(*) AS stalled FROM idempotency.my_stalled_claims WHERE scope = 'completer';
SELECT count(*) FROM idempotency.claim_stalled('completer');
SELECT count(*) FROM idempotency.claim_stalled();
DROP TABLE batch, batch2, takeovers_before;
-- an expired claim is not stalled: the next begin claims it afresh
SELECT outcome FROM idempotency.idempotent_begin('st-4', 'completer', external => true);
UPDATE idempotency.registry SET lease_until = now() - interval '2 seconds', expires_at = now() - interval '1 second' WHERE key = 'st-4';
SELECT count(*) AS stalled FROM idempotency.my_stalled_claims WHERE scope = 'completer';
SELECT count(*) FROM idempotency.claim_stalled('completer');

--
-- Error paths
--
SELECT outcome FROM idempotency.idempotent_begin('e-done', external => true);
SELECT idempotency.idempotent_finish('e-done', '{}', attempt => attempt_of('e-done'));
SELECT outcome FROM idempotency.idempotent_begin('e-open', external => true);
SELECT outcome FROM idempotency.idempotent_begin('e-gone', external => true);
SELECT idempotency.idempotent_abandon('e-gone', attempt => attempt_of('e-gone'));
SELECT outcome FROM idempotency.idempotent_begin('e-over', external => true);
CREATE TEMP TABLE over_attempt AS SELECT attempt_of('e-over') AS a;
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'e-over';
SELECT outcome FROM idempotency.idempotent_begin('e-over', external => true);
\set stale 'SELECT a FROM over_attempt'

-- in autocommit
-- bad arguments: 22004, 22023, 54000
SELECT idempotency.idempotent_checkpoint(NULL, 'p');
SELECT idempotency.idempotent_checkpoint('e-open', NULL);
SELECT idempotency.idempotent_checkpoint('e-open', '');
SELECT idempotency.idempotent_checkpoint('e-open', repeat('p', 256));
SELECT idempotency.idempotent_checkpoint('e-open', 'p', scope => NULL);
SELECT idempotency.idempotent_checkpoint('', 'p');
SET idempotency.max_response_size = '1kB';
SELECT idempotency.idempotent_checkpoint('e-open', 'p', jsonb_build_object('x', repeat('x', 2000)));
RESET idempotency.max_response_size;
SELECT idempotency.idempotent_renew(NULL, '1 minute');
SELECT idempotency.idempotent_renew('e-open', NULL);
SELECT idempotency.idempotent_renew('e-open', '0');
SELECT idempotency.idempotent_renew('e-open', '-1 minute');
SELECT idempotency.idempotent_renew('e-open', '1 minute', scope => NULL);
SELECT * FROM idempotency.claim_stalled(batch_size => NULL);
SELECT * FROM idempotency.claim_stalled(batch_size => 0);
SELECT * FROM idempotency.claim_stalled(batch_size => 10001);
SELECT * FROM idempotency.claim_stalled(lease => '0');
-- unknown key: IK002
SELECT idempotency.idempotent_checkpoint('e-none', 'p', attempt => 1);
SELECT idempotency.idempotent_renew('e-none', '1 minute', attempt => 1);
-- not processing: finished IK003, abandoned IK002
SELECT idempotency.idempotent_checkpoint('e-done', 'p', attempt => attempt_of('e-done'));
SELECT idempotency.idempotent_renew('e-done', '1 minute', attempt => attempt_of('e-done'));
SELECT idempotency.idempotent_checkpoint('e-gone', 'p', attempt => attempt_of('e-gone'));
SELECT idempotency.idempotent_renew('e-gone', '1 minute', attempt => attempt_of('e-gone'));
-- missing attempt outside the claim's transaction: IK006
SELECT idempotency.idempotent_checkpoint('e-open', 'p');
SELECT idempotency.idempotent_renew('e-open', '1 minute');
-- stale and never issued attempts: IK004 (numbers masked)
\set VERBOSITY sqlstate
SELECT idempotency.idempotent_checkpoint('e-over', 'p', attempt => (:stale));
SELECT idempotency.idempotent_renew('e-over', '1 minute', attempt => (:stale));
SELECT idempotency.idempotent_checkpoint('e-open', 'p', attempt => 0);
SELECT idempotency.idempotent_renew('e-open', '1 minute', attempt => attempt_of('e-open') + 1);
\set VERBOSITY default
SELECT rp_error(format($$SELECT idempotency.idempotent_checkpoint('e-over', 'p', attempt => %s)$$, (:stale)));
SELECT rp_error($$SELECT idempotency.idempotent_renew('e-open', '1 minute', attempt => 0)$$);

-- in a transaction (each error aborts it)
BEGIN;
SELECT idempotency.idempotent_checkpoint('e-open', NULL);
ROLLBACK;
BEGIN;
SELECT idempotency.idempotent_checkpoint('e-none', 'p', attempt => 1);
ROLLBACK;
BEGIN;
SELECT idempotency.idempotent_renew('e-done', '1 minute', attempt => attempt_of('e-done'));
ROLLBACK;
BEGIN;
SELECT idempotency.idempotent_checkpoint('e-open', 'p');
ROLLBACK;
BEGIN;
\set VERBOSITY sqlstate
SELECT idempotency.idempotent_renew('e-over', '1 minute', attempt => (:stale));
\set VERBOSITY default
ROLLBACK;
-- this transaction's claim: a named attempt must be its own
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('e-mine');
\set VERBOSITY sqlstate
SELECT idempotency.idempotent_checkpoint('e-mine', 'p', attempt => (SELECT attempt FROM idempotency.lookup('e-mine')) - 1);
\set VERBOSITY default
ROLLBACK;
-- a default claim lives in memory until its finish; a recovery point writes
-- its record first, and the finish then ends that record
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('e-written');
SELECT count(*) AS records FROM idempotency.my_records WHERE key = 'e-written';
SELECT idempotency.idempotent_checkpoint('e-written', 'p');
SELECT status, recovery_point FROM idempotency.my_records WHERE key = 'e-written';
SELECT idempotency.idempotent_finish('e-written', '{"ok": true}');
SELECT status, recovery_point FROM idempotency.my_records WHERE key = 'e-written';
COMMIT;
-- written in a savepoint that rolls back: in memory again, still finished once
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('e-written-sp');
SAVEPOINT a;
SELECT idempotency.idempotent_renew('e-written-sp', '1 minute') IS NOT NULL AS renewed;
SELECT count(*) AS records FROM idempotency.my_records WHERE key = 'e-written-sp';
ROLLBACK TO a;
SELECT count(*) AS records FROM idempotency.my_records WHERE key = 'e-written-sp';
SELECT idempotency.idempotent_finish('e-written-sp', '{"ok": true}');
COMMIT;
SELECT status, recovery_point FROM idempotency.my_records WHERE key = 'e-written-sp';
-- a deferred claim has no steps: 55000
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('e-deferred', defer_claim => true);
SELECT idempotency.idempotent_checkpoint('e-deferred', 'p');
ROLLBACK;
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('e-deferred', defer_claim => true);
SELECT idempotency.idempotent_renew('e-deferred', '1 minute');
ROLLBACK;

-- under a savepoint: the transaction goes on, nothing changed
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('e-sp', external => true);
SAVEPOINT a;
SELECT idempotency.idempotent_checkpoint('e-sp', '');
ROLLBACK TO SAVEPOINT a;
SAVEPOINT a;
SELECT idempotency.idempotent_checkpoint('e-done', 'p');
ROLLBACK TO SAVEPOINT a;
SAVEPOINT a;
SELECT idempotency.idempotent_renew('e-open', '1 minute');
ROLLBACK TO SAVEPOINT a;
SAVEPOINT a;
\set VERBOSITY sqlstate
SELECT idempotency.idempotent_checkpoint('e-over', 'p', attempt => (:stale));
\set VERBOSITY default
ROLLBACK TO SAVEPOINT a;
-- a recovery point rolled back with its savepoint is gone; the claim is
-- still this transaction's
SAVEPOINT a;
SELECT idempotency.idempotent_checkpoint('e-sp', 'rolled_back');
ROLLBACK TO SAVEPOINT a;
SELECT recovery_point FROM idempotency.my_records WHERE key = 'e-sp';
SELECT idempotency.idempotent_checkpoint('e-sp', 'kept');
COMMIT;
SELECT recovery_point FROM idempotency.my_records WHERE key = 'e-sp';

-- in a PL/pgSQL EXCEPTION block whose other work commits
DO $$
DECLARE
	stale int := (SELECT a FROM over_attempt);
BEGIN
	BEGIN
		PERFORM idempotency.idempotent_checkpoint('e-open', 'p');
	EXCEPTION WHEN SQLSTATE 'IK006' THEN
		RAISE NOTICE 'checkpoint without attempt: %', SQLSTATE;
	END;
	BEGIN
		PERFORM idempotency.idempotent_renew('e-over', '1 minute', attempt => stale);
	EXCEPTION WHEN SQLSTATE 'IK004' THEN
		RAISE NOTICE 'stale renewal: %', SQLSTATE;
	END;
	BEGIN
		PERFORM idempotency.idempotent_checkpoint('e-none', 'p', attempt => 1);
	EXCEPTION WHEN SQLSTATE 'IK002' THEN
		RAISE NOTICE 'unknown key: %', SQLSTATE;
	END;
	BEGIN
		PERFORM idempotency.idempotent_renew('e-done', '1 minute', attempt => 1);
	EXCEPTION WHEN SQLSTATE 'IK004' THEN
		RAISE NOTICE 'finished, attempt never issued: %', SQLSTATE;
	END;
	BEGIN
		PERFORM idempotency.claim_stalled(batch_size => -1);
	EXCEPTION WHEN invalid_parameter_value THEN
		RAISE NOTICE 'bad batch size: %', SQLSTATE;
	END;
	PERFORM idempotency.idempotent_checkpoint('e-open', 'after_errors',
											  attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'e-open'));
END $$;
SELECT recovery_point FROM idempotency.my_records WHERE key = 'e-open';

-- another role's key is as if absent
CREATE ROLE regress_rp_app;
CREATE ROLE regress_rp_other;
SELECT idempotency.grant_usage('regress_rp_app');
SELECT idempotency.grant_usage('regress_rp_other');
GRANT EXECUTE ON FUNCTION attempt_of(text, text) TO regress_rp_app, regress_rp_other;
SET ROLE regress_rp_app;
SELECT outcome FROM idempotency.idempotent_begin('e-role', external => true);
RESET ROLE;
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'e-role';
SET ROLE regress_rp_other;
SELECT idempotency.idempotent_checkpoint('e-role', 'p', attempt => 1);
SELECT idempotency.idempotent_renew('e-role', '1 minute', attempt => 1);
SELECT count(*) FROM idempotency.my_stalled_claims WHERE key = 'e-role';
SELECT count(*) FROM idempotency.claim_stalled();
BEGIN;
SAVEPOINT a;
SELECT idempotency.idempotent_renew('e-role', '1 minute', attempt => 1);
ROLLBACK TO SAVEPOINT a;
SELECT idempotency.idempotent_checkpoint('e-role', 'p', attempt => 1);
ROLLBACK;
DO $$
BEGIN
	PERFORM idempotency.idempotent_checkpoint('e-role', 'p', attempt => 1);
EXCEPTION WHEN SQLSTATE 'IK002' THEN
	RAISE NOTICE 'another role''s key: %', SQLSTATE;
END $$;
SET ROLE regress_rp_app;
SELECT key FROM idempotency.my_stalled_claims WHERE key = 'e-role';
SELECT key FROM idempotency.claim_stalled();
RESET ROLE;
-- the registry itself is not theirs to read
SET ROLE regress_rp_other;
SELECT count(*) FROM idempotency.registry;
RESET ROLE;

DELETE FROM idempotency.registry;
DROP OWNED BY regress_rp_app, regress_rp_other;
DROP ROLE regress_rp_app, regress_rp_other;
DROP TABLE rp_steps, old_attempt, over_attempt;
DROP FUNCTION rp_error(text), attempt_of(text, text);
