--
-- idempotent_begin(..., defer_claim => true): begin only reads, and the
-- record is written once, complete, by idempotent_finish in the same
-- transaction.  Concurrency is in test/isolation/specs/xactclaims_defer_race.spec.
-- At the end: a claim taken without external => true must be finished in
-- its transaction too.
--
SET search_path = public;
CREATE TABLE orders_paid (key text PRIMARY KEY, amount int);

-- begin, business write and finish in one transaction: one record, written
-- by finish (begin wrote nothing)
BEGIN;
SELECT outcome, status, attempt IS NOT NULL AS has_attempt, lease_until > now() AS leased
  FROM idempotency.idempotent_begin('d1', request => '{"amount": 5}', defer_claim => true);
SELECT count(*) AS written_by_begin FROM idempotency.registry WHERE key = 'd1';
INSERT INTO orders_paid VALUES ('d1', 5);
SELECT idempotency.idempotent_finish('d1', '{"paid": 5}', status_code => 201);
SELECT status, lease_until IS NULL AS no_lease FROM idempotency.registry WHERE key = 'd1';
COMMIT;
-- retries replay, by a single read; a different request is still refused
SELECT outcome, status, response, status_code
  FROM idempotency.idempotent_begin('d1', request => '{"amount": 5.0}', defer_claim => true);
SELECT outcome FROM idempotency.idempotent_begin('d1', request => '{"amount": 5}');
SELECT outcome FROM idempotency.idempotent_begin('d1', request => '{"amount": 6}', defer_claim => true);

-- the attempt begin returned is the one the record gets; a wrong one is refused
BEGIN;
SELECT attempt AS d2 FROM idempotency.idempotent_begin('d2', defer_claim => true) \gset
\set VERBOSITY sqlstate
SELECT idempotency.idempotent_finish('d2', '{}', attempt => :d2 + 1);
\set VERBOSITY default
ROLLBACK;
BEGIN;
SELECT attempt AS d2 FROM idempotency.idempotent_begin('d2', defer_claim => true) \gset
SELECT idempotency.idempotent_finish('d2', '{}', attempt => :d2);
COMMIT;
SELECT attempt = :d2 AS same_attempt FROM idempotency.my_records WHERE key = 'd2';

-- a second begin of the same key in the same transaction: in_progress
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('d3', defer_claim => true);
SELECT outcome, lease_until > now() AS leased FROM idempotency.idempotent_begin('d3', defer_claim => true);
SELECT outcome FROM idempotency.idempotent_begin('d3');
SELECT idempotency.idempotent_finish('d3', '"once"');
COMMIT;
SELECT outcome, response FROM idempotency.idempotent_begin('d3');

-- a transaction that took a deferred claim cannot commit without its finish:
-- the commit fails and commits nothing, not even the business write
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('d4', defer_claim => true);
INSERT INTO orders_paid VALUES ('d4', 4);
COMMIT;
SELECT count(*) AS business_rows FROM orders_paid WHERE key = 'd4';
SELECT count(*) AS records FROM idempotency.registry WHERE key = 'd4';
-- in autocommit there is no later finish: the statement itself fails
SELECT outcome FROM idempotency.idempotent_begin('d4', defer_claim => true);
SELECT count(*) AS records FROM idempotency.registry WHERE key = 'd4';
-- PREPARE TRANSACTION is refused the same way
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('d4', defer_claim => true);
PREPARE TRANSACTION 'deferred';
SELECT count(*) AS prepared FROM pg_prepared_xacts WHERE gid = 'deferred';

-- abandon forgets a deferred claim (nothing was written); the commit goes through
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('d5', defer_claim => true);
SELECT idempotency.idempotent_abandon('d5');
INSERT INTO orders_paid VALUES ('d5-other', 1);
COMMIT;
SELECT count(*) AS records FROM idempotency.registry WHERE key = 'd5';
SELECT count(*) AS business_rows FROM orders_paid WHERE key = 'd5-other';
SELECT idempotency.idempotent_abandon('d5');

