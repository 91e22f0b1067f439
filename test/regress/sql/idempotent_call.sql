--
-- idempotent_call(key, handler, request): the claim, the handler's run and
-- the finish in one statement.  The handler's writes commit or roll back
-- with the record, in every transaction context; a replay or an
-- in_progress answer does not run it; a handler that is not a function of
-- jsonb returning jsonb, or that the caller may not run, is refused before
-- anything is claimed.
--
SET search_path = public;
\set VERBOSITY terse
CREATE TABLE call_charges (key text, amount int);
-- unqualified on purpose: the handler runs with the caller's search_path
CREATE FUNCTION pay(request jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO call_charges VALUES (request->>'key', (request->>'amount')::int);
	IF (request->>'amount')::int < 0 THEN
		RAISE EXCEPTION 'negative amount' USING ERRCODE = 'check_violation';
	END IF;
	RETURN jsonb_build_object('charged', (request->>'amount')::int);
END $$;

-- autocommit: execute, then replay; the handler ran once
SELECT outcome, status, response, attempt IS NOT NULL AS has_attempt, retry_after
  FROM idempotency.idempotent_call('c1', 'pay(jsonb)', '{"key": "c1", "amount": 10}');
SELECT outcome, status, response FROM idempotency.idempotent_call('c1', 'pay(jsonb)', '{"key": "c1", "amount": 10}');
SELECT count(*) AS charges FROM call_charges WHERE key = 'c1';
SELECT status, response FROM idempotency.my_records WHERE key = 'c1';
-- the same key with another request: IK001, the handler does not run
SELECT * FROM idempotency.idempotent_call('c1', 'pay(jsonb)', '{"key": "c1", "amount": 99}');
SELECT count(*) AS charges FROM call_charges WHERE key = 'c1';
-- idempotent_begin replays what idempotent_call stored
SELECT outcome, response FROM idempotency.idempotent_begin('c1', request => '{"key": "c1", "amount": 10}');

-- the handler fails: nothing is stored, nothing charged; a retry executes
SELECT * FROM idempotency.idempotent_call('c2', 'pay(jsonb)', '{"key": "c2", "amount": -1}');
SELECT count(*) AS records FROM idempotency.my_records WHERE key = 'c2';
SELECT count(*) AS charges FROM call_charges WHERE key = 'c2';

-- in a transaction that rolls back: the record and the charge go together
BEGIN;
SELECT outcome FROM idempotency.idempotent_call('c3', 'pay(jsonb)', '{"key": "c3", "amount": 3}');
ROLLBACK;
SELECT count(*) AS records FROM idempotency.my_records WHERE key = 'c3';
SELECT count(*) AS charges FROM call_charges WHERE key = 'c3';
-- in a savepoint rolled back, then again: one charge, one record
BEGIN;
SAVEPOINT a;
SELECT outcome FROM idempotency.idempotent_call('c3', 'pay(jsonb)', '{"key": "c3", "amount": 3}');
ROLLBACK TO a;
SELECT outcome FROM idempotency.idempotent_call('c3', 'pay(jsonb)', '{"key": "c3", "amount": 3}');
SELECT outcome FROM idempotency.idempotent_call('c3', 'pay(jsonb)', '{"key": "c3", "amount": 3}');
COMMIT;
SELECT count(*) AS charges FROM call_charges WHERE key = 'c3';
-- the handler's failure caught in a PL/pgSQL block: the block's work goes,
-- the transaction carries on, and the key is free for a later call
DO $$
DECLARE
	r record;
BEGIN
	BEGIN
		r := idempotency.idempotent_call('c4', 'pay(jsonb)', '{"key": "c4", "amount": -4}');
	EXCEPTION WHEN check_violation THEN
		RAISE NOTICE 'handler failed: %', SQLERRM;
	END;
	r := idempotency.idempotent_call('c4', 'pay(jsonb)', '{"key": "c4", "amount": 4}');
	RAISE NOTICE 'then: %', r.outcome;
END $$;
SELECT count(*) AS charges FROM call_charges WHERE key = 'c4';

-- the handler asking for its own key sees it in progress (this transaction's claim)
CREATE FUNCTION pay_nested(request jsonb) RETURNS jsonb LANGUAGE sql AS $$
	SELECT to_jsonb(b.outcome) FROM idempotency.idempotent_begin(request->>'key', request => request) AS b
$$;
SELECT outcome, response FROM idempotency.idempotent_call('c5', 'pay_nested(jsonb)', '{"key": "c5"}');

-- a handler returning NULL stores no response, as finish with NULL does
CREATE FUNCTION pay_nothing(request jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb';
SELECT outcome, status, response IS NULL AS no_response FROM idempotency.idempotent_call('c6', 'pay_nothing(jsonb)');
SELECT outcome, status, response IS NULL AS no_response FROM idempotency.idempotent_call('c6', 'pay_nothing(jsonb)');

-- handlers that cannot serve: refused before anything is claimed
CREATE FUNCTION pay_text(request text) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb';
CREATE FUNCTION pay_set(request jsonb) RETURNS SETOF jsonb LANGUAGE sql AS 'SELECT request';
CREATE PROCEDURE pay_proc(request jsonb) LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION pay_strict(request jsonb) RETURNS jsonb LANGUAGE sql STRICT AS 'SELECT request';
\set VERBOSITY default
SELECT * FROM idempotency.idempotent_call('c7', 'pay_text(text)');
SELECT * FROM idempotency.idempotent_call('c7', 'pay_set(jsonb)');
SELECT * FROM idempotency.idempotent_call('c7', 'pay_proc(jsonb)');
SELECT * FROM idempotency.idempotent_call('c7', 'pay_strict(jsonb)');
SELECT * FROM idempotency.idempotent_call('c7', NULL);
SELECT * FROM idempotency.idempotent_call('c7', 'pay(jsonb)', ttl => '-1 hour');
\set VERBOSITY terse
SELECT count(*) AS records FROM idempotency.my_records WHERE key = 'c7';
-- a STRICT handler with a request runs
SELECT outcome, response FROM idempotency.idempotent_call('c7', 'pay_strict(jsonb)', '{"x": 1}');

-- an application role may call the API, but only handlers it may execute
CREATE ROLE regress_call_app;
SELECT idempotency.grant_usage('regress_call_app');
GRANT INSERT ON call_charges TO regress_call_app;
REVOKE EXECUTE ON FUNCTION pay(jsonb) FROM PUBLIC;
SET ROLE regress_call_app;
SELECT * FROM idempotency.idempotent_call('c8', 'pay(jsonb)', '{"key": "c8", "amount": 8}');
RESET ROLE;
GRANT EXECUTE ON FUNCTION pay(jsonb) TO regress_call_app;
SET ROLE regress_call_app;
SELECT outcome, response FROM idempotency.idempotent_call('c8', 'pay(jsonb)', '{"key": "c8", "amount": 8}');
SELECT outcome, response FROM idempotency.idempotent_call('c8', 'pay(jsonb)', '{"key": "c8", "amount": 8}');
RESET ROLE;
SELECT count(*) AS charges FROM call_charges WHERE key = 'c8';
DROP OWNED BY regress_call_app;
SELECT idempotency.forget_role('regress_call_app');
DROP ROLE regress_call_app;

-- statistics: one execute and one replay counted per call, as begin counts them
SELECT idempotency.stats_reset() IS NOT NULL AS reset;
SELECT outcome FROM idempotency.idempotent_call('c9', 'pay(jsonb)', '{"key": "c9", "amount": 9}');
SELECT outcome FROM idempotency.idempotent_call('c9', 'pay(jsonb)', '{"key": "c9", "amount": 9}');
SELECT begins_execute, begins_replay, finishes FROM idempotency.stats;

DROP FUNCTION pay(jsonb), pay_nested(jsonb), pay_nothing(jsonb), pay_text(text), pay_set(jsonb), pay_strict(jsonb);
DROP PROCEDURE pay_proc(jsonb);
DROP TABLE call_charges;
