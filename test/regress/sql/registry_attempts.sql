--
-- Attempt numbers that no claim of the record was given: larger than its
-- latest attempt, or not positive (attempts start from the clock's seconds,
-- and a driver such as JDBC's getInt reads a NULL attempt as 0).  IK004 says
-- the attempt was never issued, in autocommit, in a transaction, under a
-- savepoint and in a PL/pgSQL EXCEPTION block, and the record is unchanged.
-- An attempt below the clock's seconds at the record's first claim was
-- never issued to the record; an earlier attempt of the record is still
-- "no longer current".
--
SET search_path = public;
\set VERBOSITY default

-- the SQLSTATE, message, detail and hint, attempt numbers masked
CREATE FUNCTION attempt_error(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	msg text;
	det text;
	hnt text;
BEGIN
	EXECUTE sql;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
	RETURN regexp_replace(SQLSTATE || ': ' || msg || ' / ' || det || ' / ' || hnt,
						  '[0-9]{6,}', 'N', 'g');
END $$;

SELECT attempt AS a1 FROM idempotency.idempotent_begin('an-1', external => true) \gset

-- not positive
SELECT attempt_error($$SELECT idempotency.idempotent_finish('an-1', '{}', attempt => 0)$$);
SELECT attempt_error($$SELECT idempotency.idempotent_finish('an-1', '{}', attempt => -1)$$);
SELECT attempt_error($$SELECT idempotency.idempotent_abandon('an-1', attempt => 0)$$);
-- larger than the latest
SELECT attempt_error(format($$SELECT idempotency.idempotent_finish('an-1', '{}', attempt => %s)$$, :a1 + 1));
SELECT attempt_error(format($$SELECT idempotency.idempotent_abandon('an-1', attempt => %s)$$, :a1 + 5));
-- smaller than the clock's seconds at the record's first claim: not one of
-- its attempts (no claim of it was taken over)
SELECT attempt_error($$SELECT idempotency.idempotent_finish('an-1', '{}', attempt => 5)$$);
SELECT attempt_error(format($$SELECT idempotency.idempotent_abandon('an-1', attempt => %s)$$,
		floor(extract(epoch FROM created_at - '2000-01-01 00:00:00+00'))::int - 1))
  FROM idempotency.my_records WHERE key = 'an-1';
SELECT status, attempt = :a1 AS unchanged FROM idempotency.my_records WHERE key = 'an-1';
-- an earlier attempt of the record, taken over: no longer current
SELECT attempt AS a3 FROM idempotency.idempotent_begin('an-3', external => true) \gset
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'an-3';
SELECT attempt > :a3 AS taken_over FROM idempotency.idempotent_begin('an-3', external => true);
SELECT attempt_error(format($$SELECT idempotency.idempotent_finish('an-3', '{}', attempt => %s)$$, :a3));
SELECT idempotency.idempotent_abandon('an-3', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'an-3'));

-- in every transaction context (terse: the message only)
\set VERBOSITY terse
SELECT idempotency.idempotent_finish('an-1', '{}', attempt => 0);
BEGIN;
SELECT idempotency.idempotent_finish('an-1', '{}', attempt => 0);
ROLLBACK;
BEGIN;
SAVEPOINT s;
SELECT idempotency.idempotent_abandon('an-1', attempt => 0);
ROLLBACK TO SAVEPOINT s;
SELECT status FROM idempotency.my_records WHERE key = 'an-1';
COMMIT;
DO $$
BEGIN
	PERFORM idempotency.idempotent_finish('an-1', '{}', attempt => 0);
EXCEPTION WHEN SQLSTATE 'IK004' THEN
	RAISE NOTICE 'caught %: %', SQLSTATE, SQLERRM;
END $$;
\set VERBOSITY default
SELECT idempotency.idempotent_finish('an-1', '{"done": true}', attempt => :a1);

-- this transaction's deferred claim: the same rule against its attempt
BEGIN;
SELECT outcome, attempt AS a2 FROM idempotency.idempotent_begin('an-2', defer_claim => true) \gset
SAVEPOINT s;
SELECT attempt_error($$SELECT idempotency.idempotent_finish('an-2', '{}', attempt => 0)$$);
SELECT attempt_error(format($$SELECT idempotency.idempotent_finish('an-2', '{}', attempt => %s)$$, :a2 + 1));
SELECT attempt_error(format($$SELECT idempotency.idempotent_abandon('an-2', attempt => %s)$$, :a2 - 1));
ROLLBACK TO SAVEPOINT s;
SELECT idempotency.idempotent_finish('an-2', '{}', attempt => :a2);
COMMIT;

SELECT key, status FROM idempotency.my_records WHERE key::text LIKE 'an-%' ORDER BY key;

DELETE FROM idempotency.registry WHERE key::text LIKE 'an-%';
DROP FUNCTION attempt_error(text);