-- a claim taken in a subtransaction that rolls back goes with it
BEGIN;
SAVEPOINT s;
SELECT outcome FROM idempotency.idempotent_begin('d6', defer_claim => true);
ROLLBACK TO s;
INSERT INTO orders_paid VALUES ('d6-other', 1);
COMMIT;
SELECT count(*) AS business_rows FROM orders_paid WHERE key = 'd6-other';
-- ... and one whose subtransaction commits passes to the parent
BEGIN;
SAVEPOINT s;
SELECT outcome FROM idempotency.idempotent_begin('d6', defer_claim => true);
RELEASE s;
COMMIT;
BEGIN;
SAVEPOINT s;
SELECT outcome FROM idempotency.idempotent_begin('d6', defer_claim => true);
RELEASE s;
SELECT idempotency.idempotent_finish('d6', '"via parent"');
COMMIT;
SELECT outcome, response FROM idempotency.idempotent_begin('d6');

-- inside a PL/pgSQL EXCEPTION block: an error after the deferred begin rolls
-- the claim back with the block, and the transaction still commits
DO $$
BEGIN
	BEGIN
		PERFORM idempotency.idempotent_begin('d7', defer_claim => true);
		INSERT INTO orders_paid VALUES ('d7', 7);
		PERFORM 1 / 0;
	EXCEPTION WHEN division_by_zero THEN
		RAISE NOTICE 'caught %', SQLSTATE;
	END;
	INSERT INTO orders_paid VALUES ('d7-after', 7);
END $$;
SELECT key FROM orders_paid WHERE key LIKE 'd7%' ORDER BY key;
SELECT count(*) AS records FROM idempotency.registry WHERE key = 'd7';

-- an expired or abandoned record is claimed the ordinary way (written at begin)
SELECT outcome FROM idempotency.idempotent_begin('d8', external => true);
SELECT idempotency.idempotent_abandon('d8', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'd8' AND r.scope = ''));
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('d8', defer_claim => true);
SELECT status FROM idempotency.registry WHERE key = 'd8';
SELECT idempotency.idempotent_finish('d8', '"reclaimed"', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'd8' AND r.scope = ''));
COMMIT;
SELECT outcome, response FROM idempotency.idempotent_begin('d8');

-- NULL defer_claim
SELECT idempotency.idempotent_begin('d9', defer_claim => NULL);

-- A finish or abandon undone by a subtransaction's rollback leaves the claim
-- open again: the commit is refused (2D000) and nothing commits, not even
-- the business write that stayed.  In every transaction context.
\set VERBOSITY sqlstate
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('s1', defer_claim => true);
INSERT INTO orders_paid VALUES ('s1', 1);
SAVEPOINT a;
SELECT idempotency.idempotent_finish('s1', '{"ok": true}');
ROLLBACK TO SAVEPOINT a;
COMMIT;
SELECT count(*) AS business_rows FROM orders_paid WHERE key = 's1';
SELECT count(*) AS records FROM idempotency.registry WHERE key = 's1';
-- the same for an abandon
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('s1', defer_claim => true);
INSERT INTO orders_paid VALUES ('s1', 1);
SAVEPOINT a;
SELECT idempotency.idempotent_abandon('s1');
ROLLBACK TO SAVEPOINT a;
COMMIT;
SELECT count(*) AS business_rows FROM orders_paid WHERE key = 's1';
-- a finish in a PL/pgSQL EXCEPTION block whose error undoes it
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('s1', defer_claim => true);
INSERT INTO orders_paid VALUES ('s1', 1);
DO $$
BEGIN
	PERFORM idempotency.idempotent_finish('s1', '{"ok": true}');
	PERFORM 1 / 0;
EXCEPTION WHEN division_by_zero THEN
	RAISE NOTICE 'caught %', SQLSTATE;
END $$;
COMMIT;
SELECT count(*) AS business_rows FROM orders_paid WHERE key = 's1';
-- the same in autocommit, one DO block: begin, write, a finish undone
DO $$
BEGIN
	PERFORM idempotency.idempotent_begin('s1', defer_claim => true);
	INSERT INTO orders_paid VALUES ('s1', 1);
	BEGIN
		PERFORM idempotency.idempotent_abandon('s1');
		PERFORM 1 / 0;
	EXCEPTION WHEN division_by_zero THEN
		RAISE NOTICE 'caught %', SQLSTATE;
	END;
