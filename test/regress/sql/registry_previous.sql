--
-- What idempotent_begin says of the claim before its own: previous_attempt
-- and previous_end.  An execute over an earlier claim names that claim's
-- attempt and how it ended: lease_expired (its lease ran out, or its record
-- expired while it was processing: the work may have partly happened),
-- abandoned, or expired (a finished record whose expiry passed).  A first
-- claim, a replay and an in_progress answer name none.  Leases and expiries
-- are moved into the past by hand instead of waiting for the clock.
--
SET search_path = public;

-- the columns as a line, attempts shown relative to the record's previous one
CREATE FUNCTION previous_of(outcome text, previous_end text, previous_attempt int4, seen int4)
RETURNS text LANGUAGE sql AS $$
	SELECT outcome || ' ' || coalesce(previous_end, '-') || ' ' ||
		   CASE WHEN previous_attempt IS NULL THEN '-'
				WHEN previous_attempt = seen THEN 'the previous attempt'
				ELSE 'another attempt' END
$$;

-- a first claim names no earlier one
SELECT outcome, previous_attempt, previous_end FROM idempotency.idempotent_begin('pv-1', external => true);
SELECT attempt AS a1 FROM idempotency.my_records WHERE key = 'pv-1' \gset
-- nor does in_progress or replay
SELECT outcome, previous_attempt, previous_end FROM idempotency.idempotent_begin('pv-1', external => true);
SELECT idempotency.idempotent_finish('pv-1', '{"n": 1}', attempt => :a1);
SELECT outcome, previous_attempt, previous_end FROM idempotency.idempotent_begin('pv-1', external => true);

-- a claim whose lease ran out, taken over: lease_expired, its attempt
SELECT attempt AS a2 FROM idempotency.idempotent_begin('pv-2', external => true) \gset
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'pv-2';
SELECT previous_of(b.outcome, b.previous_end, b.previous_attempt, :a2) FROM idempotency.idempotent_begin('pv-2', external => true) AS b;
SELECT attempt > :a2 AS new_attempt, status FROM idempotency.my_records WHERE key = 'pv-2';

-- a claim given up: abandoned
SELECT attempt AS a3 FROM idempotency.idempotent_begin('pv-3', external => true) \gset
SELECT idempotency.idempotent_abandon('pv-3', attempt => :a3);
SELECT previous_of(b.outcome, b.previous_end, b.previous_attempt, :a3) FROM idempotency.idempotent_begin('pv-3', external => true) AS b;

-- a finished record that expired: expired (completed or failed alike)
SELECT attempt AS a4 FROM idempotency.idempotent_begin('pv-4', external => true) \gset
SELECT idempotency.idempotent_finish('pv-4', '{"n": 4}', attempt => :a4, failed => true);
UPDATE idempotency.registry SET expires_at = now() - interval '1 second' WHERE key = 'pv-4';
SELECT previous_of(b.outcome, b.previous_end, b.previous_attempt, :a4) FROM idempotency.idempotent_begin('pv-4', external => true) AS b;

-- a claim whose record expired while it was processing: it never ended
SELECT attempt AS a5 FROM idempotency.idempotent_begin('pv-5', external => true) \gset
UPDATE idempotency.registry SET expires_at = now() - interval '1 second',
	   lease_until = now() - interval '1 second' WHERE key = 'pv-5';
SELECT previous_of(b.outcome, b.previous_end, b.previous_attempt, :a5) FROM idempotency.idempotent_begin('pv-5', external => true) AS b;

-- a deferred claim over an abandoned record is written at begin, and says so
SELECT attempt AS a6 FROM idempotency.idempotent_begin('pv-6', external => true) \gset
SELECT idempotency.idempotent_abandon('pv-6', attempt => :a6);
BEGIN;
SELECT previous_of(b.outcome, b.previous_end, b.previous_attempt, :a6) FROM idempotency.idempotent_begin('pv-6', defer_claim => true) AS b;
SELECT idempotency.idempotent_finish('pv-6', '{"n": 6}');
COMMIT;
-- a deferred claim of a key without a record names none
BEGIN;
SELECT outcome, previous_attempt, previous_end FROM idempotency.idempotent_begin('pv-7', defer_claim => true);
SELECT idempotency.idempotent_abandon('pv-7');
COMMIT;

-- a record the cleanup removed leaves no trace: the next claim is a first one
SELECT attempt AS a8 FROM idempotency.idempotent_begin('pv-8', external => true) \gset
SELECT idempotency.idempotent_abandon('pv-8', attempt => :a8);
DELETE FROM idempotency.registry WHERE key = 'pv-8';
SELECT outcome, previous_attempt, previous_end FROM idempotency.idempotent_begin('pv-8', external => true);

-- in the same transaction: the take-over, then this transaction's own claim
SELECT attempt AS a9 FROM idempotency.idempotent_begin('pv-9', external => true) \gset
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'pv-9';
BEGIN;
SELECT previous_of(b.outcome, b.previous_end, b.previous_attempt, :a9) FROM idempotency.idempotent_begin('pv-9', external => true) AS b;
SELECT outcome, previous_attempt, previous_end FROM idempotency.idempotent_begin('pv-9');
COMMIT;

-- in a PL/pgSQL assignment, as a handler reads it
SELECT attempt AS a10 FROM idempotency.idempotent_begin('pv-10', external => true) \gset
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'pv-10';
DO $$
DECLARE
	b record;
BEGIN
	b := idempotency.idempotent_begin('pv-10', external => true);
	IF b.previous_end = 'lease_expired' THEN
		RAISE NOTICE 'attempt after an earlier one that may have partly happened';
	END IF;
END $$;

-- a take-over rolled back leaves the lapsed claim, and the next one says so
SELECT attempt AS a11 FROM idempotency.idempotent_begin('pv-11', external => true) \gset
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 'pv-11';
BEGIN;
SAVEPOINT s;
SELECT previous_of(b.outcome, b.previous_end, b.previous_attempt, :a11) FROM idempotency.idempotent_begin('pv-11') AS b;
ROLLBACK TO SAVEPOINT s;
SELECT previous_of(b.outcome, b.previous_end, b.previous_attempt, :a11) FROM idempotency.idempotent_begin('pv-11') AS b;
ROLLBACK;

DELETE FROM idempotency.registry WHERE key::text LIKE 'pv-%';
DROP FUNCTION previous_of(text, text, int4, int4);
