--
-- The registry: idempotent_begin / idempotent_finish / idempotent_abandon,
-- one session.  Concurrency is in test/isolation/specs.
--
SET search_path = public;

-- errors that name attempt numbers (fencing tokens read from the clock)
-- are shown with those numbers masked
CREATE FUNCTION fenced_error(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	msg text;
	det text;
BEGIN
	EXECUTE sql;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
	RETURN regexp_replace(SQLSTATE || ': ' || msg || ' / ' || det, '[0-9]{6,}', 'N', 'g');
END $$;

-- a business table guarded by the key as well: the final line of defence
CREATE TABLE charges (
	key idempotency.key PRIMARY KEY,
	order_id text NOT NULL,
	amount numeric NOT NULL
);

-- the request handler a user writes: begin, do the work once, finish
CREATE FUNCTION pay(p_key idempotency.key, p_order text, p_amount numeric)
RETURNS jsonb LANGUAGE plpgsql
SET search_path = pg_catalog
AS $$
DECLARE
	b record;
	result jsonb;
BEGIN
	SELECT * INTO b FROM idempotency.idempotent_begin(p_key, 'payments',
		jsonb_build_object('order', p_order, 'amount', p_amount));
	IF b.outcome = 'replay' THEN
		RETURN b.response || '{"replayed": true}';
	ELSIF b.outcome = 'in_progress' THEN
		RETURN '{"status": "in progress"}';
	END IF;
	INSERT INTO public.charges VALUES (p_key, p_order, p_amount);
	result := jsonb_build_object('charged', p_amount, 'order', p_order);
	PERFORM idempotency.idempotent_finish(p_key, result, 'payments', b.attempt);
	RETURN result;
END;
$$;

-- first request executes; three retries replay the stored answer
SELECT pay('order:ORD1:pay', 'ORD1', 42.50);
SELECT pay('order:ORD1:pay', 'ORD1', 42.50);
SELECT pay('order:ORD1:pay', 'ORD1', 42.50);
SELECT pay('order:ORD1:pay', 'ORD1', 42.50);
SELECT count(*) AS charges FROM charges;
-- the same key with a different request is the caller's bug (IK001)
SELECT pay('order:ORD1:pay', 'ORD1', 99);
SELECT count(*) AS charges FROM charges;

-- outcomes, step by step
-- (attempt numbers are fencing tokens read from the clock: seconds since
-- 2000-01-01, growing with every claim of a key; the tests compare them)
SELECT outcome, status, response,
       attempt BETWEEN extract(epoch FROM now() - '2000-01-01 UTC'::timestamptz)::int - 1
                   AND extract(epoch FROM now() - '2000-01-01 UTC'::timestamptz)::int + 1 AS attempt_from_clock,
       expires_at > now() + interval '23 hours' AS ttl_24h,
       lease_until BETWEEN now() + interval '4 minutes' AND now() + interval '6 minutes' AS lease_5min
  FROM idempotency.idempotent_begin('k-steps', external => true) \gset steps_
\echo :steps_outcome :steps_status :steps_attempt_from_clock :steps_ttl_24h :steps_lease_5min
SELECT attempt AS steps_attempt FROM idempotency.my_records WHERE key = 'k-steps' \gset
-- begin again while the claim's lease runs: in_progress, the same attempt
SELECT outcome, status, response, attempt = :steps_attempt AS same_attempt FROM idempotency.idempotent_begin('k-steps');
SELECT idempotency.idempotent_finish('k-steps', '{"id": 7}', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-steps' AND r.scope = ''));
SELECT outcome, status, response, attempt = :steps_attempt AS same_attempt, lease_until FROM idempotency.idempotent_begin('k-steps');

-- a failure that must not run again replays like a success
SELECT outcome FROM idempotency.idempotent_begin('k-failed', external => true);
SELECT idempotency.idempotent_finish('k-failed', '{"error": "card declined"}', failed => true, attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-failed' AND r.scope = ''));
SELECT outcome, status, response FROM idempotency.idempotent_begin('k-failed', external => true);

-- a NULL response is allowed and replays as NULL
SELECT outcome FROM idempotency.idempotent_begin('k-null', external => true);
SELECT idempotency.idempotent_finish('k-null', NULL, attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-null' AND r.scope = ''));
SELECT outcome, status, response IS NULL AS no_response FROM idempotency.idempotent_begin('k-null', external => true);

-- abandon: a retryable failure; the next begin executes again, with a new
-- attempt (an abandoned claim is kept as "abandoned" so that its number is
-- never issued again)
SELECT outcome, attempt AS ab1 FROM idempotency.idempotent_begin('k-abandon', external => true) \gset
SELECT idempotency.idempotent_abandon('k-abandon', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-abandon' AND r.scope = ''));
SELECT status, expired FROM idempotency.my_records WHERE key = 'k-abandon';
SELECT outcome, attempt > :ab1 AS newer, attempt AS ab2 FROM idempotency.idempotent_begin('k-abandon', external => true) \gset
\echo :outcome :newer
SELECT fenced_error($$SELECT idempotency.idempotent_abandon('k-abandon', attempt => $$ || :ab1 || ')');
SELECT idempotency.idempotent_abandon('k-abandon', attempt => :ab2);
SELECT outcome, attempt > :ab2 AS newer FROM idempotency.idempotent_begin('k-abandon', external => true);

-- scopes keep equal keys apart
SELECT outcome FROM idempotency.idempotent_begin('k-scoped', scope => 'a', external => true);
SELECT outcome FROM idempotency.idempotent_begin('k-scoped', scope => 'b', external => true);
SELECT idempotency.idempotent_finish('k-scoped', '"in a"', scope => 'a', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-scoped' AND r.scope = 'a'));
SELECT outcome, response FROM idempotency.idempotent_begin('k-scoped', scope => 'a', external => true);
SELECT outcome, response FROM idempotency.idempotent_begin('k-scoped', scope => 'b', wait => false, external => true);

-- request fingerprints: requests equal as jsonb match (key order, duplicate
-- keys, number formatting: 1 = 1.0 = 1e0); a different request is refused,
-- and so is a call without a request (IK001, with a detail of its own)
SELECT outcome FROM idempotency.idempotent_begin('k-fp', request => '{"a": 1, "b": [1, 2]}', external => true);
SELECT outcome FROM idempotency.idempotent_begin('k-fp', request => '{"b": [1, 2], "a": 1}', external => true);
SELECT outcome FROM idempotency.idempotent_begin('k-fp', request => '{"b": [1, 2], "a": 0, "a": 1}', external => true);
SELECT outcome FROM idempotency.idempotent_begin('k-fp', request => '{"a": 1.0, "b": [1.00, 2e0]}', external => true);
SELECT outcome FROM idempotency.idempotent_begin('k-fp', request => '{"a": 0.1e1, "b": [10e-1, 0.2E+1]}', external => true);
SELECT outcome FROM idempotency.idempotent_begin('k-fp', external => true);
SELECT outcome FROM idempotency.idempotent_begin('k-fp', request => '{"a": 1, "b": [2, 1]}', external => true);
SELECT outcome FROM idempotency.idempotent_begin('k-fp', request => '{"a": "1", "b": [1, 2]}', external => true);
SELECT outcome FROM idempotency.idempotent_begin('k-fp', request => '{"a": 1, "b": [1, 2], "c": null}', external => true);
SELECT outcome FROM idempotency.idempotent_begin('k-fp', request => '[{"a": 1, "b": [1, 2]}]', external => true);
-- a scalar and a one-element array differ, as do a string and a number
SELECT outcome FROM idempotency.idempotent_begin('k-fp2', request => '99', external => true);
SELECT outcome FROM idempotency.idempotent_begin('k-fp2', request => '99.00', external => true);
SELECT outcome FROM idempotency.idempotent_begin('k-fp2', request => '9.9e1', external => true);
SELECT outcome FROM idempotency.idempotent_begin('k-fp2', request => '[99]', external => true);
SELECT outcome FROM idempotency.idempotent_begin('k-fp2', request => '"99"', external => true);
-- the first byte of a fingerprint is its version (2)
SELECT get_byte(fingerprint, 0) AS version, length(fingerprint) AS bytes
  FROM idempotency.registry WHERE key = 'k-fp2';
DO $$
BEGIN
	PERFORM idempotency.idempotent_begin('k-fp', request => '{"a": 2}');
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE 'caught SQLSTATE %', SQLSTATE;
END $$;

-- a lease that ran out is taken over: a new attempt, and the old one is fenced
SELECT attempt AS l1 FROM idempotency.idempotent_begin('k-lease', lease => '1 minute', external => true) \gset
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'k-lease';
SELECT outcome, status, attempt > :l1 AS newer, lease_until > now() AS new_lease
  FROM idempotency.idempotent_begin('k-lease', external => true);
SELECT attempt AS l2 FROM idempotency.my_records WHERE key = 'k-lease' \gset
SELECT outcome, attempt = :l2 AS same FROM idempotency.idempotent_begin('k-lease', external => true);
SELECT fenced_error($$SELECT idempotency.idempotent_finish('k-lease', '"late"', attempt => $$ || :l1 || ')');
SELECT fenced_error($$SELECT idempotency.idempotent_abandon('k-lease', attempt => $$ || :l1 || ')');
-- an attempt that was never issued says so
SELECT fenced_error($$SELECT idempotency.idempotent_finish('k-lease', '"forged"', attempt => $$ || :l2 + 5 || ')');
SELECT idempotency.idempotent_finish('k-lease', '"new owner"', attempt => :l2);
SELECT outcome, response, attempt = :l2 AS same FROM idempotency.idempotent_begin('k-lease');

-- an expired record counts as absent, whether or not it has been cleaned
SELECT outcome FROM idempotency.idempotent_begin('k-expired', request => '{"v": 1}', external => true);
SELECT idempotency.idempotent_finish('k-expired', '"old"', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-expired' AND r.scope = ''));
UPDATE idempotency.registry SET expires_at = now() - interval '1 second' WHERE key = 'k-expired';
SELECT key, status, expired FROM idempotency.my_records WHERE key = 'k-expired';
SELECT idempotency.idempotent_finish('k-expired', '"too late"');
-- a new request under the expired key is fine: the old fingerprint is gone too
SELECT outcome, status, response, attempt IS NOT NULL AS attempt FROM idempotency.idempotent_begin('k-expired', request => '{"v": 2}', external => true);
SELECT idempotency.idempotent_finish('k-expired', '"new"', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-expired' AND r.scope = ''));
SELECT outcome, response FROM idempotency.idempotent_begin('k-expired', request => '{"v": 2}', external => true);

-- ttl and lease are honoured
SELECT expires_at BETWEEN now() + interval '59 minutes' AND now() + interval '61 minutes' AS ttl_1h,
       lease_until BETWEEN now() + interval '9 seconds' AND now() + interval '11 seconds' AS lease_10s
  FROM idempotency.idempotent_begin('k-ttl', ttl => '1 hour', lease => '10 seconds', external => true);

-- transactional mode: claim, business write and result commit or roll back together
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('k-tx');
INSERT INTO charges VALUES ('k-tx', 'ORD-TX', 1);
SELECT idempotency.idempotent_finish('k-tx', '{"charged": 1}');
ROLLBACK;
SELECT count(*) AS records FROM idempotency.my_records WHERE key = 'k-tx';
SELECT count(*) AS charges FROM charges WHERE key = 'k-tx';
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('k-tx');
INSERT INTO charges VALUES ('k-tx', 'ORD-TX', 1);
SELECT idempotency.idempotent_finish('k-tx', '{"charged": 1}');
COMMIT;
SELECT outcome, response FROM idempotency.idempotent_begin('k-tx');
-- a failed business write inside a savepoint leaves the claim to be abandoned
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('k-tx2');
SAVEPOINT work;
INSERT INTO charges VALUES ('k-tx', 'ORD-TX', 1);   -- duplicate: the business table's own guard
ROLLBACK TO work;
SELECT idempotency.idempotent_abandon('k-tx2');
COMMIT;
SELECT status, expired FROM idempotency.my_records WHERE key = 'k-tx2';
SELECT outcome FROM idempotency.idempotent_begin('k-tx2', external => true);

-- the unique index rejects a second record even when the functions are bypassed
INSERT INTO idempotency.registry (owner, scope, key, status, attempt, created_at, updated_at, expires_at)
VALUES (current_user, '', 'k-steps', 'completed', 1, now(), now(), now() + interval '1 day');
-- and the business table rejects a second charge for the same key
INSERT INTO charges VALUES ('order:ORD1:pay', 'ORD1', 42.50);

-- responses are replayed whole, however large (up to the limit)
SELECT outcome FROM idempotency.idempotent_begin('k-big', external => true);
SELECT idempotency.idempotent_finish('k-big', jsonb_build_object('blob', repeat('x', 500000)), attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-big' AND r.scope = ''));
SELECT outcome, length(response->>'blob') FROM idempotency.idempotent_begin('k-big', external => true);

-- my_records shows the caller's records
SELECT key, scope, status, attempt IS NOT NULL AS attempt, expired FROM idempotency.my_records
 WHERE key IN ('k-steps', 'k-failed', 'k-scoped') ORDER BY key, scope;

-- the registry's primary key is (key, scope, owner)
SELECT pg_get_indexdef('idempotency.registry_pkey'::regclass);
-- a default claim writes its record once, whole, at finish: one insert, no
-- update; the finish of a claim written at begin is a HOT update
-- (this backend's pending table statistics change only by its own work, so
-- the difference across the calls is exactly what they did)
BEGIN;
CREATE TEMP TABLE hot_before AS
	SELECT n_tup_ins, n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relid = 'idempotency.registry'::regclass;
SELECT outcome FROM idempotency.idempotent_begin('k-hot');
SELECT a.n_tup_ins - b.n_tup_ins AS inserts_at_begin
  FROM pg_stat_xact_user_tables a, hot_before b WHERE a.relid = 'idempotency.registry'::regclass;
SELECT idempotency.idempotent_finish('k-hot', '{"ok": true}');
SELECT a.n_tup_ins - b.n_tup_ins AS inserts, a.n_tup_upd - b.n_tup_upd AS updates
  FROM pg_stat_xact_user_tables a, hot_before b WHERE a.relid = 'idempotency.registry'::regclass;
COMMIT;
DROP TABLE hot_before;
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('k-hot-external', external => true);
CREATE TEMP TABLE hot_before AS
	SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relid = 'idempotency.registry'::regclass;
SELECT idempotency.idempotent_finish('k-hot-external', '{"ok": true}');
SELECT a.n_tup_upd - b.n_tup_upd AS updates, a.n_tup_hot_upd - b.n_tup_hot_upd AS hot_updates
  FROM pg_stat_xact_user_tables a, hot_before b WHERE a.relid = 'idempotency.registry'::regclass;
COMMIT;
DROP TABLE hot_before;

-- Every statement that starts a new claim on an old record leaves nothing of
-- the old answer: every column a claim does not write itself is NULL on the
-- new claim's row, whatever columns the registry has.
CREATE FUNCTION pg_temp.left_over(k text) RETURNS text[] LANGUAGE sql AS $$
	SELECT coalesce(array_agg(c.key ORDER BY c.key), '{}')
	  FROM idempotency.registry AS r, jsonb_each(to_jsonb(r)) AS c
	 WHERE r.key = k AND c.value <> 'null'::jsonb
	   AND c.key NOT IN ('owner', 'scope', 'key', 'status', 'attempt', 'fingerprint',
						 'created_at', 'updated_at', 'lease_until', 'expires_at')
$$;
-- an expired record claimed again
SELECT outcome FROM idempotency.idempotent_begin('k-reset', 'http', '{"a": 1}', external => true);
SELECT idempotency.idempotent_checkpoint('k-reset', 'old_step', '{"old": true}', 'http', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-reset' AND r.scope = 'http'));
SELECT idempotency.idempotent_finish('k-reset', '{"old": true}', 'http', status_code => 201, body => 'old', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-reset' AND r.scope = 'http'));
SELECT pg_temp.left_over('k-reset') AS finished_has;
UPDATE idempotency.registry SET expires_at = now() - interval '1 second' WHERE key = 'k-reset';
SELECT outcome FROM idempotency.idempotent_begin('k-reset', 'http', ttl => '1 hour', external => true);
SELECT pg_temp.left_over('k-reset') AS reclaimed_has, fingerprint IS NULL AS no_fingerprint
  FROM idempotency.registry WHERE key = 'k-reset';
-- what a duplicate, lookup() and my_records show of the new claim: no answer
SELECT outcome, status, response, status_code, body
  FROM idempotency.idempotent_begin('k-reset', 'http', wait => false, external => true);
SELECT found, status, response, status_code, body FROM idempotency.lookup('k-reset', 'http');
SELECT status, response, status_code, body FROM idempotency.my_records WHERE key = 'k-reset';
-- abandoned, then claimed again; abandoning writes no answer either
SELECT idempotency.idempotent_abandon('k-reset', 'http', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-reset' AND r.scope = 'http'));
SELECT pg_temp.left_over('k-reset') AS abandoned_has;
SELECT outcome FROM idempotency.idempotent_begin('k-reset', 'http', external => true);
SELECT pg_temp.left_over('k-reset') AS reclaimed_has;
SELECT idempotency.idempotent_checkpoint('k-reset', 'kept_step', NULL, 'http', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-reset' AND r.scope = 'http'));
-- a lapsed lease taken over
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'k-reset';
SELECT outcome FROM idempotency.idempotent_begin('k-reset', 'http', external => true);
SELECT pg_temp.left_over('k-reset') AS taken_over_has;
-- a deferred claim of an expired record (claimed the ordinary way)
SELECT idempotency.idempotent_finish('k-reset', '{"old": true}', 'http', status_code => 201, body => 'old', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-reset' AND r.scope = 'http'));
UPDATE idempotency.registry SET expires_at = now() - interval '1 second' WHERE key = 'k-reset';
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('k-reset', 'http', defer_claim => true);
SELECT pg_temp.left_over('k-reset') AS deferred_reclaim_has;
SELECT idempotency.idempotent_finish('k-reset', NULL, 'http', status_code => 204);
COMMIT;
SELECT status, response, status_code, body FROM idempotency.lookup('k-reset', 'http');

TRUNCATE idempotency.registry;
DROP TABLE charges;
DROP FUNCTION pay(idempotency.key, text, numeric);
DROP FUNCTION fenced_error(text);
RESET search_path;