END $$;
SELECT count(*) AS business_rows FROM orders_paid WHERE key = 's1';
SELECT count(*) AS records FROM idempotency.registry WHERE key = 's1';
\set VERBOSITY default
-- the reopened claim is the one a second begin sees, and a second finish
-- writes it
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('s2', defer_claim => true);
INSERT INTO orders_paid VALUES ('s2', 2);
SAVEPOINT a;
SELECT idempotency.idempotent_finish('s2', '"first"');
SELECT outcome FROM idempotency.idempotent_begin('s2', defer_claim => true);
ROLLBACK TO SAVEPOINT a;
SELECT outcome FROM idempotency.idempotent_begin('s2', defer_claim => true);
SELECT idempotency.idempotent_finish('s2', '"second"');
COMMIT;
SELECT outcome, response FROM idempotency.idempotent_begin('s2');
-- a finish in a savepoint that is released, or a PL/pgSQL block that ends
-- without error, counts
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('s3', defer_claim => true);
SAVEPOINT a;
SAVEPOINT b;
SELECT idempotency.idempotent_finish('s3', '"released"');
RELEASE SAVEPOINT b;
RELEASE SAVEPOINT a;
COMMIT;
DO $$
BEGIN
	PERFORM idempotency.idempotent_begin('s4', defer_claim => true);
	BEGIN
		PERFORM idempotency.idempotent_finish('s4', '"in a block"');
	EXCEPTION WHEN OTHERS THEN
		RAISE NOTICE 'not reached';
	END;
END $$;
SELECT key, response FROM idempotency.my_records WHERE key IN ('s3', 's4') ORDER BY key;
-- finished two levels down, that level released, the one above rolled back:
-- open again
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('s5', defer_claim => true);
SAVEPOINT a;
SAVEPOINT b;
SELECT idempotency.idempotent_finish('s5', '"deep"');
RELEASE SAVEPOINT b;
ROLLBACK TO SAVEPOINT a;
SELECT outcome FROM idempotency.idempotent_begin('s5', defer_claim => true);
SELECT idempotency.idempotent_finish('s5', '"again"');
COMMIT;
SELECT outcome, response FROM idempotency.idempotent_begin('s5');
-- claimed and finished in one savepoint that rolls back: claim, record and
-- business write all go, and the transaction commits what it kept
BEGIN;
INSERT INTO orders_paid VALUES ('s6-kept', 6);
SAVEPOINT a;
SELECT outcome FROM idempotency.idempotent_begin('s6', defer_claim => true);
INSERT INTO orders_paid VALUES ('s6', 6);
SELECT idempotency.idempotent_finish('s6', '"gone"');
ROLLBACK TO SAVEPOINT a;
COMMIT;
SELECT key FROM orders_paid WHERE key LIKE 's6%' ORDER BY key;
SELECT count(*) AS records FROM idempotency.registry WHERE key = 's6';

-- A finished deferred claim keeps no memory until the transaction ends:
-- 20000 of them in one transaction grow the transaction's memory by far
-- less than they would at even 50 bytes each.
CREATE FUNCTION pg_temp.top_transaction_bytes() RETURNS bigint LANGUAGE sql AS
$$ SELECT total_bytes FROM pg_backend_memory_contexts WHERE name = 'TopTransactionContext' $$;
BEGIN;
SELECT pg_temp.top_transaction_bytes() AS before \gset
DO $$
DECLARE
	s text;
BEGIN
	FOR i IN 1..20000 LOOP
		PERFORM idempotency.idempotent_begin('m' || i, 'memory', defer_claim => true);
		s := idempotency.idempotent_finish('m' || i, NULL, 'memory');
	END LOOP;
END $$;
SELECT pg_temp.top_transaction_bytes() - :before < 20000 * 50 AS bounded;
COMMIT;

