--
-- Bad input to the registry functions: a specific SQLSTATE, a clear
-- message, and nothing changed.
--
SET search_path = public;
\set VERBOSITY default

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

-- a helper that shows the SQLSTATE of an error
CREATE FUNCTION sqlstate_of(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE sql;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END $$;

-- NULL arguments
SELECT idempotency.idempotent_begin(NULL);
SELECT idempotency.idempotent_begin('k', scope => NULL);
SELECT idempotency.idempotent_begin('k', ttl => NULL);
-- a NULL lease is the default: the shorter of 5 minutes and ttl
SELECT outcome, lease_until = expires_at AS lease_is_ttl
  FROM idempotency.idempotent_begin('k-short', ttl => '30 seconds', lease => NULL, external => true);
SELECT outcome, lease_until BETWEEN now() + interval '299 seconds' AND now() + interval '301 seconds' AS lease_5min
  FROM idempotency.idempotent_begin('k-long', ttl => '1 hour', external => true);
SELECT idempotency.idempotent_begin('k', wait => NULL);
SELECT idempotency.idempotent_finish(NULL, '{}');
SELECT idempotency.idempotent_finish('k', '{}', scope => NULL);
SELECT idempotency.idempotent_finish('k', '{}', failed => NULL);
SELECT idempotency.idempotent_abandon(NULL);
SELECT idempotency.idempotent_abandon('k', scope => NULL);
SELECT sqlstate_of($$SELECT idempotency.idempotent_begin(NULL)$$);

-- bad keys never reach the function
SELECT idempotency.idempotent_begin('');
SELECT idempotency.idempotent_begin(' k');

-- ttl and lease must be positive; a lease longer than the ttl is clamped to it
SELECT idempotency.idempotent_begin('k', ttl => '0');
SELECT idempotency.idempotent_begin('k', ttl => '-1 hour');
SELECT idempotency.idempotent_begin('k', ttl => '1 month -40 days');
SELECT idempotency.idempotent_begin('k', lease => '0');
SELECT idempotency.idempotent_begin('k', lease => '-5 minutes');
-- too long to add to now (timestamptz's own error would name no argument:
-- 22023 naming it, below too); as long as that is accepted
SELECT idempotency.idempotent_begin('k', ttl => '-1000000 years');
SELECT idempotency.idempotent_begin('k', ttl => '1 day', lease => '100000 years 1 day');
BEGIN;
SELECT outcome, expires_at > now() + interval '99999 years' AS far FROM idempotency.idempotent_begin('k-far', ttl => '100000 years');
ROLLBACK;
SELECT outcome, lease_until = expires_at AS lease_is_ttl
  FROM idempotency.idempotent_begin('k-clamped', ttl => '1 minute', lease => '2 minutes', external => true);
SELECT idempotency.idempotent_begin('k', ttl => '1000000 years');
SELECT sqlstate_of($$SELECT idempotency.idempotent_begin('k', ttl => '0')$$);

-- scope length
SELECT idempotency.idempotent_begin('k', scope => repeat('s', 256));
SELECT outcome FROM idempotency.idempotent_begin('k-scope-max', scope => repeat('s', 255), external => true);

-- finish and abandon without a claim (IK002)
SELECT idempotency.idempotent_finish('never-claimed', '{}');
SELECT idempotency.idempotent_abandon('never-claimed');
SELECT sqlstate_of($$SELECT idempotency.idempotent_finish('never-claimed', '{}')$$);

-- finish twice, abandon after finish (IK003)
SELECT outcome FROM idempotency.idempotent_begin('k-done', external => true);
SELECT idempotency.idempotent_finish('k-done', '"first"', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-done' AND r.scope = ''));
SELECT idempotency.idempotent_finish('k-done', '"second"', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-done' AND r.scope = ''));
SELECT idempotency.idempotent_abandon('k-done', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-done' AND r.scope = ''));
SELECT sqlstate_of($$SELECT idempotency.idempotent_finish('k-done', '{}')$$);
SELECT response FROM idempotency.my_records WHERE key = 'k-done';

-- a stale attempt (IK004): after the record's latest, or before its first
-- claim's clock reading (the claim read the fence less than a second after
-- it, so two below the attempt is before it)
SELECT outcome, attempt AS stale FROM idempotency.idempotent_begin('k-stale', external => true) \gset
SELECT fenced_error($$SELECT idempotency.idempotent_finish('k-stale', '{}', attempt => $$ || :stale + 1 || ')');
SELECT fenced_error($$SELECT idempotency.idempotent_abandon('k-stale', attempt => $$ || :stale - 2 || ')');
SELECT sqlstate_of($$SELECT idempotency.idempotent_finish('k-stale', '{}', attempt => 7)$$);
SELECT status, attempt = :stale AS unchanged FROM idempotency.my_records WHERE key = 'k-stale';

-- a response over idempotency.max_response_size (54000); the claim stays
SET idempotency.max_response_size = '1kB';
SELECT idempotency.idempotent_finish('k-stale', jsonb_build_object('blob', repeat('x', 2000)));
SELECT sqlstate_of($$SELECT idempotency.idempotent_finish('k-stale', jsonb_build_object('blob', repeat('x', 2000)))$$);
SELECT status FROM idempotency.my_records WHERE key = 'k-stale';
RESET idempotency.max_response_size;
SHOW idempotency.max_response_size;
-- only a superuser may change the limit
CREATE ROLE regress_limit_user;
SET ROLE regress_limit_user;
SET idempotency.max_response_size = '1GB';
RESET ROLE;
DROP ROLE regress_limit_user;
SET idempotency.no_such_setting = 1;

-- a huge request is only fingerprinted, never stored
SELECT outcome FROM idempotency.idempotent_begin('k-huge-request', request => jsonb_build_object('blob', repeat('y', 5000000)), external => true);
SELECT fingerprint IS NOT NULL AS fingerprinted, octet_length(fingerprint) AS bytes
  FROM idempotency.registry WHERE key = 'k-huge-request';

-- A call without a request against a record stored with one is refused
-- (IK001): in autocommit, in a transaction, under a savepoint and in a
-- PL/pgSQL EXCEPTION block whose other work commits; lookup() still reads
-- the record.
CREATE TABLE after_refusal (what text);
SELECT outcome FROM idempotency.idempotent_begin('k-noreq', request => '{"refund": 5}', external => true);
SELECT idempotency.idempotent_finish('k-noreq', '{"refunded": 5}', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'k-noreq' AND r.scope = ''));
SELECT outcome FROM idempotency.idempotent_begin('k-noreq', external => true);
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('k-noreq', defer_claim => true);
ROLLBACK;
BEGIN;
SAVEPOINT a;
SELECT outcome FROM idempotency.idempotent_begin('k-noreq', wait => false);
ROLLBACK TO SAVEPOINT a;
INSERT INTO after_refusal VALUES ('savepoint');
COMMIT;
DO $$
BEGIN
	BEGIN
		PERFORM idempotency.idempotent_begin('k-noreq');
	EXCEPTION WHEN SQLSTATE 'IK001' THEN
		RAISE NOTICE 'caught %', SQLSTATE;
	END;
	INSERT INTO after_refusal VALUES ('block');
END $$;
SELECT what FROM after_refusal ORDER BY what;
SELECT found, status, response, request_matches FROM idempotency.lookup('k-noreq');
SELECT outcome, response FROM idempotency.idempotent_begin('k-noreq', request => '{"refund": 5}', external => true);

-- A finish repeated with the current attempt and the same answer (its
-- first acknowledgement lost) returns the stored status; a different
-- answer, or no attempt, is still IK003.  In every transaction context.
SELECT attempt AS rf FROM idempotency.idempotent_begin('k-refinish', external => true) \gset
SELECT idempotency.idempotent_finish('k-refinish', '{"ok": 1.0}', attempt => :rf, status_code => 201, body => 'b');
SELECT idempotency.idempotent_finish('k-refinish', '{"ok": 1}', attempt => :rf, status_code => 201, body => 'b');
BEGIN;
SELECT idempotency.idempotent_finish('k-refinish', '{"ok": 1}', attempt => :rf, status_code => 201, body => 'b');
SAVEPOINT a;
SELECT idempotency.idempotent_finish('k-refinish', '{"ok": 1}', attempt => :rf, status_code => 201, body => 'b');
RELEASE SAVEPOINT a;
COMMIT;
DO $$
BEGIN
	PERFORM idempotency.idempotent_finish('k-refinish', '{"ok": 1}', attempt => a.attempt,
										  status_code => 201, body => 'b')
	  FROM idempotency.my_records AS a WHERE a.key = 'k-refinish';
	RAISE NOTICE 'repeated finish accepted';
END $$;
SELECT idempotency.idempotent_finish('k-refinish', '{"ok": 2}', attempt => :rf, status_code => 201, body => 'b');
SELECT idempotency.idempotent_finish('k-refinish', '{"ok": 1}', attempt => :rf, status_code => 200, body => 'b');
SELECT idempotency.idempotent_finish('k-refinish', '{"ok": 1}', attempt => :rf, status_code => 201);
SELECT idempotency.idempotent_finish('k-refinish', '{"ok": 1}', attempt => :rf, status_code => 201, body => 'b', failed => true);
SELECT idempotency.idempotent_finish('k-refinish', '{"ok": 1}', status_code => 201, body => 'b');
BEGIN;
SAVEPOINT a;
SELECT idempotency.idempotent_finish('k-refinish', '{"ok": 2}', attempt => :rf);
ROLLBACK TO SAVEPOINT a;
INSERT INTO after_refusal VALUES ('refinish savepoint');
COMMIT;
DO $$
BEGIN
	BEGIN
		PERFORM idempotency.idempotent_finish('k-refinish', '{"ok": 2}');
	EXCEPTION WHEN SQLSTATE 'IK003' THEN
		RAISE NOTICE 'caught %', SQLSTATE;
	END;
	INSERT INTO after_refusal VALUES ('refinish block');
END $$;
SELECT what FROM after_refusal WHERE what LIKE 'refinish%' ORDER BY what;
SELECT status, response, status_code, body FROM idempotency.my_records WHERE key = 'k-refinish';
-- a failure repeated the same way is accepted too
SELECT attempt AS rf2 FROM idempotency.idempotent_begin('k-refail', external => true) \gset
SELECT idempotency.idempotent_finish('k-refail', NULL, attempt => :rf2, failed => true);
SELECT idempotency.idempotent_finish('k-refail', NULL, attempt => :rf2, failed => true);
DROP TABLE after_refusal;

-- Fencing is implied only inside the claim's own transaction: finishing or
-- abandoning a claim committed earlier without its attempt is refused
-- (IK006), in every transaction context, and a stale worker can no longer
-- overwrite the new owner's answer by leaving the attempt out.
CREATE TABLE after_ik006 (what text);
SELECT attempt AS f1 FROM idempotency.idempotent_begin('k-fence', lease => '1 minute', external => true) \gset
SELECT idempotency.idempotent_finish('k-fence', '{"by": "old worker"}');
SELECT idempotency.idempotent_abandon('k-fence');
BEGIN;
SELECT idempotency.idempotent_finish('k-fence', '{"by": "old worker"}');
ROLLBACK;
BEGIN;
SAVEPOINT a;
SELECT idempotency.idempotent_abandon('k-fence');
ROLLBACK TO SAVEPOINT a;
INSERT INTO after_ik006 VALUES ('savepoint');
COMMIT;
DO $$
BEGIN
	BEGIN
		PERFORM idempotency.idempotent_finish('k-fence', '{"by": "old worker"}');
	EXCEPTION WHEN SQLSTATE 'IK006' THEN
		RAISE NOTICE 'caught %', SQLSTATE;
	END;
	INSERT INTO after_ik006 VALUES ('block');
END $$;
SELECT what FROM after_ik006 ORDER BY what;
-- the lease runs out, another worker takes the claim over: the old worker's
-- finish without an attempt is refused, and the new owner's answer stands
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'k-fence';
SELECT outcome, attempt > :f1 AS newer, attempt AS f2 FROM idempotency.idempotent_begin('k-fence', external => true) \gset
\echo :outcome :newer
SELECT idempotency.idempotent_finish('k-fence', '{"by": "old worker"}');
SELECT fenced_error($$SELECT idempotency.idempotent_finish('k-fence', '{"by": "old worker"}', attempt => $$ || :f1 || ')');
SELECT idempotency.idempotent_finish('k-fence', '{"by": "new worker"}', attempt => :f2);
SELECT status, response FROM idempotency.my_records WHERE key = 'k-fence';
-- inside the claim's transaction the attempt is implied, also from a
-- released savepoint; a claim rolled back with its savepoint is no claim
BEGIN;
SAVEPOINT a;
SELECT outcome FROM idempotency.idempotent_begin('k-own');
RELEASE SAVEPOINT a;
SELECT idempotency.idempotent_finish('k-own', '"mine"');
SAVEPOINT b;
SELECT outcome FROM idempotency.idempotent_begin('k-gone');
ROLLBACK TO SAVEPOINT b;
SELECT idempotency.idempotent_abandon('k-gone');
ROLLBACK;
DROP TABLE after_ik006;

-- nothing above left a half-written record
SELECT key, status FROM idempotency.my_records ORDER BY key;

TRUNCATE idempotency.registry;
DROP FUNCTION sqlstate_of(text);
DROP FUNCTION fenced_error(text);
RESET search_path;
