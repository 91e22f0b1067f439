--
-- idempotency.max_wait: the bound on idempotent_begin's wait for a
-- concurrent claim when the call passes no max_wait.  A prepared
-- transaction holds a claim, so that one session can meet a claim that is
-- not committed.  When the bound runs out the answer is in_progress, in
-- autocommit, in a transaction, under a savepoint and in a PL/pgSQL
-- EXCEPTION block, and the caller's transaction stays usable.  (A begin
-- that ignored the setting would wait for the prepared transaction for
-- ever: statement_timeout turns that into a failure.)
--
SET search_path = public;
SET statement_timeout = '2min';

-- shipped finite: 5 seconds
SELECT boot_val, unit, context FROM pg_settings WHERE name = 'idempotency.max_wait';
-- (the range's wording differs between majors: only the SQLSTATE is shown)
\set VERBOSITY sqlstate
SET idempotency.max_wait = -2;
\set VERBOSITY default
SET idempotency.max_wait = '10ms';
SHOW idempotency.max_wait;

CREATE TABLE wait_log (note text);

BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('dw-1', request => '{"n": 1}');
SELECT idempotency.idempotent_finish('dw-1', '{"done": 1}');
PREPARE TRANSACTION 'dw_holder';

-- autocommit
SELECT outcome, status, attempt, lease_until > now() AS retry_later
  FROM idempotency.idempotent_begin('dw-1', request => '{"n": 1}');
-- in a transaction, which goes on
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('dw-1', request => '{"n": 1}');
INSERT INTO wait_log VALUES ('in a transaction');
COMMIT;
-- under a savepoint
BEGIN;
SAVEPOINT s;
SELECT outcome FROM idempotency.idempotent_begin('dw-1', request => '{"n": 1}');
INSERT INTO wait_log VALUES ('under a savepoint');
RELEASE SAVEPOINT s;
COMMIT;
-- in a PL/pgSQL EXCEPTION block
DO $$
DECLARE
	b record;
BEGIN
	b := idempotency.idempotent_begin('dw-1', request => '{"n": 1}');
	INSERT INTO wait_log VALUES ('in an EXCEPTION block: ' || b.outcome);
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE 'caught %: %', SQLSTATE, SQLERRM;
END $$;
SELECT note FROM wait_log ORDER BY note;

-- 0 does not wait, as wait => false
SET idempotency.max_wait = 0;
SELECT outcome FROM idempotency.idempotent_begin('dw-1', request => '{"n": 1}');
-- -1 waits as long as it takes: only the caller's lock_timeout bounds it,
-- still without an error
SET idempotency.max_wait = -1;
BEGIN;
SET LOCAL lock_timeout = '10ms';
SELECT outcome FROM idempotency.idempotent_begin('dw-1', request => '{"n": 1}');
COMMIT;
-- a max_wait the caller passes wins over the setting, and so does wait => false
SELECT outcome FROM idempotency.idempotent_begin('dw-1', request => '{"n": 1}', max_wait => '10ms');
SELECT outcome FROM idempotency.idempotent_begin('dw-1', request => '{"n": 1}', wait => false);
-- a shorter lock_timeout bounds the setting's wait
SET idempotency.max_wait = '1h';
BEGIN;
SET LOCAL lock_timeout = '10ms';
SELECT outcome FROM idempotency.idempotent_begin('dw-1', request => '{"n": 1}');
COMMIT;
RESET idempotency.max_wait;

-- set per role or per transaction like any setting
BEGIN;
SET LOCAL idempotency.max_wait = '10ms';
SELECT outcome FROM idempotency.idempotent_begin('dw-1', request => '{"n": 1}');
COMMIT;

-- once the holder commits, the duplicate replays
COMMIT PREPARED 'dw_holder';
SET idempotency.max_wait = '10ms';
SELECT outcome, status, response FROM idempotency.idempotent_begin('dw-1', request => '{"n": 1}');
RESET idempotency.max_wait;

DELETE FROM idempotency.registry WHERE key::text LIKE 'dw-%';
DROP TABLE wait_log;
RESET statement_timeout;