-- Many claims held at once by one transaction (a batch that claims first and
-- finishes later): each is found again by its key, also once they are
-- indexed, and a claim given up in a savepoint that rolls back is the
-- transaction's again even after its key was claimed anew there.
CREATE FUNCTION pg_temp.claim_and_shadow(n int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	r text := '';
BEGIN
	PERFORM idempotency.idempotent_begin('many-' || n || '-' || i) FROM generate_series(1, n) AS i;
	r := r || (SELECT outcome FROM idempotency.idempotent_begin('many-' || n || '-' || n / 2));
	BEGIN
		PERFORM idempotency.idempotent_abandon('many-' || n || '-1');
		r := r || ' ' || (SELECT outcome FROM idempotency.idempotent_begin('many-' || n || '-1'));
		RAISE EXCEPTION 'undo';
	EXCEPTION WHEN raise_exception THEN
		r := r || ' undone';
	END;
	PERFORM idempotency.idempotent_finish('many-' || n || '-' || i, to_jsonb(i)) FROM generate_series(1, n) AS i;
	RETURN r;
END $$;
BEGIN;
SELECT pg_temp.claim_and_shadow(5);
SELECT pg_temp.claim_and_shadow(40);
COMMIT;
SELECT count(*) FILTER (WHERE status = 'completed') AS completed, count(*) AS records
  FROM idempotency.my_records WHERE key::text LIKE 'many-%';

--
-- A claim taken without external => true (written at begin) must be finished
-- or abandoned in the transaction that took it, like a deferred one: the
-- work and its answer commit together.
--

-- in autocommit, a begin alone fails and commits nothing
SELECT outcome FROM idempotency.idempotent_begin('t1');
SELECT count(*) AS records FROM idempotency.registry WHERE key = 't1';
-- a retry then executes: nothing was left behind
SELECT outcome FROM idempotency.idempotent_begin('t1', external => true);
SELECT status FROM idempotency.registry WHERE key = 't1';
-- a take-over of a lapsed claim is the same
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 't1';
SELECT outcome FROM idempotency.idempotent_begin('t1');
SELECT status, lease_until < now() AS still_lapsed FROM idempotency.registry WHERE key = 't1';

-- in an explicit transaction, COMMIT fails and commits neither the claim nor
-- the business write
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('t2');
INSERT INTO orders_paid VALUES ('t2', 2);
COMMIT;
SELECT count(*) AS business_rows FROM orders_paid WHERE key = 't2';
SELECT count(*) AS records FROM idempotency.registry WHERE key = 't2';
-- begin, write and finish in the transaction commit together
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('t2');
INSERT INTO orders_paid VALUES ('t2', 2);
SELECT idempotency.idempotent_finish('t2', '{"paid": 2}');
COMMIT;
SELECT status FROM idempotency.registry WHERE key = 't2';
SELECT count(*) AS business_rows FROM orders_paid WHERE key = 't2';

-- a function that begins, writes and finishes works in one autocommit
-- statement
CREATE FUNCTION pg_temp.pay(k text, amount int) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
	b record;
BEGIN
	b := idempotency.idempotent_begin(k, request => jsonb_build_object('amount', amount));
	IF b.outcome <> 'execute' THEN
		RETURN b.response;
	END IF;
	INSERT INTO orders_paid VALUES (k, amount);
	PERFORM idempotency.idempotent_finish(k, jsonb_build_object('paid', amount));
	RETURN jsonb_build_object('paid', amount);
END $$;
SELECT pg_temp.pay('t3', 3);
SELECT pg_temp.pay('t3', 3);
SELECT status FROM idempotency.registry WHERE key = 't3';

-- abandon ends the obligation too; the commit goes through
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('t4');
SELECT idempotency.idempotent_abandon('t4');
INSERT INTO orders_paid VALUES ('t4-other', 4);
COMMIT;
SELECT status FROM idempotency.registry WHERE key = 't4';
SELECT count(*) AS business_rows FROM orders_paid WHERE key = 't4-other';

-- external => true: the claim commits on its own, and a later transaction
-- finishes it with its attempt
SELECT attempt AS t5 FROM idempotency.idempotent_begin('t5', external => true) \gset
SELECT status FROM idempotency.registry WHERE key = 't5';
SELECT idempotency.idempotent_finish('t5', '{"done": true}', attempt => :t5);
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('t6', external => true);
COMMIT;
SELECT status FROM idempotency.registry WHERE key = 't6';
SELECT idempotency.idempotent_abandon('t6', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 't6'));

-- under a savepoint: a claim in a rolled-back savepoint is gone and does not
-- hold the commit; one in a released savepoint does
BEGIN;
SAVEPOINT s;
SELECT outcome FROM idempotency.idempotent_begin('t7');
ROLLBACK TO SAVEPOINT s;
INSERT INTO orders_paid VALUES ('t7-other', 7);
COMMIT;
SELECT count(*) AS records FROM idempotency.registry WHERE key = 't7';
SELECT count(*) AS business_rows FROM orders_paid WHERE key = 't7-other';
BEGIN;
SAVEPOINT s;
SELECT outcome FROM idempotency.idempotent_begin('t7');
RELEASE SAVEPOINT s;
INSERT INTO orders_paid VALUES ('t7', 7);
COMMIT;
SELECT count(*) AS records FROM idempotency.registry WHERE key = 't7';
SELECT count(*) AS business_rows FROM orders_paid WHERE key = 't7';

-- inside a PL/pgSQL EXCEPTION block: a claim rolled back with the block is
-- gone; one the block kept holds the commit of the statement
DO $$
BEGIN
	BEGIN
		PERFORM idempotency.idempotent_begin('t8');
		RAISE EXCEPTION 'undo';
	EXCEPTION WHEN raise_exception THEN
		RAISE NOTICE 'claim undone';
	END;
	INSERT INTO orders_paid VALUES ('t8-other', 8);
END $$;
SELECT count(*) AS records FROM idempotency.registry WHERE key = 't8';
SELECT count(*) AS business_rows FROM orders_paid WHERE key = 't8-other';
DO $$
BEGIN
	BEGIN
		PERFORM idempotency.idempotent_begin('t8');
		INSERT INTO orders_paid VALUES ('t8', 8);
	EXCEPTION WHEN others THEN
		RAISE NOTICE 'not reached';
	END;
END $$;
SELECT count(*) AS records FROM idempotency.registry WHERE key = 't8';
SELECT count(*) AS business_rows FROM orders_paid WHERE key = 't8';

-- PREPARE TRANSACTION is refused the same way, and prepares nothing
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('t9');
INSERT INTO orders_paid VALUES ('t9', 9);
PREPARE TRANSACTION 'claimed';
SELECT count(*) AS prepared FROM pg_prepared_xacts WHERE gid = 'claimed';
SELECT count(*) AS records FROM idempotency.registry WHERE key = 't9';
-- with external => true it prepares, and commits, as before
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('t9', external => true);
PREPARE TRANSACTION 'claimed';
COMMIT PREPARED 'claimed';
SELECT status FROM idempotency.registry WHERE key = 't9';

-- a claim handed out by claim_stalled is for a completer of work outside the
-- database: it commits without external
SELECT outcome FROM idempotency.idempotent_begin('t10', lease => '1 minute', external => true);
UPDATE idempotency.registry SET lease_until = now() - interval '1 second' WHERE key = 't10';
SELECT key, attempt > previous_attempt AS new_attempt FROM idempotency.claim_stalled() ORDER BY key;
SELECT status, lease_until > now() AS leased FROM idempotency.registry WHERE key = 't10';
SELECT idempotency.idempotent_finish('t10', '{"completed": true}',
	attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 't10'));

-- a deferred claim cannot serve work outside the database
SELECT outcome FROM idempotency.idempotent_begin('t11', defer_claim => true, external => true);
-- NULL external
SELECT outcome FROM idempotency.idempotent_begin('t11', external => NULL);

-- the 2D000 error in a PL/pgSQL EXCEPTION block cannot be caught: it is
-- raised at commit, after the block
DO $$
BEGIN
	PERFORM idempotency.idempotent_begin('t12');
EXCEPTION WHEN invalid_transaction_termination THEN
	RAISE NOTICE 'not reached';
END $$;
SELECT count(*) AS records FROM idempotency.registry WHERE key = 't12';

-- idempotency.commit_rule = lease_is_external keeps 1.0's rule: a written
-- claim taken without external commits unfinished (in autocommit too); a
-- deferred one still holds the commit; it is read when the claim is taken
SELECT boot_val, context, enumvals FROM pg_settings WHERE name = 'idempotency.commit_rule';
SET idempotency.commit_rule = 'lease_is_external';
SELECT outcome FROM idempotency.idempotent_begin('t13', lease => '1 minute');
SELECT status FROM idempotency.registry WHERE key = 't13';
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('t14', defer_claim => true);
\set VERBOSITY sqlstate
COMMIT;
\set VERBOSITY default
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('t15');
SET LOCAL idempotency.commit_rule = 'external_required';
COMMIT;
BEGIN;
SET LOCAL idempotency.commit_rule = 'external_required';
SELECT outcome FROM idempotency.idempotent_begin('t16');
\set VERBOSITY sqlstate
COMMIT;
\set VERBOSITY default
RESET idempotency.commit_rule;
SELECT key, status FROM idempotency.registry WHERE key IN ('t13', 't14', 't15', 't16') ORDER BY key;
SET idempotency.commit_rule = 'sometimes';

DROP TABLE orders_paid;
TRUNCATE idempotency.registry;
RESET search_path;
